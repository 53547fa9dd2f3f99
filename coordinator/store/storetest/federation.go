package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
)

// federationCases are the conformance cases of store.Federator.
var federationCases = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"External/FirstSignInCreates", testExternalFirstSignIn},
	{"External/RolesReplacedAtNextSignIn", testExternalRolesReplaced},
	{"External/KeyedByIssuerAndSubject", testExternalKeyed},
	{"External/CredentialTakenWritesNothing", testExternalCredTaken},
}

func init() { markCases = append(markCases, federationCases...) }

var alice = store.External{Issuer: "https://idp.example.com", Subject: "248289761001"}

func testExternalFirstSignIn(t *testing.T, s store.Store) {
	ctx := context.Background()
	p, created, err := s.SignInExternal(ctx, alice, "prn_alice", "Alice", map[string]string{"team-a": store.RoleOperator}, t0, sessionCred("sso-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !created || p.ID != "prn_alice" || p.Kind != store.KindHuman || p.Name != "Alice" || p.Roles["team-a"] != store.RoleOperator {
		t.Fatalf("first sign-in: got %+v created=%v", p, created)
	}
	if _, err := s.GetTenant(ctx, "team-a"); err != nil {
		t.Fatalf("the mapped tenant after the first sign-in: %v", err)
	}
	bp, bc, err := s.PrincipalByCredential(ctx, hash("sso-1"))
	if err != nil || bp.ID != p.ID || bc.PrincipalID != p.ID || !bc.ExpiresAt.Equal(t0.Add(24*time.Hour)) {
		t.Fatalf("the session credential resolves to %+v %+v %v", bp, bc, err)
	}
	// The same person again: the same principal, another credential.
	p2, created, err := s.SignInExternal(ctx, alice, "prn_other", "Alice", map[string]string{"team-a": store.RoleOperator}, t0, sessionCred("sso-2"))
	if err != nil || created || p2.ID != p.ID {
		t.Fatalf("second sign-in: got %+v created=%v %v, want principal %s", p2, created, err, p.ID)
	}
	if _, err := s.GetPrincipal(ctx, "prn_other"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a second sign-in made principal prn_other: %v", err)
	}
}

func testExternalRolesReplaced(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, _, err := s.SignInExternal(ctx, alice, "prn_alice", "Alice", map[string]string{"a": store.RoleAdmin, "b": store.RoleOperator}, t0, sessionCred("sso-1")); err != nil {
		t.Fatal(err)
	}
	p, _, err := s.SignInExternal(ctx, alice, "prn_x", "Alice Doe", map[string]string{"a": store.RoleViewer}, t0, sessionCred("sso-2"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetPrincipal(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Roles) != 1 || got.Roles["a"] != store.RoleViewer || got.Name != "Alice Doe" {
		t.Fatalf("after the second sign-in: got roles %v name %q, want only a=viewer, Alice Doe", got.Roles, got.Name)
	}
}

func testExternalKeyed(t *testing.T, s store.Store) {
	ctx := context.Background()
	p1, _, err := s.SignInExternal(ctx, alice, "prn_1", "Alice", map[string]string{"a": store.RoleViewer}, t0, sessionCred("sso-1"))
	if err != nil {
		t.Fatal(err)
	}
	// The same subject at another issuer, and another subject at the same
	// issuer, are other people whatever their names or emails.
	for i, id := range []store.External{{Issuer: "https://other.example.com", Subject: alice.Subject}, {Issuer: alice.Issuer, Subject: "999"}} {
		p, created, err := s.SignInExternal(ctx, id, "prn_"+string(rune('a'+i)), "Alice", map[string]string{"a": store.RoleViewer}, t0, sessionCred("sso-x"+string(rune('a'+i))))
		if err != nil {
			t.Fatal(err)
		}
		if !created || p.ID == p1.ID {
			t.Fatalf("%+v signed in as %s (created=%v), want a new principal", id, p.ID, created)
		}
	}
}

func testExternalCredTaken(t *testing.T, s store.Store) {
	ctx := context.Background()
	p, c := newPrincipal("prn_local", "tok-local")
	mustCreatePrincipal(t, s, p, c)
	_, _, err := s.SignInExternal(ctx, alice, "prn_alice", "Alice", map[string]string{"new-tenant": store.RoleViewer}, t0, store.Credential{Hash: c.Hash, Kind: store.CredSession, CreatedAt: t0})
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("a taken credential hash: got %v, want ErrExists", err)
	}
	if _, err := s.GetPrincipal(ctx, "prn_alice"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused sign-in created its principal: %v", err)
	}
	if _, err := s.GetTenant(ctx, "new-tenant"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused sign-in created its tenant: %v", err)
	}
}
