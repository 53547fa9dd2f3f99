package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The webhooks screen (R-NOTIF-1, R-NOTIF-5, R-NOTIF-6): an administrator
// adds a webhook and sees its secret once, test-fires it (the receiver on
// 127.0.0.1 checks the signature with that secret), reads the delivery
// log, and deletes it.
func TestWebhooksScreen(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	var mu sync.Mutex
	var got []apitypes.WebhookPayload
	var sigs, bodies, stamps []string
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var p apitypes.WebhookPayload
		json.Unmarshal(b, &p)
		mu.Lock()
		got = append(got, p)
		sigs, bodies, stamps = append(sigs, r.Header.Get("X-Olivares-Signature")), append(bodies, string(b)), append(stamps, r.Header.Get("X-Olivares-Timestamp"))
		mu.Unlock()
		io.WriteString(w, "thanks")
	}))
	defer rc.Close()

	tab := f.signIn()
	f.open(tab, "/webhooks")
	tab.Await("the webhooks screen", `!!document.querySelector('#wh-add')`, wait)
	tab.Exec(`document.querySelector('#wh-url').value = ` + js(rc.URL+"/hook"))
	tab.Click("#wh-r-needs_input")
	tab.Click(`#wh-add button[type=submit]`)
	tab.Await("the secret, once", `(document.querySelector('#wh-secret-value')?.textContent || '').startsWith('whsec_')`, wait)
	secret := browser.Eval[string](tab, `document.querySelector('#wh-secret-value').textContent`)
	tab.Await("the row", `document.querySelectorAll('#wh-rows tr[data-id]').length === 1`, wait)
	tab.Click("#wh-rows .wh-test")
	tab.Await("the test delivered", `(document.querySelector('#wh-status')?.textContent || '').startsWith('Test delivery: delivered (HTTP 200')`, wait)
	mu.Lock()
	if len(got) != 1 || got[0].Event != "test" {
		t.Fatalf("the receiver got %+v, want one test delivery", got)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(stamps[0] + "." + bodies[0]))
	if want := "v1=" + hex.EncodeToString(mac.Sum(nil)); sigs[0] != want {
		t.Fatalf("signature %q, want %q (the secret the screen showed)", sigs[0], want)
	}
	mu.Unlock()
	tab.Click("#wh-rows .wh-log")
	tab.Await("the delivery log with the answer's status", `(document.querySelector('#wh-deliveries')?.textContent || '').includes('200 OK')`, wait)
	tab.Exec(`window.confirm = () => true`)
	tab.Click("#wh-rows .wh-delete")
	tab.Await("no webhook left", `document.querySelectorAll('#wh-rows tr[data-id]').length === 0`, wait)
	// R-NOTIF-11: "Me" names the administrator as the one the action
	// links answer as; the row says so, and so does the API.
	tab.Exec(`document.querySelector('#wh-url').value = ` + js(rc.URL+"/bot"))
	tab.Click("#wh-act-me")
	tab.Click(`#wh-add button[type=submit]`)
	tab.Await("the row with its action links", `(document.querySelector('#wh-rows .wh-act-as')?.textContent || '').includes(`+js(f.adminID)+`)`, wait)
	var hooks apitypes.WebhookList
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/webhooks", nil, &hooks)
	if len(hooks.Items) != 1 || hooks.Items[0].ActAs != f.adminID {
		t.Fatalf("webhooks %+v: want one whose act_as is the administrator", hooks.Items)
	}
	f.open(tab, "/")
	tab.Await("the list", `!!document.querySelector('.list-head h1')`, wait)
	if n := browser.Eval[int](tab, `document.querySelectorAll('.nav a[href="/webhooks"]').length`); n != 1 {
		t.Errorf("the navigation has %d Webhooks links, want 1 for an administrator", n)
	}
}
