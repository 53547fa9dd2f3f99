package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/shared/apitypes"
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
	if _, err := s.Host.runner(d); err != nil {
		return checked{}, err
	}
	if err := s.Host.supports(st.isolation); err != nil {
		return checked{}, err
	}
	spec := s.Host.spec(st.prof, st.dir, "", st.runRef)
	if err := s.Host.checkBinary(d, spec); err != nil {
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
	if err := s.Host.checkProjectConfig(st.prof, st.workspaceRef, st.dir, st.approved); err != nil {
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
	defer s.o.Registry.Hold()()
	if !registry.ValidRef(p.RunRef) || p.Tenant == "" {
		return apitypes.Run{}, refusal.New(ErrBadRequest, "run ref %q or tenant is malformed", p.RunRef)
	}
	if _, err := s.Runs.get(p.RunRef); err == nil {
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
	if p.Isolation, err = s.Host.isolation(p.Isolation, prof); err != nil {
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
	r.rec.Rev = s.Runs.NextRev()
	r.op.Lock()
	handed := false
	defer func() {
		if !handed {
			r.op.Unlock()
		}
	}()
	if !s.Runs.add(r) {
		return undo(refusal.New(ErrRunExists, "run %q exists", p.RunRef))
	}
	r.unsaved = append(r.unsaved, ledger.Event{Kind: ledger.KindCreated})
	if r.rec.PendingApproval {
		r.unsaved = append(r.unsaved, ledger.Event{Kind: ledger.KindApprovalRequested, Generation: 1})
	}
	r.dirty = true
	if err := r.save(nil); err != nil {
		s.Runs.remove(p.RunRef)
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
	defer s.o.Registry.Hold()()
	r, err := s.Runs.get(ref)
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
	defer s.o.Registry.Hold()()
	r, err := s.Runs.get(ref)
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
