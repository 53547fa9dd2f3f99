package apitypes

import "time"

// Events of GET /v1/m/sessions/events, the fleet-wide change stream
// (R-CHG-1).
const (
	ChangeRun        = "run"
	ChangeRunRemoved = "run_removed"
	ChangeMark       = "mark"
	ChangeNode       = "node"
	ChangeReset      = "reset"
)

// Reset reasons (R-CHG-4): why the client must fetch the list again.
const (
	ResetNew     = "new"     // a stream opened without Last-Event-ID
	ResetExpired = "expired" // the cursor is older than the retained log
	ResetRestart = "restart" // the cursor is another coordinator process's, or malformed
	ResetMissed  = "missed"  // this coordinator may have missed other replicas' changes (R-CHG-5)
)

// ChangeResetEvent is a reset event's data: refetch GET /runs and go on
// from this event's id.
type ChangeResetEvent struct {
	Reason string `json:"reason"`
}

// MarkChange is a mark event's data: the caller's own marks on one run,
// sent only to that caller (R-CHG-2).
type MarkChange struct {
	RunRef       string     `json:"run_ref"`
	Pinned       bool       `json:"pinned"`
	PinnedAt     *time.Time `json:"pinned_at,omitempty"`
	SnoozedUntil *time.Time `json:"snoozed_until,omitempty"`
	Done         bool       `json:"done"`
}

// NodeChange is a node event's data: a node's tunnel came up or went down.
type NodeChange struct {
	NodeID    string    `json:"node_id"`
	Connected bool      `json:"connected"`
	At        time.Time `json:"at"`
}

// RunRemoved is a run_removed event's data: the run was deleted.
type RunRemoved struct {
	RunRef string `json:"run_ref"`
}
