package apitypes

import (
	"encoding/json"
	"time"
)

// Codex supervision (docs/rules/codex-supervision.md): the fleet catalog of native Codex
// threads, their transcript pages, and the supervised run a thread is
// continued in.

// Catalog row states (R-CX-SCOPE-8). "error" is Codex's systemError.
const (
	CodexStateIdle      = "idle"
	CodexStateActive    = "active"
	CodexStateNotLoaded = "notLoaded"
	CodexStateError     = "error"
)

// CodexThread is one catalog row: exactly the projection of R-CX-PROJ-1
// (ids, title, cwd, state, active-wait flags, timestamps, source, model
// provider, Codex version, Git branch) and nothing else (R-CX-PROJ-2: no
// preview, turns, rollout or home path, remote, SHA or raw error).
type CodexThread struct {
	ThreadID string `json:"thread_id"`
	// Title is the thread's user-facing name; null when Codex has none (the
	// preview, the first user message, is never shown in its place).
	Title *string `json:"title"`
	Cwd   string  `json:"cwd"`
	// State is idle, active, notLoaded or error. notLoaded is unknown
	// activity (R-CX-CONN-6); it is never "offline" (R-CX-HOST-2).
	State string `json:"state"`
	// ActiveFlags are waitingOnApproval and waitingOnUserInput while active.
	ActiveFlags   []string  `json:"active_flags"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	Source        string    `json:"source"`
	ModelProvider string    `json:"model_provider"`
	CodexVersion  string    `json:"codex_version"`
	GitBranch     string    `json:"git_branch,omitempty"`
	// SupervisedRun is the run of this node that continues the thread, when
	// one exists: continue opens it again (R-CX-CONT-2, R-CX-SCOPE-5).
	SupervisedRun string `json:"supervised_run,omitempty"`
	// LeaseHolder is who holds the thread's write lease on this node right
	// now (a run, or an archive in flight): the thread is busy.
	LeaseHolder string `json:"lease_holder,omitempty"`
}

// CodexHostError is a host's failure, kept inside its own result
// (R-CX-HOST-1). Message is a sentence of ours, never Codex's raw text.
type CodexHostError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// CodexHost is one host's part of a catalog page, under its stable identity
// (the node id, R-CX-SCOPE-2). A host with Error has no rows (R-CX-HOST-2).
type CodexHost struct {
	Host     string        `json:"host"`
	Hostname string        `json:"hostname"`
	Rows     []CodexThread `json:"rows"`
	// NextCursor continues this host's scan (R-CX-SRCH-3); it is only
	// valid with this host.
	NextCursor string          `json:"next_cursor,omitempty"`
	Error      *CodexHostError `json:"error,omitempty"`
}

// CodexCatalog is GET /catalog/codex/threads.
type CodexCatalog struct {
	Hosts []CodexHost `json:"hosts"`
}

// CodexTurnsPage is GET /catalog/codex/threads/{host}/{thread}/turns: one
// App Server turn page as Codex returned it (at most 20 turns, items
// "full", newest first) and its opaque cursors (R-CX-PROJ-3, R-CX-TRN-2).
// NextCursor leads to older turns, BackwardsCursor to newer ones.
type CodexTurnsPage struct {
	Host            string          `json:"host"`
	ThreadID        string          `json:"thread_id"`
	Turns           json.RawMessage `json:"turns"`
	NextCursor      string          `json:"next_cursor,omitempty"`
	BackwardsCursor string          `json:"backwards_cursor,omitempty"`
}

// CodexPageTooLarge is the body of a refused turn page (R-CX-TRN-5/6): the
// error, and the cursors around the refused page so that a client can show
// a placeholder and go on; the cursor it sent stays valid.
type CodexPageTooLarge struct {
	Error           *CodexHostError `json:"error"`
	NextCursor      string          `json:"next_cursor,omitempty"`
	BackwardsCursor string          `json:"backwards_cursor,omitempty"`
}

// CodexArchiveRequest is POST .../archive (R-CX-ARC-1).
type CodexArchiveRequest struct {
	ConfirmNoOtherRunner bool `json:"confirmNoOtherRunner"`
}

// CodexArchived answers a confirmed archive once Codex accepted it
// (R-CX-ARC-2).
type CodexArchived struct {
	Host     string `json:"host"`
	ThreadID string `json:"thread_id"`
	Archived bool   `json:"archived"`
}

// Codex binding states.
const (
	// CodexBranchPending: the run mirrors the source's visible history; no
	// canonical thread exists yet (R-CX-FT-5).
	CodexBranchPending = "pending"
	// CodexBranchCommitted: the first turn created the canonical thread.
	CodexBranchCommitted = "committed"
)

// CodexBinding is on a supervised run's row: the native thread it is bound
// to. While ModelLocked the run refuses model changes, reset and deletion
// (R-CX-LOCK-1): DELETE /runs/{ref} answers 409 for it.
type CodexBinding struct {
	SourceHost     string `json:"source_host"`
	SourceThreadID string `json:"source_thread_id"`
	State          string `json:"state"` // pending | committed
	// CanonicalThreadID is the branch's own Codex thread, from the first
	// turn on (R-CX-FT-3); Model and ModelProvider are the pair Codex chose
	// for it at the fork (R-CX-MOD-1).
	CanonicalThreadID string `json:"canonical_thread_id,omitempty"`
	Model             string `json:"model,omitempty"`
	ModelProvider     string `json:"model_provider,omitempty"`
	ModelLocked       bool   `json:"model_locked"`
	// LastError says why the last attempt to create the canonical thread
	// failed; the branch stays pending and the next input retries
	// (R-CX-FT-7).
	LastError string `json:"last_error,omitempty"`
}

// CodexMessage is one message of a branch's visible history (R-CX-HIST-*).
type CodexMessage struct {
	Role string `json:"role"` // user | assistant
	Text string `json:"text"`
}

// CodexBranch is GET /runs/{ref}/codex-branch: the supervised run's binding
// and the bounded visible history it was created with (R-CX-FT-5).
type CodexBranch struct {
	RunRef  string         `json:"run_ref"`
	Binding CodexBinding   `json:"binding"`
	History []CodexMessage `json:"history"`
}
