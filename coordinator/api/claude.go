package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Claude Code supervision routes (docs/rules/claude-supervision.md), in the
// shape of the Codex ones: the fleet catalog of stored Claude Code
// conversations, their transcript pages, and continue. Every answer comes
// from the node that holds the conversation.

// claudeAPI serves the Claude Code session catalog (R-CL).
type claudeAPI struct{ catalog }

func (s *claudeAPI) routes() []Route {
	const base = Base + "/catalog/claude/sessions"
	return []Route{
		// R-CL-PERM-2: listing and transcripts invoke nodes and show
		// transcript text, so they need write; continue also needs a
		// person.
		{http.MethodGet, base, auth.PermRunWrite, s.claudeSessions, query("search", "host", "limit", "cursor")},
		{http.MethodGet, base + "/:host/:session/messages", auth.PermRunWrite, s.claudeMessages, messagesQuery},
		{http.MethodPost, base + "/:host/:session/continue", auth.PermRunWrite, s.claudeContinue, nil},
	}
}

// claudeHost reports whether the node advertises Claude Code supervision.
func claudeHost(n store.Node) bool {
	var caps struct {
		ClaudeSupervision *proto.ClaudeSupervision `json:"claude_supervision"`
	}
	return json.Unmarshal(n.Capabilities, &caps) == nil && caps.ClaudeSupervision != nil
}

func (s *claudeAPI) claudeSessions(c echo.Context) error {
	q, err := s.query(c)
	if err != nil {
		return err
	}
	p := proto.ClaudeSessionsList{Search: q.search, Limit: q.limit, Cursor: q.cursor}
	fail := func(n store.Node, code, msg string) apitypes.ClaudeHost {
		return apitypes.ClaudeHost{Host: n.ID, Hostname: n.Hostname, Rows: []apitypes.ClaudeSession{}, Error: &apitypes.CodexHostError{Code: code, Message: msg}}
	}
	hosts, err := hostPages(c.Request().Context(), s.core, q, fail, func(ctx context.Context, n store.Node) (apitypes.ClaudeHost, error) {
		var h apitypes.ClaudeHost
		err := s.o.Fleet.Call(ctx, n.ID, wire.Header{Op: proto.OpClaudeSessions}, p, &h)
		h.Host, h.Hostname = n.ID, n.Hostname
		if h.Rows == nil {
			h.Rows = []apitypes.ClaudeSession{}
		}
		return h, err
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apitypes.ClaudeCatalog{Hosts: hosts})
}

func (s *claudeAPI) claudeMessages(c echo.Context) error {
	n, id, err := s.conversation(c)
	if err != nil {
		return err
	}
	var out json.RawMessage
	if err := s.call(c.Request().Context(), n.ID, wire.Header{Op: proto.OpClaudeMessages},
		proto.ClaudeSessionRef{SessionID: id, Query: c.Request().URL.RawQuery}, &out); err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, out)
}

func (s *claudeAPI) claudeContinue(c echo.Context) error {
	var out proto.ClaudeContinued
	n, id, err := s.continueCall(c, proto.OpClaudeContinue, func(id, ref, tenant string) any {
		return proto.ClaudeSessionRef{SessionID: id, RunRef: ref, Tenant: tenant}
	}, &out)
	if err != nil {
		return err
	}
	// The run is named after the conversation it continues (R-NAME-4).
	name := "claude " + id
	if out.Title != "" {
		name = "claude: " + out.Title
	}
	return s.continued(c, http.StatusCreated, out.Run, n, name)
}
