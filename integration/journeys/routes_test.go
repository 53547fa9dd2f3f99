package journeys

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The run routes' refusals, in R-API-3 order, each with a stable code.
func TestRunRouteRefusals(t *testing.T) {
	f := setup(t, "yamux", integration.ProcOptions{})
	p := f.profile("codex")
	r := f.launch(p)
	base := "/v1/m/sessions/runs/"
	check := func(c *integration.Client, method, path string, body any, status int, code string) {
		t.Helper()
		got := c.Call(method, path, body)
		if got.Status != status || (code != "" && got.ErrorCode() != code) {
			t.Errorf("%s %s: %d %s, want %d %s", method, path, got.Status, got.Body, status, code)
		}
	}
	// R-TEN-3: another tenant's run, profile and workspace are 404.
	other := f.env.Client(f.env.Principal("other", store.RoleAdmin, store.KindHuman))
	other.Tenant = "other"
	check(other, http.MethodGet, base+r.RunRef, nil, http.StatusNotFound, "not_found")
	check(other, http.MethodPost, base+r.RunRef+"/stop", nil, http.StatusNotFound, "not_found")
	check(other, http.MethodPost, "/v1/m/sessions/runs", apitypes.LaunchRequest{ProviderProfileRef: p.Ref}, http.StatusNotFound, "not_found")
	var list apitypes.RunList
	other.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs", nil, &list)
	if len(list.Items) != 0 {
		t.Errorf("another tenant lists %d runs (R-LIST-6)", len(list.Items))
	}
	op := f.operator
	// R-API-7: unknown fields; R-IN-2: exactly one input field; R-IN-3: 413.
	check(op, http.MethodPost, "/v1/m/sessions/runs", map[string]any{"provider_profile_ref": p.Ref, "prompt": "x"}, http.StatusBadRequest, "bad_body")
	check(op, http.MethodPost, "/v1/m/sessions/runs", apitypes.LaunchRequest{}, http.StatusBadRequest, "profile_required")
	check(op, http.MethodPost, "/v1/m/sessions/runs", apitypes.LaunchRequest{ProviderProfileRef: "prof_0000000000000000"}, http.StatusNotFound, "not_found")
	check(op, http.MethodPost, "/v1/m/sessions/runs", apitypes.LaunchRequest{ProviderProfileRef: p.Ref, Isolation: "container"}, http.StatusUnprocessableEntity, "isolation_unsupported")
	check(op, http.MethodPost, "/v1/m/sessions/runs", apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorktreeFrom: "main"}, http.StatusUnprocessableEntity, "worktree_from_without_worktree")
	check(op, http.MethodPost, base+r.RunRef+"/input", map[string]any{"text": "a", "message": "b"}, http.StatusBadRequest, "invalid_input")
	check(op, http.MethodPost, base+r.RunRef+"/input", map[string]any{}, http.StatusBadRequest, "invalid_input")
	check(op, http.MethodPost, base+r.RunRef+"/input", map[string]any{"text": "a", "x": 1}, http.StatusBadRequest, "bad_body")
	big := []byte(`{"text":"` + strings.Repeat("a", 1<<20) + `"}`)
	check(op, http.MethodPost, base+r.RunRef+"/input", big, http.StatusRequestEntityTooLarge, "body_too_large")
	// Query validation (R-LIST-5, R-ATT-4).
	check(op, http.MethodGet, "/v1/m/sessions/runs?limit=0", nil, http.StatusBadRequest, "bad_query")
	check(op, http.MethodGet, "/v1/m/sessions/runs?limit=201", nil, http.StatusBadRequest, "bad_query")
	check(op, http.MethodGet, "/v1/m/sessions/runs?state=busy", nil, http.StatusBadRequest, "bad_query")
	check(op, http.MethodGet, "/v1/m/sessions/runs?pagination=cursor&cursor=zzz", nil, http.StatusBadRequest, "bad_cursor")
	check(op, http.MethodGet, base+r.RunRef+"/attach?from=-1", nil, http.StatusBadRequest, "bad_query")
	check(op, http.MethodGet, base+"run_0000000000000000", nil, http.StatusNotFound, "not_found")
	// The filters match the rows (R-LIST-1).
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	op.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs?state=idle", nil, &list)
	if len(list.Items) != 1 || list.Items[0].RunRef != r.RunRef {
		t.Errorf("state=idle lists %s", mustJSON(list))
	}
	op.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs?state=stopped", nil, &list)
	if len(list.Items) != 0 {
		t.Errorf("state=stopped lists %s", mustJSON(list))
	}
	// The node, profile, workspace and tool filters (R-LIST-7).
	for _, q := range []struct {
		query string
		n     int
	}{
		{"node_id=" + r.NodeID, 1}, {"node_id=node-other", 0},
		{"provider_profile_ref=" + r.ProviderProfileRef, 1}, {"provider_profile_ref=prof_other", 0},
		{"driver=" + r.Driver, 1}, {"driver=grok", 0},
		{"workspace_ref=ws_other", 0},
		{"driver=" + r.Driver + "&state=idle&node_id=" + r.NodeID, 1},
	} {
		op.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs?"+q.query, nil, &list)
		if len(list.Items) != q.n {
			t.Errorf("%s lists %d runs, want %d", q.query, len(list.Items), q.n)
		}
	}
	// The tool's requests (R-REQ-2): an empty list; an unknown or
	// malformed id is 404, a bad decision or field 400, an agent identity
	// may not answer; a bad approval policy is 400 (R-REQ-10..12).
	var reqs apitypes.RequestList
	f.viewer.Must(http.StatusOK, http.MethodGet, base+r.RunRef+"/requests", nil, &reqs)
	if reqs.Items == nil || len(reqs.Items) != 0 {
		t.Errorf("requests of a run that asked nothing: %s", mustJSON(reqs))
	}
	check(op, http.MethodPost, base+r.RunRef+"/requests/req_0000000000000000", apitypes.RequestAnswer{Decision: "allow"}, http.StatusNotFound, "request_not_found")
	check(op, http.MethodPost, base+r.RunRef+"/requests/nope", apitypes.RequestAnswer{Decision: "allow"}, http.StatusNotFound, "request_not_found")
	check(op, http.MethodPost, base+r.RunRef+"/requests/req_0000000000000000", apitypes.RequestAnswer{Decision: "maybe"}, http.StatusBadRequest, "bad_answer")
	check(op, http.MethodPost, base+r.RunRef+"/requests/req_0000000000000000", map[string]any{"decision": "allow", "why": "x"}, http.StatusBadRequest, "bad_body")
	check(f.viewer, http.MethodPost, base+r.RunRef+"/requests/req_0000000000000000", apitypes.RequestAnswer{Decision: "allow"}, http.StatusForbidden, "permission_denied")
	bot := f.env.Client(f.env.Principal(integration.Tenant, store.RoleOperator, store.KindAgent))
	check(bot, http.MethodPost, base+r.RunRef+"/requests/req_0000000000000000", apitypes.RequestAnswer{Decision: "allow"}, http.StatusForbidden, "agent_identity_refused")
	check(f.admin, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "codex", Name: "pol1", Approvals: "sometimes"}, http.StatusBadRequest, "bad_policy")
	check(f.admin, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "codex", Name: "pol2", AskTimeout: "1y"}, http.StatusBadRequest, "bad_policy")
	check(f.admin, http.MethodPatch, "/v1/m/sessions/profiles/"+p.Ref, map[string]any{"approval_rules": []any{map[string]any{"pattern": "*", "action": "allow"}}}, http.StatusBadRequest, "bad_policy")
	// Interrupt and resume of a stopped run: 409 and 200.
	f.post(op, http.StatusOK, r.RunRef, "stop", nil, nil)
	check(op, http.MethodPost, base+r.RunRef+"/interrupt", nil, http.StatusConflict, "not_live")
	// Workspaces: a relative path and a missing directory are refused, a
	// name is unique in the tenant.
	check(f.admin, http.MethodPost, "/v1/m/sessions/workspaces", apitypes.WorkspaceCreate{NodeID: f.agent.ID, Path: "rel", Name: "x"}, http.StatusBadRequest, "bad_path")
	check(f.admin, http.MethodPost, "/v1/m/sessions/workspaces", apitypes.WorkspaceCreate{NodeID: f.agent.ID, Path: "/nonexistent/dir", Name: "y"}, http.StatusUnprocessableEntity, "bad_path")
	check(f.admin, http.MethodPost, "/v1/m/sessions/workspaces", apitypes.WorkspaceCreate{NodeID: f.agent.ID, Path: f.wsDir, Name: "w"}, http.StatusConflict, "name_taken")
	check(op, http.MethodPost, "/v1/m/sessions/workspaces", apitypes.WorkspaceCreate{NodeID: f.agent.ID, Path: f.wsDir, Name: "z"}, http.StatusForbidden, "permission_denied")
	// Profiles: an env that sets a variable derived from the home.
	check(f.admin, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "codex", Name: "bad", Env: map[string]string{"CODEX_HOME": "/tmp"}}, http.StatusBadRequest, "bad_env")
	check(f.admin, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "aider", Name: "g"}, http.StatusBadRequest, "unknown_tool")
	// A profile whose tool is not on the node's PATH: 422 at launch.
	var noTool apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "codex", Name: "nopath", Env: map[string]string{"PATH": "/nonexistent"}}, &noTool)
	check(op, http.MethodPost, "/v1/m/sessions/runs", apitypes.LaunchRequest{ProviderProfileRef: noTool.Ref}, http.StatusUnprocessableEntity, "tool_not_found")
	if bytes.Contains(f.admin.Call(http.MethodGet, "/v1/m/sessions/profiles/"+noTool.Ref, nil).Body, []byte("/nonexistent")) {
		t.Error("a profile's env values are shown; only their names may be")
	}
}
