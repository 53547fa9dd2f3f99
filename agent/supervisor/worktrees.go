package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/olivares-dev/olivares/agent/worktree"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// worktreeTimeout bounds each git step of a launch, a diff or a release.
const worktreeTimeout = 2 * time.Minute

// gitErr turns a worktree package error into the agent's answer: its own
// status and code (R-WT-3, R-WTF-*, R-DIFF-*, R-CLN-4), or an internal
// error for what git did unexpectedly.
func gitErr(err error) error {
	var we *worktree.Error
	if errors.As(err, &we) {
		return errf(we.Status, we.Code, "%s", we.Msg)
	}
	return err
}

// worktreePlan is a checked worktree launch: where it goes and from which
// commit. Nothing exists yet.
type worktreePlan struct {
	repo   worktree.Repo
	wt     worktree.Worktree
	commit string
}

// checkWorktree runs the 422 checks of a worktree launch, before anything
// is created (R-WT-3, R-WTF-3, R-WTF-4), and resolves where it starts.
func (s *Supervisor) checkWorktree(ctx context.Context, w workspace, p LaunchParams) (worktreePlan, error) {
	if p.Isolation != apitypes.IsolationNative {
		return worktreePlan{}, errf(http.StatusUnprocessableEntity, "worktree_isolation", "a worktree launch needs native isolation, not %q", p.Isolation)
	}
	ctx, cancel := context.WithTimeout(ctx, worktreeTimeout)
	defer cancel()
	repo := worktree.Repo{Dir: w.Path}
	if err := repo.CheckWorktreeable(ctx, w.ReadOnly); err != nil {
		return worktreePlan{}, gitErr(err)
	}
	commit, err := repo.ResolveFrom(ctx, p.WorktreeFrom)
	if err != nil {
		return worktreePlan{}, gitErr(err)
	}
	return worktreePlan{repo: repo, commit: commit}, nil
}

// place names the worktree of run p on this node: 503 when the node has no
// worktree directory (R-WT-4).
func (s *Supervisor) place(wp worktreePlan, p LaunchParams) (worktreePlan, error) {
	wt, err := worktree.Plan(s.o.WorktreeDir, p.Tenant, p.RunRef)
	if err != nil {
		return wp, gitErr(err)
	}
	wp.wt = wt
	return wp, nil
}

// create makes the worktree and its branch (R-WT-1, R-WT-6).
func (wp worktreePlan) create(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, worktreeTimeout)
	defer cancel()
	return gitErr(wp.repo.Create(ctx, wp.wt, wp.commit))
}

// undo removes a worktree created by a launch that was then refused: it
// holds nothing but the commit it started from.
func (wp worktreePlan) undo() {
	ctx, cancel := context.WithTimeout(context.Background(), worktreeTimeout)
	defer cancel()
	wp.repo.Release(ctx, wp.wt, true)
}

// worktreeOf returns the run's worktree and the repository of its
// workspace, or a 404 for a run without one (R-DIFF-6).
func (s *Supervisor) worktreeOf(rec record) (worktree.Repo, worktree.Worktree, workspace, error) {
	if rec.WorktreeBranch == "" {
		return worktree.Repo{}, worktree.Worktree{}, workspace{}, errf(http.StatusNotFound, "no_worktree", "run %s has no worktree", rec.RunRef)
	}
	w, ok, err := s.workspace(rec.WorkspaceRef)
	if err != nil {
		return worktree.Repo{}, worktree.Worktree{}, workspace{}, err
	}
	if !ok {
		return worktree.Repo{}, worktree.Worktree{}, workspace{}, errf(http.StatusConflict, "workspace_gone", "the workspace %s of run %s is no longer registered", rec.WorkspaceRef, rec.RunRef)
	}
	return worktree.Repo{Dir: w.Path}, worktree.Worktree{Path: rec.WorkspacePath, Branch: rec.WorktreeBranch}, w, nil
}

func readOptions(w workspace) worktree.ReadOptions {
	return worktree.ReadOptions{AllowedSubpaths: w.AllowedSubpaths, MaxReadBytes: w.MaxReadBytes, DenyReads: w.DLP == apitypes.DLPDeny}
}

// Diff is GET /runs/{ref}/diff (R-DIFF-1..8): the paths the worktree's
// branch changed since it left the workspace's commit, committed objects
// only.
func (s *Supervisor) Diff(ctx context.Context, ref string) (apitypes.Diff, error) {
	r, err := s.get(ref)
	if err != nil {
		return apitypes.Diff{}, err
	}
	r.mu.Lock()
	rec := r.rec
	r.mu.Unlock()
	repo, wt, w, err := s.worktreeOf(rec)
	if err != nil {
		return apitypes.Diff{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, worktreeTimeout)
	defer cancel()
	d, err := repo.Diff(ctx, wt, readOptions(w))
	if err != nil {
		return apitypes.Diff{}, gitErr(err)
	}
	out := apitypes.Diff{Branch: d.Branch, Base: d.Base, Head: d.Head, Truncated: d.Truncated, Files: []apitypes.DiffEntry{}}
	for _, f := range d.Files {
		out.Files = append(out.Files, apitypes.DiffEntry{Path: f.Path, Status: f.Status, OldPath: f.OldPath})
	}
	return out, nil
}

// DiffFile is GET /runs/{ref}/diff/file?path= (R-DIFF-3, R-DIFF-5,
// R-DIFF-7, R-DIFF-8).
func (s *Supervisor) DiffFile(ctx context.Context, ref, path string) (apitypes.FileDiff, error) {
	r, err := s.get(ref)
	if err != nil {
		return apitypes.FileDiff{}, err
	}
	r.mu.Lock()
	rec := r.rec
	r.mu.Unlock()
	repo, wt, w, err := s.worktreeOf(rec)
	if err != nil {
		return apitypes.FileDiff{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, worktreeTimeout)
	defer cancel()
	fd, err := repo.DiffFile(ctx, wt, path, readOptions(w))
	if err != nil {
		return apitypes.FileDiff{}, gitErr(err)
	}
	return apitypes.FileDiff{Path: fd.Path, Original: fd.Original, Modified: fd.Modified,
		OriginalTruncated: fd.OriginalTruncated, ModifiedTruncated: fd.ModifiedTruncated, Binary: fd.Binary}, nil
}

// releaseWorktree is the worktree part of a release (R-CLN-3..6): the
// process is already stopped (not live); a refusal changes nothing and the
// run stays as it is.
func (s *Supervisor) releaseWorktree(ctx context.Context, rec record, discard bool) (json.RawMessage, error) {
	repo, wt, _, err := s.worktreeOf(rec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, worktreeTimeout)
	defer cancel()
	out, err := repo.Release(ctx, wt, discard)
	if err != nil {
		return nil, gitErr(err)
	}
	return json.Marshal(map[string]string{"worktree": out.Worktree, "branch": wt.Branch, "branch_tip": out.BranchTip})
}
