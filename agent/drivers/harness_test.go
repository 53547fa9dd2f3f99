//go:build linux

package drivers_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
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
}

func newNotifyBuffer() *notifyBuffer {
	return &notifyBuffer{wake: make(chan struct{}), limit: deadline}
}

func (nb *notifyBuffer) add(p []byte, keep bool) {
	nb.mu.Lock()
	defer nb.mu.Unlock()
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
	timer := time.NewTimer(nb.limit)
	defer timer.Stop()
	for {
		s, n, closed, wake := nb.snapshot()
		if cond(s, n) {
			return
		}
		if closed {
			t.Fatalf("%s: stream ended first; got %d bytes: %.500q", what, n, s)
		}
		select {
		case <-wake:
		case <-timer.C:
			t.Fatalf("%s: not within %v; got %d bytes: %.500q", what, nb.limit, n, s)
		}
	}
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
}

func start(t *testing.T, r sessions.Runner, cmd cliruntime.Command, sess cliruntime.Session) *harness {
	t.Helper()
	proc, err := r.Start(context.Background(), sessions.Spec{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	h := &harness{t: t, proc: proc, sess: sess, writes: make(chan []byte, 1024), evWake: make(chan struct{}),
		stdout: newNotifyBuffer(), stderr: newNotifyBuffer(), eof: make(chan struct{}), limit: deadline}
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
			h.stdout.add(line, true)
			h.do(func() cliruntime.Step { return h.sess.Observe(line) })
		}
		if err != nil {
			return
		}
	}
}

// do runs one Session call and queues its writes and events, in call order.
func (h *harness) do(call func() cliruntime.Step) {
	h.mu.Lock()
	st := call()
	if !h.closed {
		for _, w := range st.Write {
			h.writes <- w
		}
	}
	h.mu.Unlock()
	h.addEvents(st.Events)
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
// cursor past it.
func (h *harness) await(kind cliruntime.EventKind) cliruntime.Event {
	h.t.Helper()
	timer := time.NewTimer(h.limit)
	defer timer.Stop()
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
		select {
		case <-wake:
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
			h.t.Fatalf("no %s event before stdout EOF; events: %s; stderr: %q", kind, h.kinds(), h.stderrText())
		case <-timer.C:
			h.t.Fatalf("no %s event within %v; events: %s; stderr: %q", kind, h.limit, h.kinds(), h.stderrText())
		}
	}
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
