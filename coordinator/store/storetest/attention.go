package storetest

import (
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// testRunListAttention pins R-ATTN-2 and R-ATTN-4 in the store: the attention
// filter derives each row's reason at the query's instant, with the same
// precedence as apitypes.AttentionOf, combines with the other filters and
// both paging modes, and a limit whose reset has passed is not "limited".
func testRunListAttention(t *testing.T, s store.Store) {
	now := t0.Add(10 * time.Hour)
	ptr := func(ts time.Time) *time.Time { return &ts }
	type row struct {
		ref, state string
		pending    int
		limit      *apitypes.Limit
		lastErr    bool
		stalled    bool
	}
	rows := []row{
		{ref: "a-decision", state: apitypes.StateRunning, pending: 2},
		{ref: "a-approval", state: apitypes.StatePendingApproval},
		{ref: "a-limited", state: apitypes.StateFailed, limit: &apitypes.Limit{Kind: "usage", ResetsAt: ptr(now.Add(time.Hour)), AccountRef: "p"}},
		{ref: "a-limit-no-reset", state: apitypes.StateIdle, limit: &apitypes.Limit{Kind: "rate", AccountRef: "p"}},
		{ref: "a-limit-past", state: apitypes.StateStopped, limit: &apitypes.Limit{Kind: "usage", ResetsAt: ptr(now.Add(-time.Minute)), AccountRef: "p"}},
		{ref: "a-failed", state: apitypes.StateFailed},
		{ref: "a-idle-error", state: apitypes.StateIdle, lastErr: true},
		{ref: "a-idle", state: apitypes.StateIdle},
		{ref: "a-running", state: apitypes.StateRunning},
		{ref: "a-running-error", state: apitypes.StateRunning, lastErr: true},
		{ref: "a-stopped", state: apitypes.StateStopped},
		// R-ATTN-6: a running turn that wrote nothing for stall_after;
		// stalled_since left on a run no longer running counts for nothing.
		{ref: "a-stalled", state: apitypes.StateRunning, stalled: true},
		{ref: "a-stalled-idle", state: apitypes.StateStopped, stalled: true},
		{ref: "a-released", state: apitypes.StateReleased, pending: 1},
	}
	for i, f := range rows {
		r := newRun(f.ref, "t1", i)
		r.State, r.PendingRequests, r.Limit = f.state, f.pending, f.limit
		if f.lastErr {
			r.LastError = &apitypes.LastError{Kind: "provider", Message: "overloaded", At: t0}
		}
		if f.stalled {
			r.StalledSince = ptr(now.Add(-time.Minute))
		}
		if f.ref == "a-idle" {
			r.Driver = "codex"
		}
		mustPutRun(t, s, r)
	}
	other := newRun("a-other-tenant", "t2", 30)
	other.State = apitypes.StateIdle
	mustPutRun(t, s, other)

	for _, tt := range []struct {
		name string
		q    store.RunQuery
		want []string
	}{
		{"any", store.RunQuery{Attention: "any"}, []string{"a-stalled", "a-idle", "a-idle-error", "a-failed", "a-limit-no-reset", "a-limited", "a-approval", "a-decision"}},
		{"stalled", store.RunQuery{Attention: apitypes.AttentionStalled}, []string{"a-stalled"}},
		{"needs_decision", store.RunQuery{Attention: apitypes.AttentionNeedsDecision}, []string{"a-decision"}},
		{"needs_approval", store.RunQuery{Attention: apitypes.AttentionNeedsApproval}, []string{"a-approval"}},
		{"limited", store.RunQuery{Attention: apitypes.AttentionLimited}, []string{"a-limit-no-reset", "a-limited"}},
		{"failed", store.RunQuery{Attention: apitypes.AttentionFailed}, []string{"a-idle-error", "a-failed"}},
		{"needs_input", store.RunQuery{Attention: apitypes.AttentionNeedsInput}, []string{"a-idle"}},
		{"needs_input and driver", store.RunQuery{Attention: apitypes.AttentionNeedsInput, Driver: "claude"}, nil},
		{"any and state", store.RunQuery{Attention: "any", State: apitypes.StateFailed}, []string{"a-failed", "a-limited"}},
		{"unknown reason", store.RunQuery{Attention: "bored"}, nil},
	} {
		q := tt.q
		q.Tenant, q.Now = "t1", now
		got, _ := listRefs(t, s, q)
		assertEqual(t, "ListRuns("+tt.name+")", got, tt.want)
		assertEqual(t, "cursor pages("+tt.name+")", pageAll(t, s, withLimit(q, 2)), tt.want)
		// The store agrees with the pure derivation row by row.
		runs, _, err := s.ListRuns(t.Context(), store.RunQuery{Tenant: "t1", Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		var derived []string
		for _, r := range runs {
			if apitypes.AttentionMatches(q.Attention, apitypes.AttentionOf(r, now)) && q.Matches(r) {
				derived = append(derived, r.RunRef)
			}
		}
		assertEqual(t, "AttentionOf("+tt.name+")", derived, tt.want)
	}
}
