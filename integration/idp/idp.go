// Package idp runs a real OpenID Connect provider on 127.0.0.1 for tests:
// zitadel/oidc's OpenID Provider (pkg/op) over its example in-memory
// storage, with a username and password page, one confidential web client
// whose redirect URIs may be any loopback address, and users whose groups
// and email the test sets. It is not a mock of the coordinator's client:
// discovery, the authorization endpoint, PKCE, the token endpoint, the
// signed ID tokens, the JWKS and userinfo are the library's.
//
// A test can make the provider misbehave the way a misconfigured one does:
// an ID token for another audience (an audience mapper), or issued with a
// clock an hour behind (expired on arrival).
package idp

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// The client the coordinator is registered as.
const (
	ClientID     = "olivares"
	ClientSecret = "olivares-test-secret"
)

// User is a person at the provider.
type User struct {
	Subject  string
	Username string
	Password string
	Name     string
	Email    string
	// EmailVerified: the provider has checked the address.
	EmailVerified bool
	// Groups is the "groups" claim.
	Groups []string
}

// IdP is a running provider.
type IdP struct {
	// Issuer is the provider's issuer URL (http://127.0.0.1:PORT).
	Issuer string

	st  *store
	srv *httptest.Server

	mu       sync.Mutex
	users    map[string]*User // by subject
	audience []string
	skew     time.Duration
}

// Start runs a provider with users until the test ends.
func Start(t testing.TB, users ...User) *IdP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &IdP{Issuer: "http://" + ln.Addr().String(), users: map[string]*User{}}
	for _, u := range users {
		p.users[u.Subject] = &u
	}
	client := storage.WebClient(ClientID, ClientSecret)
	p.st = &store{Storage: storage.NewStorageWithClients(userStore{p}, map[string]*storage.Client{ClientID: client}), idp: p}
	provider, err := op.NewProvider(&op.Config{
		CryptoKey:          sha256.Sum256([]byte("olivares test idp")),
		CodeMethodS256:     true,
		AuthMethodPost:     true,
		SupportedUILocales: []language.Tag{language.English},
	}, p.st, op.StaticIssuer(p.Issuer), op.WithAllowInsecure(), op.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login/username", func(w http.ResponseWriter, r *http.Request) {
		loginPage.Execute(w, map[string]string{"ID": r.FormValue("authRequestID")})
	})
	intercept := op.NewIssuerInterceptor(provider.IssuerFromRequest)
	mux.HandleFunc("POST /login/username", intercept.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.FormValue("id")
		if err := p.st.CheckUsernamePassword(r.FormValue("username"), r.FormValue("password"), id); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			loginPage.Execute(w, map[string]string{"ID": id, "Error": err.Error()})
			return
		}
		http.Redirect(w, r, op.AuthCallbackURL(provider)(r.Context(), id), http.StatusFound)
	}))
	srv := &server{LegacyServer: op.NewLegacyServer(provider, provider.Endpoints()), idp: p}
	mux.Handle("/", op.RegisterLegacyServer(srv, op.AuthorizeCallbackHandler(provider), op.WithFallbackLogger(quiet)))
	p.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	p.srv.Start()
	t.Cleanup(p.srv.Close)
	return p
}

// quiet drops the library's logs: a failing test prints what it needs.
var quiet = slog.New(slog.DiscardHandler)

var loginPage = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Test IdP</title></head><body>
<form method="POST" action="/login/username">
<input type="hidden" name="id" value="{{.ID}}">
<label for="username">Username</label> <input id="username" name="username" autocomplete="username">
<label for="password">Password</label> <input id="password" name="password" type="password">
<p id="error">{{.Error}}</p>
<button id="login" type="submit">Sign in</button>
</form></body></html>`))

// SetGroups changes a user's groups, as an administrator of the provider
// would.
func (p *IdP) SetGroups(subject string, groups ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.users[subject].Groups = groups
}

// SetAudience makes ID tokens name aud as their audience (nil: the
// client, as a well-configured provider does).
func (p *IdP) SetAudience(aud ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.audience = aud
}

// SetClockSkew moves the provider's clock for the times in its tokens:
// -2h issues ID tokens that expired an hour before they are sent.
func (p *IdP) SetClockSkew(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.skew = d
}

// Login plays the person's browser over HTTP: it opens authURL (the
// provider's authorization URL a sign-in started), signs in with
// username and password, and follows the provider's redirects until one
// leaves the provider. It returns that redirect: the client's redirect URI
// with the code and state.
func (p *IdP) Login(t testing.TB, authURL, username, password string) *url.URL {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	next := authURL
	form := url.Values(nil)
	for range 10 {
		var resp *http.Response
		var err error
		if form != nil {
			resp, err = c.PostForm(next, form)
			form = nil
		} else {
			resp, err = c.Get(next)
		}
		if err != nil {
			t.Fatalf("idp: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK && strings.Contains(string(body), `action="/login/username"`):
			u, _ := url.Parse(next)
			next = p.Issuer + "/login/username"
			form = url.Values{"id": {u.Query().Get("authRequestID")}, "username": {username}, "password": {password}}
			continue
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			loc, err := resp.Location()
			if err != nil {
				t.Fatalf("idp: redirect without a location: %v", err)
			}
			if !strings.HasPrefix(loc.String(), p.Issuer+"/") {
				return loc
			}
			next = loc.String()
			continue
		}
		t.Fatalf("idp: %s answered %d: %s", next, resp.StatusCode, body)
	}
	t.Fatal("idp: too many redirects")
	return nil
}

// store is the example storage with this provider's users, groups and
// client settings.
type store struct {
	*storage.Storage
	idp *IdP
}

func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return &client{Client: c, idp: s.idp}, nil
}

func (s *store) SetUserinfoFromRequest(ctx context.Context, ui *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, ui, req, scopes); err != nil {
		return err
	}
	s.idp.addClaims(ui, req.GetSubject())
	return nil
}

func (s *store) SetUserinfoFromToken(ctx context.Context, ui *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, ui, tokenID, subject, origin); err != nil {
		return err
	}
	s.idp.addClaims(ui, ui.Subject)
	return nil
}

func (p *IdP) addClaims(ui *oidc.UserInfo, subject string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if u := p.users[subject]; u != nil {
		ui.Name = u.Name
		ui.AppendClaims("groups", append([]string{}, u.Groups...))
	}
}

// client is the web client: any loopback redirect URI, the user's claims
// in the ID token (as most providers put them), and the provider's clock.
type client struct {
	op.Client
	idp *IdP
}

func (c *client) RedirectURIGlobs() []string {
	return []string{"http://127.0.0.1:*/**", "http://localhost:*/**"}
}
func (c *client) PostLogoutRedirectURIGlobs() []string { return nil }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c *client) IsScopeAllowed(scope string) bool     { return scope == "groups" }
func (c *client) DevMode() bool                        { return true }
func (c *client) IDTokenLifetime() time.Duration       { return time.Hour }

// server is the library's OpenID Provider server. With an audience set it
// rewrites the ID token's aud, as a provider with an audience mapper would
// issue it; with a clock skew, its times, as a provider whose clock is off
// would; and signs it again with the provider's own key.
type server struct {
	*op.LegacyServer
	idp *IdP
}

func (s *server) CodeExchange(ctx context.Context, r *op.ClientRequest[oidc.AccessTokenRequest]) (*op.Response, error) {
	resp, err := s.LegacyServer.CodeExchange(ctx, r)
	s.idp.mu.Lock()
	aud, skew := s.idp.audience, s.idp.skew
	s.idp.mu.Unlock()
	if err != nil || (aud == nil && skew == 0) {
		return resp, err
	}
	tr, ok := resp.Data.(*oidc.AccessTokenResponse)
	if !ok {
		return nil, errors.New("idp: unexpected token response")
	}
	tr.IDToken, err = s.idp.resign(ctx, tr.IDToken, func(c map[string]any) {
		if aud != nil {
			c["aud"] = aud
		}
		if skew != 0 {
			now := time.Now().Add(skew)
			c["iat"], c["auth_time"], c["exp"] = now.Unix(), now.Unix(), now.Add(time.Hour).Unix()
		}
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (p *IdP) resign(ctx context.Context, jwt string, edit func(map[string]any)) (string, error) {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return "", errors.New("idp: not a JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", err
	}
	claims := map[string]any{}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return "", err
	}
	edit(claims)
	payload, _ := json.Marshal(claims)
	key, err := p.st.SigningKey(ctx)
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: key.SignatureAlgorithm(), Key: jose.JSONWebKey{Key: key.Key(), KeyID: key.ID()}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", err
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return obj.CompactSerialize()
}

// userStore serves the test's users to the example storage.
type userStore struct{ p *IdP }

func (u userStore) GetUserByID(id string) *storage.User {
	u.p.mu.Lock()
	defer u.p.mu.Unlock()
	return toStorage(u.p.users[id])
}

func (u userStore) GetUserByUsername(name string) *storage.User {
	u.p.mu.Lock()
	defer u.p.mu.Unlock()
	for _, x := range u.p.users {
		if x.Username == name {
			return toStorage(x)
		}
	}
	return nil
}

func (u userStore) ExampleClientID() string { return "service" }

func toStorage(x *User) *storage.User {
	if x == nil {
		return nil
	}
	first, last, _ := strings.Cut(x.Name, " ")
	return &storage.User{ID: x.Subject, Username: x.Username, Password: x.Password, FirstName: first, LastName: last,
		Email: x.Email, EmailVerified: x.EmailVerified, PreferredLanguage: language.English}
}
