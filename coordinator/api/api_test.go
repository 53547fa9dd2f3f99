package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/fleet"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/store/bolt"
	"github.com/olivares-dev/olivares/integration/contract"
)

// newTestServer builds a server on a fresh store; each with changes the
// options first.
func newTestServer(t *testing.T, with ...func(*Options)) (*Server, store.Store) {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	o := Options{Store: st, Fleet: fleet.New(fleet.Options{Store: st})}
	for _, f := range with {
		f(&o)
	}
	s := New(o)
	// Every request these tests send and every answer they get is checked
	// against openapi.yaml (issue 17).
	checked.Store(s, contract.Handler(t, s.Handler()))
	t.Cleanup(func() { checked.Delete(s) })
	return s, st
}

// checked holds each test server's handler wrapped by the contract check.
var checked sync.Map

// handler is s's handler as the tests call it: checked against the
// document when newTestServer built s.
func handler(s *Server) http.Handler {
	if h, ok := checked.Load(s); ok {
		return h.(http.Handler)
	}
	return s.Handler()
}

func principal(t *testing.T, st store.Store, id string, roles map[string]string) string {
	t.Helper()
	tok, _ := auth.NewToken(auth.PrefixAPIToken)
	p := store.Principal{ID: id, Name: id, Kind: store.KindHuman, Roles: roles, CreatedAt: time.Now()}
	if err := st.CreatePrincipal(context.Background(), p, store.Credential{Hash: auth.Hash(tok), PrincipalID: id, CreatedAt: time.Now(), Tenant: store.AllTenants}); err != nil {
		t.Fatal(err)
	}
	return tok
}

func call(s *Server, method, path, token, tenant string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if tenant != "" {
		req.Header.Set(HeaderTenant, tenant)
	}
	rec := httptest.NewRecorder()
	handler(s).ServeHTTP(rec, req)
	return rec
}

// R-AUTH-8: every route, called with a credential lacking its permission,
// answers 403 before any handler logic (the node ids do not even exist).
func TestEveryRouteChecksItsPermission(t *testing.T) {
	s, st := newTestServer(t)
	// A role without the route's permission: viewer lacks write/admin;
	// for read routes there is no such built-in role, so use a role name
	// that grants nothing.
	none := principal(t, st, "none", map[string]string{"t1": "nobody"})
	viewer := principal(t, st, "viewer", map[string]string{"t1": store.RoleViewer})
	for i, r := range s.Routes() {
		path := strings.ReplaceAll(r.Path, ":id", "node-x")
		tok := none
		if r.Perm != auth.PermRunRead && r.Perm != "" {
			tok = viewer
		}
		if r.Perm == "" {
			// Its own principal: POST /v1/logout revokes the token it
			// presents.
			tok = principal(t, st, fmt.Sprintf("any-%d", i), map[string]string{"t1": "nobody"})
		}
		rec := call(s, r.Method, path, tok, "t1")
		if r.Perm == "" {
			if rec.Code < 200 || rec.Code > 299 {
				t.Errorf("%s %s: got %d %s, want 2xx", r.Method, r.Path, rec.Code, rec.Body)
			}
			continue
		}
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), `"permission_denied"`) {
			t.Errorf("%s %s without %s: got %d %s, want 403 permission_denied", r.Method, r.Path, r.Perm, rec.Code, rec.Body)
		}
		// R-API-3 order: authentication first, then the tenant header.
		if rec := call(s, r.Method, path, "", "t1"); rec.Code != http.StatusUnauthorized {
			t.Errorf("%s %s without token: got %d, want 401", r.Method, r.Path, rec.Code)
		}
		if rec := call(s, r.Method, path, tok, ""); rec.Code != http.StatusBadRequest {
			t.Errorf("%s %s without tenant: got %d, want 400", r.Method, r.Path, rec.Code)
		}
	}
}

// R-API-4 bodies everywhere; R-ED-2/R-ED-3: the overlay prefix is the
// ordinary 404, byte for byte but for the request id, whatever the method.
// R-OBS-4: every error body carries the id its X-Request-Id header has.
func TestErrorBodies(t *testing.T) {
	s, _ := newTestServer(t)
	// withoutID checks the body's request_id against the header and
	// returns the body with the id blanked.
	withoutID := func(rec *httptest.ResponseRecorder) string {
		t.Helper()
		id := rec.Header().Get("X-Request-Id")
		var b struct {
			Error struct {
				RequestID string `json:"request_id"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || id == "" || b.Error.RequestID != id {
			t.Errorf("request_id %q, X-Request-Id %q, want equal and not empty (%v)", b.Error.RequestID, id, err)
		}
		return strings.Replace(rec.Body.String(), id, "", 1)
	}
	want := call(s, "GET", "/v1/m/does-not-exist", "", "")
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(want.Body.Bytes(), &body); err != nil || want.Code != 404 || body.Error.Code != "not_found" || body.Error.Message == "" {
		t.Fatalf("unknown route: %d %s", want.Code, want.Body)
	}
	wantBody := withoutID(want)
	for _, m := range []string{"GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"} {
		for _, p := range []string{"/v1/m/session-cockpit", "/v1/m/session-cockpit/", "/v1/m/session-cockpit/x/y"} {
			got := call(s, m, p, "", "")
			if got.Code != 404 || withoutID(got) != wantBody || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
				t.Errorf("%s %s: got %d %s", m, p, got.Code, got.Body)
			}
		}
	}
	for _, r := range s.echo.Routes() {
		if strings.HasPrefix(r.Path, "/v1/m/session-cockpit") {
			t.Errorf("a handler is registered under the overlay prefix: %s %s", r.Method, r.Path)
		}
	}
	// A wrong method on a known route is a 405 with the same envelope.
	rec := call(s, "DELETE", "/v1/nodes", "", "")
	if rec.Code != http.StatusMethodNotAllowed || !strings.Contains(rec.Body.String(), `"error"`) {
		t.Errorf("405: %d %s", rec.Code, rec.Body)
	}
}
