package api

import (
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/outbound"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// allowLoopback lets the guard reach the tests' receivers on 127.0.0.1 and
// ::1, as an operator's [outbound] allow would (R-NOTIF-9); roots are the
// certificates of the https ones.
func allowLoopback(t *testing.T, roots ...*x509.Certificate) func(*Options) {
	return func(o *Options) {
		var pool *x509.CertPool
		if len(roots) > 0 {
			pool = x509.NewCertPool()
			for _, c := range roots {
				pool.AddCert(c)
			}
		}
		g, err := outbound.New(outbound.Options{Allow: []string{"127.0.0.1/32", "::1/128"}, RootCAs: pool})
		if err != nil {
			t.Fatal(err)
		}
		o.Outbound = g
	}
}

// receiver is a webhook endpoint on 127.0.0.1 that checks each delivery's
// signature against the hook's secret and answers from a script.
type receiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	secret  string
	got     []apitypes.WebhookPayload
	bad     []string
	answers []int // the status of each next request; 200 when used up
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		ts := r.Header.Get(HeaderWebhookTimestamp)
		if want := WebhookSignature(rc.secret, ts, body); r.Header.Get(HeaderWebhookSignature) != want || ts == "" {
			rc.bad = append(rc.bad, r.Header.Get(HeaderWebhookSignature))
		}
		var p apitypes.WebhookPayload
		json.Unmarshal(body, &p)
		if r.Header.Get(HeaderWebhookDelivery) != p.ID || r.Header.Get(HeaderWebhookEvent) != p.Event {
			rc.bad = append(rc.bad, "headers disagree with the body")
		}
		status := http.StatusOK
		if len(rc.answers) > 0 {
			status, rc.answers = rc.answers[0], rc.answers[1:]
		}
		if status < 300 {
			rc.got = append(rc.got, p)
		}
		w.WriteHeader(status)
		io.WriteString(w, "ok from the receiver")
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) payloads() []apitypes.WebhookPayload {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]apitypes.WebhookPayload(nil), rc.got...)
}

func doJSON(t *testing.T, s *Server, method, path, tok, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set(HeaderTenant, "t1")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	handler(s).ServeHTTP(rec, req)
	return rec
}

// R-NOTIF-1..7: an administrator adds a webhook and gets its secret once;
// each change of a run's attention is delivered once, signed with the
// secret over the timestamp and the body, to the hooks that take that
// reason; a 5xx is retried with backoff, a 4xx is final; the log keeps the
// last answer; test-fire sends one; the config changes are audited with
// the URL's host only.
func TestWebhooks(t *testing.T) {
	s, st := newTestServer(t, allowLoopback(t))
	s.notify.backoff = []time.Duration{time.Millisecond, time.Millisecond}
	var clockMu sync.Mutex
	clock := time.Now()
	s.o.Now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	advance := func(d time.Duration) { clockMu.Lock(); clock = clock.Add(d); clockMu.Unlock() }
	t.Cleanup(s.Close)
	admin := principal(t, st, "admin", map[string]string{"t1": store.RoleAdmin})
	viewer := principal(t, st, "viewer", map[string]string{"t1": store.RoleViewer})
	rc := newReceiver(t)

	for _, tc := range []struct {
		tok, body string
		status    int
		code      string
	}{
		{viewer, `{"url":"` + rc.srv.URL + `"}`, 403, "permission_denied"},
		{admin, `{"url":"ftp://example.test/x"}`, 400, "bad_url"},
		{admin, `{"url":"/relative"}`, 400, "bad_url"},
		{admin, `{"url":"` + rc.srv.URL + `","reasons":["bored"]}`, 400, "bad_reason"},
		{admin, `{"url":"` + rc.srv.URL + `","extra":1}`, 400, "bad_body"},
	} {
		rec := doJSON(t, s, http.MethodPost, Base+"/webhooks", tc.tok, tc.body)
		if rec.Code != tc.status || errCode(rec) != tc.code {
			t.Errorf("POST /webhooks %s: got %d %s, want %d %s", tc.body, rec.Code, rec.Body, tc.status, tc.code)
		}
	}
	rec := doJSON(t, s, http.MethodPost, Base+"/webhooks", admin, `{"url":"`+rc.srv.URL+`/hook?token=abc"}`)
	var hook apitypes.Webhook
	if json.Unmarshal(rec.Body.Bytes(), &hook); rec.Code != 201 || !strings.HasPrefix(hook.Secret, "whsec_") {
		t.Fatalf("POST /webhooks: %d %s", rec.Code, rec.Body)
	}
	rc.secret = hook.Secret
	// A second hook takes only failures: it never hears of needs_input.
	rc2 := newReceiver(t)
	rec = doJSON(t, s, http.MethodPost, Base+"/webhooks", admin, `{"url":"`+rc2.srv.URL+`","reasons":["failed"]}`)
	var hook2 apitypes.Webhook
	json.Unmarshal(rec.Body.Bytes(), &hook2)
	rc2.secret = hook2.Secret

	rec = doJSON(t, s, http.MethodGet, Base+"/webhooks", admin, "")
	if rec.Code != 200 || strings.Contains(rec.Body.String(), "whsec_") || !strings.Contains(rec.Body.String(), hook.ID) {
		t.Errorf("GET /webhooks: %d %s; want both hooks and no secret", rec.Code, rec.Body)
	}

	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	ring := uint64(0)
	row := func(state string, rev uint64) apitypes.Run {
		return apitypes.Run{RunRef: "run_a", Tenant: "t1", NodeID: "n1", State: state, Driver: "claude", Generation: 1,
			Isolation: apitypes.IsolationNative, ProviderProfileRef: "pp", CreatedAt: t0, Rev: rev, RingFirst: 1, RingLast: ring}
	}
	// R-NOTIF-2: running → idle (one), idle again at a new rev with no new
	// output (none), a few frames right after the turn's end (none),
	// running, idle (one more), and a quick turn whose running row the
	// agent coalesced away: idle with more output, seconds later (one).
	for i, st := range []struct {
		state string
		ring  uint64
		after time.Duration
	}{{apitypes.StateRunning, 5, 0}, {apitypes.StateIdle, 9, 0}, {apitypes.StateIdle, 9, 0}, {apitypes.StateIdle, 11, 300 * time.Millisecond},
		{apitypes.StateRunning, 12, time.Second}, {apitypes.StateIdle, 15, time.Second}, {apitypes.StateIdle, 20, 3 * time.Second}} {
		ring = st.ring
		advance(st.after)
		pushRow(t, s, row(st.state, uint64(i+1)))
	}
	s.notify.wg.Wait()
	got := rc.payloads()
	if len(got) != 3 || got[0].Attention != "needs_input" || got[2].Attention != "needs_input" || got[0].Event != "attention" {
		t.Fatalf("deliveries: got %+v, want three needs_input", got)
	}
	var r apitypes.Run
	if json.Unmarshal(got[0].Run, &r); r.RunRef != "run_a" || r.Attention == nil || *r.Attention != "needs_input" {
		t.Errorf("the payload's run: %s", got[0].Run)
	}
	if len(rc2.payloads()) != 0 {
		t.Errorf("the failed-only hook got %d deliveries, want none", len(rc2.payloads()))
	}
	// A failure: both hooks; the first answers 500 once, then 204.
	rc.mu.Lock()
	rc.answers = []int{500}
	rc.mu.Unlock()
	advance(time.Second)
	pushRow(t, s, row(apitypes.StateFailed, 8))
	s.notify.wg.Wait()
	if got := rc.payloads(); len(got) != 4 || got[3].Attention != "failed" || got[3].Previous != "needs_input" {
		t.Errorf("after the failure: got %+v, want a fourth delivery, failed after needs_input", got)
	}
	if len(rc2.payloads()) != 1 {
		t.Errorf("the failed-only hook got %d deliveries, want 1", len(rc2.payloads()))
	}
	rec = doJSON(t, s, http.MethodGet, Base+"/webhooks/"+hook.ID+"/deliveries", admin, "")
	var log apitypes.WebhookDeliveryList
	json.Unmarshal(rec.Body.Bytes(), &log)
	if len(log.Items) != 4 || log.Items[0].Attempts != 2 || log.Items[0].State != "delivered" || log.Items[0].LastStatus != 200 ||
		log.Items[0].LastResponse != "200 OK" {
		t.Errorf("the delivery log: %s", rec.Body)
	}
	// A 4xx is final.
	rc.mu.Lock()
	rc.answers = []int{410}
	rc.mu.Unlock()
	rec = doJSON(t, s, http.MethodPost, Base+"/webhooks/"+hook.ID+"/test", admin, "")
	var d apitypes.WebhookDelivery
	if json.Unmarshal(rec.Body.Bytes(), &d); rec.Code != 200 || d.State != "failed" || d.LastStatus != 410 || d.Attempts != 1 {
		t.Errorf("test-fire against a 410: %d %s", rec.Code, rec.Body)
	}
	rec = doJSON(t, s, http.MethodPost, Base+"/webhooks/"+hook.ID+"/test", admin, "")
	if json.Unmarshal(rec.Body.Bytes(), &d); d.State != "delivered" || d.Event != "test" {
		t.Errorf("test-fire: %s", rec.Body)
	}
	rc.mu.Lock()
	if len(rc.bad) != 0 {
		t.Errorf("deliveries with a bad signature or headers: %v", rc.bad)
	}
	rc.mu.Unlock()

	if rec := doJSON(t, s, http.MethodDelete, Base+"/webhooks/"+hook.ID, admin, ""); rec.Code != 204 {
		t.Errorf("DELETE: %d %s", rec.Code, rec.Body)
	}
	for _, p := range []string{"/webhooks/" + hook.ID + "/deliveries", "/webhooks/wh_nope/deliveries"} {
		if rec := doJSON(t, s, http.MethodGet, Base+p, admin, ""); rec.Code != 404 || errCode(rec) != "webhook_not_found" {
			t.Errorf("GET %s: %d %s, want 404 webhook_not_found", p, rec.Code, rec.Body)
		}
	}
	// R-NOTIF-7: audited, with the URL's scheme and host only.
	rec = call(s, http.MethodGet, "/v1/audit", admin, "t1")
	body := rec.Body.String()
	if !strings.Contains(body, apitypes.AuditWebhookCreated) || !strings.Contains(body, apitypes.AuditWebhookDeleted) ||
		strings.Contains(body, "token=abc") || strings.Contains(body, "/hook") {
		t.Errorf("audit: %s", body)
	}
}

// R-NOTIF-2 (issue 32 finding 11): a run idle after its start waits for
// its first message, which is no news: no needs_input goes out, however
// often its starting tool idles, until a turn has begun (a running row,
// or input passed on) and ended. A failure before it is news all the same.
func TestWebhookNoNeedsInputBeforeTheFirstTurn(t *testing.T) {
	s, st := newTestServer(t, allowLoopback(t))
	t.Cleanup(s.Close)
	admin := principal(t, st, "admin", map[string]string{"t1": store.RoleAdmin})
	rc := newReceiver(t)
	rec := doJSON(t, s, http.MethodPost, Base+"/webhooks", admin, `{"url":"`+rc.srv.URL+`"}`)
	var hook apitypes.Webhook
	if json.Unmarshal(rec.Body.Bytes(), &hook); rec.Code != 201 {
		t.Fatalf("POST /webhooks: %d %s", rec.Code, rec.Body)
	}
	rc.secret = hook.Secret
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	row := func(ref, state string, rev, ring uint64) apitypes.Run {
		return apitypes.Run{RunRef: ref, Tenant: "t1", NodeID: "n1", State: state, Driver: "claude", Generation: 1,
			Isolation: apitypes.IsolationNative, ProviderProfileRef: "pp", CreatedAt: t0, Rev: rev, RingFirst: 1, RingLast: ring}
	}
	// Starting, idle, idle again with more handshake output: nothing.
	pushRow(t, s, row("run_new", apitypes.StateStarting, 1, 2))
	pushRow(t, s, row("run_new", apitypes.StateIdle, 2, 4))
	pushRow(t, s, row("run_new", apitypes.StateIdle, 3, 7))
	s.notify.wg.Wait()
	if got := rc.payloads(); len(got) != 0 {
		t.Fatalf("before the first turn: %+v, want no delivery", got)
	}
	// The first turn runs and ends: one needs_input.
	pushRow(t, s, row("run_new", apitypes.StateRunning, 4, 9))
	pushRow(t, s, row("run_new", apitypes.StateIdle, 5, 12))
	// Another run fails before its first turn: that is news.
	pushRow(t, s, row("run_bad", apitypes.StateFailed, 1, 3))
	s.notify.wg.Wait()
	got := rc.payloads()
	if len(got) != 2 {
		t.Fatalf("deliveries: %+v, want needs_input for run_new and failed for run_bad", got)
	}
	for _, p := range got {
		var r apitypes.Run
		json.Unmarshal(p.Run, &r)
		if want := map[string]string{"run_new": "needs_input", "run_bad": "failed"}[r.RunRef]; p.Attention != want {
			t.Errorf("delivery for %s: %s, want %s", r.RunRef, p.Attention, want)
		}
	}
}

// R-NOTIF-2, R-NOTIF-10: while a run waits for decisions, the request a
// person answered being gone with another still waiting is news (the next
// request's turn); one more request queued behind the one already sent
// is not, nor is the same count again.
func TestWebhookNextDecision(t *testing.T) {
	s, st := newTestServer(t, allowLoopback(t))
	t.Cleanup(s.Close)
	admin := principal(t, st, "admin", map[string]string{"t1": store.RoleAdmin})
	rc := newReceiver(t)
	rec := doJSON(t, s, http.MethodPost, Base+"/webhooks", admin, `{"url":"`+rc.srv.URL+`","reasons":["needs_decision"]}`)
	var hook apitypes.Webhook
	if json.Unmarshal(rec.Body.Bytes(), &hook); rec.Code != 201 {
		t.Fatalf("POST /webhooks: %d %s", rec.Code, rec.Body)
	}
	rc.secret = hook.Secret
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	row := func(rev uint64, pending int) apitypes.Run {
		return apitypes.Run{RunRef: "run_d", Tenant: "t1", NodeID: "n1", State: apitypes.StateRunning, Driver: "claude", Generation: 1,
			Isolation: apitypes.IsolationNative, ProviderProfileRef: "pp", CreatedAt: t0, Rev: rev, RingFirst: 1, RingLast: 10 + rev, PendingRequests: pending}
	}
	// One asks (sent), a second queues (none), the same again (none), the
	// first is answered with the second waiting (sent), the second is
	// answered (none: the run works on), a third asks (sent).
	want := []int{1, 0, 0, 1, 0, 1}
	sent := 0
	for i, pending := range []int{1, 2, 2, 1, 0, 1} {
		pushRow(t, s, row(uint64(i+1), pending))
		s.notify.wg.Wait()
		sent += want[i]
		if got := rc.payloads(); len(got) != sent {
			t.Fatalf("after row %d (%d waiting): %d deliveries, want %d", i+1, pending, len(got), sent)
		}
	}
	for _, p := range rc.payloads() {
		if p.Attention != apitypes.AttentionNeedsDecision {
			t.Errorf("a delivery for %s, want needs_decision", p.Attention)
		}
	}
}
