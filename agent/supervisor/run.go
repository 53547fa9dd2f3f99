package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/runread"
	"github.com/olivares-dev/olivares/agent/transcript"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
)

// run is one run in memory. Its record is changed in memory first (under
// mu, which is never held across I/O) and committed after (under saveMu,
// which only this run's committers take), so that a reader of the run
// (a snapshot, a listing, the stdout reader) never waits for the disk.
type run struct {
	s    *Supervisor
	ref  string // immutable: rec.RunRef
	ring *ring.Ring

	op sync.Mutex // serialises launch, approve, resume, stop, move, release and delete of this run

	mu      sync.Mutex // guards rec, gen, unsaved, dirty and the input count
	rec     record
	gen     *generation    // the live generation; nil when not live
	unsaved []ledger.Event // ledger rows of changes not committed yet, in order
	dirty   bool           // rec changed since the last commit
	// stopSetup cancels the setup command running before the first
	// generation (setup.go); nil when none runs.
	stopSetup context.CancelCauseFunc

	saveMu sync.Mutex // serialises this run's commits; held across the write

	// live observes the stdout of Claude Code and Codex runs for activity
	// (window report, task progress, plans).
	live *transcript.Live

	// reqs are the run's requests, pending and recently settled, in the
	// order asked (requests.go); reqDirty and reqDrop are the changes the
	// next commit writes. Under mu.
	reqs     []*reqEntry
	reqDirty map[string]bool
	reqDrop  []string

	inputs     int // accepted inputs not yet in the ledger
	inputsBusy bool
	// inputsMu serialises the ledger writes of input counts, so that a
	// stop or an exit can flush the pending count before its own row.
	inputsMu sync.Mutex
}

func newRun(s *Supervisor, rg *ring.Ring, rec record) *run {
	r := &run{s: s, ref: rec.RunRef, ring: rg, rec: rec}
	r.live = transcript.NewLive()
	r.live.SetWindow(rec.Window)
	// The window report is kept on the record so that it survives a stop
	// and an agent restart (R-ACT-7); it comes from the stdout reader, so
	// its commit is the saver's.
	r.live.OnWindow(func(w *transcript.WindowReport) {
		r.updateAsync(ledger.Event{}, func(rec *record) { rec.Window = w })
	})
	return r
}

// change applies fn to the record in memory, bumps its revision and queues
// ev for the next commit. It never waits for the disk.
func (r *run) change(ev ledger.Event, fn func(*record)) {
	r.mu.Lock()
	if fn != nil {
		fn(&r.rec)
	}
	// Taken and set under r.mu: a row read meanwhile (the ring push's)
	// cannot carry a later revision with the older fields.
	r.rec.Rev = r.s.Runs.NextRev()
	if ev.Kind != "" {
		r.unsaved = append(r.unsaved, ev)
	}
	r.dirty = true
	r.mu.Unlock()
}

// save commits the record as it is now and the ledger rows queued before
// it, with the caller's also (R-MOVE-5), in one transaction (R-AUD-1
// style: the fact and its evidence commit together). No lock a reader
// takes is held while it writes. A failed commit keeps the changes queued
// for the next one.
func (r *run) save(also func(*bbolt.Tx) error) error {
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	r.mu.Lock()
	if !r.dirty && also == nil {
		r.mu.Unlock()
		return nil
	}
	evs := r.unsaved
	r.unsaved, r.dirty = nil, false
	b, err := json.Marshal(r.rec)
	var puts map[string][]byte
	var dels []string
	if err == nil {
		puts, dels, err = r.reqWritesLocked()
	}
	r.mu.Unlock()
	if err != nil {
		return err
	}
	s := r.s
	err = s.o.DB.Update(func(tx *bbolt.Tx) error {
		if s.o.inTx != nil {
			s.o.inTx(r.ref)
		}
		for _, ev := range evs {
			if _, err := s.o.Ledger.AppendTx(tx, r.ref, ev); err != nil {
				return err
			}
		}
		if also != nil {
			if err := also(tx); err != nil {
				return err
			}
		}
		if err := writeRequestsTx(tx, r.ref, puts, dels); err != nil {
			return err
		}
		return tx.Bucket(bucketRuns).Put([]byte(r.ref), b)
	})
	if err != nil {
		r.mu.Lock()
		r.unsaved = append(evs, r.unsaved...)
		r.dirty = true
		r.requeueReqWritesLocked(puts, dels)
		r.mu.Unlock()
	}
	return err
}

// update changes the record and commits it before it returns: for the
// callers that answer only once the fact is on disk (a stop requested, a
// generation started or ended). It notifies the change.
func (r *run) update(ev ledger.Event, fn func(*record)) error {
	return r.updateTx(ev, fn, nil)
}

// updateTx is update with more writes of the caller's in the same
// transaction (R-MOVE-5: the run and its ledger re-attached at once).
func (r *run) updateTx(ev ledger.Event, fn func(*record), also func(*bbolt.Tx) error) error {
	r.change(ev, fn)
	err := r.save(also)
	r.s.o.OnChange(r.ref)
	return err
}

// updateAsync changes the record now and leaves its commit to the saver:
// for what the output readers learn (a conversation id, a limit, a window
// report), so that a stalled disk never stalls a child's output.
func (r *run) updateAsync(ev ledger.Event, fn func(*record)) {
	r.change(ev, fn)
	r.s.saver.mark(r)
	r.s.o.OnChange(r.ref)
}

// touch notifies a change of a live-only fact (turn started or ended).
func (r *run) touch() {
	r.mu.Lock()
	r.rec.Rev = r.s.Runs.NextRev() // under r.mu, as in change
	r.mu.Unlock()
	r.s.o.OnChange(r.ref)
}

// saver commits the records the output readers changed, one run at a
// time, off their goroutines.
type saver struct {
	s     *Supervisor
	mu    sync.Mutex
	dirty map[*run]bool
	wake  chan struct{}
	done  chan struct{}
}

func newSaver(s *Supervisor) *saver {
	return &saver{s: s, dirty: map[*run]bool{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (v *saver) mark(r *run) {
	v.mu.Lock()
	v.dirty[r] = true
	v.mu.Unlock()
	select {
	case v.wake <- struct{}{}:
	default:
	}
}

func (v *saver) run() {
	for {
		select {
		case <-v.wake:
		case <-v.done:
			v.flush()
			return
		}
		v.flush()
	}
}

func (v *saver) flush() {
	v.mu.Lock()
	runs := make([]*run, 0, len(v.dirty))
	for r := range v.dirty {
		runs = append(runs, r)
	}
	clear(v.dirty)
	v.mu.Unlock()
	for _, r := range runs {
		if err := r.save(nil); err != nil {
			v.s.o.Log.Error("run commit failed", logging.KeyRunRef, r.ref, logging.Err(err))
		}
	}
}

// stop commits what is left and ends run.
func (v *saver) stop() { close(v.done) }

// recordLost marks the last generation lost: no exit was observed.
func (r *run) recordLost() error {
	var gen uint32
	err := r.update(ledger.Event{}, func(rec *record) {
		if rec.Generation == 0 {
			// Generation 1's spawn was under way (Open): it was attempted.
			rec.Generation = 1
		}
		rec.Ended, rec.FailReason, rec.EndedAt = true, apitypes.ReasonProcessLost, time.Now().UTC()
		gen = rec.Generation
		r.unsaved = append(r.unsaved, ledger.Event{Kind: ledger.KindLost, Generation: rec.Generation, PID: rec.PID, Reason: ledger.ReasonProcessLost})
	})
	if err != nil {
		return err
	}
	r.s.exits.WithLabelValues(causeLost).Inc()
	r.s.o.Log.Warn("generation was live when the agent stopped: recorded lost", logging.KeyRunRef, r.ref, "generation", gen)
	return r.ring.End(apitypes.ReasonProcessLost)
}

// liveGen returns the live generation, or ErrNotLive.
func (r *run) liveGen() (*generation, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen == nil {
		if r.rec.PendingApproval {
			// Held by its profile's policy: approving it, not resuming it,
			// starts it.
			return nil, refusal.New(ErrPendingApproval, "run %s waits for a person's approval and takes no input until then; approve it first", r.rec.RunRef)
		}
		state, _ := Derive(Facts{Started: r.rec.Generation > 0, StopRequested: r.rec.StopRequested,
			ExitCode: r.rec.ExitCode, Signal: r.rec.Signal, FailReason: r.rec.FailReason})
		return nil, refusal.New(ErrNotLive, "run %s is not live (state=%s); resume it first", r.rec.RunRef, state)
	}
	return r.gen, nil
}

// current returns the record and whether a generation is live.
func (r *run) current() (record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rec, r.gen != nil
}

// snapshot derives the run's row.
func (r *run) snapshot() apitypes.Run {
	r.mu.Lock()
	rec, g := r.rec, r.gen
	pending := r.pendingLocked()
	r.mu.Unlock()
	f := Facts{
		Released:        rec.Released,
		PendingApproval: rec.PendingApproval,
		Started:         rec.Generation > 0,
		Live:            g != nil,
		Handshaken:      rec.Handshaken,
		StopRequested:   rec.StopRequested,
		ExitCode:        rec.ExitCode,
		Signal:          rec.Signal,
		FailReason:      rec.FailReason,
	}
	if g != nil {
		f.TurnActive = g.sess.TurnActive()
	}
	state, reason := Derive(f)
	v := apitypes.Run{
		RunRef: rec.RunRef, Tenant: rec.Tenant, State: state, Reason: reason,
		Driver: rec.Driver, Generation: rec.Generation, Isolation: rec.Isolation,
		ProviderProfileRef: rec.ProfileRef, WorkspaceRef: rec.WorkspaceRef, WorkspacePath: rec.WorkspacePath, WorktreeBranch: rec.WorktreeBranch,
		TemplateRef: rec.TemplateRef, ConversationID: rec.ConversationID, Limit: rec.Limit, Taint: rec.Taint, HandoffOf: rec.HandoffOf,
		CreatedAt: rec.CreatedAt, Rev: rec.Rev, PendingRequests: pending, LastError: rec.LastError,
	}
	if state == apitypes.StateRunning {
		v.StalledSince = rec.StalledSince // R-ATTN-6
	}
	if len(v.Taint) == 0 {
		// R-LIST-8: a run given a credential shows no text of its
		// output in the list (R-CRED-*).
		v.LastMessage = rec.LastMessage
	}
	if rec.Usage != nil {
		u := *rec.Usage
		v.Usage = &u
	}
	if rec.Ended {
		v.ExitCode, v.Signal = rec.ExitCode, rec.Signal
	}
	if g != nil {
		v.PID = rec.PID
		v.LiveRef = fmt.Sprintf("%s.%d", rec.RunRef, rec.Generation)
	}
	if rec.Driver == string(cliruntime.KindClaude) {
		v.ClaudeSessionID = rec.ConversationID
	}
	if !rec.StartedAt.IsZero() {
		t := rec.StartedAt
		v.StartedAt = &t
	}
	if rec.Ended && !rec.EndedAt.IsZero() {
		t := rec.EndedAt
		v.EndedAt = &t
	}
	v.RingFirst, v.RingLast = r.ring.Range()
	return v
}

// Reads is the runs as the read side (agent/runread) looks them up: a
// run's record's facts, never a process handle, and its tool's
// environment.
type Reads struct {
	runs *Table
	host *Host
}

// ReadRun returns the run's facts, or ErrRunNotFound.
func (rd *Reads) ReadRun(ref string) (runread.Run, error) {
	r, err := rd.runs.get(ref)
	if err != nil {
		return runread.Run{}, err
	}
	rec, live := r.current()
	return runread.Run{Ref: rec.RunRef, Tenant: rec.Tenant, Driver: rec.Driver, ProfileRef: rec.ProfileRef,
		WorkspaceRef: rec.WorkspaceRef, Workdir: rec.WorkspacePath, WorktreeBranch: rec.WorktreeBranch, TemplateRef: rec.TemplateRef,
		ConversationID: rec.ConversationID, Generation: rec.Generation, Live: live, PendingApproval: rec.PendingApproval,
		Taint: rec.taint(), Observer: r.live}, nil
}

// ChildEnv is the environment the run's tool starts with now (its
// profile's, with the agent's PATH); nil when it cannot be built.
func (rd *Reads) ChildEnv(ref string) []string {
	r, err := rd.runs.get(ref)
	if err != nil {
		return nil
	}
	rec, _ := r.current()
	prof, ok, err := rd.host.o.Registry.Profile(rec.ProfileRef)
	d := rd.host.o.Drivers[prof.Tool]
	if err != nil || !ok || d == nil {
		return nil
	}
	cmd, err := d.Launch(rd.host.spec(prof, rec.WorkspacePath, "", rec.RunRef))
	if err != nil {
		return nil
	}
	return cmd.Env
}
