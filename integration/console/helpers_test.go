package console

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// gitRun runs git in dir with a fixed identity and no user config.
func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// text is the trimmed text of the first element matching sel, "" if none.
func text(tab *browser.Tab, sel string) string {
	return browser.Eval[string](tab, fmt.Sprintf(`(document.querySelector(%s)?.textContent || '').trim()`, js(sel)))
}

// exists reports whether sel matches an element.
func exists(tab *browser.Tab, sel string) bool {
	return browser.Eval[bool](tab, fmt.Sprintf(`!!document.querySelector(%s)`, js(sel)))
}

// awaitText waits until an element matching sel holds sub.
func awaitText(tab *browser.Tab, what, sel, sub string) {
	tab.Await(what, fmt.Sprintf(`[...document.querySelectorAll(%s)].some(e => e.textContent.includes(%s))`, js(sel), js(sub)), wait)
}

// selectValue sets a select's value and tells the page.
func selectValue(tab *browser.Tab, sel, value string) {
	tab.Exec(fmt.Sprintf(`(() => { const s = document.querySelector(%s); s.value = %s; s.dispatchEvent(new Event('change')); })()`, js(sel), js(value)))
}

// open navigates the tab to a console path.
func (f *fixture) open(tab *browser.Tab, path string) {
	f.t.Helper()
	tab.Navigate(f.env.APIURL() + path)
}

// signInWith opens the sign-in page in a new tab and pastes token.
func (f *fixture) signInWith(token string) *browser.Tab {
	f.t.Helper()
	tab := browser.New(f.t)
	tab.Navigate(f.env.APIURL() + "/signin")
	tab.Type("#token", token+"\r")
	tab.Await("the sessions list", `!!document.querySelector('.list-head h1')`, wait)
	return tab
}

// input sends text to a run through the API (the field its driver takes).
func (f *fixture) input(r apitypes.Run, s string) {
	f.t.Helper()
	body := map[string]string{"text": s}
	if r.Driver == "claude" {
		body = map[string]string{"message": s}
	}
	f.admin.Must(http.StatusAccepted, http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/input", body, nil)
}

// stopRun stops the run on the tab's page: Stop, then the confirmation it
// asks for (R-CON-6).
func stopRun(tab *browser.Tab) {
	// The head is drawn again as the run's row changes: a click on a
	// button that was just replaced is clicked again.
	tab.Await("the stop confirmation", `(() => { if (document.querySelector('#stop-confirm')) return true; document.querySelector('#stop')?.click(); return false; })()`, wait)
	tab.Click("#stop-confirm")
}

// rowAction clicks a list row's action from its menu (pin is one tap).
func rowAction(tab *browser.Tab, row, what string) {
	tab.Click(row + " .row-menu summary")
	tab.Click(row + " .act-" + what)
}
