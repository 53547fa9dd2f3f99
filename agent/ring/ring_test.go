package ring

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// testDeadline bounds every wait in these tests; nothing sleeps.
const testDeadline = 20 * time.Second

func openDB(t testing.TB, path string) *bbolt.DB {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("open db: %v", err)
	}
	return db
}

// env is one bbolt file with a Store on it, reopenable like an agent restart.
type env struct {
	t    testing.TB
	path string
	opts Options
	db   *bbolt.DB
	s    *Store
}

func newEnv(t testing.TB, o Options) *env {
	t.Helper()
	e := &env{t: t, path: filepath.Join(t.TempDir(), "agent.db"), opts: o}
	e.open()
	t.Cleanup(e.close)
	return e
}

func (e *env) open() {
	e.t.Helper()
	e.db = openDB(e.t, e.path)
	s, err := Open(e.db, e.opts)
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	e.s = s
}

func (e *env) close() {
	if e.s != nil {
		if err := e.s.Close(); err != nil {
			e.t.Errorf("Store.Close: %v", err)
		}
		e.s = nil
	}
	if e.db != nil {
		e.db.Close()
		e.db = nil
	}
}

func (e *env) reopen() { e.close(); e.open() }

func (e *env) ring(ref string) *Ring {
	e.t.Helper()
	r, err := e.s.Ring(ref)
	if err != nil {
		e.t.Fatalf("Ring(%q): %v", ref, err)
	}
	return r
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	t.Cleanup(cancel)
	return ctx
}

func mustAppend(t testing.TB, r *Ring, gen uint32, s Stream, data []byte) uint64 {
	t.Helper()
	seq, err := r.Append(gen, s, data)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return seq
}

func payload(i int) []byte { return []byte(fmt.Sprintf("frame %d;", i)) }

// readFrames reads events until it has n frames, failing on anything else.
func readFrames(t testing.TB, ctx context.Context, v *Viewer, n int) []Frame {
	t.Helper()
	var out []Frame
	for len(out) < n {
		ev, err := v.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %d frames: %v", len(out), err)
		}
		if ev.Kind != EventFrame {
			t.Fatalf("event %d: got %v %+v, want a frame", len(out), ev.Kind, ev)
		}
		out = append(out, ev.Frame)
	}
	return out
}

func nextEvent(t testing.TB, ctx context.Context, v *Viewer) Event {
	t.Helper()
	ev, err := v.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return ev
}

func wantDense(t testing.TB, fs []Frame, from uint64) {
	t.Helper()
	for i, f := range fs {
		if want := from + uint64(i); f.Seq != want {
			t.Fatalf("frame %d: got seq %d, want %d", i, f.Seq, want)
		}
	}
}

func TestStreamString(t *testing.T) {
	for s, want := range map[Stream]string{Stdout: "stdout", Stderr: "stderr", PTY: "pty", 9: "stream(9)"} {
		if got := s.String(); got != want {
			t.Errorf("Stream(%d).String() = %q, want %q", s, got, want)
		}
	}
}

func TestOptionsDefaults(t *testing.T) {
	var o Options
	if err := o.CheckAndSetDefaults(); err != nil {
		t.Fatal(err)
	}
	// R-RC-7: 8 MiB or 65,536 frames per run.
	if o.MaxBytes != 8<<20 || o.MaxFrames != 65536 || o.FlushFrames != 256 || o.FlushBytes != 1<<20 || o.Now == nil {
		t.Errorf("defaults: got %+v", o)
	}
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"MaxBytes", Options{MaxBytes: -1}},
		{"MaxFrames", Options{MaxFrames: -1}},
		{"FlushFrames", Options{FlushFrames: -1}},
		{"FlushBytes", Options{FlushBytes: -1}},
	} {
		err := tc.o.CheckAndSetDefaults()
		if !errors.Is(err, ErrBadOptions) || !bytes.Contains([]byte(err.Error()), []byte(tc.name)) {
			t.Errorf("%s: got %v, want ErrBadOptions naming the field", tc.name, err)
		}
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t, Options{})
	for _, ref := range []string{"", string(make([]byte, MaxRunRefLen+1))} {
		if _, err := e.s.Ring(ref); !errors.Is(err, ErrBadRunRef) {
			t.Errorf("Ring(%d bytes): got %v, want ErrBadRunRef", len(ref), err)
		}
	}
	r := e.ring("run_1")
	if _, err := r.Append(1, 0, []byte("x")); !errors.Is(err, ErrBadStream) {
		t.Errorf("Append stream 0: got %v, want ErrBadStream", err)
	}
	if seq, err := r.Append(1, Stdout, nil); seq != 0 || err != nil {
		t.Errorf("Append empty: got %d, %v, want 0, nil", seq, err)
	}
	if f, l := r.Range(); f != 0 || l != 0 {
		t.Errorf("Range of an empty ring: got %d..%d, want 0..0", f, l)
	}
}

// R-RC-6: seq is per run, strictly increasing across generations and agent
// restarts, never reused.
func TestSeqAcrossGenerationsAndRestart(t *testing.T) {
	e := newEnv(t, Options{})
	r := e.ring("run_1")
	other := e.ring("run_2")
	type rec struct {
		gen  uint32
		s    Stream
		data []byte
	}
	var want []rec
	add := func(r *Ring, gen uint32, s Stream, i int) {
		t.Helper()
		seq := mustAppend(t, r, gen, s, payload(i))
		if r.Ref() == "run_1" {
			want = append(want, rec{gen, s, payload(i)})
			if seq != uint64(len(want)) {
				t.Fatalf("Append %d: got seq %d, want %d", i, seq, len(want))
			}
		}
	}
	for i := range 10 {
		add(r, 1, Stdout, i)
		add(other, 1, Stdout, i)
	}
	for i := 10; i < 15; i++ {
		add(r, 2, Stderr, i) // a resume: new generation, same seq line (R-RC-3)
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	r = e.ring("run_1")
	if f, l := r.Range(); f != 1 || l != 15 {
		t.Fatalf("Range after restart: got %d..%d, want 1..15", f, l)
	}
	for i := 15; i < 20; i++ {
		add(r, 3, PTY, i)
	}
	e.reopen() // Close flushes without an explicit Flush
	r = e.ring("run_1")
	for i := 20; i < 22; i++ {
		add(r, 3, PTY, i)
	}
	ctx := ctxT(t)
	got := readFrames(t, ctx, r.Subscribe(0, 0), len(want))
	wantDense(t, got, 1)
	for i, f := range got {
		w := want[i]
		if f.Generation != w.gen || f.Stream != w.s || !bytes.Equal(f.Data, w.data) || f.At.IsZero() || f.At.Location() != time.UTC {
			t.Errorf("frame %d: got gen %d %v %q at %v, want gen %d %v %q (UTC)", f.Seq, f.Generation, f.Stream, f.Data, f.At, w.gen, w.s, w.data)
		}
	}
	if f, l := e.ring("run_2").Range(); f != 1 || l != 10 {
		t.Errorf("run_2 Range: got %d..%d, want 1..10", f, l)
	}
}

func TestAppendSplitsLargeData(t *testing.T) {
	e := newEnv(t, Options{})
	r := e.ring("run_1")
	data := make([]byte, 3*MaxFrameData+100)
	for i := range data {
		data[i] = byte(i % 251)
	}
	if seq := mustAppend(t, r, 1, Stdout, data); seq != 4 {
		t.Fatalf("Append of %d bytes: got last seq %d, want 4", len(data), seq)
	}
	got := readFrames(t, ctxT(t), r.Subscribe(0, 0), 4)
	var joined []byte
	for i, f := range got {
		if want := min(MaxFrameData, len(data)-i*MaxFrameData); len(f.Data) != want {
			t.Errorf("frame %d: got %d bytes, want %d", f.Seq, len(f.Data), want)
		}
		joined = append(joined, f.Data...)
	}
	if !bytes.Equal(joined, data) {
		t.Error("joined frames differ from the appended data")
	}
	if got := r.Bytes(); got != int64(len(data)) {
		t.Errorf("Bytes: got %d, want %d", got, len(data))
	}
}

// R-RC-5, R-RC-7: eviction by frames and by bytes; a cursor below the
// oldest retained frame gets Lag{requested, resumed} first.
func TestEvictionAndLag(t *testing.T) {
	for _, tc := range []struct {
		name      string
		o         Options
		frameSize int
		appends   int
		first     uint64 // oldest retained after the appends
	}{
		{"frames", Options{MaxFrames: 10}, 8, 25, 16},
		{"bytes", Options{MaxBytes: 1000}, 100, 25, 16},
		{"bytes not multiple", Options{MaxBytes: 1050}, 100, 25, 16},
		{"both, frames first", Options{MaxFrames: 5, MaxBytes: 1000}, 100, 25, 21},
		{"newest kept beyond MaxBytes", Options{MaxBytes: 10}, 100, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.o)
			r := e.ring("run_1")
			for i := range tc.appends {
				mustAppend(t, r, 1, Stdout, bytes.Repeat([]byte{byte('a' + i%26)}, tc.frameSize))
			}
			if err := r.Flush(); err != nil {
				t.Fatal(err)
			}
			last := uint64(tc.appends)
			check := func(when string) {
				t.Helper()
				if f, l := r.Range(); f != tc.first || l != last {
					t.Fatalf("%s: Range got %d..%d, want %d..%d", when, f, l, tc.first, last)
				}
				n := int64(last - tc.first + 1)
				if got := r.Frames(); got != n {
					t.Errorf("%s: Frames got %d, want %d", when, got, n)
				}
				if got := r.Bytes(); got != n*int64(tc.frameSize) {
					t.Errorf("%s: Bytes got %d, want %d", when, got, n*int64(tc.frameSize))
				}
			}
			check("after flush")
			e.reopen() // counters persist with the frames
			r = e.ring("run_1")
			check("after restart")

			ctx := ctxT(t)
			for _, from := range []uint64{1, 3, tc.first - 1} {
				if from == 0 || from >= tc.first {
					continue
				}
				v := r.Subscribe(from, 0)
				ev := nextEvent(t, ctx, v)
				if want := (Lag{RequestedFrom: from, ResumedFrom: tc.first}); ev.Kind != EventLag || ev.Lag != want {
					t.Fatalf("from %d: first event %v %+v, want lag %+v", from, ev.Kind, ev.Lag, want)
				}
				wantDense(t, readFrames(t, ctx, v, int(last-tc.first+1)), tc.first)
				v.Close()
			}
			// from 0 means "the oldest retained": no Lag (R-ATT-5).
			v := r.Subscribe(0, 0)
			wantDense(t, readFrames(t, ctx, v, int(last-tc.first+1)), tc.first)
			// At or above the oldest: no Lag either.
			v = r.Subscribe(tc.first, 0)
			wantDense(t, readFrames(t, ctx, v, 1), tc.first)
		})
	}
}

// A viewer whose cursor is overtaken by eviction while it replays gets a Lag
// with the exact gap, then continues without a duplicate.
func TestLagOnStaleCursor(t *testing.T) {
	e := newEnv(t, Options{MaxFrames: 100})
	r := e.ring("run_1")
	for i := range 100 {
		mustAppend(t, r, 1, Stdout, payload(i))
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	v := r.Subscribe(1, 0)
	got := readFrames(t, ctx, v, 1) // the viewer holds one replay chunk (1..64)
	for i := 100; i < 200; i++ {
		mustAppend(t, r, 1, Stdout, payload(i))
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	if f, l := r.Range(); f != 101 || l != 200 {
		t.Fatalf("Range: got %d..%d, want 101..200", f, l)
	}
	got = append(got, readFrames(t, ctx, v, replayFrames-1)...) // the rest of the chunk it had read
	wantDense(t, got, 1)
	ev := nextEvent(t, ctx, v)
	if want := (Lag{RequestedFrom: replayFrames + 1, ResumedFrom: 101}); ev.Kind != EventLag || ev.Lag != want {
		t.Fatalf("got %v %+v, want lag %+v", ev.Kind, ev.Lag, want)
	}
	rest := readFrames(t, ctx, v, 100)
	wantDense(t, rest, 101)
	for i, f := range rest {
		if !bytes.Equal(f.Data, payload(100+i)) {
			t.Fatalf("frame %d: got %q, want %q", f.Seq, f.Data, payload(100+i))
		}
	}
}

// R-RC-6: replay then live, with Append racing Subscribe: every viewer gets
// a dense run of seqs from where it started, no gap and no duplicate.
func TestReplayThenLiveRace(t *testing.T) {
	const n = 3000
	e := newEnv(t, Options{FlushFrames: 16})
	r := e.ring("run_1")
	ctx := ctxT(t)
	progress := make(chan uint64, n)
	go func() {
		defer close(progress)
		for i := range n {
			seq, err := r.Append(1, Stream(1+i%2), payload(i))
			if err != nil {
				t.Errorf("Append: %v", err)
				return
			}
			progress <- seq
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	viewers := 0
	for seq := range progress {
		if seq%150 != 1 && seq != n {
			continue
		}
		for _, from := range []uint64{0, 1, seq, seq + 1, seq + 50} {
			viewers++
			v := r.Subscribe(from, n) // queue never overflows here: this test is about order
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer v.Close()
				want := max(from, 1)
				for want <= n {
					ev, err := v.Next(ctx)
					if err != nil {
						errs <- fmt.Errorf("from %d: Next at %d: %v", from, want, err)
						return
					}
					if ev.Kind != EventFrame || ev.Frame.Seq != want {
						errs <- fmt.Errorf("from %d: got %v seq %d, want frame %d", from, ev.Kind, ev.Frame.Seq, want)
						return
					}
					if i := int(want - 1); !bytes.Equal(ev.Frame.Data, payload(i)) || ev.Frame.Stream != Stream(1+i%2) {
						errs <- fmt.Errorf("from %d: frame %d: got %v %q", from, want, ev.Frame.Stream, ev.Frame.Data)
						return
					}
					want++
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if viewers < 50 {
		t.Fatalf("only %d viewers started", viewers)
	}
}

// 100 concurrent viewers, joining at different times, all get the identical
// sequence, then the same End.
func TestHundredViewersIdentical(t *testing.T) {
	const n, viewers = 2000, 100
	e := newEnv(t, Options{})
	r := e.ring("run_1")
	ctx := ctxT(t)
	results := make([][]Frame, viewers)
	var wg sync.WaitGroup
	start := func(i int) {
		v := r.Subscribe(0, n+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ev, err := v.Next(ctx)
				if err != nil {
					t.Errorf("viewer %d: %v", i, err)
					return
				}
				switch ev.Kind {
				case EventFrame:
					results[i] = append(results[i], ev.Frame)
				case EventEnd:
					if ev.End.Reason != "exited" {
						t.Errorf("viewer %d: end %q, want exited", i, ev.End.Reason)
					}
					if _, err := v.Next(ctx); err != io.EOF {
						t.Errorf("viewer %d: Next after End: %v, want io.EOF", i, err)
					}
					return
				default:
					t.Errorf("viewer %d: unexpected %v", i, ev.Kind)
					return
				}
			}
		}()
	}
	for i := range n {
		if i%(n/viewers) == 0 {
			start(i * viewers / n)
		}
		mustAppend(t, r, 1, Stdout, payload(i))
	}
	if err := r.End("exited"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, got := range results {
		if len(got) != n {
			t.Fatalf("viewer %d: got %d frames, want %d", i, len(got), n)
		}
		for j, f := range got {
			w := results[0][j]
			if f.Seq != w.Seq || !bytes.Equal(f.Data, w.Data) || !f.At.Equal(w.At) || f.Stream != w.Stream {
				t.Fatalf("viewer %d frame %d: got %d %q, viewer 0 got %d %q", i, j, f.Seq, f.Data, w.Seq, w.Data)
			}
		}
	}
	wantDense(t, results[0], 1)
}

// R-TR-10: a viewer that never reads is dropped with slow_viewer after its
// queue fills; Append never waits for it and another viewer gets everything.
func TestSlowViewerDropped(t *testing.T) {
	const n, queue = 5000, 16
	e := newEnv(t, Options{})
	r := e.ring("run_1")
	ctx := ctxT(t)
	slow := r.Subscribe(0, queue) // never reads until the end
	fast := r.Subscribe(0, n)
	fastDone := make(chan []Frame)
	go func() {
		var got []Frame
		for len(got) < n {
			ev, err := fast.Next(ctx)
			if err != nil || ev.Kind != EventFrame {
				t.Errorf("fast viewer: %v %v", ev.Kind, err)
				break
			}
			got = append(got, ev.Frame)
		}
		fastDone <- got
	}()
	appended := make(chan error, 1)
	go func() {
		for i := range n {
			if _, err := r.Append(1, Stdout, payload(i)); err != nil {
				appended <- err
				return
			}
		}
		appended <- r.Flush()
	}()
	select {
	case err := <-appended: // the slow viewer never held the appender back
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("Append blocked behind a viewer that does not read")
	}
	wantDense(t, <-fastDone, 1)
	// The slow viewer still gets what was queued before it was dropped, then
	// the End; it may reconnect with from = last+1 (R-RC-1).
	got := readFrames(t, ctx, slow, queue)
	wantDense(t, got, 1)
	if ev := nextEvent(t, ctx, slow); ev.Kind != EventEnd || ev.End.Reason != ReasonSlowViewer {
		t.Fatalf("slow viewer: got %v %+v, want end %q", ev.Kind, ev.End, ReasonSlowViewer)
	}
	again := r.Subscribe(got[len(got)-1].Seq+1, n)
	wantDense(t, readFrames(t, ctx, again, n-queue), queue+1)
}

// R-ATT-6, R-RC-9: End is delivered after every frame; a later Subscribe
// replays and ends; the end state survives a restart; a new generation's
// Append makes the ring live again.
func TestEndSemantics(t *testing.T) {
	e := newEnv(t, Options{})
	r := e.ring("run_1")
	ctx := ctxT(t)
	if !r.Live() {
		t.Fatal("new ring: Live() = false")
	}
	live := r.Subscribe(0, 0)
	for i := range 5 {
		mustAppend(t, r, 1, Stdout, payload(i))
	}
	if err := r.End("exited"); err != nil {
		t.Fatal(err)
	}
	if r.Live() || r.EndReason() != "exited" {
		t.Fatalf("after End: Live %v reason %q", r.Live(), r.EndReason())
	}
	if f, l := r.Range(); f != 1 || l != 5 {
		t.Fatalf("End returned before its frames were committed: Range %d..%d", f, l)
	}
	wantEnd := func(v *Viewer, frames int, from uint64, reason string) {
		t.Helper()
		wantDense(t, readFrames(t, ctx, v, frames), from)
		if ev := nextEvent(t, ctx, v); ev.Kind != EventEnd || ev.End.Reason != reason {
			t.Fatalf("got %v %+v, want end %q", ev.Kind, ev.End, reason)
		}
		if _, err := v.Next(ctx); err != io.EOF {
			t.Fatalf("Next after End: %v, want io.EOF", err)
		}
	}
	wantEnd(live, 5, 1, "exited")
	wantEnd(r.Subscribe(0, 0), 5, 1, "exited")
	wantEnd(r.Subscribe(4, 0), 2, 4, "exited")
	wantEnd(r.Subscribe(6, 0), 0, 6, "exited") // reconnect at last+1 of an ended run

	e.reopen()
	r = e.ring("run_1")
	if r.Live() || r.EndReason() != "exited" {
		t.Fatalf("after restart: Live %v reason %q, want ended", r.Live(), r.EndReason())
	}
	wantEnd(r.Subscribe(0, 0), 5, 1, "exited")

	// Resume: a new generation appends to the same ring (R-RC-3).
	mustAppend(t, r, 2, Stdout, payload(5))
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	if !r.Live() {
		t.Fatal("Append after End did not make the ring live")
	}
	v := r.Subscribe(6, 0)
	if got := readFrames(t, ctx, v, 1); got[0].Seq != 6 || got[0].Generation != 2 {
		t.Fatalf("got seq %d gen %d, want 6 gen 2", got[0].Seq, got[0].Generation)
	}
	done := make(chan Event)
	go func() { done <- nextEvent(t, ctx, v) }()
	if err := r.End("process_lost"); err != nil {
		t.Fatal(err)
	}
	if ev := <-done; ev.Kind != EventEnd || ev.End.Reason != "process_lost" {
		t.Fatalf("got %v %+v, want end process_lost", ev.Kind, ev.End)
	}
	if err := r.End(""); err != nil || r.EndReason() != ReasonEnded {
		t.Fatalf("End(\"\"): %v, reason %q", err, r.EndReason())
	}
}

// A ring reopened after a restart without an End stays Live: the caller
// decides (R-STATE-6). A viewer tails it until the caller ends it.
func TestReopenedRingLiveUntilCallerDecides(t *testing.T) {
	e := newEnv(t, Options{})
	r := e.ring("run_1")
	mustAppend(t, r, 1, Stdout, payload(0))
	e.reopen()
	r = e.ring("run_1")
	if !r.Live() {
		t.Fatal("reopened ring without End: Live() = false")
	}
	ctx := ctxT(t)
	v := r.Subscribe(0, 0)
	readFrames(t, ctx, v, 1)
	short, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := v.Next(short); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next on a live ring with a done ctx: %v, want context.Canceled", err)
	}
	if err := r.End("process_lost"); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, ctx, v); ev.Kind != EventEnd || ev.End.Reason != "process_lost" {
		t.Fatalf("got %v %+v, want end process_lost", ev.Kind, ev.End)
	}
}

// R-RC-1, R-RC-6: dropping the attach after seq k and reconnecting at k+1,
// over and over while the child writes, yields every frame exactly once.
func TestReconnectAtLastPlusOne(t *testing.T) {
	const n = 2000
	e := newEnv(t, Options{})
	r := e.ring("run_1")
	ctx := ctxT(t)
	appendErr := make(chan error, 1)
	go func() {
		for i := range n {
			if _, err := r.Append(1, Stdout, payload(i)); err != nil {
				appendErr <- err
				return
			}
		}
		appendErr <- r.End("exited")
	}()
	var got []Frame
	var from uint64 // first attach without from: the oldest
	for attach := 0; ; attach++ {
		v := r.Subscribe(from, 0)
		chunk := 1 + attach*7%97
		ended := false
		for range chunk {
			ev := nextEvent(t, ctx, v)
			if ev.Kind == EventEnd {
				ended = true
				break
			}
			if ev.Kind != EventFrame {
				t.Fatalf("attach %d: got %v %+v", attach, ev.Kind, ev)
			}
			got = append(got, ev.Frame)
		}
		v.Close()
		if _, err := v.Next(ctx); !ended && !errors.Is(err, ErrViewerClosed) {
			t.Fatalf("Next after Close: %v, want ErrViewerClosed", err)
		}
		if ended {
			break
		}
		from = got[len(got)-1].Seq + 1
	}
	if err := <-appendErr; err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("got %d frames over reconnects, want %d", len(got), n)
	}
	wantDense(t, got, 1)
	for i, f := range got {
		if !bytes.Equal(f.Data, payload(i)) {
			t.Fatalf("frame %d: got %q, want %q", f.Seq, f.Data, payload(i))
		}
	}
}

func TestDelete(t *testing.T) {
	e := newEnv(t, Options{})
	r := e.ring("run_1")
	keep := e.ring("run_2")
	mustAppend(t, r, 1, Stdout, payload(0))
	mustAppend(t, keep, 1, Stdout, payload(0))
	if err := keep.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	v := r.Subscribe(0, 0)
	readFrames(t, ctx, v, 1)
	runs, err := e.s.Runs()
	if err != nil || len(runs) != 2 {
		t.Fatalf("Runs: got %v, %v, want 2 runs", runs, err)
	}
	if err := e.s.Delete("run_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Next(ctx); !errors.Is(err, ErrDeleted) {
		t.Errorf("viewer Next after Delete: %v, want ErrDeleted", err)
	}
	if _, err := r.Append(1, Stdout, payload(1)); !errors.Is(err, ErrDeleted) {
		t.Errorf("Append after Delete: %v, want ErrDeleted", err)
	}
	if err := e.s.Delete("never_existed"); err != nil {
		t.Errorf("Delete of an unknown run: %v", err)
	}
	e.reopen()
	if runs, _ := e.s.Runs(); len(runs) != 1 || runs[0] != "run_2" {
		t.Errorf("Runs after Delete and restart: got %v, want [run_2]", runs)
	}
	if f, l := e.ring("run_1").Range(); f != 0 || l != 0 {
		t.Errorf("deleted ring Range: got %d..%d, want 0..0", f, l)
	}
	if f, l := e.ring("run_2").Range(); f != 1 || l != 1 {
		t.Errorf("kept ring Range: got %d..%d, want 1..1", f, l)
	}
}

// Close commits everything appended before it; afterwards every call
// reports ErrClosed and viewers end without an End (R-RC-8).
func TestCloseFlushesAndEndsViewers(t *testing.T) {
	const n = 1000
	e := newEnv(t, Options{})
	r := e.ring("run_1")
	ctx := ctxT(t)
	v := r.Subscribe(0, n)
	for i := range n {
		mustAppend(t, r, 1, Stdout, payload(i))
	}
	s := e.s
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for {
		ev, err := v.Next(ctx)
		if errors.Is(err, ErrClosed) {
			break
		}
		if err != nil || ev.Kind != EventFrame {
			t.Fatalf("viewer after Close: %v %v, want frames then ErrClosed", ev.Kind, err)
		}
	}
	if _, err := r.Append(1, Stdout, payload(0)); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close: %v, want ErrClosed", err)
	}
	if err := r.End("x"); !errors.Is(err, ErrClosed) {
		t.Errorf("End after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Ring("run_3"); !errors.Is(err, ErrClosed) {
		t.Errorf("Ring after Close: %v, want ErrClosed", err)
	}
	e.s = nil
	e.reopen()
	if f, l := e.ring("run_1").Range(); f != 1 || l != n {
		t.Fatalf("after Close and reopen: Range %d..%d, want 1..%d", f, l, n)
	}
}

// Concurrent writers (the stdout and stderr readers of one child) and many
// rings share the group commit; each ring stays dense.
func TestConcurrentWritersAndRings(t *testing.T) {
	const rings, per = 8, 300
	e := newEnv(t, Options{})
	var wg sync.WaitGroup
	for i := range rings {
		r := e.ring(fmt.Sprintf("run_%d", i))
		for _, s := range []Stream{Stdout, Stderr} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range per {
					if _, err := r.Append(1, s, payload(j)); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	e.reopen()
	ctx := ctxT(t)
	for i := range rings {
		r := e.ring(fmt.Sprintf("run_%d", i))
		got := readFrames(t, ctx, r.Subscribe(0, 0), 2*per)
		wantDense(t, got, 1)
		next := map[Stream]int{}
		for _, f := range got { // each writer's frames keep their order
			if want := payload(next[f.Stream]); !bytes.Equal(f.Data, want) {
				t.Fatalf("ring %d seq %d %v: got %q, want %q", i, f.Seq, f.Stream, f.Data, want)
			}
			next[f.Stream]++
		}
	}
}

// Eviction racing viewers (replaying and live, with batches larger than the
// ring so some frames are evicted in the transaction that adds them): a
// viewer sees strictly increasing seqs, and every jump is announced by a Lag
// whose RequestedFrom is exactly its cursor and ResumedFrom the next frame.
func TestEvictionRaceLagExact(t *testing.T) {
	const n = 4000
	e := newEnv(t, Options{MaxFrames: 50})
	r := e.ring("run_1")
	ctx := ctxT(t)
	var wg sync.WaitGroup
	var lagged atomic.Int64
	watch := func(from uint64, pace int) {
		v := r.Subscribe(from, n+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			next, lags := from, 0
			for i := 0; ; i++ {
				ev, err := v.Next(ctx)
				if err != nil {
					t.Errorf("from %d: %v", from, err)
					return
				}
				switch ev.Kind {
				case EventEnd:
					lagged.Add(int64(lags))
					if next != n+1 {
						t.Errorf("from %d: End at cursor %d, want %d", from, next, n+1)
					}
					return
				case EventLag:
					lags++
					if (next != 0 && ev.Lag.RequestedFrom != next) || ev.Lag.ResumedFrom <= ev.Lag.RequestedFrom {
						t.Errorf("from %d: lag %+v at cursor %d", from, ev.Lag, next)
						return
					}
					next = ev.Lag.ResumedFrom
					ev, err = v.Next(ctx)
					if err != nil || ev.Kind != EventFrame || ev.Frame.Seq != next {
						t.Errorf("from %d: after lag to %d got %v %d %v", from, next, ev.Kind, ev.Frame.Seq, err)
						return
					}
					fallthrough
				case EventFrame:
					if next != 0 && ev.Frame.Seq != next {
						t.Errorf("from %d: got seq %d, want %d", from, ev.Frame.Seq, next)
						return
					}
					if !bytes.Equal(ev.Frame.Data, payload(int(ev.Frame.Seq-1))) {
						t.Errorf("from %d: frame %d: wrong data %q", from, ev.Frame.Seq, ev.Frame.Data)
						return
					}
					next = ev.Frame.Seq + 1
				}
				if pace > 0 && i%pace == 0 { // a slower reader falls into replay lag
					if err := r.Flush(); err != nil && !errors.Is(err, ErrClosed) {
						t.Error(err)
					}
				}
			}
		}()
	}
	for i := range n {
		if i%400 == 0 {
			watch(0, 0)
			watch(1, 3)
			watch(uint64(i/2+1), 0)
		}
		mustAppend(t, r, 1, Stdout, payload(i))
	}
	if err := r.End("exited"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if f, l := r.Range(); l != n || l-f+1 != 50 {
		t.Fatalf("Range: got %d..%d, want the last 50 of %d", f, l, n)
	}
	if lagged.Load() == 0 {
		t.Error("no viewer saw a Lag; the test lost its point")
	}
	t.Logf("%d lags seen", lagged.Load())
}

// TestReopen: a resume's generation is live from its spawn. After End and
// Reopen, a new viewer tails instead of ending, and gets the next frame
// (R-RC-3); the reopened state survives a restart like End does.
func TestReopen(t *testing.T) {
	e := newEnv(t, Options{})
	r, _ := e.s.Ring("run_reopen")
	if _, err := r.Append(1, Stdout, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := r.End("exited"); err != nil {
		t.Fatal(err)
	}
	if r.Live() {
		t.Fatal("live after End")
	}
	if err := r.Reopen(); err != nil {
		t.Fatal(err)
	}
	if !r.Live() {
		t.Fatal("not live after Reopen")
	}
	v := r.Subscribe(2, 0)
	defer v.Close()
	if _, err := r.Append(2, Stdout, []byte("two")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	ev, err := v.Next(ctx)
	if err != nil || ev.Kind != EventFrame || string(ev.Frame.Data) != "two" || ev.Frame.Generation != 2 {
		t.Fatalf("Next = %+v, %v; want generation 2's frame", ev, err)
	}
	v.Close()
	e.close()
	e.open()
	if r, _ := e.s.Ring("run_reopen"); !r.Live() {
		t.Fatal("a reopened ring is not live after a restart")
	}
}

// Issue 30: a holder's record numbers (marks) are committed with the
// frames that carry them, per stream and generation, and survive a
// restart, so that an agent adopting a holder asks only for what follows
// (R-RC-6: no gap, no duplicate).
func TestMarksCommittedWithFrames(t *testing.T) {
	e := newEnv(t, Options{})
	r := e.ring("run_1")
	if _, err := r.AppendMark(1, Stdout, []byte("a"), 3); err != nil {
		t.Fatal(err)
	}
	if _, err := r.AppendMark(1, Stderr, []byte("b"), 4); err != nil {
		t.Fatal(err)
	}
	// A large append: the mark goes with its last frame.
	if _, err := r.AppendMark(1, Stdout, make([]byte, 2*MaxFrameData+1), 5); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, r, 1, Stdout, []byte("unmarked"))
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	if m, n := r.Mark(1, Stdout), r.Mark(1, Stderr); m != 5 || n != 4 {
		t.Fatalf("marks %d %d, want 5 4", m, n)
	}
	e.reopen()
	r = e.ring("run_1")
	if m, n, o := r.Mark(1, Stdout), r.Mark(1, Stderr), r.Mark(2, Stdout); m != 5 || n != 4 || o != 0 {
		t.Fatalf("marks after restart %d %d (gen 2: %d), want 5 4 0", m, n, o)
	}
	// A new generation starts its own marks.
	if _, err := r.AppendMark(2, PTY, []byte("c"), 1); err != nil {
		t.Fatal(err)
	}
	r.Flush()
	if m, o := r.Mark(2, PTY), r.Mark(1, Stdout); m != 1 || o != 0 {
		t.Fatalf("gen 2 mark %d, gen 1 %d; want 1 0", m, o)
	}
}
