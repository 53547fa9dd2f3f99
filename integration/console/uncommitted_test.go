package console

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-DIFF-10: a live session's edits that are not committed (a changed
// file, a new one, a binary one) show in the Diff tab, git's own patch
// against the folder's HEAD, at 1280×800 and at 390×844 without widening
// the page; an edit made during a turn shows once the turn ends, without a
// reload; a patch over the workspace's read limit is a "too large" state
// that still lists the paths.
func TestDiffTabShowsUncommittedEdits(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	repo := f.ws.Path
	gitRun(t, repo, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(repo, "src", "app.go"), "package app\n\nconst Name = \"old\"\n")
	gitRun(t, repo, "add", ".")
	gitRun(t, repo, "commit", "-q", "-m", "one")
	r := f.launch(f.admin, f.profile("claude", nil), "edits")
	f.admin.AwaitRun(r.RunRef, wait, "live", func(r apitypes.Run) bool { return apitypes.Live(r.State) })

	writeFile(t, filepath.Join(repo, "src", "app.go"), "package app\n\nconst Name = \"new\"\n")
	writeFile(t, filepath.Join(repo, "docs", strings.Repeat("a-long-unbroken-folder-name-", 6), "plan.md"), "ship it\n")
	writeFile(t, filepath.Join(repo, "logo.png"), "\x89PNG\x00\x01\x02")
	var u apitypes.UncommittedDiff
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs/"+r.RunRef+"/diff/uncommitted", nil, &u)
	if len(u.Files) != 3 || u.TooLarge || !strings.Contains(u.Patch, "Binary files /dev/null and b/logo.png differ") {
		t.Fatalf("the API's uncommitted edits: %+v", u)
	}

	tab := f.signIn()
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 800}, {"phone", 390, 844}} {
		tab.Viewport(size.w, size.h)
		f.open(tab, "/runs/"+r.RunRef+"?tab=diff")
		tab.Await("the changed line", `[...document.querySelectorAll('#diff-uncommitted .wfile[data-path="src/app.go"] tr.del')].some(e => e.textContent.includes('"old"')) && [...document.querySelectorAll('#diff-uncommitted .wfile[data-path="src/app.go"] tr.add')].some(e => e.textContent.includes('"new"'))`, wait)
		tab.Await("the new file, as added", `[...document.querySelectorAll('#diff-uncommitted .wfile')].some(e => e.dataset.path.endsWith('/plan.md') && e.querySelector('.fstatus').textContent === 'added' && e.querySelector('tr.add')?.textContent.includes('ship it'))`, wait)
		awaitText(tab, "the binary file, named", `#diff-uncommitted [data-binary="logo.png"]`, "Binary file")
		awaitText(tab, "the workspace said", "#diff-uncommitted-title", "in the workspace")
		shoot(t, tab, "diff-uncommitted-"+size.name)
		if w := browser.Eval[int](tab, `document.documentElement.scrollWidth`); w > int(size.w) {
			t.Errorf("%s: the Diff tab is %d px wide, wider than the %d px viewport", size.name, w, size.w)
		}
	}

	// An edit made while the session runs shows once its turn ends.
	writeFile(t, filepath.Join(repo, "later.txt"), "written during the turn\n")
	f.input(r, "hello")
	tab.Await("the later edit, without a reload", `!!document.querySelector('#diff-uncommitted .wfile[data-path="later.txt"]')`, wait)

	// Over the read limit: too large, the paths still listed.
	writeFile(t, filepath.Join(repo, "big.txt"), strings.Repeat("a line that makes the patch long\n", 9000))
	f.open(tab, "/runs/"+r.RunRef+"?tab=diff")
	awaitText(tab, "the too-large state", "#uncommitted-too-large", "too large to show")
	tab.Await("the paths listed", `!!document.querySelector('#diff-uncommitted li[data-path="big.txt"]')`, wait)
}
