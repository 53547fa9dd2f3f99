package auth

import (
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/store"
)

// R-AUTH-7: built-in roles bundle permissions literally; none implies another.
func TestRoleMatrix(t *testing.T) {
	perms := []string{PermRunRead, PermRunWrite, PermRunAdmin, PermWorkspaceAdmin}
	want := map[string][]bool{
		store.RoleViewer:   {true, false, false, false},
		store.RoleOperator: {true, true, false, false},
		store.RoleAdmin:    {true, true, true, true},
		"nobody":           {false, false, false, false},
	}
	for role, row := range want {
		for i, p := range perms {
			if got := Grants(role, p); got != row[i] {
				t.Errorf("Grants(%s, %s): got %v, want %v", role, p, got, row[i])
			}
		}
	}
	if ValidRole("root") || !ValidRole(store.RoleAdmin) {
		t.Error("ValidRole")
	}
	if ValidKind("robot") || !ValidKind(store.KindAgent) || !ValidKind(store.KindHuman) {
		t.Error("ValidKind")
	}
}

// Join tokens carry ≥128 random bits (issue 2) and are stored as a hash.
func TestTokens(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok, err := NewToken(PrefixJoinToken)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(tok, PrefixJoinToken) {
			t.Fatalf("prefix: %s", tok)
		}
		// 256 bits in unpadded base32 is 52 characters.
		if got := len(tok) - len(PrefixJoinToken); got != 52 {
			t.Fatalf("token body: got %d chars, want 52", got)
		}
		if seen[tok] {
			t.Fatal("duplicate token")
		}
		seen[tok] = true
		h := Hash(tok)
		if len(h) != 64 || strings.Contains(h, tok) || Hash(tok) != h {
			t.Fatalf("hash %q", h)
		}
	}
}
