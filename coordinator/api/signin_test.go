package api

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-ACCT-10: what a node reports of ended sign-ins. An end of a profile
// the node holds is audited once, by the node, and takes only the
// env_keys it names into the index (the coordinator's own fields stay);
// an end of another node's profile, or a profile the node names falsely,
// changes nothing; every end is answered taken, so none is sent again.
func TestSigninsEnded(t *testing.T) {
	s, st := newTestServer(t)
	ctx := t.Context()
	for _, p := range []apitypes.Profile{
		{Ref: "prof_a", Tenant: "t1", NodeID: "node-a", Tool: "claude", Name: "a", OnLimit: []string{"continue_at_reset"}, APIKeyRef: "sec_1"},
		{Ref: "prof_b", Tenant: "t1", NodeID: "node-b", Tool: "claude", Name: "b"},
	} {
		if err := st.CreateProfile(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	var signins *signinAPI
	for _, f := range s.features {
		if v, ok := f.(*signinAPI); ok {
			signins = v
		}
	}
	obs := fleetObserver{s.core, signins}
	signedIn := apitypes.SigninAttempt{ID: "signin_1", ProfileRef: "prof_a", Tool: "claude", State: apitypes.SigninSignedIn, Message: "signed in",
		Profile: &apitypes.Profile{Ref: "prof_a", NodeID: "node-a", Name: "renamed", EnvKeys: []string{"CLAUDE_CODE_OAUTH_TOKEN"}}}
	other := apitypes.SigninAttempt{ID: "signin_2", ProfileRef: "prof_b", Tool: "claude", State: apitypes.SigninFailed, Message: "x"}
	spoof := apitypes.SigninAttempt{ID: "signin_3", ProfileRef: "prof_a", Tool: "claude", State: apitypes.SigninSignedIn,
		Profile: &apitypes.Profile{Ref: "prof_b", EnvKeys: []string{"EVIL"}}}
	live := apitypes.SigninAttempt{ID: "signin_4", ProfileRef: "prof_a", Tool: "claude", State: apitypes.SigninWaitingForCode}
	for range 2 { // the second time, as a node that did not hear the answer
		taken := obs.SigninsEnded(ctx, "node-a", []apitypes.SigninAttempt{signedIn, other, spoof, live})
		if want := []string{"signin_1", "signin_2", "signin_3", "signin_4"}; !slices.Equal(taken, want) {
			t.Fatalf("taken %v, want %v", taken, want)
		}
	}
	a, _ := st.GetProfile(ctx, "prof_a")
	if !slices.Equal(a.EnvKeys, []string{"CLAUDE_CODE_OAUTH_TOKEN"}) || a.Name != "a" || a.APIKeyRef != "sec_1" || len(a.OnLimit) != 1 || a.NodeID != "node-a" {
		t.Fatalf("profile a after the report: %+v, want the token's name added and nothing else changed", a)
	}
	if b, _ := st.GetProfile(ctx, "prof_b"); len(b.EnvKeys) != 0 || b.NodeID != "node-b" {
		t.Fatalf("another node's profile after the report: %+v, want it untouched", b)
	}
	finished, _, err := st.ListAudit(ctx, store.AuditQuery{Tenant: "t1", Event: apitypes.AuditProfileSigninFinished})
	if err != nil {
		t.Fatal(err)
	}
	if len(finished) != 2 {
		t.Fatalf("%d signin_finished rows, want 2 (signin_1 and signin_3, each once)", len(finished))
	}
	var d map[string]string
	if err := json.Unmarshal(finished[0].Detail, &d); err != nil || d["signin_id"] != "signin_1" || d["signin_state"] != apitypes.SigninSignedIn ||
		finished[0].Actor.Kind != apitypes.ActorNode || finished[0].Actor.CredentialID != "node-a" {
		t.Fatalf("the finished row %+v (%s), want signin_1 by node-a", finished[0], finished[0].Detail)
	}
}
