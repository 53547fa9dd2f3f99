package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// js quotes s as a JavaScript string literal.
func js(s string) string { return strconv.Quote(s) }

func hasItem(kind, text string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('#timeline .item.%s')].some(e => e.textContent.includes(%s))`, kind, js(text))
}

// The sign-in link works once; a second use is refused in words; sign-out
// revokes the session server-side, so the old cookie is worth nothing.
func TestSigninLinkOnceAndSignout(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	link := f.link(f.adminID)
	tab := browser.New(t)
	tab.Navigate(link)
	tab.Await("the sessions list", `!!document.querySelector('.list-head h1')`, wait)
	if got := browser.Eval[string](tab, `location.href`); strings.Contains(got, "olvs_") {
		t.Fatalf("the link's secret stayed in the address bar: %s", got)
	}
	// The cookie is HttpOnly: the page's script cannot read it.
	if got := browser.Eval[string](tab, `document.cookie`); got != "" {
		t.Fatalf("document.cookie = %q, want nothing readable", got)
	}
	cookieTenants := `fetch('/v1/tenants').then(r => r.status)`
	if got := browser.Eval[int](tab, cookieTenants); got != http.StatusOK {
		t.Fatalf("GET /v1/tenants with the cookie: %d", got)
	}

	// The same link again, in a fresh browser profile's tab: refused.
	tab2 := browser.New(t)
	tab2.Exec(`void 0`)
	tab2.Navigate(link)
	tab2.Await("the used-link refusal", `(document.querySelector('.signin .banner.error')||{}).textContent?.includes('already used')`, wait)

	tab.Click("#signout")
	tab.Await("the sign-in page", `location.pathname === '/signin' && !!document.querySelector('#token')`, wait)
	if got := browser.Eval[int](tab, cookieTenants); got != http.StatusUnauthorized {
		t.Fatalf("GET /v1/tenants after sign-out: %d, want 401", got)
	}
}

// A viewer signs in with a pasted token and sees no write control: no
// launch, rename, archive, input, interrupt, stop or resume; pin stays
// (R-AUTH-2: a viewer pins for themselves).
func TestViewerSeesNoWriteButtons(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	r := f.launch(f.admin, f.profile("codex", nil), "shared run")
	_, viewerTok := f.principal("vera", store.RoleViewer)
	tab := browser.New(t)
	tab.Navigate(f.env.CheckedURL() + "/signin")
	tab.Type("#token", viewerTok+"\r")
	tab.Await("the list with the run", fmt.Sprintf(`!!document.querySelector('[data-ref=%s] .title')`, js(r.RunRef)), wait)
	for _, sel := range []string{"#launch", ".act-rename", ".act-archive"} {
		if browser.Eval[bool](tab, fmt.Sprintf(`!!document.querySelector(%s)`, js(sel))) {
			t.Errorf("a viewer sees %s", sel)
		}
	}
	if !browser.Eval[bool](tab, `!!document.querySelector('.act-pin')`) {
		t.Error("a viewer has no pin button")
	}
	tab.Click(fmt.Sprintf(`[data-ref=%s] .title`, js(r.RunRef)))
	tab.Await("the run view", `!!document.querySelector('#run-state')`, wait)
	for _, sel := range []string{"#input", "#stop", "#interrupt", "#resume"} {
		if browser.Eval[bool](tab, fmt.Sprintf(`!!document.querySelector(%s)`, js(sel))) {
			t.Errorf("a viewer sees %s on the run view", sel)
		}
	}
	// A 403 is a sentence naming the permission, not "error".
	got := browser.Eval[string](tab, fmt.Sprintf(`import('/assets/api.js').then(m => m.api('POST', '/v1/m/sessions/runs/%s/stop').then(() => 'ok', e => m.explain(e)))`, r.RunRef))
	if !strings.Contains(got, "sessions:run:write") {
		t.Fatalf("a viewer's stop explained as %q, want the missing permission named", got)
	}
}

// Launch from the dialog, see the streamed reply, send input with Enter,
// interrupt a turn, stop and see the observed exit code, resume.
func TestLaunchConverseInterruptStopResume(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	p := f.profile("claude", nil)
	tab := f.signIn()
	tab.Click("#launch")
	tab.Await("the launch dialog's profiles", `!!document.querySelector('#l-profile option')`, wait)
	tab.Exec(fmt.Sprintf(`document.querySelector('#l-profile').value = %s`, js(p.Ref)))
	tab.Type("#l-name", "from the browser")
	tab.Click("#l-submit")
	tab.Await("the run view, live", `location.pathname.startsWith('/runs/') && ['idle','running','starting'].includes(document.querySelector('#run-state')?.textContent)`, wait)
	ref := strings.TrimPrefix(browser.Eval[string](tab, `location.pathname`), "/runs/")
	if got := f.admin.Run(ref); got.Name != "from the browser" || got.ProviderProfileRef != p.Ref {
		t.Fatalf("launched run %+v", got)
	}
	tab.Await("input enabled", `!document.querySelector('#input').disabled`, wait)
	// R-TR-7: a native run's boundary, said plainly.
	tab.Await("the native boundary", `(document.querySelector('#run-isolation')||{}).textContent === "native: runs as the agent's user, can read the node's files"`, wait)

	tab.Type("#input", "hello\r")
	tab.Await("the reply", hasItem("assistant", "pong: hello"), wait)
	tab.Await("the turn's end", `!!document.querySelector('#timeline .turn-end.t-completed')`, wait)
	if v := browser.Eval[string](tab, `document.querySelector('#input').value`); v != "" {
		t.Fatalf("Enter did not send and clear the input: %q", v)
	}
	// stderr is its own pane, never in the conversation.
	tab.Type("#input", "stderr oops-on-stderr\r")
	tab.Await("stderr in its pane", `document.querySelector('#stderr').textContent.includes('oops-on-stderr')`, wait)
	if browser.Eval[bool](tab, hasItem("assistant", "oops-on-stderr")+` && false`) {
		t.Fatal("stderr in the conversation")
	}

	// A long turn, interrupted: the process stays (same generation).
	tab.Type("#input", "slow\r")
	f.admin.AwaitRun(ref, wait, "running", func(r apitypes.Run) bool { return r.State == apitypes.StateRunning })
	tab.Await("the interrupt button", `!!document.querySelector('#interrupt')`, wait)
	tab.Click("#interrupt")
	tab.Await("the interrupted turn", `!!document.querySelector('#timeline .turn-end.t-interrupted')`, wait)
	f.admin.AwaitRun(ref, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle && r.Generation == 1 })

	tab.Await("the stop button", `!!document.querySelector('#stop')`, wait)
	stopRun(tab)
	tab.Await("the observed exit code", `(document.querySelector('#run-exit')||{}).textContent?.includes('exit code 143')`, wait)
	tab.Await("the end banner", `(document.querySelector('[data-kind=end]')||{}).textContent?.includes('exit code 143')`, wait)

	tab.Click("#resume")
	tab.Await("generation 2, live", `document.querySelector('.run-head .meta').textContent.includes('generation 2') && !document.querySelector('#input').disabled`, wait)
	tab.Type("#input", "again\r")
	tab.Await("the reply of generation 2", hasItem("assistant", "pong: again"), wait)

	// The raw frames are a toggle away.
	tab.Click("#raw-toggle")
	tab.Await("raw frames", `[...document.querySelectorAll('#timeline .raw code')].some(e => e.textContent.includes('"type":"result"'))`, wait)
}

// Pin moves a run to the top, snooze hides it, done files it under Earlier,
// rename shows the new name, archive hides it; each without a reload. The
// console shares the person's marks with their olivares login (R-PIN-6).
// R-CON-11: the actions besides pin are in the row's menu.
func TestListMarks(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	p := f.profile("codex", nil)
	a := f.launch(f.admin, p, "alpha")
	b := f.launch(f.admin, p, "bravo")
	c := f.launch(f.admin, p, "charlie")
	d := f.launch(f.admin, p, "delta")
	tab := f.signIn()
	row := func(r apitypes.Run) string { return fmt.Sprintf(`[data-ref=%s]`, js(r.RunRef)) }
	tab.Await("four rows", `document.querySelectorAll('.row').length === 4`, wait)

	// a is the oldest: pinning it moves it to the top.
	tab.Click(row(a) + " .act-pin")
	tab.Await("alpha pinned first", fmt.Sprintf(`document.querySelector('#g-pinned .row')?.dataset.ref === %s && document.querySelector('.row').dataset.ref === %s`, js(a.RunRef), js(a.RunRef)), wait)
	if got := f.admin.Run(a.RunRef); !got.Pinned {
		t.Fatal("the console's pin is not the person's pin (R-PIN-6)")
	}

	rowAction(tab, row(b), "snooze")
	tab.Click(row(b) + " .snooze .preset")
	tab.Await("bravo hidden", fmt.Sprintf(`!document.querySelector(%s) && document.querySelector('.hidden-note')?.textContent.includes('1 snoozed')`, js(row(b))), wait)
	tab.Click("#show-snoozed")
	tab.Await("bravo shown again with the toggle", fmt.Sprintf(`!!document.querySelector(%s)`, js(row(b))), wait)
	tab.Click("#show-snoozed")

	rowAction(tab, row(c), "done")
	tab.Await("charlie under Earlier", fmt.Sprintf(`!!document.querySelector('#g-earlier ' + %s)`, js(row(c))), wait)

	rowAction(tab, row(d), "rename")
	tab.Exec(fmt.Sprintf(`document.querySelector(%s).value = ''`, js(row(d)+" input.rename")))
	tab.Type(row(d)+" input.rename", "delta renamed\r")
	tab.Await("the new name", fmt.Sprintf(`document.querySelector(%s)?.textContent === 'delta renamed'`, js(row(d)+" .title")), wait)
	if got := f.admin.Run(d.RunRef); got.Name != "delta renamed" {
		t.Fatalf("name %q after the rename", got.Name)
	}

	rowAction(tab, row(d), "archive")
	tab.Await("delta hidden", fmt.Sprintf(`!document.querySelector(%s) && document.querySelector('.hidden-note')?.textContent.includes('1 archived')`, js(row(d))), wait)

	// The live refresh: a run launched elsewhere appears without a reload.
	e := f.launch(f.admin, p, "echo")
	tab.Await("echo appears by itself", fmt.Sprintf(`!!document.querySelector(%s)`, js(row(e))), wait)
}

// A coordinator restart mid-stream: the console reconnects at last+1 and
// the streamed text has no gap and no duplicate (R-RC-1, R-RC-6, R-RC-8).
func TestRestartMidStream(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	p := f.profile("codex", nil)
	r := f.launch(f.admin, p, "ticks")
	f.admin.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	tab := f.signIn()
	tab.Navigate(f.env.CheckedURL() + "/runs/" + r.RunRef)
	tab.Await("the run view", `!!document.querySelector('#input') && !document.querySelector('#input').disabled`, wait)
	tab.Type("#input", "slow\r")
	tab.Await("ticks streaming", hasItem("assistant", "tick3 "), wait)
	f.env.RestartCoordinator()
	f.agent.AwaitConnected(wait)
	tab.Await("ticks after the restart", hasItem("assistant", "tick40 "), wait)
	f.admin.Must(http.StatusAccepted, http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/interrupt", nil, nil)
	tab.Await("the interrupted turn", `!!document.querySelector('#timeline .turn-end.t-interrupted')`, wait)
	text := browser.Eval[string](tab, `[...document.querySelectorAll('#timeline .item.assistant')].map(e => e.textContent).join('|')`)
	ticks := regexp.MustCompile(`tick(\d+) `).FindAllStringSubmatch(text, -1)
	if len(ticks) < 41 {
		t.Fatalf("%d ticks: %q", len(ticks), text)
	}
	for i, m := range ticks {
		if m[1] != strconv.Itoa(i) {
			t.Fatalf("tick %d is %s: a gap or a duplicate across the restart: %q", i, m[1], text)
		}
	}
}

// A page of another origin cannot act with the cookie: a form POST to
// sign-out or to stop, and a script's fetch with credentials, are all
// refused, and the session and the run are untouched.
func TestCrossOriginPostRefused(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	r := f.launch(f.admin, f.profile("codex", nil), "target")
	f.admin.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	tab := f.signIn()
	api := f.env.CheckedURL()
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><body>
<form id=out method=post action="%[1]s/v1/signout" target=f1 enctype="text/plain"><input name='{"a":"' value='"}'></form>
<form id=stop method=post action="%[1]s/v1/m/sessions/runs/%[2]s/stop" target=f2></form>
<iframe name=f1></iframe><iframe name=f2></iframe></body>`, api, r.RunRef)
	}))
	defer evil.Close()
	tab.Navigate(evil.URL)
	tab.Exec(`document.getElementById('out').submit(); document.getElementById('stop').submit()`)
	fetched := browser.Eval[string](tab, fmt.Sprintf(`Promise.all([
  fetch(%[1]s + '/v1/m/sessions/runs/%[2]s/stop', {method:'POST', credentials:'include', headers:{'X-Olivares-Tenant':'default'}}).then(r => 'stop:' + r.status, e => 'stop:blocked'),
  fetch(%[1]s + '/v1/signout', {method:'POST', credentials:'include', mode:'no-cors', body:'{}'}).then(r => 'signout:' + r.type, e => 'signout:blocked'),
]).then(a => a.join(' '))`, js(api), r.RunRef))
	t.Logf("cross-origin fetches: %s", fetched)
	// Both forms were answered (the frames loaded something) before we look.
	tab.Await("the forms' answers", `[...document.querySelectorAll('iframe')].every(f => { try { return f.contentWindow.location.href !== 'about:blank' } catch (e) { return true } })`, wait)

	tab.Navigate(api + "/")
	tab.Await("still signed in", `!!document.querySelector('.list-head h1')`, wait)
	if got := f.admin.Run(r.RunRef); got.State != apitypes.StateIdle {
		t.Fatalf("the cross-origin stop reached the run: state %q", got.State)
	}
}

// At 390 px (a phone) the list and the run view fit the width.
func TestPhoneWidth(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	r := f.launch(f.admin, f.profile("claude", nil), "a rather long session name that has to wrap on a phone screen")
	tab := f.signIn()
	tab.Viewport(390, 844)
	tab.Navigate(f.env.CheckedURL() + "/")
	tab.Await("the list", `document.querySelectorAll('.row').length === 1`, wait)
	if w := browser.Eval[int](tab, `document.documentElement.scrollWidth`); w > 390 {
		t.Fatalf("the list is %d px wide at 390", w)
	}
	tab.Navigate(f.env.CheckedURL() + "/runs/" + r.RunRef)
	tab.Await("the run view", `!!document.querySelector('#input')`, wait)
	if w := browser.Eval[int](tab, `document.documentElement.scrollWidth`); w > 390 {
		t.Fatalf("the run view is %d px wide at 390", w)
	}
	// Every other screen fits too.
	for _, c := range []struct{ path, ready string }{
		{"/runs/" + r.RunRef + "?tab=activity", "#context-meter"},
		{"/runs/" + r.RunRef + "?tab=messages", "#msg-info"},
		{"/runs/" + r.RunRef + "?tab=events", "#events .ev"},
		{"/workspaces", "#workspaces .card"},
		{"/workspaces/" + f.ws.Ref, "#pcfg-none"},
		{"/nodes", "#nodes .card"},
		{"/nodes/" + f.agent.ID, "#node-clis"},
		{"/profiles", "#profiles .card"},
		{"/audit", "#audit-rows"},
		{"/codex", "#codex-hosts"},
	} {
		tab.Navigate(f.env.APIURL() + c.path)
		tab.Await(c.path, fmt.Sprintf(`!!document.querySelector(%s)`, js(c.ready)), wait)
		if w := browser.Eval[int](tab, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("%s is %d px wide at 390", c.path, w)
		}
	}
}

// Issue 32 finding 14: the console names a run as the CLI does, by its
// run ref, in the list and on the run's page: two Codex runs started
// minutes apart have conversation ids with one prefix.
func TestRunsNamedByTheirRef(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	p := f.profile("codex", nil)
	a, b := f.launch(f.admin, p, ""), f.launch(f.admin, p, "")
	tab := f.signIn()
	for _, r := range []apitypes.Run{a, b} {
		tab.Await("the run named by its ref in the list", fmt.Sprintf(`(document.querySelector('[data-ref=%s] .title')?.textContent || '') === %s`, js(r.RunRef), js("Codex "+r.RunRef)), wait)
	}
	f.open(tab, "/runs/"+a.RunRef)
	tab.Await("the run's page named by its ref", fmt.Sprintf(`(document.querySelector('#run-name')?.textContent || '') === %s`, js("Codex "+a.RunRef)), wait)
}
