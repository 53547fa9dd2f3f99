package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// TestClaudeRouteErrors: the 400, 403 and 404 answers of the Claude Code
// routes, decided on the coordinator: a node that did not opt in is no host
// (R-CL-PERM-1), continue needs a person (R-CL-PERM-3), and an offline
// host is its own result in the catalog (R-CL-CAT-2).
func TestClaudeRouteErrors(t *testing.T) {
	s, st := newTestServer(t)
	sup := `{"claude_supervision":{"homes":1}}`
	enrollNode(t, st, "node-sup", "t1", sup)
	enrollNode(t, st, "node-plain", "t1", `{"pty":true,"codex_supervision":{"transport":"stdio","home_scope":"user"}}`)
	enrollNode(t, st, "node-other", "t2", sup)
	op := principal(t, st, "op", map[string]string{"t1": store.RoleOperator})
	robot := agentPrincipal(t, st, "robot", map[string]string{"t1": store.RoleOperator})
	base := Base + "/catalog/claude/sessions"
	se := func(host, session, action string) string { return base + "/" + host + "/" + session + "/" + action }
	for _, tt := range []struct {
		name, method, path, token, body string
		status                          int
		code                            string
	}{
		{"cursor needs a host", "GET", base + "?cursor=2", op, "", 400, "cursor_needs_host"},
		{"limit 101", "GET", base + "?limit=101", op, "", 400, "bad_limit"},
		{"unknown parameter", "GET", base + "?archived=1", op, "", 400, "bad_query"},
		{"search too long", "GET", base + "?search=" + strings.Repeat("x", 2000), op, "", 400, "bad_search"},
		{"host not opted in", "GET", base + "?host=node-plain", op, "", 404, "not_found"},
		{"another tenant's host", "GET", base + "?host=node-other", op, "", 404, "not_found"},
		{"messages of a bad session id", "GET", se("node-sup", "x", "messages"), op, "", 400, "bad_session_id"},
		{"messages of a host not opted in", "GET", se("node-plain", cxThread, "messages"), op, "", 404, "not_found"},
		{"messages of an offline host", "GET", se("node-sup", cxThread, "messages"), op, "", 503, "node_unreachable"},
		{"continue by an agent identity", "POST", se("node-sup", cxThread, "continue"), robot, "", 403, "agent_identity_refused"},
		{"continue with a field", "POST", se("node-sup", cxThread, "continue"), op, `{"profile":"p"}`, 400, "bad_body"},
		{"continue on a host not opted in", "POST", se("node-plain", cxThread, "continue"), op, "", 404, "not_found"},
		{"continue on an offline host", "POST", se("node-sup", cxThread, "continue"), op, "", 503, "node_unreachable"},
	} {
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
	rec := callBody(s, "GET", base, op, "t1", "")
	var cat apitypes.ClaudeCatalog
	if err := json.Unmarshal(rec.Body.Bytes(), &cat); err != nil || rec.Code != 200 {
		t.Fatalf("catalog: %d %s", rec.Code, rec.Body)
	}
	if len(cat.Hosts) != 1 || cat.Hosts[0].Host != "node-sup" || cat.Hosts[0].Error == nil ||
		cat.Hosts[0].Error.Code != "node_unreachable" || cat.Hosts[0].Rows == nil || len(cat.Hosts[0].Rows) != 0 {
		t.Fatalf("catalog %s", rec.Body)
	}
}
