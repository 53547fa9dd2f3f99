package fake

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/olivares-dev/olivares/agent/sessions"
)

// Store holds the fake's conversations: id → user texts. It plays the part
// of a tool's home. The zero value is not usable; use NewStore.
type Store struct {
	mu    sync.Mutex
	next  int
	convs map[string][]string
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{convs: map[string][]string{}} }

// Conversations lists the stored ids.
func (st *Store) Conversations() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	ids := make([]string, 0, len(st.convs))
	for id := range st.convs {
		ids = append(ids, id)
	}
	return ids
}

// Remove deletes a conversation, as removing it from the tool's home would
// (J03).
func (st *Store) Remove(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.convs, id)
}

func (st *Store) create() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.next++
	id := "conv-" + strconv.Itoa(st.next)
	st.convs[id] = nil
	return id
}

func (st *Store) history(id string) ([]string, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	h, ok := st.convs[id]
	return append([]string(nil), h...), ok
}

func (st *Store) add(id, text string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.convs[id]; ok {
		st.convs[id] = append(st.convs[id], text)
	}
}

// Runner is a sessions.Runner whose children are in-process fake peers.
type Runner struct {
	store *Store
	// Tick is the pace of `slow`; zero means 10 ms.
	Tick time.Duration
}

var _ sessions.Runner = (*Runner)(nil)

// NewRunner returns a runner over store.
func NewRunner(store *Store) *Runner { return &Runner{store: store} }

func (*Runner) Name() string { return "fake" }

var pids atomic.Int64

// Start starts a peer. Spec.Path and Spec.Args are not looked at; the peer
// is the fake whatever they say.
func (r *Runner) Start(ctx context.Context, s sessions.Spec) (sessions.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fake: start: %w", err)
	}
	if s.Path == "" {
		return nil, sessions.ErrNoPath
	}
	tick := r.Tick
	if tick == 0 {
		tick = 10 * time.Millisecond
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	p := &process{
		pid: int(100000 + pids.Add(1)), stdin: inW, stdout: outR, stderr: errR,
		inR: inR, outW: outW, errW: errW,
		done: make(chan struct{}), sig: make(chan syscall.Signal, 4),
	}
	pr := &peer{store: r.store, p: p, tick: tick, cancel: make(chan struct{}, 1), cancelled: map[int]bool{},
		answers: make(chan request, 16)}
	go pr.run()
	return p, nil
}

// process is a fake child. Its exit is decided once, by the peer or by a
// signal.
type process struct {
	pid    int
	stdin  *io.PipeWriter
	stdout *io.PipeReader
	stderr *io.PipeReader
	inR    *io.PipeReader
	outW   *io.PipeWriter
	errW   *io.PipeWriter

	ignoreTerm atomic.Bool
	sig        chan syscall.Signal
	outMu      sync.Mutex

	once sync.Once
	done chan struct{}
	exit sessions.Exit
}

func (p *process) Pid() int              { return p.pid }
func (p *process) Stdin() io.WriteCloser { return p.stdin }
func (p *process) Stdout() io.Reader     { return p.stdout }
func (p *process) Stderr() io.Reader     { return p.stderr }
func (p *process) Done() <-chan struct{} { return p.done }
func (p *process) Wait() sessions.Exit   { <-p.done; return p.exit }

// finish records the exit and closes the child's ends: the reader sees EOF,
// writes to stdin fail.
func (p *process) finish(code *int, signal string) {
	p.once.Do(func() {
		p.exit = sessions.Exit{Code: code, Signal: signal, At: time.Now()}
		close(p.done)
		// Not under outMu: closing is what unblocks a write stuck on a
		// reader that went away (io.Pipe has no buffer).
		_ = p.outW.Close()
		_ = p.errW.Close()
		_ = p.inR.CloseWithError(io.ErrClosedPipe)
	})
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal: SIGTERM ends the fake (by the signal) unless it ignores SIGTERM;
// SIGKILL always does; other signals are ignored.
func (p *process) Signal(sig syscall.Signal) error {
	if p.exited() {
		return os.ErrProcessDone
	}
	switch {
	case sig == syscall.SIGKILL:
		p.finish(nil, "SIGKILL")
	case sig == syscall.SIGTERM && !p.ignoreTerm.Load():
		p.finish(nil, "SIGTERM")
	}
	return nil
}

func (p *process) Stop(grace time.Duration) sessions.Exit {
	if p.exited() {
		return p.exit
	}
	if grace == 0 {
		grace = sessions.DefaultGrace
	}
	_ = p.Signal(syscall.SIGTERM)
	t := time.NewTimer(max(grace, 0))
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = p.Signal(syscall.SIGKILL)
	}
	return p.Wait()
}

// write sends one line to the fake's stdout (or stderr); false once it has
// exited. outMu keeps lines whole.
func (p *process) write(b []byte, stderr bool) bool {
	p.outMu.Lock()
	defer p.outMu.Unlock()
	if p.exited() {
		return false
	}
	w := p.outW
	if stderr {
		w = p.errW
	}
	_, err := w.Write(b)
	return err == nil
}

// peer is the fake CLI.
type peer struct {
	store  *Store
	p      *process
	tick   time.Duration
	conv   string
	turns  int
	cancel chan struct{} // wakes a running turn to look at cancelled

	// mu guards the turn bookkeeping the stdin reader and the turn loop
	// share: a cancel belongs to one turn, by number, so it can never be
	// taken by a turn that ended before it came or left for the next one.
	mu        sync.Mutex
	read      int          // prompts read from stdin
	done      int          // turns ended
	cancelled map[int]bool // turn number -> a cancel is pending for it

	answers chan request // answers to the peer's questions ("ask")
	asked   int
}

// cancelOldest marks the running turn, or else the next queued one, as
// cancelled, as the real CLIs do; a cancel with no turn at all is dropped.
func (pr *peer) cancelOldest() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.done < pr.read {
		pr.cancelled[pr.done+1] = true
		select {
		case pr.cancel <- struct{}{}:
		default:
		}
	}
}

// isCancelled reports whether turn n has a cancel pending.
func (pr *peer) isCancelled(n int) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.cancelled[n]
}

// end writes turn n's last event and marks it ended in one step, so a
// cancel read after this counts for the next turn.
func (pr *peer) end(n int, e event) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	delete(pr.cancelled, n)
	pr.done = n
	return pr.emit(e)
}

func (pr *peer) emit(e event) bool { return pr.p.write(line(e), false) }

func exitCode(n int) *int { return &n }

func (pr *peer) run() {
	prompts := make(chan string, 256)
	hello := make(chan request, 1)
	go func() { // the stdin reader
		defer close(prompts)
		sc := bufio.NewScanner(pr.p.inR)
		sc.Buffer(nil, 1<<20)
		said := false
		for sc.Scan() {
			var r request
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				continue
			}
			switch {
			case r.Op == "hello" && !said:
				said = true
				hello <- r
			case r.Op == "prompt":
				pr.mu.Lock()
				pr.read++
				pr.mu.Unlock()
				prompts <- r.Text
			case r.Op == "cancel":
				pr.cancelOldest()
			case r.Op == "answer":
				select {
				case pr.answers <- r:
				default:
				}
			}
		}
		if !said {
			close(hello)
		}
	}()
	h, ok := <-hello
	if !ok {
		pr.p.finish(exitCode(0), "")
		return
	}
	if h.Resume != "" {
		if _, ok := pr.store.history(h.Resume); !ok {
			pr.emit(event{Ev: "unavailable", Conversation: h.Resume, Error: "no conversation " + strconv.Quote(h.Resume)})
			pr.p.finish(exitCode(1), "")
			return
		}
		pr.conv = h.Resume
	} else {
		pr.conv = pr.store.create()
	}
	pr.emit(event{Ev: "ready", Conversation: pr.conv})
	for text := range prompts {
		if !pr.turn(text) {
			return
		}
	}
	// stdin EOF: the queued turns are done; exit 0.
	pr.p.finish(exitCode(0), "")
}

// turn runs one prompt; false when the fake has exited.
func (pr *peer) turn(text string) bool {
	pr.turns++
	n := pr.turns
	id := turnName(n)
	cancelled := func() bool { return pr.end(n, event{Ev: "turn_ended", Turn: id, Status: "cancelled"}) }
	earlier, _ := pr.store.history(pr.conv)
	pr.store.add(pr.conv, text)
	if !pr.emit(event{Ev: "turn_started", Turn: id}) {
		return false
	}
	word, rest, _ := strings.Cut(text, " ")
	reply := "pong: " + text
	var in, out int64 // "tokens IN OUT": the turn reports that usage
	switch word {
	case "tokens":
		a, b, _ := strings.Cut(rest, " ")
		in, _ = strconv.ParseInt(a, 10, 64)
		out, _ = strconv.ParseInt(b, 10, 64)
	case "exit":
		n, _ := strconv.Atoi(rest)
		pr.p.finish(exitCode(n), "")
		return false
	case "stderr":
		pr.p.write([]byte(rest+"\n"), true)
	case "ignore-term":
		pr.p.ignoreTerm.Store(true)
	case "history":
		reply = "history: " + strings.Join(earlier, " | ")
	case "flood":
		n, _ := strconv.Atoi(rest)
		for n > 0 {
			k := min(n, 16<<10)
			if !pr.emit(event{Ev: "delta", Turn: id, Text: strings.Repeat("x", k)}) {
				return false
			}
			n -= k
		}
		reply = "flooded " + rest + " bytes"
	case "ask":
		// The turn asks to run rest and waits for the answer, a cancel or
		// the end of the process.
		pr.asked++
		q := "q" + strconv.Itoa(pr.asked)
		if !pr.emit(event{Ev: "ask", ID: q, Text: rest}) {
			return false
		}
	wait:
		for !pr.isCancelled(n) {
			select {
			case <-pr.cancel:
				// Woken: the loop's condition says whether it is this turn's.
			case <-pr.p.done:
				return false
			case a := <-pr.answers:
				if a.ID != q {
					continue
				}
				reply = "denied: " + rest
				if a.Decision == "allow" {
					reply = "ran: " + rest
				} else if a.Text != "" {
					reply += " (" + a.Text + ")"
				}
				break wait
			}
		}
	case "hang":
		// The turn writes nothing until it is cancelled (a stalled turn,
		// R-ATTN-6).
		for !pr.isCancelled(n) {
			select {
			case <-pr.cancel:
			case <-pr.p.done:
				return false
			}
		}
	case "slow":
		t := time.NewTicker(pr.tick)
		defer t.Stop()
		for i := 0; i < 6000 && !pr.isCancelled(n); i++ { // at most a minute at the default pace
			select {
			case <-pr.cancel:
				// Woken: the loop's condition says whether it is this turn's.
			case <-pr.p.done:
				return false
			case <-t.C:
				if !pr.emit(event{Ev: "delta", Turn: id, Text: "tick" + strconv.Itoa(i) + " "}) {
					return false
				}
			}
		}
	}
	if pr.isCancelled(n) {
		return cancelled()
	}
	return pr.emit(event{Ev: "delta", Turn: id, Text: reply}) && pr.end(n, event{Ev: "turn_ended", Turn: id, Status: "completed", In: in, Out: out})
}
