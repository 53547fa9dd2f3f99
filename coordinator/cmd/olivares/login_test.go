package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration/contract"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Issue 32 finding 9: login's refusals point the right way (a URL without
// a scheme, a token the coordinator does not know: nothing was saved), and
// logging in again revokes the credential the previous login minted
// (POST /v1/logout with it, R-LIFE-5), while a token that was given as it
// is stays live.
func TestLoginRefusalsAndRelogin(t *testing.T) {
	var mu sync.Mutex
	live := map[string]bool{"olv_given": true}
	var revoked []string
	minted := 0
	srv := httptest.NewServer(contract.Handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !live[tok] {
			writeErr(w, 401, "unauthenticated", "missing or unknown bearer token")
			return
		}
		switch r.URL.Path {
		case "/v1/whoami":
			writeJSON(w, 200, apitypes.Whoami{PrincipalID: "prn_1", Name: "ops", Kind: "human", Tenant: testTenant, Role: "operator", Permissions: []string{"sessions:run:read"}})
		case "/v1/login":
			minted++
			own := "olv_own" + string(rune('0'+minted))
			live[own] = true
			writeJSON(w, 201, apitypes.CredentialCreated{Token: own, Credential: apitypes.Credential{ID: "crd_" + own, PrincipalID: "prn_1", Kind: "session", CreatedAt: fakeCreated}})
		case "/v1/logout":
			delete(live, tok)
			revoked = append(revoked, tok)
			w.WriteHeader(204)
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	})))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	t.Setenv("OLIVARES_CONFIG_DIR", dir)
	saved := func() Credentials {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join(dir, "credentials.json"))
		if err != nil {
			t.Fatal(err)
		}
		var c Credentials
		json.Unmarshal(raw, &c)
		return c
	}

	if _, stderr, code := cli(t, "login", "--url", strings.TrimPrefix(srv.URL, "http://"), "--token", "olv_given", "--tenant", testTenant); code != 2 ||
		!strings.Contains(stderr, "is not a coordinator's address: give https://HOST:PORT") {
		t.Errorf("login without a scheme: exit %d %q", code, stderr)
	}
	if _, stderr, code := cli(t, "login", "--url", srv.URL, "--token", "olv_typo", "--tenant", testTenant); code != 1 ||
		!strings.Contains(stderr, "does not know the token given with --token") || strings.Contains(stderr, "saved") {
		t.Errorf("login with an unknown token: exit %d %q", code, stderr)
	}
	if _, stderr, code := cli(t, "login", "--url", srv.URL, "--token", "olv_given", "--tenant", testTenant); code != 0 {
		t.Fatalf("login: exit %d %s", code, stderr)
	}
	if c := saved(); c.Token != "olv_own1" || !c.Own {
		t.Fatalf("saved %+v, want the login's own credential", c)
	}
	if _, stderr, code := cli(t, "login", "--url", srv.URL, "--token", "olv_given", "--tenant", testTenant); code != 0 {
		t.Fatalf("login again: exit %d %s", code, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if c := saved(); c.Token != "olv_own2" || live["olv_own1"] || !live["olv_own2"] || !live["olv_given"] || strings.Join(revoked, ",") != "olv_own1" {
		t.Errorf("after a second login: saved %q, revoked %q, live %v; want the first login's credential revoked, the given token and the new one live", c.Token, revoked, live)
	}
}

// Issue 32 finding 11: webhook test exits 1 when the receiver did not take
// the delivery, 0 when it did (R-NOTIF-6).
func TestWebhookTestExitStatus(t *testing.T) {
	state := apitypes.DeliveryFailed
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, apitypes.WebhookDelivery{ID: "whd_1", HookID: "wh_1", Event: "test", State: state, Attempts: 1, LastStatus: 410, CreatedAt: fakeCreated, UpdatedAt: fakeCreated})
	})
	out, stderr, code := cli(t, "webhook", "test", "wh_1")
	if code != 1 || !strings.Contains(out, "test delivery whd_1: failed (HTTP 410") || !strings.Contains(stderr, "did not take the test delivery") {
		t.Errorf("a failed test delivery: exit %d, %q %q", code, out, stderr)
	}
	state = apitypes.DeliveryDelivered
	if out, stderr, code := cli(t, "webhook", "test", "wh_1"); code != 0 || stderr != "" {
		t.Errorf("a delivered test: exit %d, %q %q", code, out, stderr)
	}
}

// Issue 32 finding 3: session wait on a run whose tool refused its
// handshake returns at once, non-zero, naming the reason and the tool's
// words; at a timeout it names the state it last read, not "-".
func TestSessionWaitNamesTheReason(t *testing.T) {
	run := apitypes.Run{RunRef: "run_1", State: apitypes.StateFailed, Reason: apitypes.ReasonHandshakeFailed,
		LastError: &apitypes.LastError{Kind: "auth", Message: "session/new: Gemini API key is missing or not configured.", At: fakeCreated}}
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, run) })
	_, stderr, code := cli(t, "session", "wait", "run_1")
	if code != 1 || !strings.Contains(stderr, "run run_1 is failed (no exit observed (handshake_failed)); its tool said: auth: session/new: Gemini API key is missing") {
		t.Errorf("wait on a refused handshake: exit %d %q", code, stderr)
	}
	run = apitypes.Run{RunRef: "run_1", State: apitypes.StateStarting}
	_, stderr, code = cli(t, "session", "wait", "run_1", "--timeout", "300ms")
	if code != 1 || !strings.Contains(stderr, "run run_1 is still starting after 300ms") {
		t.Errorf("wait at its timeout: exit %d %q", code, stderr)
	}
}

// R-ACCT-8: session wait fails for a sign-in the tool refused in the run's
// current generation; one from before a resume (after olivares profile
// login, say) stands in last_error until a turn works, but the resumed
// tool is up, and wait says so.
func TestSessionWaitAfterResume(t *testing.T) {
	refused := fakeCreated.Add(time.Minute)
	resumed := refused.Add(time.Minute)
	run := apitypes.Run{RunRef: "run_1", State: apitypes.StateIdle, Generation: 2, ProviderProfileRef: "prof_1",
		LastError: &apitypes.LastError{Kind: "auth", Message: "Not logged in · Please run /login", At: refused}}
	events := apitypes.EventList{Items: []apitypes.Event{
		{Seq: 1, At: fakeCreated, Kind: "started", Generation: 1},
		{Seq: 2, At: resumed, Kind: "started", Generation: 2},
	}}
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/m/sessions/runs/run_1":
			writeJSON(w, 200, run)
		case "/v1/m/sessions/runs/run_1/events":
			writeJSON(w, 200, events)
		case "/v1/m/sessions/profiles/prof_1":
			writeJSON(w, 200, apitypes.Profile{Ref: "prof_1", Name: "work", Tool: "claude"})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			writeErr(w, 404, "not_found", "no such thing")
		}
	})
	if out, stderr, code := cli(t, "session", "wait", "run_1"); code != 0 || out != "run_1 idle\n" {
		t.Errorf("wait after a resume: exit %d %q %q, want idle", code, out, stderr)
	}
	run.LastError.At = resumed.Add(time.Second) // the resumed tool's turn was refused too
	_, stderr, code := cli(t, "session", "wait", "run_1")
	if code != 1 || !strings.Contains(stderr, "the account of profile work is not signed in") || !strings.Contains(stderr, "run olivares profile login work") {
		t.Errorf("wait after a refused turn: exit %d %q", code, stderr)
	}
}
