package api

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// enrollNode registers a node of tenant with capabilities caps (no tunnel:
// the node is offline).
func enrollNode(t *testing.T, st store.Store, id, tenant, caps string) {
	t.Helper()
	ctx := context.Background()
	tok, _ := auth.NewToken(auth.PrefixJoinToken)
	now := time.Now()
	if err := st.CreateJoinToken(ctx, store.JoinToken{Hash: auth.Hash(tok), NodeID: id, Tenant: tenant, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Enroll(ctx, auth.Hash(tok), now, func(j store.JoinToken) (store.Node, error) {
		return store.Node{ID: id, Tenant: tenant, Hostname: "h-" + id, EnrolledAt: now, Capabilities: []byte(caps)}, nil
	}); err != nil {
		t.Fatal(err)
	}
}

func agentPrincipal(t *testing.T, st store.Store, id string, roles map[string]string) string {
	t.Helper()
	tok, _ := auth.NewToken(auth.PrefixAPIToken)
	p := store.Principal{ID: id, Name: id, Kind: store.KindAgent, Roles: roles, CreatedAt: time.Now()}
	if err := st.CreatePrincipal(context.Background(), p, store.Credential{Hash: auth.Hash(tok), PrincipalID: id, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return tok
}

func callBody(s *Server, method, path, token, tenant, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set(HeaderTenant, tenant)
	rec := httptest.NewRecorder()
	handler(s).ServeHTTP(rec, req)
	return rec
}

const cxThread = "01a23643-8a79-7b72-93b2-655098698f6d"

// TestCodexRouteErrors: the 400, 403 and 404 answers of the Codex routes,
// in R-API-3's order, and the per-host failure of an offline node
// (R-CX-HOST-1/2), all decided on the coordinator.
func TestCodexRouteErrors(t *testing.T) {
	s, st := newTestServer(t)
	sup := `{"codex_supervision":{"transport":"stdio","home_scope":"user"}}`
	enrollNode(t, st, "node-sup", "t1", sup)
	enrollNode(t, st, "node-plain", "t1", `{"pty":true}`)
	enrollNode(t, st, "node-other", "t2", sup)
	op := principal(t, st, "op", map[string]string{"t1": store.RoleOperator})
	robot := agentPrincipal(t, st, "robot", map[string]string{"t1": store.RoleOperator})
	base := Base + "/catalog/codex/threads"
	th := func(host, thread, action string) string { return base + "/" + host + "/" + thread + "/" + action }
	tests := []struct {
		name, method, path, token, body string
		status                          int
		code                            string
	}{
		{"cursor needs a host", "GET", base + "?cursor=abc", op, "", 400, "cursor_needs_host"},
		{"limit 0", "GET", base + "?limit=0", op, "", 400, "bad_limit"},
		{"limit 101", "GET", base + "?limit=101", op, "", 400, "bad_limit"},
		{"no archived view", "GET", base + "?archived=true", op, "", 400, "bad_query"},
		{"search too long", "GET", base + "?search=" + strings.Repeat("x", 2000), op, "", 400, "bad_search"},
		{"unknown host", "GET", base + "?host=node-nope", op, "", 404, "not_found"},
		{"host not opted in", "GET", base + "?host=node-plain", op, "", 404, "not_found"},
		{"another tenant's host", "GET", base + "?host=node-other", op, "", 404, "not_found"},
		{"turns of a bad thread id", "GET", th("node-sup", "x", "turns"), op, "", 400, "bad_thread_id"},
		{"turns of a host not opted in", "GET", th("node-plain", cxThread, "turns"), op, "", 404, "not_found"},
		{"turns of an offline host", "GET", th("node-sup", cxThread, "turns"), op, "", 503, "node_unreachable"},
		{"turns with an unknown parameter", "GET", th("node-sup", cxThread, "turns") + "?archived=1", op, "", 400, "bad_query"},
		{"continue by an agent identity", "POST", th("node-nope", cxThread, "continue"), robot, "", 403, "agent_identity_refused"},
		{"archive by an agent identity", "POST", th("node-sup", cxThread, "archive"), robot, `{"confirmNoOtherRunner":true}`, 403, "agent_identity_refused"},
		{"continue on an unknown host", "POST", th("node-nope", cxThread, "continue"), op, "", 404, "not_found"},
		{"continue with a model", "POST", th("node-sup", cxThread, "continue"), op, `{"model":"gpt-x"}`, 400, "bad_body"},
		{"continue on an offline host", "POST", th("node-sup", cxThread, "continue"), op, "", 503, "node_unreachable"},
		{"archive without confirmation", "POST", th("node-sup", cxThread, "archive"), op, ``, 400, "confirmation_required"},
		{"archive with false", "POST", th("node-sup", cxThread, "archive"), op, `{"confirmNoOtherRunner":false}`, 400, "confirmation_required"},
		{"archive with an unknown field", "POST", th("node-sup", cxThread, "archive"), op, `{"confirmNoOtherRunner":true,"archived":true}`, 400, "bad_body"},
		{"archive on an offline host", "POST", th("node-sup", cxThread, "archive"), op, `{"confirmNoOtherRunner":true}`, 503, "node_unreachable"},
		{"branch of an unknown run", "GET", Base + "/runs/run_nope/codex-branch", op, "", 404, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := callBody(s, tt.method, tt.path, tt.token, "t1", tt.body)
			var b struct {
				Error struct{ Code string } `json:"error"`
			}
			json.Unmarshal(rec.Body.Bytes(), &b)
			if rec.Code != tt.status || b.Error.Code != tt.code {
				t.Errorf("got %d %s, want %d %s", rec.Code, rec.Body, tt.status, tt.code)
			}
		})
	}

	// R-CX-HOST-1/2: the offline host is its own result, with an error
	// and no rows; the node that did not opt in and the other tenant's are
	// not hosts at all.
	rec := callBody(s, "GET", base, op, "t1", "")
	var cat apitypes.CodexCatalog
	if err := json.Unmarshal(rec.Body.Bytes(), &cat); err != nil || rec.Code != 200 {
		t.Fatalf("catalog: %d %s", rec.Code, rec.Body)
	}
	if len(cat.Hosts) != 1 || cat.Hosts[0].Host != "node-sup" || cat.Hosts[0].Hostname != "h-node-sup" ||
		cat.Hosts[0].Error == nil || cat.Hosts[0].Error.Code != "node_unreachable" || cat.Hosts[0].Rows == nil || len(cat.Hosts[0].Rows) != 0 {
		t.Fatalf("catalog %s", rec.Body)
	}
}
