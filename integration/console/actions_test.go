package console

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// hookReceiver is a chat bot's endpoint on 127.0.0.1: it keeps each
// delivery's body.
type hookReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []apitypes.WebhookPayload
}

func newHookReceiver(t *testing.T) *hookReceiver {
	rc := &hookReceiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p apitypes.WebhookPayload
		json.NewDecoder(r.Body).Decode(&p)
		rc.mu.Lock()
		rc.got = append(rc.got, p)
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// decision is the newest needs_decision delivery with actions, if any.
func (rc *hookReceiver) decision() (apitypes.WebhookPayload, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for i := len(rc.got) - 1; i >= 0; i-- {
		if p := rc.got[i]; p.Attention == apitypes.AttentionNeedsDecision && p.Request != nil {
			return p, true
		}
	}
	return apitypes.WebhookPayload{}, false
}

// post is a chat bot pressing a button: POST on the action URL.
func post(t *testing.T, env *integration.Env, url string) (int, string) {
	t.Helper()
	resp, err := env.HTTPClient().Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// R-NOTIF-11: a webhook naming act_as carries, with a needs_decision
// delivery, the request and one signed URL per allow or deny option. A
// POST settles the request once, as that person (the tool goes on; the
// audit names them, by way of the webhook); a second use, or another
// option's URL, is 409 request_settled naming who answered; a URL past
// its request's expiry is 409 request_expired; no log line holds a URL.
func TestWebhookActionURLs(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	olgaID, _ := f.principal("olga", store.RoleOperator)
	rc := newHookReceiver(t)
	var hook apitypes.Webhook
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/webhooks",
		apitypes.WebhookCreate{URL: rc.srv.URL + "/bot", Reasons: []string{apitypes.AttentionNeedsDecision}, ActAs: olgaID}, &hook)
	f.env.NoteSecret(hook.Secret)
	plain := newHookReceiver(t) // a webhook without act_as: the request, no links
	var plainHook apitypes.Webhook
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/webhooks",
		apitypes.WebhookCreate{URL: plain.srv.URL + "/plain", Reasons: []string{apitypes.AttentionNeedsDecision}}, &plainHook)
	f.env.NoteSecret(plainHook.Secret)

	r := f.launch(f.admin, f.profile("grok", nil), "asks first")
	f.admin.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.input(r, "ask rm -rf build")
	var p apitypes.WebhookPayload
	f.admin.AwaitRun(r.RunRef, wait, "the delivery with its actions", func(apitypes.Run) bool { var ok bool; p, ok = rc.decision(); return ok })
	if p.Request.Command != "rm -rf build" || p.Request.Pending != 1 || len(p.Actions) != 3 {
		t.Fatalf("the delivery's request %+v and actions %+v: want the command and one URL per option", p.Request, p.Actions)
	}
	var pp apitypes.WebhookPayload
	f.admin.AwaitRun(r.RunRef, wait, "the plain webhook's delivery", func(apitypes.Run) bool { var ok bool; pp, ok = plain.decision(); return ok })
	if pp.Request.Command != "rm -rf build" || len(pp.Actions) != 0 {
		t.Fatalf("a webhook without act_as got %+v and actions %+v: want the request and no links", pp.Request, pp.Actions)
	}
	urls := map[string]string{}
	for _, a := range p.Actions {
		if !strings.HasPrefix(a.URL, f.env.APIURL()+"/v1/m/sessions/actions/") {
			t.Fatalf("action %+v: want a URL on the coordinator's address", a)
		}
		urls[a.OptionID] = a.URL
		f.env.NoteSecret(a.URL[strings.LastIndex(a.URL, "/")+1:])
	}
	// A link a person opens shows one button and settles nothing.
	resp, err := f.env.HTTPClient().Get(urls["proceed_once"])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || f.admin.Run(r.RunRef).PendingRequests != 1 {
		t.Fatalf("GET: %d; the request must still wait", resp.StatusCode)
	}

	code, body := post(t, f.env, urls["proceed_once"])
	var settled apitypes.RunRequest
	if json.Unmarshal([]byte(body), &settled); code != 200 || settled.State != "settled" || settled.By != olgaID || settled.ByName != "olga" || settled.OptionID != "proceed_once" {
		t.Fatalf("POST: %d %s: want the request settled by olga with proceed_once", code, body)
	}
	f.admin.AwaitRun(r.RunRef, wait, "the request settled", func(r apitypes.Run) bool { return r.PendingRequests == 0 })
	s := f.admin.Attach(r.RunRef, "from=0")
	s.UntilOutput("ran: rm -rf build (proceed_once)", wait)
	s.Close()
	for _, u := range []string{urls["proceed_once"], urls["cancel"]} {
		if code, body := post(t, f.env, u); code != http.StatusConflict || !strings.Contains(body, "request_settled") || !strings.Contains(body, "already answered by olga") {
			t.Fatalf("a second use: %d %s, want 409 request_settled naming olga", code, body)
		}
	}
	var audit apitypes.AuditList
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/audit?limit=500", nil, &audit)
	found := false
	for _, e := range audit.Items {
		if e.Event == apitypes.AuditRunRequestAnswered && e.Target.RunRef == r.RunRef {
			found = e.Actor.PrincipalID == olgaID && e.Actor.CredentialID == hook.ID && e.Target.WebhookID == hook.ID && strings.Contains(string(e.Detail), `"via":"webhook action"`)
		}
	}
	if !found {
		t.Fatalf("no answer audited as olga by way of %s: %+v", hook.ID, audit.Items)
	}

	// Expiry: a profile whose requests wait 1 s; its URL expires with it.
	q := f.profile("grok", nil)
	f.admin.Must(http.StatusOK, http.MethodPatch, "/v1/m/sessions/profiles/"+q.Ref, map[string]any{"ask_timeout": "1s"}, nil)
	r2 := f.launch(f.admin, q, "asks, nobody answers")
	f.admin.AwaitRun(r2.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.input(r2, "ask make deploy")
	var p2 apitypes.WebhookPayload
	f.admin.AwaitRun(r2.RunRef, wait, "its delivery", func(apitypes.Run) bool {
		var ok bool
		p2, ok = rc.decision()
		return ok && p2.Request.Command == "make deploy"
	})
	for _, a := range p2.Actions {
		f.env.NoteSecret(a.URL[strings.LastIndex(a.URL, "/")+1:])
	}
	f.admin.AwaitRun(r2.RunRef, wait, "the timeout's deny", func(r apitypes.Run) bool { return r.PendingRequests == 0 })
	if code, body := post(t, f.env, p2.Actions[0].URL); code != http.StatusConflict || !strings.Contains(body, "request_expired") {
		t.Fatalf("past the request's expiry: %d %s, want 409 request_expired", code, body)
	}
	if secrets, lines := f.env.AssertNoSecretInLogs(t); secrets < 5 || lines == 0 {
		t.Fatalf("checked %d secrets in %d lines", secrets, lines)
	}
	if !strings.Contains(strings.Join(f.env.Logs(), "\n"), "/v1/m/sessions/actions/[redacted]") {
		t.Fatal("no access line of an action URL: the redaction was not exercised")
	}
}

// R-REQ-14, R-NOTIF-10: on a phone (390 × 844) the request card shows
// the command and every option of the tool as a button a thumb can tap
// (44 px high, inside the screen, no sideways scroll); one tap settles
// it.
func TestPhoneRequestCard(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	r := f.launch(f.admin, f.profile("grok", nil), "asks on a phone")
	f.admin.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.input(r, "ask rm -rf build")
	f.admin.AwaitRun(r.RunRef, wait, "a pending request", func(r apitypes.Run) bool { return r.PendingRequests == 1 })
	tab := f.signIn()
	tab.Viewport(390, 844)
	f.open(tab, "/runs/"+r.RunRef)
	// The card may be drawn before the run's row has loaded and its
	// conversation panel is shown: wait until the buttons are on screen.
	tab.Await("the card's buttons", `(() => { const b = [...document.querySelectorAll('#requests .req-card.st-pending .req-opt')]; return b.length === 3 && b.every((e) => e.getClientRects().length > 0); })()`, wait)
	bad := browser.Eval[string](tab, `(() => {
  const out = [];
  if (document.documentElement.scrollWidth > 390) out.push('page ' + document.documentElement.scrollWidth + ' px wide');
  const cmd = document.querySelector('#requests .req-cmd').getBoundingClientRect();
  if (cmd.top < 0 || cmd.bottom > 844) out.push('the command off screen');
  for (const b of document.querySelectorAll('#requests .req-opt')) {
    const r = b.getBoundingClientRect();
    if (r.height < 44 || r.left < 0 || r.right > 390 || r.top < 0 || r.bottom > 844) out.push(b.dataset.option + ' ' + JSON.stringify(r));
  }
  return out.join('; ');
})()`)
	if bad != "" {
		t.Fatalf("on a phone: %s", bad)
	}
	tab.Click(`#requests [data-option="proceed_once"]`)
	tab.Await("settled by one tap", `!document.querySelector('#requests .req-card')`, wait)
	f.admin.AwaitRun(r.RunRef, wait, "no pending request", func(r apitypes.Run) bool { return r.PendingRequests == 0 })
}
