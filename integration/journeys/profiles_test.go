package journeys

import (
	"net/http"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// A profile's policy through the API (R-MOVE-3, Q-53, R-PROF-3, R-PROF-4,
// R-APPR-1, R-APPR-2): a launch held for a
// person answers 202 pending_approval and spawns nothing until a person
// with workspace administration approves it; an inactive profile or a
// workspace it does not allow refuses the launch.
func TestProfilePolicyAndApproval(t *testing.T) {
	f := setup(t, "quic", integration.ProcOptions{})
	var p apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{
		NodeID: f.agent.ID, Tool: "codex", Name: "held", Home: t.TempDir() + "/home", LaunchRequiresApproval: true,
	}, &p)
	if !p.Active || !p.LaunchRequiresApproval {
		t.Fatalf("profile: %+v", p)
	}
	var r apitypes.Run
	f.operator.Must(http.StatusAccepted, http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: f.ws.Ref}, &r)
	if r.State != apitypes.StatePendingApproval || r.PID != 0 {
		t.Fatalf("held launch: %+v", r)
	}
	botID, _ := f.env.PrincipalNamed(integration.Tenant, "bot", store.RoleAdmin, store.KindAgent)
	bot := f.env.Client(f.env.Credential(botID, store.CredSession))
	for _, c := range []struct {
		who  *integration.Client
		code int
	}{{f.viewer, http.StatusForbidden}, {f.operator, http.StatusForbidden}, {bot, http.StatusForbidden}} {
		if got := c.who.Call(http.MethodPost, runURL(r.RunRef, "approve"), nil); got.Status != c.code {
			t.Fatalf("approve: %d %s, want %d", got.Status, got.Body, c.code)
		}
	}
	if got := bot.Call(http.MethodPost, runURL(r.RunRef, "approve"), nil); got.ErrorCode() != "agent_identity_refused" {
		t.Fatalf("agent approve: %s", got.Body)
	}
	f.admin.Must(http.StatusOK, http.MethodPost, runURL(r.RunRef, "approve"), nil, &r)
	if r.Generation != 1 || !apitypes.Live(r.State) {
		t.Fatalf("approved: %+v", r)
	}
	if got := kindsOf(f.viewer.Events(r.RunRef)); len(got) < 4 || got[0] != "created" || got[1] != "approval_requested" || got[2] != "approved" || got[3] != "started" {
		t.Fatalf("events: %v", got)
	}
	if got := f.admin.Call(http.MethodPost, runURL(r.RunRef, "approve"), nil); got.Status != http.StatusConflict {
		t.Fatalf("second approve: %d", got.Status)
	}

	// Inactive: 409; a workspace of another tenant in the policy: 404.
	no := false
	f.admin.Must(http.StatusOK, http.MethodPatch, "/v1/m/sessions/profiles/"+p.Ref, apitypes.ProfileUpdate{Active: &no}, &p)
	if got := f.operator.Call(http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: p.Ref}); got.Status != http.StatusConflict || got.ErrorCode() != "profile_inactive" {
		t.Fatalf("launch on an inactive profile: %d %s", got.Status, got.Body)
	}
	if got := f.admin.Call(http.MethodPatch, "/v1/m/sessions/profiles/"+p.Ref, map[string]any{"allowed_workspaces": []string{"ws_0000000000000000"}}); got.Status != http.StatusNotFound {
		t.Fatalf("policy naming an unknown workspace: %d", got.Status)
	}
	if got := f.operator.Call(http.MethodPatch, "/v1/m/sessions/profiles/"+p.Ref, apitypes.ProfileUpdate{Active: &no}); got.Status != http.StatusForbidden {
		t.Fatalf("operator PATCH: %d, want 403", got.Status)
	}
	yes := true
	other := []string{f.ws.Ref}
	f.admin.Must(http.StatusOK, http.MethodPatch, "/v1/m/sessions/profiles/"+p.Ref, apitypes.ProfileUpdate{Active: &yes, AllowedWorkspaces: &other, LaunchRequiresApproval: &no}, &p)
	if got := f.operator.Call(http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: p.Ref}); got.Status != http.StatusConflict || got.ErrorCode() != "workspace_not_allowed" {
		t.Fatalf("launch outside the allowed workspaces: %d %s", got.Status, got.Body)
	}
	f.operator.Must(http.StatusCreated, http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: f.ws.Ref}, nil)
}

func kindsOf(evs []apitypes.Event) []string { return integration.Kinds(evs) }
