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
	"regexp"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/sessions/cliruntime"
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

	inputs     int // accepted inputs not yet in the ledger
	inputsBusy bool
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
	s := &Supervisor{o: o, closing: make(chan struct{}), runs: map[string]*run{}}
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
		s.runs[rec.RunRef] = r
		s.lastRev = max(s.lastRev, rec.Rev)
		// A run still at generation 0 was being launched: the agent died
		// between created and started, so no process will ever move it
		// on (and a child it may have spawned died with the agent).
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

// --- profiles and workspaces ---

var (
	refRE  = regexp.MustCompile(`^[a-z]+_[A-Za-z0-9]{4,64}$`)
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	envRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// ProfileParams is a profile to create.
type ProfileParams struct {
	Ref, Tenant, Tool, Name, Home string
	Env                           map[string]string
}

// CreateProfile stores a profile. Its home is created (0700) when missing,
// with the tool's config home under it; a profile without a home gets one
// under ProfilesDir.
func (s *Supervisor) CreateProfile(p ProfileParams) (apitypes.Profile, error) {
	d := s.o.Drivers[p.Tool]
	switch {
	case !refRE.MatchString(p.Ref) || p.Tenant == "":
		return apitypes.Profile{}, errf(http.StatusBadRequest, "bad_request", "profile ref %q or tenant is malformed", p.Ref)
	case d == nil:
		return apitypes.Profile{}, errf(http.StatusBadRequest, "unknown_tool", "tool %q is not one this agent drives; use claude, codex or grok", p.Tool)
	case !nameRE.MatchString(p.Name):
		return apitypes.Profile{}, errf(http.StatusBadRequest, "bad_name", "profile name %q: use 1-64 letters, digits, '.', '_' or '-'", p.Name)
	}
	home := p.Home
	if home == "" {
		if s.o.ProfilesDir == "" {
			return apitypes.Profile{}, errf(http.StatusBadRequest, "home_required", "this agent has no profiles directory; give the profile a home")
		}
		home = filepath.Join(s.o.ProfilesDir, p.Ref)
	}
	if !filepath.IsAbs(home) {
		return apitypes.Profile{}, errf(http.StatusBadRequest, "bad_home", "profile home %q must be an absolute path on the node", home)
	}
	home = filepath.Clean(home)
	var env []string
	for k, v := range p.Env {
		if !envRE.MatchString(k) {
			return apitypes.Profile{}, errf(http.StatusBadRequest, "bad_env", "environment name %q: use letters, digits and '_'", k)
		}
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	// A dry run of the launch command line validates the env against the
	// driver (reserved variables, NUL bytes) before anything is stored.
	if _, err := d.Launch(cliruntime.LaunchSpec{Home: home, Workdir: "/", Env: env}); err != nil {
		return apitypes.Profile{}, errf(http.StatusBadRequest, "bad_env", "%v", err)
	}
	for _, dir := range []string{home, filepath.Join(home, "."+p.Tool)} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return apitypes.Profile{}, errf(http.StatusUnprocessableEntity, "bad_home", "cannot create the profile home: %v", err)
		}
	}
	rec := profile{Ref: p.Ref, Tenant: p.Tenant, Tool: p.Tool, Name: p.Name, Home: home, Env: p.Env, CreatedAt: time.Now().UTC()}
	err := s.o.DB.Update(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketProfiles).Get([]byte(p.Ref)) != nil {
			return errf(http.StatusConflict, "exists", "profile %q exists", p.Ref)
		}
		return putJSON(tx, bucketProfiles, p.Ref, rec)
	})
	if err != nil {
		return apitypes.Profile{}, err
	}
	return rec.view(), nil
}

func (p profile) view() apitypes.Profile {
	v := apitypes.Profile{Ref: p.Ref, Tenant: p.Tenant, Tool: p.Tool, Name: p.Name, Home: p.Home, CreatedAt: p.CreatedAt}
	for k := range p.Env {
		v.EnvKeys = append(v.EnvKeys, k)
	}
	slices.Sort(v.EnvKeys)
	return v
}

// CreateWorkspace registers an existing directory.
func (s *Supervisor) CreateWorkspace(ref, tenant, name, path string) (apitypes.Workspace, error) {
	switch {
	case !refRE.MatchString(ref) || tenant == "":
		return apitypes.Workspace{}, errf(http.StatusBadRequest, "bad_request", "workspace ref %q or tenant is malformed", ref)
	case !nameRE.MatchString(name):
		return apitypes.Workspace{}, errf(http.StatusBadRequest, "bad_name", "workspace name %q: use 1-64 letters, digits, '.', '_' or '-'", name)
	case !filepath.IsAbs(path):
		return apitypes.Workspace{}, errf(http.StatusBadRequest, "bad_path", "workspace path %q must be an absolute path on the node", path)
	}
	path = filepath.Clean(path)
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() {
		return apitypes.Workspace{}, errf(http.StatusUnprocessableEntity, "bad_path", "workspace path %s is not a directory on node: %v", path, errOrNotDir(err))
	}
	w := workspace{Ref: ref, Tenant: tenant, Name: name, Path: path, CreatedAt: time.Now().UTC()}
	err = s.o.DB.Update(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketWorkspaces).Get([]byte(ref)) != nil {
			return errf(http.StatusConflict, "exists", "workspace %q exists", ref)
		}
		return putJSON(tx, bucketWorkspaces, ref, w)
	})
	if err != nil {
		return apitypes.Workspace{}, err
	}
	return w.view(), nil
}

func errOrNotDir(err error) error {
	if err != nil {
		return err
	}
	return errors.New("not a directory")
}

func (w workspace) view() apitypes.Workspace {
	return apitypes.Workspace{Ref: w.Ref, Tenant: w.Tenant, Name: w.Name, Path: w.Path, CreatedAt: w.CreatedAt}
}

func (s *Supervisor) profile(ref string) (profile, bool, error) {
	var p profile
	var ok bool
	err := s.o.DB.View(func(tx *bbolt.Tx) error {
		var err error
		ok, err = getJSON(tx, bucketProfiles, ref, &p)
		return err
	})
	return p, ok, err
}

func (s *Supervisor) workspace(ref string) (workspace, bool, error) {
	var w workspace
	var ok bool
	err := s.o.DB.View(func(tx *bbolt.Tx) error {
		var err error
		ok, err = getJSON(tx, bucketWorkspaces, ref, &w)
		return err
	})
	return w, ok, err
}

// --- runs ---

// LaunchParams is a run to create.
type LaunchParams struct {
	RunRef, Tenant, ProfileRef, WorkspaceRef, Isolation, TemplateRef, Name string
	// Workdir, when set and no workspace is given, is the absolute
	// directory the run works in instead of the profile home (a Codex
	// supervision branch works in its source thread's cwd).
	Workdir string
}

// Launch creates a run and spawns its first generation (R-CRT-1, R-CRT-4:
// created, then started with the generation and pid). It returns once the
// child is spawned; the handshake goes on (state starting).
func (s *Supervisor) Launch(ctx context.Context, p LaunchParams) (apitypes.Run, error) {
	if !refRE.MatchString(p.RunRef) || p.Tenant == "" {
		return apitypes.Run{}, errf(http.StatusBadRequest, "bad_request", "run ref %q or tenant is malformed", p.RunRef)
	}
	prof, ok, err := s.profile(p.ProfileRef)
	if err != nil {
		return apitypes.Run{}, err
	}
	if !ok || prof.Tenant != p.Tenant {
		return apitypes.Run{}, notFound("profile", p.ProfileRef)
	}
	workdir := ""
	if p.WorkspaceRef != "" {
		w, ok, err := s.workspace(p.WorkspaceRef)
		if err != nil {
			return apitypes.Run{}, err
		}
		if !ok || w.Tenant != p.Tenant {
			return apitypes.Run{}, notFound("workspace", p.WorkspaceRef)
		}
		workdir = w.Path
	} else if p.Workdir != "" {
		workdir = filepath.Clean(p.Workdir)
		if fi, err := os.Stat(workdir); !filepath.IsAbs(workdir) || err != nil || !fi.IsDir() {
			return apitypes.Run{}, errf(http.StatusUnprocessableEntity, "bad_path", "run directory %s is not an absolute directory on the node", p.Workdir)
		}
	} else {
		// Without a workspace the tool works in its profile home.
		workdir = prof.Home
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
	spec := s.spec(prof, workdir, "")
	spec.RunRef = p.RunRef
	if _, err := s.runner(d); err != nil {
		return apitypes.Run{}, err
	}
	if err := s.checkBinary(d, spec); err != nil {
		return apitypes.Run{}, err
	}
	rg, err := s.o.Ring.Ring(p.RunRef)
	if err != nil {
		return apitypes.Run{}, err
	}
	r := &run{s: s, ref: p.RunRef, ring: rg, rec: record{
		RunRef: p.RunRef, Tenant: p.Tenant, Driver: string(d.Kind()), ProfileRef: prof.Ref,
		WorkspaceRef: p.WorkspaceRef, WorkspacePath: workdir, Isolation: p.Isolation,
		TemplateRef: p.TemplateRef, Name: p.Name, CreatedAt: time.Now().UTC(), Ended: true,
	}}
	r.rec.Rev = s.rev()
	r.op.Lock()
	defer r.op.Unlock()
	s.mu.Lock()
	if s.runs[p.RunRef] != nil {
		s.mu.Unlock()
		return apitypes.Run{}, errf(http.StatusConflict, "exists", "run %q exists", p.RunRef)
	}
	s.runs[p.RunRef] = r
	s.mu.Unlock()
	err = s.o.DB.Update(func(tx *bbolt.Tx) error {
		if _, err := s.o.Ledger.AppendTx(tx, p.RunRef, ledger.Event{Kind: ledger.KindCreated}); err != nil {
			return err
		}
		return putJSON(tx, bucketRuns, p.RunRef, r.rec)
	})
	if err != nil {
		s.mu.Lock()
		delete(s.runs, p.RunRef)
		s.mu.Unlock()
		return apitypes.Run{}, err
	}
	r.start(ctx, d, spec, false)
	return r.snapshot(), nil
}

// spec builds a launch spec from a profile. The children's PATH is the
// profile's, else the agent's configured one.
func (s *Supervisor) spec(p profile, workdir, conv string) cliruntime.LaunchSpec {
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
	return cliruntime.LaunchSpec{Home: p.Home, Workdir: workdir, Env: env, ConversationID: conv}
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
		Started:       rec.Generation > 0,
		Live:          g != nil,
		Handshaken:    rec.Handshaken,
		StopRequested: rec.StopRequested,
		ExitCode:      rec.ExitCode,
		Signal:        rec.Signal,
		FailReason:    rec.FailReason,
	}
	if g != nil {
		f.TurnActive = g.sess.TurnActive()
	}
	state, reason := Derive(f)
	v := apitypes.Run{
		RunRef: rec.RunRef, Tenant: rec.Tenant, State: state, Reason: reason,
		Driver: rec.Driver, Generation: rec.Generation, Isolation: rec.Isolation,
		ProviderProfileRef: rec.ProfileRef, WorkspaceRef: rec.WorkspaceRef, WorkspacePath: rec.WorkspacePath,
		TemplateRef: rec.TemplateRef, ConversationID: rec.ConversationID, Name: rec.Name, Limit: rec.Limit,
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
		for {
			r.mu.Lock()
			n, gen := r.inputs, r.rec.Generation
			r.inputs = 0
			if n == 0 {
				r.inputsBusy = false
				r.mu.Unlock()
				return
			}
			r.mu.Unlock()
			detail, _ := json.Marshal(map[string]int{"count": n})
			if _, err := r.s.o.Ledger.Append(r.ref, ledger.Event{Kind: ledger.KindInputAccepted, Generation: gen, Detail: detail}); err != nil {
				r.s.o.Logf("supervisor: run %s: ledger: %v", r.ref, err)
			}
		}
	}()
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
func (s *Supervisor) Resume(ctx context.Context, ref string) (apitypes.Run, error) {
	r, err := s.get(ref)
	if err != nil {
		return apitypes.Run{}, err
	}
	r.op.Lock()
	defer r.op.Unlock()
	r.mu.Lock()
	rec, live := r.rec, r.gen != nil
	r.mu.Unlock()
	if live {
		return apitypes.Run{}, errf(http.StatusConflict, "run_live", "run %s is live; stop it before resuming", ref)
	}
	prof, ok, err := s.profile(rec.ProfileRef)
	if err != nil {
		return apitypes.Run{}, err
	}
	if !ok {
		return apitypes.Run{}, errf(http.StatusConflict, "conversation_unavailable", "the profile %s of run %s is gone", rec.ProfileRef, ref)
	}
	d := s.o.Drivers[prof.Tool]
	if d == nil {
		return apitypes.Run{}, errf(http.StatusUnprocessableEntity, "unknown_tool", "this agent has no driver for tool %q", prof.Tool)
	}
	relaunch := false
	if rec.ConversationID == "" {
		if rl, ok := d.(Relauncher); !ok || !rl.Relaunchable(ref) {
			return apitypes.Run{}, errf(http.StatusConflict, "conversation_unavailable", "run %s has no stored conversation to resume (the tool never named one)", ref)
		}
		relaunch = true
	}
	if _, err := s.runner(d); err != nil {
		return apitypes.Run{}, err
	}
	spec := s.spec(prof, rec.WorkspacePath, rec.ConversationID)
	spec.RunRef = ref
	if d.Kind() == cliruntime.KindClaude && !claudeTranscriptExists(prof.Home, rec.ConversationID) {
		return apitypes.Run{}, errf(http.StatusConflict, "conversation_unavailable", "the stored conversation %s is not in the profile home %s; nothing was started", rec.ConversationID, prof.Home)
	}
	if err := s.checkBinary(d, cliruntime.LaunchSpec{Home: spec.Home, Workdir: spec.Workdir, Env: spec.Env}); err != nil {
		return apitypes.Run{}, err
	}
	if err := r.update(ledger.Event{Kind: ledger.KindResumed, Generation: rec.Generation + 1}, nil); err != nil {
		return apitypes.Run{}, err
	}
	if relaunch {
		// Nothing to confirm: the new generation starts as the first did.
		r.start(ctx, d, spec, false)
		return r.snapshot(), nil
	}
	g := r.start(ctx, d, spec, true)
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
