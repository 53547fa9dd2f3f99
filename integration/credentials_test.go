package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Issue 35's probes of credentials and identities, each against a real
// coordinator on both stores.

// eachStore runs fn on a coordinator with the bbolt store and on one with
// PostgreSQL (skipped when no server is installed, unless
// OLIVARES_REQUIRE_POSTGRES is set). opts, when not nil, gives each its
// options (its own clock, say).
func eachStore(t *testing.T, opts func() (Options, *Clock), fn func(t *testing.T, env *Env, clock *Clock)) {
	run := func(t *testing.T, dsn string) {
		t.Parallel()
		var o Options
		var c *Clock
		if opts != nil {
			o, c = opts()
		}
		if dsn == "pg" {
			o.Postgres = pgtest.NewDatabase(t)
		}
		fn(t, NewEnv(t, o), c)
	}
	t.Run("bbolt", func(t *testing.T) { run(t, "") })
	t.Run("postgres", func(t *testing.T) { run(t, "pg") })
}

// person stores a principal with roles in several tenants and a
// credential that serves them all, as single sign-on's role rules make
// one; it returns the credential's token.
func person(t *testing.T, env *Env, id string, roles map[string]string, cred store.Credential) string {
	t.Helper()
	ctx := context.Background()
	for tn := range roles {
		if _, err := env.Coord.Store.GetTenant(ctx, tn); err != nil {
			if _, err := env.Coord.CreateTenant(ctx, tn); err != nil {
				t.Fatal(err)
			}
		}
	}
	tok, err := auth.NewToken(auth.PrefixAPIToken)
	if err != nil {
		t.Fatal(err)
	}
	env.NoteSecret(tok)
	cred.Hash, cred.ID, cred.PrincipalID, cred.Kind = auth.Hash(tok), "cred_"+id, id, store.CredSession
	if cred.CreatedAt.IsZero() {
		cred.CreatedAt = time.Now().UTC()
	}
	p := store.Principal{ID: id, Name: id, Kind: store.KindHuman, Roles: roles, CreatedAt: time.Now().UTC()}
	if err := env.Coord.Store.CreatePrincipal(ctx, p, cred); err != nil {
		t.Fatal(err)
	}
	return tok
}

// R-AUTH-10: an agent identity, even an admin, neither mints a person's
// token, nor creates a person or an admin, nor takes a role from one;
// it may manage agent identities below admin.
func TestCredentialAgentIdentityActsAsNoPerson(t *testing.T) {
	t.Parallel()
	eachStore(t, nil, func(t *testing.T, env *Env, _ *Clock) {
		bot := env.Client(env.Principal(Tenant, store.RoleAdmin, store.KindAgent))
		humanID, _ := env.PrincipalNamed(Tenant, "ana", store.RoleAdmin, store.KindHuman)
		viewerID, _ := env.PrincipalNamed(Tenant, "vic", store.RoleViewer, store.KindHuman)
		refused := []struct {
			what, path string
			body       any
		}{
			{"mint a person admin's token", "/v1/principals/" + humanID + "/credentials", apitypes.CredentialCreate{}},
			{"mint a person viewer's token", "/v1/principals/" + viewerID + "/credentials", apitypes.CredentialCreate{Kind: "api_token"}},
			{"create a person", "/v1/principals", apitypes.PrincipalCreate{Name: "mallory", Kind: "human", Role: "viewer"}},
			{"create a person (default kind)", "/v1/principals", apitypes.PrincipalCreate{Name: "mallory", Role: "admin"}},
			{"create an agent admin", "/v1/principals", apitypes.PrincipalCreate{Name: "bot2", Kind: "agent", Role: "admin"}},
			{"revoke a person", "/v1/principals/" + viewerID + "/revoke", nil},
		}
		for _, c := range refused {
			if got := bot.Call(http.MethodPost, c.path, c.body); got.Status != http.StatusForbidden || got.ErrorCode() != "agent_identity_refused" {
				t.Errorf("agent admin: %s: got %d %s, want 403 agent_identity_refused", c.what, got.Status, got.Body)
			}
		}
		// What it may do: an agent helper below admin, its token, and
		// revoking it.
		var helper apitypes.PrincipalCreated
		bot.Must(http.StatusCreated, http.MethodPost, "/v1/principals", apitypes.PrincipalCreate{Name: "ci-helper", Kind: "agent", Role: "operator"}, &helper)
		var second apitypes.CredentialCreated
		bot.Must(http.StatusCreated, http.MethodPost, "/v1/principals/"+helper.Principal.ID+"/credentials", apitypes.CredentialCreate{Kind: "api_token"}, &second)
		bot.Must(http.StatusOK, http.MethodPost, "/v1/credentials/"+second.Credential.ID+"/revoke", nil, nil)
		bot.Must(http.StatusOK, http.MethodPost, "/v1/principals/"+helper.Principal.ID+"/revoke", nil, nil)
		// A person admin still does all of it.
		admin := env.Client(env.AdminToken)
		admin.Must(http.StatusCreated, http.MethodPost, "/v1/principals/"+humanID+"/credentials", apitypes.CredentialCreate{}, nil)
		admin.Must(http.StatusCreated, http.MethodPost, "/v1/principals", apitypes.PrincipalCreate{Name: "mallory", Role: "admin"}, nil)
	})
}

// R-LIFE-9: a credential minted in tenant T works in T only. The admin
// of beta alone cannot hand out a way into acme to a person who is admin
// there and viewer in beta; another tenant's tokens of that person are
// not beta's to list or revoke; a token stored before tokens had a
// tenant stops once its principal holds several.
func TestCredentialBelongsToItsTenant(t *testing.T) {
	t.Parallel()
	eachStore(t, nil, func(t *testing.T, env *Env, _ *Clock) {
		both := person(t, env, "prn_both", map[string]string{"acme": store.RoleAdmin, "beta": store.RoleViewer}, store.Credential{Tenant: store.AllTenants})
		betaAdmin := env.Client(env.Principal("beta", store.RoleAdmin, store.KindHuman))
		betaAdmin.Tenant = "beta"
		var minted apitypes.CredentialCreated
		betaAdmin.Must(http.StatusCreated, http.MethodPost, "/v1/principals/prn_both/credentials", apitypes.CredentialCreate{Kind: "api_token"}, &minted)
		env.NoteSecret(minted.Token)
		if minted.Credential.Tenant != "beta" {
			t.Fatalf("minted in beta: tenant %q, want beta", minted.Credential.Tenant)
		}
		inAcme := env.Client(minted.Token)
		inAcme.Tenant = "acme"
		for _, path := range []string{"/v1/whoami", "/v1/principals"} {
			if got := inAcme.Call(http.MethodGet, path, nil); got.Status != http.StatusForbidden || got.ErrorCode() != "credential_other_tenant" {
				t.Fatalf("beta's token in acme: GET %s: got %d %s, want 403 credential_other_tenant", path, got.Status, got.Body)
			}
		}
		inBeta := env.Client(minted.Token)
		inBeta.Tenant = "beta"
		var who apitypes.Whoami
		inBeta.Must(http.StatusOK, http.MethodGet, "/v1/whoami", nil, &who)
		if who.Role != store.RoleViewer {
			t.Fatalf("in beta: role %q, want viewer", who.Role)
		}
		var ts apitypes.Tenants
		inBeta.Must(http.StatusOK, http.MethodGet, "/v1/tenants", nil, &ts)
		if len(ts.Items) != 1 || ts.Items[0].ID != "beta" {
			t.Fatalf("the tenants of beta's token: %+v, want beta only", ts.Items)
		}
		// The person's own sign-in serves both.
		own := env.Client(both)
		own.Tenant = "acme"
		own.Must(http.StatusOK, http.MethodGet, "/v1/whoami", nil, nil)
		// acme's admin mints an acme token of the person: beta's admin
		// neither sees nor revokes it.
		var acmeTok apitypes.CredentialCreated
		own.Must(http.StatusCreated, http.MethodPost, "/v1/principals/prn_both/credentials", apitypes.CredentialCreate{Label: "acme ci"}, &acmeTok)
		env.NoteSecret(acmeTok.Token)
		var list apitypes.CredentialList
		betaAdmin.Must(http.StatusOK, http.MethodGet, "/v1/credentials?principal=prn_both", nil, &list)
		for _, c := range list.Items {
			if c.ID == acmeTok.Credential.ID {
				t.Fatalf("beta's admin lists acme's token: %+v", list.Items)
			}
		}
		if got := betaAdmin.Call(http.MethodPost, "/v1/credentials/"+acmeTok.Credential.ID+"/revoke", nil); got.Status != http.StatusNotFound {
			t.Fatalf("beta's admin revokes acme's token: got %d %s, want 404", got.Status, got.Body)
		}
		// A token without a tenant (stored before tokens had one): it
		// works for a principal of one tenant, and is outdated for one of
		// several.
		legacy := person(t, env, "prn_legacy", map[string]string{"acme": store.RoleViewer, "beta": store.RoleViewer}, store.Credential{})
		old := env.Client(legacy)
		old.Tenant = "acme"
		if got := old.Call(http.MethodGet, "/v1/whoami", nil); got.Status != http.StatusUnauthorized || got.ErrorCode() != "credential_outdated" {
			t.Fatalf("a legacy token of a principal of two tenants: got %d %s, want 401 credential_outdated", got.Status, got.Body)
		}
		single := env.Client(person(t, env, "prn_single", map[string]string{Tenant: store.RoleViewer}, store.Credential{}))
		single.Must(http.StatusOK, http.MethodGet, "/v1/whoami", nil, nil)
	})
}

// R-LIFE-10, R-SIGNIN-2: a credential derived from another (POST
// /v1/login, POST /v1/signin with a token) expires no later than it, and
// an expired session never signs in again as a fresh one.
func TestCredentialDerivedKeepsParentExpiry(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	opts := func() (Options, *Clock) { c := NewClock(t0); return Options{Now: c.Now}, c }
	eachStore(t, opts, func(t *testing.T, env *Env, clock *Clock) {
		exp := t0.Add(12 * time.Hour) // a single sign-on session's
		tok := person(t, env, "prn_sso", map[string]string{Tenant: store.RoleOperator}, store.Credential{Tenant: store.AllTenants, CreatedAt: t0, ExpiresAt: exp})
		var login apitypes.CredentialCreated
		env.Client(tok).Must(http.StatusCreated, http.MethodPost, "/v1/login", apitypes.LoginRequest{}, &login)
		env.NoteSecret(login.Token)
		if login.Credential.ExpiresAt == nil || !login.Credential.ExpiresAt.Equal(exp) || login.Credential.ParentID != "cred_prn_sso" {
			t.Fatalf("login from a 12 h session: expires %v, parent %q; want %v, cred_prn_sso", login.Credential.ExpiresAt, login.Credential.ParentID, exp)
		}
		cookie := signinToken(t, env, tok, http.StatusOK, "")
		_, sess, err := env.Coord.Store.PrincipalByCredential(context.Background(), auth.Hash(cookie))
		if err != nil || sess.ExpiresAt.After(exp) {
			t.Fatalf("console session from a 12 h token: expires %v (%v), want no later than %v", sess.ExpiresAt, err, exp)
		}
		// Past the parent's expiry, nothing of its lineage works, and
		// the token cannot sign in again.
		env.Client(login.Token).Must(http.StatusOK, http.MethodGet, "/v1/whoami", nil, nil)
		clock.Advance(13 * time.Hour)
		for name, tk := range map[string]string{"parent": tok, "login": login.Token, "console": cookie} {
			if got := env.Client(tk).Call(http.MethodGet, "/v1/whoami", nil); got.Status != http.StatusUnauthorized || got.ErrorCode() != "session_expired" {
				t.Errorf("%s after the parent's expiry: got %d %s, want 401 session_expired", name, got.Status, got.Body)
			}
		}
		signinToken(t, env, tok, http.StatusUnauthorized, "session_expired")
		signinToken(t, env, cookie, http.StatusUnauthorized, "session_expired")
	})
}

// R-LIFE-10, issue 32 item 1: revoking a token revokes what was derived
// from it, transitively: the CLI's login and the console session signed
// in with that login's token.
func TestCredentialRevokeCascades(t *testing.T) {
	t.Parallel()
	eachStore(t, nil, func(t *testing.T, env *Env, _ *Clock) {
		admin := env.Client(env.AdminToken)
		var bot apitypes.PrincipalCreated
		admin.Must(http.StatusCreated, http.MethodPost, "/v1/principals", apitypes.PrincipalCreate{Name: "ci-bot", Role: "operator"}, &bot)
		env.NoteSecret(bot.Token)
		var login apitypes.CredentialCreated
		env.Client(bot.Token).Must(http.StatusCreated, http.MethodPost, "/v1/login", apitypes.LoginRequest{}, &login)
		env.NoteSecret(login.Token)
		cookie := signinToken(t, env, login.Token, http.StatusOK, "")
		var other apitypes.CredentialCreated
		admin.Must(http.StatusCreated, http.MethodPost, "/v1/principals/"+bot.Principal.ID+"/credentials", apitypes.CredentialCreate{}, &other)
		env.NoteSecret(other.Token)

		var rv apitypes.Credential
		admin.Must(http.StatusOK, http.MethodPost, "/v1/credentials/"+bot.CredentialID+"/revoke", nil, &rv)
		if rv.DerivedRevoked == nil || *rv.DerivedRevoked != 2 {
			t.Fatalf("revoke: derived_revoked %v, want 2", rv.DerivedRevoked)
		}
		for name, tk := range map[string]string{"revoked": bot.Token, "login": login.Token, "console": cookie} {
			if got := env.Client(tk).Call(http.MethodGet, "/v1/whoami", nil); got.Status != http.StatusUnauthorized {
				t.Errorf("%s after revoking the token it came from: got %d, want 401", name, got.Status)
			}
		}
		env.Client(other.Token).Must(http.StatusOK, http.MethodGet, "/v1/whoami", nil, nil)
	})
}

// signinToken posts a token to POST /v1/signin as the console does and
// returns the session cookie's token (want 200), or checks the error.
func signinToken(t *testing.T, env *Env, tok string, want int, code string) string {
	t.Helper()
	r, err := env.Client("").Send(http.MethodPost, "/v1/signin", map[string]string{"token": tok}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != want || (code != "" && r.ErrorCode() != code) {
		t.Fatalf("sign in with a token: got %d %s, want %d %s", r.Status, r.Body, want, code)
	}
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == auth.SessionCookie && c.Value != "" {
			env.NoteSecret(c.Value)
			return c.Value
		}
	}
	if want == http.StatusOK {
		t.Fatal("sign in with a token: no session cookie")
	}
	return ""
}

// R-SIGNIN-5: an address that sent too many unknown tokens is refused
// with 429 and Retry-After, a valid token included (a hit must not be
// told from a miss), and so is its console sign-in; once the window ends
// it is let in, and the window is one audit row with its count, never a
// token.
func TestFailedAuthenticationThrottled(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	opts := func() (Options, *Clock) { c := NewClock(t0); return Options{Now: c.Now}, c }
	eachStore(t, opts, func(t *testing.T, env *Env, clock *Clock) {
		for i := range auth.DefaultFailureLimit {
			bad := "olv_wrong" + strconv.Itoa(i)
			env.NoteSecret(bad)
			if got := env.Do(http.MethodGet, "/v1/whoami", bad, Tenant); got.Status != http.StatusUnauthorized {
				t.Fatalf("unknown token %d: got %d, want 401", i, got.Status)
			}
		}
		for name, tok := range map[string]string{"an unknown token": "olv_wrong", "a valid token": env.AdminToken} {
			got := env.Do(http.MethodGet, "/v1/whoami", tok, Tenant)
			if got.Status != http.StatusTooManyRequests || got.ErrorCode() != "too_many_failures" || got.Header.Get("Retry-After") != "60" {
				t.Fatalf("%s after %d failures: got %d %q Retry-After %q, want 429 too_many_failures 60", name, auth.DefaultFailureLimit, got.Status, got.Body, got.Header.Get("Retry-After"))
			}
		}
		r, err := env.Client("").Send(http.MethodPost, "/v1/signin", map[string]string{"token": env.AdminToken}, nil)
		if err != nil || r.Status != http.StatusTooManyRequests {
			t.Fatalf("console sign-in from a throttled address: %v %d %s, want 429", err, r.Status, r.Body)
		}
		clock.Advance(time.Minute)
		admin := env.Client(env.AdminToken)
		admin.Must(http.StatusOK, http.MethodGet, "/v1/whoami", nil, nil)
		var page apitypes.AuditList
		admin.Must(http.StatusOK, http.MethodGet, "/v1/audit?event=auth.failures", nil, &page)
		if len(page.Items) != 1 {
			t.Fatalf("auth.failures rows: %d, want 1 for the window", len(page.Items))
		}
		var d struct {
			Source    string `json:"source"`
			Failures  int    `json:"failures"`
			Throttled bool   `json:"throttled"`
		}
		if err := json.Unmarshal(page.Items[0].Detail, &d); err != nil || d.Failures != auth.DefaultFailureLimit || !d.Throttled || d.Source != "127.0.0.1" {
			t.Fatalf("the window's row: %s (%v), want %d failures from 127.0.0.1, throttled", page.Items[0].Detail, err, auth.DefaultFailureLimit)
		}
		if strings.Contains(string(page.Items[0].Detail), "olv_") {
			t.Fatal("a token reached the audit ledger")
		}
		env.AssertNoSecretInLogs(t)
	})
}

// Issue 32 item 1, through the CLI: `olivares login --token $TOK`, then
// `olivares credential revoke` of $TOK from an admin's login: the first
// login's own credential, derived from $TOK, stops working with it
// (R-LIFE-10).
func TestCLILoginDiesWithItsToken(t *testing.T) {
	t.Parallel()
	env := NewEnv(t)
	bin := filepath.Join(Binaries(t), "olivares")
	olivares := func(dir string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "OLIVARES_CONFIG_DIR="+dir)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	adminDir, botDir := t.TempDir(), t.TempDir()
	if out, code := olivares(adminDir, "login", "--url", env.CheckedURL(), "--token", env.AdminToken, "--tenant", Tenant); code != 0 {
		t.Fatalf("admin login: exit %d %s", code, out)
	}
	var bot apitypes.PrincipalCreated
	out, code := olivares(adminDir, "principal", "create", "--name", "ci-bot", "--role", "operator", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &bot) != nil || bot.Token == "" {
		t.Fatalf("principal create: exit %d %s", code, out)
	}
	env.NoteSecret(bot.Token)
	if out, code := olivares(botDir, "login", "--url", env.CheckedURL(), "--token", bot.Token, "--tenant", Tenant); code != 0 {
		t.Fatalf("ci-bot login: exit %d %s", code, out)
	}
	if out, code := olivares(botDir, "whoami"); code != 0 || !strings.Contains(out, "ci-bot") {
		t.Fatalf("whoami under ci-bot's login: exit %d %s", code, out)
	}
	// The list names each credential's tenant and the one it came from.
	if out, code := olivares(adminDir, "credential", "list", "--principal", "ci-bot"); code != 0 || !strings.Contains(out, "TENANT") ||
		!strings.Contains(out, bot.CredentialID) || strings.Count(out, bot.CredentialID) != 2 {
		t.Fatalf("credential list: exit %d, want ci-bot's token and its login (FROM it)\n%s", code, out)
	}
	if out, code := olivares(adminDir, "credential", "revoke", bot.CredentialID); code != 0 || !strings.Contains(out, "1 credential derived from it") {
		t.Fatalf("credential revoke: exit %d %s", code, out)
	}
	if out, code := olivares(botDir, "whoami"); code == 0 {
		t.Fatalf("whoami under the login of a revoked token: exit 0 %s", out)
	}
}
