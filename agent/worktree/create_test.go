package worktree

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// R-WT-4, R-WT-6: the worktree's path and branch, and the names that
// cannot make one.
func TestPlan(t *testing.T) {
	t.Parallel()
	wt, err := Plan("/var/lib/olivares/worktrees", "acme", "run_abcd1234")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Worktree{Path: "/var/lib/olivares/worktrees/acme/run_abcd1234", Branch: "olivares/run_abcd1234"}); wt != want {
		t.Fatalf("got %+v, want %+v", wt, want)
	}
	cases := []struct {
		dir, tenant, ref string
		want             *Error
	}{
		{"", "acme", "run_x", ErrNoWorktreeDir},
		{"relative/dir", "acme", "run_x", ErrNoWorktreeDir},
		{"/w", "", "run_x", ErrBadName},
		{"/w", "acme", "", ErrBadName},
		{"/w", "..", "run_x", ErrBadName},
		{"/w", "acme", "../etc", ErrBadName},
		{"/w", "acme", "a/b", ErrBadName},
		{"/w", "acme", "-b", ErrBadName},
		{"/w", "acme", "run.lock", ErrBadName},
		{"/w", "acme", "run x", ErrBadName},
		{"/w", "a~b", "run_x", ErrBadName},
	}
	for _, tc := range cases {
		_, err := Plan(tc.dir, tc.tenant, tc.ref)
		wantCode(t, err, tc.want)
	}
}

// R-WT-1, R-WT-6: a new worktree on branch olivares/<run_ref> at the
// workspace's commit; the workspace checkout is untouched.
func TestCreate(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	r := Repo{Dir: dir}
	c := head(t, dir)
	wt := newRun(t, r)
	if got := gitT(t, wt.Path, "symbolic-ref", "HEAD"); got != "refs/heads/"+wt.Branch {
		t.Fatalf("worktree HEAD: got %s, want refs/heads/%s", got, wt.Branch)
	}
	if got := head(t, wt.Path); got != c {
		t.Fatalf("worktree commit: got %s, want %s", got, c)
	}
	if b, err := os.ReadFile(filepath.Join(wt.Path, "README")); err != nil || string(b) != "hello\n" {
		t.Fatalf("checkout: got %q, %v, want hello", b, err)
	}
	if got := gitT(t, dir, "symbolic-ref", "HEAD"); got != "refs/heads/main" {
		t.Fatalf("workspace HEAD: got %s, want refs/heads/main", got)
	}
	if got := gitT(t, dir, "status", "--porcelain"); got != "" {
		t.Fatalf("workspace status: got %q, want clean", got)
	}
	// The same run again: its folder and branch exist (409), nothing changes.
	err := r.Create(tctx(t), wt, c)
	wantCode(t, err, ErrWorktreeExists)
	if !exists(filepath.Join(wt.Path, "README")) {
		t.Fatal("a refused create removed the existing worktree")
	}
}

// R-WTF-2: a worktree from a local branch starts at the branch's commit on
// its own new branch; neither the named branch nor the workspace moves.
func TestCreateFromBranch(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	c1 := head(t, dir)
	gitT(t, dir, "branch", "feature")
	c2 := commitFiles(t, dir, map[string]string{"b.txt": "b\n"})
	r := Repo{Dir: dir}
	ctx := tctx(t)
	id, err := r.ResolveFrom(ctx, "feature")
	if err != nil || id != c1 {
		t.Fatalf("got %q, %v, want %s", id, err, c1)
	}
	wt, err := Plan(filepath.Join(t.TempDir(), "wt"), "t", "run_from1")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Create(ctx, wt, id); err != nil {
		t.Fatal(err)
	}
	commitFiles(t, wt.Path, map[string]string{"c.txt": "c\n"})
	if got := gitT(t, dir, "rev-parse", "refs/heads/feature"); got != c1 {
		t.Fatalf("feature moved: got %s, want %s", got, c1)
	}
	if got := head(t, dir); got != c2 {
		t.Fatalf("workspace moved: got %s, want %s", got, c2)
	}
	if got := gitT(t, wt.Path, "symbolic-ref", "HEAD"); got != "refs/heads/olivares/run_from1" {
		t.Fatalf("worktree branch: got %s, want refs/heads/olivares/run_from1", got)
	}
	if got := gitT(t, wt.Path, "rev-parse", "HEAD~1"); got != c1 {
		t.Fatalf("worktree parent: got %s, want %s", got, c1)
	}
}

// R-WT-1: concurrent launches on one workspace all succeed, each on its own
// branch and folder.
func TestCreateConcurrent(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	r := Repo{Dir: dir}
	root := filepath.Join(t.TempDir(), "wt")
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	wts := make([]Worktree, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := tctx(t)
			wt, err := Plan(root, "t", fmt.Sprintf("run_par%02d", i))
			if err != nil {
				errs[i] = err
				return
			}
			wts[i] = wt
			id, err := r.ResolveFrom(ctx, "")
			if err == nil {
				err = r.Create(ctx, wt, id)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	branches := map[string]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %d: got %v, want nil", i, err)
		}
		got := gitT(t, wts[i].Path, "symbolic-ref", "--short", "HEAD")
		if got != wts[i].Branch || branches[got] {
			t.Fatalf("create %d: got branch %s, want a distinct %s", i, got, wts[i].Branch)
		}
		branches[got] = true
	}
	list := gitT(t, dir, "worktree", "list", "--porcelain")
	if got := strings.Count(list, "worktree "); got != n+1 {
		t.Fatalf("worktree list: got %d worktrees, want %d", got, n+1)
	}
}

// A failed create leaves no branch, no folder and no registration behind:
// git's own failure after it created the branch (the worktrees folder is a
// file), and a failure reported after git made everything.
func TestCreateRollback(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, dir string, wt Worktree) {
		t.Helper()
		if refExists(t, dir, "refs/heads/"+wt.Branch) {
			t.Fatalf("branch %s left behind", wt.Branch)
		}
		if exists(wt.Path) {
			t.Fatalf("folder %s left behind", wt.Path)
		}
		if list := gitT(t, dir, "worktree", "list", "--porcelain"); strings.Contains(list, wt.Path) {
			t.Fatalf("registration left behind: %s", list)
		}
	}
	t.Run("git fails after creating the branch", func(t *testing.T) {
		t.Parallel()
		dir := newRepo(t)
		writeFile(t, dir, ".git/worktrees", "not a folder")
		r := Repo{Dir: dir}
		wt, _ := Plan(filepath.Join(t.TempDir(), "wt"), "t", "run_fail1")
		err := r.Create(tctx(t), wt, head(t, dir))
		if err == nil {
			t.Fatal("got nil, want the git failure")
		}
		check(t, dir, wt)
	})
	t.Run("failure after git made everything", func(t *testing.T) {
		t.Parallel()
		dir := newRepo(t)
		script := gitScript(t, `case " $* " in *" worktree add "*) "$REAL" "$@"; echo "fatal: injected" >&2; exit 1;; esac
exec "$REAL" "$@"
`)
		r := Repo{Dir: dir, Git: script}
		wt, _ := Plan(filepath.Join(t.TempDir(), "wt"), "t", "run_fail2")
		err := r.Create(tctx(t), wt, head(t, dir))
		if err == nil || !strings.Contains(err.Error(), "injected") {
			t.Fatalf("got %v, want the injected failure", err)
		}
		check(t, dir, wt)
		if ents, _ := os.ReadDir(filepath.Join(dir, ".git", "worktrees")); len(ents) != 0 {
			t.Fatalf("admin folders left: got %d, want 0", len(ents))
		}
	})
	t.Run("a start that is not a commit", func(t *testing.T) {
		t.Parallel()
		dir := newRepo(t)
		r := Repo{Dir: dir}
		wt, _ := Plan(filepath.Join(t.TempDir(), "wt"), "t", "run_fail3")
		err := r.Create(tctx(t), wt, strings.Repeat("1", 40))
		wantCode(t, err, ErrFromUnknown)
		check(t, dir, wt)
	})
}

// Lock contention from another git process is retried with a bounded
// backoff; the create then succeeds.
func TestCreateRetriesLockContention(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	flag := filepath.Join(t.TempDir(), "failed-once")
	script := gitScript(t, fmt.Sprintf(`case " $* " in *" worktree add "*)
  if [ ! -e %q ]; then : > %q; echo "fatal: Unable to create '/x/.git/index.lock': File exists." >&2; exit 128; fi;;
esac
exec "$REAL" "$@"
`, flag, flag))
	r := Repo{Dir: dir, Git: script}
	wt, _ := Plan(filepath.Join(t.TempDir(), "wt"), "t", "run_retry")
	if err := r.Create(tctx(t), wt, head(t, dir)); err != nil {
		t.Fatalf("got %v, want success after a retry", err)
	}
	if !exists(flag) {
		t.Fatal("the injected contention never happened")
	}
	if got := gitT(t, wt.Path, "symbolic-ref", "--short", "HEAD"); got != wt.Branch {
		t.Fatalf("got %s, want %s", got, wt.Branch)
	}
}

// R-WT-6: a create re-checks the config rule: a filter named after the
// launch check is refused, and nothing is created.
func TestCreateRefusesFilterConfig(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	gitT(t, dir, "config", "filter.x.smudge", "cat")
	r := Repo{Dir: dir}
	wt, _ := Plan(filepath.Join(t.TempDir(), "wt"), "t", "run_filter")
	wantCode(t, r.Create(tctx(t), wt, head(t, dir)), ErrConfigFilter)
	if exists(wt.Path) || refExists(t, dir, "refs/heads/"+wt.Branch) {
		t.Fatal("a refused create left its folder or branch")
	}
}

// No repository hook ever runs: post-checkout and reference-transaction
// hooks in .git/hooks and in a core.hooksPath the repository sets would
// create marker files; after create, diff and release the markers are
// absent. The control run with plain git proves the hooks work.
func TestHooksNeverRun(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (dir, marker string) {
		dir = newRepo(t)
		marker = filepath.Join(t.TempDir(), "hook-ran")
		hook := fmt.Sprintf("#!/bin/sh\necho \"$0\" >> %q\n", marker)
		custom := filepath.Join(t.TempDir(), "hooks")
		for _, d := range []string{filepath.Join(dir, ".git", "hooks"), custom} {
			for _, name := range []string{"post-checkout", "reference-transaction", "post-commit"} {
				writeFile(t, d, name, hook)
				if err := os.Chmod(filepath.Join(d, name), 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}
		gitT(t, dir, "config", "core.hooksPath", custom)
		return dir, marker
	}
	t.Run("control: plain git runs them", func(t *testing.T) {
		t.Parallel()
		dir, marker := setup(t)
		gitT(t, dir, "worktree", "add", "-q", "-b", "ctl", filepath.Join(t.TempDir(), "ctl"))
		if !exists(marker) {
			t.Fatal("the hooks did not run under plain git; the test proves nothing")
		}
	})
	t.Run("worktree", func(t *testing.T) {
		t.Parallel()
		dir, marker := setup(t)
		r := Repo{Dir: dir}
		wt := newRun(t, r)
		if _, err := r.Diff(tctx(t), wt, ReadOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Release(tctx(t), wt, true); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(marker); err == nil {
			t.Fatalf("a hook ran: %s", b)
		}
	})
}
