//go:build linux

package drivers_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/integration/peers/peerbin"
)

// deadline bounds every wait; nothing in these tests sleeps. It is a
// liveness bound, not a timing: a real CLI starting on a loaded 2-core
// machine (the suite runs packages in parallel) can take over 10 s.
const deadline = 30 * time.Second

// startLimit bounds the start of a child: from its spawn to its first line
// on stdout. A wait that begins before that line gives up no sooner than
// startLimit after the spawn; once the child has spoken, each wait has its
// own deadline again (giveUp). The start is the one step whose cost is
// the machine's, not the protocol's: Codex 0.169.0 answers initialize only
// after its Node wrapper, five SQLite databases (about 40 fsyncs) and two
// runs of lsb_release (the user agent's OS): measured 0.2–1 s idle, up to
// 4.7 s beside a race build, up to 15 s under disk-write load (real-clis.md
// §2.1); a CI run waited over 30 s for it inside TestRealInterrupt's first
// wait, which then gave up with no event at all.
const startLimit = 60 * time.Second

// giveUp is when a wait that began at began fails: limit after it began,
// or after the child's first line if that came later; while the child has
// not spoken (spoke is zero), not before startLimit after the spawn.
func giveUp(spawned, spoke, began time.Time, limit time.Duration) time.Time {
	if spoke.IsZero() {
		return later(began.Add(limit), spawned.Add(startLimit))
	}
	return later(began, spoke).Add(limit)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func TestMain(m *testing.M) {
	code := m.Run()
	peerbin.Remove()
	os.Exit(code)
}

// linkMu serialises the links fakecliBin adds.
var linkMu sync.Mutex

// fakecliBin returns the path of a fakecli link named after kind, so that
// the peer picks its protocol from argv[0]. peerbin links the contract
// tools; the optional drivers' names (gemini, opencode) are linked here, in
// the same directory, which belongs to this test binary.
func fakecliBin(t *testing.T, kind cliruntime.Kind) string {
	t.Helper()
	p := filepath.Join(peerbin.Dir(t), string(kind))
	linkMu.Lock()
	defer linkMu.Unlock()
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		if err := os.Symlink("fakecli", p); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// notifyBuffer is a byte buffer that wakes waiters on every write.
type notifyBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	n      int64
	wake   chan struct{}
	closed bool
	// limit bounds await; set before the first await, by the test's
	// goroutine only.
	limit time.Duration
	// spawned is the child's start; speaker is the stream whose first
	// line ends it (stdout, for both buffers of a child), spoke the time
	// this buffer got its first bytes.
	spawned time.Time
	speaker *notifyBuffer
	spoke   time.Time
}

func newNotifyBuffer(spawned time.Time, speaker *notifyBuffer) *notifyBuffer {
	nb := &notifyBuffer{wake: make(chan struct{}), limit: deadline, spawned: spawned, speaker: speaker}
	if speaker == nil {
		nb.speaker = nb
	}
	return nb
}

// spokeAt is when the child's first line came, zero before it.
func (nb *notifyBuffer) spokeAt() time.Time {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	return nb.spoke
}

func (nb *notifyBuffer) add(p []byte, keep bool) {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	if nb.spoke.IsZero() && len(p) > 0 {
		nb.spoke = time.Now()
	}
	nb.n += int64(len(p))
	if keep && nb.b.Len() < 4<<20 {
		nb.b.Write(p)
	}
	close(nb.wake)
	nb.wake = make(chan struct{})
}

func (nb *notifyBuffer) close() {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	nb.closed = true
	close(nb.wake)
	nb.wake = make(chan struct{})
}

func (nb *notifyBuffer) snapshot() (string, int64, bool, chan struct{}) {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	return nb.b.String(), nb.n, nb.closed, nb.wake
}

// await waits until cond holds for the buffer's text and byte count.
func (nb *notifyBuffer) await(t *testing.T, what string, cond func(s string, n int64) bool) {
	t.Helper()
	began := time.Now()
	for {
		s, n, closed, wake := nb.snapshot()
		if cond(s, n) {
			return
		}
		if closed {
			t.Fatalf("%s: stream ended first; got %d bytes: %.500q", what, n, s)
		}
		spoke := nb.speaker.spokeAt()
		end := giveUp(nb.spawned, spoke, began, nb.limit)
		if !time.Now().Before(end) {
			t.Fatalf("%s: not within %v (%s); got %d bytes: %.500q", what, time.Since(began).Round(time.Millisecond), startNote(nb.spawned, spoke), n, s)
		}
		var speaking <-chan struct{}
		if spoke.IsZero() && nb.speaker != nb {
			_, _, _, speaking = nb.speaker.snapshot()
		}
		timer := time.NewTimer(time.Until(end))
		select {
		case <-wake:
		case <-speaking:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// startNote says how far the child's start got, for a failed wait.
func startNote(spawned, spoke time.Time) string {
	if spoke.IsZero() {
		return fmt.Sprintf("no line on stdout %v after the spawn", time.Since(spawned).Round(time.Millisecond))
	}
	return fmt.Sprintf("first line on stdout %v after the spawn", spoke.Sub(spawned).Round(time.Millisecond))
}

// harness runs one child the way the supervisor will: a stdout reader that
// gives every line to the Session, a stdin writer goroutine fed in call
// order, and stderr drained apart (R-TR-2).
type harness struct {
	t    *testing.T
	proc sessions.Process
	sess cliruntime.Session

	mu     sync.Mutex // orders session calls with their queued writes
	closed bool
	writes chan []byte

	evMu   sync.Mutex
	events []cliruntime.Event
	evWake chan struct{}
	cursor int

	stdout *notifyBuffer
	stderr *notifyBuffer
	eof    chan struct{}

	// limit bounds every wait of the test on this child (deadline unless
	// patient raised it).
	limit time.Duration

	// trace is every line written to and read from the child, stamped
	// with the time since the spawn (t0), for a failed wait's message.
	traceMu sync.Mutex
	trace   []string
	t0      time.Time
}

func (h *harness) traceLine(dir string, b []byte) {
	h.traceMu.Lock()
	defer h.traceMu.Unlock()
	h.trace = append(h.trace, fmt.Sprintf("%7.3fs %s %.300s", time.Since(h.t0).Seconds(), dir, bytes.TrimRight(b, "\n")))
}

func (h *harness) traceText() string {
	h.traceMu.Lock()
	defer h.traceMu.Unlock()
	tr := h.trace
	if len(tr) > 60 {
		tr = append([]string{fmt.Sprintf("(%d earlier lines)", len(tr)-60)}, tr[len(tr)-60:]...)
	}
	return strings.Join(tr, "\n")
}

func start(t *testing.T, r sessions.Runner, cmd cliruntime.Command, sess cliruntime.Session) *harness {
	t.Helper()
	t0 := time.Now()
	proc, err := r.Start(context.Background(), sessions.Spec{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	stdout := newNotifyBuffer(t0, nil)
	h := &harness{t: t, proc: proc, sess: sess, writes: make(chan []byte, 1024), evWake: make(chan struct{}),
		stdout: stdout, stderr: newNotifyBuffer(t0, stdout), eof: make(chan struct{}), limit: deadline, t0: t0}
	go h.writeLoop()
	go h.readLoop()
	go func() {
		b := make([]byte, 32<<10)
		for {
			n, err := proc.Stderr().Read(b)
			h.stderr.add(b[:n], true)
			if err != nil {
				h.stderr.close()
				return
			}
		}
	}()
	t.Cleanup(func() {
		proc.Stop(-1)
		h.closeStdin()
		select {
		case <-h.eof:
		case <-time.After(deadline):
			t.Errorf("stdout of pid %d: no EOF after stop", proc.Pid())
		}
	})
	h.do(func() cliruntime.Step { return sess.Start() })
	return h
}

func (h *harness) writeLoop() {
	in := h.proc.Stdin()
	broken := false
	for b := range h.writes {
		if !broken {
			h.traceLine("->", b)
			if _, err := in.Write(b); err != nil {
				broken = true // the child is gone; keep draining
			}
		}
	}
	_ = in.Close()
}

func (h *harness) readLoop() {
	defer close(h.eof)
	defer h.stdout.close()
	r := bufio.NewReaderSize(h.proc.Stdout(), 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			h.traceLine("<-", line)
			h.stdout.add(line, true)
			h.do(func() cliruntime.Step { return h.sess.Observe(line) })
		}
		if err != nil {
			return
		}
	}
}

// do runs one Session call and queues its writes and events, in call order.
// The events go in before the writes go out: an answer to a write (the end
// of the turn a prompt started) must not be recorded before that write's
// own events (the start of that turn).
func (h *harness) do(call func() cliruntime.Step) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := call()
	h.addEvents(st.Events)
	if !h.closed {
		for _, w := range st.Write {
			h.writes <- w
		}
	}
}

func (h *harness) addEvents(evs []cliruntime.Event) {
	if len(evs) == 0 {
		return
	}
	h.evMu.Lock()
	defer h.evMu.Unlock()
	h.events = append(h.events, evs...)
	close(h.evWake)
	h.evWake = make(chan struct{})
}

func (h *harness) encode(in cliruntime.Input) error {
	var err error
	h.do(func() cliruntime.Step {
		var st cliruntime.Step
		st, err = h.sess.Encode(in)
		return st
	})
	return err
}

func (h *harness) interrupt() (active bool, writes int) {
	h.do(func() cliruntime.Step {
		st, a := h.sess.Interrupt()
		active, writes = a, len(st.Write)
		return st
	})
	return active, writes
}

func (h *harness) closeStdin() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.writes)
	}
}

// patient raises the bound of every wait on h to d, for a CLI that takes
// seconds to start (Gemini CLI, OpenCode). Call it before the first wait.
func (h *harness) patient(d time.Duration) *harness {
	h.limit, h.stdout.limit, h.stderr.limit = d, d, d
	return h
}

// await returns the next event of kind after the cursor, and moves the
// cursor past it. It gives up at giveUp: a wait that begins before the
// child's first line covers its start.
func (h *harness) await(kind cliruntime.EventKind) cliruntime.Event {
	h.t.Helper()
	began := time.Now()
	for {
		h.evMu.Lock()
		for i := h.cursor; i < len(h.events); i++ {
			if h.events[i].Kind == kind {
				h.cursor = i + 1
				ev := h.events[i]
				h.evMu.Unlock()
				return ev
			}
		}
		wake := h.evWake
		h.evMu.Unlock()
		end, speaking := h.giveUp(began)
		if !time.Now().Before(end) {
			h.t.Fatalf("no %s event within %v (%s); events: %s; stderr: %q; stdio:\n%s", kind, time.Since(began).Round(time.Millisecond), startNote(h.t0, h.stdout.spokeAt()), h.kinds(), h.stderrText(), h.traceText())
		}
		timer := time.NewTimer(time.Until(end))
		select {
		case <-wake:
		case <-speaking:
		case <-timer.C:
		case <-h.eof:
			// The last lines' events are in by now; look once more.
			select {
			case <-wake:
				continue
			default:
			}
			h.evMu.Lock()
			found := false
			for i := h.cursor; i < len(h.events); i++ {
				found = found || h.events[i].Kind == kind
			}
			h.evMu.Unlock()
			if found {
				continue
			}
			h.t.Fatalf("no %s event before stdout EOF; events: %s; stderr: %q; stdio:\n%s", kind, h.kinds(), h.stderrText(), h.traceText())
		}
		timer.Stop()
	}
}

// giveUp is when a wait on h that began at began fails (the package's
// giveUp with h's limit) and, while the child has not spoken, a channel
// closed by its next output, when that end moves.
func (h *harness) giveUp(began time.Time) (time.Time, <-chan struct{}) {
	spoke := h.stdout.spokeAt()
	var speaking <-chan struct{}
	if spoke.IsZero() {
		_, _, _, speaking = h.stdout.snapshot()
	}
	return giveUp(h.t0, spoke, began, h.limit), speaking
}

// first returns the first event of kind seen so far, wherever the cursor is.
func (h *harness) first(kind cliruntime.EventKind) (cliruntime.Event, bool) {
	for _, e := range h.all() {
		if e.Kind == kind {
			return e, true
		}
	}
	return cliruntime.Event{}, false
}

// all returns every event seen so far.
func (h *harness) all() []cliruntime.Event {
	h.evMu.Lock()
	defer h.evMu.Unlock()
	return append([]cliruntime.Event(nil), h.events...)
}

func (h *harness) kinds() string {
	var ks []string
	for _, e := range h.all() {
		ks = append(ks, string(e.Kind))
	}
	return strings.Join(ks, ",")
}

func (h *harness) stderrText() string { s, _, _, _ := h.stderr.snapshot(); return s }

func (h *harness) waitExit() sessions.Exit {
	h.t.Helper()
	select {
	case <-h.proc.Done():
	case <-time.After(h.limit):
		h.t.Fatalf("pid %d: no exit within %v", h.proc.Pid(), h.limit)
	}
	select {
	case <-h.eof:
	case <-time.After(h.limit):
		h.t.Fatalf("pid %d: stdout not at EOF within %v of the exit", h.proc.Pid(), h.limit)
	}
	return h.proc.Wait()
}

func (h *harness) alive() bool {
	select {
	case <-h.proc.Done():
		return false
	default:
		return true
	}
}

func exitString(e sessions.Exit) string {
	switch {
	case e.Code != nil:
		return "code " + strconv.Itoa(*e.Code)
	case e.Signal != "":
		return e.Signal
	default:
		return "lost"
	}
}

// TestGiveUp: a wait that begins before the child's first line covers its
// start (startLimit after the spawn, or deadline after the wait began if
// later); once the child has spoken, each wait has its own deadline, from
// when it began or the first line, whichever came later. The first case is
// the CI failure of TestRealInterrupt/codex: Codex answered initialize only
// after 30 s, and the single 30 s wait for turn_started gave up first.
func TestGiveUp(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name         string
		spoke, began time.Time
		want         time.Time
	}{
		{"silent since the spawn, wait from the spawn", time.Time{}, t0, t0.Add(startLimit)},
		{"silent, wait begun late", time.Time{}, at(50), at(50).Add(deadline)},
		{"spoke within the wait", at(35), t0, at(35).Add(deadline)},
		{"spoke early, wait from the spawn", at(1), t0, at(1).Add(deadline)},
		{"spoke before the wait", at(1), at(10), at(10).Add(deadline)},
	} {
		if got := giveUp(t0, tc.spoke, tc.began, deadline); !got.Equal(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got.Sub(t0), tc.want.Sub(t0))
		}
	}
}
