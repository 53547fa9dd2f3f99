// Package supervisor owns the runs of one node: their provider profiles and
// workspaces, their child processes (one generation at a time), the output
// ring and the lifecycle ledger they write, and the run rows the agent
// pushes to the coordinator's index.
//
// A run's state is never stored: Snapshot derives it (R-STATE-1, Derive)
// from the persisted record, the ledger's facts and the live process. The
// children die with the agent in this version: after a restart Open finds
// the generations that were live and records them lost (R-STATE-6).
//
// Buckets (owned here): profiles, workspaces, runs. The ring and ledger
// packages own theirs.
package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/claudehook"
	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/agent/transcript"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Defaults.
const (
	// HandshakeTimeout bounds how long resume waits for the tool to confirm
	// the stored conversation.
	HandshakeTimeout = 30 * time.Second
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
	DB     *bbolt.DB
	Ring   *ring.Store
	Ledger *ledger.Ledger
	// ProfilesDir holds the homes of profiles created without one.
	ProfilesDir string
	// Path is the children's PATH when a profile's env sets none; when
	// empty, cliruntime.DefaultPath. It never comes from the agent's own
	// environment implicitly.
	Path string
	// Drivers by tool name (claude, codex, grok).
	Drivers map[string]cliruntime.Driver
	// Runners by launch transport (R-TR-1). The composition root wires
	// ProcRunner for stdio (R-TR-2).
	Runners map[cliruntime.LaunchTransport]sessions.Runner
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
	// ContainerRuntime is the podman or docker path found, "" if none.
	ContainerRuntime string
	// OnChange is called (without locks held) after a run row changed.
	OnChange func(runRef string)
	// Logf: when nil, logs are dropped.
	Logf func(string, ...any)
}

// Supervisor is the run runtime of one node.
type Supervisor struct {
	o Options

	closing chan struct{}

	mu      sync.Mutex // guards runs, profiles, workspaces, lastRev
	runs    map[string]*run
	lastRev uint64

	// tcache indexes the native transcripts activity and messages read.
	tcache *transcript.Cache

	wg      sync.WaitGroup // generation goroutines
	spawnMu sync.RWMutex   // held (read) by a spawn; Close takes it to wait for them
}

// run is one run in memory.
type run struct {
	s    *Supervisor
	ref  string // immutable: rec.RunRef
	ring *ring.Ring

	op sync.Mutex // serialises launch, stop and resume of this run

	mu  sync.Mutex // guards rec and gen
	rec record
	gen *generation // the live generation; nil when not live

	// live observes the stdout of Claude Code and Codex runs for activity
	// (window report, task progress, plans); set when the run is loaded.
	live *transcript.Live

	inputs     int // accepted inputs not yet in the ledger
	inputsBusy bool
	// inputsMu serialises the ledger writes of input counts, so that a
	// stop or an exit can flush the pending count before its own row.
	inputsMu sync.Mutex
}

// errf builds an error whose status the coordinator passes through.
func errf(status int, code, format string, args ...any) *wire.Error {
	return &wire.Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func notFound(kind, ref string) *wire.Error {
	return errf(http.StatusNotFound, "not_found", "%s %q not found", kind, ref)
}

// Open loads every run and records the generations that were live when the
// agent last stopped as lost (R-STATE-6): their rings get End(process_lost)
// so that attach replays and then says the run is not live (R-RC-2).
func Open(o Options) (*Supervisor, error) {
	if o.DB == nil || o.Ring == nil || o.Ledger == nil {
		return nil, errors.New("supervisor: DB, Ring and Ledger are required")
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.OnChange == nil {
		o.OnChange = func(string) {}
	}
	if o.StopGrace == 0 {
		o.StopGrace = sessions.DefaultGrace
	}
	if err := createBuckets(o.DB); err != nil {
		return nil, err
	}
	s := &Supervisor{o: o, closing: make(chan struct{}), runs: map[string]*run{}, tcache: transcript.NewCache(0, 0)}
	recs, err := loadAll[record](o.DB, bucketRuns)
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		rg, err := o.Ring.Ring(rec.RunRef)
		if err != nil {
			return nil, err
		}
		r := &run{s: s, ref: rec.RunRef, ring: rg, rec: rec}
		r.newLive()
		s.runs[rec.RunRef] = r
		s.lastRev = max(s.lastRev, rec.Rev)
		// A run still at generation 0 was being launched: the agent died
		// between created and started, so no process will ever move it
		// on (and a child it may have spawned died with the agent).
		if rec.PendingApproval {
			// Held for a person: no process was ever spawned for it.
			continue
		}
		if !rec.Ended || rec.Generation == 0 {
			if err := r.recordLost(); err != nil {
				return nil, err
			}
		} else if rg.Live() {
			// The end was recorded but the agent died before the ring's
			// End committed.
			if err := rg.End(endReason(rec)); err != nil {
				return nil, err
			}
		}
	}
	if err := s.sweepOrphans(); err != nil {
		return nil, err
	}
	return s, nil
}

// recordLost marks the last generation lost: no exit was observed.
func (r *run) recordLost() error {
	s := r.s
	r.mu.Lock()
	rec := r.rec
	if rec.Generation == 0 {
		// Generation 1's spawn was under way (Open): it was attempted.
		rec.Generation = 1
	}
	rec.Ended, rec.FailReason, rec.EndedAt = true, apitypes.ReasonProcessLost, time.Now().UTC()
	rec.Rev = s.rev()
	err := s.o.DB.Update(func(tx *bbolt.Tx) error {
		if _, err := s.o.Ledger.AppendTx(tx, rec.RunRef, ledger.Event{Kind: ledger.KindLost,
			Generation: rec.Generation, PID: rec.PID, Reason: ledger.ReasonProcessLost}); err != nil {
			return err
		}
		return putJSON(tx, bucketRuns, rec.RunRef, rec)
	})
	if err == nil {
		r.rec = rec
	}
	r.mu.Unlock()
	if err != nil {
		return err
	}
	s.o.Logf("supervisor: run %s generation %d was live when the agent stopped: recorded lost", rec.RunRef, rec.Generation)
	return r.ring.End(apitypes.ReasonProcessLost)
}

func endReason(rec record) string {
	if rec.FailReason != "" {
		return rec.FailReason
	}
	return "exited"
}

// rev returns a new row revision: increasing across restarts (it starts
// from the wall clock) and within one process.
func (s *Supervisor) rev() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := uint64(time.Now().UnixNano())
	if n <= s.lastRev {
		n = s.lastRev + 1
	}
	s.lastRev = n
	return n
}

// Close kills the live children (they die with the agent in this version)
// without recording an exit, so that the next Open records them lost, and
// waits for the run goroutines.
func (s *Supervisor) Close() {
	select {
	case <-s.closing:
		return
	default:
	}
	close(s.closing)
	// Wait for the spawns under way; later ones see closing and stop.
	s.spawnMu.Lock()
	s.spawnMu.Unlock() //nolint:staticcheck // a barrier, not a critical section
	s.mu.Lock()
	runs := make([]*run, 0, len(s.runs))
	for _, r := range s.runs {
		runs = append(runs, r)
	}
	s.mu.Unlock()
	for _, r := range runs {
		r.mu.Lock()
		if g := r.gen; g != nil {
			g.proc.Signal(syscall.SIGKILL)
		}
		r.mu.Unlock()
	}
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

// --- runs ---

// LaunchParams is a run to create.
type LaunchParams struct {
	RunRef, Tenant, ProfileRef, WorkspaceRef, Isolation, TemplateRef string
	// Workdir, when set and no workspace is given, is the absolute
	// directory the run works in instead of the profile home (a Codex
	// supervision branch works in its source thread's cwd).
	Workdir string
	// Grants are delivered to the first generation (or, for a launch its
	// profile holds, to the one Approve starts).
	Grants []Grant
	// ProjectConfigApproved is the hash of the workspace's last
	// project-config approval, "" for none (R-PCS-12).
	ProjectConfigApproved string
	// Worktree launches (R-WT-*): WorktreeFrom is a full commit id or a
	// local branch (R-WTF-1); SetupRefusal is the coordinator's verdict on
	// the setup command (R-SETUP-8), answered after the 422 checks.
	Worktree     bool
	WorktreeFrom string
	SetupRefusal string
	// HandoffOf is the source run of a handoff (R-HOF-11).
	HandoffOf string
}

// Launch creates a run and spawns its first generation (R-CRT-1, R-CRT-4:
// created, then started with the generation and pid). It returns once the
// child is spawned; the handshake goes on (state starting).
func (s *Supervisor) Launch(ctx context.Context, p LaunchParams) (apitypes.Run, error) {
	if !refRE.MatchString(p.RunRef) || p.Tenant == "" {
		return apitypes.Run{}, errf(http.StatusBadRequest, "bad_request", "run ref %q or tenant is malformed", p.RunRef)
	}
	if _, err := s.get(p.RunRef); err == nil {
		return apitypes.Run{}, errf(http.StatusConflict, "exists", "run %q exists", p.RunRef)
	}
	prof, ok, err := s.profile(p.ProfileRef)
	if err != nil {
		return apitypes.Run{}, err
	}
	if !ok || prof.Tenant != p.Tenant {
		return apitypes.Run{}, notFound("profile", p.ProfileRef)
	}
	workdir := ""
	var ws workspace
	if p.WorkspaceRef != "" {
		w, ok, err := s.workspace(p.WorkspaceRef)
		if err != nil {
			return apitypes.Run{}, err
		}
		if !ok || w.Tenant != p.Tenant {
			return apitypes.Run{}, notFound("workspace", p.WorkspaceRef)
		}
		workdir, ws = w.Path, w
	} else if p.Workdir != "" {
		workdir = filepath.Clean(p.Workdir)
		if fi, err := os.Stat(workdir); !filepath.IsAbs(workdir) || err != nil || !fi.IsDir() {
			return apitypes.Run{}, errf(http.StatusUnprocessableEntity, "bad_path", "run directory %s is not an absolute directory on the node", p.Workdir)
		}
	} else {
		// Without a workspace the tool works in its profile home.
		workdir = prof.Home
	}
	if err := checkGrants(p.Grants, prof); err != nil {
		return apitypes.Run{}, err
	}
	d := s.o.Drivers[prof.Tool]
	if d == nil {
		return apitypes.Run{}, errf(http.StatusUnprocessableEntity, "unknown_tool", "this agent has no driver for tool %q", prof.Tool)
	}
	switch p.Isolation {
	case "", apitypes.IsolationNative:
		p.Isolation = apitypes.IsolationNative
	case apitypes.IsolationSandbox:
		// R-TR-7: sandbox stays refused ("see Topology 4").
		return apitypes.Run{}, errf(http.StatusUnprocessableEntity, "isolation_unsupported", "isolation \"sandbox\" is not supported in Community; use native or container")
	case apitypes.IsolationContainer:
		if s.o.ContainerRuntime == "" {
			return apitypes.Run{}, errf(http.StatusUnprocessableEntity, "isolation_unsupported", "isolation \"container\" needs podman or docker on the node, and none was found")
		}
		return apitypes.Run{}, errf(http.StatusUnprocessableEntity, "isolation_unsupported", "isolation \"container\": this agent version has no container runner yet (found %s)", s.o.ContainerRuntime)
	default:
		return apitypes.Run{}, errf(http.StatusBadRequest, "bad_isolation", "isolation %q: use native, container or sandbox", p.Isolation)
	}
	var wp worktreePlan
	if p.Worktree {
		if p.WorkspaceRef == "" {
			return apitypes.Run{}, errf(http.StatusUnprocessableEntity, "worktree_needs_workspace", "a worktree launch needs a workspace at a git repository's root") // R-WT-3
		}
		if wp, err = s.checkWorktree(ctx, ws, p); err != nil {
			return apitypes.Run{}, err
		}
	}
	spec := s.spec(prof, workdir, "", p.RunRef)
	if _, err := s.runner(d); err != nil {
		return apitypes.Run{}, err
	}
	if err := s.checkBinary(d, spec); err != nil {
		return apitypes.Run{}, err
	}
	if err := prof.accepts(p.WorkspaceRef); err != nil {
		return apitypes.Run{}, err
	}
	if p.Worktree {
		if p.SetupRefusal != "" {
			return apitypes.Run{}, errf(http.StatusConflict, "setup_not_approved", "%s", p.SetupRefusal)
		}
		if wp, err = s.place(wp, p); err != nil {
			return apitypes.Run{}, err
		}
		if err := wp.create(ctx); err != nil {
			return apitypes.Run{}, err
		}
		// The worktree is checked on its own files (R-PCS-10); a refusal
		// removes it.
		if err := s.checkProjectConfig(prof, p.WorkspaceRef, wp.wt.Path, p.ProjectConfigApproved); err != nil {
			wp.undo()
			return apitypes.Run{}, err
		}
		workdir = wp.wt.Path
		spec = s.spec(prof, workdir, "", p.RunRef)
	} else if err := s.checkProjectConfig(prof, p.WorkspaceRef, workdir, p.ProjectConfigApproved); err != nil {
		return apitypes.Run{}, err
	}
	// From here on a refusal removes the worktree the launch created.
	undo := func(err error) (apitypes.Run, error) {
		if wp.wt.Path != "" {
			wp.undo()
		}
		return apitypes.Run{}, err
	}
	rg, err := s.o.Ring.Ring(p.RunRef)
	if err != nil {
		return undo(err)
	}
	r := &run{s: s, ref: p.RunRef, ring: rg, rec: record{
		RunRef: p.RunRef, Tenant: p.Tenant, Driver: string(d.Kind()), ProfileRef: prof.Ref,
		WorkspaceRef: p.WorkspaceRef, WorkspacePath: workdir, WorktreeBranch: wp.wt.Branch, Isolation: p.Isolation,
		TemplateRef: p.TemplateRef, HandoffOf: p.HandoffOf, CreatedAt: time.Now().UTC(), Ended: true,
	}}
	r.rec.Rev = s.rev()
	r.newLive()
	r.op.Lock()
	defer r.op.Unlock()
	s.mu.Lock()
	if s.runs[p.RunRef] != nil {
		s.mu.Unlock()
		return undo(errf(http.StatusConflict, "exists", "run %q exists", p.RunRef))
	}
	s.runs[p.RunRef] = r
	s.mu.Unlock()
	// a profile whose policy wants a person's approval holds the
	// launch (R-CRT-4: created, then approval_requested).
	r.rec.PendingApproval = prof.LaunchRequiresApproval
	err = s.o.DB.Update(func(tx *bbolt.Tx) error {
		if _, err := s.o.Ledger.AppendTx(tx, p.RunRef, ledger.Event{Kind: ledger.KindCreated}); err != nil {
			return err
		}
		if r.rec.PendingApproval {
			if _, err := s.o.Ledger.AppendTx(tx, p.RunRef, ledger.Event{Kind: ledger.KindApprovalRequested, Generation: 1}); err != nil {
				return err
			}
		}
		return putJSON(tx, bucketRuns, p.RunRef, r.rec)
	})
	if err != nil {
		s.mu.Lock()
		delete(s.runs, p.RunRef)
		s.mu.Unlock()
		return undo(err)
	}
	if !r.rec.PendingApproval {
		r.start(ctx, d, spec, false, p.Grants)
	}
	return r.snapshot(), nil
}

// spec builds a launch spec of run ref from a profile. The children's PATH
// is the profile's, else the agent's configured one. A profile with the
// engine's hooks gets them (R-PCS-15, R-ED-4) when this agent has a hook
// endpoint; the hook finds the agent and the run through the environment.
func (s *Supervisor) spec(p profile, workdir, conv, ref string) cliruntime.LaunchSpec {
	var env []string
	hasPath := false
	for k, v := range p.Env {
		env = append(env, k+"="+v)
		hasPath = hasPath || k == "PATH"
	}
	sort.Strings(env)
	if !hasPath && s.o.Path != "" {
		env = append([]string{"PATH=" + s.o.Path}, env...)
	}
	spec := cliruntime.LaunchSpec{Home: p.Home, Workdir: workdir, Env: env, ConversationID: conv, RunRef: ref}
	if s.engineHooks(p) {
		spec.IsolateSettings, spec.EngineHook = true, s.o.Hook.Command
		spec.Env = append(spec.Env, claudehook.EnvRun+"="+ref, claudehook.EnvSocket+"="+s.o.Hook.Socket)
	}
	return spec
}

// engineHooks reports whether runs of p carry the engine's hooks: the
// profile asks for them and this agent has a hook endpoint. Without one a
// Claude Code run reads the project's settings and is gated (R-PCS-15).
func (s *Supervisor) engineHooks(p profile) bool {
	return p.EngineHooks && p.Tool == string(cliruntime.KindClaude) && s.o.Hook.Command != "" && s.o.Hook.Socket != ""
}

func (s *Supervisor) runner(d cliruntime.Driver) (sessions.Runner, error) {
	rn := s.o.Runners[d.LaunchTransport()]
	if rn == nil {
		// R-TR-8: a launch form whose runner this host lacks.
		return nil, errf(http.StatusUnprocessableEntity, "transport_unsupported", "the %s launch form needs the %s runner, which this host does not have", d.Kind(), d.LaunchTransport())
	}
	return rn, nil
}

// checkBinary refuses a launch whose program is not on the child's PATH, so
// that a missing CLI is a 422 a person can act on, not a failed run.
func (s *Supervisor) checkBinary(d cliruntime.Driver, spec cliruntime.LaunchSpec) error {
	cmd, err := d.Launch(spec)
	if err != nil {
		return errf(http.StatusBadRequest, "bad_profile", "%v", err)
	}
	if filepath.IsAbs(cmd.Path) || filepath.Base(cmd.Path) != cmd.Path {
		return nil
	}
	if rn := s.o.Runners[d.LaunchTransport()]; rn != nil && rn.Name() == "fake" {
		// The in-process fake starts no program.
		return nil
	}
	path := cliruntime.DefaultPath
	for _, kv := range cmd.Env {
		if v, ok := cutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if fi, err := os.Stat(filepath.Join(dir, cmd.Path)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return nil
		}
	}
	return errf(http.StatusUnprocessableEntity, "tool_not_found", "%s is not installed on this node (not on the PATH %s); install it, or set the agent's path", cmd.Path, path)
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return "", false
}

func (s *Supervisor) get(ref string) (*run, error) {
	s.mu.Lock()
	r := s.runs[ref]
	s.mu.Unlock()
	if r == nil {
		return nil, notFound("run", ref)
	}
	return r, nil
}

// Get returns the run's row.
func (s *Supervisor) Get(ref string) (apitypes.Run, error) {
	r, err := s.get(ref)
	if err != nil {
		return apitypes.Run{}, err
	}
	return r.snapshot(), nil
}

// List returns every run's row, newest first.
func (s *Supervisor) List() []apitypes.Run {
	s.mu.Lock()
	runs := make([]*run, 0, len(s.runs))
	for _, r := range s.runs {
		runs = append(runs, r)
	}
	s.mu.Unlock()
	out := make([]apitypes.Run, len(runs))
	for i, r := range runs {
		out[i] = r.snapshot()
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].RunRef > out[j].RunRef
	})
	return out
}

// Events pages the run's lifecycle ledger (R-EVT-1).
func (s *Supervisor) Events(ref string, after uint64, limit int) ([]apitypes.Event, uint64, error) {
	if _, err := s.get(ref); err != nil {
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

// snapshot derives the run's row.
func (r *run) snapshot() apitypes.Run {
	r.mu.Lock()
	rec, g := r.rec, r.gen
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
		CreatedAt: rec.CreatedAt, Rev: rec.Rev,
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

// update applies fn to the record and persists it, with ev in the ledger
// in the same transaction when ev.Kind is set (R-AUD-1 style: the fact and
// its evidence commit together). It bumps the revision and notifies.
func (r *run) update(ev ledger.Event, fn func(*record)) error {
	return r.updateTx(ev, fn, nil)
}

// updateTx is update with more writes of the caller's in the same
// transaction (R-MOVE-5: the run and its ledger re-attached at once).
func (r *run) updateTx(ev ledger.Event, fn func(*record), also func(*bbolt.Tx) error) error {
	s := r.s
	r.mu.Lock()
	rec := r.rec
	if fn != nil {
		fn(&rec)
	}
	rec.Rev = s.rev()
	err := s.o.DB.Update(func(tx *bbolt.Tx) error {
		if ev.Kind != "" {
			if _, err := s.o.Ledger.AppendTx(tx, rec.RunRef, ev); err != nil {
				return err
			}
		}
		if also != nil {
			if err := also(tx); err != nil {
				return err
			}
		}
		return putJSON(tx, bucketRuns, rec.RunRef, rec)
	})
	if err == nil {
		r.rec = rec
	}
	r.mu.Unlock()
	if err == nil {
		s.o.OnChange(rec.RunRef)
	}
	return err
}

// touch notifies a change of a live-only fact (turn started or ended).
func (r *run) touch() {
	s := r.s
	r.mu.Lock()
	r.rec.Rev = s.rev()
	ref := r.rec.RunRef
	r.mu.Unlock()
	s.o.OnChange(ref)
}

// liveGen returns the live generation, or a 409.
func (r *run) liveGen() (*generation, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen == nil {
		state, _ := Derive(Facts{Started: r.rec.Generation > 0, StopRequested: r.rec.StopRequested,
			ExitCode: r.rec.ExitCode, Signal: r.rec.Signal, FailReason: r.rec.FailReason})
		return nil, errf(http.StatusConflict, "not_live", "run %s is not live (state=%s); resume it first", r.rec.RunRef, state)
	}
	return r.gen, nil
}

// Input writes one input to the live process through its driver (R-IN-1,
// R-IN-2). Validation (400) comes before the live check (409), R-API-3.
func (s *Supervisor) Input(ref string, in cliruntime.Input) error {
	r, err := s.get(ref)
	if err != nil {
		return err
	}
	r.mu.Lock()
	driver := r.rec.Driver
	r.mu.Unlock()
	d := s.o.Drivers[driver]
	if d == nil {
		return errf(http.StatusUnprocessableEntity, "unknown_tool", "no driver %q", driver)
	}
	if err := d.CheckInput(in); err != nil {
		return inputErr(err)
	}
	g, err := r.liveGen()
	if err != nil {
		return err
	}
	if err := g.encode(in); err != nil {
		return inputErr(err)
	}
	r.countInput()
	r.touch()
	return nil
}

func inputErr(err error) error {
	switch {
	case errors.Is(err, cliruntime.ErrWrongInputField), errors.Is(err, cliruntime.ErrInvalidInput):
		code := "invalid_input"
		if errors.Is(err, cliruntime.ErrWrongInputField) {
			code = "wrong_input_field"
		}
		return errf(http.StatusBadRequest, code, "%v", err)
	case errors.Is(err, cliruntime.ErrHandshakeFailed), errors.Is(err, errStdinClosed):
		return errf(http.StatusConflict, "not_live", "%v", err)
	case errors.Is(err, cliruntime.ErrInputQueueFull):
		return errf(http.StatusServiceUnavailable, "input_queue_full", "%v; wait for the running turn to end", err)
	}
	return err
}

// countInput records accepted inputs in the ledger as counts, never content
// (R-EVT-3, R-EVT-4). The write is off the request path and coalesced: a
// burst of inputs costs one row {count: n}.
func (r *run) countInput() {
	r.mu.Lock()
	r.inputs++
	if r.inputsBusy {
		r.mu.Unlock()
		return
	}
	r.inputsBusy = true
	r.mu.Unlock()
	r.s.wg.Add(1)
	go func() {
		defer r.s.wg.Done()
		for r.flushInputs(true) {
		}
	}()
}

// flushInputs writes the pending input count, if any, and reports whether
// it wrote one. The writer goroutine (done set) stops being busy once
// nothing is pending; a stop or an exit calls it to put the count before
// its own row (R-EVT-3's order).
func (r *run) flushInputs(writer bool) bool {
	r.inputsMu.Lock()
	defer r.inputsMu.Unlock()
	r.mu.Lock()
	n, gen := r.inputs, r.rec.Generation
	r.inputs = 0
	if n == 0 {
		if writer {
			r.inputsBusy = false
		}
		r.mu.Unlock()
		return false
	}
	r.mu.Unlock()
	detail, _ := json.Marshal(map[string]int{"count": n})
	if _, err := r.s.o.Ledger.Append(r.ref, ledger.Event{Kind: ledger.KindInputAccepted, Generation: gen, Detail: detail}); err != nil {
		r.s.o.Logf("supervisor: run %s: ledger: %v", r.ref, err)
	}
	return true
}

// Interrupt cancels the active turn; the process stays (R-INT-1). An idle
// run is an accepted no-op recorded with noop=true (R-INT-2).
func (s *Supervisor) Interrupt(ref string) error {
	r, err := s.get(ref)
	if err != nil {
		return err
	}
	g, err := r.liveGen()
	if err != nil {
		return err
	}
	active := g.interrupt()
	detail, _ := json.Marshal(map[string]bool{"noop": !active})
	return r.update(ledger.Event{Kind: ledger.KindInterrupted, Generation: g.n, Detail: detail}, nil)
}

// Stop sends SIGTERM to the process group, waits the grace, then SIGKILLs
// the group (R-STOP-1, R-STOP-3), and returns the row once the exit is
// recorded (R-STOP-2). A run that is not live is returned as it is, with
// nothing signalled and no ledger row (R-STOP-4).
func (s *Supervisor) Stop(ref string, grace time.Duration) (apitypes.Run, error) {
	r, err := s.get(ref)
	if err != nil {
		return apitypes.Run{}, err
	}
	if grace == 0 {
		grace = s.o.StopGrace
	}
	r.op.Lock()
	defer r.op.Unlock()
	r.mu.Lock()
	g := r.gen
	r.mu.Unlock()
	if g == nil {
		return r.snapshot(), nil
	}
	select {
	case <-g.proc.Done():
		// The child already exited on its own; its end is being recorded.
		// That exit is the tool's, not an operator stop (R-STATE-3), and
		// nothing is signalled or written (R-STOP-4).
		<-g.ended
		return r.snapshot(), nil
	default:
	}
	r.flushInputs(false)
	if err := r.update(ledger.Event{Kind: ledger.KindStopRequested, Generation: g.n}, func(rec *record) { rec.StopRequested = true }); err != nil {
		return apitypes.Run{}, err
	}
	g.proc.Stop(grace)
	<-g.ended
	return r.snapshot(), nil
}

// Resume starts a new generation on the exact stored conversation
// (R-RES-1). It never falls back to a new one: a conversation the tool
// cannot find is 409 conversation_unavailable (R-RES-2), and a Claude
// transcript that is not in the profile home is refused before anything is
// spawned.
func (s *Supervisor) Resume(ctx context.Context, ref string, grants []Grant, approved string) (apitypes.Run, error) {
	r, err := s.get(ref)
	if err != nil {
		return apitypes.Run{}, err
	}
	r.op.Lock()
	defer r.op.Unlock()
	rs, err := s.prepareResume(r, false, grants, approved)
	if err != nil {
		return apitypes.Run{}, err
	}
	if rs.prof.LaunchRequiresApproval {
		// The profile's policy holds it for a person (R-RES-5, Q-53).
		if err := r.update(ledger.Event{Kind: ledger.KindApprovalRequested, Generation: rs.rec.Generation + 1}, func(rec *record) {
			rec.PendingApproval, rec.PendingResume = true, true
		}); err != nil {
			return apitypes.Run{}, err
		}
		return r.snapshot(), nil
	}
	return s.resume(ctx, r, rs)
}

// resumeSpec is a checked resume: the run's record and what it resumes
// with.
type resumeSpec struct {
	rec    record
	prof   profile
	d      cliruntime.Driver
	spec   cliruntime.LaunchSpec
	grants []Grant
	// relaunch: the run has no conversation yet and its driver lets it
	// start afresh (Relauncher).
	relaunch bool
}

// prepareResume checks everything a resume needs before anything is
// spawned or written (R-RES-2, R-RES-6); approving is the approval of a
// held resume. The caller holds r.op.
func (s *Supervisor) prepareResume(r *run, approving bool, grants []Grant, approved string) (resumeSpec, error) {
	r.mu.Lock()
	rec, live := r.rec, r.gen != nil
	r.mu.Unlock()
	ref := rec.RunRef
	if live {
		return resumeSpec{}, errf(http.StatusConflict, "run_live", "run %s is live; stop it before resuming", ref)
	}
	if rec.Released {
		// R-RES-6: a released run takes no new generation.
		return resumeSpec{}, errf(http.StatusConflict, "released", "run %s was released (cleaned up); start a new run instead", ref)
	}
	if rec.PendingApproval && !approving {
		return resumeSpec{}, errf(http.StatusConflict, "pending_approval", "run %s waits for a person's approval; approve it first", ref)
	}
	prof, ok, err := s.profile(rec.ProfileRef)
	if err != nil {
		return resumeSpec{}, err
	}
	if !ok {
		return resumeSpec{}, errf(http.StatusConflict, "conversation_unavailable", "the profile %s of run %s is gone", rec.ProfileRef, ref)
	}
	// R-MOVE-10, R-RES-5: the profile's policy as it is now applies.
	if err := prof.accepts(rec.WorkspaceRef); err != nil {
		return resumeSpec{}, err
	}
	d := s.o.Drivers[prof.Tool]
	if d == nil {
		return resumeSpec{}, errf(http.StatusUnprocessableEntity, "unknown_tool", "this agent has no driver for tool %q", prof.Tool)
	}
	relaunch := false
	if rec.ConversationID == "" {
		if rl, ok := d.(Relauncher); !ok || !rl.Relaunchable(ref) {
			return resumeSpec{}, errf(http.StatusConflict, "conversation_unavailable", "run %s has no stored conversation to resume (the tool never named one)", ref)
		}
		relaunch = true
	}
	if _, err := s.runner(d); err != nil {
		return resumeSpec{}, err
	}
	spec := s.spec(prof, rec.WorkspacePath, rec.ConversationID, rec.RunRef)
	if d.Kind() == cliruntime.KindClaude && !claudeTranscriptExists(prof.Home, rec.ConversationID) {
		return resumeSpec{}, errf(http.StatusConflict, "conversation_unavailable", "the stored conversation %s is not in the profile home %s; nothing was started", rec.ConversationID, prof.Home)
	}
	check := spec
	check.ConversationID = ""
	if err := s.checkBinary(d, check); err != nil {
		return resumeSpec{}, err
	}
	if err := checkGrants(grants, prof); err != nil {
		return resumeSpec{}, err
	}
	// R-RES-4: the gate applies to resumes too (the setup approval does not).
	if err := s.checkProjectConfig(prof, rec.WorkspaceRef, rec.WorkspacePath, approved); err != nil {
		return resumeSpec{}, err
	}
	return resumeSpec{rec: rec, prof: prof, d: d, spec: spec, grants: grants, relaunch: relaunch}, nil
}

// resume starts the next generation on the stored conversation and waits
// for the tool to confirm it (R-RES-1, R-RES-2). The caller holds r.op.
func (s *Supervisor) resume(ctx context.Context, r *run, rs resumeSpec) (apitypes.Run, error) {
	rec := rs.rec
	if err := r.update(ledger.Event{Kind: ledger.KindResumed, Generation: rec.Generation + 1}, nil); err != nil {
		return apitypes.Run{}, err
	}
	if rs.relaunch {
		// Nothing to confirm: the new generation starts as the first did.
		r.start(ctx, rs.d, rs.spec, false, rs.grants)
		return r.snapshot(), nil
	}
	g := r.start(ctx, rs.d, rs.spec, true, rs.grants)
	if g == nil {
		return r.snapshot(), nil
	}
	timer := time.NewTimer(HandshakeTimeout)
	defer timer.Stop()
	select {
	case <-g.handshake:
	case <-g.refused:
	case <-g.ended:
	case <-ctx.Done():
	case <-timer.C:
	}
	g.mu.Lock()
	ok, unavailable := g.handshaken, g.unavailable
	g.mu.Unlock()
	if ok && !unavailable {
		return r.snapshot(), nil
	}
	if !unavailable {
		// The tool ended (or hung) before confirming the conversation.
		g.markUnavailable()
	}
	g.proc.Stop(time.Second)
	<-g.ended
	return apitypes.Run{}, errf(http.StatusConflict, "conversation_unavailable", "the tool could not resume the stored conversation %s; no new conversation was started", rec.ConversationID)
}

// Approve lets a launch or resume that its profile's policy held go on
// (Q-53, R-CRT-4: approved, then started). A run that waits for nothing is
// 409.
func (s *Supervisor) Approve(ctx context.Context, ref string, grants []Grant, approved string) (apitypes.Run, error) {
	r, err := s.get(ref)
	if err != nil {
		return apitypes.Run{}, err
	}
	r.op.Lock()
	defer r.op.Unlock()
	r.mu.Lock()
	rec := r.rec
	r.mu.Unlock()
	if !rec.PendingApproval {
		return apitypes.Run{}, errf(http.StatusConflict, "not_pending", "run %s does not wait for an approval (state=%s)", ref, r.snapshot().State)
	}
	approvedEv := ledger.Event{Kind: ledger.KindApproved, Generation: rec.Generation + 1}
	approvedHash := approved
	clear := func(rec *record) { rec.PendingApproval, rec.PendingResume = false, false }
	if rec.PendingResume {
		rs, err := s.prepareResume(r, true, grants, approvedHash)
		if err != nil {
			return apitypes.Run{}, err
		}
		if err := r.update(approvedEv, clear); err != nil {
			return apitypes.Run{}, err
		}
		rs.rec = r.rec
		return s.resume(ctx, r, rs)
	}
	prof, ok, err := s.profile(rec.ProfileRef)
	if err != nil {
		return apitypes.Run{}, err
	}
	if !ok {
		return apitypes.Run{}, errf(http.StatusConflict, "profile_gone", "the profile %s of run %s is gone", rec.ProfileRef, ref)
	}
	d := s.o.Drivers[prof.Tool]
	if d == nil {
		return apitypes.Run{}, errf(http.StatusUnprocessableEntity, "unknown_tool", "this agent has no driver for tool %q", prof.Tool)
	}
	spec := s.spec(prof, rec.WorkspacePath, "", rec.RunRef)
	if err := s.checkBinary(d, spec); err != nil {
		return apitypes.Run{}, err
	}
	if err := checkGrants(grants, prof); err != nil {
		return apitypes.Run{}, err
	}
	if err := s.checkProjectConfig(prof, rec.WorkspaceRef, rec.WorkspacePath, approvedHash); err != nil {
		return apitypes.Run{}, err
	}
	if err := r.update(approvedEv, clear); err != nil {
		return apitypes.Run{}, err
	}
	r.start(ctx, d, spec, false, grants)
	return r.snapshot(), nil
}

// Relauncher is a driver whose runs may start a new generation before the
// tool named a conversation: a Codex supervision branch whose first turn
// has not created its thread yet stays retryable (R-CX-FT-7). Resume then
// launches, never resumes, and only for runs Relaunchable accepts.
type Relauncher interface {
	Relaunchable(runRef string) bool
}

// claudeTranscriptExists: Claude Code keeps a conversation at
// $CLAUDE_CONFIG_DIR/projects/<slug>/<id>.jsonl (real-clis.md §1.4).
func claudeTranscriptExists(home, id string) bool {
	if !cliruntime.IsUUID(id) {
		return false
	}
	m, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", id+".jsonl"))
	return len(m) > 0
}

// Attach subscribes to the run's output from seq from (0: the oldest
// retained). live says whether the run was live at the subscription; when
// it was not, the viewer replays and ends, and the caller sends the
// not-live notice with the run's state (R-ATT-6).
func (s *Supervisor) Attach(ref string, from uint64, queue int) (v *ring.Viewer, live bool, err error) {
	r, err := s.get(ref)
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
	r, err := s.get(ref)
	if err != nil {
		return apitypes.End{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return apitypes.End{Generation: r.rec.Generation, ExitCode: r.rec.ExitCode, Signal: r.rec.Signal, Reason: r.rec.FailReason}
}

// State returns the run's derived state.
func (s *Supervisor) State(ref string) string {
	r, err := s.get(ref)
	if err != nil {
		return ""
	}
	return r.snapshot().State
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
}

// Live lists the live runs (R-ARCH-5).
func (s *Supervisor) Live() []LiveRun {
	out := []LiveRun{}
	for _, v := range s.List() {
		if !apitypes.Live(v.State) {
			continue
		}
		out = append(out, LiveRun{RunRef: v.RunRef, Driver: v.Driver, Generation: v.Generation, PID: v.PID,
			State: v.State, FirstSeq: v.RingFirst, LastSeq: v.RingLast})
	}
	return out
}

// limitOf turns a driver's limit fact into the run's field (R-LIM-3/4).
func limitOf(l *cliruntime.Limit, account string, now time.Time) *apitypes.Limit {
	out := &apitypes.Limit{Kind: string(l.Kind), AccountRef: account}
	if l.ResetsAt != nil && l.ResetsAt.Sub(now) <= limitHorizon {
		t := l.ResetsAt.UTC()
		out.ResetsAt = &t
	}
	return out
}
