package worktree

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// runWith creates a run's worktree on a fresh repository and commits files
// there; it returns the repo, the worktree and the workspace's commit.
func runWith(t *testing.T, files map[string]string) (Repo, Worktree, string) {
	t.Helper()
	dir := newRepo(t)
	r := Repo{Dir: dir}
	ws := head(t, dir)
	wt := newRun(t, r)
	if files != nil {
		commitFiles(t, wt.Path, files)
	}
	return r, wt, ws
}

// R-DIFF-1, R-DIFF-3 (J05): a file the run committed is listed as added with
// full base and head ids, and diff/file gives original "" and its text.
func TestDiffAddedFile(t *testing.T) {
	t.Parallel()
	r, wt, ws := runWith(t, map[string]string{"new.txt": "fresh\n"})
	d, err := r.Diff(tctx(t), wt, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tip := head(t, wt.Path)
	if d.Branch != wt.Branch || d.Base != ws || d.Head != tip || !isFullHex(d.Base) || !isFullHex(d.Head) {
		t.Fatalf("got branch %s base %s head %s, want %s %s %s", d.Branch, d.Base, d.Head, wt.Branch, ws, tip)
	}
	if want := []FileChange{{Path: "new.txt", Status: StatusAdded}}; fmt.Sprint(d.Files) != fmt.Sprint(want) || d.Truncated {
		t.Fatalf("got %+v truncated=%v, want %+v", d.Files, d.Truncated, want)
	}
	f, err := r.DiffFile(tctx(t), wt, "new.txt", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (FileDiff{Path: "new.txt", Original: "", Modified: "fresh\n"}); f != want {
		t.Fatalf("got %+v, want %+v", f, want)
	}
}

// R-DIFF-8: each status, renames included.
func TestDiffStatuses(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("a line that makes the rename similar\n", 20)
	dir := newRepo(t)
	commitFiles(t, dir, map[string]string{"mod.txt": "1\n", "del.txt": "gone\n", "old/name.txt": body, "kind": "file\n"})
	r := Repo{Dir: dir}
	wt := newRun(t, r)
	writeFile(t, wt.Path, "mod.txt", "2\n")
	writeFile(t, wt.Path, "add.txt", "new\n")
	if err := os.Remove(filepath.Join(wt.Path, "del.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(wt.Path, "new"), 0o755); err != nil {
		t.Fatal(err)
	}
	gitT(t, wt.Path, "mv", "old/name.txt", "new/name.txt")
	if err := os.Remove(filepath.Join(wt.Path, "kind")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("mod.txt", filepath.Join(wt.Path, "kind")); err != nil {
		t.Fatal(err)
	}
	gitT(t, wt.Path, "add", "-A")
	gitT(t, wt.Path, "commit", "-q", "-m", "all kinds")
	d, err := r.Diff(tctx(t), wt, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]FileChange{
		"add.txt":      {Path: "add.txt", Status: StatusAdded},
		"del.txt":      {Path: "del.txt", Status: StatusDeleted},
		"kind":         {Path: "kind", Status: StatusTypeChanged},
		"mod.txt":      {Path: "mod.txt", Status: StatusModified},
		"new/name.txt": {Path: "new/name.txt", Status: StatusRenamed, OldPath: "old/name.txt"},
	}
	if len(d.Files) != len(want) {
		t.Fatalf("got %+v, want %+v", d.Files, want)
	}
	for _, f := range d.Files {
		if want[f.Path] != f {
			t.Errorf("got %+v, want %+v", f, want[f.Path])
		}
	}
	cases := []struct {
		path string
		want FileDiff
	}{
		{"mod.txt", FileDiff{Path: "mod.txt", Original: "1\n", Modified: "2\n"}},
		{"del.txt", FileDiff{Path: "del.txt", Original: "gone\n", Modified: ""}},
		{"new/name.txt", FileDiff{Path: "new/name.txt", Original: "", Modified: body}},
		{"kind", FileDiff{Path: "kind", Original: "file\n", Modified: "mod.txt"}}, // a symlink's text is its target
		{"README", FileDiff{Path: "README", Original: "hello\n", Modified: "hello\n"}},
	}
	for _, tc := range cases {
		got, err := r.DiffFile(tctx(t), wt, tc.path, ReadOptions{})
		if err != nil || got != tc.want {
			t.Errorf("DiffFile(%q): got %+v, %v, want %+v", tc.path, got, err, tc.want)
		}
	}
}

// R-DIFF-4: only committed objects: edits, staged changes and untracked
// files in the worktree never appear.
func TestDiffCommittedOnly(t *testing.T) {
	t.Parallel()
	r, wt, _ := runWith(t, map[string]string{"c.txt": "committed\n"})
	writeFile(t, wt.Path, "c.txt", "edited, not committed\n")
	writeFile(t, wt.Path, "untracked.txt", "x\n")
	writeFile(t, wt.Path, "staged.txt", "x\n")
	gitT(t, wt.Path, "add", "staged.txt")
	d, err := r.Diff(tctx(t), wt, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []FileChange{{Path: "c.txt", Status: StatusAdded}}; fmt.Sprint(d.Files) != fmt.Sprint(want) {
		t.Fatalf("got %+v, want %+v", d.Files, want)
	}
	f, err := r.DiffFile(tctx(t), wt, "c.txt", ReadOptions{})
	if err != nil || f.Modified != "committed\n" {
		t.Fatalf("got %+v, %v, want the committed text", f, err)
	}
	_, err = r.DiffFile(tctx(t), wt, "staged.txt", ReadOptions{})
	wantCode(t, err, ErrPathNotFound)
}

// R-DIFF-1: base is the merge base; the workspace's own later commits are
// not the run's changes.
func TestDiffBaseIsMergeBase(t *testing.T) {
	t.Parallel()
	r, wt, fork := runWith(t, map[string]string{"run.txt": "run\n"})
	commitFiles(t, r.Dir, map[string]string{"workspace.txt": "ws\n"})
	d, err := r.Diff(tctx(t), wt, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Base != fork {
		t.Fatalf("base: got %s, want the fork point %s", d.Base, fork)
	}
	if want := []FileChange{{Path: "run.txt", Status: StatusAdded}}; fmt.Sprint(d.Files) != fmt.Sprint(want) {
		t.Fatalf("got %+v, want %+v", d.Files, want)
	}
}

// R-DIFF-2: at most 200 paths, and truncated says whether more exist.
func TestDiffTruncation(t *testing.T) {
	t.Parallel()
	many := func(n int, prefix string) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("%s%03d.txt", prefix, i)] = fmt.Sprint(i)
		}
		return m
	}
	cases := []struct {
		name      string
		files     map[string]string
		opts      ReadOptions
		wantN     int
		wantTrunc bool
	}{
		{"250 files", many(250, "f"), ReadOptions{}, 200, true},
		{"exactly 200", many(200, "f"), ReadOptions{}, 200, false},
		{"201", many(201, "f"), ReadOptions{}, 200, true},
		{"hidden paths do not count", merge(many(150, "src/f"), many(150, "secret/f")), ReadOptions{AllowedSubpaths: []string{"src"}}, 150, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, wt, _ := runWith(t, tc.files)
			d, err := r.Diff(tctx(t), wt, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Files) != tc.wantN || d.Truncated != tc.wantTrunc {
				t.Fatalf("got %d files truncated=%v, want %d truncated=%v", len(d.Files), d.Truncated, tc.wantN, tc.wantTrunc)
			}
		})
	}
}

func merge(a, b map[string]string) map[string]string {
	for k, v := range b {
		a[k] = v
	}
	return a
}

// R-DIFF-5: a path outside the allowed sub-paths is not listed and reading
// it is 404; a rename across the boundary shows only its visible half.
func TestDiffAllowedSubpaths(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("similar content for rename detection\n", 20)
	dir := newRepo(t)
	commitFiles(t, dir, map[string]string{"secret/moved-out.txt": body + "1", "src/moved-in.txt": body + "2"})
	r := Repo{Dir: dir}
	wt := newRun(t, r)
	commitFiles(t, wt.Path, map[string]string{"src/a.go": "package a\n", "secret/key": "hunter2\n", "srcx/b": "not src\n"})
	gitT(t, wt.Path, "mv", "secret/moved-out.txt", "src/moved-out.txt")
	gitT(t, wt.Path, "mv", "src/moved-in.txt", "secret/moved-in.txt")
	gitT(t, wt.Path, "commit", "-q", "-m", "moves")
	o := ReadOptions{AllowedSubpaths: []string{"./src/"}}
	d, err := r.Diff(tctx(t), wt, o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]FileChange{
		"src/a.go":          {Path: "src/a.go", Status: StatusAdded},
		"src/moved-out.txt": {Path: "src/moved-out.txt", Status: StatusAdded},
		"src/moved-in.txt":  {Path: "src/moved-in.txt", Status: StatusDeleted},
	}
	if len(d.Files) != len(want) {
		t.Fatalf("got %+v, want %+v", d.Files, want)
	}
	for _, f := range d.Files {
		if want[f.Path] != f {
			t.Errorf("got %+v, want %+v", f, want[f.Path])
		}
	}
	for _, p := range []string{"secret/key", "srcx/b", "secret/moved-in.txt"} {
		_, err := r.DiffFile(tctx(t), wt, p, o)
		wantCode(t, err, ErrPathNotFound)
	}
	if f, err := r.DiffFile(tctx(t), wt, "src/a.go", o); err != nil || f.Modified != "package a\n" {
		t.Fatalf("got %+v, %v, want src/a.go's text", f, err)
	}
	// An entry that climbs out of the tree allows nothing.
	d, err = r.Diff(tctx(t), wt, ReadOptions{AllowedSubpaths: []string{"../"}})
	if err != nil || len(d.Files) != 0 {
		t.Fatalf("got %+v, %v, want no file", d.Files, err)
	}
}

// R-DIFF-5 (J05): a DLP posture that refuses is 403 on both routes.
func TestDiffDLPDeny(t *testing.T) {
	t.Parallel()
	r, wt, _ := runWith(t, map[string]string{"a.txt": "a\n"})
	_, err := r.Diff(tctx(t), wt, ReadOptions{DenyReads: true})
	wantCode(t, err, ErrDLPRefused)
	_, err = r.DiffFile(tctx(t), wt, "a.txt", ReadOptions{DenyReads: true})
	wantCode(t, err, ErrDLPRefused)
}

// R-DIFF-6: a branch that vanished, or has no common history with the
// workspace, is 409 on both routes.
func TestDiffConflicts(t *testing.T) {
	t.Parallel()
	t.Run("branch gone", func(t *testing.T) {
		t.Parallel()
		r, wt, _ := runWith(t, map[string]string{"a.txt": "a\n"})
		gitT(t, r.Dir, "worktree", "remove", "--force", wt.Path)
		gitT(t, r.Dir, "branch", "-D", wt.Branch)
		_, err := r.Diff(tctx(t), wt, ReadOptions{})
		wantCode(t, err, ErrBranchGone)
		_, err = r.DiffFile(tctx(t), wt, "a.txt", ReadOptions{})
		wantCode(t, err, ErrBranchGone)
	})
	t.Run("no common history", func(t *testing.T) {
		t.Parallel()
		r, wt, _ := runWith(t, map[string]string{"a.txt": "a\n"})
		gitT(t, r.Dir, "checkout", "-q", "--orphan", "unrelated")
		commitFiles(t, r.Dir, map[string]string{"other": "x\n"})
		_, err := r.Diff(tctx(t), wt, ReadOptions{})
		wantCode(t, err, ErrNoCommonHistory)
		_, err = r.DiffFile(tctx(t), wt, "a.txt", ReadOptions{})
		wantCode(t, err, ErrNoCommonHistory)
	})
}

// R-DIFF-5, R-DIFF-7, R-DIFF-8: the 16 MiB refusal on the blob size, the
// cap of min(max_read_bytes, 64 KiB) with its flags, binary content, and a
// cut inside a UTF-8 character.
func TestDiffFileLimits(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("0123456789abcdef", (17<<20)/16) // 17 MiB (J05)
	long := strings.Repeat("x", 100<<10)
	euro := strings.Repeat("€", 30000) // 3 bytes each: 64 KiB falls inside one
	r, wt, _ := runWith(t, map[string]string{"big.txt": big, "long.txt": long, "bin.dat": "abc\x00def", "latin1.txt": "caf\xe9\n", "euro.txt": euro})

	_, err := r.DiffFile(tctx(t), wt, "big.txt", ReadOptions{MaxReadBytes: 10})
	wantCode(t, err, ErrFileTooLarge)

	cases := []struct {
		name, path string
		max        int64
		wantLen    int
		wantTrunc  bool
	}{
		{"default cap (1 MiB max_read_bytes)", "long.txt", 0, 64 << 10, true},
		{"max_read_bytes above 64 KiB", "long.txt", 1 << 30, 64 << 10, true},
		{"max_read_bytes below 64 KiB", "long.txt", 10, 10, true},
		{"fits", "long.txt", 200 << 10, 64 << 10, true},
		{"a character cut at the cap is dropped", "euro.txt", 0, (64 << 10) / 3 * 3, true},
	}
	for _, tc := range cases {
		f, err := r.DiffFile(tctx(t), wt, tc.path, ReadOptions{MaxReadBytes: tc.max})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(f.Modified) != tc.wantLen || f.ModifiedTruncated != tc.wantTrunc || f.Original != "" || f.OriginalTruncated || f.Binary {
			t.Fatalf("%s: got len %d truncated=%v binary=%v, want len %d truncated=%v", tc.name, len(f.Modified), f.ModifiedTruncated, f.Binary, tc.wantLen, tc.wantTrunc)
		}
		if !utf8.ValidString(f.Modified) {
			t.Fatalf("%s: got invalid UTF-8", tc.name)
		}
	}
	for _, p := range []string{"bin.dat", "latin1.txt"} {
		f, err := r.DiffFile(tctx(t), wt, p, ReadOptions{})
		if want := (FileDiff{Path: p, Binary: true}); err != nil || f != want {
			t.Fatalf("%s: got %+v, %v, want %+v", p, f, err, want)
		}
	}
	small, err := r.DiffFile(tctx(t), wt, "README", ReadOptions{MaxReadBytes: 100})
	if err != nil || small.Modified != "hello\n" || small.ModifiedTruncated {
		t.Fatalf("got %+v, %v, want README untruncated", small, err)
	}
}

// R-DIFF-5, Q-42: paths that are not clean and relative, that go through a
// symlink or out of the tree, or that name no file, are 404; no path is 400.
func TestDiffFilePaths(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	r := Repo{Dir: dir}
	wt := newRun(t, r)
	writeFile(t, wt.Path, "src/a.txt", "a\n")
	writeFile(t, wt.Path, "*.txt", "literal star\n")
	for name, target := range map[string]string{"etc": "/etc", "up": "../../..", "src/esc": "../../outside", "src/in": "a.txt", "abs": "/etc/passwd"} {
		if err := os.Symlink(target, filepath.Join(wt.Path, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	gitT(t, wt.Path, "add", "-A")
	gitT(t, wt.Path, "commit", "-q", "-m", "paths")
	for _, p := range []string{
		"../ws/README", "/etc/passwd", "src/../README", "./README", "src//a.txt", "src/", ".",
		"etc/passwd", "up/etc/passwd", "src/esc", "abs", "src/esc/x", // through or to a symlink out of the tree
		"src", "nope.txt", "a.txt", "s*", "src\x00a", strings.Repeat("a/", 3000),
	} {
		_, err := r.DiffFile(tctx(t), wt, p, ReadOptions{})
		wantCode(t, err, ErrPathNotFound)
	}
	_, err := r.DiffFile(tctx(t), wt, "", ReadOptions{})
	wantCode(t, err, ErrPathRequired)
	// A symlink inside the tree is shown as its target text, and a literal
	// star is a file name, not a pattern.
	for p, want := range map[string]string{"src/in": "a.txt", "*.txt": "literal star\n"} {
		f, err := r.DiffFile(tctx(t), wt, p, ReadOptions{})
		if err != nil || f.Modified != want {
			t.Fatalf("%s: got %+v, %v, want %q", p, f, err, want)
		}
	}
}

// entryAt tells a path through a symlink from a missing one (both are 404
// to the caller, for different reasons).
func TestEntryAtSymlinks(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	writeFile(t, dir, "d/f", "x\n")
	for name, target := range map[string]string{"etc": "/etc", "d/link": "f"} {
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	c := commitFiles(t, dir, nil)
	r := Repo{Dir: dir}
	cases := []struct {
		path    string
		wantErr error
		wantNil bool
		mode    string
	}{
		{"etc/passwd", errThroughSymlink, true, ""},
		{"d/link/x", errThroughSymlink, true, ""},
		{"README/x", nil, true, ""}, // through a regular file: absent
		{"nope/x", nil, true, ""},
		{"d", nil, true, ""}, // a folder is not a file
		{"d/f", nil, false, "100644"},
		{"d/link", nil, false, "120000"},
		{"etc", nil, false, "120000"},
	}
	for _, tc := range cases {
		e, err := r.entryAt(tctx(t), c, tc.path)
		if err != tc.wantErr || (e == nil) != tc.wantNil || (e != nil && e.mode != tc.mode) {
			t.Errorf("entryAt(%q): got %+v, %v, want nil=%v mode %q err %v", tc.path, e, err, tc.wantNil, tc.mode, tc.wantErr)
		}
	}
}

// A workspace that is no longer a repository, or a Repo without an
// absolute folder, never runs git in the agent's own folder: the branch is
// gone with it (409).
func TestDiffWorkspaceGone(t *testing.T) {
	t.Parallel()
	r, wt, _ := runWith(t, map[string]string{"a.txt": "a\n"})
	for _, dir := range []string{"", "relative", filepath.Join(t.TempDir(), "nothing")} {
		_, err := Repo{Dir: dir}.Diff(tctx(t), wt, ReadOptions{})
		wantCode(t, err, ErrBranchGone)
		_, err = Repo{Dir: dir}.DiffFile(tctx(t), wt, "a.txt", ReadOptions{})
		wantCode(t, err, ErrBranchGone)
	}
	if _, err := r.Diff(tctx(t), wt, ReadOptions{}); err != nil {
		t.Fatal(err)
	}
}

// R-DIFF-9 (issue 21, finding 5): what the agent left uncommitted in the
// worktree is counted beside the committed diff, never read into it; only
// allowed paths count, and a worktree folder that is gone counts nothing.
func TestDiffCountsUncommitted(t *testing.T) {
	t.Parallel()
	r, wt, _ := runWith(t, map[string]string{"c.txt": "committed\n"})
	d, err := r.Diff(tctx(t), wt, ReadOptions{})
	if err != nil || d.Uncommitted == nil || *d.Uncommitted != 0 {
		t.Fatalf("clean worktree: uncommitted %v, %v, want 0", d.Uncommitted, err)
	}
	writeFile(t, wt.Path, "c.txt", "edited, not committed\n")
	writeFile(t, wt.Path, "untracked.txt", "x\n")
	writeFile(t, wt.Path, "staged.txt", "x\n")
	writeFile(t, wt.Path, "src/new.go", "package src\n")
	gitT(t, wt.Path, "add", "staged.txt")
	for _, tt := range []struct {
		allowed []string
		want    int
	}{{nil, 4}, {[]string{"src"}, 1}, {[]string{"other"}, 0}} {
		d, err := r.Diff(tctx(t), wt, ReadOptions{AllowedSubpaths: tt.allowed})
		if err != nil {
			t.Fatal(err)
		}
		if d.Uncommitted == nil || *d.Uncommitted != tt.want {
			t.Errorf("allowed %q: uncommitted %v, want %d", tt.allowed, d.Uncommitted, tt.want)
		}
		if len(d.Files) > 1 {
			t.Errorf("allowed %q: the uncommitted paths are listed: %+v", tt.allowed, d.Files)
		}
	}
	gitT(t, r.Dir, "worktree", "remove", "--force", wt.Path)
	d, err = r.Diff(tctx(t), wt, ReadOptions{})
	if err != nil || d.Uncommitted != nil {
		t.Fatalf("worktree folder gone: uncommitted %v, %v, want none", d.Uncommitted, err)
	}
}
