package console

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// screens are the console's pages a person reaches, with what each shows
// once loaded.
func screens(f *fixture, run, wt apitypes.Run) [][2]string {
	enc := func(s string) string { return strings.ReplaceAll(s, "/", "%2F") }
	return [][2]string{
		{"/", `document.querySelectorAll('.row').length >= 1`},
		{"/runs/" + run.RunRef, hasItem("assistant", "pong: hello")},
		{"/runs/" + run.RunRef + "?tab=activity", `!!document.querySelector('#panel-activity .activity, #panel-activity .banner')`},
		{"/runs/" + run.RunRef + "?tab=messages", `!!document.querySelector('#panel-messages .msg, #panel-messages .banner')`},
		{"/runs/" + run.RunRef + "?tab=events", `!!document.querySelector('#panel-events .ev')`},
		{"/runs/" + wt.RunRef, `!!document.querySelector('#run-state')`},
		{"/runs/" + wt.RunRef + "?tab=diff", `!!document.querySelector('#diff-files li.file')`},
		{"/workspaces", `!!document.querySelector('.card')`},
		{"/workspaces/" + enc(f.ws.Ref), `!!document.querySelector('h1')`},
		{"/nodes", `!!document.querySelector('.card, .row')`},
		{"/nodes/" + enc(f.agent.ID), `!!document.querySelector('h1')`},
		{"/codex", `!!document.querySelector('h1')`},
		{"/profiles", `!!document.querySelector('.card, .row')`},
		{"/usage", `!!document.querySelector('h1')`},
		{"/audit", `!!document.querySelector('table.audit tr')`},
		{"/webhooks", `!!document.querySelector('h1')`},
	}
}

// R-CON-5: at 390 px no screen is wider than the phone, a long path
// included (a worktree's, a node's, a workspace's).
func TestNoScreenWiderThanAPhone(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	claude := f.profile("claude", nil)
	r := f.launch(f.admin, claude, "a session with a rather long name that goes on and on for a while")
	f.admin.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.input(r, "hello with /a/very/long/path/that/never/breaks/anywhere/at/all/inside/the/workspace/of/this/node.go")
	f.admin.AwaitRun(r.RunRef, wait, "the turn", func(x apitypes.Run) bool { return x.State == apitypes.StateIdle && x.Rev > r.Rev })
	repo := f.ws.Path
	gitRun(t, repo, "init", "-q", "-b", "main")
	writeFile(t, repo+"/a.go", "package a\n")
	gitRun(t, repo, "add", ".")
	gitRun(t, repo, "commit", "-q", "-m", "one")
	yes := true
	var wt apitypes.Run
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/runs", apitypes.LaunchRequest{ProviderProfileRef: claude.Ref, WorkspaceRef: f.ws.Ref, Worktree: &yes, Name: "worktree"}, &wt)
	deep := wt.WorkspacePath + "/internal/averyveryverylongdirectoryname/anotherdirectorywithalongname/file_with_a_long_name_test.go"
	writeFile(t, deep, "package x\n")
	gitRun(t, wt.WorkspacePath, "add", ".")
	gitRun(t, wt.WorkspacePath, "commit", "-q", "-m", "deep")

	tab := f.signIn()
	tab.Viewport(390, 844)
	// The phone's navigation is a bar at the bottom; its menu holds the
	// other screens and says who is signed in.
	if !browser.Eval[bool](tab, inViewport("#bottom-nav")) || browser.Eval[bool](tab, `getComputedStyle(document.querySelector('.top .nav')).display !== 'none'`) {
		t.Fatal("on a phone the navigation is not a bar at the bottom of the screen")
	}
	tab.Click("#nav-more summary")
	tab.Await("the menu's screens", inViewport(`#nav-more a[href="/webhooks"]`), wait)
	if got := text(tab, "#nav-me"); !strings.HasPrefix(got, "admin") {
		t.Fatalf("the phone's menu names %q as signed in, want admin", got)
	}
	for _, s := range screens(f, r, wt) {
		f.open(tab, s[0])
		tab.Await(s[0], s[1], wait)
		if w := browser.Eval[int](tab, `document.documentElement.scrollWidth`); w > 390 {
			wide := browser.Eval[string](tab, `[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > 391).slice(-3).map(e => e.tagName + '.' + e.className + ' ' + (e.textContent || '').slice(0, 60)).join(' | ')`)
			t.Errorf("%s is %d px wide at 390 px: %s", s[0], w, wide)
		}
	}
}

// consoleErrors are the error lines of the tab's console log: a failed
// request, a console.error, an exception.
func consoleErrors(tab *browser.Tab) []string {
	var out []string
	for _, l := range tab.Log() {
		if strings.Contains(l, "log.error:") || strings.Contains(l, "console.error:") || strings.Contains(l, "exception:") {
			out = append(out, l)
		}
	}
	return out
}

// R-CON-8: no screen logs an error in the browser's console, the sign-in
// page without single sign-on included, on a desktop and on a phone.
func TestNoConsoleErrorOnAnyScreen(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	claude := f.profile("claude", nil)
	r := f.launch(f.admin, claude, "quiet")
	f.admin.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.input(r, "hello")
	f.admin.AwaitRun(r.RunRef, wait, "the turn", func(x apitypes.Run) bool { return x.State == apitypes.StateIdle && x.Rev > r.Rev })

	out := browser.NewProfile(t)
	out.Navigate(f.env.CheckedURL() + "/signin")
	out.Await("the sign-in page", `!!document.querySelector('#token')`, wait)
	out.Await("the single sign-on answer", `performance.getEntriesByType('resource').some(e => e.name.endsWith('/v1/sso') && e.responseEnd > 0)`, wait)
	if exists(out, "#sso") {
		t.Error("a single sign-on button without single sign-on")
	}
	if errs := consoleErrors(out); len(errs) > 0 {
		t.Errorf("the sign-in page logged errors:\n%s", strings.Join(errs, "\n"))
	}

	tab := f.signIn()
	for _, size := range [][2]int64{{1280, 800}, {390, 844}} {
		tab.Viewport(size[0], size[1])
		for _, s := range screens(f, r, apitypes.Run{}) {
			if strings.HasPrefix(s[0], "/runs/") && !strings.HasPrefix(s[0], "/runs/"+r.RunRef) || s[0] == "/runs/"+r.RunRef+"?tab=diff" {
				continue // the worktree run is the phone test's
			}
			f.open(tab, s[0])
			tab.Await(s[0], s[1], wait)
		}
	}
	if errs := consoleErrors(tab); len(errs) > 0 {
		t.Errorf("the screens logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// R-CON-8: the list makes no request while nothing changes, here for
// 10 s: the change stream brings what changes.
func TestListQuietWhileNothingChanges(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	f.launch(f.admin, f.profile("claude", nil), "still")
	tab := f.signIn()
	tab.Await("the row and the stream", `document.querySelectorAll('.row').length === 1 && document.querySelector('#runs')?.dataset.stream === 'open'`, wait)
	tab.Exec(`window.quietFrom = performance.now()`)
	tab.Await("10 s of the list on screen", `performance.now() - window.quietFrom > 10000`, wait)
	reqs := browser.Eval[[]string](tab, `performance.getEntriesByType('resource').filter(e => e.startTime > window.quietFrom).map(e => e.name)`)
	if len(reqs) > 0 {
		t.Fatalf("the list made %d requests while nothing changed: %v", len(reqs), reqs)
	}
}

// R-CON-8: the attention count is one number on every page: a run page
// opened on its own agrees with the list, and both follow a change
// within a second.
func TestAttentionCountAgrees(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	p := f.profile("claude", nil)
	r1 := f.launch(f.admin, p, "one")
	r2 := f.launch(f.admin, p, "two")
	for _, r := range []apitypes.Run{r1, r2} {
		f.admin.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	}
	list := f.signIn()
	page := browser.New(t) // the same person, another tab
	page.Navigate(f.env.CheckedURL() + "/runs/" + r1.RunRef)
	page.Await("the run page", `!!document.querySelector('#run-state')`, wait)
	count := `(document.querySelector('#attn-count:not([hidden])')||{}).textContent || '0'`
	list.Await("the list counts both idle runs", count+` === '2'`, wait)
	page.Await("the run page agrees within a second", count+` === '2'`, time.Second)

	f.input(r2, "slow") // a turn runs: r2 no longer waits for input
	list.Await("the list's count after the change", count+` === '1'`, wait)
	page.Await("the run page's count within a second", count+` === '1'`, time.Second)
}

// R-CON-10: a theme switch beside the system's default, kept in this
// browser across a reload.
func TestThemeSwitch(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	tab := f.signIn()
	bg := `getComputedStyle(document.body).backgroundColor`
	light := browser.Eval[string](tab, bg) // headless Chromium's system theme is light
	selectValue(tab, "#theme", "dark")
	tab.Await("the dark theme", bg+` === 'rgb(21, 24, 22)'`, wait)
	tab.Navigate(browser.Eval[string](tab, `location.href`))
	tab.Await("the dark theme after a reload", `!!document.querySelector('.list-head') && `+bg+` === 'rgb(21, 24, 22)' && document.querySelector('#theme').value === 'dark'`, wait)
	selectValue(tab, "#theme", "")
	tab.Await("the system's theme again", bg+` === `+js(light), wait)
}
