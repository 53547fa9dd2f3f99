package api

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// bodyless lists the routes that take no body. TestBodylessRoutes checks
// that every other mutating route refuses a bad body too, so a new route
// without a body must call noBody and be listed here. The value says
// whether the walk also sends it an empty body and {}: not for the routes
// whose effect would end the walk (logging its own credential out,
// forgetting its node).
var bodyless = map[string]bool{
	"POST /v1/nodes/:id/revoke":                    true,
	"DELETE /v1/nodes/:id":                         false,
	"POST /v1/principals/:id/revoke":               true,
	"POST /v1/credentials/:id/revoke":              true,
	"POST /v1/logout":                              false,
	"POST " + Base + "/runs/:ref/interrupt":        true,
	"POST " + Base + "/runs/:ref/stop":             true,
	"POST " + Base + "/runs/:ref/resume":           true,
	"POST " + Base + "/runs/:ref/approve":          true,
	"POST " + Base + "/runs/:ref/pin":              true,
	"DELETE " + Base + "/runs/:ref/pin":            true,
	"DELETE " + Base + "/runs/:ref/snooze":         true,
	"POST " + Base + "/runs/:ref/done":             true,
	"DELETE " + Base + "/runs/:ref/done":           true,
	"POST " + Base + "/runs/:ref/archive":          true,
	"DELETE " + Base + "/runs/:ref/archive":        true,
	"DELETE " + Base + "/runs/:ref":                true,
	"DELETE " + Base + "/vault/secrets/:ref":       true,
	"DELETE " + Base + "/profiles/:ref":            false,
	"DELETE " + Base + "/workspaces/:ref":          false,
	"POST " + Base + "/profiles/:ref/signin":       true,
	"DELETE " + Base + "/profiles/:ref/signin/:id": true,
}

// Issue 16, R-API-7: every route without a body has one behaviour: an
// empty body or {} is accepted, anything else is 400 bad_body before any
// effect; no other mutating route acts on such a body either. cleanup alone accepts any body (R-CLN-2). The refs of the
// walk exist, so the answer is not the lookup's 404 (R-API-3); the node is
// offline, so an accepted call ends at the node (503), after the body check.
func TestBodylessRoutes(t *testing.T) {
	s, st := newTestServer(t)
	ctx := context.Background()
	enrollNode(t, st, "node-1", "t1", `{"pty":true,"worktree_dir_configured":false,"clis":[],"codex_supervision":{"transport":"stdio","home_scope":"user"}}`)
	admin := principal(t, st, "adm", map[string]string{"t1": store.RoleAdmin})
	now := time.Now().UTC()
	if _, err := st.PutRun(ctx, apitypes.Run{RunRef: "run_1", Tenant: "t1", NodeID: "node-1", State: apitypes.StateIdle, Driver: "codex", Isolation: apitypes.IsolationNative, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateWorkspace(ctx, apitypes.Workspace{Ref: "ws_1", Tenant: "t1", NodeID: "node-1", Name: "w", Path: "/w"}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateProfile(ctx, apitypes.Profile{Ref: "prof_1", Tenant: "t1", NodeID: "node-1", Tool: "codex", Name: "p"}); err != nil {
		t.Fatal(err)
	}
	params := strings.NewReplacer("workspaces/:ref", "workspaces/ws_1", "profiles/:ref", "profiles/prof_1",
		"secrets/:ref", "secrets/sec_1", "runs/:ref", "runs/run_1", ":id", "node-1", ":host", "node-1", ":thread", cxThread)
	secret := func() {
		st.DeleteSecret(ctx, "sec_1")
		if err := st.CreateSecret(ctx, store.Secret{Ref: "sec_1", Tenant: "t1", Name: "s", CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	seen := 0
	for _, r := range s.Routes() {
		if r.Method == http.MethodGet || strings.HasSuffix(r.Path, "/cleanup") {
			continue
		}
		key := r.Method + " " + r.Path
		path := params.Replace(r.Path)
		for _, body := range []string{`{"bogus_field_x":1}`, `not json`, `{} {}`, `[]`} {
			secret()
			rec := callBody(s, r.Method, path, admin, "t1", body)
			// A route with a body may answer a precondition first (no
			// vault, a host without Codex supervision); none acts.
			if rec.Code < 300 {
				t.Errorf("%s with body %s: got %d %s, want a refusal", key, body, rec.Code, rec.Body)
			}
			if _, ok := bodyless[key]; ok && (rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"bad_body"`)) {
				t.Errorf("%s with body %s: got %d %s, want 400 bad_body", key, body, rec.Code, rec.Body)
			}
		}
		accept, ok := bodyless[key]
		if ok {
			seen++
		}
		if !accept {
			continue
		}
		for _, body := range []string{``, `{}`, " {}\n"} {
			secret()
			if rec := callBody(s, r.Method, path, admin, "t1", body); rec.Code == http.StatusBadRequest {
				t.Errorf("%s with body %q: got 400 %s, want it accepted", key, body, rec.Body)
			}
		}
	}
	if want := len(bodyless); seen != want {
		t.Errorf("walked %d bodyless routes, want %d: the table lists a route that is gone", seen, want)
	}
}

// R-API-10: GET /runs/{ref}/messages, /events, /attach and /requests refuse an unknown
// query parameter (400 bad_query) like every other GET, before they ask the
// node (issue 16).
func TestRunReadsRefuseUnknownQuery(t *testing.T) {
	s, st := newTestServer(t)
	enrollNode(t, st, "node-1", "t1", `{}`)
	op := principal(t, st, "op", map[string]string{"t1": store.RoleOperator})
	if _, err := st.PutRun(context.Background(), apitypes.Run{RunRef: "run_1", Tenant: "t1", NodeID: "node-1", State: apitypes.StateIdle, Driver: "codex", Isolation: apitypes.IsolationNative}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q    string
		want int
	}{
		{"messages?bogus=1", 400}, {"messages?role=all&limt=5", 400}, {"messages?role=all&limit=5&text=1", 503}, {"messages", 503},
		{"events?bogus=1", 400}, {"events?after=1&limit=5", 503},
		{"attach?form=1", 400}, {"attach?from=1", 503},
		{"requests?state=pending", 400}, {"requests", 503},
	} {
		rec := call(s, http.MethodGet, Base+"/runs/run_1/"+tc.q, op, "t1")
		if rec.Code != tc.want {
			t.Errorf("%s: got %d %s, want %d", tc.q, rec.Code, rec.Body, tc.want)
		}
	}
}
