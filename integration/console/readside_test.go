package console

import (
	"fmt"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The read side of a Claude Code run (the fakecli peer writes Claude
// Code's own transcript, sub-agent files included): the Activity tab with
// the context meter, a sub-agent's turns on click, todos and files, and a
// live refresh when a turn ends, with no click (R-ACT-1, R-ACT-7, R-AGT-1);
// the Messages tab's search, role filter, paging with next, one message in
// full, a clipped message marked, and the whole conversation copied by
// following next with text=1 (R-MSG-3..9); then attention: the list and
// the title say the run waits for input (R-CON-1), and a background tab
// gets one notification per finished turn, never one per frame (R-CON-2).
// The activity is read again on the turn's end, with no click (R-CON-3).
func TestActivityMessagesAttention(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	p := f.profile("claude", nil)
	r := f.launch(f.admin, p, "read side")
	s := f.admin.Attach(r.RunRef, "from=0")
	defer s.Close()
	f.input(r, "work")
	s.UntilOutput(`"result":"worked"`, wait)

	tab := f.signIn()
	f.open(tab, "/runs/"+r.RunRef+"?tab=activity")
	tab.Await("the context meter as a percentage", `document.querySelector('#context-meter .meter-text')?.textContent === '3.4 % of the context window'`, wait)
	awaitText(tab, "the tokens and the window", "#context-meter", "34,000 of 1,000,000 tokens")
	awaitText(tab, "the todo in progress, by its active form", "#act-todos .td-in_progress", "writing notes")
	awaitText(tab, "the created file", "#act-files", "notes.txt")
	awaitText(tab, "the command", "#act-tasks", "go test ./...")
	awaitText(tab, "the skill", "#act-skills", "review")
	tab.Click("#act-agents .agent-open")
	awaitText(tab, "the sub-agent's turns", "#act-agents .agent-turns", "main_test.go and api_test.go")

	// A turn ends elsewhere: the panel reads the activity again by itself,
	// and this time the window report is ambiguous (R-ACT-9).
	f.input(r, "work ambiguous")
	tab.Await("the meter without a window, refreshed on the turn's end", `document.querySelector('#context-meter .meter-text')?.textContent === '34,000 tokens, window unknown'`, wait)

	// Messages: 24 more turns, and one message over 64 KiB.
	for i := range 24 {
		f.input(r, fmt.Sprintf("note %d", i))
	}
	big := "big " + strings.Repeat("x", 70<<10)
	f.input(r, big)
	s.UntilOutput("pong: big xxx", wait)
	tab.Click("#tab-messages")
	tab.Await("my messages", `document.querySelector('#msg-info')?.textContent.startsWith('27 of 27 messages of yours')`, wait)
	tab.Click(`#msg-list .msg:last-child .msg-head`)
	awaitText(tab, "the clipped message marked when read in full", `#msg-list .msg:last-child .msg-full .clipped`, "longer than 64 KiB")
	selectValue(tab, "#msg-role", "all")
	tab.Await("the first page of all messages, and More", `document.querySelectorAll('#msg-list .msg').length === 50 && !document.querySelector('#msg-more').hidden`, wait)
	tab.Click("#msg-more")
	tab.Await("the next page appended", `document.querySelectorAll('#msg-list .msg').length > 50 && document.querySelector('#msg-more').hidden`, wait)
	tab.Exec(`document.querySelector('#msg-q').value = 'NOTE 1'`)
	tab.Click("#msg-search")
	tab.Await("the search, case-insensitive", `(() => { const m = [...document.querySelectorAll('#msg-list .msg .first')].map(e => e.textContent); return m.length === 22 && m.every(x => /note 1/.test(x)); })()`, wait)
	tab.Click(`#msg-list .msg.r-user .msg-head`)
	awaitText(tab, "one message in full", "#msg-list .msg-full .text", "note 1")
	tab.Exec(`document.querySelector('#msg-q').value = ''`)
	tab.Click("#msg-search")
	selectValue(tab, "#msg-order", "desc")
	tab.Await("newest first", `document.querySelector('#msg-list .msg .first')?.textContent.startsWith('pong: big')`, wait)
	selectValue(tab, "#msg-order", "asc")
	tab.Await("oldest first", `document.querySelector('#msg-list .msg .first')?.textContent === 'work'`, wait)
	var page struct{ Total int }
	f.admin.Must(200, "GET", "/v1/m/sessions/runs/"+r.RunRef+"/messages?role=all", nil, &page)
	if page.Total <= 50 {
		t.Fatalf("%d messages: too few for two pages", page.Total)
	}
	tab.Click("#msg-copy")
	tab.Await("the whole conversation read page by page", fmt.Sprintf(`document.querySelector('#copy-note')?.textContent.startsWith('%d messages, 2 clipped')`, page.Total), wait)
	all := browser.Eval[string](tab, `document.querySelector('#copy-text').value`)
	for _, want := range []string{"## You", "work ambiguous", "pong: note 23", "[...]"} {
		if !strings.Contains(all, want) {
			t.Fatalf("the copied conversation lacks %q", want)
		}
	}
	tab.Exec(`document.querySelector('#copy-dialog').close()`)

	// Attention and notifications, in a tab the test declares to be in the
	// background (headless Chromium never is).
	f.open(tab, "/")
	row := fmt.Sprintf(`[data-ref=%s]`, js(r.RunRef))
	tab.Await("the run waits for input", fmt.Sprintf(`document.querySelector(%s)?.querySelector('.attn.at-needs_input') !== null`, js(row)), wait)
	tab.Await("the title counts it", `document.title.startsWith('(1) ') && document.querySelector('#attn-count')?.textContent === '1'`, wait)
	tab.Exec(`(() => {
  window.__notes = [];
  window.Notification = class { constructor(title) { window.__notes.push(title); } static get permission() { return 'granted'; } };
  window.olivaresAttention.background = () => true;
  document.querySelector('#notify').open = true;
})()`)
	tab.Click("#notify-needs_input")
	obs := func() int { return browser.Eval[int](tab, `window.olivaresAttention.observed`) }
	notes := func() int { return browser.Eval[int](tab, `window.__notes.length`) }
	// settle reads the runs twice more, as a reset of the change stream
	// would (R-CON-8: nothing is read on a timer while it is open).
	settle := func() {
		base := obs()
		tab.Exec(`window.olivaresAttention.poll().then(() => window.olivaresAttention.poll())`)
		tab.Await("two more refreshes", fmt.Sprintf(`window.olivaresAttention.observed > %d`, base+1), wait)
	}
	settle()
	n0 := notes()
	s.Close()
	s = f.admin.Attach(r.RunRef, fmt.Sprintf("from=%d", f.admin.Run(r.RunRef).RingLast+1))
	f.input(r, "hello again")
	s.UntilOutput("pong: hello again", wait)
	tab.Await("one notification for the finished turn", fmt.Sprintf(`window.__notes.length === %d && window.__notes[%d].includes('waiting for your input')`, n0+1, n0), wait)
	// A long turn of many frames, interrupted: one more notification, for
	// the one change, however many frames and refreshes went by.
	f.input(r, "slow")
	f.admin.AwaitRun(r.RunRef, wait, "running", func(r apitypes.Run) bool { return r.State == apitypes.StateRunning })
	settle()
	if n := notes(); n != n0+1 {
		t.Fatalf("%d notifications while the turn runs, want %d", n, n0+1)
	}
	f.admin.Must(202, "POST", "/v1/m/sessions/runs/"+r.RunRef+"/interrupt", nil, nil)
	tab.Await("the second notification", fmt.Sprintf(`window.__notes.length === %d`, n0+2), wait)
	settle()
	if n := notes(); n != n0+2 {
		t.Fatalf("%d notifications, want %d: one per change, not per refresh", n, n0+2)
	}
}
