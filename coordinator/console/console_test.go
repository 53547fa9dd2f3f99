package console_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/api"
	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/console"
	"github.com/olivares-dev/olivares/coordinator/fleet"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/store/bolt"
	"github.com/olivares-dev/olivares/integration/contract"
)

type fix struct {
	st    store.Store
	h     http.Handler
	now   time.Time
	human string // principal ids
	agent string
	token string // the human's API token
}

func newFix(t *testing.T) *fix {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fix{st: st, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	ctx := context.Background()
	for _, p := range []struct{ id, kind, tok string }{{"prn_h", store.KindHuman, "olv_human"}, {"prn_a", store.KindAgent, "olv_agent"}} {
		if err := st.CreatePrincipal(ctx, store.Principal{ID: p.id, Name: p.id, Kind: p.kind, Roles: map[string]string{"default": store.RoleViewer, "other": store.RoleAdmin}},
			store.Credential{Hash: auth.Hash(p.tok), ID: "cred_" + p.id, Kind: store.CredAPIToken, PrincipalID: p.id, Tenant: store.AllTenants}); err != nil {
			t.Fatal(err)
		}
	}
	f.human, f.agent, f.token = "prn_h", "prn_a", "olv_human"
	clock := func() time.Time { return f.now }
	a := api.New(api.Options{Store: st, Fleet: fleet.New(fleet.Options{Store: st}), Now: clock})
	// Every API exchange of these tests, the sign-in routes included, is
	// checked against openapi.yaml (issue 17); the pages and assets are
	// outside the document.
	f.h = contract.Handler(t, console.New(console.Options{Store: st, API: a.Handler(), Now: clock}))
	return f
}

func (f *fix) do(t *testing.T, method, path, body string, hdr ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	return rec.Result()
}

func (f *fix) link(t *testing.T, id string) string {
	t.Helper()
	secret, _, err := console.MintLink(context.Background(), f.st, id, 0, f.now)
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

func sessionCookie(r *http.Response) *http.Cookie {
	for _, c := range r.Cookies() {
		if c.Name == auth.SessionCookie {
			return c
		}
	}
	return nil
}

// Every response, page, asset, sign-in or API, carries the strict headers.
func TestSecurityHeaders(t *testing.T) {
	f := newFix(t)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/", ""}, {"GET", "/runs/run_x", ""}, {"GET", "/assets/app.js", ""}, {"GET", "/v1/whoami", ""},
		{"POST", "/v1/signin", "{}"}, {"GET", "/nope", ""},
	} {
		r := f.do(t, c.method, c.path, c.body, "Content-Type", "application/json")
		h := r.Header
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s %s: CSP %q lacks %q", c.method, c.path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s %s: CSP %q allows inline script or eval", c.method, c.path, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s %s: got nosniff %q referrer %q", c.method, c.path, h.Get("X-Content-Type-Options"), h.Get("Referrer-Policy"))
		}
	}
}

// The page and every asset it loads carry no inline script, no inline
// style attribute and no address outside this origin (it works offline).
func TestAssetsSelfContained(t *testing.T) {
	f := newFix(t)
	c := console.New(console.Options{Store: f.st, API: http.NotFoundHandler()})
	for name := range c.Sizes() {
		r := f.do(t, "GET", "/assets/"+name, "")
		b := body(t, r)
		if r.StatusCode != 200 {
			t.Fatalf("%s: %d", name, r.StatusCode)
		}
		for _, bad := range []string{"http://", "https://", "eval(", "new Function", "innerHTML", " style=\"", "<script>"} {
			if strings.Contains(b, bad) && !(bad == "http://" && strings.HasSuffix(name, ".svg")) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
	}
}

// The first load of the list screen stays within 250 KiB compressed.
func TestFirstLoadBudget(t *testing.T) {
	c := console.New(console.Options{API: http.NotFoundHandler()})
	sizes := c.Sizes()
	total := 0
	for _, name := range console.FirstLoad {
		s, ok := sizes[name]
		if !ok {
			t.Fatalf("first-load asset %s is not embedded", name)
		}
		total += s[1]
	}
	t.Logf("first load of the list: %d bytes compressed (%d files)", total, len(console.FirstLoad))
	if total > 250<<10 {
		t.Fatalf("first load %d bytes compressed, want at most %d", total, 250<<10)
	}
}

// FirstLoad holds every module the list screen loads before it paints: the
// static imports of app.js and list.js, followed through (a dynamic
// import() loads later and is not counted).
func TestFirstLoadHoldsTheListsImports(t *testing.T) {
	c := console.New(console.Options{API: http.NotFoundHandler()})
	first := map[string]bool{}
	for _, n := range console.FirstLoad {
		first[n] = true
	}
	staticImport := regexp.MustCompile(`(?m)^import [^;]*? from '\./([a-z]+\.js)';`)
	seen := map[string]bool{}
	var walk func(name string)
	walk = func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		if !first[name] {
			t.Errorf("%s is imported before the list paints but is not in FirstLoad", name)
		}
		r := httptest.NewRecorder()
		c.ServeHTTP(r, httptest.NewRequest("GET", "/assets/"+name, nil))
		for _, m := range staticImport.FindAllStringSubmatch(r.Body.String(), -1) {
			walk(m[1])
		}
	}
	walk("app.js")
	walk("list.js")
	if len(seen) < 5 {
		t.Fatalf("followed only %v: the import pattern no longer matches", seen)
	}
}

// Assets are served gzip-compressed to a browser that takes it, plain
// otherwise, and revalidated by ETag.
func TestAssetsGzipAndETag(t *testing.T) {
	f := newFix(t)
	plain := f.do(t, "GET", "/assets/app.js", "")
	pb := body(t, plain)
	gz := f.do(t, "GET", "/assets/app.js", "", "Accept-Encoding", "gzip, br")
	if gz.Header.Get("Content-Encoding") != "gzip" || gz.Header.Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Fatalf("got encoding %q type %q", gz.Header.Get("Content-Encoding"), gz.Header.Get("Content-Type"))
	}
	zr, err := gzip.NewReader(gz.Body)
	if err != nil {
		t.Fatal(err)
	}
	ub, _ := io.ReadAll(zr)
	if !bytes.Equal(ub, []byte(pb)) {
		t.Fatal("the gzip body is not the plain one")
	}
	if r := f.do(t, "GET", "/assets/app.js", "", "If-None-Match", plain.Header.Get("ETag")); r.StatusCode != http.StatusNotModified {
		t.Fatalf("revalidation: %d, want 304", r.StatusCode)
	}
	for _, p := range []string{"/", "/signin", "/runs", "/runs/run_1", "/workspaces", "/workspaces/ws_1", "/nodes", "/nodes/node-1", "/codex", "/claude", "/audit", "/profiles", "/usage"} {
		if r := f.do(t, "GET", p, ""); r.StatusCode != 200 || !strings.Contains(body(t, r), `src="/assets/app.js"`) {
			t.Errorf("GET %s: %d, want the page", p, r.StatusCode)
		}
	}
	// Anything else is the API's ordinary 404 (R-ED-3).
	for _, p := range []string{"/runs/run_1/x", "/runs/", "/nodes/n/x", "/workspaces/w/x", "/codex/x"} {
		if r := f.do(t, "GET", p, ""); r.StatusCode != 404 || !strings.Contains(body(t, r), `"code":"not_found"`) {
			t.Errorf("GET %s: %d", p, r.StatusCode)
		}
	}
}

func TestSigninLink(t *testing.T) {
	f := newFix(t)
	secret := f.link(t, f.human)
	r := f.do(t, "POST", "/v1/signin", `{"link":"`+secret+`"}`, "Content-Type", "application/json")
	if r.StatusCode != 200 {
		t.Fatalf("sign-in: %d %s", r.StatusCode, body(t, r))
	}
	b := body(t, r)
	if !strings.Contains(b, `"principal_id":"prn_h"`) || !strings.Contains(b, `{"id":"default","role":"viewer"`) || !strings.Contains(b, `{"id":"other","role":"admin"`) {
		t.Fatalf("sign-in body %s", b)
	}
	ck := sessionCookie(r)
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || ck.Path != "/" {
		t.Fatalf("cookie %+v, want HttpOnly, SameSite=Strict, not Secure without TLS", ck)
	}
	// The cookie is a session credential of the person (R-PIN-6: it shares
	// their marks) and authenticates the API.
	_, cred, err := f.st.PrincipalByCredential(context.Background(), auth.Hash(ck.Value))
	if err != nil || cred.Kind != store.CredSession || cred.PrincipalID != f.human {
		t.Fatalf("cookie credential %+v %v", cred, err)
	}
	if r := f.do(t, "GET", "/v1/whoami", "", "Cookie", ck.String(), "X-Olivares-Tenant", "default"); r.StatusCode != 200 {
		t.Fatalf("whoami with the cookie: %d %s", r.StatusCode, body(t, r))
	}
	if r := f.do(t, "GET", "/v1/tenants", "", "Cookie", ck.String()); r.StatusCode != 200 {
		t.Fatalf("tenants with the cookie: %d", r.StatusCode)
	}
	// Single use.
	r = f.do(t, "POST", "/v1/signin", `{"link":"`+secret+`"}`, "Content-Type", "application/json")
	if r.StatusCode != 401 || !strings.Contains(body(t, r), "signin_link_used") {
		t.Fatalf("second use: %d", r.StatusCode)
	}
	// Short-lived.
	late := f.link(t, f.human)
	f.now = f.now.Add(console.DefaultLinkTTL)
	if r := f.do(t, "POST", "/v1/signin", `{"link":"`+late+`"}`, "Content-Type", "application/json"); r.StatusCode != 401 || !strings.Contains(body(t, r), "signin_link_expired") {
		t.Fatalf("expired link: %d", r.StatusCode)
	}
	// The session itself expires.
	f.now = f.now.Add(31 * 24 * time.Hour)
	if r := f.do(t, "GET", "/v1/tenants", "", "Cookie", ck.String()); r.StatusCode != 401 || !strings.Contains(body(t, r), "session_expired") {
		t.Fatalf("an old session: %d", r.StatusCode)
	}
	if _, _, err := console.MintLink(context.Background(), f.st, f.agent, 0, f.now); err == nil {
		t.Fatal("a link minted for an agent identity")
	}
}

func TestSigninToken(t *testing.T) {
	f := newFix(t)
	r := f.do(t, "POST", "/v1/signin", `{"token":"`+f.token+`"}`, "Content-Type", "application/json")
	ck := sessionCookie(r)
	if r.StatusCode != 200 || ck == nil || ck.Value == f.token {
		t.Fatalf("token sign-in: %d, cookie %v (must be a new credential, not the pasted token)", r.StatusCode, ck)
	}
	// Sign-out revokes the cookie's credential, never the pasted token.
	out := f.do(t, "POST", "/v1/signout", `{}`, "Content-Type", "application/json", "Cookie", ck.String())
	if out.StatusCode != 204 {
		t.Fatalf("sign-out: %d", out.StatusCode)
	}
	if c := sessionCookie(out); c == nil || c.MaxAge >= 0 {
		t.Fatalf("sign-out did not clear the cookie: %+v", c)
	}
	if r := f.do(t, "GET", "/v1/tenants", "", "Cookie", ck.String()); r.StatusCode != 401 {
		t.Fatalf("the signed-out cookie still works: %d", r.StatusCode)
	}
	if r := f.do(t, "GET", "/v1/tenants", "", "Authorization", "Bearer "+f.token); r.StatusCode != 200 {
		t.Fatalf("the pasted token stopped working: %d", r.StatusCode)
	}
	for _, c := range []struct {
		body, code string
		status     int
	}{
		{`{"token":"olv_agent"}`, "agent_identity_refused", 403},
		{`{"token":"olv_nope"}`, "unauthenticated", 401},
		{`{}`, "bad_body", 400},
		{`{"link":"a","token":"b"}`, "bad_body", 400},
		{`{"link":"olvs_nope"}`, "signin_link_unknown", 401},
		{`{"nope":1}`, "bad_body", 400},
	} {
		r := f.do(t, "POST", "/v1/signin", c.body, "Content-Type", "application/json")
		if b := body(t, r); r.StatusCode != c.status || !strings.Contains(b, `"code":"`+c.code+`"`) {
			t.Errorf("sign-in %s: got %d %s, want %d %s", c.body, r.StatusCode, b, c.status, c.code)
		}
	}
}

// What a cross-site page could send is refused: a form's content types, a
// foreign Origin, Sec-Fetch-Site cross-site, and a cookie write to the API.
func TestCrossSiteRefused(t *testing.T) {
	f := newFix(t)
	r := f.do(t, "POST", "/v1/signin", `{"token":"`+f.token+`"}`, "Content-Type", "application/json")
	ck := sessionCookie(r).String()
	for _, c := range []struct {
		name, method, path, code string
		status                   int
		hdr                      []string
	}{
		{"form sign-out", "POST", "/v1/signout", "json_required", 415, []string{"Content-Type", "application/x-www-form-urlencoded", "Cookie", ck}},
		{"text sign-out", "POST", "/v1/signout", "json_required", 415, []string{"Content-Type", "text/plain", "Cookie", ck}},
		{"foreign origin", "POST", "/v1/signout", "cross_site_refused", 403, []string{"Content-Type", "application/json", "Cookie", ck, "Origin", "http://127.0.0.1:9999"}},
		{"sec-fetch-site", "POST", "/v1/signin", "cross_site_refused", 403, []string{"Content-Type", "application/json", "Sec-Fetch-Site", "same-site"}},
		{"get sign-out", "GET", "/v1/signout", "method_not_allowed", 405, []string{"Cookie", ck}},
		{"cookie write from another origin", "POST", "/v1/m/sessions/runs/run_x/pin", "cross_site_refused", 403, []string{"Cookie", ck, "X-Olivares-Tenant", "default", "Origin", "http://evil.example"}},
		{"cookie write without the tenant header", "POST", "/v1/m/sessions/runs/run_x/pin", "tenant_required", 400, []string{"Cookie", ck}},
	} {
		r := f.do(t, c.method, c.path, `{}`, c.hdr...)
		if b := body(t, r); r.StatusCode != c.status || !strings.Contains(b, `"code":"`+c.code+`"`) {
			t.Errorf("%s: got %d %s, want %d %s", c.name, r.StatusCode, b, c.status, c.code)
		}
	}
	if r := f.do(t, "GET", "/v1/tenants", "", "Cookie", ck); r.StatusCode != 200 {
		t.Fatalf("the session did not survive the refused sign-outs: %d", r.StatusCode)
	}
	// The same-origin console page's write goes through to the route.
	r = f.do(t, "POST", "/v1/m/sessions/runs/run_x/pin", "", "Cookie", ck, "X-Olivares-Tenant", "default", "Origin", "http://example.com", "Sec-Fetch-Site", "same-origin")
	if r.StatusCode != 404 {
		t.Fatalf("same-origin cookie write: %d %s, want the route's own 404", r.StatusCode, body(t, r))
	}
}

// Under TLS the cookie is Secure.
func TestCookieSecureUnderTLS(t *testing.T) {
	f := newFix(t)
	req := httptest.NewRequest("POST", "https://example.com/v1/signin", strings.NewReader(`{"token":"`+f.token+`"}`))
	req.TLS = &tls.ConnectionState{}
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	if ck := sessionCookie(rec.Result()); ck == nil || !ck.Secure {
		t.Fatalf("cookie under TLS %+v, want Secure", ck)
	}
}

// The audit page's event filter offers every event the ledger records
// (R-AUD-1, R-AUD-6): each Audit* constant of shared/apitypes is in
// audit.js's list.
func TestAuditFilterOffersEveryEvent(t *testing.T) {
	page, err := os.ReadFile("assets/audit.js")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "..", "shared", "apitypes", "audit.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Audit") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					continue
				}
				n++
				if !strings.Contains(string(page), "'"+strings.Trim(lit.Value, `"`)+"'") {
					t.Errorf("audit.js's event filter lacks %s (%s)", lit.Value, name.Name)
				}
			}
		}
	}
	if n < 30 {
		t.Fatalf("found %d audit events in shared/apitypes/audit.go, want them all", n)
	}
}
