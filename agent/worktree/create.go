package worktree

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// BranchPrefix starts the name of every run branch (R-WT-6).
const BranchPrefix = "olivares/"

// Worktree is one run's worktree: its folder and its branch (R-WT-6).
type Worktree struct {
	// Path is the absolute worktree folder, <worktree_dir>/<tenant>/<run_ref>.
	Path string
	// Branch is the short branch name, olivares/<run_ref>.
	Branch string
}

// nameRE is what a tenant or run ref must look like to name a folder and a
// branch component without any escaping.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

func validName(s string) bool {
	return nameRE.MatchString(s) && !strings.Contains(s, "..") && !strings.HasSuffix(s, ".lock") && !strings.HasSuffix(s, ".")
}

// Plan names the worktree of run runRef of tenant under the node's worktree
// directory: <worktreeDir>/<tenant>/<runRef> on branch olivares/<runRef>
// (R-WT-6). An empty or relative worktreeDir is R-WT-4's 503; a tenant or
// run ref that is not a plain name is a 400. Plan touches nothing.
func Plan(worktreeDir, tenant, runRef string) (Worktree, error) {
	if worktreeDir == "" {
		return Worktree{}, refuse(ErrNoWorktreeDir, "this node has no worktree directory; set worktree_dir in the agent config to launch worktree runs")
	}
	if !filepath.IsAbs(worktreeDir) {
		return Worktree{}, refuse(ErrNoWorktreeDir, "the node's worktree directory %q is not an absolute path; fix worktree_dir in the agent config", worktreeDir)
	}
	if !validName(tenant) || !validName(runRef) {
		return Worktree{}, refuse(ErrBadName, "tenant %q or run ref %q cannot name a worktree folder and branch", clip(tenant), clip(runRef))
	}
	return Worktree{
		Path:   filepath.Join(filepath.Clean(worktreeDir), tenant, runRef),
		Branch: BranchPrefix + runRef,
	}, nil
}

// check refuses a Worktree this package did not plan: a relative or
// unclean path, or a branch name git would not take.
func (wt Worktree) check() error {
	if !filepath.IsAbs(wt.Path) || filepath.Clean(wt.Path) != wt.Path || wt.Path == "/" {
		return refuse(ErrBadName, "worktree path %q is not a clean absolute path", clip(wt.Path))
	}
	b := wt.Branch
	if b == "" || strings.HasPrefix(b, "-") || b == "HEAD" || checkFromSyntax(b) != nil {
		return refuse(ErrBadName, "worktree branch %q is not a plain branch name", clip(b))
	}
	return nil
}

func (wt Worktree) ref() string { return "refs/heads/" + wt.Branch }

// Create adds the run's worktree at wt.Path on the new branch wt.Branch,
// starting at commit (the full id ResolveFrom returned), with
// git worktree add -b <branch> -- <path> <commit> (R-WT-1, R-WT-6).
//
// Creates on one repository are serialized by a lock keyed by its common
// dir, and git lock contention from other processes is retried with a
// bounded backoff, so concurrent launches all succeed with their own
// branches. Create refuses (409) when the folder or the branch exists, and
// re-checks the config rule of R-WT-6 under the lock. A failed create
// removes what it made: no branch, no folder and no worktree registration
// is left behind. The folder <worktree_dir>/<tenant> is created when
// missing (0700) and is kept.
func (r Repo) Create(ctx context.Context, wt Worktree, commit string) error {
	if err := wt.check(); err != nil {
		return err
	}
	info, err := r.info(ctx)
	if err != nil {
		return err
	}
	if len(commit) != info.objectLen || !isFullHex(commit) {
		return refuse(ErrFromUnknown, "start commit %q is not a full commit id of this repository", clip(commit))
	}
	if typ, err := r.objectType(ctx, commit); err != nil {
		return err
	} else if typ != "commit" {
		return refuse(ErrFromUnknown, "start commit %s is not a commit of this repository", commit)
	}
	if _, err := r.run(ctx, call{args: []string{"check-ref-format", wt.ref()}}); err != nil {
		if exitCode(err) == 1 {
			return refuse(ErrBadName, "worktree branch %q is not a valid branch name", clip(wt.Branch))
		}
		return err
	}
	unlock, err := lockRepo(ctx, info.commonDir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := r.checkConfig(ctx, r.Dir); err != nil {
		return err
	}
	if tip, err := r.refCommitAny(ctx, wt.ref()); err != nil {
		return err
	} else if tip {
		return refuse(ErrWorktreeExists, "branch %s already exists; a run's branch is created once, so pick a new run ref or delete the branch", wt.Branch)
	}
	if _, err := os.Lstat(wt.Path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return refuse(ErrWorktreeExists, "worktree folder %s already exists; remove it or pick a new run ref", wt.Path)
	}
	if err := os.MkdirAll(filepath.Dir(wt.Path), 0o700); err != nil {
		return refuse(ErrNoWorktreeDir, "cannot create the worktree folder's parent %s (%v); fix the node's worktree_dir", filepath.Dir(wt.Path), err)
	}
	backoff := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		_, err := r.run(ctx, call{args: []string{"worktree", "add", "--quiet", "-b", wt.Branch, "--", wt.Path, commit}})
		if err == nil {
			return nil
		}
		if rerr := r.rollbackCreate(context.WithoutCancel(ctx), info, wt, commit); rerr != nil {
			return errors.Join(err, rerr)
		}
		if attempt >= maxCreateAttempts || !lockContention(err) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		backoff *= 2
	}
}

// maxCreateAttempts bounds the retries of a create that met another
// process's git lock (index.lock, config.lock, a ref lock).
const maxCreateAttempts = 4

// lockContention reports whether git failed because another process held
// one of its lock files.
func lockContention(err error) bool {
	var ge *GitError
	return errors.As(err, &ge) && strings.Contains(ge.Stderr, ".lock") &&
		(strings.Contains(ge.Stderr, "File exists") || strings.Contains(ge.Stderr, "Unable to create"))
}

// rollbackCreate removes what a failed git worktree add left: the worktree
// registration and folder, and the branch when it still points at commit
// (Create checked that it did not exist before).
func (r Repo) rollbackCreate(ctx context.Context, info repoInfo, wt Worktree, commit string) error {
	var errs []error
	if _, err := os.Lstat(wt.Path); err == nil {
		if err := os.RemoveAll(wt.Path); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeAdmin(info.commonDir, wt.Path); err != nil {
		errs = append(errs, err)
	}
	if ok, err := r.refCommitAny(ctx, wt.ref()); err != nil {
		errs = append(errs, err)
	} else if ok {
		// Guarded by the old value: a branch that moved is not ours to drop.
		if _, err := r.run(ctx, call{args: []string{"update-ref", "-d", wt.ref(), commit}}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeAdmin removes the registration (<common>/worktrees/<id>) of the
// worktree at path, found by its gitdir file; other registrations stay,
// unlike git worktree prune, which would also drop worktrees that are only
// unreachable for now.
func removeAdmin(commonDir, path string) error {
	dir := filepath.Join(commonDir, "worktrees")
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	want := filepath.Join(path, ".git")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "gitdir"))
		if err != nil {
			continue
		}
		got := strings.TrimSpace(string(b))
		if got == want || got == filepath.Join(canonical(path), ".git") {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// refCommitAny reports whether the fully qualified ref exists.
func (r Repo) refCommitAny(ctx context.Context, ref string) (bool, error) {
	_, err := r.run(ctx, call{args: []string{"show-ref", "--verify", "--quiet", "--", ref}})
	if err != nil {
		if c := exitCode(err); c == 1 || c == 128 {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// repoLocks serializes the changes this process makes to one repository
// (worktree add, worktree remove, branch deletion), keyed by common dir.
var repoLocks sync.Map // canonical common dir -> chan struct{} (capacity 1)

// lockRepo takes the repository's lock, or gives up when ctx ends.
func lockRepo(ctx context.Context, commonDir string) (func(), error) {
	v, _ := repoLocks.LoadOrStore(canonical(commonDir), make(chan struct{}, 1))
	ch := v.(chan struct{})
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
