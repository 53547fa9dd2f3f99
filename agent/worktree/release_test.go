package worktree

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// R-CLN-3, R-CLN-6: a merged, clean worktree on its branch is removed with
// its branch, and the outcome carries the branch tip.
func TestReleaseMerged(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		prepare func(t *testing.T, r Repo, wt Worktree)
	}{
		{"merged commits", func(t *testing.T, r Repo, wt Worktree) {
			commitFiles(t, wt.Path, map[string]string{"a.txt": "a\n"})
			commitFiles(t, wt.Path, map[string]string{"b.txt": "b\n"})
			gitT(t, r.Dir, "merge", "-q", "--ff-only", wt.Branch)
		}},
		{"no commit at all", func(t *testing.T, r Repo, wt Worktree) {}},
		{"merged with a merge commit", func(t *testing.T, r Repo, wt Worktree) {
			commitFiles(t, wt.Path, map[string]string{"a.txt": "a\n"})
			commitFiles(t, r.Dir, map[string]string{"ws.txt": "w\n"})
			gitT(t, r.Dir, "merge", "-q", "--no-edit", wt.Branch)
		}},
		{"ignored files only", func(t *testing.T, r Repo, wt Worktree) {
			commitFiles(t, wt.Path, map[string]string{".gitignore": "*.log\n"})
			gitT(t, r.Dir, "merge", "-q", "--ff-only", wt.Branch)
			writeFile(t, wt.Path, "build.log", "ignored\n")
		}},
		{"discard confirmed but nothing to lose", func(t *testing.T, r Repo, wt Worktree) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := newRepo(t)
			r := Repo{Dir: dir}
			wt := newRun(t, r)
			tc.prepare(t, r, wt)
			tip := gitT(t, dir, "rev-parse", "refs/heads/"+wt.Branch)
			out, err := r.Release(tctx(t), wt, strings.HasPrefix(tc.name, "discard"))
			if err != nil {
				t.Fatal(err)
			}
			if want := (Outcome{Worktree: OutcomeMergedRemoved, BranchTip: tip}); out != want {
				t.Fatalf("got %+v, want %+v", out, want)
			}
			if exists(wt.Path) || refExists(t, dir, "refs/heads/"+wt.Branch) {
				t.Fatal("the worktree or its branch is still there")
			}
			if list := gitT(t, dir, "worktree", "list", "--porcelain"); strings.Contains(list, wt.Path) {
				t.Fatalf("still registered: %s", list)
			}
		})
	}
}

// R-CLN-4, R-CLN-5, Q-29 (J05): each refusal is a 409 that changes nothing;
// the same release with discard removes the worktree and branch and
// reports the tip it deleted.
func TestReleaseRefusalsThenDiscard(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		prepare func(t *testing.T, r Repo, wt Worktree)
		want    *Error
		msg     string
	}{
		{"unmerged commits", func(t *testing.T, r Repo, wt Worktree) {
			commitFiles(t, wt.Path, map[string]string{"a.txt": "a\n"})
			commitFiles(t, wt.Path, map[string]string{"b.txt": "b\n"})
		}, ErrUnmergedWork, "2 commits"},
		{"detached HEAD", func(t *testing.T, r Repo, wt Worktree) {
			gitT(t, wt.Path, "checkout", "-q", "--detach")
		}, ErrDetachedHead, "detached at"},
		{"detached HEAD with commits only it holds", func(t *testing.T, r Repo, wt Worktree) {
			gitT(t, wt.Path, "checkout", "-q", "--detach")
			commitFiles(t, wt.Path, map[string]string{"a.txt": "a\n"})
		}, ErrDetachedHead, "detached at"},
		{"on another branch", func(t *testing.T, r Repo, wt Worktree) {
			gitT(t, wt.Path, "checkout", "-q", "-b", "elsewhere")
		}, ErrDetachedHead, "on refs/heads/elsewhere"},
		{"modified tracked file", func(t *testing.T, r Repo, wt Worktree) {
			writeFile(t, wt.Path, "README", "changed\n")
		}, ErrUncommitted, "1 uncommitted"},
		{"staged file", func(t *testing.T, r Repo, wt Worktree) {
			writeFile(t, wt.Path, "s.txt", "s\n")
			gitT(t, wt.Path, "add", "s.txt")
		}, ErrUncommitted, "1 uncommitted"},
		{"untracked file that is not ignored", func(t *testing.T, r Repo, wt Worktree) {
			writeFile(t, wt.Path, "notes.txt", "n\n")
			writeFile(t, wt.Path, "dir/more.txt", "n\n")
		}, ErrUncommitted, "2 uncommitted"},
		{"unmerged and uncommitted: the first code, every reason", func(t *testing.T, r Repo, wt Worktree) {
			commitFiles(t, wt.Path, map[string]string{"a.txt": "a\n"})
			writeFile(t, wt.Path, "notes.txt", "n\n")
		}, ErrUnmergedWork, "1 commit the workspace's current branch does not contain; merge olivares/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := newRepo(t)
			r := Repo{Dir: dir}
			wt := newRun(t, r)
			tc.prepare(t, r, wt)
			tip := gitT(t, dir, "rev-parse", "refs/heads/"+wt.Branch)
			wtHead := head(t, wt.Path)
			_, err := r.Release(tctx(t), wt, false)
			wantCode(t, err, tc.want)
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %q, want it to say %q", err, tc.msg)
			}
			if strings.Contains(tc.name, "every reason") && !strings.Contains(err.Error(), "uncommitted") {
				t.Fatalf("got %q, want the uncommitted reason too", err)
			}
			// Nothing changed (R-CLN-4): no commit is lost.
			if got := gitT(t, dir, "rev-parse", "refs/heads/"+wt.Branch); got != tip {
				t.Fatalf("branch moved: got %s, want %s", got, tip)
			}
			if got := head(t, wt.Path); got != wtHead {
				t.Fatalf("worktree HEAD moved: got %s, want %s", got, wtHead)
			}
			// R-CLN-5: discard removes both anyway.
			out, err := r.Release(tctx(t), wt, true)
			if err != nil {
				t.Fatal(err)
			}
			if want := (Outcome{Worktree: OutcomeDiscarded, BranchTip: tip}); out != want {
				t.Fatalf("got %+v, want %+v", out, want)
			}
			if exists(wt.Path) || refExists(t, dir, "refs/heads/"+wt.Branch) {
				t.Fatal("discard left the worktree or its branch")
			}
			if list := gitT(t, dir, "worktree", "list", "--porcelain"); strings.Contains(list, wt.Path) {
				t.Fatalf("still registered: %s", list)
			}
		})
	}
}

// R-CLN-4, R-CLN-5: a worktree the node cannot reach is 409; discard
// releases and leaves it, and its branch, in place.
func TestReleaseUnreachable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		damage func(t *testing.T, wt Worktree) (check func())
	}{
		{"folder moved away", func(t *testing.T, wt Worktree) func() {
			away := wt.Path + ".away"
			if err := os.Rename(wt.Path, away); err != nil {
				t.Fatal(err)
			}
			return func() {
				if !exists(filepath.Join(away, "README")) {
					t.Fatal("the moved folder was touched")
				}
			}
		}},
		{"folder replaced by one that is not a worktree", func(t *testing.T, wt Worktree) func() {
			if err := os.Rename(wt.Path, wt.Path+".away"); err != nil {
				t.Fatal(err)
			}
			writeFile(t, wt.Path, "keep.txt", "not ours\n")
			return func() {
				if !exists(filepath.Join(wt.Path, "keep.txt")) {
					t.Fatal("a folder that is not the worktree was removed")
				}
			}
		}},
		{"folder replaced by a file", func(t *testing.T, wt Worktree) func() {
			if err := os.Rename(wt.Path, wt.Path+".away"); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Dir(wt.Path), filepath.Base(wt.Path), "a file\n")
			return func() {}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := newRepo(t)
			r := Repo{Dir: dir}
			wt := newRun(t, r)
			commitFiles(t, wt.Path, map[string]string{"a.txt": "a\n"})
			tip := gitT(t, dir, "rev-parse", "refs/heads/"+wt.Branch)
			check := tc.damage(t, wt)
			_, err := r.Release(tctx(t), wt, false)
			wantCode(t, err, ErrWorktreeUnreachable)
			out, err := r.Release(tctx(t), wt, true)
			if err != nil {
				t.Fatal(err)
			}
			if want := (Outcome{Worktree: OutcomeLeftInPlace, BranchTip: tip}); out != want {
				t.Fatalf("got %+v, want %+v", out, want)
			}
			if got := gitT(t, dir, "rev-parse", "refs/heads/"+wt.Branch); got != tip {
				t.Fatalf("branch: got %s, want %s kept", got, tip)
			}
			check()
		})
	}
}

// An inaccessible worktree folder (no permission) is unreachable. Root
// reads any folder, so this case needs an unprivileged user.
func TestReleaseInaccessible(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("running as root, which can enter a mode-000 folder; the moved and replaced folders of TestReleaseUnreachable cover unreachability")
	}
	dir := newRepo(t)
	r := Repo{Dir: dir}
	wt := newRun(t, r)
	if err := os.Chmod(wt.Path, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(wt.Path, 0o755) })
	_, err := r.Release(tctx(t), wt, false)
	wantCode(t, err, ErrWorktreeUnreachable)
	out, err := r.Release(tctx(t), wt, true)
	if err != nil || out.Worktree != OutcomeLeftInPlace {
		t.Fatalf("got %+v, %v, want left_in_place", out, err)
	}
}

// A release cut short after the worktree was removed is finished by the
// next call: the branch alone decides, by the same merge rule.
func TestReleaseFinishesACutShortRelease(t *testing.T) {
	t.Parallel()
	t.Run("merged", func(t *testing.T) {
		t.Parallel()
		dir := newRepo(t)
		r := Repo{Dir: dir}
		wt := newRun(t, r)
		commitFiles(t, wt.Path, map[string]string{"a.txt": "a\n"})
		gitT(t, dir, "merge", "-q", "--ff-only", wt.Branch)
		tip := gitT(t, dir, "rev-parse", "refs/heads/"+wt.Branch)
		gitT(t, dir, "worktree", "remove", wt.Path)
		out, err := r.Release(tctx(t), wt, false)
		if want := (Outcome{Worktree: OutcomeMergedRemoved, BranchTip: tip}); err != nil || out != want {
			t.Fatalf("got %+v, %v, want %+v", out, err, want)
		}
		if refExists(t, dir, "refs/heads/"+wt.Branch) {
			t.Fatal("branch kept")
		}
		// Nothing is left: only an explicit discard releases.
		_, err = r.Release(tctx(t), wt, false)
		wantCode(t, err, ErrBranchGone)
		out, err = r.Release(tctx(t), wt, true)
		if want := (Outcome{Worktree: OutcomeDiscarded}); err != nil || out != want {
			t.Fatalf("got %+v, %v, want %+v", out, err, want)
		}
	})
	t.Run("unmerged", func(t *testing.T) {
		t.Parallel()
		dir := newRepo(t)
		r := Repo{Dir: dir}
		wt := newRun(t, r)
		commitFiles(t, wt.Path, map[string]string{"a.txt": "a\n"})
		gitT(t, dir, "worktree", "remove", wt.Path)
		_, err := r.Release(tctx(t), wt, false)
		wantCode(t, err, ErrUnmergedWork)
		if !refExists(t, dir, "refs/heads/"+wt.Branch) {
			t.Fatal("a refused release deleted the branch")
		}
	})
}

// A worktree whose branch was deleted behind the node's back is 409
// branch_gone; discard removes the worktree.
func TestReleaseBranchGone(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	r := Repo{Dir: dir}
	wt := newRun(t, r)
	tip := gitT(t, dir, "rev-parse", "refs/heads/"+wt.Branch)
	gitT(t, dir, "update-ref", "-d", "refs/heads/"+wt.Branch, tip)
	_, err := r.Release(tctx(t), wt, false)
	wantCode(t, err, ErrBranchGone)
	out, err := r.Release(tctx(t), wt, true)
	if want := (Outcome{Worktree: OutcomeDiscarded}); err != nil || out != want {
		t.Fatalf("got %+v, %v, want %+v", out, err, want)
	}
	if exists(wt.Path) {
		t.Fatal("discard left the worktree")
	}
}

// Release runs git status in the worktree: a clean filter and an fsmonitor
// command the repository's config names never run (they would touch
// markers; the control with plain git proves they do).
func TestReleaseRunsNoFilterOrFsmonitor(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	r := Repo{Dir: dir}
	wt := newRun(t, r)
	commitFiles(t, wt.Path, map[string]string{".gitattributes": "* filter=evil\n", "f.txt": "content\n"})
	gitT(t, dir, "merge", "-q", "--ff-only", wt.Branch)
	marks := t.TempDir()
	filterMark, monitorMark := filepath.Join(marks, "filter"), filepath.Join(marks, "fsmonitor")
	monitor := filepath.Join(marks, "monitor.sh")
	writeFile(t, marks, "monitor.sh", fmt.Sprintf("#!/bin/sh\n: > %q\nexit 1\n", monitorMark))
	if err := os.Chmod(monitor, 0o755); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "config", "filter.evil.clean", fmt.Sprintf("sh -c ': > %s; cat'", filterMark))
	gitT(t, dir, "config", "filter.evil.required", "true")
	gitT(t, dir, "config", "core.fsmonitor", monitor)
	// Racy stat data makes status hash the file's content again, through
	// the clean filter.
	for _, d := range []string{wt.Path, dir} {
		if err := os.WriteFile(filepath.Join(d, "f.txt"), []byte("content\n"), 0o644); err != nil && d == wt.Path {
			t.Fatal(err)
		}
	}
	out, err := r.Release(tctx(t), wt, false)
	if err != nil || out.Worktree != OutcomeMergedRemoved {
		t.Fatalf("got %+v, %v, want merged_removed", out, err)
	}
	if exists(filterMark) || exists(monitorMark) {
		t.Fatalf("a repository command ran: filter=%v fsmonitor=%v", exists(filterMark), exists(monitorMark))
	}
	// Control: plain git status in the workspace runs them.
	writeFile(t, dir, "f.txt", "content\n")
	gitT(t, dir, "status", "--porcelain")
	if !exists(filterMark) && !exists(monitorMark) {
		t.Fatal("plain git ran neither command; the test proves nothing")
	}
}

// The sentinels match by code through wrapping.
func TestErrorIs(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("release: %w", refuse(ErrUnmergedWork, "x"))
	if !errors.Is(err, ErrUnmergedWork) || errors.Is(err, ErrDetachedHead) {
		t.Fatal("got the wrong match, want errors.Is by code")
	}
}
