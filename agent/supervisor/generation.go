package supervisor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/holder"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
)

var errStdinClosed = errors.New("the process no longer reads its input")

// generation is one process of a run.
type generation struct {
	r      *run
	n      uint32
	proc   sessions.Process
	sess   cliruntime.Session
	resume bool
	// cleanup removes the grant files of this generation once it ended.
	cleanup func()
	// withhold: a resume of a tainted run, whose replayed history is
	// neither stored nor streamed (R-HW-1..4). replaying and noticed are
	// owned by the stdout reader.
	withhold, replaying, noticed bool
	// turnSeen is closed and replaced (under mu) at every turn start or
	// end the tool acknowledged, for a waiter of the first turn (R-HOF-19).
	turnSeen chan struct{}
	// policy is the profile's approval policy as this process started
	// with it (R-PROF-4: a change applies from the next start); tool
	// names the tool in what the run shows ("claude").
	policy registry.Approvals
	tool   string
	// adoptedFrom is the version of the agent that started this process
	// when this agent adopted it from its holder, "" otherwise.
	adoptedFrom string
	// stall is the stalled-turn check (stall.go, R-ATTN-6).
	stall stall

	mu          sync.Mutex // guards the fields below and the order of writes
	queue       [][]byte   // lines for stdin, in call order
	queued      int        // bytes in queue and in the writer's hands, not yet written
	wake        chan struct{}
	stdinDone   bool
	handshaken  bool
	unavailable bool
	// handshakeRefused: the tool refused a launch's handshake; the process
	// is stopped and the run fails with handshake_failed (issue 32
	// finding 3), instead of staying starting with the reason in
	// last_error.
	handshakeRefused bool

	handshake chan struct{} // closed once handshaken (or never)
	spoke     chan struct{} // closed at the first byte on stdout
	spokeOnce sync.Once
	refused   chan struct{} // closed once the tool refused the conversation
	ended     chan struct{} // closed after the exit is recorded
}

// start spawns generation rec.Generation+1 and its goroutines. It records
// started (or failed: spawn_failed) and returns nil when the spawn failed.
// The caller holds r.op.
func (r *run) start(ctx context.Context, d cliruntime.Driver, spec cliruntime.LaunchSpec, resume bool, grants []Grant) *generation {
	s := r.s
	// Close waits for a spawn under way, so that no child outlives it.
	s.spawnMu.RLock()
	defer s.spawnMu.RUnlock()
	if s.closed() {
		return nil
	}
	r.mu.Lock()
	n := r.rec.Generation + 1
	r.mu.Unlock()
	spec, cleanup, err := s.withGrants(spec, r.ref, n, grants)
	var cmd cliruntime.Command
	if err == nil {
		if resume {
			cmd, err = d.Resume(spec)
		} else {
			cmd, err = d.Launch(spec)
		}
	}
	r.mu.Lock()
	tainted := len(r.rec.Taint) > 0 || len(grants) > 0
	r.mu.Unlock()
	withhold := resume && tainted
	var proc sessions.Process
	var sess cliruntime.Session
	var first cliruntime.Step
	if err == nil {
		var rn sessions.Runner
		rn, err = s.Host.runner(d)
		if err == nil {
			r.mu.Lock()
			rn = s.Host.contain(rn, r.rec.Isolation, r.rec.Network, spec)
			r.mu.Unlock()
			sess = d.NewSession(spec)
			first = sess.Start()
			proc, err = s.spawn(ctx, rn, r.ref, n, sessions.Spec{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir},
				adoptable(sess, first) && !withhold)
		}
	}
	now := time.Now().UTC()
	if err != nil {
		cleanup()
		detail, _ := json.Marshal(map[string]string{"error": err.Error()})
		s.o.Log.Error("spawn failed", logging.KeyRunRef, r.ref, "generation", n, logging.Err(err))
		r.update(ledger.Event{Kind: ledger.KindFailed, Generation: n, Reason: apitypes.ReasonSpawnFailed, Detail: detail}, func(rec *record) {
			rec.Generation, rec.PID, rec.Ended, rec.FailReason = n, 0, true, apitypes.ReasonSpawnFailed
			rec.ExitCode, rec.Signal, rec.StopRequested, rec.Handshaken = nil, "", false, false
			rec.StartedAt, rec.EndedAt = now, now
			addTaint(rec, grants, n)
		})
		r.ring.End(apitypes.ReasonSpawnFailed)
		return nil
	}
	// A new launch of the tool clears the previous window report (R-ACT-7).
	r.live.Launch()
	r.mu.Lock()
	r.rec.Window = nil
	r.mu.Unlock()
	// Live from the spawn on, not from the first output (R-RC-3).
	if err := r.ring.Reopen(); err != nil {
		s.o.Log.Error("ring reopen failed", logging.KeyRunRef, r.ref, logging.Err(err))
	}
	g := newGeneration(r, n, proc, sess, d)
	g.resume, g.cleanup, g.withhold = resume, cleanup, withhold
	// A form without a protocol handshake (Claude's stream-json) is ready
	// once spawned; the others once the tool named the conversation.
	g.handshaken = len(first.Write) == 0
	if g.handshaken {
		close(g.handshake)
	}
	// Queued before the generation is published: an Input accepted as soon
	// as r.gen is set (while the started row commits) goes after the
	// handshake's first lines, never before them (cliruntime.Session).
	g.push(first.Write)
	r.update(ledger.Event{Kind: ledger.KindStarted, Generation: n, PID: proc.Pid()}, func(rec *record) {
		r.gen = g // under r.mu, with the record: never live with the old generation
		rec.Generation, rec.PID, rec.Ended, rec.FailReason = n, proc.Pid(), false, ""
		rec.ExitCode, rec.Signal, rec.StopRequested = nil, "", false
		rec.Handshaken = g.handshaken
		rec.StartedAt, rec.EndedAt = now, time.Time{}
		addTaint(rec, grants, n)
	})
	g.events(first.Events)
	g.serve(rnName(s, d) == "pty")
	return g
}

func newGeneration(r *run, n uint32, proc sessions.Process, sess cliruntime.Session, d cliruntime.Driver) *generation {
	return &generation{r: r, n: n, proc: proc, sess: sess, cleanup: func() {},
		policy: r.approvals(), tool: string(d.Kind()),
		wake: make(chan struct{}, 1), handshake: make(chan struct{}), spoke: make(chan struct{}), refused: make(chan struct{}), turnSeen: make(chan struct{}),
		ended: make(chan struct{})}
}

// serve starts the generation's goroutines: the stdin writer, the output
// readers and the waiter.
func (g *generation) serve(pty bool) {
	s, proc := g.r.s, g.proc
	var readers sync.WaitGroup
	readers.Add(2)
	s.wg.Add(3)
	go func() { defer s.wg.Done(); g.writeStdin() }()
	go func() {
		defer s.wg.Done()
		defer readers.Done()
		stream := ring.Stdout
		if pty {
			stream = ring.PTY
		}
		g.read(proc.Stdout(), stream, true)
	}()
	go func() {
		defer s.wg.Done()
		defer readers.Done()
		g.read(proc.Stderr(), ring.Stderr, false)
	}()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		g.wait(&readers)
	}()
}

// sawTurn wakes whoever waits for the tool to acknowledge a turn.
func (g *generation) sawTurn() {
	g.mu.Lock()
	close(g.turnSeen)
	g.turnSeen = make(chan struct{})
	g.mu.Unlock()
}

// turnSignal returns the channel closed at the next acknowledged turn.
func (g *generation) turnSignal() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.turnSeen
}

func rnName(s *Supervisor, d cliruntime.Driver) string {
	if rn := s.o.Runners[d.LaunchTransport()]; rn != nil {
		return rn.Name()
	}
	return ""
}

// push queues lines for stdin; the writer goroutine writes them in order
// (never the stdout reader itself, which could deadlock against a child
// blocked on a full stdout, cliruntime.Session).
func (g *generation) push(lines [][]byte) {
	if len(lines) == 0 {
		return
	}
	g.mu.Lock()
	g.pushLocked(lines)
	g.mu.Unlock()
}

func (g *generation) pushLocked(lines [][]byte) {
	if len(lines) == 0 {
		return
	}
	for _, l := range lines {
		g.queued += len(l)
	}
	g.queue = append(g.queue, lines...)
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

func (g *generation) writeStdin() {
	w := g.proc.Stdin()
	defer w.Close()
	for {
		g.mu.Lock()
		lines := g.queue
		g.queue = nil
		done := g.stdinDone
		g.mu.Unlock()
		for _, l := range lines {
			_, err := w.Write(l)
			g.mu.Lock()
			g.queued -= len(l)
			if err != nil {
				g.stdinDone = true
			}
			g.mu.Unlock()
			if err != nil {
				return
			}
		}
		if done {
			return
		}
		select {
		case <-g.wake:
		case <-g.proc.Done():
			g.mu.Lock()
			g.stdinDone = true
			g.mu.Unlock()
			return
		}
	}
}

// encode turns one input into protocol lines under g.mu, so that lines of
// different calls keep their call order. The bytes waiting for the child's
// stdin are bounded for every driver (Options.MaxStdinQueue): a child that
// stops reading its input costs the agent that much memory at most, and
// the caller hears ErrInputQueueFull.
// encode writes in to the tool. frame, when not nil, is the input's record
// in the run's output (R-ATT-11): appended under the lock that orders the
// writes, so the inputs stand in the output in the order the tool reads
// them, and before the tool can answer.
func (g *generation) encode(in cliruntime.Input, frame []byte) error {
	size := len(in.Line) + len(in.Message) + len(in.Text)
	g.mu.Lock()
	if g.stdinDone {
		g.mu.Unlock()
		return errStdinClosed
	}
	if g.queued > 0 && g.queued+size > g.r.s.o.MaxStdinQueue {
		n := g.queued
		g.mu.Unlock()
		return refusal.New(ErrInputQueueFull, "%d bytes of input already wait for the tool to read them; wait for the running turn to end", n)
	}
	st, err := g.sess.Encode(in)
	if err == nil {
		if frame != nil {
			if _, aerr := g.r.ring.Append(g.n, ring.Input, frame); aerr != nil {
				g.r.s.o.Log.Error("ring append failed", logging.KeyRunRef, g.r.ref, logging.Err(aerr))
			}
		}
		g.pushLocked(st.Write)
	}
	g.mu.Unlock()
	if err != nil {
		return err
	}
	if frame != nil && len(st.Write) == 0 {
		// Queued in the session, not yet written (an ACP prompt behind the
		// one in flight): the input's record is committed before the
		// answer, so that an agent adopting the process after a kill -9
		// finds it and sends it (replayGeneration).
		g.r.ring.Flush()
	}
	g.events(st.Events)
	return nil
}

func (g *generation) interrupt() bool {
	g.mu.Lock()
	st, active := g.sess.Interrupt()
	g.pushLocked(st.Write) // under the lock of the call: in call order
	g.mu.Unlock()
	g.events(st.Events)
	return active
}

// spokeReader closes its generation's spoke at the first byte read.
type spokeReader struct {
	io.Reader
	g *generation
}

func (r spokeReader) Read(p []byte) (int, error) {
	n, err := r.Reader.Read(p)
	if n > 0 {
		r.g.spokeOnce.Do(func() { close(r.g.spoke) })
	}
	return n, err
}

// awaitHandshake waits until the tool confirms or refuses the conversation,
// the generation ends or ctx does, or the tool is judged hung: silent for
// StartTimeout after the spawn, or unconfirmed HandshakeTimeout after its
// first byte on stdout. A tool on a loaded host can take most of a minute
// before it prints anything (Codex's start is measured in docs/real-clis.md),
// which is slowness, not a refusal.
func (g *generation) awaitHandshake(ctx context.Context) {
	start := time.NewTimer(StartTimeout)
	defer start.Stop()
	spoke := g.spoke
	var confirm <-chan time.Time
	for {
		select {
		case <-g.handshake:
			return
		case <-g.refused:
			return
		case <-g.ended:
			return
		case <-ctx.Done():
			return
		case <-spoke:
			spoke = nil
			t := time.NewTimer(HandshakeTimeout)
			defer t.Stop()
			confirm = t.C
		case <-confirm:
			return
		case <-start.C:
			if confirm == nil {
				return
			}
		}
	}
}

// read copies one output stream into the ring, and (stdout) hands each line
// to the driver.
func (g *generation) read(rd io.Reader, stream ring.Stream, observe bool) {
	held := heldOutput(g.proc, rd, stream) // before rd is wrapped
	if observe {
		rd = spokeReader{rd, g}
	}
	if observe && g.withhold {
		g.readWithheld(rd, stream)
		return
	}
	buf := make([]byte, ring.MaxFrameData)
	var line []byte
	overlong := false
	for {
		n, err := rd.Read(buf)
		if n > 0 {
			g.wrote()
			chunk := buf[:n]
			if _, aerr := g.r.ring.AppendMark(g.n, stream, chunk, held.mark()); aerr != nil {
				g.r.s.o.Log.Error("ring append failed", logging.KeyRunRef, g.r.ref, logging.Err(aerr))
			}
			held.ack(g.r.ring, g.n)
			if observe {
				for len(chunk) > 0 {
					i := bytes.IndexByte(chunk, '\n')
					if i < 0 {
						if !overlong {
							line = append(line, chunk...)
							if len(line) > maxLine {
								line, overlong = nil, true
							}
						}
						break
					}
					if !overlong {
						if len(line) == 0 {
							// A whole line in this read: observed in
							// place, not copied.
							g.observe(chunk[:i])
						} else {
							line = append(line, chunk[:i]...)
							g.observe(line)
						}
					}
					line, overlong = line[:0], false
					chunk = chunk[i+1:]
				}
			}
		}
		if err != nil {
			if observe && len(line) > 0 && !overlong {
				g.observe(line)
			}
			return
		}
	}
}

func (g *generation) observe(line []byte) []cliruntime.Event {
	g.r.live.Observe(line)
	g.mu.Lock()
	st := g.sess.Observe(line)
	g.pushLocked(st.Write) // under the lock of the call: in call order
	g.mu.Unlock()
	g.events(st.Events)
	return st.Events
}

// historyWithheld is the notice that takes the replayed history's place
// (R-HW-3).
var historyWithheld = []byte(`{"kind":"history_withheld"}`)

// readWithheld is read for the stdout of a resumed generation of a tainted
// run: line by line, each line observed before it is stored, so that what
// the tool replays between the driver's replay_started and replay_ended is
// neither stored nor streamed, and exactly one notice stands at the seq
// where the replay began (R-HW-1..4). Claude Code and Codex replay nothing
// (R-HW-5), so for them this only changes how output is cut into frames.
func (g *generation) readWithheld(rd io.Reader, stream ring.Stream) {
	br := bufio.NewReaderSize(rd, ring.MaxFrameData)
	store := func(b []byte) {
		if _, err := g.r.ring.Append(g.n, stream, b); err != nil {
			g.r.s.o.Log.Error("ring append failed", logging.KeyRunRef, g.r.ref, logging.Err(err))
		}
	}
	var line []byte
	overlong := false
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(line) > maxLine {
				// Too long to observe: kept or dropped whole, as the
				// replay state says.
				if !g.replaying {
					store(line)
				}
				line, overlong = line[:0], true
			}
			continue
		}
		if len(line) > 0 {
			switch {
			case overlong:
				if !g.replaying {
					store(line)
				}
			default:
				g.storeObserved(bytes.TrimSuffix(line, []byte("\n")), line, store)
			}
			line, overlong = line[:0], false
		}
		if err != nil {
			return
		}
	}
}

// storeObserved observes one line and stores it unless it is replayed
// history.
func (g *generation) storeObserved(line, raw []byte, store func([]byte)) {
	var started, ended bool
	for _, e := range g.observe(line) {
		started = started || e.Kind == cliruntime.EventReplayStarted
		ended = ended || e.Kind == cliruntime.EventReplayEnded
	}
	switch {
	case started:
		store(raw)
		if !g.noticed {
			g.noticed = true
			if _, err := g.r.ring.Append(g.n, ring.Notice, historyWithheld); err != nil {
				g.r.s.o.Log.Error("ring append failed", logging.KeyRunRef, g.r.ref, logging.Err(err))
			}
		}
		g.replaying = !ended
	case ended:
		g.replaying = false
		store(raw)
	case !g.replaying:
		store(raw)
	}
}

// events applies what the driver learned to the run.
func (g *generation) events(evs []cliruntime.Event) {
	r := g.r
	var lim *apitypes.Limit // the limit this step's turn ended on
	for _, e := range evs {
		switch e.Kind {
		case cliruntime.EventConversation, cliruntime.EventReady:
			// EventReady: handshaken without a conversation (a pending
			// Codex branch). The record goes first: Resume answers with
			// the row as soon as the handshake channel closes.
			r.updateAsync(ledger.Event{}, func(rec *record) {
				if e.Kind == cliruntime.EventConversation {
					rec.ConversationID = e.ConversationID
				}
				rec.Handshaken = true
			})
			g.mu.Lock()
			first := !g.handshaken
			g.handshaken = true
			g.mu.Unlock()
			if first {
				close(g.handshake)
			}
		case cliruntime.EventConversationUnavailable:
			g.markUnavailable()
			// The tool cannot continue it; this process takes no input.
			// Resume stops it and answers 409 (R-RES-2).
		case cliruntime.EventTurnStarted:
			g.sawTurn()
			g.armStall()
			r.touch()
		case cliruntime.EventTurnEnded:
			g.sawTurn()
			g.unstall()
			if !e.Usage.Empty() {
				r.recordUsage(g.n, e.Usage, lim, time.Now())
			}
			if e.IsError {
				if g.lastError(e) {
					continue
				}
			} else {
				// R-LIM-8: the next successful turn clears limit;
				// R-LERR-2: and last_error; R-LIST-8: the preview is
				// the turn's last assistant text.
				last := Preview(e.Text)
				r.mu.Lock()
				had := r.rec.Limit != nil || r.rec.LastError != nil
				changed := last != "" && last != r.rec.LastMessage
				r.mu.Unlock()
				if had || changed {
					r.updateAsync(ledger.Event{}, func(rec *record) {
						rec.Limit, rec.LastError = nil, nil
						if last != "" {
							rec.LastMessage = last
						}
					})
					continue
				}
			}
			r.touch()
		case cliruntime.EventError, cliruntime.EventRetrying:
			g.lastError(e)
			if e.HandshakeRefused {
				g.refuseHandshake()
			}
		case cliruntime.EventRequest:
			g.request(e.Request)
		case cliruntime.EventRequestWithdrawn:
			r.withdrawn(g, e.RequestID)
		case cliruntime.EventDenied:
			g.denied(e.Denial, apitypes.ByTool)
		case cliruntime.EventLimit:
			if e.Limit == nil {
				continue
			}
			r.mu.Lock()
			l := limitOf(e.Limit, r.rec.ProfileRef, time.Now())
			old := r.rec.Limit
			r.mu.Unlock()
			lim = l
			ev := ledger.Event{}
			if old == nil || old.Kind != l.Kind || old.AccountRef != l.AccountRef {
				// R-LIM-7, R-LIM-10: a new fact gets one limit_reached.
				detail, _ := json.Marshal(map[string]string{"kind": l.Kind, "account_ref": l.AccountRef})
				ev = ledger.Event{Kind: ledger.KindLimitReached, Generation: g.n, Detail: detail}
			}
			r.updateAsync(ev, func(rec *record) { rec.Limit = l })
		}
	}
}

// refuseHandshake ends a process whose tool refused the launch's
// handshake: it will take no input, so it stops at once (the grace of an
// operator stop), and its exit records the run failed with
// handshake_failed, its reason in last_error (issue 32 finding 3).
func (g *generation) refuseHandshake() {
	g.mu.Lock()
	first := !g.handshakeRefused && !g.handshaken
	g.handshakeRefused = g.handshakeRefused || first
	g.mu.Unlock()
	if !first {
		return
	}
	g.r.s.wg.Add(1)
	go func() {
		defer g.r.s.wg.Done()
		g.proc.Stop(g.r.s.o.StopGrace)
	}()
}

func (g *generation) markUnavailable() {
	g.mu.Lock()
	first := !g.unavailable
	g.unavailable = true
	g.mu.Unlock()
	if first {
		close(g.refused)
	}
}

// wait records the generation's end once the leader exited and its output
// was drained into the ring: the exited row (R-EXIT-1, R-EXIT-3), then the
// ring's End, so that every frame reaches viewers before end (R-RC-9).
func (g *generation) wait(readers *sync.WaitGroup) {
	r, s := g.r, g.r.s
	exit := g.proc.Wait()
	g.endStall()
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainTimeout):
		// A grandchild holds the pipes open: stop reading them.
		for _, rd := range []io.Reader{g.proc.Stdout(), g.proc.Stderr()} {
			if c, ok := rd.(io.Closer); ok {
				c.Close()
			}
		}
		<-drained
	}
	defer close(g.ended)
	if s.closed() {
		// The agent is going down: record nothing. A held child lives on
		// (its grant files with it) and the next Open adopts it; another
		// dies with the agent, and the next Open records it lost
		// (R-STATE-6).
		if _, held := g.proc.(*holder.Process); !held {
			g.cleanup()
		}
		r.mu.Lock()
		r.gen = nil
		r.mu.Unlock()
		return
	}
	g.cleanup()
	// R-REQ-8: the requests this process asked expire with it, in the
	// output before its end.
	r.expireGeneration(g.n, reasonGone)
	r.ring.Flush()
	r.flushInputs(false)
	g.mu.Lock()
	unavailable, refused := g.unavailable, g.handshakeRefused
	g.mu.Unlock()
	ev := ledger.Event{Kind: ledger.KindExited, Generation: g.n, PID: g.proc.Pid(), ExitCode: exit.Code, Signal: exit.Signal}
	if exit.Code == nil && exit.Signal == "" {
		ev = ledger.Event{Kind: ledger.KindLost, Generation: g.n, PID: g.proc.Pid(), Reason: ledger.ReasonProcessLost}
	}
	err := r.update(ev, func(rec *record) {
		r.gen = nil
		rec.Ended, rec.ExitCode, rec.Signal, rec.EndedAt = true, exit.Code, exit.Signal, exit.At.UTC()
		rec.StalledSince = nil
		if rec.EndedAt.IsZero() {
			rec.EndedAt = time.Now().UTC()
		}
		switch {
		case unavailable:
			rec.FailReason = apitypes.ReasonConversationGone
		case refused:
			rec.FailReason = apitypes.ReasonHandshakeFailed
		case exit.Code == nil && exit.Signal == "":
			rec.FailReason = apitypes.ReasonProcessLost
		}
	})
	if err != nil {
		s.o.Log.Error("recording the exit failed", logging.KeyRunRef, r.ref, logging.Err(err))
	}
	cause := exitCause(exit.Code, exit.Signal, unavailable)
	s.exits.WithLabelValues(cause).Inc()
	s.o.Log.Info("child exited", logging.KeyRunRef, r.ref, "generation", g.n, "cause", cause, "signal", exit.Signal, "pid", g.proc.Pid())
	r.mu.Lock()
	r.gen = nil
	reason := endReason(r.rec)
	r.mu.Unlock()
	r.ring.End(reason)
	s.released(g)
	s.o.OnChange(r.ref)
}
