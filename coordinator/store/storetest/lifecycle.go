package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The lifecycle cases (store.Lifecycler, issue 21).
var lifecycleCases = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Lifecycle/ListTenants", testListTenants},
	{"Lifecycle/PrincipalsAndCredentials", testListPrincipalsCredentials},
	{"Lifecycle/RevokePrincipal", testRevokePrincipal},
	{"Lifecycle/DeleteProfileWorkspace", testDeleteProfileWorkspace},
	{"Lifecycle/ForgetNode", testForgetNode},
	{"Lifecycle/ReassignNode", testReassignNode},
}

func init() { markCases = append(markCases, lifecycleCases...) }

func lifecycleAudit(tenant, event string) apitypes.AuditEntry {
	e := auditEntry(tenant, event, "", t0)
	return e
}

func auditEvents(t *testing.T, s store.Store, tenant string) []string {
	t.Helper()
	var out []string
	for _, e := range listAudit(t, s, store.AuditQuery{Tenant: tenant}) {
		out = append(out, e.Event)
	}
	return out
}

func testListTenants(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, id := range []string{"t2", "t1"} {
		if err := s.PutTenant(ctx, store.Tenant{ID: id, CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	ts, err := s.ListTenants(ctx)
	if err != nil || len(ts) != 2 || ts[0].ID != "t1" || ts[1].ID != "t2" {
		t.Fatalf("ListTenants: got %+v, %v; want t1, t2", ts, err)
	}
}

func testListPrincipalsCredentials(t *testing.T, s store.Store) {
	ctx := t.Context()
	p1, c1 := newPrincipal("p1", "tok-1")
	p2, c2 := newPrincipal("p2", "tok-2")
	p2.Roles = map[string]string{"t2": store.RoleViewer}
	c1.ID = "cred_1"
	for _, pc := range []struct {
		p store.Principal
		c store.Credential
	}{{p1, c1}, {p2, c2}} {
		if err := s.CreatePrincipal(ctx, pc.p, pc.c); err != nil {
			t.Fatal(err)
		}
	}
	later := store.Credential{Hash: hash("tok-1b"), ID: "cred_0", PrincipalID: "p1", Kind: store.CredAPIToken, CreatedAt: t0.Add(time.Second)}
	if err := s.AddCredential(ctx, later); err != nil {
		t.Fatal(err)
	}
	ps, err := s.ListPrincipals(ctx, "t1")
	if err != nil || len(ps) != 1 || ps[0].ID != "p1" {
		t.Fatalf("ListPrincipals(t1): got %+v, %v; want p1 only", ps, err)
	}
	cs, err := s.ListCredentials(ctx, "p1")
	if err != nil || len(cs) != 2 || cs[0].ID != "cred_1" || cs[1].ID != "cred_0" {
		t.Fatalf("ListCredentials(p1): got %+v, %v; want cred_1 then cred_0 (oldest first)", cs, err)
	}
	if _, err := s.ListCredentials(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ListCredentials(nope): got %v, want ErrNotFound", err)
	}
	got, err := s.CredentialByID(ctx, "cred_0")
	if err != nil || got.Hash != later.Hash {
		t.Fatalf("CredentialByID(cred_0): got %+v, %v", got, err)
	}
	// A credential without an id is found by the id derived from its hash.
	got, err = s.CredentialByID(ctx, c2.PublicID())
	if err != nil || got.Hash != c2.Hash {
		t.Fatalf("CredentialByID(derived): got %+v, %v", got, err)
	}
	if _, err := s.CredentialByID(ctx, "cred_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("CredentialByID(unknown): got %v, want ErrNotFound", err)
	}
}

func testRevokePrincipal(t *testing.T, s store.Store) {
	ctx := t.Context()
	p, c := newPrincipal("p1", "tok-1")
	p.Roles = map[string]string{"t1": store.RoleAdmin, "t2": store.RoleViewer}
	if err := s.CreatePrincipal(ctx, p, c); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RevokePrincipal(ctx, "p1", "t3", lifecycleAudit("t3", apitypes.AuditPrincipalRevoked)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoke in a tenant it is not in: got %v, want ErrNotFound", err)
	}
	// A token issued for t1, and one derived from it: they go with the
	// role in t1 (R-LIFE-4, R-LIFE-9), the others stay.
	t1 := store.Credential{Hash: hash("tok-1-t1"), ID: "cred_t1", PrincipalID: "p1", Tenant: "t1", CreatedAt: t0}
	t1login := t1.Derive(store.Credential{Hash: hash("tok-1-t1-login"), ID: "cred_t1_login", CreatedAt: t0})
	t2 := store.Credential{Hash: hash("tok-1-t2"), ID: "cred_t2", PrincipalID: "p1", Tenant: "t2", CreatedAt: t0}
	for _, cr := range []store.Credential{t1, t1login, t2} {
		if err := s.AddCredential(ctx, cr); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.RevokePrincipal(ctx, "p1", "t1", lifecycleAudit("t1", apitypes.AuditPrincipalRevoked))
	if err != nil || n != 2 {
		t.Fatalf("revoke in t1: got %d, %v; want 2 credentials (those of t1; it is still in t2)", n, err)
	}
	for _, h := range []string{t1.Hash, t1login.Hash} {
		if _, _, err := s.PrincipalByCredential(ctx, h); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("t1's token after the revoke in t1: got %v, want ErrNotFound", err)
		}
	}
	for _, h := range []string{c.Hash, t2.Hash} {
		if _, _, err := s.PrincipalByCredential(ctx, h); err != nil {
			t.Fatalf("token after the first revoke: %v", err)
		}
	}
	n, err = s.RevokePrincipal(ctx, "p1", "t2", lifecycleAudit("t2", apitypes.AuditPrincipalRevoked))
	if err != nil || n != 2 {
		t.Fatalf("revoke in t2: got %d, %v; want 2 credentials", n, err)
	}
	if _, _, err := s.PrincipalByCredential(ctx, c.Hash); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("token after the last revoke: got %v, want ErrNotFound", err)
	}
	if got := auditEvents(t, s, "t2"); len(got) != 1 || got[0] != apitypes.AuditPrincipalRevoked {
		t.Fatalf("t2 audit: got %v", got)
	}
}

func testDeleteProfileWorkspace(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := apitypes.Profile{Ref: "pp-1", Tenant: "t1", NodeID: "n1", Tool: "claude", Name: "work", CreatedAt: t0}
	w := apitypes.Workspace{Ref: "ws-1", Tenant: "t1", NodeID: "n1", Name: "src", Path: "/src", CreatedAt: t0}
	if err := s.CreateProfile(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateWorkspace(ctx, w); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateWorkspaceSettings(ctx, "ws-1", func(st *store.WorkspaceSettings) (*apitypes.AuditEntry, error) {
		st.SetupCommand = "make"
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteProfile(ctx, "pp-1", lifecycleAudit("t2", apitypes.AuditProfileDeleted)); err == nil {
		t.Fatal("DeleteProfile with another tenant's audit entry succeeded")
	}
	if err := s.DeleteProfile(ctx, "pp-1", lifecycleAudit("t1", apitypes.AuditProfileDeleted)); err != nil {
		t.Fatalf("DeleteProfile: %v", err)
	}
	if err := s.DeleteWorkspace(ctx, "ws-1", lifecycleAudit("t1", apitypes.AuditWorkspaceDeleted)); err != nil {
		t.Fatalf("DeleteWorkspace: %v", err)
	}
	if _, err := s.GetProfile(ctx, "pp-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("profile after delete: %v", err)
	}
	if _, err := s.GetWorkspaceSettings(ctx, "ws-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("workspace settings after delete: %v", err)
	}
	if err := s.DeleteProfile(ctx, "pp-1", lifecycleAudit("t1", apitypes.AuditProfileDeleted)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second DeleteProfile: got %v, want ErrNotFound", err)
	}
	// The names are free again.
	if err := s.CreateProfile(ctx, apitypes.Profile{Ref: "pp-2", Tenant: "t1", NodeID: "n1", Tool: "claude", Name: "work", CreatedAt: t0}); err != nil {
		t.Fatalf("reuse of a deleted profile's name: %v", err)
	}
	if err := s.CreateWorkspace(ctx, apitypes.Workspace{Ref: "ws-2", Tenant: "t1", NodeID: "n1", Name: "src", Path: "/src", CreatedAt: t0}); err != nil {
		t.Fatalf("reuse of a deleted workspace's name: %v", err)
	}
	if got := auditEvents(t, s, "t1"); len(got) != 2 {
		t.Fatalf("audit: got %v, want the two deletions", got)
	}
}

// twoNodes enrolls n-old and n-new in t1.
func twoNodes(t *testing.T, s store.Store) {
	t.Helper()
	for _, id := range []string{"n-old", "n-new"} {
		tok := newJoinToken("jt-"+id, id, "t1")
		if err := s.CreateJoinToken(t.Context(), tok); err != nil {
			t.Fatal(err)
		}
		mustEnroll(t, s, tok.Hash, t0)
	}
}

func testForgetNode(t *testing.T, s store.Store) {
	ctx := t.Context()
	twoNodes(t, s)
	if err := s.CreateProfile(ctx, apitypes.Profile{Ref: "pp-1", Tenant: "t1", NodeID: "n-old", Tool: "claude", Name: "a", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateProfile(ctx, apitypes.Profile{Ref: "pp-2", Tenant: "t1", NodeID: "n-new", Tool: "claude", Name: "b", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateWorkspace(ctx, apitypes.Workspace{Ref: "ws-1", Tenant: "t1", NodeID: "n-old", Name: "w", Path: "/w", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForgetNode(ctx, "n-old", lifecycleAudit("t1", apitypes.AuditNodeForgotten)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ForgetNode of a live node: got %v, want ErrConflict", err)
	}
	if _, err := s.UpdateNode(ctx, "n-old", func(n *store.Node) error { n.RevokedAt = t0; return nil }); err != nil {
		t.Fatal(err)
	}
	got, err := s.ForgetNode(ctx, "n-old", lifecycleAudit("t1", apitypes.AuditNodeForgotten))
	if err != nil || got.Profiles != 1 || got.Workspaces != 1 {
		t.Fatalf("ForgetNode: got %+v, %v; want 1 profile and 1 workspace", got, err)
	}
	if _, err := s.GetNode(ctx, "n-old"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("node after forget: %v", err)
	}
	if ps, _ := s.ListProfiles(ctx, "t1"); len(ps) != 1 || ps[0].Ref != "pp-2" {
		t.Fatalf("profiles after forget: %+v, want pp-2 only", ps)
	}
	if _, err := s.ForgetNode(ctx, "n-old", lifecycleAudit("t1", apitypes.AuditNodeForgotten)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second ForgetNode: got %v, want ErrNotFound", err)
	}
}

func testReassignNode(t *testing.T, s store.Store) {
	ctx := t.Context()
	twoNodes(t, s)
	if err := s.CreateProfile(ctx, apitypes.Profile{Ref: "pp-1", Tenant: "t1", NodeID: "n-old", Tool: "claude", Name: "a", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateWorkspace(ctx, apitypes.Workspace{Ref: "ws-1", Tenant: "t1", NodeID: "n-old", Name: "w", Path: "/w", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	r := newRun("run-1", "t1", 0)
	r.NodeID = "n-old"
	mustPutRun(t, s, r)
	got, err := s.ReassignNode(ctx, "n-old", "n-new", lifecycleAudit("t1", apitypes.AuditNodeReassigned))
	if err != nil || got != (store.NodeRecords{Profiles: 1, Workspaces: 1, Runs: 1}) {
		t.Fatalf("ReassignNode: got %+v, %v; want 1 of each", got, err)
	}
	p, _ := s.GetProfile(ctx, "pp-1")
	w, _ := s.GetWorkspace(ctx, "ws-1")
	run, _ := s.GetRun(ctx, "run-1")
	if p.NodeID != "n-new" || w.NodeID != "n-new" || run.NodeID != "n-new" {
		t.Fatalf("after reassign: profile on %q, workspace on %q, run on %q; want n-new", p.NodeID, w.NodeID, run.NodeID)
	}
	// The new node's pushes of the run are its own now.
	r.NodeID, r.Rev = "n-new", r.Rev+1
	if _, err := s.PutRun(ctx, r); err != nil {
		t.Fatalf("push from the new node: %v", err)
	}
	if _, err := s.ReassignNode(ctx, "n-old", "n-nope", lifecycleAudit("t1", apitypes.AuditNodeReassigned)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("reassign to an unknown node: got %v, want ErrNotFound", err)
	}
}
