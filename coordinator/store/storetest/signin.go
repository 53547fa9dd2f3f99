package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
)

// signinCases are the conformance cases of store.Signer.
var signinCases = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Signin/RedeemOnce", testSigninRedeemOnce},
	{"Signin/Expired", testSigninExpired},
	{"Signin/Unknown", testSigninUnknown},
	{"Signin/UnknownPrincipal", testSigninUnknownPrincipal},
	{"Signin/Concurrent", testSigninConcurrent},
	{"Credential/Revoke", testCredentialRevoke},
	{"Credential/ExpiresAtRoundTrip", testCredentialExpiresAt},
	{"Credential/RevokeCascades", testCredentialRevokeCascades},
	{"Credential/DeriveFromRevoked", testCredentialDeriveFromRevoked},
	{"Credential/DeriveDuringRevoke", testCredentialDeriveDuringRevoke},
}

func init() { markCases = append(markCases, signinCases...) }

func signinFixture(t *testing.T, s store.Store) store.Principal {
	t.Helper()
	p, c := newPrincipal("prn_signin", "tok-signin")
	mustCreatePrincipal(t, s, p, c)
	if err := s.CreateSigninLink(context.Background(), store.SigninLink{Hash: hash("link-1"), PrincipalID: p.ID, CreatedAt: t0, ExpiresAt: t0.Add(15 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	return p
}

func sessionCred(token string) store.Credential {
	return store.Credential{Hash: hash(token), ID: "cred_" + token, Kind: store.CredSession, Label: "console", CreatedAt: t0, ExpiresAt: t0.Add(24 * time.Hour)}
}

func testSigninRedeemOnce(t *testing.T, s store.Store) {
	ctx := context.Background()
	p := signinFixture(t, s)
	gp, gc, err := s.RedeemSigninLink(ctx, hash("link-1"), t0.Add(time.Minute), sessionCred("console-1"))
	if err != nil {
		t.Fatal(err)
	}
	if gp.ID != p.ID || gc.PrincipalID != p.ID {
		t.Fatalf("redeemed as %q / cred of %q, want %q", gp.ID, gc.PrincipalID, p.ID)
	}
	bp, bc, err := s.PrincipalByCredential(ctx, hash("console-1"))
	if err != nil || bp.ID != p.ID || bc.Kind != store.CredSession {
		t.Fatalf("the new credential resolves to %+v %+v %v", bp, bc, err)
	}
	_, _, err = s.RedeemSigninLink(ctx, hash("link-1"), t0.Add(2*time.Minute), sessionCred("console-2"))
	if !errors.Is(err, store.ErrTokenUsed) {
		t.Fatalf("second redeem: got %v, want ErrTokenUsed", err)
	}
	if _, _, err := s.PrincipalByCredential(ctx, hash("console-2")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused redeem stored its credential: %v", err)
	}
}

func testSigninExpired(t *testing.T, s store.Store) {
	signinFixture(t, s)
	_, _, err := s.RedeemSigninLink(context.Background(), hash("link-1"), t0.Add(15*time.Minute), sessionCred("console-1"))
	if !errors.Is(err, store.ErrTokenExpired) {
		t.Fatalf("got %v, want ErrTokenExpired", err)
	}
	if _, _, err := s.PrincipalByCredential(context.Background(), hash("console-1")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an expired redeem stored its credential: %v", err)
	}
}

func testSigninUnknown(t *testing.T, s store.Store) {
	_, _, err := s.RedeemSigninLink(context.Background(), hash("nope"), t0, sessionCred("console-1"))
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
}

func testSigninUnknownPrincipal(t *testing.T, s store.Store) {
	err := s.CreateSigninLink(context.Background(), store.SigninLink{Hash: hash("l"), PrincipalID: "prn_none", CreatedAt: t0, ExpiresAt: t0.Add(time.Minute)})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
}

// Two browsers opening the same link at once: exactly one gets in.
func testSigninConcurrent(t *testing.T, s store.Store) {
	signinFixture(t, s)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = s.RedeemSigninLink(context.Background(), hash("link-1"), t0.Add(time.Second), sessionCred(string(rune('a'+i))))
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, store.ErrTokenUsed):
			t.Fatalf("got %v, want nil or ErrTokenUsed", err)
		}
	}
	if ok != 1 {
		t.Fatalf("got %d redemptions, want 1", ok)
	}
}

func testCredentialRevoke(t *testing.T, s store.Store) {
	ctx := context.Background()
	p, c := newPrincipal("prn_rev", "tok-rev")
	mustCreatePrincipal(t, s, p, c)
	second := sessionCred("tok-rev-2")
	second.PrincipalID = p.ID
	if err := s.AddCredential(ctx, second); err != nil {
		t.Fatal(err)
	}
	if n, err := s.RevokeCredential(ctx, second.Hash); err != nil || n != 0 {
		t.Fatalf("revoke: %d derived, %v; want 0, nil", n, err)
	}
	if _, _, err := s.PrincipalByCredential(ctx, second.Hash); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoked credential: got %v, want ErrNotFound", err)
	}
	if _, _, err := s.PrincipalByCredential(ctx, c.Hash); err != nil {
		t.Fatalf("the principal's other credential: %v", err)
	}
	if _, err := s.RevokeCredential(ctx, second.Hash); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second revoke: got %v, want ErrNotFound", err)
	}
}

func testCredentialExpiresAt(t *testing.T, s store.Store) {
	ctx := context.Background()
	p, c := newPrincipal("prn_exp", "tok-exp")
	mustCreatePrincipal(t, s, p, c)
	cr := sessionCred("tok-exp-2")
	cr.PrincipalID = p.ID
	if err := s.AddCredential(ctx, cr); err != nil {
		t.Fatal(err)
	}
	_, got, err := s.PrincipalByCredential(ctx, cr.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if !got.ExpiresAt.Equal(cr.ExpiresAt) || !got.Expired(cr.ExpiresAt) || got.Expired(cr.ExpiresAt.Add(-time.Second)) {
		t.Fatalf("got expires_at %v, want %v", got.ExpiresAt, cr.ExpiresAt)
	}
}

// Issue 35, issue 32 item 1: revoking a credential revokes every
// credential derived from it, transitively, and nothing else; the tenant
// and parent a credential carries round-trip.
func testCredentialRevokeCascades(t *testing.T, s store.Store) {
	ctx := context.Background()
	p, root := newPrincipal("prn_casc", "tok-casc")
	root.Tenant = "t1"
	mustCreatePrincipal(t, s, p, root)
	other := sessionCred("tok-casc-other")
	other.PrincipalID = p.ID
	child := root.Derive(sessionCred("tok-casc-child"))
	grandchild := child.Derive(sessionCred("tok-casc-grandchild"))
	sibling := other.Derive(sessionCred("tok-casc-sibling"))
	for _, c := range []store.Credential{other, child, grandchild, sibling} {
		if err := s.AddCredential(ctx, c); err != nil {
			t.Fatalf("add %s: %v", c.ID, err)
		}
	}
	_, got, err := s.PrincipalByCredential(ctx, grandchild.Hash)
	if err != nil || got.Parent != child.Hash || got.Tenant != "t1" {
		t.Fatalf("grandchild: got parent %q tenant %q (%v), want %q t1", got.Parent, got.Tenant, err, child.Hash)
	}
	n, err := s.RevokeCredential(ctx, root.Hash)
	if err != nil || n != 2 {
		t.Fatalf("revoke root: %d derived, %v; want 2, nil", n, err)
	}
	for _, h := range []string{root.Hash, child.Hash, grandchild.Hash} {
		if _, _, err := s.PrincipalByCredential(ctx, h); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a revoked lineage's credential: got %v, want ErrNotFound", err)
		}
	}
	for _, h := range []string{other.Hash, sibling.Hash} {
		if _, _, err := s.PrincipalByCredential(ctx, h); err != nil {
			t.Fatalf("a credential of another lineage: %v", err)
		}
	}
}

func testCredentialDeriveFromRevoked(t *testing.T, s store.Store) {
	ctx := context.Background()
	p, root := newPrincipal("prn_orphan", "tok-orphan")
	mustCreatePrincipal(t, s, p, root)
	if _, err := s.RevokeCredential(ctx, root.Hash); err != nil {
		t.Fatal(err)
	}
	if err := s.AddCredential(ctx, root.Derive(sessionCred("tok-orphan-child"))); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("derive from a revoked credential: got %v, want ErrNotFound", err)
	}
}

// A derivation racing the revocation of its parent is either revoked
// with it or refused; no derived credential outlives its parent.
func testCredentialDeriveDuringRevoke(t *testing.T, s store.Store) {
	ctx := context.Background()
	p, root := newPrincipal("prn_race", "tok-race")
	mustCreatePrincipal(t, s, p, root)
	const n = 8
	kids := make([]store.Credential, n)
	var wg sync.WaitGroup
	for i := range kids {
		kids[i] = root.Derive(sessionCred("tok-race-" + string(rune('a'+i))))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.AddCredential(ctx, kids[i]); err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Errorf("derive: %v", err)
			}
		}()
	}
	if _, err := s.RevokeCredential(ctx, root.Hash); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, k := range kids {
		if _, _, err := s.PrincipalByCredential(ctx, k.Hash); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a credential derived from a revoked one still resolves (%v)", err)
		}
	}
}
