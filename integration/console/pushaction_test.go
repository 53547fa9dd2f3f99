package console

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/integration/realcli"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/webpush"
)

// localPush is a push service on 127.0.0.1 over https, as a browser's
// would be (RFC 8030): it takes the coordinator's pushes for the one
// browser it serves and decrypts them with that browser's keys (RFC
// 8291). Chromium here has no push service of its own: the test hands
// what this one decrypted to the console's service worker.
type localPush struct {
	srv  *httptest.Server
	ua   *ecdh.PrivateKey
	auth []byte
	mu   sync.Mutex
	got  []string // each push's plaintext
	caf  string   // its certificate, for the coordinator's [outbound] ca_file
}

func newLocalPush(t *testing.T) *localPush {
	lp := &localPush{auth: make([]byte, 16)}
	lp.ua, _ = ecdh.P256().GenerateKey(rand.Reader)
	rand.Read(lp.auth)
	lp.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		pt, err := webpush.Decrypt(lp.ua, lp.auth, body)
		if err != nil || len(body) > 4096 {
			http.Error(w, "undecryptable or over 4096 bytes", http.StatusBadRequest)
			return
		}
		lp.mu.Lock()
		lp.got = append(lp.got, string(pt))
		lp.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(lp.srv.Close)
	lp.caf = filepath.Join(t.TempDir(), "push-ca.pem")
	if err := os.WriteFile(lp.caf, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: lp.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return lp
}

func (lp *localPush) subscription() apitypes.PushSubscriptionCreate {
	b64 := base64.RawURLEncoding
	return apitypes.PushSubscriptionCreate{Endpoint: lp.srv.URL + "/push/browser-1",
		Keys:    apitypes.PushKeys{P256dh: b64.EncodeToString(lp.ua.PublicKey().Bytes()), Auth: b64.EncodeToString(lp.auth)},
		Reasons: []string{apitypes.AttentionNeedsDecision}}
}

// notif is a shown notification, as the test reads it.
type notif struct {
	Body    string   `json:"body"`
	Actions []string `json:"actions"`
}

// decision is the newest push for a decision, if any.
func (lp *localPush) decision() (string, apitypes.PushMessage, bool) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	for i := len(lp.got) - 1; i >= 0; i-- {
		var m apitypes.PushMessage
		if json.Unmarshal([]byte(lp.got[i]), &m) == nil && m.Request != nil {
			return lp.got[i], m, true
		}
	}
	return "", apitypes.PushMessage{}, false
}

// R-NOTIF-10 with the real Claude Code: its Bash request is pushed with
// the command, its directory and the buttons Allow once and Deny; the
// console's service worker shows them; the Allow once action, dispatched
// as the notification's click, settles the request as the signed-in
// person without a console page doing anything, the tool runs the
// command, and the notification is replaced by "Allowed by you."; a
// second action on the settled request changes nothing and says it was
// already answered, by whom.
func TestPushAnswersFromTheNotification(t *testing.T) {
	bin := realcli.BinDir(t, "claude")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	fake.Push(fakemodel.Tool("Bash", `{"command":"echo hi > probe.txt","description":"write a probe"}`), fakemodel.Text("It said hi."))
	lp := newLocalPush(t)
	f := setup(t, integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath}, func(c *coordd.Config) { c.Outbound.CAFile = lp.caf })
	p := f.profile("claude", map[string]string{"ANTHROPIC_BASE_URL": fake.URL(), "ANTHROPIC_API_KEY": "test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0"})

	tab := f.signIn()
	tab.GrantNotifications(browser.Eval[string](tab, `location.origin`))
	tab.Exec(`window.__sw = ''; void import('/assets/push.js').then(async (m) => { await m.registration(); window.__sw = 'active'; }).catch((e) => { window.__sw = 'error: ' + e.message; })`)
	tab.Await("the service worker active", `window.__sw === 'active'`, wait)
	// Attached now, while it runs: the browser stops an idle worker after
	// 30 s (the run's launch and turn take about that), and one DevTools
	// is attached to is kept running.
	sw := tab.Worker("/assets/sw.js", wait)
	if got := browser.Eval[string](tab, `Notification.permission`); got != "granted" {
		t.Fatalf("notifications %s in the page", got)
	}
	// The browser's subscription is the admin's own, as the console's
	// subscribe button records it.
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/push/subscriptions", lp.subscription(), nil)

	r := f.launch(f.admin, p, "asks for Bash")
	f.admin.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.input(r, "say hi")
	var raw string
	var m apitypes.PushMessage
	f.admin.AwaitRun(r.RunRef, wait, "the decision's push", func(apitypes.Run) bool { var ok bool; raw, m, ok = lp.decision(); return ok })
	if m.Request.Command != "echo hi > probe.txt" || m.Request.Cwd == "" || m.Tenant != integration.Tenant || len(m.Actions) != 2 ||
		m.Actions[0].Title != "Allow once" || m.Actions[1].Title != "Deny" {
		t.Fatalf("the push %s: want the command, its directory, the tenant, and Allow once and Deny", raw)
	}

	// The push reaches the service worker as the browser's push service
	// hands it over: a push event with the decrypted data, dispatched in
	// the worker. What the worker shows goes to a recorder standing in
	// for the system's notification centre: headless Chromium's dropped a
	// shown notification about one run in two, with DevTools' push
	// delivery (ServiceWorker.deliverPushMessage) and with this dispatch
	// alike (showNotification resolved, and getNotifications never listed
	// it), while a person's phone or desktop shows it. Everything else is
	// real: the worker's code, its fetch with the person's cookie, the
	// route, the tool.
	sw.Exec(`self.__shown = []; self.registration.showNotification = (title, o) => { self.__shown.push(Object.assign({ title }, o)); return Promise.resolve(); };`)
	sw.Exec(fmt.Sprintf(`self.dispatchEvent(new PushEvent('push', { data: %s }))`, js(raw)))
	// shown is the newest notification under the push's tag once there
	// are n of them; click dispatches its click with action, as the
	// notification centre would (the notification handed over as the
	// worker reads it: title, tag, data and close).
	shown := func(what string, n int) notif {
		var got notif
		f.admin.AwaitRun(r.RunRef, wait, what, func(apitypes.Run) bool {
			s := browser.Eval[string](sw, fmt.Sprintf(`JSON.stringify(self.__shown.filter((n) => n.tag === %s).map((n) => ({ body: n.body, actions: (n.actions || []).map((a) => a.action) })))`, js(m.Tag)))
			var ns []notif
			json.Unmarshal([]byte(s), &ns)
			if len(ns) >= n {
				got = ns[n-1]
				return true
			}
			return false
		})
		return got
	}
	click := func(action string) {
		sw.Exec(fmt.Sprintf(`(() => { const n = self.__shown[0]; const e = new Event('notificationclick');
  Object.defineProperty(e, 'notification', { value: { title: n.title, tag: n.tag, body: n.body, data: n.data, close() {} } });
  Object.defineProperty(e, 'action', { value: %s });
  self.dispatchEvent(e); })()`, js(action)))
	}
	asked := shown("the notification", 1)
	if !strings.Contains(asked.Body, "echo hi > probe.txt") || strings.Join(asked.Actions, ",") != "allow,deny" {
		t.Fatalf("the notification: %+v", asked)
	}
	click("allow")
	if got := shown("the outcome", 2); got.Body != "Allowed by you." || len(got.Actions) != 0 {
		t.Fatalf("the notification after Allow once: %+v", got)
	}
	var list apitypes.RequestList
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs/"+r.RunRef+"/requests", nil, &list)
	if len(list.Items) == 0 || list.Items[0].State != "settled" || list.Items[0].By != f.adminID || list.Items[0].OptionID != m.Actions[0].OptionID {
		t.Fatalf("requests %+v: want the request settled by the signed-in person with %s", list.Items, m.Actions[0].OptionID)
	}
	s := f.admin.Attach(r.RunRef, "from=0")
	s.UntilOutput("It said hi.", wait)
	s.Close()
	if b, err := os.ReadFile(filepath.Join(f.ws.Path, "probe.txt")); err != nil || strings.TrimSpace(string(b)) != "hi" {
		t.Fatalf("the tool did not run the command: %q %v", b, err)
	}

	// A second action on the settled request: nothing changes, and the
	// notification says who answered first.
	click("deny")
	if got := shown("the second outcome", 3); got.Body != "Already answered by admin (allow)." {
		t.Fatalf("the notification after a second action: %+v", got)
	}
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs/"+r.RunRef+"/requests", nil, &list)
	if list.Items[0].Decision != "allow" {
		t.Fatalf("the second action changed the request: %+v", list.Items[0])
	}
}
