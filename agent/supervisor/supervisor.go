// Package supervisor is the lifecycle of the runs of one node: it launches
// a run's child process (one generation at a time), lets a person approve a
// held launch, resumes a stopped run on its stored conversation, writes
// input to it, interrupts its turn, stops it, and hands its output ring to
// viewers (attach). Every start (launch, resume, approve) passes one start
// check (start.go). A run's facts are its record and its lifecycle ledger,
// committed together; its state is never stored but derived (Derive,
// R-STATE-1).
//
// The supervisor never holds a lock that a reader takes across disk I/O:
// a record changes in memory first, and its commit happens outside that
// lock (run.go), so a stalled disk never stalls another run's output or a
// listing. Its refusals are the sentinel errors of errors.go; it knows
// nothing of HTTP.
//
// With holders (Options.Holders, hold.go) a child outlives the agent and
// the next Open adopts it; without one it dies with the agent, and after a
// restart Open records the generation lost (R-STATE-6).
//
// What is not the lifecycle is a component the Supervisor wires and agentd
// calls directly: the run table (Runs), Usage, Requests, Host, Reads and
// ClaudeHook. Buckets (owned here): runs, moves, requests. The ring,
// ledger and registry packages own theirs.
package supervisor

import (
	"errors"
	"log/slog"
	"sync"
	"syscall"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/holder"
	"github.com/olivares-dev/olivares/agent/isolation"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
)

// Defaults.
const (
	// HandshakeTimeout bounds how long resume waits for the tool to confirm
	// the stored conversation.
	HandshakeTimeout = 30 * time.Second
	// StartTimeout bounds how long a resumed tool may print nothing at all
	// before it is judged hung; HandshakeTimeout counts from its first byte.
	StartTimeout = 90 * time.Second
	// drainTimeout bounds how long, after the leader exited, the output
	// readers wait for EOF: a grandchild that keeps the pipe open must not
	// hold the generation open forever.
	drainTimeout = 2 * time.Second
	// maxLine bounds one stdout line handed to the driver; a longer line is
	// still recorded in the ring but not parsed.
	maxLine = 16 << 20
	// limitHorizon: a reset time further ahead is dropped (R-LIM-3).
	limitHorizon = 365 * 24 * time.Hour
)

// Options configure a Supervisor.
type Options struct {
	DB       *bbolt.DB
	Ring     *ring.Store
	Ledger   *ledger.Ledger
	Registry *registry.Registry
	// Path is the children's PATH when a profile's env sets none; when
	// empty, cliruntime.DefaultPath. It never comes from the agent's own
	// environment implicitly.
	Path string
	// Drivers by tool name (claude, codex, grok, gemini, opencode).
	Drivers map[string]cliruntime.Driver
	// Runners by launch transport (R-TR-1). The composition root wires
	// ProcRunner for stdio (R-TR-2).
	Runners map[cliruntime.LaunchTransport]sessions.Runner
	// Holders, when set, starts the children of the tools that can be
	// adopted under a holder that outlives the agent (issue 30): Close
	// leaves them running and the next Open adopts them. When nil, every
	// child dies with the agent (R-STATE-6).
	Holders *holder.Launcher
	// HoldersDir holds one 0700 directory per run and generation for its
	// holder (socket, spool, log). Required with Holders.
	HoldersDir string
	// Hook is the engine's hook endpoint for Claude Code runs of profiles
	// with engine_hooks (R-ED-4). When its Command is empty, such runs do
	// not carry the engine's hooks.
	Hook HookEndpoint
	// WorktreeDir is where per-run worktrees go (<dir>/<tenant>/<run>);
	// when empty, worktree launches are 503 (R-WT-4).
	WorktreeDir string
	// GrantsDir holds the files of grants given as_file, one 0700
	// directory per run and generation, removed when it ends. When empty,
	// such grants are refused.
	GrantsDir string
	// StopGrace is R-STOP-3's grace; zero means sessions.DefaultGrace.
	StopGrace time.Duration
	// SetupTimeout bounds a worktree run's setup command (R-SETUP-2); zero
	// means DefaultSetupTimeout.
	SetupTimeout time.Duration
	// MaxStdinQueue bounds the bytes of input waiting for a child's stdin;
	// an input beyond it is ErrInputQueueFull. When zero,
	// DefaultMaxStdinQueue.
	MaxStdinQueue int
	// Container is the podman runner of isolation=container (detected in
	// the background); when nil or not working, container launches are
	// refused with its reason.
	Container *isolation.Container
	// Sandbox is the bubblewrap runner of isolation=sandbox; when nil,
	// sandbox launches are refused with SandboxUnavailable, the reason.
	Sandbox            *isolation.Sandbox
	SandboxUnavailable string
	// OnChange is called (without locks held) after a run row changed.
	OnChange func(runRef string)
	// Log gets the supervisor's lines. When nil, they are dropped.
	Log *slog.Logger
	// Metrics registers the child exits by cause and the input queued
	// for children (R-OBS-8). When nil, they are kept but not exported.
	Metrics prometheus.Registerer

	// inTx, when set (tests), runs inside every record commit's
	// transaction with the run's ref: a place to stall the disk.
	inTx func(runRef string)
	// after is the ask timeout's clock: it calls fn after d and returns a
	// stop function; time.AfterFunc unless set (tests).
	after func(d time.Duration, fn func()) (stop func() bool)
	// stallAfter and now are the stall check's timer (as after) and the
	// clock of stalled_since (stall.go); time's unless set (tests).
	stallAfter func(d time.Duration, fn func()) (stop func() bool)
	now        func() time.Time
}

// DefaultMaxStdinQueue is MaxStdinQueue's default: four inputs of the
// largest size the API takes (1 MiB).
const DefaultMaxStdinQueue = 4 << 20

// Supervisor is the run runtime of one node: the lifecycle of its runs,
// and the components it wires (each type's comment says what it is).
type Supervisor struct {
	Runs       *Table
	Usage      *Usage
	Requests   *Requests
	Host       *Host
	Reads      *Reads
	ClaudeHook *ClaudeHook

	o Options

	closing chan struct{}

	saver *saver // commits the records changed by the output readers

	exits *prometheus.CounterVec // child exits by cause (R-OBS-8)

	wg      sync.WaitGroup // generation goroutines
	spawnMu sync.RWMutex   // held (read) by a spawn; Close takes it to wait for them
}

// Open loads every run, adopts the generations whose holder is alive
// (issue 30), and records the other generations that were live when the
// agent last stopped as lost (R-STATE-6): their rings get End(process_lost)
// so that attach replays and then says the run is not live (R-RC-2).
func Open(o Options) (*Supervisor, error) {
	if o.DB == nil || o.Ring == nil || o.Ledger == nil || o.Registry == nil {
		return nil, errors.New("supervisor: DB, Ring, Ledger and Registry are required")
	}
	o.Log = logging.OrDiscard(o.Log).With(logging.KeyComponent, "supervisor")
	if o.OnChange == nil {
		o.OnChange = func(string) {}
	}
	if o.StopGrace == 0 {
		o.StopGrace = sessions.DefaultGrace
	}
	if o.MaxStdinQueue <= 0 {
		o.MaxStdinQueue = DefaultMaxStdinQueue
	}
	afterFunc := func(d time.Duration, fn func()) func() bool { return time.AfterFunc(d, fn).Stop }
	if o.after == nil {
		o.after = afterFunc
	}
	if o.stallAfter == nil {
		o.stallAfter = afterFunc
	}
	if o.now == nil {
		o.now = time.Now
	}
	if err := createBuckets(o.DB); err != nil {
		return nil, err
	}
	s := &Supervisor{o: o, closing: make(chan struct{}), Runs: &Table{runs: map[string]*run{}}}
	s.Host, s.ClaudeHook = &Host{o: &s.o}, &ClaudeHook{runs: s.Runs, o: &s.o}
	s.registerMetrics(o.Metrics)
	s.saver = newSaver(s)
	s.Usage, s.Requests = &Usage{runs: s.Runs, saver: s.saver}, &Requests{runs: s.Runs}
	s.Reads = &Reads{runs: s.Runs, host: s.Host}
	o.Registry.SetUses(s.Runs.uses)
	recs, err := loadAll[record](o.DB, bucketRuns)
	if err != nil {
		return nil, err
	}
	reqs, err := loadRequests(o.DB)
	if err != nil {
		return nil, err
	}
	var lost []string // runs to resume after their loss (issue 30)
	// Every stored rev first: an adopted run below starts reading its
	// child at once, and its changes take revs (rev) from then on.
	for _, rec := range recs {
		s.Runs.lastRev = max(s.Runs.lastRev, rec.Rev)
	}
	for _, rec := range recs {
		rg, err := o.Ring.Ring(rec.RunRef)
		if err != nil {
			return nil, err
		}
		r := newRun(s, rg, rec)
		s.Runs.add(r)
		// R-REQ-8: a request whose process died with the agent expires;
		// its settlement goes into the output before the ring's end.
		expired := r.restoreRequests(reqs[rec.RunRef])
		if rec.PendingApproval {
			// Held for a person: no process was ever spawned for it.
			if expired {
				if err := r.save(nil); err != nil {
					return nil, err
				}
			}
			continue
		}
		// A run still at generation 0 was being launched: the agent died
		// between created and started, so no process will ever move it
		// on (and a child it may have spawned died with the agent).
		if !rec.Ended && rec.Generation > 0 && s.adopt(r, rec, expired) {
			// Its holder kept it alive (issue 30).
		} else if !rec.Ended || rec.Generation == 0 {
			if err := r.recordLost(); err != nil {
				return nil, err
			}
			if p, ok, _ := o.Registry.Profile(rec.ProfileRef); ok && p.ResumeAfterLoss && rec.Generation > 0 && !rec.Released {
				lost = append(lost, rec.RunRef)
			}
		} else if rg.Live() {
			// The end was recorded but the agent died before the ring's
			// End committed.
			if err := rg.End(endReason(rec)); err != nil {
				return nil, err
			}
		}
		if expired {
			if err := r.save(nil); err != nil {
				return nil, err
			}
		}
	}
	if err := s.sweepOrphans(); err != nil {
		return nil, err
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.saver.run() }()
	if len(lost) > 0 {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.resumeAfterLoss(lost) }()
	}
	return s, nil
}

// Close leaves the held children to their holders (the next Open adopts
// them) and kills the others (they die with the agent), without recording
// an exit, so that the next Open records those lost,
// commits what the output readers changed, and waits for the run
// goroutines.
func (s *Supervisor) Close() {
	select {
	case <-s.closing:
		return
	default:
	}
	close(s.closing)
	// Wait for the spawns under way; later ones see closing and stop.
	s.spawnMu.Lock()
	//lint:ignore SA2001 a barrier, not a critical section: it waits for the spawns under way
	s.spawnMu.Unlock()
	for _, r := range s.Runs.all() {
		r.mu.Lock()
		if g := r.gen; g != nil && !detach(g.proc) {
			g.proc.Signal(syscall.SIGKILL)
		}
		r.mu.Unlock()
	}
	s.saver.stop()
	s.wg.Wait()
}

func (s *Supervisor) closed() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// Get returns the run's row.
func (s *Supervisor) Get(ref string) (apitypes.Run, error) {
	r, err := s.Runs.get(ref)
	if err != nil {
		return apitypes.Run{}, err
	}
	return r.snapshot(), nil
}

// List returns every run's row, newest first (Table.rows).
func (s *Supervisor) List() []apitypes.Run { return s.Runs.rows() }

// Events pages the run's lifecycle ledger (R-EVT-1).
func (s *Supervisor) Events(ref string, after uint64, limit int) ([]apitypes.Event, uint64, error) {
	if _, err := s.Runs.get(ref); err != nil {
		return nil, 0, err
	}
	evs, next, err := s.o.Ledger.Page(ref, after, limit)
	if err != nil {
		return nil, 0, err
	}
	out := make([]apitypes.Event, len(evs))
	for i, e := range evs {
		out[i] = apitypes.Event{Seq: e.Seq, At: e.At, Kind: e.Kind, Generation: e.Generation, PID: e.PID,
			ExitCode: e.ExitCode, Signal: e.Signal, Reason: e.Reason, Detail: e.Detail}
	}
	return out, next, nil
}

// Attach subscribes to the run's output from seq from (0: the oldest
// retained). live says whether the run was live at the subscription; when
// it was not, the viewer replays and ends, and the caller sends the
// not-live notice with the run's state (R-ATT-6).
func (s *Supervisor) Attach(ref string, from uint64, queue int) (v *ring.Viewer, live bool, err error) {
	r, err := s.Runs.get(ref)
	if err != nil {
		return nil, false, err
	}
	r.mu.Lock()
	live = r.gen != nil
	r.mu.Unlock()
	return r.ring.Subscribe(from, queue), live, nil
}

// EndOf returns the last generation's exit for an end frame (R-ATT-4).
func (s *Supervisor) EndOf(ref string) apitypes.End {
	r, err := s.Runs.get(ref)
	if err != nil {
		return apitypes.End{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return apitypes.End{Generation: r.rec.Generation, ExitCode: r.rec.ExitCode, Signal: r.rec.Signal, Reason: r.rec.FailReason}
}

// LiveRun is one line of `olivares-agent status`.
type LiveRun struct {
	RunRef     string `json:"run_ref"`
	Driver     string `json:"driver"`
	Generation uint32 `json:"generation"`
	PID        int    `json:"pid"`
	State      string `json:"state"`
	FirstSeq   uint64 `json:"first_seq"`
	LastSeq    uint64 `json:"last_seq"`
	// AdoptedFrom is the version of the agent that started the process,
	// when this agent adopted it from its holder (issue 30).
	AdoptedFrom string `json:"adopted_from,omitempty"`
}

// Live lists the live runs (R-ARCH-5).
func (s *Supervisor) Live() []LiveRun {
	out := []LiveRun{}
	for _, v := range s.List() {
		if !apitypes.Live(v.State) {
			continue
		}
		lr := LiveRun{RunRef: v.RunRef, Driver: v.Driver, Generation: v.Generation, PID: v.PID,
			State: v.State, FirstSeq: v.RingFirst, LastSeq: v.RingLast}
		if r, err := s.Runs.get(v.RunRef); err == nil {
			r.mu.Lock()
			if r.gen != nil {
				lr.AdoptedFrom = r.gen.adoptedFrom
			}
			r.mu.Unlock()
		}
		out = append(out, lr)
	}
	return out
}

// limitOf turns a driver's limit fact into the run's field (R-LIM-3/4).
func limitOf(l *cliruntime.Limit, account string, now time.Time) *apitypes.Limit {
	seen := now.UTC()
	out := &apitypes.Limit{Kind: string(l.Kind), AccountRef: account, SeenAt: &seen} // R-CONT-5
	if l.ResetsAt != nil && l.ResetsAt.Sub(now) <= limitHorizon {
		t := l.ResetsAt.UTC()
		out.ResetsAt = &t
	}
	return out
}

func endReason(rec record) string {
	if rec.FailReason != "" {
		return rec.FailReason
	}
	return "exited"
}
