package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/holder"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
)

// Sessions that outlive their agent (issue 30): with Options.Holders set, a
// generation whose tool can be adopted runs under a holder, which owns the
// child and outlives the agent. Close leaves the holders running; the next
// Open adopts each live one (the ledger says adopted), and its output goes
// on at the ring's last+1. A run is lost (R-STATE-6) only when its holder is
// gone.
//
// A tool can be adopted when its session writes nothing at the start (so a
// fresh driver session takes it over without a handshake: Claude Code's
// stream-json form) or its session is a cliruntime.Adopter (it learns the
// protocol state of the live process from the tool, Codex's app-server, or
// as a Replayer from the generation read again, the ACP tools), and its
// replayed history is not withheld (R-HW-4 observes line by line, ahead of
// the marks).

// adoptable reports whether a fresh session of sess's driver can take over
// its process.
func adoptable(sess cliruntime.Session, first cliruntime.Step) bool {
	_, ok := sess.(cliruntime.Adopter)
	return ok || len(first.Write) == 0
}

// holderDir is the directory of generation gen's holder.
func (s *Supervisor) holderDir(ref string, gen uint32) string {
	return filepath.Join(s.o.HoldersDir, ref, strconv.FormatUint(uint64(gen), 10))
}

// spawn starts a child: under a holder when adoptable and the agent has
// holders, else with the runner (the child then dies with the agent).
func (s *Supervisor) spawn(ctx context.Context, rn sessions.Runner, ref string, gen uint32, sp sessions.Spec, adoptable bool) (sessions.Process, error) {
	if s.o.Holders == nil || !adoptable || rn.Name() == "fake" {
		return rn.Start(ctx, sp)
	}
	// An isolating runner's boundary is a rewrite of the launch: the holder
	// starts the contained launch, so the boundary holds whoever spawns
	// the child (docs/isolation.md).
	cleanup := func() {}
	if w, ok := rn.(interface {
		Wrap(sessions.Spec) (sessions.Spec, func(), error)
	}); ok {
		ws, c, err := w.Wrap(sp)
		if err != nil {
			return nil, err
		}
		sp, cleanup = ws, c
	}
	dir := s.holderDir(ref, gen)
	p, err := s.o.Holders.Start(ctx, dir, sp, rn.Name() == "pty")
	if err != nil {
		os.RemoveAll(dir)
		cleanup()
		return nil, err
	}
	go func() {
		<-p.Done()
		cleanup()
	}()
	return p, nil
}

// released is called once a generation's exit is recorded: its holder may
// go, and its directory with it.
func (s *Supervisor) released(g *generation) {
	if hp, ok := g.proc.(*holder.Process); ok {
		hp.AckExit()
		os.RemoveAll(s.holderDir(g.r.ref, g.n))
	}
}

// detach leaves a held child running when the agent closes; it reports
// false for a child that is not held.
func detach(p sessions.Process) bool {
	hp, ok := p.(*holder.Process)
	if ok {
		hp.Detach()
	}
	return ok
}

// heldStream commits a held child's output with its holder's record
// numbers and acknowledges them once committed (no gap, no duplicate when
// another agent adopts the holder). For a child that is not held it does
// nothing.
type heldStream struct {
	p      *holder.Process
	m      interface{ Mark() uint64 }
	stream ring.Stream
	acked  uint64
}

func heldOutput(p sessions.Process, rd io.Reader, stream ring.Stream) *heldStream {
	hp, ok := p.(*holder.Process)
	if !ok {
		return nil
	}
	m, ok := rd.(interface{ Mark() uint64 })
	if !ok {
		return nil
	}
	return &heldStream{p: hp, m: m, stream: stream}
}

func (h *heldStream) mark() uint64 {
	if h == nil {
		return 0
	}
	return h.m.Mark()
}

// ack acknowledges what the ring has committed of this stream so far (at
// most one commit behind the reads: the holder keeps the rest).
func (h *heldStream) ack(rg *ring.Ring, gen uint32) {
	if h == nil {
		return
	}
	if m := rg.Mark(gen, h.stream); m > h.acked {
		h.acked = m
		var ms holder.Marks
		if h.stream == ring.Stderr {
			ms[1] = m
		} else {
			ms[0] = m
		}
		h.p.Ack(ms)
	}
}

// adopt takes over the live holder of r's last generation (Open). It
// reports false when there is none to adopt, after a log line saying why
// when one answered that this agent cannot take.
//
// A process that waits for the answer to a request of the previous agent
// is not adopted: its requests expired with that agent (R-REQ-8) and a new
// driver session cannot answer them, so its holder stops it and the run is
// recorded lost, as without a holder.
func (s *Supervisor) adopt(r *run, rec record, asked bool) bool {
	if s.o.Holders == nil {
		return false
	}
	dir := s.holderDir(r.ref, rec.Generation)
	if _, err := os.Stat(dir); err != nil {
		return false
	}
	log := s.o.Log.With(logging.KeyRunRef, r.ref, "generation", rec.Generation)
	d := s.o.Drivers[rec.Driver]
	after := holder.Marks{max(r.ring.Mark(rec.Generation, ring.Stdout), r.ring.Mark(rec.Generation, ring.PTY)), r.ring.Mark(rec.Generation, ring.Stderr)}
	p, info, err := holder.Adopt(dir, after, s.o.Holders.Version)
	switch {
	case holder.NoHolder(err):
		os.RemoveAll(dir)
		return false
	case errors.Is(err, holder.ErrProtocol):
		log.Error("a holder speaks a protocol this agent does not know: left running, the run is recorded lost; stop its child by hand or run the agent version that started it",
			"holder_pid", info.Pid, "holder_version", info.Version, "dir", dir, logging.Err(err))
		return false
	case err != nil:
		log.Error("adopting a holder failed: the run is recorded lost", "dir", dir, logging.Err(err))
		return false
	case d == nil || asked:
		log.Warn("a held child cannot be adopted (no driver for its tool, or it waits for an answer to a request that expired with the previous agent): its holder stops it", "tool", rec.Driver)
		s.stopHeld(p, dir)
		return false
	}
	spec := cliruntime.LaunchSpec{Workdir: rec.WorkspacePath, ConversationID: rec.ConversationID, RunRef: r.ref}
	if prof, ok, _ := s.o.Registry.Profile(rec.ProfileRef); ok {
		spec = s.Host.spec(prof, rec.WorkspacePath, rec.ConversationID, r.ref)
	}
	sess := d.NewSession(spec)
	var first cliruntime.Step
	var requeue []apitypes.InputFrame
	if a, ok := sess.(cliruntime.Adopter); ok {
		if rec.ConversationID == "" {
			// An Adopter's process named its conversation in its
			// handshake; one that did not cannot be told apart.
			log.Warn("a held child named no conversation before its agent went: its holder stops it", "tool", rec.Driver)
			s.stopHeld(p, dir)
			return false
		}
		first = a.Adopt()
		if rp, ok := sess.(cliruntime.Replayer); ok {
			if st, q, ok := replayGeneration(r.ring, rec.Generation, d, spec, rp); ok {
				first, requeue = st, q
			} else {
				log.Warn("the held child's generation cannot be read again from its start (no longer retained): it is adopted as idle, and the answer to a prompt in flight will be passed over", "tool", rec.Driver)
			}
		}
	} else {
		sess.Start() // writes nothing: only such tools are held
		if mt, ok := sess.(cliruntime.MidTurner); ok && midTurn(r.ring, rec.Generation, d, spec) {
			first = mt.MidTurn()
		}
	}
	g := newGeneration(r, rec.Generation, p, sess, d)
	g.adoptedFrom = info.Version
	if s.o.GrantsDir != "" {
		// The grant files of this generation, as withGrants' cleanup.
		g.cleanup = func() {
			os.RemoveAll(filepath.Join(s.o.GrantsDir, r.ref, strconv.FormatUint(uint64(rec.Generation), 10)))
		}
	}
	g.handshaken = true
	close(g.handshake)
	g.push(first.Write)
	detail, _ := json.Marshal(map[string]string{"from": info.Version, "to": s.o.Holders.Version})
	r.mu.Lock()
	r.gen = g
	r.rec.StalledSince = nil // this agent's check starts again (R-ATTN-6)
	r.unsaved = append(r.unsaved, ledger.Event{Kind: ledger.KindAdopted, Generation: rec.Generation, PID: p.Pid(), Detail: detail})
	r.dirty = true
	r.mu.Unlock()
	if err := r.save(nil); err != nil {
		log.Error("recording the adoption failed", logging.Err(err))
	}
	g.events(first.Events) // a turn in flight: the run is running, its stall check armed
	g.serve(info.PTY)
	for _, f := range requeue {
		// Accepted by the previous agent and still queued in its session:
		// sent again, in order; its record is already in the output.
		if f.Clipped {
			log.Warn("an input queued when the previous agent went is longer than the output keeps of it: it is not sent again", "by", f.By)
			continue
		}
		if err := g.encode(cliruntime.Input{Text: f.Text, By: f.By, Name: f.Name}, nil); err != nil {
			log.Warn("an input queued when the previous agent went was not sent again", logging.Err(err))
		}
	}
	log.Info("adopted a live child from its holder", "pid", p.Pid(), "from_version", info.Version, "holder_pid", p.HolderPid())
	return true
}

// midTurnFrames bounds how far back midTurn reads: a turn that wrote more
// since its start is not seen as one in flight (its next turn is).
const midTurnFrames = 4096

// midTurn reports whether generation gen's tool was in a turn when its
// agent went: its retained output, read through a scratch session of its
// driver (nothing it answers is written or recorded), says so.
func midTurn(rg *ring.Ring, gen uint32, d cliruntime.Driver, spec cliruntime.LaunchSpec) bool {
	first, last := rg.Range()
	if last == 0 {
		return false
	}
	scratch := d.NewSession(spec)
	scratch.Start()
	readGeneration(rg, max(first, last-min(last, midTurnFrames)+1), gen, scratch.Observe, nil)
	return scratch.TurnActive()
}

// replayGeneration reads generation gen from its start through a scratch
// session of d, its output lines and the inputs people sent in the order
// the output holds them, and has rp take the scratch's state
// (cliruntime.Replayer). The generation began as a launch or as a resume
// of spec's conversation, which the ring does not say: the launch is read
// first. It returns the inputs the scratch still held unsent.
func replayGeneration(rg *ring.Ring, gen uint32, d cliruntime.Driver, spec cliruntime.LaunchSpec, rp cliruntime.Replayer) (cliruntime.Step, []apitypes.InputFrame, bool) {
	if _, last := rg.Range(); last == 0 {
		return cliruntime.Step{}, nil, false
	}
	for _, conv := range []string{"", spec.ConversationID} {
		sp := spec
		sp.ConversationID = conv
		scratch := d.NewSession(sp)
		scratch.Start()
		var inputs []apitypes.InputFrame
		readGeneration(rg, 0, gen, scratch.Observe, func(b []byte) {
			var f apitypes.InputFrame
			if json.Unmarshal(b, &f) == nil {
				inputs = append(inputs, f)
				_, _ = scratch.Encode(cliruntime.Input{Text: f.Text})
			}
		})
		if st, q, ok := rp.AdoptFrom(scratch); ok {
			return st, inputs[len(inputs)-min(q, len(inputs)):], true
		}
	}
	return cliruntime.Step{}, nil, false
}

// readGeneration reads the retained frames of generation gen from seq from
// (0: the oldest) to the last committed one: each line of its stdout to
// line, the data of each input frame to input (when not nil).
func readGeneration(rg *ring.Ring, from uint64, gen uint32, line func([]byte) cliruntime.Step, input func([]byte)) {
	_, last := rg.Range()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v := rg.Subscribe(from, 0)
	defer v.Close()
	var part []byte
	for {
		ev, err := v.Next(ctx)
		if err != nil || ev.Kind == ring.EventEnd {
			return
		}
		if ev.Kind == ring.EventFrame && ev.Frame.Generation == gen {
			switch {
			case ev.Frame.Stream == ring.Stdout:
				data := ev.Frame.Data
				for {
					i := bytes.IndexByte(data, '\n')
					if i < 0 {
						part = append(part, data...)
						break
					}
					line(append(part, data[:i]...))
					part, data = part[:0], data[i+1:]
				}
			case ev.Frame.Stream == ring.Input && input != nil:
				input(ev.Frame.Data)
			}
		}
		if ev.Kind == ring.EventFrame && ev.Frame.Seq >= last {
			return
		}
	}
}

// stopHeld has a holder that is not adopted stop its child and go.
func (s *Supervisor) stopHeld(p *holder.Process, dir string) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		go io.Copy(io.Discard, p.Stdout())
		go io.Copy(io.Discard, p.Stderr())
		p.Stop(-1)
		p.AckExit()
		os.RemoveAll(dir)
	}()
}

// After a host reboot (issue 30, opt-in): a run whose process was lost
// (its holder went with the host, or was killed) and whose profile says
// resume_after_loss is resumed on its conversation when the agent starts,
// as a person's resume would be (the start check, approval, isolation);
// the ledger says resumed_after_loss, with error when the run could not be
// resumed and why (no conversation yet, a tool that cannot continue it, a
// profile that holds resumes for approval). The default, off, keeps the
// seeds' "nothing is spawned again" (R-RC-4).

// resumeAfterLoss resumes refs one after the other, until the agent
// closes.
func (s *Supervisor) resumeAfterLoss(refs []string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	for _, ref := range refs {
		if ctx.Err() != nil {
			return
		}
		v, err := s.Resume(ctx, ref, nil, "")
		r, gerr := s.Runs.get(ref)
		if gerr != nil {
			continue
		}
		var why string
		switch {
		case err != nil:
			why = err.Error()
		case v.State == apitypes.StatePendingApproval:
			why = "its profile holds each resume for a person's approval; approve it"
		}
		rec, _ := r.current()
		ev := ledger.Event{Kind: ledger.KindResumedAfterLoss, Generation: rec.Generation}
		log := s.o.Log.With(logging.KeyRunRef, ref)
		if why != "" {
			ev.Detail, _ = json.Marshal(map[string]string{"error": why})
			log.Warn("a lost run was not resumed", "why", why)
		} else {
			log.Info("resumed a lost run on its conversation", "generation", v.Generation, "pid", v.PID)
		}
		if err := r.update(ev, func(*record) {}); err != nil {
			log.Error("recording resumed_after_loss failed", logging.Err(err))
		}
	}
}
