package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/auditchain"
)

// markCases are the conformance cases of store.Marker.
var markCases = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Marks/PinIdempotent", testMarksPinIdempotent},
	{"Marks/PinEviction", testMarksPinEviction},
	{"Marks/PinEvictionClockBehind", testMarksPinEvictionClockBehind},
	{"Marks/OwnersApart", testMarksOwnersApart},
	{"Marks/UnknownRun", testMarksUnknownRun},
	{"Marks/EmptyRemoved", testMarksEmptyRemoved},
	{"Marks/Release", testMarksRelease},
	{"Meta/AuditSameTransaction", testMetaAudit},
	{"Meta/UnknownRun", testMetaUnknownRun},
	{"Delete/RemovesAll", testDeleteRemovesAll},
	{"Delete/Tombstone", testDeleteTombstone},
	{"Audit/Chain", testAuditChain},
	{"Audit/Filters", testAuditFilters},
	{"WorkspaceSettings/AuditSameTransaction", testSettingsAudit},
	{"WorkspaceSettings/Unknown", testSettingsUnknown},
	{"Secret/CRUD", testSecretCRUD},
	{"Audit/Window", testAuditWindow},
}

func ptime(t time.Time) *time.Time { return &t }

func pin(at time.Time) func(*store.Marks) {
	return func(m *store.Marks) {
		if m.PinnedAt == nil {
			m.PinnedAt = ptime(at)
		}
	}
}

func mustMarks(t *testing.T, s store.Store, k store.MarkKey, fn func(*store.Marks)) store.Marks {
	t.Helper()
	m, err := s.UpdateMarks(t.Context(), k, fn)
	if err != nil {
		t.Fatalf("UpdateMarks(%+v): %v", k, err)
	}
	return m
}

func auditEntry(tenant, event, ref string, at time.Time) apitypes.AuditEntry {
	return apitypes.AuditEntry{At: at, Tenant: tenant, Event: event,
		Actor:  apitypes.AuditActor{CredentialID: "cred_a", PrincipalID: "prn_a", Kind: apitypes.ActorHuman},
		Target: apitypes.AuditTarget{RunRef: ref}}
}

func listAudit(t *testing.T, s store.Store, q store.AuditQuery) []apitypes.AuditEntry {
	t.Helper()
	var all []apitypes.AuditEntry
	for range 1000 {
		page, next, err := s.ListAudit(t.Context(), q)
		if err != nil {
			t.Fatalf("ListAudit(%+v): %v", q, err)
		}
		all = append(all, page...)
		if next == "" {
			return all
		}
		q.Cursor = next
	}
	t.Fatal("ListAudit: cursor loop")
	return nil
}

// R-PIN-2: a repeated pin keeps the first pinned_at; unpin clears it.
func testMarksPinIdempotent(t *testing.T, s store.Store) {
	putRuns(t, s, "t1", 1)
	k := store.MarkKey{Tenant: "t1", Owner: "prn:a", RunRef: "t1-r-000"}
	m := mustMarks(t, s, k, pin(t0))
	m2 := mustMarks(t, s, k, pin(t0.Add(time.Hour)))
	if m.PinnedAt == nil || !m2.PinnedAt.Equal(t0) {
		t.Fatalf("pinned_at after a second pin: got %v, want %v", m2.PinnedAt, t0)
	}
	got, err := s.GetMarks(t.Context(), "t1", "prn:a", []string{"t1-r-000", "nope"})
	if err != nil || len(got) != 1 || !got["t1-r-000"].PinnedAt.Equal(t0) {
		t.Fatalf("GetMarks: got %+v, %v", got, err)
	}
	mustMarks(t, s, k, func(m *store.Marks) { m.PinnedAt = nil })
	pins, err := s.PinnedMarks(t.Context(), "t1", "prn:a")
	if err != nil || len(pins) != 0 {
		t.Fatalf("PinnedMarks after unpin: got %+v, %v", pins, err)
	}
}

// R-PIN-3: the 21st pin drops the oldest; PinnedMarks is oldest first.
func testMarksPinEviction(t *testing.T, s store.Store) {
	refs := putRuns(t, s, "t1", store.MaxPins+2)
	// refs is newest first; pin oldest run first, each a minute later.
	for i := range store.MaxPins + 1 {
		ref := refs[len(refs)-1-i]
		mustMarks(t, s, store.MarkKey{Tenant: "t1", Owner: "prn:a", RunRef: ref}, pin(t0.Add(time.Duration(i)*time.Minute)))
	}
	pins, err := s.PinnedMarks(t.Context(), "t1", "prn:a")
	if err != nil {
		t.Fatal(err)
	}
	if len(pins) != store.MaxPins {
		t.Fatalf("pins after %d: got %d, want %d", store.MaxPins+1, len(pins), store.MaxPins)
	}
	if pins[0].RunRef != "t1-r-001" || pins[len(pins)-1].RunRef != fmt.Sprintf("t1-r-%03d", store.MaxPins) {
		t.Fatalf("pins: got first %s last %s, want t1-r-001 and t1-r-%03d", pins[0].RunRef, pins[len(pins)-1].RunRef, store.MaxPins)
	}
	got, _ := s.GetMarks(t.Context(), "t1", "prn:a", []string{"t1-r-000"})
	if len(got) != 0 {
		t.Fatalf("the evicted run still has marks: %+v", got)
	}
	// A done mark survives the eviction of its pin.
	k := store.MarkKey{Tenant: "t1", Owner: "prn:a", RunRef: "t1-r-001"}
	mustMarks(t, s, k, func(m *store.Marks) { m.Done = true })
	mustMarks(t, s, store.MarkKey{Tenant: "t1", Owner: "prn:a", RunRef: refs[0]}, pin(t0.Add(time.Hour)))
	got, _ = s.GetMarks(t.Context(), "t1", "prn:a", []string{"t1-r-001"})
	if m := got["t1-r-001"]; m.PinnedAt != nil || !m.Done {
		t.Fatalf("after eviction of a done run's pin: got %+v, want done and unpinned", m)
	}
}

// R-PIN-3 when the new pin is not the newest (a clock that went back, or a
// coordinator whose clock is behind another's): it is kept, and the oldest
// other pin goes, so the owner still holds MaxPins.
func testMarksPinEvictionClockBehind(t *testing.T, s store.Store) {
	refs := putRuns(t, s, "t1", store.MaxPins+1)
	for i := range store.MaxPins {
		mustMarks(t, s, store.MarkKey{Tenant: "t1", Owner: "prn:a", RunRef: refs[i]}, pin(t0.Add(time.Duration(i+1)*time.Minute)))
	}
	late := refs[store.MaxPins]
	mustMarks(t, s, store.MarkKey{Tenant: "t1", Owner: "prn:a", RunRef: late}, pin(t0))
	pins, err := s.PinnedMarks(t.Context(), "t1", "prn:a")
	if err != nil {
		t.Fatal(err)
	}
	if len(pins) != store.MaxPins {
		t.Fatalf("pins: got %d, want %d", len(pins), store.MaxPins)
	}
	if pins[0].RunRef != late || pins[1].RunRef != refs[1] {
		t.Fatalf("pins: got first %s, second %s; want %s (the new pin) then %s (%s, the oldest other, dropped)", pins[0].RunRef, pins[1].RunRef, late, refs[1], refs[0])
	}
}

// R-PIN-1, R-TEN-5: one owner's marks never show in another's.
func testMarksOwnersApart(t *testing.T, s store.Store) {
	putRuns(t, s, "t1", 1)
	mustMarks(t, s, store.MarkKey{Tenant: "t1", Owner: "prn:a", RunRef: "t1-r-000"}, func(m *store.Marks) {
		m.PinnedAt, m.Done, m.SnoozedUntil = ptime(t0), true, ptime(t0.Add(time.Hour))
	})
	for _, owner := range []string{"prn:b", "tok:cred_a", "prn:a "} {
		got, err := s.GetMarks(t.Context(), "t1", owner, []string{"t1-r-000"})
		if err != nil || len(got) != 0 {
			t.Fatalf("owner %q sees %+v, %v", owner, got, err)
		}
		if pins, _ := s.PinnedMarks(t.Context(), "t1", owner); len(pins) != 0 {
			t.Fatalf("owner %q sees pins %+v", owner, pins)
		}
	}
}

func testMarksUnknownRun(t *testing.T, s store.Store) {
	putRuns(t, s, "t1", 1)
	for _, k := range []store.MarkKey{
		{Tenant: "t1", Owner: "prn:a", RunRef: "nope"},
		{Tenant: "t2", Owner: "prn:a", RunRef: "t1-r-000"}, // R-TEN-3
	} {
		if _, err := s.UpdateMarks(t.Context(), k, pin(t0)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("UpdateMarks(%+v): got %v, want ErrNotFound", k, err)
		}
	}
}

// A record that marks nothing is not kept.
func testMarksEmptyRemoved(t *testing.T, s store.Store) {
	putRuns(t, s, "t1", 1)
	k := store.MarkKey{Tenant: "t1", Owner: "prn:a", RunRef: "t1-r-000"}
	mustMarks(t, s, k, func(m *store.Marks) { m.Done = true })
	if m := mustMarks(t, s, k, func(m *store.Marks) { m.Done = false }); !m.Empty() {
		t.Fatalf("got %+v, want empty", m)
	}
	if got, _ := s.GetMarks(t.Context(), "t1", "prn:a", []string{k.RunRef}); len(got) != 0 {
		t.Fatalf("empty marks kept: %+v", got)
	}
}

// R-CLN-7, R-PIN-4, R-PIN-7: a release removes every owner's marks and
// refuses new ones.
func testMarksRelease(t *testing.T, s store.Store) {
	putRuns(t, s, "t1", 2)
	for _, owner := range []string{"prn:a", "prn:b", "tok:x"} {
		mustMarks(t, s, store.MarkKey{Tenant: "t1", Owner: owner, RunRef: "t1-r-000"}, func(m *store.Marks) {
			m.PinnedAt, m.Done, m.SnoozedUntil = ptime(t0), true, ptime(t0.Add(time.Hour))
		})
		mustMarks(t, s, store.MarkKey{Tenant: "t1", Owner: owner, RunRef: "t1-r-001"}, pin(t0))
	}
	meta, err := s.ReleaseRun(t.Context(), "t1-r-000", t0.Add(time.Minute))
	if err != nil || meta.ReleasedAt == nil || !meta.ReleasedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("ReleaseRun: got %+v, %v", meta, err)
	}
	again, err := s.ReleaseRun(t.Context(), "t1-r-000", t0.Add(time.Hour))
	if err != nil || !again.ReleasedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("second ReleaseRun moved released_at: got %+v, %v", again, err)
	}
	for _, owner := range []string{"prn:a", "prn:b", "tok:x"} {
		got, _ := s.GetMarks(t.Context(), "t1", owner, []string{"t1-r-000", "t1-r-001"})
		if _, ok := got["t1-r-000"]; ok || got["t1-r-001"].PinnedAt == nil {
			t.Fatalf("owner %s after release: %+v", owner, got)
		}
		pins, _ := s.PinnedMarks(t.Context(), "t1", owner)
		if len(pins) != 1 || pins[0].RunRef != "t1-r-001" {
			t.Fatalf("owner %s pins after release: %+v", owner, pins)
		}
		_, err := s.UpdateMarks(t.Context(), store.MarkKey{Tenant: "t1", Owner: owner, RunRef: "t1-r-000"}, pin(t0))
		if !errors.Is(err, store.ErrReleased) {
			t.Fatalf("mark on a released run: got %v, want ErrReleased", err)
		}
	}
}

// R-AUD-1: the audit entry fn returns commits with the meta, and fn's error
// writes neither.
func testMetaAudit(t *testing.T, s store.Store) {
	putRuns(t, s, "t1", 1)
	ref := "t1-r-000"
	m, err := s.UpdateRunMeta(t.Context(), ref, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
		m.Name = "first"
		e := auditEntry("t1", apitypes.AuditRunRenamed, ref, t0)
		return &e, nil
	})
	if err != nil || m.Name != "first" || m.Tenant != "t1" {
		t.Fatalf("UpdateRunMeta: got %+v, %v", m, err)
	}
	_, err = s.UpdateRunMeta(t.Context(), ref, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
		m.Name = "second"
		return nil, errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("fn error: got %v, want errBoom", err)
	}
	got, _ := s.GetRunMeta(t.Context(), []string{ref})
	if got[ref].Name != "first" {
		t.Fatalf("a failed update changed the meta: %+v", got[ref])
	}
	if es := listAudit(t, s, store.AuditQuery{Tenant: "t1"}); len(es) != 1 || es[0].Event != apitypes.AuditRunRenamed {
		t.Fatalf("audit: got %+v, want one renamed entry", es)
	}
	// No audit entry: nothing appended.
	if _, err := s.UpdateRunMeta(t.Context(), ref, func(m *store.RunMeta) (*apitypes.AuditEntry, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if es := listAudit(t, s, store.AuditQuery{Tenant: "t1"}); len(es) != 1 {
		t.Fatalf("a no-op update wrote audit: %+v", es)
	}
}

func testMetaUnknownRun(t *testing.T, s store.Store) {
	_, err := s.UpdateRunMeta(t.Context(), "nope", func(m *store.RunMeta) (*apitypes.AuditEntry, error) { return nil, nil })
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
	if _, err := s.ReleaseRun(t.Context(), "nope", t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ReleaseRun: got %v, want ErrNotFound", err)
	}
	if err := s.DeleteRun(t.Context(), "nope", auditEntry("t1", apitypes.AuditRunDeleted, "nope", t0)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeleteRun: got %v, want ErrNotFound", err)
	}
}

// R-DEL-1, R-DEL-3, R-DEL-4: the row, its meta and every mark go with the
// audit entry.
func testDeleteRemovesAll(t *testing.T, s store.Store) {
	putRuns(t, s, "t1", 2)
	ref := "t1-r-000"
	mustMarks(t, s, store.MarkKey{Tenant: "t1", Owner: "prn:a", RunRef: ref}, pin(t0))
	if _, err := s.UpdateRunMeta(t.Context(), ref, func(m *store.RunMeta) (*apitypes.AuditEntry, error) { m.Name = "x"; return nil, nil }); err != nil {
		t.Fatal(err)
	}
	// An audit entry of another tenant aborts the whole delete.
	if err := s.DeleteRun(t.Context(), ref, auditEntry("t2", apitypes.AuditRunDeleted, ref, t0)); err == nil {
		t.Fatal("DeleteRun with another tenant's audit entry succeeded")
	}
	if _, err := s.GetRun(t.Context(), ref); err != nil {
		t.Fatalf("a refused delete removed the run: %v", err)
	}
	if err := s.DeleteRun(t.Context(), ref, auditEntry("t1", apitypes.AuditRunDeleted, ref, t0)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRun(t.Context(), ref); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetRun after delete: got %v, want ErrNotFound", err)
	}
	if refs, _ := listRefs(t, s, store.RunQuery{Tenant: "t1"}); len(refs) != 1 || refs[0] != "t1-r-001" {
		t.Fatalf("list after delete: %v", refs)
	}
	if got, _ := s.GetMarks(t.Context(), "t1", "prn:a", []string{ref}); len(got) != 0 {
		t.Fatalf("marks after delete: %+v", got)
	}
	if pins, _ := s.PinnedMarks(t.Context(), "t1", "prn:a"); len(pins) != 0 {
		t.Fatalf("pins after delete: %+v", pins)
	}
	if got, _ := s.GetRunMeta(t.Context(), []string{ref}); len(got) != 0 {
		t.Fatalf("meta after delete: %+v", got)
	}
	es := listAudit(t, s, store.AuditQuery{Tenant: "t1"})
	if len(es) != 1 || es[0].Event != apitypes.AuditRunDeleted || es[0].Target.RunRef != ref {
		t.Fatalf("audit after delete: %+v", es)
	}
	if err := s.DeleteRun(t.Context(), ref, auditEntry("t1", apitypes.AuditRunDeleted, ref, t0)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: got %v, want ErrNotFound (R-DEL-5)", err)
	}
}

// A push that arrives after the delete does not bring the row back.
func testDeleteTombstone(t *testing.T, s store.Store) {
	r := newRun("t1-r-000", "t1", 0)
	mustPutRun(t, s, r)
	if err := s.DeleteRun(t.Context(), r.RunRef, auditEntry("t1", apitypes.AuditRunDeleted, r.RunRef, t0)); err != nil {
		t.Fatal(err)
	}
	r.Rev = 99
	if wrote, err := s.PutRun(t.Context(), r); err != nil || wrote {
		t.Fatalf("PutRun of a deleted run: got %v, %v; want false, nil", wrote, err)
	}
	if _, err := s.GetRun(t.Context(), r.RunRef); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetRun: got %v, want ErrNotFound", err)
	}
}

// The ledger is a per-tenant hash chain that auditchain verifies.
func testAuditChain(t *testing.T, s store.Store) {
	for i := range 5 {
		for _, tenant := range []string{"t1", "t2"} {
			e := auditEntry(tenant, apitypes.AuditRunArchived, fmt.Sprintf("r%d", i), t0.Add(time.Duration(i)*time.Second))
			e.Detail = json.RawMessage(`{"n": 1}`)
			got, err := s.AppendAudit(t.Context(), e)
			if err != nil {
				t.Fatal(err)
			}
			if got.Seq != uint64(i+1) || got.Hash == "" {
				t.Fatalf("AppendAudit: got seq %d hash %q, want seq %d", got.Seq, got.Hash, i+1)
			}
		}
	}
	if _, err := s.AppendAudit(t.Context(), apitypes.AuditEntry{Tenant: "t1"}); err == nil {
		t.Fatal("an entry without an event was appended")
	}
	for _, tenant := range []string{"t1", "t2"} {
		var v auditchain.Verifier
		es := listAudit(t, s, store.AuditQuery{Tenant: tenant, Limit: 2})
		for _, e := range es {
			if b := v.Add(e); b != nil {
				t.Fatalf("tenant %s: chain broken at %+v", tenant, b)
			}
			if e.Tenant != tenant {
				t.Fatalf("tenant %s lists an entry of %s", tenant, e.Tenant)
			}
		}
		if v.Count() != 5 {
			t.Fatalf("tenant %s: %d entries, want 5", tenant, v.Count())
		}
	}
	if _, _, err := s.ListAudit(t.Context(), store.AuditQuery{Tenant: "t1", Cursor: "x"}); !errors.Is(err, store.ErrBadCursor) {
		t.Fatalf("bad cursor: got %v, want ErrBadCursor", err)
	}
}

func testAuditFilters(t *testing.T, s store.Store) {
	add := func(event, ref, cred string, sec int) {
		e := auditEntry("t1", event, ref, t0.Add(time.Duration(sec)*time.Second))
		e.Actor.CredentialID = cred
		if _, err := s.AppendAudit(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	add(apitypes.AuditRunRenamed, "r1", "c1", 0)
	add(apitypes.AuditRunArchived, "r1", "c2", 1)
	add(apitypes.AuditRunRenamed, "r2", "c1", 2)
	add(apitypes.AuditRunDeleted, "r2", "c2", 3)
	seqs := func(q store.AuditQuery) []uint64 {
		var out []uint64
		for _, e := range listAudit(t, s, q) {
			out = append(out, e.Seq)
		}
		return out
	}
	cases := []struct {
		q    store.AuditQuery
		want []uint64
	}{
		{store.AuditQuery{Tenant: "t1", Event: apitypes.AuditRunRenamed}, []uint64{1, 3}},
		{store.AuditQuery{Tenant: "t1", RunRef: "r2"}, []uint64{3, 4}},
		{store.AuditQuery{Tenant: "t1", Actor: "c2"}, []uint64{2, 4}},
		{store.AuditQuery{Tenant: "t1", Actor: "prn_a"}, []uint64{1, 2, 3, 4}},
		{store.AuditQuery{Tenant: "t1", Since: t0.Add(2 * time.Second)}, []uint64{3, 4}},
		{store.AuditQuery{Tenant: "t1", Until: t0.Add(2 * time.Second)}, []uint64{1, 2}},
		{store.AuditQuery{Tenant: "t1", Since: t0.Add(time.Second), Until: t0.Add(3 * time.Second)}, []uint64{2, 3}},
		{store.AuditQuery{Tenant: "t1", Actor: "c1", Until: t0.Add(3 * time.Second)}, []uint64{1, 3}},
		{store.AuditQuery{Tenant: "t1", Event: apitypes.AuditRunRenamed, Limit: 1}, []uint64{1, 3}},
		{store.AuditQuery{Tenant: "t2"}, nil},
		// R-AUD-7: newest first, paged and filtered.
		{store.AuditQuery{Tenant: "t1", Newest: true, Limit: 1}, []uint64{4, 3, 2, 1}},
		{store.AuditQuery{Tenant: "t1", Newest: true, Actor: "c1"}, []uint64{3, 1}},
		{store.AuditQuery{Tenant: "t2", Newest: true}, nil},
	}
	for _, tc := range cases {
		if got := seqs(tc.q); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("ListAudit(%+v): got %v, want %v", tc.q, got, tc.want)
		}
	}
}

// R-AUD-1: an approval and its audit entry commit together or not at all.
func testSettingsAudit(t *testing.T, s store.Store) {
	ctx := t.Context()
	w := apitypes.Workspace{Ref: "ws_1", Tenant: "t1", NodeID: "n1", Name: "w", Path: "/w", CreatedAt: t0}
	if err := s.CreateWorkspace(ctx, w); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetWorkspaceSettings(ctx, "ws_1")
	if err != nil || got.SetupCommand != "" || got.SetupApproval != nil || got.Tenant != "t1" {
		t.Fatalf("fresh settings: %+v, %v", got, err)
	}
	approve := func(m *store.WorkspaceSettings) (*apitypes.AuditEntry, error) {
		m.SetupCommand = "npm ci"
		m.SetupApproval = &store.Approval{SHA256: "aa", Actor: "cred_a", At: t0}
		e := auditEntry("t1", apitypes.AuditWorkspaceApproveSetup, "", t0)
		e.Target = apitypes.AuditTarget{WorkspaceRef: "ws_1"}
		return &e, nil
	}
	if _, err := s.UpdateWorkspaceSettings(ctx, "ws_1", approve); err != nil {
		t.Fatal(err)
	}
	_, err = s.UpdateWorkspaceSettings(ctx, "ws_1", func(m *store.WorkspaceSettings) (*apitypes.AuditEntry, error) {
		m.SetupCommand = "rm -rf /"
		e := auditEntry("t1", apitypes.AuditWorkspaceApproveSetup, "", t0)
		return &e, errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("fn error: got %v", err)
	}
	// An audit entry of another tenant aborts it too.
	_, err = s.UpdateWorkspaceSettings(ctx, "ws_1", func(m *store.WorkspaceSettings) (*apitypes.AuditEntry, error) {
		m.SetupCommand = "rm -rf /"
		e := auditEntry("t2", apitypes.AuditWorkspaceApproveSetup, "", t0)
		return &e, nil
	})
	if err == nil {
		t.Fatal("an audit entry of another tenant was accepted")
	}
	got, _ = s.GetWorkspaceSettings(ctx, "ws_1")
	if got.SetupCommand != "npm ci" || got.SetupApproval == nil || got.SetupApproval.SHA256 != "aa" || !got.SetupApproval.At.Equal(t0) {
		t.Fatalf("settings: %+v", got)
	}
	es := listAudit(t, s, store.AuditQuery{Tenant: "t1"})
	if len(es) != 1 || es[0].Target.WorkspaceRef != "ws_1" {
		t.Fatalf("audit: %+v, want exactly the first approval", es)
	}
	if es := listAudit(t, s, store.AuditQuery{Tenant: "t2"}); len(es) != 0 {
		t.Fatalf("audit of t2: %+v", es)
	}
}

func testSettingsUnknown(t *testing.T, s store.Store) {
	if _, err := s.GetWorkspaceSettings(t.Context(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get: got %v, want ErrNotFound", err)
	}
	_, err := s.UpdateWorkspaceSettings(t.Context(), "nope", func(*store.WorkspaceSettings) (*apitypes.AuditEntry, error) { return nil, nil })
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Update: got %v, want ErrNotFound", err)
	}
}

func testSecretCRUD(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := store.Secret{Ref: "sec_1", Tenant: "t1", Name: "npm", Sealed: []byte{1, 2, 3}, CreatedAt: t0}
	if err := s.CreateSecret(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSecret(ctx, store.Secret{Ref: "sec_2", Tenant: "t1", Name: "npm", Sealed: []byte{4}}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("duplicate name: got %v, want ErrExists", err)
	}
	if err := s.CreateSecret(ctx, store.Secret{Ref: "sec_3", Tenant: "t2", Name: "npm", Sealed: []byte{4}, CreatedAt: t0}); err != nil {
		t.Fatalf("the same name in another tenant: %v", err)
	}
	got, err := s.GetSecret(ctx, "sec_1")
	if err != nil || string(got.Sealed) != string(a.Sealed) || got.Name != "npm" {
		t.Fatalf("GetSecret: %+v, %v", got, err)
	}
	if l, _ := s.ListSecrets(ctx, "t1"); len(l) != 1 || l[0].Ref != "sec_1" {
		t.Fatalf("ListSecrets: %+v", l)
	}
	if err := s.DeleteSecret(ctx, "sec_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSecret(ctx, "sec_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if err := s.CreateSecret(ctx, store.Secret{Ref: "sec_4", Tenant: "t1", Name: "npm", Sealed: []byte{5}, CreatedAt: t0}); err != nil {
		t.Fatalf("the name after delete: %v", err)
	}
	if err := s.DeleteSecret(ctx, "sec_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// R-MSG-17: once per event, run, reader and window.
func testAuditWindow(t *testing.T, s store.Store) {
	ctx := t.Context()
	add := func(event, ref, cred string, at time.Time) bool {
		e := auditEntry("t1", event, ref, at)
		e.Actor.CredentialID = cred
		ok, err := s.AppendAuditWindowed(ctx, e, 15*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	steps := []struct {
		event, ref, cred string
		at               time.Duration
		want             bool
	}{
		{apitypes.AuditRunMessages, "r1", "c1", 0, true},
		{apitypes.AuditRunMessages, "r1", "c1", 14 * time.Minute, false},
		{apitypes.AuditRunMessagesText, "r1", "c1", 14 * time.Minute, true},
		{apitypes.AuditRunMessages, "r2", "c1", 14 * time.Minute, true},
		{apitypes.AuditRunMessages, "r1", "c2", 14 * time.Minute, true},
		{apitypes.AuditRunMessages, "r1", "c1", 15 * time.Minute, true},
		{apitypes.AuditRunMessages, "r1", "c1", 29 * time.Minute, false},
	}
	for i, st := range steps {
		if got := add(st.event, st.ref, st.cred, t0.Add(st.at)); got != st.want {
			t.Fatalf("step %d %+v: appended %v, want %v", i, st, got, st.want)
		}
	}
	if n := len(listAudit(t, s, store.AuditQuery{Tenant: "t1"})); n != 5 {
		t.Fatalf("%d entries, want 5", n)
	}
}
