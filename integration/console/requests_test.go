package console

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// People in the loop in the console (R-REQ-14, R-CON-1): the list marks a run
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
	tab.Await("the card settled", `(document.querySelector('#requests .req-card.st-settled .req-settled')||{}).textContent?.startsWith('Allowed')`, wait)
	tab.Await("the tool went on", hasItem("assistant", "ran: rm -rf build (proceed_once)"), wait)
	tab.Await("no decision banner", `!document.querySelector('[data-kind=requests]')`, wait)

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
	tab.Await("the other person's answer on the card", fmt.Sprintf(`(document.querySelector('#req-%s .req-settled')||{}).textContent?.includes(%s)`, pending.ID, js("Denied")), wait)
	if got := text(tab, "#req-"+pending.ID+" .req-settled"); !strings.Contains(got, settled.By) {
		t.Fatalf("the settled card says %q, want who answered (%s)", got, settled.By)
	}
	tab.Await("the tool told", hasItem("assistant", "denied: make deploy"), wait)
}
