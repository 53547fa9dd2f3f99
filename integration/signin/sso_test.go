// Package signin runs single sign-on journeys against a real OpenID
// Connect provider (integration/idp: zitadel/oidc's OP) and a real
// coordinator: the console's redirect flow by HTTP, the command-line flow
// by HTTP and with the real olivares binary, and the refusals.
package signin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/console"
	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/coordinator/sso"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/contract"
	"github.com/olivares-dev/olivares/integration/idp"
)

func TestMain(m *testing.M) {
	code := m.Run()
	integration.RemoveBinaries()
	os.Exit(code)
}

// The provider's people.
var (
	ada = idp.User{Subject: "sub-ada", Username: "ada", Password: "pw-ada", Name: "Ada Lovelace",
		Email: "ada@example.com", EmailVerified: true, Groups: []string{"engineers"}}
	cleo = idp.User{Subject: "sub-cleo", Username: "cleo", Password: "pw-cleo", Name: "Cleo Contractor",
		Email: "cleo@example.com", EmailVerified: true, Groups: []string{"contractors"}}
	mallory = idp.User{Subject: "sub-mallory", Username: "mallory", Password: "pw-mallory", Name: "Mallory",
		Email: "mallory@elsewhere.org", EmailVerified: true, Groups: []string{"engineers"}}
	// ada2 has Ada's email at the provider but is another account (another
	// subject): a principal is found by issuer and subject, never by email.
	ada2 = idp.User{Subject: "sub-ada-2", Username: "ada2", Password: "pw-ada2", Name: "Ada Again",
		Email: "ada@example.com", EmailVerified: true, Groups: []string{"engineers"}}
)

type fixture struct {
	t     *testing.T
	env   *integration.Env
	idp   *idp.IdP
	clock *integration.Clock
	http  *http.Client
}

func setup(t *testing.T) *fixture {
	t.Helper()
	p := idp.Start(t, ada, cleo, mallory, ada2)
	clock := integration.NewClock(time.Now())
	env := integration.NewEnv(t, integration.Options{Now: clock.Now, Configure: func(c *coordd.Config) {
		c.OIDC = sso.Config{
			Issuer: p.Issuer, ClientID: idp.ClientID, ClientSecret: idp.ClientSecret,
			Scopes: []string{"openid", "email", "profile", "groups"}, DisplayName: "Test IdP",
			AllowedEmailDomains: []string{"example.com"},
			Roles: []sso.RoleRule{
				{Claim: "groups", Value: "admins", Tenant: integration.Tenant, Role: store.RoleAdmin},
				{Claim: "groups", Value: "engineers", Tenant: integration.Tenant, Role: store.RoleOperator},
				{Claim: "groups", Value: "contractors", Tenant: integration.Tenant, Role: store.RoleViewer},
			},
		}
	}})
	return &fixture{t: t, env: env, idp: p, clock: clock,
		// The API's answers are checked against openapi.yaml; the
		// provider's pages are outside the document.
		http: &http.Client{Transport: contract.Transport(t, nil), Timeout: 30 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// consoleSignIn runs the console's flow by HTTP as a browser would: the
// sign-in start, the provider's login, the callback with the flow cookie.
// It returns the callback's answer.
func (f *fixture) consoleSignIn(u idp.User) *http.Response {
	f.t.Helper()
	resp, err := f.http.Get(f.env.APIURL() + sso.LoginPath)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		f.t.Fatalf("GET %s: got %d, want 302", sso.LoginPath, resp.StatusCode)
	}
	var flow *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == console.FlowCookie {
			flow = c
		}
	}
	if flow == nil || !flow.HttpOnly || flow.SameSite != http.SameSiteLaxMode || flow.Path != sso.CallbackPath {
		f.t.Fatalf("the flow cookie: got %+v, want HttpOnly, SameSite=Lax, Path=%s", flow, sso.CallbackPath)
	}
	authURL := resp.Header.Get("Location")
	au, _ := url.Parse(authURL)
	if q := au.Query(); q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" || q.Get("state") == "" {
		f.t.Fatalf("the authorization URL lacks PKCE, nonce or state: %s", authURL)
	}
	back := f.idp.Login(f.t, authURL, u.Username, u.Password)
	if !strings.HasPrefix(back.String(), f.env.APIURL()+sso.CallbackPath+"?") {
		f.t.Fatalf("the provider sent the browser to %s, want the console's callback", back)
	}
	req, _ := http.NewRequest(http.MethodGet, back.String(), nil)
	req.AddCookie(&http.Cookie{Name: flow.Name, Value: flow.Value})
	resp, err = f.http.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// session is the session cookie the callback set; it fails the test when
// the callback refused.
func (f *fixture) session(resp *http.Response) string {
	f.t.Helper()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		f.t.Fatalf("callback: got %d to %q, want 303 to /", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, c := range resp.Cookies() {
		if c.Name == auth.SessionCookie && c.Value != "" {
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
				f.t.Fatalf("the session cookie: got %+v, want HttpOnly, SameSite=Strict, Path=/ (as POST /v1/signin sets it)", c)
			}
			return c.Value
		}
	}
	f.t.Fatal("the callback set no session cookie")
	return ""
}

// refusal is the code and message a refused console sign-in carries back
// to the sign-in page.
func refusal(t *testing.T, resp *http.Response) (code, msg string) {
	t.Helper()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc == nil || loc.Path != "/signin" {
		t.Fatalf("refused sign-in: got %d to %q, want 303 to /signin?sso_error=...", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, c := range resp.Cookies() {
		if c.Name == auth.SessionCookie && c.Value != "" {
			t.Fatal("a refused sign-in set a session cookie")
		}
	}
	return loc.Query().Get("sso_error"), loc.Query().Get("sso_message")
}

type tenants struct {
	PrincipalID string `json:"principal_id"`
	Name        string `json:"name"`
	Items       []struct {
		ID, Role string
	} `json:"items"`
}

func (f *fixture) cookieGet(token, path string) (int, []byte) {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.env.APIURL()+path, nil)
	req.AddCookie(&http.Cookie{Name: auth.SessionCookie, Value: token})
	req.Header.Set("X-Olivares-Tenant", integration.Tenant)
	resp, err := f.http.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (f *fixture) me(token string) tenants {
	f.t.Helper()
	st, b := f.cookieGet(token, "/v1/tenants")
	if st != http.StatusOK {
		f.t.Fatalf("GET /v1/tenants with the session: %d %s", st, b)
	}
	var out tenants
	json.Unmarshal(b, &out)
	return out
}

// A first sign-in creates the person's principal with the role its groups
// map to; the next finds the same principal; a change of groups at the
// provider applies at the next sign-in; the session expires and signing
// out revokes it (R-SSO-2, R-SSO-4, R-SSO-6).
func TestConsoleSignIn(t *testing.T) {
	f := setup(t)
	resp, _ := f.http.Get(f.env.APIURL() + sso.InfoPath)
	var info console.SSOInfo
	json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || info.DisplayName != "Test IdP" || info.LoginURL != sso.LoginPath {
		t.Fatalf("GET %s: got %d %+v", sso.InfoPath, resp.StatusCode, info)
	}

	tok := f.session(f.consoleSignIn(ada))
	me := f.me(tok)
	if me.Name != "Ada Lovelace" || len(me.Items) != 1 || me.Items[0].ID != integration.Tenant || me.Items[0].Role != store.RoleOperator {
		t.Fatalf("after the first sign-in: got %+v, want Ada Lovelace, operator in %s", me, integration.Tenant)
	}

	// Same person, same principal; another account with the same email is
	// someone else.
	tok2 := f.session(f.consoleSignIn(ada))
	if got := f.me(tok2).PrincipalID; got != me.PrincipalID {
		t.Fatalf("second sign-in: principal %s, want %s", got, me.PrincipalID)
	}
	if got := f.me(f.session(f.consoleSignIn(ada2))).PrincipalID; got == me.PrincipalID {
		t.Fatalf("another account with the same email signed in as %s", got)
	}

	// The provider's administrator makes Ada an admin: the next sign-in
	// says so.
	f.idp.SetGroups(ada.Subject, "admins")
	tok3 := f.session(f.consoleSignIn(ada))
	if got := f.me(tok3).Items[0].Role; got != store.RoleAdmin {
		t.Fatalf("after the group change: role %s, want admin", got)
	}

	// Sign-out revokes that session at once.
	req, _ := http.NewRequest(http.MethodPost, f.env.APIURL()+console.SignoutPath, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(&http.Cookie{Name: auth.SessionCookie, Value: tok3})
	if resp, err := f.http.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign-out: %v %v", resp, err)
	}
	if st, _ := f.cookieGet(tok3, "/v1/tenants"); st != http.StatusUnauthorized {
		t.Fatalf("the signed-out session: got %d, want 401", st)
	}
	// The others expire with the session lifetime.
	f.clock.Advance(sso.DefaultSessionTTL + time.Second)
	st, b := f.cookieGet(tok, "/v1/tenants")
	var eb struct{ Error struct{ Code string } }
	json.Unmarshal(b, &eb)
	if st != http.StatusUnauthorized || eb.Error.Code != "session_expired" {
		t.Fatalf("a session past its lifetime: got %d %s, want 401 session_expired", st, b)
	}
}

// The refusals: an ID token for another audience, an expired one, an
// email domain not admitted, and a tampered flow. None makes a session
// (R-SSO-1, R-SSO-5, R-SSO-7).
func TestConsoleSignInRefused(t *testing.T) {
	f := setup(t)
	cases := []struct {
		name  string
		user  idp.User
		setup func()
		code  string
		says  string
	}{
		{"wrong audience", ada, func() { f.idp.SetAudience("another-app") }, "sso_token_invalid", "audience"},
		{"expired ID token", ada, func() { f.idp.SetClockSkew(-2 * time.Hour) }, "sso_token_expired", "expired"},
		{"email domain not admitted", mallory, func() {}, "sso_email_domain_refused", "elsewhere.org"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.t = t
			f.idp.SetAudience()
			f.idp.SetClockSkew(0)
			c.setup()
			code, msg := refusal(t, f.consoleSignIn(c.user))
			if code != c.code || !strings.Contains(msg, c.says) {
				t.Fatalf("got %s %q, want %s saying %q", code, msg, c.code, c.says)
			}
		})
	}
	f.t = t
	f.idp.SetAudience()
	f.idp.SetClockSkew(0)

	// A callback without the browser's flow cookie, or with another's.
	resp, err := f.http.Get(f.env.APIURL() + sso.CallbackPath + "?code=x&state=y")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code, _ := refusal(t, resp); code != "sso_flow_invalid" {
		t.Fatalf("callback without a flow: got %s, want sso_flow_invalid", code)
	}
}

// A contractor's group maps to viewer: they read, and every write is
// refused with the permission it lacks (R-SSO-4, R-AUTH-2).
func TestRoleClaimMapsToViewer(t *testing.T) {
	f := setup(t)
	tok := f.session(f.consoleSignIn(cleo))
	if got := f.me(tok).Items[0].Role; got != store.RoleViewer {
		t.Fatalf("contractor's role: %s, want viewer", got)
	}
	if st, b := f.cookieGet(tok, "/v1/m/sessions/runs"); st != http.StatusOK {
		t.Fatalf("a viewer lists runs: %d %s", st, b)
	}
	req, _ := http.NewRequest(http.MethodPost, f.env.APIURL()+"/v1/m/sessions/vault/secrets", strings.NewReader(`{"name":"x","value":"y"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Olivares-Tenant", integration.Tenant)
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "permission_denied") {
		t.Fatalf("a viewer's write: got %d %s, want 403 permission_denied", resp.StatusCode, b)
	}
}

func postJSON(t *testing.T, c *http.Client, u string, body any) (int, []byte) {
	t.Helper()
	raw, _ := json.Marshal(body)
	resp, err := c.Post(u, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// The command-line flow by HTTP: start for a loopback redirect, the
// provider's login, complete with the answer: a session token. A redirect
// elsewhere, a changed flow, a wrong state and a used code are refused
// (R-SSO-3, R-SSO-7).
func TestCLIFlowByHTTP(t *testing.T) {
	f := setup(t)
	api := f.env.APIURL()
	st, b := postJSON(t, f.http, api+sso.StartPath, console.SSOStartRequest{RedirectURI: "https://evil.example.com/cb"})
	if st != http.StatusBadRequest || !strings.Contains(string(b), "bad_redirect_uri") {
		t.Fatalf("a non-loopback redirect: got %d %s, want 400 bad_redirect_uri", st, b)
	}
	redirect := "http://127.0.0.1:8250/oidc/callback"
	var start console.SSOStartResponse
	st, b = postJSON(t, f.http, api+sso.StartPath, console.SSOStartRequest{RedirectURI: redirect})
	if st != http.StatusOK || json.Unmarshal(b, &start) != nil || start.Flow == "" {
		t.Fatalf("start: %d %s", st, b)
	}
	back := f.idp.Login(t, start.AuthURL, ada.Username, ada.Password)
	if !strings.HasPrefix(back.String(), redirect+"?") {
		t.Fatalf("the provider answered at %s, want %s", back, redirect)
	}
	q := back.Query()

	st, b = postJSON(t, f.http, api+sso.CompletePath, console.SSOCompleteRequest{Flow: start.Flow, State: "not-the-state", Code: q.Get("code")})
	if st != http.StatusBadRequest || !strings.Contains(string(b), "sso_state_mismatch") {
		t.Fatalf("a wrong state: got %d %s, want 400 sso_state_mismatch", st, b)
	}
	st, b = postJSON(t, f.http, api+sso.CompletePath, console.SSOCompleteRequest{Flow: start.Flow[:len(start.Flow)-4] + "AAAA", State: q.Get("state"), Code: q.Get("code")})
	if st != http.StatusBadRequest || !strings.Contains(string(b), "sso_flow_invalid") {
		t.Fatalf("a changed flow: got %d %s, want 400 sso_flow_invalid", st, b)
	}
	var sess console.SSOSession
	st, b = postJSON(t, f.http, api+sso.CompletePath, console.SSOCompleteRequest{Flow: start.Flow, State: q.Get("state"), Code: q.Get("code")})
	if st != http.StatusOK || json.Unmarshal(b, &sess) != nil || !strings.HasPrefix(sess.Token, auth.PrefixAPIToken) {
		t.Fatalf("complete: %d %s", st, b)
	}
	if sess.ExpiresAt == nil || len(sess.Items) != 1 || sess.Items[0].Role != store.RoleOperator {
		t.Fatalf("the session: %+v", sess)
	}
	who := f.env.Do(http.MethodGet, "/v1/whoami", sess.Token, integration.Tenant)
	if who.Status != http.StatusOK || !strings.Contains(string(who.Body), `"role":"operator"`) {
		t.Fatalf("whoami with the CLI session: %d %s", who.Status, who.Body)
	}
	// The code was used: completing again is refused by the provider.
	st, b = postJSON(t, f.http, api+sso.CompletePath, console.SSOCompleteRequest{Flow: start.Flow, State: q.Get("state"), Code: q.Get("code")})
	if st != http.StatusUnauthorized || !strings.Contains(string(b), "sso_code_rejected") {
		t.Fatalf("a used code: got %d %s, want 401 sso_code_rejected", st, b)
	}
}

// olivares login --sso with the real binary: it prints the provider's
// address, the person signs in there, the provider sends the browser to
// the CLI's loopback listener, and the CLI saves a session that whoami
// uses (R-SSO-3).
func TestLoginSSOCommand(t *testing.T) {
	f := setup(t)
	bin := filepath.Join(integration.Binaries(t), "olivares")
	cfgDir := t.TempDir()
	cmd := exec.Command(bin, "login", "--sso", "--url", f.env.CheckedURL(), "--listen", "127.0.0.1:0", "--no-browser")
	cmd.Env = append(os.Environ(), "OLIVARES_CONFIG_DIR="+cfgDir)
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var authURL string
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, f.idp.Issuer) {
			authURL = line
			break
		}
	}
	if authURL == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("olivares login --sso printed no sign-in address; stderr: %s", stderr.String())
	}
	back := f.idp.Login(t, authURL, ada.Username, ada.Password)
	// The browser follows the provider's redirect to the CLI.
	resp, err := f.http.Get(back.String())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "Signed in") {
		t.Fatalf("the CLI's loopback page: %d %s", resp.StatusCode, page)
	}
	rest, _ := io.ReadAll(stdout)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("olivares login --sso: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(string(rest), "logged in to") || !strings.Contains(string(rest), "operator in default") {
		t.Fatalf("login output: %s", rest)
	}
	who := exec.Command(bin, "whoami", "--json")
	who.Env = append(os.Environ(), "OLIVARES_CONFIG_DIR="+cfgDir)
	b, err := who.CombinedOutput()
	if err != nil || !strings.Contains(string(b), `"role": "operator"`) || !strings.Contains(string(b), "Ada Lovelace") {
		t.Fatalf("olivares whoami after login --sso: %v %s", err, b)
	}
}
