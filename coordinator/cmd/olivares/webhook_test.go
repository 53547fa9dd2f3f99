package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-NOTIF-11: `webhook add --act-as` sends act_as; `webhook list` says
// whom each webhook's action links answer as.
func TestWebhookActAsFlag(t *testing.T) {
	var body string
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "POST /v1/m/sessions/webhooks":
			b, _ := io.ReadAll(r.Body)
			body = string(b)
			writeJSON(w, 201, apitypes.Webhook{ID: "wh_1", URL: "https://bot.example/x", Reasons: []string{}, ActAs: "prn_olga", Secret: "whsec_x", CreatedAt: time.Now()})
		case "GET /v1/m/sessions/webhooks":
			writeJSON(w, 200, apitypes.WebhookList{Items: []apitypes.Webhook{{ID: "wh_1", URL: "https://bot.example/x", Reasons: []string{}, ActAs: "prn_olga", CreatedAt: time.Now()}}})
		case "GET /v1/whoami":
			writeJSON(w, 200, apitypes.Whoami{PrincipalID: "prn_me", Name: "me", Kind: "human", Tenant: "default", Role: "admin", Permissions: []string{}})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	})
	if _, stderr, code := cli(t, "webhook", "add", "https://bot.example/x", "--act-as", "prn_olga"); code != 0 || !strings.Contains(body, `"act_as":"prn_olga"`) {
		t.Fatalf("webhook add: exit %d stderr %q body %s", code, stderr, body)
	}
	// --act-as me is the caller (the README's tour).
	if _, stderr, code := cli(t, "webhook", "add", "https://bot.example/x", "--act-as", "me"); code != 0 || !strings.Contains(body, `"act_as":"prn_me"`) {
		t.Fatalf("webhook add --act-as me: exit %d stderr %q body %s", code, stderr, body)
	}
	if out, stderr, code := cli(t, "webhook", "list"); code != 0 || !strings.Contains(out, "ACTS AS") || !strings.Contains(out, "prn_olga") {
		t.Fatalf("webhook list: exit %d out %q stderr %q", code, out, stderr)
	}
}
