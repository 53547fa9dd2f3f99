package console

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/integration/realcli"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// People in the loop in the console (R-REQ-14, R-CON-1, R-CON-7): the list marks a run
// whose tool waits for a decision; the run view shows the request as a
// card with its command and the tool's own options; a click answers it,
// the tool goes on, and the card says who settled it. A request someone
// else answers settles on every viewer's card.
func TestRequestCards(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	r := f.launch(f.admin, f.profile("grok", nil), "asks first")
	f.admin.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.input(r, "ask rm -rf build")
	f.admin.AwaitRun(r.RunRef, wait, "a pending request", func(r apitypes.Run) bool { return r.PendingRequests == 1 })

	tab := f.signIn()
	tab.Await("the list's decision badge", fmt.Sprintf(`(document.querySelector('[data-ref=%s] .attn')||{}).textContent?.includes('decision')`, js(r.RunRef)), wait)
	f.open(tab, "/runs/"+r.RunRef)
	tab.Await("the request card", `!!document.querySelector('#requests .req-card.st-pending .req-cmd')`, wait)
	if got := text(tab, "#requests .req-card.st-pending .req-cmd"); got != "rm -rf build" {
		t.Fatalf("the card's command %q", got)
	}
	for _, opt := range []string{"proceed_once", "proceed_always", "cancel"} {
		if !exists(tab, fmt.Sprintf(`#requests [data-option=%s]`, js(opt))) {
			t.Fatalf("no %s button on the card", opt)
		}
	}
	tab.Click(`#requests [data-option="proceed_once"]`)
	// R-CON-7: the settled request leaves the pinned cards and stays where
	// it was asked in the conversation, naming who answered by name.
	tab.Await("the request settled in the conversation", `(document.querySelector('#timeline .req-inline.st-settled .req-settled')||{}).textContent?.startsWith('Allowed (Allow) by admin')`, wait)
	tab.Await("no pinned card", `!document.querySelector('#requests .req-card')`, wait)
	tab.Await("the tool went on", hasItem("assistant", "ran: rm -rf build (proceed_once)"), wait)
	tab.Await("no decision banner", `!document.querySelector('[data-kind=requests]')`, wait)
	// The Events tab says what was asked and how it was settled.
	tab.Click("#tab-events")
	tab.Await("the request's events in words", `(() => { const t = document.querySelector('#events')?.textContent || ''; return t.includes('execute: rm -rf build \u2014 asked') && t.includes('execute: rm -rf build \u2014 allowed by you'); })()`, wait)
	tab.Click("#tab-conversation")

	// Someone else answers the next one: the card settles here too, and
	// names them.
	f.input(r, "ask make deploy")
	tab.Await("the second card", `[...document.querySelectorAll('#requests .req-card.st-pending .req-cmd')].some(e => e.textContent === 'make deploy')`, wait)
	var list apitypes.RequestList
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs/"+r.RunRef+"/requests", nil, &list)
	pending := list.Items[0]
	_, opTok := f.principal("olga", store.RoleOperator)
	other := f.env.Client(opTok)
	var settled apitypes.RunRequest
	other.Must(http.StatusOK, http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/requests/"+pending.ID, apitypes.RequestAnswer{Decision: "deny"}, &settled)
	sel := fmt.Sprintf(`#timeline .req-inline[data-request=%s] .req-settled`, js(pending.ID))
	tab.Await("the other person's answer in the conversation", fmt.Sprintf(`(document.querySelector(%s)||{}).textContent?.includes(%s)`, js(sel), js("Denied")), wait)
	if got := text(tab, sel); !strings.Contains(got, "by olga") || settled.ByName != "olga" {
		t.Fatalf("the settled request says %q (by_name %q), want who answered by name (olga)", got, settled.ByName)
	}
	tab.Await("the tool told", hasItem("assistant", "denied: make deploy"), wait)
	// R-EVT-3: the Events tab says what was asked and who settled it, by name.
	tab.Click("#tab-events")
	awaitText(tab, "the other person's answer in the events", "#events", "execute: make deploy \u2014 denied by olga")
}

// R-CON-7 with the real Claude Code: while its Bash request waits, the
// tool call's line says "waiting for your decision"; the answer settles it
// in place, by the answerer's name, and the tool goes on.
func TestRealClaudeToolLineWaits(t *testing.T) {
	bin := realcli.BinDir(t, "claude")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	fake.Push(fakemodel.Tool("Bash", `{"command":"echo hi > probe.txt","description":"write a probe"}`), fakemodel.Text("It said hi."))
	f := setup(t, integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	p := f.profile("claude", map[string]string{"ANTHROPIC_BASE_URL": fake.URL(), "ANTHROPIC_API_KEY": "test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0"})
	r := f.launch(f.admin, p, "asks for Bash")
	tab := f.signIn()
	f.open(tab, "/runs/"+r.RunRef)
	tab.Await("input enabled", `!!document.querySelector('#input') && !document.querySelector('#input').disabled`, wait)
	tab.Type("#input", "say hi\r")
	tab.Await("the pinned card", `!!document.querySelector('#requests .req-card.st-pending .req-opt.d-allow')`, wait)
	tab.Await("the tool line waits", `[...document.querySelectorAll('#timeline .tool .tstatus')].some(e => e.textContent === 'waiting for your decision')`, wait)
	tab.Click(`#requests .req-card.st-pending .req-opt.d-allow`)
	tab.Await("settled in place, by name", `(document.querySelector('#timeline .req-inline.st-settled .req-settled')||{}).textContent?.includes('by admin')`, wait)
	tab.Await("the tool went on", hasItem("assistant", "It said hi."), wait)
	if browser.Eval[bool](tab, `[...document.querySelectorAll('#timeline .tool .tstatus')].some(e => e.textContent === 'waiting for your decision')`) {
		t.Fatal("a tool line still waits after the answer")
	}
}
