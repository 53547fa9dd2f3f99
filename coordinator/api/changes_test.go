package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/sse"
)

// changeClient reads one change stream.
type changeClient struct {
	resp   *http.Response
	events chan sse.Event
}

func openChanges(t *testing.T, base, tok, tenant, lastID string) *changeClient {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+Base+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set(HeaderTenant, tenant)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	c := &changeClient{resp: resp, events: make(chan sse.Event, 64)}
	go func() {
		defer close(c.events)
		r := sse.NewReader(resp.Body)
		for {
			ev, err := r.Next()
			if err != nil {
				return
			}
			c.events <- ev
		}
	}()
	t.Cleanup(func() { resp.Body.Close() })
	return c
}

// next is the stream's next event, within a deadline.
func (c *changeClient) next(t *testing.T) sse.Event {
	t.Helper()
	select {
	case ev, ok := <-c.events:
		if !ok {
			t.Fatal("the change stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no change event within 10 s")
	}
	return sse.Event{}
}

func (c *changeClient) close() { c.resp.Body.Close() }

// R-CHG-1..4: a pin and a state change arrive in order, each once, only in
// the caller's tenant and only the caller's own marks; a reconnect with
// Last-Event-ID resumes after that event with nothing repeated; a cursor
// of another process, or one older than the log, gets a reset.
func TestChangeStream(t *testing.T) {
	s, st := newTestServer(t)
	srv := httptest.NewServer(handler(s))
	t.Cleanup(srv.Close)
	alice := principal(t, st, "alice", map[string]string{"t1": store.RoleAdmin, "t2": store.RoleAdmin})
	bob := principal(t, st, "bob", map[string]string{"t1": store.RoleAdmin})
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	row := func(ref, tenant, state string, rev uint64) apitypes.Run {
		return apitypes.Run{RunRef: ref, Tenant: tenant, NodeID: "n1", State: state, Driver: "claude", Generation: 1,
			Isolation: apitypes.IsolationNative, ProviderProfileRef: "pp", CreatedAt: t0, Rev: rev}
	}
	pushRow(t, s, row("run_a", "t1", apitypes.StateRunning, 1))
	pushRow(t, s, row("run_x", "t2", apitypes.StateRunning, 1))

	c := openChanges(t, srv.URL, alice, "t1", "")
	first := c.next(t)
	if first.Type != apitypes.ChangeReset || string(first.Data) != `{"reason":"new"}` {
		t.Fatalf("first event: got %s %s, want reset {reason:new}", first.Type, first.Data)
	}
	post := func(tok, path string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+Base+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set(HeaderTenant, "t1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %v %v", path, resp.StatusCode, err)
		}
		resp.Body.Close()
	}
	post(bob, "/runs/run_a/pin")                             // bob's mark: not alice's to see
	post(alice, "/runs/run_a/pin")                           // alice's
	pushRow(t, s, row("run_x", "t2", apitypes.StateIdle, 2)) // another tenant
	pushRow(t, s, row("run_a", "t1", apitypes.StateIdle, 2)) // the turn ended
	pushRow(t, s, row("run_a", "t1", apitypes.StateIdle, 2)) // the same rev again: no change

	pin := c.next(t)
	var mc apitypes.MarkChange
	if json.Unmarshal(pin.Data, &mc); pin.Type != apitypes.ChangeMark || mc.RunRef != "run_a" || !mc.Pinned {
		t.Fatalf("second event: got %s %s, want alice's mark with pinned true", pin.Type, pin.Data)
	}
	state := c.next(t)
	var r apitypes.Run
	if json.Unmarshal(state.Data, &r); state.Type != apitypes.ChangeRun || r.RunRef != "run_a" || r.State != apitypes.StateIdle ||
		r.Attention == nil || *r.Attention != apitypes.AttentionNeedsInput || !r.Pinned {
		t.Fatalf("third event: got %s %s, want run_a idle, needs_input, pinned for alice", state.Type, state.Data)
	}
	if pin.ID == "" || pin.ID == first.ID || state.ID == pin.ID {
		t.Errorf("event ids: reset %q, mark %q, run %q; want distinct cursors", first.ID, pin.ID, state.ID)
	}
	// A rename is the next change alice sees; nothing of tenant t2 or of
	// bob's marks came between.
	req, _ := http.NewRequest(http.MethodPut, srv.URL+Base+"/runs/run_a/name", strings.NewReader(`{"name":"parser"}`))
	req.Header.Set("Authorization", "Bearer "+alice)
	req.Header.Set(HeaderTenant, "t1")
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("rename: %v %v", resp, err)
	}
	named := c.next(t)
	if json.Unmarshal(named.Data, &r); named.Type != apitypes.ChangeRun || r.Name != "parser" {
		t.Fatalf("fourth event: got %s %s, want run_a named parser", named.Type, named.Data)
	}
	c.close()

	// R-CHG-4: resume after the pin: the state change and the rename, once.
	c = openChanges(t, srv.URL, alice, "t1", pin.ID)
	if ev := c.next(t); ev.ID != state.ID || ev.Type != apitypes.ChangeRun {
		t.Errorf("resumed after the pin: got %s %s, want the state change %s", ev.Type, ev.ID, state.ID)
	}
	if ev := c.next(t); ev.ID != named.ID {
		t.Errorf("resumed: second event %s %s, want the rename %s", ev.Type, ev.ID, named.ID)
	}
	c.close()

	for _, tc := range []struct{ id, reason string }{
		{"0123456789ab-1", apitypes.ResetRestart}, // another process's cursor
		{"garbage", apitypes.ResetRestart},
		{s.changes.cursor(1 << 40), apitypes.ResetExpired}, // ahead of the log
	} {
		c = openChanges(t, srv.URL, alice, "t1", tc.id)
		ev := c.next(t)
		var rs apitypes.ChangeResetEvent
		if json.Unmarshal(ev.Data, &rs); ev.Type != apitypes.ChangeReset || rs.Reason != tc.reason {
			t.Errorf("Last-Event-ID %q: got %s %s, want reset %s", tc.id, ev.Type, ev.Data, tc.reason)
		}
		c.close()
	}

	// The log keeps only so much: a cursor it dropped is a reset. (A
	// server of its own: the streams above may still be ending.)
	s, st = newTestServer(t)
	s.changes = newChangeLog(2)
	srv = httptest.NewServer(handler(s))
	t.Cleanup(srv.Close)
	alice = principal(t, st, "alice", map[string]string{"t1": store.RoleAdmin})
	pushRow(t, s, row("run_a", "t1", apitypes.StateRunning, 3))
	old := s.changes.cursor(1)
	for rev := uint64(4); rev < 10; rev++ {
		pushRow(t, s, row("run_a", "t1", apitypes.StateRunning, rev))
	}
	c = openChanges(t, srv.URL, alice, "t1", old)
	if ev := c.next(t); ev.Type != apitypes.ChangeReset || !strings.Contains(string(ev.Data), apitypes.ResetExpired) {
		t.Errorf("a cursor the log dropped: got %s %s, want reset expired", ev.Type, ev.Data)
	}
	c.close()
}

// metaCounter counts the store's session meta reads.
type metaCounter struct {
	store.Store
	reads atomic.Int64
}

func (m *metaCounter) GetRunMeta(ctx context.Context, refs []string) (map[string]store.RunMeta, error) {
	m.reads.Add(1)
	return m.Store.GetRunMeta(ctx, refs)
}

// R-CHG-2 at scale (issue 34): a run change is rendered once for every
// stream, not once per stream: three streams read the run's session meta
// once between them; the two callers without marks on the run get the
// same bytes, and the caller who pinned it gets the run pinned.
func TestChangeRenderedOnce(t *testing.T) {
	var mc *metaCounter
	s, st := newTestServer(t, func(o *Options) {
		mc = &metaCounter{Store: o.Store}
		o.Store = mc
	})
	srv := httptest.NewServer(handler(s))
	t.Cleanup(srv.Close)
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	row := apitypes.Run{RunRef: "run_a", Tenant: "t1", NodeID: "n1", State: apitypes.StateRunning, Driver: "claude", Generation: 1,
		Isolation: apitypes.IsolationNative, ProviderProfileRef: "pp", CreatedAt: t0, Rev: 1}
	pushRow(t, s, row)
	var streams []*changeClient
	for _, name := range []string{"alice", "bob", "carol"} {
		tok := principal(t, st, name, map[string]string{"t1": store.RoleAdmin})
		if name == "bob" {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+Base+"/runs/run_a/pin", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set(HeaderTenant, "t1")
			if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("pin: %v %v", resp, err)
			}
		}
		c := openChanges(t, srv.URL, tok, "t1", "")
		if ev := c.next(t); ev.Type != apitypes.ChangeReset {
			t.Fatalf("%s: first event %s, want reset", name, ev.Type)
		}
		streams = append(streams, c)
	}
	before := mc.reads.Load()
	row.State, row.Rev = apitypes.StateIdle, 2
	pushRow(t, s, row)
	var got [][]byte
	for i, c := range streams {
		ev := c.next(t)
		var r apitypes.Run
		if json.Unmarshal(ev.Data, &r); ev.Type != apitypes.ChangeRun || r.State != apitypes.StateIdle || r.Pinned != (i == 1) {
			t.Fatalf("stream %d: %s %s, want run_a idle, pinned only for bob", i, ev.Type, ev.Data)
		}
		got = append(got, ev.Data)
	}
	if n := mc.reads.Load() - before; n != 1 {
		t.Errorf("the change read the session meta %d times for three streams, want once", n)
	}
	if !bytes.Equal(got[0], got[2]) {
		t.Errorf("two callers without marks got different renderings:\n%s\n%s", got[0], got[2])
	}
}

// The bounded log: after() from any kept cursor returns what followed it,
// in order; from a dropped or future one, not ok.
func TestChangeLogBounds(t *testing.T) {
	l := newChangeLog(4)
	for range 20 {
		l.add(change{event: "run"})
	}
	for _, tc := range []struct {
		from uint64
		ok   bool
		n    int
	}{{20, true, 0}, {19, true, 1}, {16, true, 4}, {10, false, 0}, {0, false, 0}, {21, false, 0}} {
		got, ok, head, _ := l.after(tc.from)
		if ok != tc.ok || len(got) != tc.n || head != 20 {
			t.Errorf("after(%d): got %d changes, ok %v, head %d; want %d, %v, 20", tc.from, len(got), ok, head, tc.n, tc.ok)
		}
		for i, c := range got {
			if c.seq != tc.from+uint64(i)+1 {
				t.Errorf("after(%d)[%d]: seq %d, want %d", tc.from, i, c.seq, tc.from+uint64(i)+1)
			}
		}
	}
}

// pushRow is what the fleet does with a row an agent pushed: the index
// takes it when it is newer, and the API hears of it (R-CHG-2).
func pushRow(t *testing.T, s *Server, r apitypes.Run) {
	t.Helper()
	wrote, err := s.o.Store.PutRun(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	if wrote {
		fleetObserver{s: s.core}.RunsIndexed(t.Context(), []apitypes.Run{r})
	}
}

// R-CHG-6 (issue 35, finding 7): change streams are capped per principal
// and in all: past either, 429 too_many_change_streams, checked against
// the document; a closed stream gives its slot back.
func TestChangeStreamCap(t *testing.T) {
	s, st := newTestServer(t, func(o *Options) { o.ChangeStreams = ChangeStreamLimits{PerPrincipal: 3, Total: 5} })
	srv := httptest.NewServer(handler(s))
	t.Cleanup(srv.Close)
	viewer := principal(t, st, "viewer", map[string]string{"t1": store.RoleViewer})
	other := principal(t, st, "other", map[string]string{"t1": store.RoleViewer})
	third := principal(t, st, "third", map[string]string{"t1": store.RoleViewer})
	try := func(tok string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+Base+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set(HeaderTenant, "t1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b struct {
			Error struct{ Code string } `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&b)
		return resp.StatusCode, b.Error.Code
	}
	var mine []*changeClient
	for range 3 {
		c := openChanges(t, srv.URL, viewer, "t1", "")
		c.next(t) // the reset: the stream holds its slot
		mine = append(mine, c)
	}
	if status, code := try(viewer); status != 429 || code != "too_many_change_streams" {
		t.Fatalf("a 4th stream of one principal: got %d %s, want 429 too_many_change_streams", status, code)
	}
	for range 2 {
		openChanges(t, srv.URL, other, "t1", "").next(t)
	}
	if status, code := try(third); status != 429 || code != "too_many_change_streams" {
		t.Fatalf("a stream past the total: got %d %s, want 429 too_many_change_streams", status, code)
	}
	mine[0].close()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if status, _ := try(third); status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed stream's slot was not given back within 10 s")
		}
		<-tick.C
	}
}

// fakeReplicas is the database's notifications between replicas, as
// FollowReplicas uses them: what this replica announces, and a hand on
// what it hears.
type fakeReplicas struct {
	store.Replicas
	announced chan []store.RunKey
	heard     chan func([]store.RunKey)
}

func (f *fakeReplicas) AnnounceRuns(_ context.Context, keys []store.RunKey) error {
	f.announced <- keys
	return nil
}

func (f *fakeReplicas) WatchRuns(ctx context.Context, fn func([]store.RunKey)) error {
	fn(nil) // connected
	f.heard <- fn
	<-ctx.Done()
	return ctx.Err()
}

// R-CHG-5: a replica announces the runs its index took, and logs the runs
// another one announces as its own run and run_removed events (the tenant's
// only); after its listening connection broke, every stream gets a reset.
func TestFollowReplicas(t *testing.T) {
	s, st := newTestServer(t)
	srv := httptest.NewServer(handler(s))
	t.Cleanup(srv.Close)
	reps := &fakeReplicas{announced: make(chan []store.RunKey, 8), heard: make(chan func([]store.RunKey), 1)}
	go s.FollowReplicas(t.Context(), reps)
	heard := <-reps.heard
	c := openChanges(t, srv.URL, principal(t, st, "alice", map[string]string{"t1": store.RoleAdmin}), "t1", "")
	if ev := c.next(t); ev.Type != apitypes.ChangeReset {
		t.Fatalf("first event %s, want reset", ev.Type)
	}
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	row := func(ref, tenant string) apitypes.Run {
		return apitypes.Run{RunRef: ref, Tenant: tenant, NodeID: "n1", State: apitypes.StateRunning, Driver: "claude", Generation: 1,
			Isolation: apitypes.IsolationNative, ProviderProfileRef: "pp", CreatedAt: t0, Rev: 1}
	}

	// What this replica's index takes is announced.
	pushRow(t, s, row("run_here", "t1"))
	if ev := c.next(t); ev.Type != apitypes.ChangeRun || !strings.Contains(string(ev.Data), "run_here") {
		t.Fatalf("the local row: %s %s", ev.Type, ev.Data)
	}
	if k := <-reps.announced; len(k) != 1 || k[0] != (store.RunKey{Tenant: "t1", Ref: "run_here"}) {
		t.Fatalf("announced %v, want run_here of t1", k)
	}

	// What another replica announces is read from the store and logged: a
	// row of another tenant is not this caller's, a run no longer indexed
	// is removed.
	for _, r := range []apitypes.Run{row("run_there", "t1"), row("run_other", "t2")} {
		if _, err := st.PutRun(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	heard([]store.RunKey{{Tenant: "t2", Ref: "run_other"}, {Tenant: "t1", Ref: "run_there"}, {Tenant: "t1", Ref: "run_gone"}})
	got := map[string]string{}
	for range 2 {
		ev := c.next(t)
		var r struct {
			RunRef string `json:"run_ref"`
		}
		json.Unmarshal(ev.Data, &r)
		got[r.RunRef] = ev.Type
	}
	if got["run_there"] != apitypes.ChangeRun || got["run_gone"] != apitypes.ChangeRunRemoved {
		t.Fatalf("announced by another replica: %v, want run_there run and run_gone run_removed", got)
	}
	// Announcements leave in order: the next one is this replica's own
	// next row, not what it heard.
	pushRow(t, s, row("run_here2", "t1"))
	if ev := c.next(t); ev.Type != apitypes.ChangeRun {
		t.Fatalf("the second local row: %s %s", ev.Type, ev.Data)
	}
	if k := <-reps.announced; len(k) != 1 || k[0].Ref != "run_here2" {
		t.Fatalf("announced %v, want run_here2 alone: what another replica announced is not announced again", k)
	}

	// The listening connection came back: what was announced meanwhile
	// is missed, so the stream is told to refetch.
	heard(nil)
	ev := c.next(t)
	var reset apitypes.ChangeResetEvent
	if json.Unmarshal(ev.Data, &reset); ev.Type != apitypes.ChangeReset || reset.Reason != apitypes.ResetMissed {
		t.Fatalf("after a reconnect: %s %s, want reset missed", ev.Type, ev.Data)
	}
}
