package worktree

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// What a release did with the worktree, as the cleaned ledger event records
// it (R-CLN-6).
const (
	// OutcomeMergedRemoved: the branch was merged, the worktree clean and
	// on its branch; both were removed and nothing was lost.
	OutcomeMergedRemoved = "merged_removed"
	// OutcomeDiscarded: the caller confirmed discard; the worktree and the
	// branch were removed whatever they held (R-CLN-5).
	OutcomeDiscarded = "discarded"
	// OutcomeLeftInPlace: the caller confirmed discard of a worktree the
	// node cannot reach; it and its branch were left untouched (R-CLN-5).
	OutcomeLeftInPlace = "left_in_place"
)

// Outcome is what Release did, for the cleaned event (R-CLN-6).
type Outcome struct {
	// Worktree is OutcomeMergedRemoved, OutcomeDiscarded or
	// OutcomeLeftInPlace.
	Worktree string `json:"worktree"`
	// BranchTip is the full id the branch pointed at when it was released,
	// or "" when the branch was already gone.
	BranchTip string `json:"branch_tip,omitempty"`
}

// maxStatusEntries bounds how many uncommitted paths Release counts.
const maxStatusEntries = 10000

// Release releases a stopped worktree run (R-CLN-3..5, Q-29). Without
// discard it removes the worktree and deletes the branch only when the
// branch tip is an ancestor of the workspace's HEAD commit (merged into its
// current branch), the worktree's HEAD is refs/heads/<branch>, and nothing
// is uncommitted, untracked files that are not ignored included; otherwise
// it changes nothing and returns a 409 *Error whose code is the first of
// worktree_unreachable, detached_head, branch_gone, unmerged_work (with the
// count of commits) and uncommitted_files that applies, and whose message
// names every reason.
//
// With discard it removes the worktree (git worktree remove --force --force)
// and the branch whatever they hold, or, for a worktree the node cannot
// reach, releases and leaves both in place. The branch is deleted with
// git update-ref -d guarded by the tip that was checked and returned, so a
// commit that lands after the check is never deleted unseen.
//
// The caller stops the run's process group first: nothing may write the
// worktree while Release runs. A release cut short (the worktree removed,
// the branch not yet deleted) is finished by calling Release again.
func (r Repo) Release(ctx context.Context, wt Worktree, discard bool) (Outcome, error) {
	if err := wt.check(); err != nil {
		return Outcome{}, err
	}
	info, err := r.info(ctx)
	if err != nil {
		if discard && isRefusal(err) {
			// The workspace repository itself is gone: nothing here can
			// be removed, and nothing is (R-CLN-5).
			return Outcome{Worktree: OutcomeLeftInPlace}, nil
		}
		var e *Error
		if errors.As(err, &e) {
			return Outcome{}, refuse(ErrWorktreeUnreachable, "the workspace repository %s cannot be reached (%s); restore it, or repeat with discard_worktree:true to release the run and leave the worktree in place", r.Dir, e.Msg)
		}
		return Outcome{}, err
	}
	unlock, err := lockRepo(ctx, info.commonDir)
	if err != nil {
		return Outcome{}, err
	}
	defer unlock()

	tip, err := r.refCommit(ctx, wt.ref())
	if err != nil {
		return Outcome{}, err
	}
	state, err := r.probe(ctx, info, wt)
	if err != nil {
		return Outcome{}, err
	}
	if state.unreachable != "" {
		if !discard {
			return Outcome{}, refuse(ErrWorktreeUnreachable, "worktree %s cannot be reached from this node (%s); restore it, or repeat with discard_worktree:true to release the run and leave the worktree in place", wt.Path, state.unreachable)
		}
		return Outcome{Worktree: OutcomeLeftInPlace, BranchTip: tip}, nil
	}
	if state.gone && tip == "" {
		if !discard {
			return Outcome{}, refuse(ErrBranchGone, "worktree %s and branch %s are both gone, so nothing shows whether the work was merged; repeat with discard_worktree:true to release the run", wt.Path, wt.Branch)
		}
		return Outcome{Worktree: OutcomeDiscarded}, nil
	}

	var reasons []*Error
	if !state.gone && state.head != wt.ref() {
		where := "detached at " + state.head
		if strings.HasPrefix(state.head, "refs/") {
			where = "on " + state.head
		}
		reasons = append(reasons, refuse(ErrDetachedHead, "worktree %s is %s, not on its branch %s; check out %s there, or repeat with discard_worktree:true to delete it anyway", wt.Path, where, wt.ref(), wt.Branch))
	}
	if tip == "" {
		reasons = append(reasons, refuse(ErrBranchGone, "branch %s no longer exists, so nothing shows whether the worktree's work was merged; repeat with discard_worktree:true to delete the worktree", wt.Branch))
	} else if n, err := r.unmergedCount(ctx, tip); err != nil {
		return Outcome{}, err
	} else if n > 0 {
		reasons = append(reasons, refuse(ErrUnmergedWork, "branch %s has %d commit%s the workspace's current branch does not contain; merge %s, or repeat with discard_worktree:true to delete them", wt.Branch, n, plural(n), wt.Branch))
	}
	if !state.gone {
		n, more, err := r.uncommitted(ctx, wt, nil)
		if err != nil {
			return Outcome{}, err
		}
		if n > 0 {
			atLeast := ""
			if more {
				atLeast = "at least "
			}
			reasons = append(reasons, refuse(ErrUncommitted, "worktree %s has %s%d uncommitted or untracked path%s; commit them and merge, or repeat with discard_worktree:true to delete them", wt.Path, atLeast, n, plural(n)))
		}
	}

	if len(reasons) > 0 && !discard {
		msgs := make([]string, len(reasons))
		for i, e := range reasons {
			msgs[i] = e.Msg
		}
		first := *reasons[0]
		first.Msg = strings.Join(msgs, "; also ")
		return Outcome{}, &first
	}
	out := Outcome{Worktree: OutcomeMergedRemoved, BranchTip: tip}
	if len(reasons) > 0 {
		out.Worktree = OutcomeDiscarded
	}
	if !state.gone {
		args := []string{"worktree", "remove"}
		if discard {
			args = append(args, "--force", "--force")
		}
		filters, err := r.neutralFilters(ctx, wt.Path)
		if err != nil {
			return Outcome{}, err
		}
		if _, err := r.run(ctx, call{config: filters, args: append(args, "--", wt.Path)}); err != nil {
			return Outcome{}, err
		}
	}
	if tip != "" {
		// Guarded by the tip that was checked: a branch that moved since is
		// kept, and the call fails instead of deleting unseen commits.
		if _, err := r.run(ctx, call{args: []string{"update-ref", "-d", wt.ref(), tip}}); err != nil {
			return Outcome{}, fmt.Errorf("worktree %s was removed but branch %s was kept: %w", wt.Path, wt.Branch, err)
		}
	}
	return out, nil
}

func isRefusal(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// worktreeState is what the node sees of a run's worktree.
type worktreeState struct {
	// unreachable says why the worktree cannot be reached; "" when it can.
	unreachable string
	// gone: the folder does not exist and the repository no longer lists
	// it (a release cut short after the removal).
	gone bool
	// head is the worktree's HEAD: a fully qualified ref, or a commit id
	// when detached.
	head string
}

// probe looks at the worktree: it must exist, be a worktree of this
// repository rooted at wt.Path, and answer git.
func (r Repo) probe(ctx context.Context, info repoInfo, wt Worktree) (worktreeState, error) {
	fi, err := os.Stat(wt.Path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			listed, lerr := r.listed(ctx, wt.Path)
			if lerr != nil {
				return worktreeState{}, lerr
			}
			if !listed {
				return worktreeState{gone: true}, nil
			}
			return worktreeState{unreachable: "its folder is missing, though the repository still lists it"}, nil
		}
		return worktreeState{unreachable: err.Error()}, nil
	}
	if !fi.IsDir() {
		return worktreeState{unreachable: "it is not a folder"}, nil
	}
	out, err := r.run(ctx, call{dir: wt.Path, args: []string{"rev-parse", "--path-format=absolute", "--git-common-dir", "--show-toplevel"}})
	if err != nil {
		var ge *GitError
		if errors.As(err, &ge) && ge.ExitCode > 0 {
			return worktreeState{unreachable: "git cannot use it: " + ge.firstLine()}, nil
		}
		if ctx.Err() == nil && errors.As(err, &ge) {
			return worktreeState{unreachable: "git did not answer: " + ge.Error()}, nil
		}
		return worktreeState{}, err
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != 2 || canonical(lines[0]) != canonical(info.commonDir) {
		return worktreeState{unreachable: "it is not a worktree of the workspace repository"}, nil
	}
	if canonical(lines[1]) != canonical(wt.Path) {
		return worktreeState{unreachable: "it is not the root of a worktree"}, nil
	}
	out, err = r.run(ctx, call{dir: wt.Path, args: []string{"symbolic-ref", "--quiet", "HEAD"}})
	switch {
	case err == nil:
		return worktreeState{head: firstLine(out)}, nil
	case exitCode(err) == 1:
		out, err = r.run(ctx, call{dir: wt.Path, args: []string{"rev-parse", "--verify", "--quiet", "--end-of-options", "HEAD"}})
		if err != nil && exitCode(err) != 1 {
			return worktreeState{}, err
		}
		return worktreeState{head: strings.TrimSpace(string(out))}, nil
	}
	return worktreeState{}, err
}

// listed reports whether the repository still registers a worktree at p.
func (r Repo) listed(ctx context.Context, p string) (bool, error) {
	want := canonical(p)
	found := false
	err := r.stream(ctx, call{args: []string{"worktree", "list", "--porcelain", "-z"}}, func(br *bufio.Reader) error {
		for {
			rec, err := readRecord(br)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if q, ok := strings.CutPrefix(rec, "worktree "); ok && (q == p || canonical(q) == want) {
				found = true
				return errStop
			}
		}
	})
	return found, err
}

// unmergedCount is how many commits of tip the workspace's HEAD commit
// lacks: 0 when tip is merged into the workspace's current branch.
func (r Repo) unmergedCount(ctx context.Context, tip string) (int, error) {
	ws, err := r.headCommit(ctx)
	args := []string{"rev-list", "--count", tip}
	if err == nil {
		args = append(args, "--not", ws)
	} else if !errors.Is(err, ErrNoCommit) {
		return 0, err
	}
	out, err := r.run(ctx, call{args: args})
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return 0, &GitError{Command: "rev-list", Stderr: "unexpected output: " + firstLine(out)}
	}
	return n, nil
}

// uncommitted counts the worktree's changed, staged and untracked
// (not ignored) paths with git status, with every filter switched off; more
// is true when it stopped counting at maxStatusEntries. A submodule
// counts when its checked-out commit differs from the recorded one; git
// status is not run inside submodules (their own config could name a
// filter), and git worktree remove refuses a worktree holding one unless
// the release discards. With keep, only the paths it keeps count.
func (r Repo) uncommitted(ctx context.Context, wt Worktree, keep func(path string) bool) (n int, more bool, err error) {
	filters, err := r.neutralFilters(ctx, wt.Path)
	if err != nil {
		return 0, false, err
	}
	err = r.stream(ctx, call{dir: wt.Path, config: filters, args: []string{"status", "--porcelain=v1", "-z",
		"--untracked-files=normal", "--ignore-submodules=dirty", "--no-renames"}}, func(br *bufio.Reader) error {
		for {
			rec, err := readRecord(br)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if len(rec) < 4 {
				return errors.New("worktree: unexpected status record")
			}
			if keep != nil && !keep(strings.TrimSuffix(rec[3:], "/")) {
				continue
			}
			n++
			if n >= maxStatusEntries {
				more = true
				return errStop
			}
		}
	})
	return n, more, err
}
