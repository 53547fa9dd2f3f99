package console

import (
	"os"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// TestScreenshot writes the README's pictures of the console, with
// OLIVARES_SCREENSHOT_DIR set (docs/): the list, and a run with a turn that
// used tools, at 1200×800 and on a 390×844 phone. Without it, it is
// skipped.
func TestScreenshot(t *testing.T) {
	dir := os.Getenv("OLIVARES_SCREENSHOT_DIR")
	if dir == "" {
		t.Skip("set OLIVARES_SCREENSHOT_DIR to write the README's screenshots")
	}
	f := setup(t, integration.ProcOptions{})
	claude := f.profile("claude", nil)
	codex := f.profile("codex", nil)
	f.launch(f.admin, codex, "refactor the tunnel")
	f.launch(f.admin, codex, "")
	r := f.launch(f.admin, claude, "review the test suite")
	tab := f.signIn()
	tab.Viewport(1200, 800)
	tab.Click(`[data-ref="` + r.RunRef + `"] .act-pin`)
	tab.Navigate(f.env.CheckedURL() + "/runs/" + r.RunRef)
	tab.Await("the run view", `!!document.querySelector('#input') && !document.querySelector('#input').disabled`, wait)
	tab.Type("#input", "hello, what does this repository do?\r")
	tab.Await("the reply", hasItem("assistant", "pong: hello"), wait)
	tab.Type("#input", "stderr a warning the tool printed\r")
	tab.Await("the second reply", `document.querySelectorAll('#timeline .turn-end').length === 2`, wait)
	tab.Type("#input", "slow\r")
	tab.Await("streaming", `!!document.querySelector('#interrupt')`, wait)
	tab.Click("#interrupt")
	tab.Await("the interrupted turn", `!!document.querySelector('#timeline .turn-end.t-interrupted')`, wait)
	tab.Exec(`document.querySelector('#stderr-box').open = true`)
	if err := os.WriteFile(dir+"/console.png", tab.Screenshot(), 0o644); err != nil {
		t.Fatal(err)
	}
	// The same run on a phone (R-CON-5): the composer pinned above the
	// bottom navigation.
	tab.Exec(`document.querySelector('#stderr-box').open = false`)
	tab.Viewport(390, 844)
	tab.Await("the phone layout", `getComputedStyle(document.querySelector('#bottom-nav')).display !== 'none'`, wait)
	if err := os.WriteFile(dir+"/console-phone.png", tab.Screenshot(), 0o644); err != nil {
		t.Fatal(err)
	}
	tab.Viewport(1200, 800)
	tab.Navigate(f.env.CheckedURL() + "/")
	tab.Await("the list", `document.querySelectorAll('.row').length === 3`, wait)
	if err := os.WriteFile(dir+"/console-list.png", tab.Screenshot(), 0o644); err != nil {
		t.Fatal(err)
	}

	// The activity of a turn that used tools, sub-agent open.
	tab.Navigate(f.env.APIURL() + "/runs/" + r.RunRef)
	tab.Await("the run view", `!!document.querySelector('#input') && !document.querySelector('#input').disabled`, wait)
	tab.Type("#input", "work\r")
	tab.Await("the worked turn", hasItem("assistant", "worked"), wait)
	tab.Click("#tab-activity")
	tab.Await("the activity", `!!document.querySelector('#context-meter .meter-bar')`, wait)
	tab.Click("#act-agents .agent-open")
	tab.Await("the sub-agent's turns", `!!document.querySelector('.agent-turns .turn')`, wait)
	if err := os.WriteFile(dir+"/console-activity.png", tab.Screenshot(), 0o644); err != nil {
		t.Fatal(err)
	}

	// A worktree run's diff, side by side.
	repo := f.ws.Path
	gitRun(t, repo, "init", "-q", "-b", "main")
	writeFile(t, repo+"/parser.go", "package config\n\n// Parse reads the file.\nfunc Parse(b []byte) (Config, error) {\n\tvar c Config\n\terr := toml.Unmarshal(b, &c)\n\treturn c, err\n}\n")
	gitRun(t, repo, "add", ".")
	gitRun(t, repo, "commit", "-q", "-m", "one")
	yes := true
	var wt apitypes.Run
	f.admin.Must(201, "POST", "/v1/m/sessions/runs", apitypes.LaunchRequest{ProviderProfileRef: codex.Ref, WorkspaceRef: f.ws.Ref, Worktree: &yes, Name: "strict config parsing"}, &wt)
	writeFile(t, wt.WorkspacePath+"/parser.go", "package config\n\n// Parse reads the file strictly: an unknown key is an error.\nfunc Parse(b []byte) (Config, error) {\n\tvar c Config\n\tmd, err := toml.Decode(string(b), &c)\n\tif err != nil {\n\t\treturn c, err\n\t}\n\tif u := md.Undecoded(); len(u) > 0 {\n\t\treturn c, fmt.Errorf(\"unknown key %q\", u[0])\n\t}\n\treturn c, nil\n}\n")
	writeFile(t, wt.WorkspacePath+"/parser_test.go", "package config\n\nfunc TestUnknownKey(t *testing.T) {}\n")
	gitRun(t, wt.WorkspacePath, "add", ".")
	gitRun(t, wt.WorkspacePath, "commit", "-q", "-m", "strict")
	tab.Navigate(f.env.APIURL() + "/runs/" + wt.RunRef + "?tab=diff")
	tab.Await("the files", `document.querySelectorAll('#diff-files li.file').length === 2`, wait)
	tab.Exec(`localStorage.setItem('olivares.diffmode', 'split')`)
	tab.Click(`#diff-files [data-path="parser.go"] button`)
	selectValue(tab, "#diff-mode", "split")
	tab.Await("the diff", `!!document.querySelector('table.diff.split')`, wait)
	if err := os.WriteFile(dir+"/console-diff.png", tab.Screenshot(), 0o644); err != nil {
		t.Fatal(err)
	}
}
