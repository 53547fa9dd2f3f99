package proto

import "github.com/olivares-dev/olivares/shared/apitypes"

// Claude Code supervision ops (docs/rules/claude-supervision.md),
// coordinator→agent.
const (
	// OpClaudeSessions lists one catalog page of the node:
	// ClaudeSessionsList → apitypes.ClaudeHost.
	OpClaudeSessions = "claude.sessions.list.v1"
	// OpClaudeMessages reads one transcript page: ClaudeSessionRef (with
	// Query) → apitypes.MessagesPage, or apitypes.MessageRead for id=.
	OpClaudeMessages = "claude.session.messages.v1"
	// OpClaudeContinue: ClaudeSessionRef (with RunRef and Tenant) →
	// ClaudeContinued.
	OpClaudeContinue = "claude.session.continue.v1"
)

// ClaudeSupervision is the node capability (R-CL-PERM-1): set only when
// the node's own config enables it.
type ClaudeSupervision struct {
	// Homes is how many homes the node lists (user homes and profile
	// homes) when it connected.
	Homes int `json:"homes"`
}

// ClaudeSessionsList asks for one catalog page of the node.
type ClaudeSessionsList struct {
	Search string `json:"search,omitempty"`
	Limit  int    `json:"limit"`
	Cursor string `json:"cursor,omitempty"`
}

// ClaudeSessionRef names a stored conversation of the node. Query is a
// messages query string (R-MSG-3..16); RunRef and Tenant are the run a
// continue creates.
type ClaudeSessionRef struct {
	SessionID string `json:"session_id"`
	Query     string `json:"query,omitempty"`
	RunRef    string `json:"run_ref,omitempty"`
	Tenant    string `json:"tenant,omitempty"`
}

// ClaudeContinued answers OpClaudeContinue: the new supervised run and the
// conversation's title (the run is named after it).
type ClaudeContinued struct {
	Run   apitypes.Run `json:"run"`
	Title string       `json:"title,omitempty"`
}
