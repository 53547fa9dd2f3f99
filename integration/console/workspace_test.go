package console

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// launchFromDialog opens "New session", picks profile p in the default
// workspace, ticks the worktree box when asked, and submits.
func launchFromDialog(tab *browser.Tab, p apitypes.Profile, worktree bool) {
	tab.Click("#launch")
	tab.Await("the launch dialog's profiles", `!!document.querySelector('#l-profile option')`, wait)
	selectValue(tab, "#l-profile", p.Ref)
	if worktree {
		tab.Click("#l-worktree")
	}
	tab.Click("#l-submit")
}

// The two workspace gates, from the browser, then a worktree run's diff,
// its release refused for unmerged work, discarded, and deleted by an
// admin: a launch refused by the repository configuration links to the
// workspace, where a person approves exactly what is flagged and its hash
// (R-PCS-10..12); the setup command is edited there, a worktree launch is
// refused until it is approved (R-SETUP-5..9); the branch's diff shows
// committed work only (R-DIFF-1..8), the uncommitted file apart (R-DIFF-10); cleanup answers 409 and "discard the worktree"
// needs a confirmation (R-CLN-4..6); delete needs the release (R-DEL-1).
func TestWorkspaceGatesDiffCleanupDelete(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	repo := f.ws.Path
	gitRun(t, repo, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(repo, "README.md"), "one\ntwo\nthree\n")
	writeFile(t, filepath.Join(repo, ".codex", "config.toml"), "model = \"gpt\"\nnotify = [\"notify-send\", \"done\"]\n")
	gitRun(t, repo, "add", ".")
	gitRun(t, repo, "commit", "-q", "-m", "one")
	codex := f.profile("codex", nil)
	tab := f.signIn()

	// A launch refused by the repository configuration links to the
	// workspace page.
	launchFromDialog(tab, codex, false)
	tab.Await("the refusal's link", `!!document.querySelector('#l-error .gate-link')`, wait)
	awaitText(tab, "the refusal in words", "#l-error", ".codex/config.toml")
	tab.Click("#l-error .gate-link")
	tab.Await("the workspace page", `location.pathname === '/workspaces/`+f.ws.Ref+`' && !!document.querySelector('#pcfg-state')`, wait)
	var pc apitypes.ProjectConfig
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/workspaces/"+f.ws.Ref+"/project-config", nil, &pc)
	if got := text(tab, "#pcfg-state"); got != "not approved" {
		t.Fatalf("project config state %q", got)
	}
	awaitText(tab, "the flagged key grouped under Codex", `[data-tool=codex] [data-path=".codex/config.toml"]`, "notify-send")
	tab.Click("#pcfg-approve")
	tab.Await("the approval dialog", `!!document.querySelector('#approve-sha')`, wait)
	if got := text(tab, "#approve-sha"); got != pc.SHA256 {
		t.Fatalf("the dialog approves hash %q, want the flagged part's %q", got, pc.SHA256)
	}
	awaitText(tab, "the exact flagged text in the dialog", "#approve-text", "notify-send")
	tab.Click("#pcfg-approve-confirm")
	tab.Await("approved", `document.querySelector('#pcfg-state')?.textContent === 'approved'`, wait)

	// The setup command, edited here by an admin: a worktree launch waits
	// for its approval.
	tab.Click("#setup-edit")
	tab.Type("#setup-text", "npm ci")
	tab.Click("#setup-save")
	tab.Await("the stored command", `document.querySelector('#setup-command')?.textContent === 'npm ci' && document.querySelector('#setup-state')?.textContent === 'not approved'`, wait)
	var ws apitypes.Workspace
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/workspaces/"+f.ws.Ref, nil, &ws)
	if got := text(tab, "#setup-sha"); got != ws.SetupCommandSHA256 || *ws.SetupApproved {
		t.Fatalf("setup sha on the page %q, API %+v", got, ws)
	}

	f.open(tab, "/")
	tab.Await("the list", `!!document.querySelector('#launch')`, wait)
	launchFromDialog(tab, codex, true)
	tab.Await("the setup refusal's link", `document.querySelector('#l-error .gate-link')?.textContent === 'Review the setup command'`, wait)
	tab.Click("#l-error .gate-link")
	tab.Await("the setup approve button", `!!document.querySelector('#setup-approve')`, wait)
	tab.Click("#setup-approve")
	tab.Await("the exact text and hash", `document.querySelector('#approve-text')?.textContent === 'npm ci' && document.querySelector('#approve-sha')?.textContent === `+js(ws.SetupCommandSHA256), wait)
	tab.Click("#setup-approve-confirm")
	tab.Await("approved", `document.querySelector('#setup-state')?.textContent === 'approved'`, wait)

	f.open(tab, "/")
	tab.Await("the list", `!!document.querySelector('#launch')`, wait)
	launchFromDialog(tab, codex, true)
	tab.Await("the worktree run", `location.pathname.startsWith('/runs/') && !!document.querySelector('#run-state')`, wait)
	ref := strings.TrimPrefix(browser.Eval[string](tab, `location.pathname`), "/runs/")
	r := f.admin.AwaitRun(ref, wait, "live", func(r apitypes.Run) bool { return apitypes.Live(r.State) && r.WorktreeBranch != "" })

	// The agent's work: one commit changing README.md and adding new.txt,
	// and a file left uncommitted, which the committed diff does not show.
	writeFile(t, filepath.Join(r.WorkspacePath, "README.md"), "one\n2\nthree\nfour\n")
	writeFile(t, filepath.Join(r.WorkspacePath, "new.txt"), "fresh\n")
	gitRun(t, r.WorkspacePath, "add", "README.md", "new.txt")
	gitRun(t, r.WorkspacePath, "commit", "-q", "-m", "work")
	writeFile(t, filepath.Join(r.WorkspacePath, "scratch.txt"), "not committed\n")

	tab.Click("#tab-diff")
	tab.Await("the changed files", `document.querySelectorAll('#diff-files li.file').length === 2`, wait)
	awaitText(tab, "the committed work's heading", "#diff-committed", "Committed on the branch")
	if exists(tab, `#diff-files [data-path="scratch.txt"]`) {
		t.Fatal("the committed diff lists an uncommitted file")
	}
	// R-DIFF-10: the uncommitted file is shown apart, from the worktree.
	awaitText(tab, "the worktree named", "#diff-uncommitted-title", "in the worktree")
	awaitText(tab, "the uncommitted file", `#diff-uncommitted .wfile[data-path="scratch.txt"] tr.add`, "not committed")
	awaitText(tab, "new.txt added", `#diff-files [data-path="new.txt"]`, "added")
	tab.Click(`#diff-files [data-path="README.md"] button`)
	tab.Await("the unified diff", `[...document.querySelectorAll('table.diff.unified tr.del')].some(e => e.textContent.includes('two')) && [...document.querySelectorAll('table.diff.unified tr.add')].some(e => e.textContent.includes('four'))`, wait)
	selectValue(tab, "#diff-mode", "split")
	tab.Await("the side-by-side diff", `[...document.querySelectorAll('table.diff.split td.code.del')].some(e => e.textContent === 'two') && [...document.querySelectorAll('table.diff.split td.code.add')].some(e => e.textContent === '2')`, wait)

	// Release: refused for unmerged work, then discarded behind a
	// confirmation; the outcome is said in words.
	tab.Click("#tab-conversation")
	stopRun(tab)
	tab.Await("stopped", `document.querySelector('#run-state')?.textContent === 'stopped'`, wait)
	tab.Click("#cleanup")
	tab.Click("#cleanup-submit")
	tab.Await("the refusal", `!!document.querySelector('#cleanup-error') && !!document.querySelector('#discard-confirm')`, wait)
	if got := text(tab, "#cleanup-error"); !strings.Contains(got, "does not contain") {
		t.Fatalf("cleanup refusal says %q", got)
	}
	if browser.Eval[bool](tab, `!document.querySelector('#discard-submit').disabled`) {
		t.Fatal("discard is possible without the confirmation")
	}
	if got := f.admin.Run(ref); got.State != apitypes.StateStopped {
		t.Fatalf("a refused cleanup changed the run: %s", got.State)
	}
	tab.Click("#discard-sure")
	tab.Click("#discard-submit")
	awaitText(tab, "the outcome", "#cleanup-done", "discarded")
	tab.Exec(`document.querySelector('#cleanup-dialog').close()`)
	tab.Await("released", `document.querySelector('#run-state')?.textContent === 'released'`, wait)

	// Delete, by an admin, after the release.
	tab.Click("#delete")
	tab.Click("#delete-submit")
	tab.Await("back on the list", `location.pathname === '/'`, wait)
	if got := f.admin.Call(http.MethodGet, "/v1/m/sessions/runs/"+ref, nil); got.Status != http.StatusNotFound {
		t.Fatalf("the deleted run: %d", got.Status)
	}
	evs := f.admin.Call(http.MethodGet, fmt.Sprintf("/v1/audit?event=%s&run_ref=%s", apitypes.AuditRunDeleted, ref), nil)
	if !strings.Contains(string(evs.Body), ref) {
		t.Fatalf("no sessions.run.deleted entry: %s", evs.Body)
	}
}
