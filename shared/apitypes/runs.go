package apitypes

import (
	"encoding/json"
	"time"
)

// Run states (R-STATE-3). The state is derived, never stored as a free field
// (R-STATE-1): agents compute it from process facts and the lifecycle ledger
// and the index only caches the last derivation.
const (
	StateReleased        = "released"
	StatePendingApproval = "pending_approval"
	StateStarting        = "starting"
	StateRunning         = "running"
	StateIdle            = "idle"
	StateFailed          = "failed"
	StateStopped         = "stopped"
)

// States lists the enum in precedence order (R-STATE-3).
var States = []string{StateReleased, StatePendingApproval, StateStarting, StateRunning, StateIdle, StateFailed, StateStopped}

// Live reports whether state is a live one (R-STATE-5).
func Live(state string) bool {
	return state == StateStarting || state == StateRunning || state == StateIdle
}

// Failure reasons (the run's reason field when state is failed).
const (
	ReasonProcessLost      = "process_lost"     // R-STATE-6
	ReasonSpawnFailed      = "spawn_failed"     // the child could not be started
	ReasonHandshakeFailed  = "handshake_failed" // the tool refused the protocol handshake
	ReasonExitNonZero      = "exit_nonzero"     // a non-zero exit not caused by an operator stop
	ReasonSignal           = "signal"           // an unrequested signal ended it
	ReasonConversationGone = "conversation_unavailable"
)

// Isolation values (POST /runs).
const (
	IsolationNative    = "native"
	IsolationContainer = "container"
	IsolationSandbox   = "sandbox"
)

// Limit is R-LIM-1's field.
type Limit struct {
	Kind       string     `json:"kind"` // usage | rate
	ResetsAt   *time.Time `json:"resets_at,omitempty"`
	AccountRef string     `json:"account_ref"`
}

// Run is the run object (REQUIREMENTS §2.0.1). Every route that answers
// "run" answers this, exactly as GET /runs/{ref} does (R-API-6).
type Run struct {
	RunRef string `json:"run_ref"`
	Tenant string `json:"tenant"`
	NodeID string `json:"node_id"`
	// NodeReachable is present, and false, only while the node has no live
	// tunnel: State is then the last one the agent reported (R-STATE-7).
	NodeReachable *bool `json:"node_reachable,omitempty"`

	State string `json:"state"`
	// ExitCode is the observed exit code of the last generation, null until
	// one is observed and when a signal ended it (R-EXIT-1..4). There is no
	// success field (R-GET-1, R-EXIT-2).
	ExitCode *int   `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	Reason   string `json:"reason,omitempty"`

	Driver             string `json:"driver"`
	Generation         uint32 `json:"generation"`
	PID                int    `json:"pid,omitempty"`
	Isolation          string `json:"isolation"`
	ProviderProfileRef string `json:"provider_profile_ref"`
	WorkspaceRef       string `json:"workspace_ref,omitempty"`
	WorkspacePath      string `json:"workspace_path,omitempty"`
	WorktreeBranch     string `json:"worktree_branch,omitempty"`
	TemplateRef        string `json:"template_ref,omitempty"`
	ConversationID     string `json:"conversation_id,omitempty"`
	// ClaudeSessionID is the legacy name of a Claude run's conversation id.
	ClaudeSessionID string `json:"claude_session_id,omitempty"`
	// LiveRef names the live-process row (run_ref.generation) while live.
	LiveRef   string `json:"live_ref,omitempty"`
	Name      string `json:"name,omitempty"`
	HandoffOf string `json:"handoff_of,omitempty"`
	Limit     *Limit `json:"limit,omitempty"`
	// CodexBinding is set on a Codex supervision run (R-CX-CONT-*); while
	// it is model-locked the run refuses deletion (R-CX-LOCK-1).
	CodexBinding *CodexBinding `json:"codex_binding,omitempty"`

	// Per-caller marks (R-GET-3); filled by the coordinator per request.
	Pinned       bool       `json:"pinned"`
	PinnedAt     *time.Time `json:"pinned_at,omitempty"`
	SnoozedUntil *time.Time `json:"snoozed_until,omitempty"`
	Done         bool       `json:"done"`
	ArchivedAt   *time.Time `json:"archived_at,omitempty"`

	// Ring is the retained output seq range (first, last); zero when empty.
	RingFirst uint64 `json:"ring_first_seq,omitempty"`
	RingLast  uint64 `json:"ring_last_seq,omitempty"`

	CreatedAt time.Time  `json:"created_at"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// Rev increases with every change the agent makes to the row, so the
	// index keeps the newest one whatever order pushes arrive in.
	Rev uint64 `json:"rev"`
}

// RunList is GET /runs.
type RunList struct {
	Items []Run  `json:"items"`
	Next  string `json:"next,omitempty"`
}

// LaunchRequest is POST /runs (R-CRT-*, Q-08).
type LaunchRequest struct {
	WorkspaceRef       string `json:"workspace_ref,omitempty"`
	ProviderProfileRef string `json:"provider_profile_ref"`
	Worktree           *bool  `json:"worktree,omitempty"`
	WorktreeFrom       string `json:"worktree_from,omitempty"`
	NoSetup            bool   `json:"no_setup,omitempty"`
	TemplateRef        string `json:"template_ref,omitempty"`
	Isolation          string `json:"isolation,omitempty"`
	Name               string `json:"name,omitempty"`
}

// InputRequest is POST /runs/{ref}/input (R-IN-2): exactly one field.
type InputRequest struct {
	Line    json.RawMessage `json:"line,omitempty"`
	Message json.RawMessage `json:"message,omitempty"`
	Text    *string         `json:"text,omitempty"`
}

// Accepted answers input and interrupt (202).
type Accepted struct {
	Accepted bool `json:"accepted"`
}

// Event is one lifecycle ledger row (GET /runs/{ref}/events, R-EVT-*).
type Event struct {
	Seq        uint64          `json:"seq"`
	At         time.Time       `json:"at"`
	Kind       string          `json:"kind"`
	Generation uint32          `json:"generation"`
	PID        int             `json:"pid,omitempty"`
	ExitCode   *int            `json:"exit_code,omitempty"`
	Signal     string          `json:"signal,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Detail     json.RawMessage `json:"detail,omitempty"`
}

// EventList is GET /runs/{ref}/events.
type EventList struct {
	Items []Event `json:"items"`
	Next  string  `json:"next,omitempty"`
}

// SSE event names of GET /runs/{ref}/attach (R-ATT-4).
const (
	SSEOutput         = "output"
	SSELag            = "lag"
	SSEEnd            = "end"
	SSENotice         = "notice"
	SSEOlivaresNotice = "olivares_notice"
)

// Output is an output event's data (R-ATT-4).
type Output struct {
	Seq        uint64    `json:"seq"`
	Generation uint32    `json:"generation"`
	Stream     string    `json:"stream"` // stdout | stderr | pty
	At         time.Time `json:"at"`
	Data       string    `json:"data"`
	Encoding   string    `json:"encoding"` // utf8 | base64
}

// Lag is a lag event's data (R-RC-5).
type Lag struct {
	RequestedFrom uint64 `json:"requested_from"`
	ResumedFrom   uint64 `json:"resumed_from"`
}

// Notice is a notice event's data: the run is not live (R-ATT-6).
type Notice struct {
	Kind  string `json:"kind"` // not_live
	State string `json:"state"`
}

// End is an end event's data: the generation exited and all its frames
// were delivered (R-RC-9), or the viewer was dropped (Reason slow_viewer).
type End struct {
	Generation uint32 `json:"generation"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	Signal     string `json:"signal,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// Profile is a provider profile: one account/config home of one tool on one
// node. Env values stay on the agent; only their names are shown.
type Profile struct {
	Ref       string    `json:"ref"`
	Tenant    string    `json:"tenant"`
	NodeID    string    `json:"node_id"`
	Tool      string    `json:"tool"`
	Name      string    `json:"name"`
	Home      string    `json:"home"`
	EnvKeys   []string  `json:"env_keys,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// ProfileCreate is POST /profiles.
type ProfileCreate struct {
	NodeID string            `json:"node_id"`
	Tool   string            `json:"tool"`
	Name   string            `json:"name"`
	Home   string            `json:"home,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
}

// ProfileList is GET /profiles.
type ProfileList struct {
	Items []Profile `json:"items"`
}

// Workspace is a registered directory on a node.
type Workspace struct {
	Ref       string    `json:"ref"`
	Tenant    string    `json:"tenant"`
	NodeID    string    `json:"node_id"`
	Name      string    `json:"name"`
	Path      string    `json:"path"`
	CreatedAt time.Time `json:"created_at"`
}

// WorkspaceCreate is POST /workspaces.
type WorkspaceCreate struct {
	NodeID string `json:"node_id"`
	Path   string `json:"path"`
	Name   string `json:"name"`
}

// WorkspaceList is GET /workspaces.
type WorkspaceList struct {
	Items []Workspace `json:"items"`
}
