package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/projectconfig"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/claudehook"
)

// start is one start of a process for a run, as the start check sees it:
// a launch's first generation, a resume, or an approved launch or resume.
type start struct {
	runRef       string
	prof         registry.Profile
	workspaceRef string // "" for a run in the profile home or a given directory
	dir          string // where the process starts
	conv         string // the stored conversation a resume continues; "" to launch
	grants       []Grant
	approved     string // the workspace's last project-config approval hash
	isolation    string // the run's (R-TR-7)
	// prepare, when set, runs after the refusals that need nothing on disk
	// and before the repository-config gate, and returns the directory the
	// gate checks: a worktree launch creates its worktree there, and the
	// gate checks the worktree's own files (R-PCS-10). undo removes it.
	prepare func() (dir string, err error)
	undo    func()
}

// checked is a start that passed the check: the driver and the spec it
// spawns with.
type checked struct {
	d    cliruntime.Driver
	spec cliruntime.LaunchSpec
}

// check is the one start check of launch, resume and approve. It runs in
// R-API-3's order: the request (400: grants), then tool support (422: the
// driver, its runner, the program on the child's PATH), then the guards
// (409: the profile's policy as it is now, R-MOVE-10, R-RES-5; a Claude
// conversation missing from the home, R-RES-2; the repository-config
// gate, R-PCS-12 and R-RES-4), and nothing is spawned or written before it
// passes. A refusal after prepare undoes it.
func (s *Supervisor) check(st start) (checked, error) {
	if err := checkGrants(st.grants, st.prof); err != nil {
		return checked{}, err
	}
	d := s.o.Drivers[st.prof.Tool]
	if d == nil {
		return checked{}, refusal.New(ErrUnknownTool, "this agent has no driver for tool %q", st.prof.Tool)
	}
	if _, err := s.runner(d); err != nil {
		return checked{}, err
	}
	if err := s.supports(st.isolation); err != nil {
		return checked{}, err
	}
	spec := s.spec(st.prof, st.dir, "", st.runRef)
	if err := s.checkBinary(d, spec); err != nil {
		return checked{}, err
	}
	if err := st.prof.Accepts(st.workspaceRef); err != nil {
		return checked{}, err
	}
	if st.conv != "" {
		if d.Kind() == cliruntime.KindClaude && !claudeTranscriptExists(st.prof.Home, st.conv) {
			return checked{}, refusal.New(ErrConversationUnavailable, "the stored conversation %s is not in the profile home %s; nothing was started", st.conv, st.prof.Home)
		}
		spec.ConversationID = st.conv
	}
	if st.prepare != nil {
		dir, err := st.prepare()
		if err != nil {
			return checked{}, err
		}
		st.dir = dir
		spec.Workdir = dir
	}
	if err := s.checkProjectConfig(st.prof, st.workspaceRef, st.dir, st.approved); err != nil {
		if st.undo != nil {
			st.undo()
		}
		return checked{}, err
	}
	return checked{d: d, spec: spec}, nil
}

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
	// SetupCommand is the workspace's setup command when the coordinator
	// found it approved for its exact text and the launch did not skip it
	// (R-SETUP-2, R-SETUP-11): a worktree launch under sandbox runs it in
	// the new worktree before the tool.
	SetupCommand string
	// HandoffOf is the source run of a handoff (R-HOF-11).
	HandoffOf string
	// ConversationID, when set, makes the first generation resume that
	// stored conversation instead of starting one (a Claude Code session
	// taken over by agent/claudesup).
	ConversationID string
}

// Launch creates a run and spawns its first generation (R-CRT-1, R-CRT-4:
// created, then started with the generation and pid). It returns once the
// child is spawned; the handshake goes on (state starting). A profile that
// wants a person's approval holds the launch: nothing is spawned
// until Approve.
func (s *Supervisor) Launch(ctx context.Context, p LaunchParams) (apitypes.Run, error) {
	s.useMu.RLock()
	defer s.useMu.RUnlock()
	if !registry.ValidRef(p.RunRef) || p.Tenant == "" {
		return apitypes.Run{}, refusal.New(ErrBadRequest, "run ref %q or tenant is malformed", p.RunRef)
	}
	if _, err := s.get(p.RunRef); err == nil {
		return apitypes.Run{}, refusal.New(ErrRunExists, "run %q exists", p.RunRef)
	}
	prof, err := s.o.Registry.ProfileIn(p.ProfileRef, p.Tenant)
	if err != nil {
		return apitypes.Run{}, err
	}
	var ws registry.Workspace
	var workdir string
	switch {
	case p.WorkspaceRef != "":
		if ws, err = s.o.Registry.WorkspaceIn(p.WorkspaceRef, p.Tenant); err != nil {
			return apitypes.Run{}, err
		}
		workdir = ws.Path
	case p.Workdir != "":
		workdir = filepath.Clean(p.Workdir)
		if fi, err := os.Stat(workdir); !filepath.IsAbs(workdir) || err != nil || !fi.IsDir() {
			return apitypes.Run{}, refusal.New(ErrBadWorkdir, "run directory %s is not an absolute directory on the node", p.Workdir)
		}
	default:
		// Without a workspace the tool works in its profile home.
		workdir = prof.Home
	}
	if p.Isolation, err = s.isolation(p.Isolation, prof); err != nil {
		return apitypes.Run{}, err
	}
	st := start{runRef: p.RunRef, prof: prof, workspaceRef: p.WorkspaceRef, dir: workdir, grants: p.Grants, approved: p.ProjectConfigApproved, isolation: p.Isolation, conv: p.ConversationID}
	var wp worktreePlan
	if p.Worktree {
		if wp, err = s.checkWorktree(ctx, ws, p); err != nil {
			return apitypes.Run{}, err
		}
		st.prepare = func() (string, error) {
			if p.SetupRefusal != "" {
				return "", refusal.New(ErrSetupNotApproved, "%s", p.SetupRefusal)
			}
			if wp, err = s.place(wp, p); err != nil {
				return "", err
			}
			if err := wp.create(ctx); err != nil {
				return "", err
			}
			return wp.wt.Path, nil
		}
		st.undo = wp.undoer()
	}
	c, err := s.check(st)
	if err != nil {
		return apitypes.Run{}, err
	}
	workdir = c.spec.Workdir
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
	r := newRun(s, rg, record{
		RunRef: p.RunRef, Tenant: p.Tenant, Driver: string(c.d.Kind()), ProfileRef: prof.Ref,
		WorkspaceRef: p.WorkspaceRef, WorkspacePath: workdir, WorktreeBranch: wp.wt.Branch, Isolation: p.Isolation, Network: network(p.Isolation, prof),
		TemplateRef: p.TemplateRef, HandoffOf: p.HandoffOf, ConversationID: p.ConversationID, CreatedAt: time.Now().UTC(), Ended: true,
		Setup: setupCommand(p),
		// a profile whose policy wants a person's approval holds the
		// launch (R-CRT-4: created, then approval_requested).
		PendingApproval: prof.LaunchRequiresApproval,
		// A held launch of a stored conversation is approved as a resume.
		PendingResume: prof.LaunchRequiresApproval && p.ConversationID != "",
	})
	r.rec.Rev = s.rev()
	r.op.Lock()
	handed := false
	defer func() {
		if !handed {
			r.op.Unlock()
		}
	}()
	s.mu.Lock()
	if s.runs[p.RunRef] != nil {
		s.mu.Unlock()
		return undo(refusal.New(ErrRunExists, "run %q exists", p.RunRef))
	}
	s.runs[p.RunRef] = r
	s.mu.Unlock()
	r.unsaved = append(r.unsaved, ledger.Event{Kind: ledger.KindCreated})
	if r.rec.PendingApproval {
		r.unsaved = append(r.unsaved, ledger.Event{Kind: ledger.KindApprovalRequested, Generation: 1})
	}
	r.dirty = true
	if err := r.save(nil); err != nil {
		s.mu.Lock()
		delete(s.runs, p.RunRef)
		s.mu.Unlock()
		return undo(err)
	}
	s.o.OnChange(p.RunRef)
	if !r.rec.PendingApproval {
		if p.ConversationID != "" {
			r.start(ctx, c.d, c.spec, true, p.Grants)
		} else {
			handed = r.startFirst(ctx, c, p.Grants)
		}
	}
	return r.snapshot(), nil
}

// Resume starts a new generation on the exact stored conversation
// (R-RES-1). It never falls back to a new one: a conversation the tool
// cannot find is ErrConversationUnavailable (R-RES-2), and a Claude
// transcript that is not in the profile home is refused before anything is
// spawned. A profile that wants a person's approval holds it (R-RES-5).
func (s *Supervisor) Resume(ctx context.Context, ref string, grants []Grant, approved string) (apitypes.Run, error) {
	s.useMu.RLock()
	defer s.useMu.RUnlock()
	r, err := s.get(ref)
	if err != nil {
		return apitypes.Run{}, err
	}
	r.op.Lock()
	defer r.op.Unlock()
	rs, err := s.checkResume(r, false, grants, approved)
	if err != nil {
		return apitypes.Run{}, err
	}
	if rs.prof.LaunchRequiresApproval {
		if err := r.update(ledger.Event{Kind: ledger.KindApprovalRequested, Generation: rs.rec.Generation + 1}, func(rec *record) {
			rec.PendingApproval, rec.PendingResume = true, true
		}); err != nil {
			return apitypes.Run{}, err
		}
		return r.snapshot(), nil
	}
	return s.resume(ctx, r, rs)
}

// resumeSpec is a checked resume.
type resumeSpec struct {
	rec    record
	prof   registry.Profile
	c      checked
	grants []Grant
	// relaunch: the run has no conversation yet and its driver lets it
	// start afresh (Relauncher).
	relaunch bool
	// isolation is the next generation's: the run's, or its profile's
	// when that is stricter now (R-TR-7, R-MOVE-10).
	isolation string
}

// checkResume checks the run's own state for a resume, then runs the start
// check; approving is the approval of a held resume. The caller holds r.op.
func (s *Supervisor) checkResume(r *run, approving bool, grants []Grant, approved string) (resumeSpec, error) {
	rec, live := r.current()
	ref := rec.RunRef
	switch {
	case live:
		return resumeSpec{}, refusal.New(ErrRunLive, "run %s is live; stop it before resuming", ref)
	case rec.Released:
		// R-RES-6: a released run takes no new generation.
		return resumeSpec{}, refusal.New(ErrReleased, "run %s was released (cleaned up); start a new run instead", ref)
	case rec.PendingApproval && !approving:
		return resumeSpec{}, refusal.New(ErrPendingApproval, "run %s waits for a person's approval; approve it first", ref)
	}
	prof, ok, err := s.o.Registry.Profile(rec.ProfileRef)
	if err != nil {
		return resumeSpec{}, err
	}
	if !ok {
		return resumeSpec{}, refusal.New(ErrConversationUnavailable, "the profile %s of run %s is gone", rec.ProfileRef, ref)
	}
	relaunch := false
	if rec.ConversationID == "" {
		rl, ok := s.o.Drivers[prof.Tool].(Relauncher)
		if !ok || !rl.Relaunchable(ref) {
			return resumeSpec{}, refusal.New(ErrConversationUnavailable, "run %s has no stored conversation to resume (the tool never named one)", ref)
		}
		relaunch = true
	}
	iso := rec.Isolation
	if iso == apitypes.IsolationNative && prof.Isolation != "" {
		iso = prof.Isolation
	}
	c, err := s.check(start{runRef: ref, prof: prof, workspaceRef: rec.WorkspaceRef, dir: rec.WorkspacePath,
		conv: rec.ConversationID, grants: grants, approved: approved, isolation: iso})
	if err != nil {
		return resumeSpec{}, err
	}
	return resumeSpec{rec: rec, prof: prof, c: c, grants: grants, relaunch: relaunch, isolation: iso}, nil
}

// resume starts the next generation on the stored conversation and waits
// for the tool to confirm it (R-RES-1, R-RES-2). The caller holds r.op.
func (s *Supervisor) resume(ctx context.Context, r *run, rs resumeSpec) (apitypes.Run, error) {
	rec := rs.rec
	if err := r.update(ledger.Event{Kind: ledger.KindResumed, Generation: rec.Generation + 1}, func(rec *record) {
		rec.Isolation, rec.Network = rs.isolation, network(rs.isolation, rs.prof)
	}); err != nil {
		return apitypes.Run{}, err
	}
	if rs.relaunch {
		// Nothing to confirm: the new generation starts as the first did.
		r.start(ctx, rs.c.d, rs.c.spec, false, rs.grants)
		return r.snapshot(), nil
	}
	g := r.start(ctx, rs.c.d, rs.c.spec, true, rs.grants)
	if g == nil {
		return r.snapshot(), nil
	}
	g.awaitHandshake(ctx)
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
	return apitypes.Run{}, refusal.New(ErrConversationUnavailable, "the tool could not resume the stored conversation %s; no new conversation was started", rec.ConversationID)
}

// Approve lets a launch or resume that its profile's policy held go on
// (Q-53, R-CRT-4: approved, then started), after the same start check. A
// run that waits for nothing is ErrNotPending.
func (s *Supervisor) Approve(ctx context.Context, ref string, grants []Grant, approved string) (apitypes.Run, error) {
	s.useMu.RLock()
	defer s.useMu.RUnlock()
	r, err := s.get(ref)
	if err != nil {
		return apitypes.Run{}, err
	}
	r.op.Lock()
	handed := false
	defer func() {
		if !handed {
			r.op.Unlock()
		}
	}()
	rec, _ := r.current()
	if !rec.PendingApproval {
		return apitypes.Run{}, refusal.New(ErrNotPending, "run %s does not wait for an approval (state=%s)", ref, r.snapshot().State)
	}
	approvedEv := ledger.Event{Kind: ledger.KindApproved, Generation: rec.Generation + 1}
	clear := func(rec *record) { rec.PendingApproval, rec.PendingResume = false, false }
	if rec.PendingResume {
		rs, err := s.checkResume(r, true, grants, approved)
		if err != nil {
			return apitypes.Run{}, err
		}
		if err := r.update(approvedEv, clear); err != nil {
			return apitypes.Run{}, err
		}
		rs.rec, _ = r.current()
		return s.resume(ctx, r, rs)
	}
	prof, ok, err := s.o.Registry.Profile(rec.ProfileRef)
	if err != nil {
		return apitypes.Run{}, err
	}
	if !ok {
		return apitypes.Run{}, refusal.New(ErrProfileGone, "the profile %s of run %s is gone", rec.ProfileRef, ref)
	}
	c, err := s.check(start{runRef: ref, prof: prof, workspaceRef: rec.WorkspaceRef, dir: rec.WorkspacePath, grants: grants, approved: approved, isolation: rec.Isolation})
	if err != nil {
		return apitypes.Run{}, err
	}
	if err := r.update(approvedEv, clear); err != nil {
		return apitypes.Run{}, err
	}
	handed = r.startFirst(ctx, c, grants)
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

// spec builds a launch spec of run ref from a profile. The children's PATH
// is the profile's, else the agent's configured one. A profile with the
// engine's hooks gets them (R-PCS-15, R-ED-4) when this agent has a hook
// endpoint; the hook finds the agent and the run through the environment.
func (s *Supervisor) spec(p registry.Profile, workdir, conv, ref string) cliruntime.LaunchSpec {
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

// SigninSpec is the launch spec a sign-in of p runs with (R-ACCT-1): the
// home, environment and PATH of its runs, without the engine's hooks.
func (s *Supervisor) SigninSpec(p registry.Profile) cliruntime.LaunchSpec {
	p.EngineHooks = false
	return s.spec(p, p.Home, "", "")
}

// SigninContain is the isolation a sign-in of p runs in: its runs'
// (R-ACCT-1, R-TR-7), seeing only its home; nil for a native profile. A
// sandbox profile on a node without a working sandbox is refused.
func (s *Supervisor) SigninContain(p registry.Profile) (func(sessions.Runner) sessions.Runner, error) {
	if p.Isolation == "" || p.Isolation == apitypes.IsolationNative {
		return nil, nil
	}
	if err := s.supports(p.Isolation); err != nil {
		return nil, err
	}
	spec := s.SigninSpec(p)
	return func(rn sessions.Runner) sessions.Runner {
		return s.contain(rn, p.Isolation, p.Network, spec)
	}, nil
}

// engineHooks reports whether runs of p carry the engine's hooks: the
// profile asks for them and this agent has a hook endpoint. Without one a
// Claude Code run reads the project's settings and is gated (R-PCS-15).
func (s *Supervisor) engineHooks(p registry.Profile) bool {
	return p.EngineHooks && p.Tool == string(cliruntime.KindClaude) && s.o.Hook.Command != "" && s.o.Hook.Socket != ""
}

func (s *Supervisor) runner(d cliruntime.Driver) (sessions.Runner, error) {
	rn := s.o.Runners[d.LaunchTransport()]
	if rn == nil {
		// R-TR-8: a launch form whose runner this host lacks.
		return nil, refusal.New(ErrTransportUnsupported, "the %s launch form needs the %s runner, which this host does not have", d.Kind(), d.LaunchTransport())
	}
	return rn, nil
}

// checkBinary refuses a launch whose program is not on the child's PATH, so
// that a missing CLI is a refusal a person can act on, not a failed run.
func (s *Supervisor) checkBinary(d cliruntime.Driver, spec cliruntime.LaunchSpec) error {
	cmd, err := d.Launch(spec)
	if err != nil {
		return refusal.New(ErrBadProfile, "%v", err)
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
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
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
	return refusal.New(ErrToolNotFound, "%s is not installed on this node (not on the PATH %s); install it, or set the agent's path", cmd.Path, path)
}

// checkProjectConfig is the repository-config gate (R-PCS-12, R-PCS-19):
// a start of a tool that reads a flagged file in dir, the directory the
// process will start in, is refused unless approved is the directory's
// current hash. There is no way around it (R-PCS-14). Runs outside a
// workspace (in the profile's own home) carry no repository and are not
// gated.
func (s *Supervisor) checkProjectConfig(p registry.Profile, workspaceRef, dir, approved string) error {
	if workspaceRef == "" {
		return nil
	}
	rep, err := projectconfig.Scan(dir)
	if err != nil {
		return refusal.New(ErrWorkspaceUnreadable, "the workspace directory %s cannot be read on the node: %v", dir, err)
	}
	if ref := projectconfig.Check(rep, p.Tool, s.engineHooks(p), approved); ref != nil {
		return refusal.New(ErrProjectConfig, "%s", ref.Message(workspaceRef))
	}
	return nil
}
