package store

import (
	"context"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Usager keeps the per-turn usage rows agents push (docs/rules/usage.md).
// Both stores implement it; storetest checks them.
type Usager interface {
	// PutUsage stores each row whose (RunRef, Seq) is not stored yet and
	// leaves a stored one as it is: a repeated push is a no-op (R-USE-6).
	PutUsage(ctx context.Context, rows []apitypes.UsageTurn) error
	// ListUsage returns q.Tenant's rows with From <= At < To (a zero bound
	// is open), oldest first (At, then RunRef, then Seq).
	ListUsage(ctx context.Context, q UsageQuery) ([]apitypes.UsageTurn, error)
	// LatestAccountUsage returns, per profile of tenant, its newest row
	// (greatest At, then RunRef, then Seq), ordered by profile ref: the
	// account's latest rate-limit report (R-USE-5).
	LatestAccountUsage(ctx context.Context, tenant string) ([]apitypes.UsageTurn, error)
}

// UsageQuery selects usage rows.
type UsageQuery struct {
	Tenant   string
	From, To time.Time
}

// In reports whether at falls in q's range.
func (q UsageQuery) In(at time.Time) bool {
	return (q.From.IsZero() || !at.Before(q.From)) && (q.To.IsZero() || at.Before(q.To))
}
