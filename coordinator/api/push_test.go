package api

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/webpush"
)

// pushService is a push service on 127.0.0.1, over https, as RFC 8030 has one: it
// takes a push for the one browser it serves, checks the VAPID JWT
// against the coordinator's key and its own origin, and decrypts the body
// with the browser's private key and auth secret (RFC 8291).
type pushService struct {
	srv  *httptest.Server
	ua   *ecdh.PrivateKey
	auth []byte
	mu   sync.Mutex
	got  []apitypes.PushMessage
	bad  []string
	key  string // the VAPID public key it expects
}

func newPushService(t *testing.T) *pushService {
	ps := &pushService{auth: make([]byte, 16)}
	ps.ua, _ = ecdh.P256().GenerateKey(rand.Reader)
	rand.Read(ps.auth)
	ps.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ps.mu.Lock()
		defer ps.mu.Unlock()
		fail := func(why string) {
			ps.bad = append(ps.bad, why)
			w.WriteHeader(http.StatusBadRequest)
		}
		if r.Header.Get("Content-Encoding") != "aes128gcm" || r.Header.Get("TTL") == "" {
			fail("headers: " + r.Header.Get("Content-Encoding") + " TTL " + r.Header.Get("TTL"))
			return
		}
		auth := r.Header.Get("Authorization")
		if _, err := webpush.VerifyVAPID(auth, ps.srv.URL, time.Now()); err != nil || !strings.HasSuffix(auth, "k="+ps.key) {
			fail("vapid: " + auth)
			return
		}
		pt, err := webpush.Decrypt(ps.ua, ps.auth, body)
		if err != nil {
			fail("decrypt: " + err.Error())
			return
		}
		var m apitypes.PushMessage
		json.Unmarshal(pt, &m)
		ps.got = append(ps.got, m)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(ps.srv.Close)
	return ps
}

func (ps *pushService) subscription(reasons string) string {
	b64 := base64.RawURLEncoding
	return `{"endpoint":"` + ps.srv.URL + `/push/abc","keys":{"p256dh":"` + b64.EncodeToString(ps.ua.PublicKey().Bytes()) +
		`","auth":"` + b64.EncodeToString(ps.auth) + `"}` + reasons + `}`
}

// R-NOTIF-8: a person subscribes a browser with the coordinator's VAPID
// key; a change of a run's attention to a reason they chose is pushed
// once, encrypted for that browser (it decrypts) and signed by VAPID for
// the push service's origin (it verifies); another person cannot see or
// remove it; test-fire pushes now.
func TestWebPush(t *testing.T) {
	ps := newPushService(t)
	s, st := newTestServer(t, allowLoopback(t, ps.srv.Certificate()))
	t.Cleanup(s.Close)
	alice := principal(t, st, "alice", map[string]string{"t1": store.RoleViewer})
	bob := principal(t, st, "bob", map[string]string{"t1": store.RoleAdmin})

	rec := doJSON(t, s, http.MethodGet, Base+"/push/key", alice, "")
	var key apitypes.PushKey
	if json.Unmarshal(rec.Body.Bytes(), &key); rec.Code != 200 || key.PublicKey != webpush.PublicKey(s.notify.vapid) {
		t.Fatalf("GET /push/key: %d %s", rec.Code, rec.Body)
	}
	ps.key = key.PublicKey
	for _, tc := range []struct{ body, code string }{
		{`{"endpoint":"` + ps.srv.URL + `","keys":{"p256dh":"AAAA","auth":"AAAA"}}`, "bad_subscription"},
		{`{"endpoint":"not a url","keys":{"p256dh":"AAAA","auth":"AAAA"}}`, "bad_subscription"},
		{ps.subscription(`,"reasons":["sleepy"]`), "bad_reason"},
	} {
		if rec := doJSON(t, s, http.MethodPost, Base+"/push/subscriptions", alice, tc.body); rec.Code != 400 || errCode(rec) != tc.code {
			t.Errorf("POST /push/subscriptions %s: %d %s, want 400 %s", tc.body, rec.Code, rec.Body, tc.code)
		}
	}
	rec = doJSON(t, s, http.MethodPost, Base+"/push/subscriptions", alice, ps.subscription(`,"reasons":["needs_input"]`))
	var sub apitypes.PushSubscription
	if json.Unmarshal(rec.Body.Bytes(), &sub); rec.Code != 201 || sub.ID == "" {
		t.Fatalf("subscribe: %d %s", rec.Code, rec.Body)
	}
	// The same browser again replaces it: one subscription.
	rec = doJSON(t, s, http.MethodPost, Base+"/push/subscriptions", alice, ps.subscription(`,"reasons":["needs_input"]`))
	json.Unmarshal(rec.Body.Bytes(), &sub)
	var mine apitypes.PushSubscriptionList
	rec = doJSON(t, s, http.MethodGet, Base+"/push/subscriptions", alice, "")
	if json.Unmarshal(rec.Body.Bytes(), &mine); len(mine.Items) != 1 || mine.Items[0].ID != sub.ID {
		t.Fatalf("alice's subscriptions: %s", rec.Body)
	}
	rec = doJSON(t, s, http.MethodGet, Base+"/push/subscriptions", bob, "")
	if json.Unmarshal(rec.Body.Bytes(), &mine); len(mine.Items) != 0 {
		t.Errorf("bob sees alice's subscriptions: %s", rec.Body)
	}
	if rec := doJSON(t, s, http.MethodDelete, Base+"/push/subscriptions/"+sub.ID, bob, ""); rec.Code != 404 || errCode(rec) != "subscription_not_found" {
		t.Errorf("bob removes alice's: %d %s", rec.Code, rec.Body)
	}
	// A push subscription is nobody's webhook.
	if rec := doJSON(t, s, http.MethodGet, Base+"/webhooks", bob, ""); strings.Contains(rec.Body.String(), sub.ID) {
		t.Errorf("GET /webhooks lists a push subscription: %s", rec.Body)
	}

	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	row := func(state string, rev, ring uint64) apitypes.Run {
		return apitypes.Run{RunRef: "run_p", Tenant: "t1", NodeID: "n1", State: state, Driver: "claude", Generation: 1,
			Isolation: apitypes.IsolationNative, ProviderProfileRef: "pp", CreatedAt: t0, Rev: rev, RingFirst: 1, RingLast: ring}
	}
	pushRow(t, s, row(apitypes.StateRunning, 1, 3))
	pushRow(t, s, row(apitypes.StateIdle, 2, 5))
	pushRow(t, s, row(apitypes.StateIdle, 3, 5))   // the same change: nothing
	pushRow(t, s, row(apitypes.StateFailed, 4, 6)) // a reason alice did not choose
	s.notify.wg.Wait()
	ps.mu.Lock()
	got, bad := append([]apitypes.PushMessage(nil), ps.got...), ps.bad
	ps.mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("the push service refused: %v", bad)
	}
	if len(got) != 1 || got[0].RunRef != "run_p" || got[0].Attention != "needs_input" || got[0].URL != "/runs/run_p" ||
		!strings.Contains(got[0].Title, "waits for your input") {
		t.Fatalf("pushes: %+v, want one needs_input for run_p", got)
	}
	rec = doJSON(t, s, http.MethodPost, Base+"/push/subscriptions/"+sub.ID+"/test", alice, "")
	var d apitypes.WebhookDelivery
	if json.Unmarshal(rec.Body.Bytes(), &d); rec.Code != 200 || d.State != "delivered" || d.LastStatus != 201 {
		t.Fatalf("test push: %d %s", rec.Code, rec.Body)
	}
	if rec := doJSON(t, s, http.MethodDelete, Base+"/push/subscriptions/"+sub.ID, alice, ""); rec.Code != 204 {
		t.Errorf("unsubscribe: %d %s", rec.Code, rec.Body)
	}
	rec = call(s, http.MethodGet, "/v1/audit", bob, "t1")
	if !strings.Contains(rec.Body.String(), apitypes.AuditPushSubscribed) || !strings.Contains(rec.Body.String(), apitypes.AuditPushUnsubscribed) {
		t.Errorf("audit: %s", rec.Body)
	}
}
