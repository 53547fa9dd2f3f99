package store

import (
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-PIN-6: a person's session credentials (console, olivares login) own one
// set of marks; each API token owns its own. Audit rows name the
// credential by its public id, never by its hash (R-AUD-3).
func TestMarkOwnerAndActor(t *testing.T) {
	alice := Principal{ID: "prn_a", Kind: KindHuman}
	bot := Principal{ID: "prn_b", Kind: KindAgent}
	console := Credential{Hash: "h1", ID: "cred_1", Kind: CredSession, PrincipalID: "prn_a"}
	login := Credential{Hash: "h2", ID: "cred_2", PrincipalID: "prn_a"} // Kind "" is a session
	tok1 := Credential{Hash: "h3", ID: "cred_3", Kind: CredAPIToken, PrincipalID: "prn_a"}
	tok2 := Credential{Hash: "h4", ID: "cred_4", Kind: CredAPIToken, PrincipalID: "prn_a"}
	if MarkOwner(alice, console) != MarkOwner(alice, login) {
		t.Errorf("console %q and login %q own different marks", MarkOwner(alice, console), MarkOwner(alice, login))
	}
	if o := MarkOwner(alice, tok1); o == MarkOwner(alice, console) || o == MarkOwner(alice, tok2) {
		t.Errorf("API token owner %q is shared", o)
	}
	for _, tc := range []struct {
		p    Principal
		c    Credential
		kind string
	}{
		{alice, console, apitypes.ActorHuman}, {alice, tok1, apitypes.ActorToken}, {bot, login, apitypes.ActorAgent},
	} {
		if a := AuditActor(tc.p, tc.c); a.Kind != tc.kind || a.CredentialID != tc.c.ID || a.PrincipalID != tc.p.ID {
			t.Errorf("AuditActor(%s, %s): got %+v, want kind %s", tc.p.ID, tc.c.ID, a, tc.kind)
		}
	}
	// A credential stored before ids existed gets a stable id that does
	// not reveal its hash.
	old := Credential{Hash: strings.Repeat("ab", 32)}
	if id := old.PublicID(); id != old.PublicID() || !strings.HasPrefix(id, "cred_") || strings.Contains(old.Hash, strings.TrimPrefix(id, "cred_")) {
		t.Errorf("PublicID of a legacy credential: %q", id)
	}
}
