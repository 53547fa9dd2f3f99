package console

import (
	"os"
	"testing"

	"github.com/olivares-dev/olivares/integration"
)

// TestScreenshot writes the README's pictures of the console, with
// OLIVARES_SCREENSHOT_DIR set (docs/): the list, and a run with a turn that
// used tools. Without it, it is skipped.
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
	tab.Navigate(f.env.APIURL() + "/runs/" + r.RunRef)
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
	tab.Navigate(f.env.APIURL() + "/")
	tab.Await("the list", `document.querySelectorAll('.row').length === 3`, wait)
	if err := os.WriteFile(dir+"/console-list.png", tab.Screenshot(), 0o644); err != nil {
		t.Fatal(err)
	}
}
