package apitypes

import "time"

// Claude Code supervision (docs/rules/claude-supervision.md): the fleet
// catalog of native Claude Code conversations and the supervised run one is
// continued in. A host's failure has the Codex catalog's shape
// (CodexHostError).

// ClaudeSession is one catalog row (R-CL-PROJ-1): no home path, no
// transcript text beyond the title.
type ClaudeSession struct {
	SessionID string `json:"session_id"`
	// Title is Claude Code's own: the name a person gave it (/rename), else
	// its generated title or summary, else the first prompt's first line;
	// null when the conversation has none of them.
	Title *string `json:"title"`
	// Cwd is the directory the conversation works in.
	Cwd       string    `json:"cwd"`
	UpdatedAt time.Time `json:"updated_at"`
	SizeBytes int64     `json:"size_bytes"`
	// ProfileRef is the profile whose home holds the conversation; absent
	// for a configured user home.
	ProfileRef string `json:"profile_ref,omitempty"`
	// RunningPID is a live claude process that runs the conversation, as
	// Claude Code's own session file names it (R-CL-RUN-1): continue is
	// refused while it lives.
	RunningPID int `json:"running_pid,omitempty"`
	// LeaseHolder is the run that holds the conversation's lease on this
	// node (R-CL-LEASE-1): open it instead of continuing again.
	LeaseHolder string `json:"lease_holder,omitempty"`
}

// ClaudeHost is one host's part of a catalog page (R-CL-CAT-2). A host with
// Error has no rows.
type ClaudeHost struct {
	Host     string          `json:"host"`
	Hostname string          `json:"hostname"`
	Rows     []ClaudeSession `json:"rows"`
	// NextCursor continues this host's list; it is only valid with this
	// host.
	NextCursor string          `json:"next_cursor,omitempty"`
	Error      *CodexHostError `json:"error,omitempty"`
}

// ClaudeCatalog is GET /catalog/claude/sessions.
type ClaudeCatalog struct {
	Hosts []ClaudeHost `json:"hosts"`
}
