package worktree

import (
	"os"
	"path/filepath"
	"testing"
)

// R-WT-3, R-WT-6: every 422 of a worktree launch, checked on real
// repositories before anything is created.
func TestCheckWorktreeable(t *testing.T) {
	t.Parallel()
	chmod := func(t testing.TB, p string, mode os.FileMode) {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(p, 0o755) })
	}
	cases := []struct {
		name     string
		setup    func(t testing.TB) string
		readOnly bool
		want     *Error
	}{
		{"repository root", newRepo, false, nil},
		{"registered read-only", newRepo, true, ErrReadOnly},
		{"plain folder", func(t testing.TB) string { return t.TempDir() }, false, ErrNotGitWorktree},
		{"missing folder", func(t testing.TB) string { return filepath.Join(t.TempDir(), "nope") }, false, ErrNotGitWorktree},
		{"bare repository", func(t testing.TB) string {
			dir := filepath.Join(t.TempDir(), "bare.git")
			gitT(t, "", "init", "-q", "--bare", dir)
			return dir
		}, false, ErrNotGitWorktree},
		{"inside .git", func(t testing.TB) string { return filepath.Join(newRepo(t), ".git") }, false, ErrNotGitWorktree},
		{"sub-folder", func(t testing.TB) string {
			dir := newRepo(t)
			writeFile(t, dir, "sub/f", "x")
			return filepath.Join(dir, "sub")
		}, false, ErrNotRepoRoot},
		{"no commit", func(t testing.TB) string {
			dir := filepath.Join(t.TempDir(), "empty")
			gitT(t, "", "init", "-q", dir)
			return dir
		}, false, ErrNoCommit},
		{"read-only folder", func(t testing.TB) string {
			dir := newRepo(t)
			chmod(t, dir, 0o555)
			return dir
		}, false, ErrReadOnly},
		{"read-only .git", func(t testing.TB) string {
			dir := newRepo(t)
			chmod(t, filepath.Join(dir, ".git"), 0o555)
			return dir
		}, false, ErrReadOnly},
		{"read-only refs/heads", func(t testing.TB) string {
			dir := newRepo(t)
			chmod(t, filepath.Join(dir, ".git", "refs", "heads"), 0o555)
			return dir
		}, false, ErrReadOnly},
		{"read-only objects", func(t testing.TB) string {
			dir := newRepo(t)
			chmod(t, filepath.Join(dir, ".git", "objects"), 0o555)
			return dir
		}, false, ErrReadOnly},
		{"filter smudge", func(t testing.TB) string {
			dir := newRepo(t)
			gitT(t, dir, "config", "filter.lfs.smudge", "git-lfs smudge -- %f")
			return dir
		}, false, ErrConfigFilter},
		{"filter process with a dotted driver name", func(t testing.TB) string {
			dir := newRepo(t)
			gitT(t, dir, "config", "filter.a.b.process", "x")
			return dir
		}, false, ErrConfigFilter},
		{"include.path", func(t testing.TB) string {
			dir := newRepo(t)
			gitT(t, dir, "config", "include.path", "/dev/null")
			return dir
		}, false, ErrConfigFilter},
		{"includeIf path", func(t testing.TB) string {
			dir := newRepo(t)
			gitT(t, dir, "config", "includeIf.gitdir:/nowhere/.path", "/dev/null")
			return dir
		}, false, ErrConfigFilter},
		{"filter in the worktree config", func(t testing.TB) string {
			dir := newRepo(t)
			gitT(t, dir, "config", "extensions.worktreeConfig", "true")
			gitT(t, dir, "config", "--worktree", "filter.x.clean", "cat")
			return dir
		}, false, ErrConfigFilter},
		{"unrelated config is fine", func(t testing.TB) string {
			dir := newRepo(t)
			gitT(t, dir, "config", "diff.x.textconv", "cat")
			gitT(t, dir, "config", "user.name", "someone")
			return dir
		}, false, nil},
		{"a linked worktree's root", func(t testing.TB) string {
			dir := newRepo(t)
			linked := filepath.Join(t.TempDir(), "linked")
			gitT(t, dir, "worktree", "add", "-q", "-b", "side", linked)
			return linked
		}, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := tc.setup(t)
			before, _ := gitRun(dir, "for-each-ref")
			err := Repo{Dir: dir}.CheckWorktreeable(tctx(t), tc.readOnly)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
			} else {
				wantCode(t, err, tc.want)
			}
			if after, _ := gitRun(dir, "for-each-ref"); after != before {
				t.Fatalf("refs changed: got %q, want %q", after, before)
			}
		})
	}
}

// The caller's own git environment never points this package elsewhere:
// GIT_DIR and a global config naming a filter are ignored (no global
// config influence, R-WT-6 "local config").
func TestCheckIgnoresCallerGitEnvironment(t *testing.T) {
	dir := newRepo(t)
	other := newRepo(t)
	global := filepath.Join(t.TempDir(), "gitconfig")
	writeFile(t, filepath.Dir(global), "gitconfig", "[filter \"lfs\"]\n\tsmudge = x\n[core]\n\thooksPath = /tmp\n")
	t.Setenv("GIT_DIR", filepath.Join(other, ".git"))
	t.Setenv("GIT_CONFIG_GLOBAL", global)
	t.Setenv("GIT_CONFIG_COUNT", "1")
	t.Setenv("GIT_CONFIG_KEY_0", "include.path")
	t.Setenv("GIT_CONFIG_VALUE_0", "/dev/null")
	if err := (Repo{Dir: dir}).CheckWorktreeable(tctx(t), false); err != nil {
		t.Fatalf("got %v, want nil", err)
	}
	if err := (Repo{Dir: filepath.Join(dir, "nope")}).CheckWorktreeable(tctx(t), false); err == nil {
		t.Fatal("got nil for a missing folder with GIT_DIR set, want not_git_worktree")
	}
}
