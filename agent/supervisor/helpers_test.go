package supervisor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// waitFor bounds every wait; nothing in these tests sleeps.
const waitFor = 8 * time.Second

// pollEvery is the pace of the polls that no change notification covers
// (ledger rows written off the request path, a pid being reaped).
const pollEvery = 5 * time.Millisecond

const tenant = "ten_test1"

// env is one agent's state file and run runtime: a real bbolt file in
// t.TempDir(), the ring, the ledger and the supervisor on it. open and
// crash let a test restart the agent on the same file.
type env struct {
	t    *testing.T
	dir  string
	path string
	o    supervisor.Options // without DB, Ring, Ledger, Registry, OnChange, Log
	// profilesDir is the registry's (the agent's state dir/profiles).
	profilesDir string

	db    *bbolt.DB
	rings *ring.Store
	led   *ledger.Ledger
	reg   *registry.Registry
	sup   *supervisor.Supervisor

	changed chan struct{} // one pending notification of OnChange

	logMu  sync.Mutex
	logOff bool
}

func newEnv(t *testing.T, o supervisor.Options) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir, path: filepath.Join(dir, "agent.db"), o: o, changed: make(chan struct{}, 1)}
	t.Cleanup(func() {
		e.shut()
		e.logMu.Lock()
		e.logOff = true
		e.logMu.Unlock()
	})
	e.open()
	return e
}

// open opens the state file and everything on it, as the agent's start
// does (agentd.openRuns).
func (e *env) open() {
	e.t.Helper()
	db, err := bbolt.Open(e.path, 0o600, &bbolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		e.t.Fatalf("bbolt.Open: %v", err)
	}
	rings, err := ring.Open(db, ring.Options{})
	if err != nil {
		db.Close()
		e.t.Fatalf("ring.Open: %v", err)
	}
	led, err := ledger.Open(db)
	if err != nil {
		rings.Close()
		db.Close()
		e.t.Fatalf("ledger.Open: %v", err)
	}
	reg, err := registry.Open(registry.Options{DB: db, Drivers: e.o.Drivers, ProfilesDir: e.profilesDir})
	if err != nil {
		rings.Close()
		db.Close()
		e.t.Fatalf("registry.Open: %v", err)
	}
	o := e.o
	o.DB, o.Ring, o.Ledger, o.Registry = db, rings, led, reg
	o.OnChange = func(string) {
		select {
		case e.changed <- struct{}{}:
		default:
		}
	}
	o.Log = slog.New(slog.NewTextHandler(envLog{e}, nil))
	sup, err := supervisor.Open(o)
	if err != nil {
		rings.Close()
		db.Close()
		e.t.Fatalf("supervisor.Open: %v", err)
	}
	e.db, e.rings, e.led, e.reg, e.sup = db, rings, led, reg, sup
}

// envLog writes the supervisor's lines to the test log, until logOff.
type envLog struct{ e *env }

func (w envLog) Write(p []byte) (int, error) {
	w.e.logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (e *env) logf(format string, args ...any) {
	e.logMu.Lock()
	defer e.logMu.Unlock()
	if !e.logOff {
		e.t.Logf(format, args...)
	}
}

// shut is the orderly stop: Close kills the children, then the ring and
// the file close.
func (e *env) shut() {
	if e.sup != nil {
		closeBounded(e.t, e.sup)
	}
	if e.rings != nil {
		e.rings.Close()
	}
	if e.db != nil {
		e.db.Close()
	}
	e.sup, e.rings, e.db = nil, nil, nil
}

// closeBounded closes sup, failing (instead of hanging the test binary)
// when a generation it lost track of keeps Close waiting.
func closeBounded(t *testing.T, sup *supervisor.Supervisor) {
	done := make(chan struct{})
	go func() { sup.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Errorf("Supervisor.Close: not done within %v (a generation it no longer tracks?)", waitFor)
	}
}

// crash is an agent that dies without its Close: the ring and the file go
// away under a supervisor that still has live generations. It returns that
// supervisor; the caller closes it once its children are gone, so that its
// goroutines end within the test.
func (e *env) crash() *supervisor.Supervisor {
	e.t.Helper()
	old := e.sup
	e.sup = nil
	e.rings.Close()
	e.rings = nil
	if err := e.db.Close(); err != nil {
		e.t.Fatalf("db.Close: %v", err)
	}
	e.db = nil
	return old
}

// await waits until cond holds, re-checking on every run change and every
// pollEvery.
func (e *env) await(what string, cond func() bool) {
	e.t.Helper()
	timer := time.NewTimer(waitFor)
	defer timer.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !cond() {
		select {
		case <-e.changed:
		case <-tick.C:
		case <-timer.C:
			e.t.Fatalf("%s: not within %v", what, waitFor)
		}
	}
}

func (e *env) get(ref string) apitypes.Run {
	e.t.Helper()
	r, err := e.sup.Get(ref)
	if err != nil {
		e.t.Fatalf("Get(%s): %v", ref, err)
	}
	return r
}

// awaitState waits for the derived state and returns the row.
func (e *env) awaitState(ref, state string) apitypes.Run {
	e.t.Helper()
	var r apitypes.Run
	e.await(ref+" state "+state, func() bool {
		r = e.get(ref)
		return r.State == state
	})
	return r
}

func (e *env) events(ref string) []apitypes.Event {
	e.t.Helper()
	evs, _, err := e.sup.Events(ref, 0, 1000)
	if err != nil {
		e.t.Fatalf("Events(%s): %v", ref, err)
	}
	return evs
}

func kinds(evs []apitypes.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Kind
	}
	return out
}

// awaitKinds waits until the run's ledger holds exactly want, in order.
func (e *env) awaitKinds(ref string, want ...string) []apitypes.Event {
	e.t.Helper()
	var evs []apitypes.Event
	timer := time.NewTimer(waitFor)
	defer timer.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		evs = e.events(ref)
		if equal(kinds(evs), want) {
			return evs
		}
		select {
		case <-tick.C:
		case <-timer.C:
			e.t.Fatalf("events of %s: got %v, want %v", ref, kinds(evs), want)
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func last(evs []apitypes.Event) apitypes.Event {
	if len(evs) == 0 {
		return apitypes.Event{}
	}
	return evs[len(evs)-1]
}

// wantErr checks that err is a refusal of kind want with a sentence.
func wantErr(t *testing.T, what string, err error, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v (%T), want %v", what, err, err, want)
	}
	if err.Error() == "" || err.Error() == want.Error() {
		t.Fatalf("%s: got %q, want a sentence a person can act on", what, err)
	}
}

// detail decodes an event's detail object.
func detail(t *testing.T, ev apitypes.Event) map[string]any {
	t.Helper()
	m := map[string]any{}
	if len(ev.Detail) == 0 {
		return m
	}
	if err := json.Unmarshal(ev.Detail, &m); err != nil {
		t.Fatalf("detail of %s: %v", ev.Kind, err)
	}
	return m
}

// tail is one viewer of a run's output, read by its own goroutine into a
// copy of every frame.
type tail struct {
	t *testing.T
	v *ring.Viewer

	mu     sync.Mutex
	frames []ring.Frame
	texts  [ring.Setup + 1]bytes.Buffer // by stream
	end    *ring.End
	err    error
	wake   chan struct{}
	done   chan struct{}
	closed bool
}

// attach subscribes through Supervisor.Attach and starts reading.
func (e *env) tail(ref string, from uint64) *tail {
	e.t.Helper()
	v, _, err := e.sup.Attach(ref, from, 1<<16)
	if err != nil {
		e.t.Fatalf("Attach(%s): %v", ref, err)
	}
	tl := &tail{t: e.t, v: v, wake: make(chan struct{}), done: make(chan struct{})}
	go tl.run()
	e.t.Cleanup(func() { v.Close(); <-tl.done })
	return tl
}

func (tl *tail) run() {
	defer close(tl.done)
	for {
		ev, err := tl.v.Next(context.Background())
		tl.mu.Lock()
		switch {
		case err != nil:
			tl.err, tl.closed = err, true
		case ev.Kind == ring.EventFrame:
			f := ev.Frame
			f.Data = bytes.Clone(f.Data)
			tl.frames = append(tl.frames, f)
			tl.texts[f.Stream].Write(f.Data)
		case ev.Kind == ring.EventEnd:
			end := ev.End
			tl.end, tl.closed = &end, true
		}
		closed := tl.closed
		close(tl.wake)
		tl.wake = make(chan struct{})
		tl.mu.Unlock()
		if closed {
			return
		}
	}
}

// text is the concatenated data of the frames of one stream.
func (tl *tail) text(s ring.Stream) string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.texts[s].String()
}

func (tl *tail) snapshot() []ring.Frame {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]ring.Frame(nil), tl.frames...)
}

// await waits until cond holds for the frames read so far. The wake
// channel is taken before cond is checked, so no frame is missed.
func (tl *tail) await(what string, cond func(tl *tail) bool) {
	tl.t.Helper()
	timer := time.NewTimer(waitFor)
	defer timer.Stop()
	for {
		tl.mu.Lock()
		wake, closed, err, end := tl.wake, tl.closed, tl.err, tl.end
		tl.mu.Unlock()
		if cond(tl) {
			return
		}
		if closed {
			tl.t.Fatalf("%s: the viewer ended first (end %+v, err %v); stdout %.2000q stderr %.2000q pty %.2000q",
				what, end, err, tl.text(ring.Stdout), tl.text(ring.Stderr), tl.text(ring.PTY))
		}
		select {
		case <-wake:
		case <-timer.C:
			so := tl.text(ring.Stdout)
			tl.t.Fatalf("%s: not within %v; %d frames; stdout (%d bytes) %.1000q ... %.1000q stderr %.2000q pty %.2000q",
				what, waitFor, len(tl.snapshot()), len(so), so, tail1000(so), tl.text(ring.Stderr), tl.text(ring.PTY))
		}
	}
}

// awaitText waits until stream s holds every one of subs.
func (tl *tail) awaitText(s ring.Stream, subs ...string) {
	tl.t.Helper()
	tl.await(s.String()+" holds "+join(subs), func(tl *tail) bool {
		text := tl.text(s)
		for _, sub := range subs {
			if !bytes.Contains([]byte(text), []byte(sub)) {
				return false
			}
		}
		return true
	})
}

// awaitEnd waits for the viewer's end and returns it.
func (tl *tail) awaitEnd() ring.End {
	tl.t.Helper()
	select {
	case <-tl.done:
	case <-time.After(waitFor):
		tl.t.Fatalf("viewer: no end within %v", waitFor)
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.end == nil {
		tl.t.Fatalf("viewer: ended with %v, want an End", tl.err)
	}
	return *tl.end
}

func join(ss []string) string {
	b, _ := json.Marshal(ss)
	return string(b)
}

// replay attaches to a run that is not live and reads every event until
// the end: the frames, then the End (R-ATT-6).
func (e *env) replay(ref string) ([]ring.Frame, ring.End) {
	e.t.Helper()
	v, live, err := e.sup.Attach(ref, 0, 0)
	if err != nil {
		e.t.Fatalf("Attach(%s): %v", ref, err)
	}
	defer v.Close()
	if state := e.get(ref).State; live || apitypes.Live(state) {
		e.t.Fatalf("Attach(%s): live=%v state=%s, want not live", ref, live, state)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var frames []ring.Frame
	for {
		ev, err := v.Next(ctx)
		if err != nil {
			e.t.Fatalf("replay %s: Next: %v after %d frames", ref, err, len(frames))
		}
		switch ev.Kind {
		case ring.EventFrame:
			frames = append(frames, ev.Frame)
		case ring.EventLag:
			e.t.Fatalf("replay %s: unexpected lag %+v", ref, ev.Lag)
		case ring.EventEnd:
			return frames, ev.End
		}
	}
}

// checkSeqs is R-RC-6 on frames replayed from the oldest: one seq space,
// strictly increasing by one (nothing was evicted), generations in order.
func checkSeqs(t *testing.T, frames []ring.Frame) {
	t.Helper()
	for i := 1; i < len(frames); i++ {
		if frames[i].Seq != frames[i-1].Seq+1 {
			t.Fatalf("frame %d: seq %d after %d, want %d", i, frames[i].Seq, frames[i-1].Seq, frames[i-1].Seq+1)
		}
		if frames[i].Generation < frames[i-1].Generation {
			t.Fatalf("frame %d (seq %d): generation %d after %d", i, frames[i].Seq, frames[i].Generation, frames[i-1].Generation)
		}
	}
}

func tail1000(s string) string {
	if len(s) > 1000 {
		return s[len(s)-1000:]
	}
	return s
}

func sameCode(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(c *int) string {
	if c == nil {
		return "null"
	}
	return fmt.Sprint(*c)
}
