package apiclient

import (
	"context"
	"net/http"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// claudeCatalog is the base path of the Claude Code catalog routes.
const claudeCatalog = Base + "/catalog/claude/sessions"

// ClaudeSessions is GET /catalog/claude/sessions: the fleet catalog of
// stored Claude Code conversations, per host (the query's fields as for
// Codex; search also matches directories).
func (c *Client) ClaudeSessions(ctx context.Context, q CodexThreadsQuery) (apitypes.ClaudeCatalog, error) {
	var cat apitypes.ClaudeCatalog
	return cat, c.get(ctx, claudeCatalog, q.Values(), &cat)
}

func sessionPath(host, session, action string) string {
	return claudeCatalog + "/" + esc(host) + "/" + esc(session) + "/" + action
}

// ClaudeMessages is GET /catalog/claude/sessions/{host}/{session}/messages:
// one page of a stored conversation, with the query of Messages.
func (c *Client) ClaudeMessages(ctx context.Context, host, session string, q MessagesQuery) (apitypes.MessagesPage, error) {
	var p apitypes.MessagesPage
	return p, c.get(ctx, sessionPath(host, session, "messages"), q.Values(), &p)
}

// ClaudeContinue is POST /catalog/claude/sessions/{host}/{session}/continue:
// the new supervised run that resumes the conversation.
func (c *Client) ClaudeContinue(ctx context.Context, host, session string) (apitypes.Run, error) {
	var r apitypes.Run
	return r, c.call(ctx, http.MethodPost, sessionPath(host, session, "continue"), struct{}{}, &r)
}
