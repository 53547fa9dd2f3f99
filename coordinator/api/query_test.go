package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration/contract"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-API-10 (issue 28): every GET route of the table refuses a query
// parameter it does not declare with 400 bad_query, after its {ref} is
// found (R-API-3) and before its handler asks a node or the store.
func TestEveryGETRefusesAnUnknownQuery(t *testing.T) {
	s, st := newTestServer(t)
	ctx := context.Background()
	enrollNode(t, st, "node-1", "t1", `{}`)
	admin := principal(t, st, "admin", map[string]string{"t1": store.RoleAdmin})
	if _, err := st.PutRun(ctx, apitypes.Run{RunRef: "run_1", Tenant: "t1", NodeID: "node-1", State: apitypes.StateIdle, Driver: "codex", Isolation: apitypes.IsolationNative}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateWorkspace(ctx, apitypes.Workspace{Ref: "ws_1", Tenant: "t1", NodeID: "node-1", Name: "w", Path: "/w"}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateProfile(ctx, apitypes.Profile{Ref: "prof_1", Tenant: "t1", NodeID: "node-1", Tool: "codex", Name: "p"}); err != nil {
		t.Fatal(err)
	}
	refs := map[string]string{"/runs/": "run_1", "/workspaces/": "ws_1", "/profiles/": "prof_1"}
	gets := 0
	for _, r := range s.Routes() {
		if r.Method != http.MethodGet {
			continue
		}
		gets++
		path, missing := r.Path, r.Path
		for prefix, ref := range refs {
			path = strings.Replace(path, prefix+":ref", prefix+ref, 1)
			missing = strings.Replace(missing, prefix+":ref", prefix+"nope", 1)
		}
		for _, p := range []string{":id", ":host", ":thread", ":session", ":agent"} {
			path, missing = strings.Replace(path, p, "x", 1), strings.Replace(missing, p, "x", 1)
		}
		rec := call(s, http.MethodGet, path+"?olivares_bogus=1", admin, "t1")
		if rec.Code != http.StatusBadRequest || errCode(rec) != "bad_query" {
			t.Errorf("GET %s?olivares_bogus=1: got %d %s, want 400 bad_query", path, rec.Code, rec.Body)
		}
		if missing != path {
			// R-API-3: an unknown {ref} is 404 whatever the query holds.
			if rec := call(s, http.MethodGet, missing+"?olivares_bogus=1", admin, "t1"); rec.Code != http.StatusNotFound {
				t.Errorf("GET %s?olivares_bogus=1: got %d %s, want 404", missing, rec.Code, rec.Body)
			}
		}
		// What the route declares passes the check.
		for _, q := range r.Query {
			e := echo.New()
			c := e.NewContext(httptest.NewRequest(http.MethodGet, path+"?"+q+"=1", nil), httptest.NewRecorder())
			reached := false
			if err := onlyQuery(r)(func(echo.Context) error { reached = true; return nil })(c); err != nil || !reached {
				t.Errorf("GET %s?%s=1: refused (%v), though the route declares %s", r.Path, q, err, q)
			}
		}
	}
	if gets < 30 {
		t.Errorf("walked %d GET routes; the table has more", gets)
	}
}

// R-API-10: the query parameters a GET route declares are the ones
// openapi.yaml documents for it, so that the check refuses none the
// document offers and lets through none it does not.
func TestDeclaredQueryIsDocumented(t *testing.T) {
	s, _ := newTestServer(t)
	doc := contract.Must(t).Doc()
	for _, r := range s.Routes() {
		if r.Method != http.MethodGet {
			continue
		}
		path := echoParam.ReplaceAllString(r.Path, "{$1}")
		item := doc.Paths.Value(path)
		if item == nil || item.Get == nil {
			t.Errorf("GET %s: not documented", path)
			continue
		}
		var documented []string
		for _, p := range slices.Concat(item.Parameters, item.Get.Parameters) {
			if p.Value.In == "query" {
				documented = append(documented, p.Value.Name)
			}
		}
		slices.Sort(documented)
		if declared := slices.Sorted(slices.Values(r.Query)); !slices.Equal(declared, documented) {
			t.Errorf("GET %s: the route declares query %v, the document %v", path, declared, documented)
		}
	}
}

// R-API-15: GET /v1/nodes answers its rows in items, like every list.
func TestNodeListAnswersItems(t *testing.T) {
	s, st := newTestServer(t)
	enrollNode(t, st, "node-1", "t1", "")
	op := principal(t, st, "op", map[string]string{"t1": store.RoleOperator})
	rec := call(s, http.MethodGet, "/v1/nodes", op, "t1")
	var body map[string][]apitypes.Node
	if err := json.Unmarshal(rec.Body.Bytes(), &body); rec.Code != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/nodes: %d %s", rec.Code, rec.Body)
	}
	if len(body["items"]) != 1 || body["items"][0].ID != "node-1" || len(body) != 1 {
		t.Errorf("GET /v1/nodes: %s, want {\"items\":[node-1]}", rec.Body)
	}
}
