package worktree

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// R-DIFF-10: a worktree's uncommitted edits, staged, unstaged and
// untracked, come back as git status lists them and git diff prints them
// against the folder's HEAD; a binary file is named; a path outside the
// allowed sub-paths is neither listed nor diffed; the committed diff still
// does not show them (R-DIFF-4).
func TestWorkingEdits(t *testing.T) {
	t.Parallel()
	r, wt, _ := runWith(t, map[string]string{"src/app.go": "package app\nconst Name = \"old\"\n", "gone.txt": "x\n", "secret/key": "k\n"})
	writeFile(t, wt.Path, "src/app.go", "package app\nconst Name = \"new\"\n")
	writeFile(t, wt.Path, "notes/plan.md", "ship it\n")
	writeFile(t, wt.Path, "logo.png", "\x89PNG\x00\x01")
	writeFile(t, wt.Path, "secret/key", "changed\n")
	writeFile(t, wt.Path, "staged.txt", "staged\n")
	gitT(t, wt.Path, "add", "staged.txt")
	if err := os.Remove(filepath.Join(wt.Path, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	o := ReadOptions{AllowedSubpaths: []string{"src", "notes", "logo.png", "staged.txt", "gone.txt"}}
	w, err := r.Working(tctx(t), wt.Path, o)
	if err != nil {
		t.Fatal(err)
	}
	if w.Head != head(t, wt.Path) || w.TooLarge || w.Truncated || w.PatchLimit != MaxPatchBytes {
		t.Fatalf("got head %s too_large %v truncated %v limit %d", w.Head, w.TooLarge, w.Truncated, w.PatchLimit)
	}
	got := map[string]string{}
	for _, f := range w.Files {
		got[f.Path] = f.Status
	}
	want := map[string]string{"src/app.go": StatusModified, "notes/plan.md": StatusAdded, "logo.png": StatusAdded, "staged.txt": StatusAdded, "gone.txt": StatusDeleted}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	for _, s := range []string{"-const Name = \"old\"\n+const Name = \"new\"", "+++ b/notes/plan.md\n@@ -0,0 +1 @@\n+ship it", "Binary files /dev/null and b/logo.png differ", "+staged", "--- a/gone.txt\n+++ /dev/null"} {
		if !strings.Contains(w.Patch, s) {
			t.Errorf("patch lacks %q:\n%s", s, w.Patch)
		}
	}
	if strings.Contains(w.Patch, "secret") || strings.Contains(w.Patch, "changed") {
		t.Fatalf("patch shows a path outside the allowed sub-paths:\n%s", w.Patch)
	}
	d, err := r.Diff(tctx(t), wt, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range d.Files {
		if f.Path == "notes/plan.md" || f.Path == "staged.txt" {
			t.Fatalf("the committed diff lists uncommitted %s", f.Path)
		}
	}
}

// R-DIFF-10: a patch longer than the bound (max_read_bytes here) is not
// sent, too_large says so, and the files are still listed; a DLP deny and a
// folder that is gone refuse.
func TestWorkingBounds(t *testing.T) {
	t.Parallel()
	r, wt, _ := runWith(t, nil)
	writeFile(t, wt.Path, "big.txt", strings.Repeat("a long line of text\n", 500))
	w, err := r.Working(tctx(t), wt.Path, ReadOptions{MaxReadBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if !w.TooLarge || w.Patch != "" || w.PatchLimit != 4096 || len(w.Files) != 1 || w.Files[0].Path != "big.txt" {
		t.Fatalf("got too_large %v patch %d bytes limit %d files %v", w.TooLarge, len(w.Patch), w.PatchLimit, w.Files)
	}
	if _, err := r.Working(tctx(t), wt.Path, ReadOptions{DenyReads: true}); !errors.Is(err, ErrDLPRefused) {
		t.Fatalf("DLP deny: %v", err)
	}
	if _, err := r.Working(tctx(t), filepath.Join(wt.Path, "nope"), ReadOptions{}); !errors.Is(err, ErrFolderGone) {
		t.Fatalf("gone folder: %v", err)
	}
	clean, err := r.Working(tctx(t), r.Dir, ReadOptions{})
	if err != nil || len(clean.Files) != 0 || clean.Patch != "" {
		t.Fatalf("a clean workspace: %+v %v", clean, err)
	}
}
