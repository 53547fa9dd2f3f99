package api

import (
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/fleet"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration/contract"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The probes of issue 35 against the requests the coordinator sends where
// a tenant said (R-NOTIF-9): an internal service on loopback, played by a
// listener that counts its connections and answers a secret.

// internalService is a service of the coordinator's own network: https on
// 127.0.0.1 (and plain http on the same port of ::1 when the host has
// IPv6), answering a body no tenant may read.
type internalService struct {
	tls   *httptest.Server
	port  string
	conns atomic.Int32
}

const internalSecret = "internal-secret-body"

func newInternalService(t *testing.T) *internalService {
	is := &internalService{}
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(internalSecret)) })
	count := func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			is.conns.Add(1)
		}
	}
	is.tls = httptest.NewUnstartedServer(h)
	is.tls.Config.ConnState = count
	is.tls.StartTLS()
	t.Cleanup(is.tls.Close)
	_, is.port, _ = net.SplitHostPort(is.tls.Listener.Addr().String())
	if ln, err := net.Listen("tcp6", "[::1]:"+is.port); err == nil {
		v6 := &http.Server{Handler: h, ConnState: count}
		go v6.Serve(ln)
		t.Cleanup(func() { v6.Close() })
	}
	return is
}

// sameStoreServer is a second coordinator on s's store with the default
// guard (no allowlist): what a destination stored earlier, or a name that
// now resolves elsewhere, meets at send time.
func sameStoreServer(t *testing.T, st store.Store) *Server {
	s := New(Options{Store: st, Fleet: fleet.New(fleet.Options{Store: st})})
	checked.Store(s, contract.Handler(t, s.Handler()))
	t.Cleanup(func() { checked.Delete(s); s.Close() })
	return s
}

// R-NOTIF-9 (issue 35, finding 1): a viewer cannot make the coordinator
// call an internal address through Web Push. Plain http endpoints are 400
// bad_subscription; https ones on loopback in every form, the metadata
// address and the unspecified ones are 422 destination_refused; nothing
// reaches the internal service. A subscription already stored there is
// refused again at send time, and the test answer says "could not
// connect", never the service's body.
func TestPushRefusesInternalEndpoints(t *testing.T) {
	is := newInternalService(t)
	s, st := newTestServer(t, allowLoopback(t, is.tls.Certificate()))
	t.Cleanup(s.Close)
	viewer := principal(t, st, "viewer", map[string]string{"t1": store.RoleViewer})
	ps := newPushService(t)
	keys := func(endpoint string) string {
		b64 := base64.RawURLEncoding
		return `{"endpoint":"` + endpoint + `","keys":{"p256dh":"` + b64.EncodeToString(ps.ua.PublicKey().Bytes()) +
			`","auth":"` + b64.EncodeToString(ps.auth) + `"}}`
	}
	plain := sameStoreServer(t, st)
	p := is.port
	for _, tc := range []struct {
		endpoint string
		status   int
		code     string
	}{
		{"http://127.0.0.1:" + p + "/x", 400, "bad_subscription"},
		{"http://push.example.com/x", 400, "bad_subscription"},
		{"https://127.0.0.1:" + p + "/x", 422, "destination_refused"},
		{"https://[::1]:" + p + "/x", 422, "destination_refused"},
		{"https://localhost:" + p + "/x", 422, "destination_refused"},
		{"https://[::ffff:127.0.0.1]:" + p + "/x", 422, "destination_refused"},
		{"https://0.0.0.0:" + p + "/x", 422, "destination_refused"},
		{"https://169.254.169.254/latest/meta-data/", 422, "destination_refused"},
		{"https://10.0.0.7/x", 422, "destination_refused"},
		{"https://[fd00::7]/x", 422, "destination_refused"},
	} {
		rec := doJSON(t, plain, http.MethodPost, Base+"/push/subscriptions", viewer, keys(tc.endpoint))
		if rec.Code != tc.status || errCode(rec) != tc.code {
			t.Errorf("subscribe %s: got %d %s, want %d %s", tc.endpoint, rec.Code, rec.Body, tc.status, tc.code)
		}
	}
	// Stored while the operator allowed loopback; sent after they stopped.
	rec := doJSON(t, s, http.MethodPost, Base+"/push/subscriptions", viewer, keys(is.tls.URL+"/x"))
	var sub apitypes.PushSubscription
	if json.Unmarshal(rec.Body.Bytes(), &sub); rec.Code != 201 {
		t.Fatalf("subscribe with loopback allowed: %d %s", rec.Code, rec.Body)
	}
	rec = doJSON(t, plain, http.MethodPost, Base+"/push/subscriptions/"+sub.ID+"/test", viewer, "")
	var d apitypes.WebhookDelivery
	if json.Unmarshal(rec.Body.Bytes(), &d); rec.Code != 200 || d.State != "failed" || d.LastStatus != 0 || d.LastError != "could not connect" {
		t.Errorf("test push at send time: got %d %s, want failed, could not connect", rec.Code, rec.Body)
	}
	if n := is.conns.Load(); n != 0 {
		t.Errorf("the internal service took %d connections, want none", n)
	}
	// Allowed, it answers; the log has its status, never its body.
	rec = doJSON(t, s, http.MethodPost, Base+"/push/subscriptions/"+sub.ID+"/test", viewer, "")
	if json.Unmarshal(rec.Body.Bytes(), &d); d.LastStatus != 200 || d.LastResponse != "200 OK" || strings.Contains(rec.Body.String(), internalSecret) {
		t.Errorf("test push, allowed: got %s, want 200 OK and no body", rec.Body)
	}
	rec = doJSON(t, s, http.MethodGet, Base+"/push/subscriptions", viewer, "")
	if strings.Contains(rec.Body.String(), internalSecret) {
		t.Errorf("the subscription list holds the service's body: %s", rec.Body)
	}
}

// R-NOTIF-9 (issue 35, finding 6): a webhook at an internal address is
// refused in every form; one stored earlier is refused at send time with
// the very answer a closed port gives (no port scan), and the log keeps a
// status and a short reason, never the body. An agent identity with
// run:admin can neither test nor delete a webhook (R-AUTH-6), and a test
// delivery is audited (R-NOTIF-7).
func TestWebhookGuard(t *testing.T) {
	is := newInternalService(t)
	s, st := newTestServer(t, allowLoopback(t, is.tls.Certificate()))
	t.Cleanup(s.Close)
	admin := principal(t, st, "admin", map[string]string{"t1": store.RoleAdmin})
	robot := agentPrincipal(t, st, "robot", map[string]string{"t1": store.RoleAdmin})
	plain := sameStoreServer(t, st)
	p := is.port
	for _, u := range []string{
		"http://127.0.0.1:" + p + "/x", "http://localhost:" + p + "/x", "http://[::1]:" + p + "/x",
		"http://0.0.0.0:" + p + "/x", "http://[::ffff:127.0.0.1]:" + p + "/x", "http://[::]:" + p + "/x",
		"http://169.254.169.254/latest/meta-data/", "http://192.168.0.1/", "http://100.64.1.1/",
	} {
		rec := doJSON(t, plain, http.MethodPost, Base+"/webhooks", admin, `{"url":"`+u+`"}`)
		if rec.Code != 422 || errCode(rec) != "destination_refused" {
			t.Errorf("POST /webhooks %s: got %d %s, want 422 destination_refused", u, rec.Code, rec.Body)
		}
	}
	closed, _ := net.Listen("tcp4", "127.0.0.1:0")
	closedURL := "http://" + closed.Addr().String() + "/hook"
	closed.Close()
	hook := func(u string) string {
		rec := doJSON(t, s, http.MethodPost, Base+"/webhooks", admin, `{"url":"`+u+`"}`)
		var h apitypes.Webhook
		if json.Unmarshal(rec.Body.Bytes(), &h); rec.Code != 201 {
			t.Fatalf("POST /webhooks %s with loopback allowed: %d %s", u, rec.Code, rec.Body)
		}
		return h.ID
	}
	internal, shut := hook(is.tls.URL+"/hook"), hook(closedURL)
	test := func(srv *Server, id, tok string) (*httptest.ResponseRecorder, apitypes.WebhookDelivery) {
		rec := doJSON(t, srv, http.MethodPost, Base+"/webhooks/"+id+"/test", tok, "")
		var d apitypes.WebhookDelivery
		json.Unmarshal(rec.Body.Bytes(), &d)
		return rec, d
	}
	_, blocked := test(plain, internal, admin)
	_, refused := test(s, shut, admin)
	if blocked.State != "failed" || blocked.LastError != "could not connect" || blocked.LastStatus != 0 || blocked.LastResponse != "" ||
		refused.LastError != blocked.LastError || refused.LastStatus != blocked.LastStatus {
		t.Errorf("a blocked address and a closed port: got %+v and %+v, want the same failure, could not connect", blocked, refused)
	}
	if n := is.conns.Load(); n != 0 {
		t.Errorf("the internal service took %d connections, want none", n)
	}
	rec, ok := test(s, internal, admin)
	if ok.State != "delivered" || ok.LastResponse != "200 OK" || strings.Contains(rec.Body.String(), internalSecret) {
		t.Errorf("an allowed test: got %s, want delivered, 200 OK, no body", rec.Body)
	}
	rec = doJSON(t, s, http.MethodGet, Base+"/webhooks/"+internal+"/deliveries", admin, "")
	if rec.Code != 200 || strings.Contains(rec.Body.String(), internalSecret) {
		t.Errorf("the delivery log: %d %s, want no body of the receiver", rec.Code, rec.Body)
	}
	for _, m := range []string{http.MethodPost + " /test", http.MethodDelete + " "} {
		method, suffix, _ := strings.Cut(m, " ")
		rec := doJSON(t, s, method, Base+"/webhooks/"+internal+suffix, robot, "")
		if rec.Code != 403 || errCode(rec) != "agent_identity_refused" {
			t.Errorf("%s by an agent admin: got %d %s, want 403 agent_identity_refused", m, rec.Code, rec.Body)
		}
	}
	rec = call(s, http.MethodGet, "/v1/audit?event="+apitypes.AuditWebhookTested, admin, "t1")
	var audit apitypes.AuditList
	if json.Unmarshal(rec.Body.Bytes(), &audit); len(audit.Items) != 3 || audit.Items[0].Target.WebhookID == "" {
		t.Errorf("the test deliveries in the audit: %s, want three", rec.Body)
	}
}
