package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The run index and the profile and workspace indexes.

func testRunPutGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := fullRun("r-1", "t1")
	wrote, err := s.PutRun(ctx, want)
	if err != nil || !wrote {
		t.Fatalf("PutRun(new): got %v, %v; want true, nil", wrote, err)
	}
	got, err := s.GetRun(ctx, "r-1")
	if err != nil {
		t.Fatalf("GetRun: %v", err)
	}
	assertEqual(t, "run", normRun(got), normRun(want))

	// Listed rows are the whole row, not an index summary.
	runs, _, err := s.ListRuns(ctx, store.RunQuery{Tenant: "t1"})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	if len(runs) != 1 {
		t.Fatalf("ListRuns: got %d runs, want 1", len(runs))
	}
	assertEqual(t, "listed run", normRun(runs[0]), normRun(want))
}

// GetRuns reads many rows at once: the indexed ones, each as GetRun has it.
func testRunGetRuns(t *testing.T, s store.Store) {
	ctx := t.Context()
	full := fullRun("r-1", "t1")
	mustPutRun(t, s, full)
	mustPutRun(t, s, newRun("r-2", "t2", 1))
	got, err := s.GetRuns(ctx, []string{"r-2", "nope", "r-1", "r-1"})
	if err != nil {
		t.Fatalf("GetRuns: %v", err)
	}
	if len(got) != 2 {
		t.Fatalf("GetRuns: got %d rows, want 2", len(got))
	}
	assertEqual(t, "GetRuns[r-1]", normRun(got["r-1"]), normRun(full))
	if got["r-2"].Tenant != "t2" {
		t.Errorf("GetRuns[r-2]: got %+v", got["r-2"])
	}
	if got, err := s.GetRuns(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("GetRuns(nil): got %v, %v; want none", got, err)
	}
}

func testRunGetUnknown(t *testing.T, s store.Store) {
	mustPutRun(t, s, newRun("r-1", "t1", 0))
	_, err := s.GetRun(t.Context(), "r-2")
	assertErrorIs(t, "GetRun(unknown)", err, store.ErrNotFound)
}

// testRunRevOrder pins R-STATE-7: whatever order pushes arrive in, the index
// keeps the row with the highest Rev, and filters see that row's state only.
func testRunRevOrder(t *testing.T, s store.Store) {
	ctx := t.Context()
	at := func(rev uint64, state string) apitypes.Run {
		r := newRun("r-1", "t1", 0)
		r.Rev, r.State = rev, state
		return r
	}
	steps := []struct {
		r         apitypes.Run
		wantWrote bool
		wantState string
		wantRev   uint64
	}{
		{at(2, apitypes.StateRunning), true, apitypes.StateRunning, 2},
		{at(1, apitypes.StateStarting), false, apitypes.StateRunning, 2}, // older push arrives late
		{at(2, apitypes.StateIdle), false, apitypes.StateRunning, 2},     // equal Rev is not newer
		{at(5, apitypes.StateFailed), true, apitypes.StateFailed, 5},
		{at(3, apitypes.StateIdle), false, apitypes.StateFailed, 5},
		{at(0, apitypes.StateRunning), false, apitypes.StateFailed, 5},
	}
	for i, st := range steps {
		wrote, err := s.PutRun(ctx, st.r)
		if err != nil {
			t.Fatalf("step %d: PutRun(rev %d): %v", i, st.r.Rev, err)
		}
		if wrote != st.wantWrote {
			t.Errorf("step %d: PutRun(rev %d) wrote: got %v, want %v", i, st.r.Rev, wrote, st.wantWrote)
		}
		got, err := s.GetRun(ctx, "r-1")
		if err != nil {
			t.Fatalf("step %d: GetRun: %v", i, err)
		}
		if got.Rev != st.wantRev || got.State != st.wantState {
			t.Errorf("step %d: stored run: got rev %d %s, want rev %d %s", i, got.Rev, got.State, st.wantRev, st.wantState)
		}
	}
	// The index lists the row once, under its last state only.
	for _, tt := range []struct {
		state string
		want  []string
	}{
		{"", []string{"r-1"}},
		{apitypes.StateFailed, []string{"r-1"}},
		{apitypes.StateRunning, nil},
		{apitypes.StateIdle, nil},
		{apitypes.StateStarting, nil},
	} {
		got, _ := listRefs(t, s, store.RunQuery{Tenant: "t1", State: tt.state})
		assertEqual(t, fmt.Sprintf("ListRuns(state %q)", tt.state), got, tt.want)
	}
}

func testRunConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	orig := newRun("r-1", "t1", 0)
	orig.Rev = 3
	mustPutRun(t, s, orig)

	for _, tt := range []struct {
		name   string
		tenant string
		node   string
		rev    uint64
	}{
		{"other tenant, newer rev", "t2", orig.NodeID, 9},
		{"other node, newer rev", orig.Tenant, "n-other", 9},
		{"other tenant and node", "t2", "n-other", 9},
		// Refused as a conflict, not silently ignored as stale.
		{"other tenant, older rev", "t2", orig.NodeID, 1},
		{"other node, same rev", orig.Tenant, "n-other", 3},
	} {
		r := newRun("r-1", tt.tenant, 0)
		r.NodeID, r.Rev, r.State = tt.node, tt.rev, apitypes.StateStopped
		wrote, err := s.PutRun(ctx, r)
		assertErrorIs(t, "PutRun("+tt.name+")", err, store.ErrConflict)
		if wrote {
			t.Errorf("PutRun(%s): reported a write", tt.name)
		}
	}
	got, err := s.GetRun(ctx, "r-1")
	if err != nil {
		t.Fatalf("GetRun: %v", err)
	}
	assertEqual(t, "run after refused puts", normRun(got), normRun(orig))
	// R-TEN-2: the refused rows are not listed under the other tenant.
	refs, _ := listRefs(t, s, store.RunQuery{Tenant: "t2"})
	assertEqual(t, "ListRuns(t2) after refused puts", refs, []string(nil))
	refs, _ = listRefs(t, s, store.RunQuery{Tenant: "t1", State: apitypes.StateStopped})
	assertEqual(t, "ListRuns(t1, stopped) after refused puts", refs, []string(nil))
}

// testRunCreatedAtMoves: CreatedAt is fixed for a ref in practice, but a row
// whose CreatedAt does change is listed once, at its new place.
func testRunCreatedAtMoves(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutRun(t, s, newRun("r-a", "t1", 0))
	mustPutRun(t, s, newRun("r-b", "t1", 30))
	moved := newRun("r-a", "t1", 60)
	moved.Rev = 2
	mustPutRun(t, s, moved)

	refs, _ := listRefs(t, s, store.RunQuery{Tenant: "t1"})
	assertEqual(t, "ListRuns after CreatedAt moved", refs, []string{"r-a", "r-b"})
	refs = pageAll(t, s, store.RunQuery{Tenant: "t1", Limit: 1})
	assertEqual(t, "cursor pages after CreatedAt moved", refs, []string{"r-a", "r-b"})
	got, err := s.GetRun(ctx, "r-a")
	if err != nil {
		t.Fatalf("GetRun: %v", err)
	}
	if !got.CreatedAt.Equal(moved.CreatedAt) {
		t.Errorf("CreatedAt: got %v, want %v", got.CreatedAt, moved.CreatedAt)
	}
}

// testRunListFilters pins R-LIST-1 and R-LIST-7: State, LiveRef,
// ClaudeSessionID, NodeID, ProfileRef, WorkspaceRef and Driver are exact
// matches, "" matches anything, and they combine with AND.
func testRunListFilters(t *testing.T, s store.Store) {
	for i, f := range []struct{ ref, state, live, session, node, profile, workspace, driver string }{
		{"r-a", apitypes.StateRunning, "r-a.1", "s-1", "n-1", "prof_1", "ws_1", "claude"},
		{"r-b", apitypes.StateIdle, "r-b.1", "s-2", "n-1", "prof_2", "", "codex"},
		{"r-c", apitypes.StateFailed, "", "s-1", "n-2", "prof_1", "ws_2", "claude"},
		{"r-d", apitypes.StateRunning, "r-d.2", "", "n-2", "prof_3", "ws_1", "gemini"},
		{"r-e", apitypes.StateStopped, "", "", "n-1", "prof_2", "ws_2", "codex"},
	} {
		r := newRun(f.ref, "t1", i)
		r.State, r.LiveRef, r.ClaudeSessionID = f.state, f.live, f.session
		r.NodeID, r.ProviderProfileRef, r.WorkspaceRef, r.Driver = f.node, f.profile, f.workspace, f.driver
		mustPutRun(t, s, r)
	}
	// A matching row of another tenant is never listed (R-TEN-2).
	other := newRun("r-x", "t2", 9)
	other.State, other.LiveRef, other.ClaudeSessionID = apitypes.StateRunning, "r-a.1", "s-1"
	mustPutRun(t, s, other)

	for _, tt := range []struct {
		name string
		q    store.RunQuery
		want []string
	}{
		{"no filter", store.RunQuery{}, []string{"r-e", "r-d", "r-c", "r-b", "r-a"}},
		{"state running", store.RunQuery{State: apitypes.StateRunning}, []string{"r-d", "r-a"}},
		{"state failed", store.RunQuery{State: apitypes.StateFailed}, []string{"r-c"}},
		{"state released", store.RunQuery{State: apitypes.StateReleased}, nil},
		{"live ref", store.RunQuery{LiveRef: "r-b.1"}, []string{"r-b"}},
		{"live ref prefix is no match", store.RunQuery{LiveRef: "r-b"}, nil},
		{"session", store.RunQuery{ClaudeSessionID: "s-1"}, []string{"r-c", "r-a"}},
		{"state and session", store.RunQuery{State: apitypes.StateRunning, ClaudeSessionID: "s-1"}, []string{"r-a"}},
		{"state and live ref disagree", store.RunQuery{State: apitypes.StateIdle, LiveRef: "r-a.1"}, nil},
		{"all three", store.RunQuery{State: apitypes.StateIdle, LiveRef: "r-b.1", ClaudeSessionID: "s-2"}, []string{"r-b"}},
		{"node", store.RunQuery{NodeID: "n-1"}, []string{"r-e", "r-b", "r-a"}},
		{"profile", store.RunQuery{ProfileRef: "prof_1"}, []string{"r-c", "r-a"}},
		{"workspace", store.RunQuery{WorkspaceRef: "ws_2"}, []string{"r-e", "r-c"}},
		{"driver", store.RunQuery{Driver: "codex"}, []string{"r-e", "r-b"}},
		{"driver prefix is no match", store.RunQuery{Driver: "cod"}, nil},
		{"node and driver", store.RunQuery{NodeID: "n-2", Driver: "claude"}, []string{"r-c"}},
		{"profile and state", store.RunQuery{ProfileRef: "prof_2", State: apitypes.StateStopped}, []string{"r-e"}},
		{"node and state", store.RunQuery{NodeID: "n-2", State: apitypes.StateRunning}, []string{"r-d"}},
		{"unknown node", store.RunQuery{NodeID: "n9"}, nil},
	} {
		q := tt.q
		q.Tenant = "t1"
		got, next := listRefs(t, s, q)
		assertEqual(t, "ListRuns("+tt.name+")", got, tt.want)
		if next != "" {
			t.Errorf("ListRuns(%s) in offset mode: got next %q, want none", tt.name, next)
		}
		q.CursorMode = true
		assertEqual(t, "cursor pages("+tt.name+")", pageAll(t, s, withLimit(q, 1)), tt.want)
	}
}

// testRunListOrder: newest CreatedAt first, then RunRef descending in byte
// order, also across page boundaries.
func testRunListOrder(t *testing.T, s store.Store) {
	// Put in an order that is neither the wanted one nor its reverse.
	for _, r := range []struct {
		ref     string
		minutes int
	}{
		{"r-10", 1}, {"r-9", 0}, {"r-0", 2}, {"r-2", 1}, {"r-1", 1}, {"r-20", 1},
	} {
		mustPutRun(t, s, newRun(r.ref, "t1", r.minutes))
	}
	want := []string{"r-0", "r-20", "r-2", "r-10", "r-1", "r-9"}
	got, _ := listRefs(t, s, store.RunQuery{Tenant: "t1"})
	assertEqual(t, "ListRuns order", got, want)
	for _, limit := range []int{1, 2, 4} {
		got = pageAll(t, s, store.RunQuery{Tenant: "t1", Limit: limit})
		assertEqual(t, fmt.Sprintf("cursor pages of %d, order", limit), got, want)
		var offset []string
		for off := 0; off < len(want)+limit; off += limit {
			page, _ := listRefs(t, s, store.RunQuery{Tenant: "t1", Limit: limit, Offset: off})
			offset = append(offset, page...)
		}
		assertEqual(t, fmt.Sprintf("offset pages of %d, order", limit), offset, want)
	}
}

func testRunListDefaultLimit(t *testing.T, s store.Store) {
	want := putRuns(t, s, "t1", 60)[:50]
	got, next := listRefs(t, s, store.RunQuery{Tenant: "t1"})
	assertEqual(t, "ListRuns(limit 0)", got, want)
	if next != "" {
		t.Errorf("ListRuns(limit 0) in offset mode: got next %q, want none", next)
	}
	got, next = listRefs(t, s, store.RunQuery{Tenant: "t1", CursorMode: true})
	assertEqual(t, "ListRuns(limit 0, cursor mode)", got, want)
	if next == "" {
		t.Error("ListRuns(limit 0, cursor mode) of 60 runs: got no next, want one")
	}
}

// testRunListOffset pins R-LIST-5's offset mode: Offset counts matching rows
// only, and there is never a next cursor.
func testRunListOffset(t *testing.T, s store.Store) {
	all := putRuns(t, s, "t1", 10) // t1-r-009 ... t1-r-000, newest first
	idle := []string{}
	for i, ref := range all {
		if i%2 == 0 {
			r := newRun(ref, "t1", 9-i)
			r.State, r.Rev = apitypes.StateIdle, 2
			mustPutRun(t, s, r)
			idle = append(idle, ref)
		}
	}
	for _, tt := range []struct {
		q    store.RunQuery
		want []string
	}{
		{store.RunQuery{Limit: 3}, all[0:3]},
		{store.RunQuery{Limit: 3, Offset: 4}, all[4:7]},
		{store.RunQuery{Limit: 3, Offset: 8}, all[8:10]},
		{store.RunQuery{Limit: 3, Offset: 10}, nil},
		{store.RunQuery{Limit: 3, Offset: 50}, nil},
		{store.RunQuery{Offset: 7}, all[7:]},
		{store.RunQuery{State: apitypes.StateIdle, Limit: 2, Offset: 1}, idle[1:3]},
		{store.RunQuery{State: apitypes.StateIdle, Limit: 2, Offset: 4}, idle[4:]},
		{store.RunQuery{State: apitypes.StateRunning, Limit: 10, Offset: 3}, []string{all[7], all[9]}},
	} {
		q := tt.q
		q.Tenant = "t1"
		got, next := listRefs(t, s, q)
		what := fmt.Sprintf("ListRuns(state %q, limit %d, offset %d)", q.State, q.Limit, q.Offset)
		assertEqual(t, what, got, tt.want)
		if next != "" {
			t.Errorf("%s: got next %q, want none in offset mode", what, next)
		}
	}
}

// testRunListCursor pins R-LIST-5's cursor mode: 120 runs in pages of 50 are
// 50, 50, 20, each run exactly once, in order, no next after the last page.
func testRunListCursor(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := putRuns(t, s, "t1", 120)
	var got []string
	var sizes []int
	q := store.RunQuery{Tenant: "t1", Limit: 50, CursorMode: true}
	for page := 0; ; page++ {
		if page > 10 {
			t.Fatalf("cursor paging did not end after %d pages", page)
		}
		runs, next, err := s.ListRuns(ctx, q)
		if err != nil {
			t.Fatalf("ListRuns(page %d): %v", page, err)
		}
		sizes = append(sizes, len(runs))
		for _, r := range runs {
			got = append(got, r.RunRef)
		}
		if next == "" {
			break
		}
		q.Cursor = next
	}
	assertEqual(t, "page sizes", sizes, []int{50, 50, 20})
	assertEqual(t, "runs reached by cursor paging", got, want)
}

// testRunListCursorWrites: rows written between pages neither repeat nor hide
// a run that existed when paging began (R-LIST-5). Rows added newer than the
// cursor belong to pages already read; rows added older are reached.
func testRunListCursorWrites(t *testing.T, s store.Store) {
	ctx := t.Context()
	minutes := map[string]int{} // CreatedAt of every run, as minutes after t0
	put := func(ref string, min int, rev uint64, state string) {
		t.Helper()
		r := newRun(ref, "t1", min)
		r.Rev, r.State = rev, state
		mustPutRun(t, s, r)
		minutes[ref] = min
	}
	// 120 runs at minutes 100..219, leaving room below and above.
	var orig []string
	for i := range 120 {
		ref := fmt.Sprintf("r-%03d", 100+i)
		put(ref, 100+i, 1, apitypes.StateRunning)
		orig = append(orig, ref)
	}
	seen := map[string]int{}
	var order []string
	var added []string // below every later cursor: must be reached
	q := store.RunQuery{Tenant: "t1", Limit: 50, CursorMode: true}
	for page := 0; ; page++ {
		if page > 10 {
			t.Fatalf("cursor paging did not end after %d pages", page)
		}
		runs, next, err := s.ListRuns(ctx, q)
		if err != nil {
			t.Fatalf("ListRuns(page %d): %v", page, err)
		}
		for _, r := range runs {
			seen[r.RunRef]++
			order = append(order, r.RunRef)
		}
		if next == "" {
			break
		}
		q.Cursor = next
		// Between pages: newer runs (above every cursor), older runs
		// (below every cursor), two runs at the very time of the last
		// row returned, one on each side of its ref, and a state change
		// of a row already read, of the cursor's row and of one not yet
		// read.
		last := runs[len(runs)-1].RunRef
		for j := range 3 {
			put(fmt.Sprintf("r-new-%d-%d", page, j), 1000+10*page+j, 1, apitypes.StateRunning)
			ref := fmt.Sprintf("r-old-%d-%d", page, j)
			put(ref, 10*page+j, 1, apitypes.StateRunning)
			added = append(added, ref)
		}
		put(last+"z", minutes[last], 1, apitypes.StateRunning) // "r-170z" sorts before "r-170": passed
		below := last[:len(last)-1]                            // "r-17" sorts after "r-170": ahead
		put(below, minutes[last], 1, apitypes.StateRunning)
		added = append(added, below)
		for _, ref := range []string{order[0], last, orig[0]} {
			put(ref, minutes[ref], uint64(2+page), apitypes.StateIdle)
		}
	}
	for ref, n := range seen {
		if n != 1 {
			t.Errorf("run %s reached %d times, want once", ref, n)
		}
	}
	for _, ref := range append(orig, added...) {
		if seen[ref] == 0 {
			t.Errorf("run %s never reached", ref)
		}
	}
	// The pages concatenate in list order: nothing newer than a cursor
	// turned up after it.
	pos := map[string]int{}
	for i, ref := range pageAll(t, s, store.RunQuery{Tenant: "t1", Limit: 200}) {
		pos[ref] = i
	}
	for i := 1; i < len(order); i++ {
		if pos[order[i-1]] >= pos[order[i]] {
			t.Errorf("paged runs out of order: %s before %s", order[i-1], order[i])
		}
	}
}

// testRunListCursorEnd: a page that reaches the last matching row exactly
// has no next (the store looks ahead, past rows the filters reject).
func testRunListCursorEnd(t *testing.T, s store.Store) {
	ctx := t.Context()
	putRuns(t, s, "t1", 100)
	q := store.RunQuery{Tenant: "t1", Limit: 50, CursorMode: true}
	runs, next, err := s.ListRuns(ctx, q)
	if err != nil || len(runs) != 50 || next == "" {
		t.Fatalf("ListRuns(page 1 of 100): got %d runs, next %q, %v; want 50, a cursor, nil", len(runs), next, err)
	}
	q.Cursor = next
	runs, next, err = s.ListRuns(ctx, q)
	if err != nil || len(runs) != 50 || next != "" {
		t.Errorf("ListRuns(page 2 of 100): got %d runs, next %q, %v; want 50, none, nil", len(runs), next, err)
	}

	// Exactly one full page.
	putRuns(t, s, "t2", 50)
	runs, next, err = s.ListRuns(ctx, store.RunQuery{Tenant: "t2", Limit: 50, CursorMode: true})
	if err != nil || len(runs) != 50 || next != "" {
		t.Errorf("ListRuns(50 of 50): got %d runs, next %q, %v; want 50, none, nil", len(runs), next, err)
	}

	// The three newest runs of t3 are the only failed ones; the older
	// rows after them do not match, so there is no next page.
	for i := range 8 {
		r := newRun(fmt.Sprintf("t3-r-%03d", i), "t3", i)
		if i >= 5 {
			r.State = apitypes.StateFailed
		}
		mustPutRun(t, s, r)
	}
	runs, next, err = s.ListRuns(ctx, store.RunQuery{Tenant: "t3", State: apitypes.StateFailed, Limit: 3, CursorMode: true})
	if err != nil || len(runs) != 3 || next != "" {
		t.Errorf("ListRuns(3 of 3 failed, older rows not failed): got %d runs, next %q, %v; want 3, none, nil", len(runs), next, err)
	}

	// No rows at all.
	runs, next, err = s.ListRuns(ctx, store.RunQuery{Tenant: "t-none", CursorMode: true})
	if err != nil || len(runs) != 0 || next != "" {
		t.Errorf("ListRuns(empty tenant range): got %d runs, next %q, %v; want 0, none, nil", len(runs), next, err)
	}
}

// testRunListCursorFilters: cursor paging with a filter reaches each
// matching run once (R-LIST-1 with R-LIST-5).
func testRunListCursorFilters(t *testing.T, s store.Store) {
	var want []string
	for i := 29; i >= 0; i-- {
		r := newRun(fmt.Sprintf("r-%03d", i), "t1", i)
		if i%3 == 0 {
			r.State = apitypes.StateIdle
			want = append(want, r.RunRef)
		}
		mustPutRun(t, s, r)
	}
	for _, limit := range []int{1, 3, 4, 10, 11} {
		got := pageAll(t, s, store.RunQuery{Tenant: "t1", State: apitypes.StateIdle, Limit: limit})
		assertEqual(t, fmt.Sprintf("idle runs in pages of %d", limit), got, want)
	}
}

// testRunListBadCursor: a cursor the store did not issue is ErrBadCursor. The
// suite uses strings no sane cursor encoding produces; a backend checks its
// own format further beside it.
func testRunListBadCursor(t *testing.T, s store.Store) {
	putRuns(t, s, "t1", 3)
	for _, c := range []string{"not a cursor", "%%%", "***", "\x00\xff"} {
		runs, next, err := s.ListRuns(t.Context(), store.RunQuery{Tenant: "t1", CursorMode: true, Cursor: c})
		assertErrorIs(t, fmt.Sprintf("ListRuns(cursor %q)", c), err, store.ErrBadCursor)
		if len(runs) != 0 || next != "" {
			t.Errorf("ListRuns(cursor %q): got %d runs, next %q; want nothing", c, len(runs), next)
		}
	}
}

// testRunListTenant pins R-LIST-6 and R-TEN-2: a listing holds only its own
// tenant's runs, also when one tenant id is a prefix of another, and a
// cursor taken from one tenant's list cannot reach another's rows.
func testRunListTenant(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := map[string][]string{}
	tenants := []string{"t", "t1", "tt"}
	for i := 29; i >= 0; i-- {
		tn := tenants[i%len(tenants)]
		r := newRun(fmt.Sprintf("r-%s-%03d", tn, i), tn, i)
		mustPutRun(t, s, r)
		want[tn] = append(want[tn], r.RunRef)
	}
	for _, tn := range tenants {
		runs, _, err := s.ListRuns(ctx, store.RunQuery{Tenant: tn, Limit: 100})
		if err != nil {
			t.Fatalf("ListRuns(%s): %v", tn, err)
		}
		var got []string
		for _, r := range runs {
			got = append(got, r.RunRef)
			if r.Tenant != tn {
				t.Errorf("ListRuns(%s): run %s has tenant %q", tn, r.RunRef, r.Tenant)
			}
		}
		assertEqual(t, "ListRuns("+tn+")", got, want[tn])
		assertEqual(t, "cursor pages("+tn+")", pageAll(t, s, store.RunQuery{Tenant: tn, Limit: 3}), want[tn])
	}
	for _, tn := range []string{"t-none", "t11", "T"} {
		refs, _ := listRefs(t, s, store.RunQuery{Tenant: tn})
		assertEqual(t, "ListRuns("+tn+")", refs, []string(nil))
	}

	// A cursor from t1's first page, replayed against t: only t's runs.
	_, next, err := s.ListRuns(ctx, store.RunQuery{Tenant: "t1", Limit: 2, CursorMode: true})
	if err != nil || next == "" {
		t.Fatalf("ListRuns(t1, page 1): next %q, %v; want a cursor", next, err)
	}
	runs, _, err := s.ListRuns(ctx, store.RunQuery{Tenant: "t", Limit: 100, CursorMode: true, Cursor: next})
	if err != nil {
		t.Fatalf("ListRuns(t, cursor of t1): %v", err)
	}
	for _, r := range runs {
		if r.Tenant != "t" {
			t.Errorf("ListRuns(t, cursor of t1): run %s of tenant %q", r.RunRef, r.Tenant)
		}
	}
}

func testRunPutConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := newRun("r-1", "t1", 0)
			r.Rev = uint64(i + 1)
			r.State = apitypes.States[i%len(apitypes.States)]
			if _, err := s.PutRun(ctx, r); err != nil {
				t.Errorf("PutRun(rev %d): %v", r.Rev, err)
			}
		})
	}
	wg.Wait()
	got, err := s.GetRun(ctx, "r-1")
	if err != nil {
		t.Fatalf("GetRun: %v", err)
	}
	if want := apitypes.States[(n-1)%len(apitypes.States)]; got.Rev != n || got.State != want {
		t.Errorf("run after concurrent puts: got rev %d %s, want rev %d %s", got.Rev, got.State, n, want)
	}
	refs, _ := listRefs(t, s, store.RunQuery{Tenant: "t1"})
	assertEqual(t, "ListRuns after concurrent puts", refs, []string{"r-1"})
}

func testCopiesRun(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := fullRun("r-1", "t1")
	want := normRun(r)
	mustPutRun(t, s, r)
	*r.ExitCode = 99
	*r.StartedAt = t0.Add(99 * time.Hour)
	r.Limit.Kind = "mutated-input"

	got, err := s.GetRun(ctx, "r-1")
	if err != nil {
		t.Fatalf("GetRun: %v", err)
	}
	assertEqual(t, "run after mutating the input", normRun(got), want)
	*got.ExitCode = 98
	*got.NodeReachable = true
	got.Limit.Kind = "mutated-get"

	runs, _, err := s.ListRuns(ctx, store.RunQuery{Tenant: "t1"})
	if err != nil || len(runs) != 1 {
		t.Fatalf("ListRuns: got %d runs, %v; want 1, nil", len(runs), err)
	}
	assertEqual(t, "run after mutating GetRun's result", normRun(runs[0]), want)
	*runs[0].ExitCode = 97
	got, err = s.GetRun(ctx, "r-1")
	if err != nil {
		t.Fatalf("GetRun: %v", err)
	}
	assertEqual(t, "run after mutating ListRuns' result", normRun(got), want)
}

func testProfileCreateGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := apitypes.Profile{
		Ref: "pp-1", Tenant: "t1", NodeID: "n1", Tool: "claude", Name: "work",
		Home: "/home/ana/.claude-work", EnvKeys: []string{"ANTHROPIC_API_KEY", "HTTPS_PROXY"}, CreatedAt: t0,
	}
	if err := s.CreateProfile(ctx, want); err != nil {
		t.Fatalf("CreateProfile: %v", err)
	}
	got, err := s.GetProfile(ctx, "pp-1")
	if err != nil {
		t.Fatalf("GetProfile: %v", err)
	}
	assertEqual(t, "profile", normProfile(got), normProfile(want))
	list, err := s.ListProfiles(ctx, "t1")
	if err != nil || len(list) != 1 {
		t.Fatalf("ListProfiles: got %d profiles, %v; want 1, nil", len(list), err)
	}
	assertEqual(t, "listed profile", normProfile(list[0]), normProfile(want))
}

func testWorkspaceCreateGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := apitypes.Workspace{Ref: "ws-1", Tenant: "t1", NodeID: "n1", Name: "olivares", Path: "/src/olivares", CreatedAt: t0}
	if err := s.CreateWorkspace(ctx, want); err != nil {
		t.Fatalf("CreateWorkspace: %v", err)
	}
	got, err := s.GetWorkspace(ctx, "ws-1")
	if err != nil {
		t.Fatalf("GetWorkspace: %v", err)
	}
	assertEqual(t, "workspace", normWorkspace(got), normWorkspace(want))
	list, err := s.ListWorkspaces(ctx, "t1")
	if err != nil || len(list) != 1 {
		t.Fatalf("ListWorkspaces: got %d workspaces, %v; want 1, nil", len(list), err)
	}
	assertEqual(t, "listed workspace", normWorkspace(list[0]), normWorkspace(want))
}

func testCopiesProfile(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := apitypes.Profile{Ref: "pp-1", Tenant: "t1", NodeID: "n1", Tool: "codex", Name: "a", EnvKeys: []string{"K1"}, CreatedAt: t0}
	want := normProfile(p)
	if err := s.CreateProfile(ctx, p); err != nil {
		t.Fatalf("CreateProfile: %v", err)
	}
	p.EnvKeys[0] = "mutated-input"
	got, err := s.GetProfile(ctx, "pp-1")
	if err != nil {
		t.Fatalf("GetProfile: %v", err)
	}
	assertEqual(t, "profile after mutating the input", normProfile(got), want)
	got.EnvKeys[0] = "mutated-get"
	list, err := s.ListProfiles(ctx, "t1")
	if err != nil || len(list) != 1 {
		t.Fatalf("ListProfiles: got %d, %v; want 1, nil", len(list), err)
	}
	assertEqual(t, "profile after mutating GetProfile's result", normProfile(list[0]), want)
}

// namedKind runs the same checks over profiles and workspaces, which share
// their rules: refs unique across tenants, names unique within one, lists
// ordered by name.
type namedKind struct {
	create func(t *testing.T, s store.Store, n named) error
	get    func(t *testing.T, s store.Store, ref string) (named, error)
	list   func(t *testing.T, s store.Store, tenant string) ([]named, error)
}

// named is the part of a profile or workspace the shared checks look at.
type named struct{ Ref, Tenant, Name string }

var profileKind = namedKind{
	create: func(t *testing.T, s store.Store, n named) error {
		return s.CreateProfile(t.Context(), apitypes.Profile{Ref: n.Ref, Tenant: n.Tenant, Name: n.Name, NodeID: "n1", Tool: "claude", CreatedAt: t0})
	},
	get: func(t *testing.T, s store.Store, ref string) (named, error) {
		p, err := s.GetProfile(t.Context(), ref)
		return named{p.Ref, p.Tenant, p.Name}, err
	},
	list: func(t *testing.T, s store.Store, tenant string) ([]named, error) {
		ps, err := s.ListProfiles(t.Context(), tenant)
		var out []named
		for _, p := range ps {
			out = append(out, named{p.Ref, p.Tenant, p.Name})
		}
		return out, err
	},
}

var workspaceKind = namedKind{
	create: func(t *testing.T, s store.Store, n named) error {
		return s.CreateWorkspace(t.Context(), apitypes.Workspace{Ref: n.Ref, Tenant: n.Tenant, Name: n.Name, NodeID: "n1", Path: "/src/" + n.Name, CreatedAt: t0})
	},
	get: func(t *testing.T, s store.Store, ref string) (named, error) {
		w, err := s.GetWorkspace(t.Context(), ref)
		return named{w.Ref, w.Tenant, w.Name}, err
	},
	list: func(t *testing.T, s store.Store, tenant string) ([]named, error) {
		ws, err := s.ListWorkspaces(t.Context(), tenant)
		var out []named
		for _, w := range ws {
			out = append(out, named{w.Ref, w.Tenant, w.Name})
		}
		return out, err
	},
}

func (k namedKind) mustCreate(t *testing.T, s store.Store, n named) {
	t.Helper()
	if err := k.create(t, s, n); err != nil {
		t.Fatalf("create %+v: %v", n, err)
	}
}

func (k namedKind) mustList(t *testing.T, s store.Store, tenant string) []named {
	t.Helper()
	out, err := k.list(t, s, tenant)
	if err != nil {
		t.Fatalf("list %s: %v", tenant, err)
	}
	return out
}

func testNamedGetUnknown(t *testing.T, s store.Store, k namedKind) {
	k.mustCreate(t, s, named{"x-1", "t1", "a"})
	_, err := k.get(t, s, "x-2")
	assertErrorIs(t, "get(unknown)", err, store.ErrNotFound)
}

func testNamedDuplicateRef(t *testing.T, s store.Store, k namedKind) {
	first := named{"x-1", "t1", "alpha"}
	k.mustCreate(t, s, first)
	// Refs are global: another tenant cannot take one either.
	for _, n := range []named{{"x-1", "t1", "beta"}, {"x-1", "t2", "gamma"}, {"x-1", "t1", "alpha"}} {
		assertErrorIs(t, fmt.Sprintf("create %+v (ref taken)", n), k.create(t, s, n), store.ErrExists)
	}
	got, err := k.get(t, s, "x-1")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	assertEqual(t, "record after refused creates", got, first)
	// The refused creates claimed no name.
	k.mustCreate(t, s, named{"x-2", "t1", "beta"})
	k.mustCreate(t, s, named{"x-3", "t2", "gamma"})
	assertEqual(t, "list t1", k.mustList(t, s, "t1"), []named{first, {"x-2", "t1", "beta"}})
}

func testNamedDuplicateName(t *testing.T, s store.Store, k namedKind) {
	first := named{"x-1", "t1", "alpha"}
	k.mustCreate(t, s, first)
	assertErrorIs(t, "create (name taken in the tenant)", k.create(t, s, named{"x-2", "t1", "alpha"}), store.ErrExists)
	_, err := k.get(t, s, "x-2")
	assertErrorIs(t, "get(ref of the refused create)", err, store.ErrNotFound)
	// The same name in another tenant is fine (R-TEN-2).
	k.mustCreate(t, s, named{"x-3", "t2", "alpha"})
	assertErrorIs(t, "create (name taken in t2)", k.create(t, s, named{"x-4", "t2", "alpha"}), store.ErrExists)
	assertEqual(t, "list t1", k.mustList(t, s, "t1"), []named{first})
	assertEqual(t, "list t2", k.mustList(t, s, "t2"), []named{{"x-3", "t2", "alpha"}})
	// The refused ref is still free.
	k.mustCreate(t, s, named{"x-2", "t1", "beta"})
}

// testNamedList: ordered by name, only the tenant's records, also when one
// tenant id is a prefix of another (R-TEN-2).
func testNamedList(t *testing.T, s store.Store, k namedKind) {
	for _, n := range []named{
		{"x-1", "t", "zeta"}, {"x-2", "t1", "beta"}, {"x-3", "t", "alpha"},
		{"x-4", "t", "mid"}, {"x-5", "tt", "alpha"}, {"x-0", "t", "alpha-2"},
	} {
		k.mustCreate(t, s, n)
	}
	for _, tt := range []struct {
		tenant string
		want   []named
	}{
		{"t", []named{{"x-3", "t", "alpha"}, {"x-0", "t", "alpha-2"}, {"x-4", "t", "mid"}, {"x-1", "t", "zeta"}}},
		{"t1", []named{{"x-2", "t1", "beta"}}},
		{"tt", []named{{"x-5", "tt", "alpha"}}},
		{"t-none", nil},
	} {
		assertEqual(t, "list "+tt.tenant, k.mustList(t, s, tt.tenant), tt.want)
	}
}

// Fixtures.

// newRun returns a running run of tenant on node n1, created minutes after
// t0, at Rev 1.
func newRun(ref, tenant string, minutes int) apitypes.Run {
	return apitypes.Run{
		RunRef:             ref,
		Tenant:             tenant,
		NodeID:             "n1",
		State:              apitypes.StateRunning,
		Driver:             "claude",
		Generation:         1,
		PID:                4242,
		Isolation:          apitypes.IsolationNative,
		ProviderProfileRef: "pp-1",
		LiveRef:            ref + ".1",
		CreatedAt:          t0.Add(time.Duration(minutes) * time.Minute),
		Rev:                1,
	}
}

// fullRun is newRun with every field set, pointers included.
func fullRun(ref, tenant string) apitypes.Run {
	r := newRun(ref, tenant, 0)
	ptr := func(ts time.Time) *time.Time { return &ts }
	exit, reachable := 3, false
	r.NodeReachable = &reachable
	r.State = apitypes.StateFailed
	r.ExitCode = &exit
	r.Signal = "SIGTERM"
	r.Reason = apitypes.ReasonExitNonZero
	r.Generation = 2
	r.WorkspaceRef = "ws-1"
	r.WorkspacePath = "/src/olivares"
	r.WorktreeBranch = "olivares/" + ref
	r.TemplateRef = "tpl-1"
	r.ConversationID = "conv-1"
	r.ClaudeSessionID = "conv-1"
	r.LiveRef = ""
	r.Name = "fix the flaky test"
	r.HandoffOf = "r-0"
	r.Limit = &apitypes.Limit{Kind: "usage", ResetsAt: ptr(t0.Add(5 * time.Hour)), AccountRef: "acct-1"}
	r.Pinned = true
	r.PinnedAt = ptr(t0.Add(time.Minute))
	r.SnoozedUntil = ptr(t0.Add(2 * time.Hour))
	r.Done = true
	r.ArchivedAt = ptr(t0.Add(3 * time.Hour))
	r.RingFirst, r.RingLast = 10, 250
	r.StartedAt = ptr(t0.Add(time.Second))
	r.EndedAt = ptr(t0.Add(time.Hour))
	r.Rev = 7
	return r
}

// putRuns stores n runs of tenant, <tenant>-r-000 at t0 and each next one a
// minute later (refs are global, hence the tenant in them), and returns
// their refs newest first: the list order.
func putRuns(t *testing.T, s store.Store, tenant string, n int) []string {
	t.Helper()
	refs := make([]string, n)
	for i := range n {
		ref := fmt.Sprintf("%s-r-%03d", tenant, i)
		mustPutRun(t, s, newRun(ref, tenant, i))
		refs[n-1-i] = ref
	}
	return refs
}

func mustPutRun(t *testing.T, s store.Store, r apitypes.Run) {
	t.Helper()
	wrote, err := s.PutRun(t.Context(), r)
	if err != nil || !wrote {
		t.Fatalf("PutRun(%s rev %d): got %v, %v; want true, nil", r.RunRef, r.Rev, wrote, err)
	}
}

// listRefs returns the refs of one page, nil when empty.
func listRefs(t *testing.T, s store.Store, q store.RunQuery) ([]string, string) {
	t.Helper()
	runs, next, err := s.ListRuns(t.Context(), q)
	if err != nil {
		t.Fatalf("ListRuns(%+v): %v", q, err)
	}
	var refs []string
	for _, r := range runs {
		refs = append(refs, r.RunRef)
	}
	return refs, next
}

// pageAll follows cursors from the first page of q (in cursor mode) to the
// last and returns every ref in the order reached. A page with a next cursor
// must not be empty.
func pageAll(t *testing.T, s store.Store, q store.RunQuery) []string {
	t.Helper()
	q.CursorMode, q.Cursor = true, ""
	var all []string
	for range 1000 {
		refs, next := listRefs(t, s, q)
		all = append(all, refs...)
		if next == "" {
			return all
		}
		if len(refs) == 0 {
			t.Fatalf("ListRuns(%+v): an empty page with next %q", q, next)
		}
		q.Cursor = next
	}
	t.Fatalf("ListRuns(%+v): paging did not end", q)
	return nil
}

func withLimit(q store.RunQuery, limit int) store.RunQuery {
	q.Limit = limit
	return q
}

func normRun(r apitypes.Run) apitypes.Run {
	if r.Limit != nil {
		l := *r.Limit
		l.ResetsAt = normTimePtr(l.ResetsAt)
		r.Limit = &l
	}
	r.PinnedAt = normTimePtr(r.PinnedAt)
	r.SnoozedUntil = normTimePtr(r.SnoozedUntil)
	r.ArchivedAt = normTimePtr(r.ArchivedAt)
	r.CreatedAt = normTime(r.CreatedAt)
	r.StartedAt = normTimePtr(r.StartedAt)
	r.EndedAt = normTimePtr(r.EndedAt)
	if r.ExitCode != nil {
		c := *r.ExitCode
		r.ExitCode = &c
	}
	if r.NodeReachable != nil {
		b := *r.NodeReachable
		r.NodeReachable = &b
	}
	return r
}

func normProfile(p apitypes.Profile) apitypes.Profile {
	if len(p.EnvKeys) == 0 {
		p.EnvKeys = nil
	} else {
		p.EnvKeys = append([]string(nil), p.EnvKeys...)
	}
	p.CreatedAt = normTime(p.CreatedAt)
	return p
}

func normWorkspace(w apitypes.Workspace) apitypes.Workspace {
	w.CreatedAt = normTime(w.CreatedAt)
	return w
}

// normTimePtr returns a copy of *ts normalised, nil for nil.
func normTimePtr(ts *time.Time) *time.Time {
	if ts == nil {
		return nil
	}
	u := normTime(*ts)
	return &u
}

// A push is one batch: each row is kept by its rev as PutRun keeps it, a
// foreign row is refused alone and the rest are written, and a row the
// batch holds twice keeps its higher rev (ARCHITECTURE: one writer per
// read model, one transaction per push).
func testRunPutBatch(t *testing.T, s store.Store) {
	ctx := t.Context()
	old := newRun("r-old", "t1", 0)
	old.Rev = 5
	foreign := newRun("r-foreign", "t1", 1)
	foreign.NodeID = "another-node"
	for _, r := range []apitypes.Run{old, foreign} {
		if _, err := s.PutRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	stale := old
	stale.Rev, stale.State = 4, apitypes.StateFailed
	pushedForeign := newRun("r-foreign", "t1", 1)
	pushedForeign.Rev = 9
	first, second := newRun("r-new", "t1", 2), newRun("r-new", "t1", 2)
	first.Rev, second.Rev, second.State = 1, 2, apitypes.StateStopped
	wrote, refused, err := s.PutRuns(ctx, []apitypes.Run{stale, pushedForeign, first, second, {RunRef: "r-no-tenant"}})
	if err != nil {
		t.Fatalf("PutRuns: %v", err)
	}
	if wrote != 2 {
		t.Errorf("wrote %d rows, want 2 (r-new twice)", wrote)
	}
	if len(refused) != 2 || !errors.Is(refused["r-foreign"], store.ErrConflict) || refused["r-no-tenant"] == nil {
		t.Errorf("refused = %v, want r-foreign (ErrConflict) and r-no-tenant", refused)
	}
	if got, _ := s.GetRun(ctx, "r-old"); got.Rev != 5 {
		t.Errorf("r-old rev %d after a stale push, want 5", got.Rev)
	}
	if got, _ := s.GetRun(ctx, "r-new"); got.Rev != 2 || got.State != apitypes.StateStopped {
		t.Errorf("r-new = rev %d %s, want rev 2 stopped", got.Rev, got.State)
	}
	if got, _ := s.GetRun(ctx, "r-foreign"); got.NodeID != "another-node" {
		t.Errorf("r-foreign's node = %q after a foreign push, want another-node", got.NodeID)
	}
}
