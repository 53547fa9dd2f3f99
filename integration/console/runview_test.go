package console

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// userItem is a condition: the conversation shows a user item whose sender
// line is who and whose text holds text.
func userItem(who, text string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('#timeline .item.user')].some(e => e.querySelector('.who')?.textContent === %s && e.querySelector('.text')?.textContent.includes(%s))`, js(who), js(text))
}

// R-ATT-11: what one person sends is part of the conversation for every
// viewer, in order, with who sent it, and stays there after a reload; the
// sender sees "You", the other viewer the sender's name.
func TestEveryViewerSeesEveryInput(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	r := f.launch(f.admin, f.profile("claude", nil), "two viewers")
	beaID, _ := f.principal("bea", store.RoleOperator)
	runURL := f.env.CheckedURL() + "/runs/" + r.RunRef

	mine := f.signIn()
	mine.Navigate(runURL)
	mine.Await("input enabled", `!!document.querySelector('#input') && !document.querySelector('#input').disabled`, wait)
	other := browser.NewProfile(t) // a second device: the phone
	other.Navigate(f.link(beaID))
	other.Await("the sessions list", `!!document.querySelector('.list-head h1')`, wait)
	other.Navigate(runURL)
	other.Await("the run view", `!!document.querySelector('#timeline')`, wait)

	mine.Type("#input", "first from admin\r")
	mine.Await("the reply", hasItem("assistant", "pong: first from admin"), wait)
	other.Await("admin's input, by name, on the other viewer", userItem("admin", "first from admin"), wait)
	other.Type("#input", "then bea\r")
	mine.Await("bea's input, by name", userItem("bea", "then bea"), wait)
	other.Await("bea's own input as hers", userItem("You", "then bea"), wait)
	mine.Await("admin's own input as his", userItem("You", "first from admin"), wait)

	order := `[...document.querySelectorAll('#timeline .item.user .text, #timeline .item.assistant .text')].map(e => e.textContent).join('|')`
	want := "first from admin|pong: first from admin|then bea|pong: then bea"
	other.Await("both replies", hasItem("assistant", "pong: then bea"), wait)
	if got := browser.Eval[string](other, order); got != want {
		t.Fatalf("conversation order on the other viewer: got %q, want %q", got, want)
	}
	other.Navigate(runURL)
	other.Await("the conversation after a reload", hasItem("assistant", "pong: then bea"), wait)
	if got := browser.Eval[string](other, order); got != want {
		t.Fatalf("conversation order after a reload: got %q, want %q", got, want)
	}
}

// R-ATT-12: Claude Code's text is painted as the tool streams it, before
// the turn ends, and the page says the tool is working until it does.
func TestTextStreamsBeforeTheTurnEnds(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	r := f.launch(f.admin, f.profile("claude", nil), "slow")
	tab := f.signIn()
	tab.Navigate(f.env.CheckedURL() + "/runs/" + r.RunRef)
	tab.Await("input enabled", `!!document.querySelector('#input') && !document.querySelector('#input').disabled`, wait)
	// An empty conversation says what to do.
	tab.Await("the empty conversation's hint", `!document.querySelector('#empty-hint').hidden && document.querySelector('#empty-hint').textContent.includes('write the first message')`, wait)
	if browser.Eval[bool](tab, `!document.querySelector('#working').hidden`) {
		t.Fatal("the working indicator shows on an idle run")
	}
	// The fake streams " tick<n>" every 100 ms for seconds, then ends
	// the turn: the first words are on screen while it still runs.
	tab.Type("#input", "slow\r")
	tab.Await("the first streamed words", hasItem("assistant", "tick1"), wait)
	if !browser.Eval[bool](tab, `document.querySelector('#empty-hint').hidden`) {
		t.Fatal("the empty conversation's hint stays over the conversation")
	}
	if browser.Eval[bool](tab, `!!document.querySelector('#timeline .turn-end')`) {
		t.Fatal("the streamed words came only with the turn's end")
	}
	if got := browser.Eval[string](tab, `document.querySelector('#working').hidden ? '' : document.querySelector('#working').textContent`); got != "Claude Code is working…" {
		t.Fatalf("working indicator while the turn runs: %q", got)
	}
	tab.Click("#interrupt")
	tab.Await("the turn's end", `!!document.querySelector('#timeline .turn-end')`, wait)
	tab.Await("the working indicator gone", `document.querySelector('#working').hidden`, wait)
}

// inViewport is a condition: the element sel is wholly inside the
// viewport (the composer pinned to the bottom, R-CON-5).
func inViewport(sel string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e) return false; const r = e.getBoundingClientRect();
  return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight + 0.5 && r.left >= 0 && r.right <= innerWidth + 0.5; })()`, js(sel))
}

// shoot writes the tab's screenshot as name into OLIVARES_SHOTS_DIR when
// it is set (to look at a layout), and does nothing otherwise.
func shoot(t *testing.T, tab *browser.Tab, name string) {
	if dir := os.Getenv("OLIVARES_SHOTS_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name+".png"), tab.Screenshot(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// R-CON-5: the conversation is the page and the composer is pinned to its
// bottom: in the viewport on a desktop and on a phone, with a request
// pending (its card pinned above the composer) and a long conversation;
// and on the phone no run page is wider than the screen.
func TestComposerAlwaysInView(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	r := f.launch(f.admin, f.profile("grok", nil), "asks first")
	f.admin.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	for i := range 12 {
		f.input(r, fmt.Sprintf("message %d with a long/path/that/does/not/break/anywhere/at/all/in/the/world/%d.go", i, i))
		f.admin.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	}
	f.input(r, "ask rm -rf build")
	f.admin.AwaitRun(r.RunRef, wait, "a pending request", func(r apitypes.Run) bool { return r.PendingRequests == 1 })
	tab := f.signIn()
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 800}, {"phone", 390, 844}} {
		tab.Viewport(size.w, size.h)
		f.open(tab, "/runs/"+r.RunRef)
		tab.Await("the request card", `!!document.querySelector('#requests .req-card.st-pending')`, wait)
		tab.Await("the conversation", hasItem("assistant", "message 11"), wait)
		shoot(t, tab, "run-"+size.name)
		for _, sel := range []string{"#input", "#send", "#requests .req-card.st-pending .req-actions"} {
			if !browser.Eval[bool](tab, inViewport(sel)) {
				t.Errorf("%s: %s is not in the viewport", size.name, sel)
			}
		}
		if w := browser.Eval[int](tab, `document.documentElement.scrollWidth`); w > int(size.w) {
			t.Errorf("%s: the page is %d px wide, wider than the %d px viewport", size.name, w, size.w)
		}
	}
}

// R-CON-6: Interrupt shows only while a turn runs; Stop asks first, and a
// stop leaves one banner that says how the process ended, in words.
func TestButtonsFollowTheRunsState(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	r := f.launch(f.admin, f.profile("claude", nil), "buttons")
	tab := f.signIn()
	f.open(tab, "/runs/"+r.RunRef)
	tab.Await("idle, input enabled", `document.querySelector('#run-state')?.textContent === 'idle' && !document.querySelector('#input').disabled`, wait)
	if exists(tab, "#interrupt") {
		t.Fatal("Interrupt shows on an idle run")
	}
	tab.Type("#input", "slow\r")
	tab.Await("Interrupt while the turn runs", `!!document.querySelector('#interrupt')`, wait)
	tab.Click("#interrupt")
	tab.Await("the interrupted turn", `!!document.querySelector('#timeline .turn-end.t-interrupted')`, wait)
	tab.Await("no Interrupt once idle", `document.querySelector('#run-state')?.textContent === 'idle' && !document.querySelector('#interrupt')`, wait)

	tab.Click("#stop")
	tab.Await("the confirmation", `!!document.querySelector('#stop-dialog[open]')`, wait)
	tab.Click("#stop-dialog .buttons .ghost")
	tab.Await("the dialog closed", `!document.querySelector('#stop-dialog')`, wait)
	if got := f.admin.Run(r.RunRef); got.State != apitypes.StateIdle {
		t.Fatalf("Cancel stopped the run: state %s", got.State)
	}
	stopRun(tab)
	tab.Await("stopped", `document.querySelector('#run-state')?.textContent === 'stopped'`, wait)
	f.admin.AwaitRun(r.RunRef, wait, "stopped", func(x apitypes.Run) bool { return x.State == apitypes.StateStopped })
	tab.Await("the end in words", `(document.querySelector('[data-kind=end]')||{}).textContent?.includes('ended on SIGTERM (exit code 143)')`, wait)
	if n := browser.Eval[int](tab, `[...document.querySelectorAll('.banners .banner')].filter(e => /143|ended/.test(e.textContent)).length`); n != 1 {
		t.Fatalf("%d banners say the run ended, want one: %s", n, text(tab, ".banners"))
	}
}

// R-CON-9: an opened tool call reads as what it is: a command and its
// output, a file read as its path, an edit as a diff, todos as a list,
// with the raw arguments a click away. The calls of a recorded real
// Claude Code run, and the tools it did not call, given as it gives them.
func TestToolCallsRenderAsWhatTheyAre(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(framesDir, "claude-real-tools.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	env := integration.NewEnv(t)
	tab := browser.New(t)
	tab.Navigate(env.CheckedURL() + "/signin")
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	got := browser.Eval[map[string]string](tab, fmt.Sprintf(`Promise.all([import('/assets/normalize.js'), import('/assets/tools.js')]).then(([n, tl]) => {
  const norm = n.normalizer('claude');
  for (const o of [%s]) norm.feed(o);
  const calls = norm.items.filter((it) => it.kind === 'tool_call');
  calls.push({ kind: 'tool_call', name: 'Edit', input: JSON.stringify({ file_path: '/w/a.go', old_string: 'x := 1', new_string: 'x := 2' }), result: 'ok', status: 'done' });
  calls.push({ kind: 'tool_call', name: 'TodoWrite', input: JSON.stringify({ todos: [{ content: 'write the test', status: 'completed' }, { content: 'fix it', status: 'in_progress' }] }), result: '', status: 'done' });
  const out = {};
  for (const c of calls) {
    const d = document.createElement('div');
    d.append(...tl.toolBody(c).flat(3).filter(Boolean));
    document.body.append(d);
    out[c.name + (out[c.name] !== undefined ? '2' : '')] = [...d.querySelectorAll('.tcmd, .tout, .tpath, .dl, .todos li, .traw summary')].map((e) => e.className + ':' + e.textContent).join('|');
    d.remove();
  }
  return out;
})`, strings.Join(lines, ",")))
	want := map[string][]string{
		"Bash":      {"tcmd:$ printf 'one\\ntwo\\n'", "tout:one\ntwo", "Raw arguments"},
		"Read":      {"tpath:/nonexistent/olivares-fixture.txt", "Raw arguments"},
		"Edit":      {"tpath:/w/a.go", "dl del:- x := 1", "dl add:+ x := 2"},
		"TodoWrite": {"td-completed:✓ write the test", "td-in_progress:▸ fix it"},
	}
	for name, subs := range want {
		for _, sub := range subs {
			if !strings.Contains(got[name], sub) {
				t.Errorf("%s renders %q, want %q in it", name, got[name], sub)
			}
		}
	}
}

// R-CON-7: a request's card shows its files and diff relative to the
// run's directory, the diff's added and removed lines marked.
func TestRequestCardDiff(t *testing.T) {
	env := integration.NewEnv(t)
	tab := browser.New(t)
	tab.Navigate(env.CheckedURL() + "/signin")
	got := browser.Eval[string](tab, `import('/assets/requests.js').then((m) => {
  const el = document.createElement('div');
  document.body.append(el);
  const c = m.requestCards(el, 'run_0123456789abcdef', { canWrite: true, base: () => '/srv/w/' });
  c.put({ id: 'req_0123456789abcdef', kind: 'file_change', state: 'pending', title: 'Edit b.go', options: [],
    detail: { cwd: '/srv/w', files: ['/srv/w/pkg/b.go'], diff: '--- /srv/w/pkg/b.go\n+++ /srv/w/pkg/b.go\n@@ -1 +1 @@\n-x := 1\n+x := 2' } });
  return [...el.querySelectorAll('.req-files, .req-diff .dl.add, .req-diff .dl.del, .req-diff .dl')].map((e) => e.className + ':' + e.textContent).join('|');
})`)
	for _, want := range []string{"req-files:pkg/b.go", "dl add:+x := 2", "dl del:-x := 1", "dl:--- pkg/b.go"} {
		if !strings.Contains(got, want) {
			t.Errorf("the card shows %q, want %q in it", got, want)
		}
	}
}
