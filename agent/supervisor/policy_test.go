package supervisor_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// TestApprovalHoldsLaunchAndResume: a profile whose policy wants a
// person's approval holds a launch and a resume without spawning anything
// (Q-53, R-STATE-3 row 2, R-APPR-1); approve lets each go on with approved
// then started (R-CRT-4, R-APPR-2); a held run survives an agent restart as it was.
func TestApprovalHoldsLaunchAndResume(t *testing.T) {
	e, store := fakeEnv(t)
	ctx := context.Background()
	if _, err := e.reg.CreateProfile(registry.ProfileParams{Ref: "prof_held1", Tenant: tenant, Tool: "fake", Name: "held",
		Home: filepath.Join(e.dir, "home-held"), Policy: registry.ProfilePolicy{LaunchRequiresApproval: true}}); err != nil {
		t.Fatal(err)
	}
	r, err := e.sup.Launch(ctx, supervisor.LaunchParams{RunRef: "run_held1", Tenant: tenant, ProfileRef: "prof_held1"})
	if err != nil || r.State != apitypes.StatePendingApproval || r.PID != 0 || r.Generation != 0 {
		t.Fatalf("held launch: %+v, %v", r, err)
	}
	if got := kinds(e.events("run_held1")); !equal(got, []string{"created", "approval_requested"}) {
		t.Fatalf("events: %v", got)
	}
	if n := len(store.Conversations()); n != 0 {
		t.Fatalf("a held launch spawned something: %d conversations", n)
	}
	_, err = e.sup.Resume(ctx, "run_held1", nil, "")
	wantErr(t, "resume of a held run", err, supervisor.ErrPendingApproval)
	// Input to a held run says to approve it, not to resume it (issue 21).
	err = e.sup.Input(ctx, "run_held1", cliruntime.Input{Text: "hi"})
	wantErr(t, "input to a held run", err, supervisor.ErrPendingApproval)
	if msg := err.Error(); !strings.Contains(msg, "approve it first") || strings.Contains(msg, "resume") {
		t.Errorf("input to a held run: %q, want it to say to approve it", msg)
	}
	wantErr(t, "interrupt of a held run", second(e.sup.Interrupt(ctx, "run_held1")), supervisor.ErrPendingApproval)
	// Held across an agent restart: not lost, not started.
	e.shut()
	e.open()
	if got := e.get("run_held1"); got.State != apitypes.StatePendingApproval {
		t.Fatalf("after restart: %s, want pending_approval", got.State)
	}
	if _, err := e.sup.Approve(ctx, "run_held1", nil, ""); err != nil {
		t.Fatal(err)
	}
	e.awaitState("run_held1", apitypes.StateIdle)
	_, err = e.sup.Approve(ctx, "run_held1", nil, "")
	wantErr(t, "approve of a run that waits for nothing", err, supervisor.ErrNotPending)
	e.input("run_held1", "hello")
	e.await("a conversation", func() bool { return e.get("run_held1").ConversationID != "" })
	if _, err := e.sup.Stop(context.Background(), "run_held1", 0); err != nil {
		t.Fatal(err)
	}
	r, err = e.sup.Resume(ctx, "run_held1", nil, "")
	if err != nil || r.State != apitypes.StatePendingApproval || r.Generation != 1 {
		t.Fatalf("held resume: %+v, %v", r, err)
	}
	r, err = e.sup.Approve(ctx, "run_held1", nil, "")
	if err != nil || r.Generation != 2 || !apitypes.Live(r.State) {
		t.Fatalf("approved resume: %+v, %v", r, err)
	}
	// input_accepted is written off the request path, so its place is
	// not fixed; the rest is.
	want := []string{"created", "approval_requested", "approved", "started", "stop_requested", "exited",
		"approval_requested", "approved", "resumed", "started"}
	got := slices.DeleteFunc(kinds(e.events("run_held1")), func(k string) bool { return k == "input_accepted" })
	if !equal(got, want) {
		t.Fatalf("events: got %v, want %v", got, want)
	}
}

// TestProfilePolicyRefusals: an inactive profile and a workspace the
// profile does not allow refuse a launch before anything is written
// (R-MOVE-3's "would accept a launch", R-PROF-3), and a policy change
// applies to the next resume (R-MOVE-10, R-PROF-4).
func TestProfilePolicyRefusals(t *testing.T) {
	e, _ := fakeEnv(t)
	ctx := context.Background()
	e.profile("prof_pol1", "fake")
	wsDir := t.TempDir()
	if _, err := e.reg.CreateWorkspace(registry.WorkspaceParams{Ref: "ws_pol1", Tenant: tenant, Name: "w", Path: wsDir}); err != nil {
		t.Fatal(err)
	}
	f := false
	if _, err := e.reg.UpdateProfile("prof_pol1", tenant, registry.ProfileUpdate{Active: &f}); err != nil {
		t.Fatal(err)
	}
	_, err := e.sup.Launch(ctx, supervisor.LaunchParams{RunRef: "run_pol1", Tenant: tenant, ProfileRef: "prof_pol1"})
	wantErr(t, "launch on an inactive profile", err, registry.ErrProfileInactive)
	tr := true
	only := []string{"ws_other1"}
	if _, err := e.reg.UpdateProfile("prof_pol1", tenant, registry.ProfileUpdate{Active: &tr, AllowedWorkspaces: &only}); err != nil {
		t.Fatal(err)
	}
	_, err = e.sup.Launch(ctx, supervisor.LaunchParams{RunRef: "run_pol1", Tenant: tenant, ProfileRef: "prof_pol1", WorkspaceRef: "ws_pol1"})
	wantErr(t, "launch in a workspace the profile does not allow", err, registry.ErrWorkspaceNotAllowed)
	if _, err := e.sup.Get("run_pol1"); err == nil {
		t.Fatal("a refused launch left a run")
	}
	_, err = e.reg.UpdateProfile("prof_pol1", "other", registry.ProfileUpdate{Active: &f})
	wantErr(t, "update of another tenant's profile", err, registry.ErrNotFound)
	bad := []string{"../x"}
	_, err = e.reg.UpdateProfile("prof_pol1", tenant, registry.ProfileUpdate{AllowedWorkspaces: &bad})
	wantErr(t, "a malformed workspace ref", err, registry.ErrBadPolicy)

	// Allowed now; after a launch, deactivating refuses the resume.
	all := []string{"ws_pol1"}
	if _, err := e.reg.UpdateProfile("prof_pol1", tenant, registry.ProfileUpdate{AllowedWorkspaces: &all}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sup.Launch(ctx, supervisor.LaunchParams{RunRef: "run_pol1", Tenant: tenant, ProfileRef: "prof_pol1", WorkspaceRef: "ws_pol1"}); err != nil {
		t.Fatal(err)
	}
	e.awaitState("run_pol1", apitypes.StateIdle)
	e.input("run_pol1", "hello")
	e.await("a conversation", func() bool { return e.get("run_pol1").ConversationID != "" })
	if _, err := e.sup.Stop(context.Background(), "run_pol1", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.reg.UpdateProfile("prof_pol1", tenant, registry.ProfileUpdate{Active: &f}); err != nil {
		t.Fatal(err)
	}
	_, err = e.sup.Resume(ctx, "run_pol1", nil, "")
	wantErr(t, "resume on a profile deactivated since", err, registry.ErrProfileInactive)
}
