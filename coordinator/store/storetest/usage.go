package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Per-turn usage rows (docs/rules/usage.md).

func usageRow(run string, seq uint64, tenant, profile string, at time.Time, in int64) apitypes.UsageTurn {
	cost := 0.25
	return apitypes.UsageTurn{RunRef: run, Seq: seq, Turn: seq, Tenant: tenant, NodeID: "n1", Tool: "claude", ProfileRef: profile,
		Model: "m", Generation: 1, At: at, InputTokens: in, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4,
		CostUSD: &cost, RateLimits: []apitypes.RateWindow{{Name: "primary", UsedPercent: 42}}}
}

func usageKeys(rows []apitypes.UsageTurn) []string {
	var out []string
	for _, u := range rows {
		out = append(out, fmt.Sprintf("%s#%d", u.RunRef, u.Seq))
	}
	return out
}

// R-USE-6: a row is stored once whatever the pushes; ranges and tenants
// select; rows come back whole and oldest first.
func testUsagePutList(t *testing.T, s store.Store) {
	ctx := t.Context()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rows := []apitypes.UsageTurn{
		usageRow("r-2", 1, "t1", "p1", t0.Add(time.Hour), 10),
		usageRow("r-1", 1, "t1", "p1", t0, 11),
		usageRow("r-1", 2, "t1", "p2", t0.Add(2*time.Hour), 12),
		usageRow("r-9", 1, "t2", "p9", t0, 13),
	}
	if err := s.PutUsage(ctx, rows); err != nil {
		t.Fatalf("PutUsage: %v", err)
	}
	// A repeated push, with a changed figure, changes nothing.
	again := rows[1]
	again.InputTokens = 999
	if err := s.PutUsage(ctx, []apitypes.UsageTurn{again}); err != nil {
		t.Fatalf("PutUsage(again): %v", err)
	}
	for _, tc := range []struct {
		q    store.UsageQuery
		want []string
	}{
		{store.UsageQuery{Tenant: "t1"}, []string{"r-1#1", "r-2#1", "r-1#2"}},
		{store.UsageQuery{Tenant: "t1", From: t0.Add(time.Hour)}, []string{"r-2#1", "r-1#2"}},
		{store.UsageQuery{Tenant: "t1", To: t0.Add(time.Hour)}, []string{"r-1#1"}},
		{store.UsageQuery{Tenant: "t1", From: t0.Add(time.Minute), To: t0.Add(2 * time.Hour)}, []string{"r-2#1"}},
		{store.UsageQuery{Tenant: "t2"}, []string{"r-9#1"}},
		{store.UsageQuery{Tenant: "t3"}, nil},
	} {
		got, err := s.ListUsage(ctx, tc.q)
		if err != nil {
			t.Fatalf("ListUsage(%+v): %v", tc.q, err)
		}
		if fmt.Sprint(usageKeys(got)) != fmt.Sprint(tc.want) {
			t.Errorf("ListUsage(%+v): got %v, want %v", tc.q, usageKeys(got), tc.want)
		}
		if got == nil {
			t.Errorf("ListUsage(%+v): got nil, want an empty list", tc.q)
		}
	}
	got, _ := s.ListUsage(ctx, store.UsageQuery{Tenant: "t1", To: t0.Add(time.Minute)})
	if len(got) != 1 {
		t.Fatalf("ListUsage: got %d rows, want 1", len(got))
	}
	got[0].At = got[0].At.UTC()
	assertEqual(t, "usage row", got[0], rows[1])
}

// R-USE-5: each profile's newest row, per tenant.
func testUsageLatest(t *testing.T, s store.Store) {
	ctx := t.Context()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if err := s.PutUsage(ctx, []apitypes.UsageTurn{
		usageRow("r-1", 1, "t1", "p1", t0.Add(time.Hour), 1),
		usageRow("r-2", 1, "t1", "p1", t0, 2),
		usageRow("r-3", 1, "t1", "p2", t0, 3),
		usageRow("r-3", 2, "t1", "p2", t0, 4),
		usageRow("r-9", 1, "t2", "p9", t0, 5),
	}); err != nil {
		t.Fatalf("PutUsage: %v", err)
	}
	// An older row pushed late does not replace the newest.
	if err := s.PutUsage(ctx, []apitypes.UsageTurn{usageRow("r-0", 1, "t1", "p1", t0.Add(-time.Hour), 6)}); err != nil {
		t.Fatalf("PutUsage: %v", err)
	}
	got, err := s.LatestAccountUsage(ctx, "t1")
	if err != nil {
		t.Fatalf("LatestAccountUsage: %v", err)
	}
	if want := []string{"r-1#1", "r-3#2"}; fmt.Sprint(usageKeys(got)) != fmt.Sprint(want) {
		t.Errorf("LatestAccountUsage: got %v, want %v", usageKeys(got), want)
	}
}

// Bad rows are refused whole: nothing of the push is written.
func testUsageRefused(t *testing.T, s store.Store) {
	ctx := t.Context()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	err := s.PutUsage(ctx, []apitypes.UsageTurn{usageRow("r-1", 1, "t1", "p1", t0, 1), usageRow("r-2", 0, "t1", "p1", t0, 1)})
	if err == nil {
		t.Fatal("PutUsage(seq 0): got nil, want an error")
	}
	if got, _ := s.ListUsage(ctx, store.UsageQuery{Tenant: "t1"}); len(got) != 0 {
		t.Errorf("after a refused push: got %v, want no rows", usageKeys(got))
	}
}

// R-USE-6 with issue 34: a push's rows and usage rows go in one
// PutRuns; both are stored, a repeat changes nothing, and a bad usage row
// refuses the whole push, run rows included.
func testUsageWithRuns(t *testing.T, s store.Store) {
	ctx := t.Context()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r := fullRun("r-1", "t1")
	wrote, refused, err := s.PutRuns(ctx, []apitypes.Run{r}, usageRow("r-1", 1, "t1", "p1", t0, 1), usageRow("r-1", 2, "t1", "p1", t0, 2))
	if err != nil || wrote != 1 || len(refused) != 0 {
		t.Fatalf("PutRuns with usage: wrote %d refused %v err %v, want 1 written", wrote, refused, err)
	}
	r.Rev++
	if _, _, err := s.PutRuns(ctx, []apitypes.Run{r}, usageRow("r-1", 2, "t1", "p1", t0, 99)); err != nil {
		t.Fatalf("PutRuns with a repeated usage row: %v", err)
	}
	got, err := s.ListUsage(ctx, store.UsageQuery{Tenant: "t1"})
	if err != nil || fmt.Sprint(usageKeys(got)) != "[r-1#1 r-1#2]" || got[1].InputTokens != 2 {
		t.Fatalf("usage after two pushes: %v %v, want r-1#1 and r-1#2 stored once", usageKeys(got), err)
	}
	bad := fullRun("r-2", "t1")
	if _, _, err := s.PutRuns(ctx, []apitypes.Run{bad}, usageRow("r-2", 0, "t1", "p1", t0, 1)); err == nil {
		t.Fatal("PutRuns with a usage row of seq 0: got nil, want an error")
	}
	if _, err := s.GetRun(ctx, "r-2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the run of a refused push: %v, want not stored", err)
	}
}

// R-CONT-6: a schedule lives in the run's meta; ListContinues finds the
// scheduled runs of every tenant, and a cleared one is gone.
func testContinueList(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutRun(t, s, fullRun("r-1", "t1"))
	mustPutRun(t, s, fullRun("r-2", "t2"))
	mustPutRun(t, s, fullRun("r-3", "t1"))
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	set := func(ref string, c *store.ContinueSchedule) {
		t.Helper()
		if _, err := s.UpdateRunMeta(ctx, ref, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
			m.Continue = c
			return nil, nil
		}); err != nil {
			t.Fatalf("UpdateRunMeta(%s): %v", ref, err)
		}
	}
	want := &store.ContinueSchedule{At: at, Message: "continue", Attempts: 1, Generation: 2, ProfileRef: "p1", NodeID: "n1", Live: true,
		Actor: apitypes.AuditActor{CredentialID: "c1", Kind: apitypes.ActorHuman}}
	set("r-2", want)
	set("r-1", &store.ContinueSchedule{At: at, Message: "go on"})
	set("r-3", nil)
	list := func() []string {
		t.Helper()
		ms, err := s.ListContinues(ctx)
		if err != nil {
			t.Fatalf("ListContinues: %v", err)
		}
		var refs []string
		for _, m := range ms {
			refs = append(refs, m.RunRef)
			if m.RunRef == "r-2" {
				m.Continue.At = m.Continue.At.UTC()
				assertEqual(t, "schedule", *m.Continue, *want)
			}
		}
		return refs
	}
	if got := list(); fmt.Sprint(got) != "[r-1 r-2]" {
		t.Errorf("ListContinues: got %v, want [r-1 r-2]", got)
	}
	set("r-1", nil)
	if got := list(); fmt.Sprint(got) != "[r-2]" {
		t.Errorf("ListContinues after a clear: got %v, want [r-2]", got)
	}
}
