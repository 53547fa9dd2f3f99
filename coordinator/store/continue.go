package store

import (
	"context"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// ContinueSchedule is a run's scheduled continue at its limit's reset
// (docs/rules/usage.md, R-CONT-*), kept in the run's meta so that it
// survives a coordinator restart and every replica sees it.
type ContinueSchedule struct {
	// At is when to continue: the reset plus jitter, or a backoff.
	At time.Time `json:"at"`
	// Message is what to send once the conversation is back.
	Message string `json:"message"`
	// Attempts counts the continues that met the limit again.
	Attempts int `json:"attempts,omitempty"`
	// Generation, ProfileRef, NodeID and Live are the run as it was when
	// scheduled (or last continued): a run resumed, moved, reassigned or
	// stopped since is not continued (R-CONT-4).
	Generation uint32 `json:"generation"`
	ProfileRef string `json:"profile_ref"`
	NodeID     string `json:"node_id"`
	Live       bool   `json:"live,omitempty"`
	// Actor is who scheduled it; the continue is audited as theirs.
	Actor apitypes.AuditActor `json:"actor"`
	// FiredAt is set once the message was sent: the schedule then waits
	// for the turn's outcome (R-CONT-5) until it is settled.
	FiredAt *time.Time `json:"fired_at,omitempty"`
	// ClaimedUntil is a replica's claim while it continues the run: the
	// others leave it alone until then (R-CONT-6).
	ClaimedUntil time.Time `json:"claimed_until,omitempty"`
	// Plan is what is left of a profile's on_limit plan to try when the
	// schedule is due (R-ONL-3); empty for a plain continue at the reset.
	Plan []string `json:"plan,omitempty"`
	// Moved: an on_limit move took the run off its limit, so it continues
	// now on the new account although the limit is gone (R-ONL-4).
	Moved bool `json:"moved,omitempty"`
}

// Continuer lists the scheduled continues (R-CONT-6). Both stores
// implement it.
type Continuer interface {
	// ListContinues returns the metas that hold a schedule, across
	// tenants, ordered by run ref.
	ListContinues(ctx context.Context) ([]RunMeta, error)
}
