package supervisor

import (
	"context"
	"encoding/json"
	"time"

	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/worktree"
)

// worktreeTimeout bounds each git step of a launch or a release.
const worktreeTimeout = 2 * time.Minute

// worktreePlan is a checked worktree launch: where it goes and from which
// commit. Nothing exists yet.
type worktreePlan struct {
	repo   worktree.Repo
	wt     worktree.Worktree
	commit string
}

// checkWorktree runs the checks of a worktree launch that need nothing on
// disk (R-WT-3, R-WTF-3, R-WTF-4) and resolves where it starts.
func (s *Supervisor) checkWorktree(ctx context.Context, w registry.Workspace, p LaunchParams) (worktreePlan, error) {
	if p.WorkspaceRef == "" {
		return worktreePlan{}, refusal.New(ErrWorktreeNeedsWorkspace, "a worktree launch needs a workspace at a git repository's root") // R-WT-3
	}
	ctx, cancel := context.WithTimeout(ctx, worktreeTimeout)
	defer cancel()
	repo := worktree.Repo{Dir: w.Path}
	if err := repo.CheckWorktreeable(ctx, w.ReadOnly); err != nil {
		return worktreePlan{}, err
	}
	commit, err := repo.ResolveFrom(ctx, p.WorktreeFrom)
	if err != nil {
		return worktreePlan{}, err
	}
	return worktreePlan{repo: repo, commit: commit}, nil
}

// place names the worktree of run p on this node (worktree.ErrNoWorktreeDir
// when the node has no worktree directory, R-WT-4).
func (s *Supervisor) place(wp worktreePlan, p LaunchParams) (worktreePlan, error) {
	wt, err := worktree.Plan(s.o.WorktreeDir, p.Tenant, p.RunRef)
	if err != nil {
		return wp, err
	}
	wp.wt = wt
	return wp, nil
}

// create makes the worktree and its branch (R-WT-1, R-WT-6).
func (wp worktreePlan) create(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, worktreeTimeout)
	defer cancel()
	return wp.repo.Create(ctx, wp.wt, wp.commit)
}

// undo removes a worktree created by a launch that was then refused: it
// holds nothing but the commit it started from.
func (wp worktreePlan) undo() {
	ctx, cancel := context.WithTimeout(context.Background(), worktreeTimeout)
	defer cancel()
	wp.repo.Release(ctx, wp.wt, true)
}

// undoer returns an undo of whatever *wp holds when it is called.
func (wp *worktreePlan) undoer() func() {
	return func() {
		if wp.wt.Path != "" {
			wp.undo()
		}
	}
}

// releaseWorktree is the worktree part of a release (R-CLN-3..6): the
// process is already stopped (not live); a refusal changes nothing and the
// run stays as it is.
func (s *Supervisor) releaseWorktree(ctx context.Context, rec record, discard bool) (json.RawMessage, error) {
	w, ok, err := s.o.Registry.Workspace(rec.WorkspaceRef)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, refusal.New(ErrWorkspaceGone, "the workspace %s of run %s is no longer registered", rec.WorkspaceRef, rec.RunRef)
	}
	repo, wt := worktree.Repo{Dir: w.Path}, worktree.Worktree{Path: rec.WorkspacePath, Branch: rec.WorktreeBranch}
	ctx, cancel := context.WithTimeout(ctx, worktreeTimeout)
	defer cancel()
	out, err := repo.Release(ctx, wt, discard)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]string{"worktree": out.Worktree, "branch": wt.Branch, "branch_tip": out.BranchTip})
}
