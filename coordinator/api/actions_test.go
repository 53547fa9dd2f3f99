package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-NOTIF-11: act_as is the administrator adding the webhook or a person
// of the tenant with the operator role, nobody else; the webhook shows it.
func TestWebhookActAs(t *testing.T) {
	rc := newReceiver(t)
	s, st := newTestServer(t, allowLoopback(t))
	t.Cleanup(s.Close)
	admin := principal(t, st, "ada", map[string]string{"t1": store.RoleAdmin})
	principal(t, st, "olga", map[string]string{"t1": store.RoleOperator})
	principal(t, st, "bea", map[string]string{"t1": store.RoleAdmin})
	principal(t, st, "vic", map[string]string{"t1": store.RoleViewer})
	principal(t, st, "out", map[string]string{"t2": store.RoleOperator})
	for _, who := range []string{"bea", "vic", "out", "nobody"} {
		rec := doJSON(t, s, http.MethodPost, Base+"/webhooks", admin, `{"url":"`+rc.srv.URL+`","act_as":"`+who+`"}`)
		if rec.Code != 400 || errCode(rec) != "bad_act_as" {
			t.Errorf("act_as %s: %d %s, want 400 bad_act_as", who, rec.Code, rec.Body)
		}
	}
	for _, who := range []string{"ada", "olga"} {
		rec := doJSON(t, s, http.MethodPost, Base+"/webhooks", admin, `{"url":"`+rc.srv.URL+`","act_as":"`+who+`"}`)
		var w apitypes.Webhook
		if json.Unmarshal(rec.Body.Bytes(), &w); rec.Code != 201 || w.ActAs != who {
			t.Fatalf("act_as %s: %d %s", who, rec.Code, rec.Body)
		}
		stored, err := st.GetWebhook(t.Context(), w.ID)
		if err != nil || stored.ActAs != who || !strings.HasPrefix(stored.ActionBase, "http://") {
			t.Fatalf("stored %+v %v: want act_as %s and the address it was added through", stored, err, who)
		}
	}
}

// R-NOTIF-11: an action URL is refused when any byte of its token
// changed, when its webhook is gone, and past its request's expiry; GET
// never settles: it shows one button, sends no referrer and is not
// cached.
func TestActionURLTokens(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	s, st := newTestServer(t, func(o *Options) { o.Now = func() time.Time { return now } })
	t.Cleanup(s.Close)
	principal(t, st, "olga", map[string]string{"t1": store.RoleOperator})
	h := store.Webhook{ID: "wh_1", Tenant: "t1", URL: "https://hooks.example/x", Secret: "whsec_test", ActAs: "olga",
		ActionBase: "https://olivares.example", CreatedAt: now}
	if err := st.CreateWebhook(t.Context(), h, apitypes.AuditEntry{At: now, Tenant: "t1", Event: apitypes.AuditWebhookCreated,
		Actor: apitypes.AuditActor{CredentialID: "c", Kind: apitypes.ActorHuman}}); err != nil {
		t.Fatal(err)
	}
	exp := now.Add(10 * time.Minute)
	q := apitypes.RunRequest{ID: "req_0123456789abcdef", Kind: "command", Title: "Bash", AskedAt: now, ExpiresAt: &exp, State: "pending",
		Options: []apitypes.RequestOption{{ID: "allow_once", Label: "Allow once", Decision: "allow"},
			{ID: "allow_session", Label: "Allow for this session", Decision: "allow", Session: true}, {ID: "deny", Label: "Deny", Decision: "deny"}}}
	acts := webhookActions(h, q, "run_1", now)
	if len(acts) != 3 || acts[0].OptionID != "allow_once" || acts[2].Decision != "deny" {
		t.Fatalf("actions %+v: want one per allow or deny option", acts)
	}
	u := acts[0].URL
	if !strings.HasPrefix(u, "https://olivares.example"+ActionPath) {
		t.Fatalf("url %q", u)
	}
	path := strings.TrimPrefix(u, "https://olivares.example")
	tok := strings.TrimPrefix(path, ActionPath)

	get := call(s, http.MethodGet, path, "", "")
	if get.Code != 200 || !strings.Contains(get.Body.String(), `<form method="post">`) || get.Header().Get("Referrer-Policy") != "no-referrer" ||
		get.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("GET: %d %v %s", get.Code, get.Header(), get.Body)
	}
	// Every changed byte is refused, before the node is asked.
	for i := range tok {
		for _, c := range []byte{'A', 'x', '_'} {
			if tok[i] == c {
				continue
			}
			bad := tok[:i] + string(c) + tok[i+1:]
			rec := call(s, http.MethodPost, ActionPath+bad, "", "")
			if rec.Code != http.StatusForbidden || errCode(rec) != "action_refused" {
				t.Fatalf("token with byte %d changed to %c: %d %s, want 403 action_refused", i, c, rec.Code, rec.Body)
			}
			break
		}
	}
	if rec := call(s, http.MethodPost, path+"x", "", ""); rec.Code != http.StatusForbidden {
		t.Fatalf("a longer token: %d %s", rec.Code, rec.Body)
	}
	// Past the request's expiry.
	now = exp
	if rec := call(s, http.MethodPost, path, "", ""); rec.Code != http.StatusConflict || errCode(rec) != "request_expired" {
		t.Fatalf("expired: %d %s", rec.Code, rec.Body)
	}
	if rec := call(s, http.MethodGet, path, "", ""); rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "expired") {
		t.Fatalf("expired page: %d %s", rec.Code, rec.Body)
	}
	// Deleting the webhook revokes its URLs.
	now = exp.Add(-time.Minute)
	if err := st.DeleteWebhook(t.Context(), h.ID, apitypes.AuditEntry{At: now, Tenant: "t1", Event: apitypes.AuditWebhookDeleted,
		Actor: apitypes.AuditActor{CredentialID: "c", Kind: apitypes.ActorHuman}}); err != nil {
		t.Fatal(err)
	}
	if rec := call(s, http.MethodPost, path, "", ""); rec.Code != http.StatusForbidden || errCode(rec) != "action_refused" {
		t.Fatalf("deleted webhook: %d %s", rec.Code, rec.Body)
	}
	// A webhook without act_as gets no URLs.
	h.ActAs = ""
	if a := webhookActions(h, q, "run_1", now); a != nil {
		t.Fatalf("no act_as: %+v", a)
	}
}

// R-NOTIF-10: a push for a decision carries the request and the tool's
// options reduced to Allow once and Deny (Answer for a question), and
// fits a push service's 4 KiB however long the command or the file list.
func TestPushCarriesTheRequest(t *testing.T) {
	q := apitypes.RunRequest{ID: "req_0123456789abcdef", Kind: "file_change", Tool: "Edit", Title: "Edit main.go",
		Detail: apitypes.RequestDetail{Command: strings.Repeat("é", 5000), Cwd: "/srv/app",
			Diff: "--- a/x\n+++ b/x\n-old\n+new\n+more\n--- a/y\n+++ b/y\n+y\n"},
		Options: []apitypes.RequestOption{{ID: "allow_session", Decision: "allow", Session: true}, {ID: "yes", Decision: "allow"}, {ID: "no", Decision: "deny"}}}
	for i := 0; i < 200; i++ {
		q.Detail.Files = append(q.Detail.Files, "/srv/app/"+strings.Repeat("d", 150)+".go")
	}
	b := withRequest(apitypes.PushMessage{Title: "t", URL: "/runs/r", Tag: "r:needs_decision"}, "t1", q, 2)
	if len(b) > maxPushPlain {
		t.Fatalf("a push of %d bytes, over %d", len(b), maxPushPlain)
	}
	var m apitypes.PushMessage
	if err := json.Unmarshal(b, &m); err != nil || m.Request == nil || m.Tenant != "t1" || m.Request.Pending != 2 ||
		m.Request.DiffSummary != "+3 −1 in 2 files" || m.Request.Cwd != "/srv/app" {
		t.Fatalf("push %s (%v)", b, err)
	}
	if len(m.Actions) != 2 || m.Actions[0].OptionID != "yes" || m.Actions[0].Title != "Allow once" || m.Actions[1].OptionID != "no" {
		t.Fatalf("actions %+v: want Allow once (yes), Deny (no)", m.Actions)
	}
	q.Kind = "question"
	if a := pushActions(q); len(a) != 1 || a[0].Action != "answer" {
		t.Fatalf("a question's actions %+v", a)
	}
}

// R-NOTIF-11: behind a TLS proxy the coordinator's public address
// ([api] public_url) starts the action URLs, not the address the webhook
// was added through.
func TestWebhookActionBasePublicURL(t *testing.T) {
	rc := newReceiver(t)
	s, st := newTestServer(t, allowLoopback(t), func(o *Options) { o.PublicURL = "https://olivares.example.com" })
	t.Cleanup(s.Close)
	admin := principal(t, st, "ada", map[string]string{"t1": store.RoleAdmin})
	rec := doJSON(t, s, http.MethodPost, Base+"/webhooks", admin, `{"url":"`+rc.srv.URL+`","act_as":"ada"}`)
	var w apitypes.Webhook
	if json.Unmarshal(rec.Body.Bytes(), &w); rec.Code != 201 {
		t.Fatalf("POST /webhooks: %d %s", rec.Code, rec.Body)
	}
	stored, err := st.GetWebhook(t.Context(), w.ID)
	if err != nil || stored.ActionBase != "https://olivares.example.com" {
		t.Fatalf("stored action base %q %v, want the public URL", stored.ActionBase, err)
	}
	q := apitypes.RunRequest{ID: "req_1", Kind: "command", AskedAt: time.Now(), Options: []apitypes.RequestOption{{ID: "yes", Decision: "allow"}}}
	if a := webhookActions(stored, q, "run_1", time.Now()); len(a) != 1 || !strings.HasPrefix(a[0].URL, "https://olivares.example.com"+ActionPath) {
		t.Fatalf("action URLs %+v", a)
	}
}
