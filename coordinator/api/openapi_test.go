package api

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	yaml "go.yaml.in/yaml/v4"

	olivares "github.com/olivares-dev/olivares"
	"github.com/olivares-dev/olivares/integration/contract"
)

// echoParam is an echo path parameter, :name.
var echoParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// served is the router's operations as "METHOD /path/{param}".
func served(s *Server) []string {
	var out []string
	for _, r := range s.echo.Routes() {
		out = append(out, r.Method+" "+echoParam.ReplaceAllString(r.Path, "{$1}"))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// documented is the document's operations as "METHOD /path/{param}".
func documented(t *testing.T) []string {
	var out []string
	for path, item := range contract.Must(t).Doc().Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

// consoleRoutes are the documented operations coordinator/console serves
// in front of this router (they set and clear the session cookie, and
// single sign-on's); its own test checks that it does.
var consoleRoutes = []string{"POST /v1/signin", "POST /v1/signout",
	"GET /v1/sso", "GET /v1/sso/login", "GET /v1/sso/callback", "POST /v1/sso/start", "POST /v1/sso/complete"}

// The route table and openapi.yaml hold the same operations, both ways
// (issue 17): a route added without its documentation, or a documented
// operation nothing serves, fails here.
func TestRoutesMatchTheDocument(t *testing.T) {
	s, _ := newTestServer(t)
	got, want := append(served(s), consoleRoutes...), documented(t)
	for _, op := range got {
		if !slices.Contains(want, op) {
			t.Errorf("%s is served but not in openapi.yaml: document it (paths, parameters, responses, x-olivares-permission)", op)
		}
	}
	for _, op := range want {
		if !slices.Contains(got, op) {
			t.Errorf("%s is in openapi.yaml but no route serves it", op)
		}
	}
	if len(got) < 40 {
		t.Fatalf("only %d routes served: %v", len(got), got)
	}
}

// Each authorized route's permission is the one the document names, and
// every route the authorizer does not guard is documented without
// security; the guarded ones take the tenant header (R-AUTH-1, R-AUTH-5,
// R-API-1).
func TestDocumentedPermissions(t *testing.T) {
	s, _ := newTestServer(t)
	doc := contract.Must(t).Doc()
	guarded := map[string]bool{}
	for _, r := range s.Routes() {
		path := echoParam.ReplaceAllString(r.Path, "{$1}")
		guarded[r.Method+" "+path] = true
		op := operation(doc, r.Method, path)
		if op == nil {
			t.Errorf("%s %s: not documented", r.Method, path)
			continue
		}
		perm, _ := op.Extensions[contract.ExtPermission].(string)
		perm, _, _ = strings.Cut(perm, " (")
		want := r.Perm
		if want == "" {
			want = "none"
		}
		if perm != want {
			t.Errorf("%s %s: %s %q, want %q", r.Method, path, contract.ExtPermission, perm, want)
		}
		if !strings.Contains(op.Description, r.Perm) {
			t.Errorf("%s %s: the description does not name %s", r.Method, path, r.Perm)
		}
		if op.Security != nil {
			t.Errorf("%s %s: guarded by the authorizer, documented with its own security %v", r.Method, path, *op.Security)
		}
		if got := op.Parameters.GetByInAndName("header", HeaderTenant) != nil; got == noTenant[r.Path] {
			t.Errorf("%s %s: documented with the %s header %v, want %v", r.Method, path, HeaderTenant, got, !noTenant[r.Path])
		}
	}
	for _, op := range served(s) {
		if guarded[op] {
			continue
		}
		method, path, _ := strings.Cut(op, " ")
		o := operation(doc, method, path)
		if o == nil {
			continue // TestRoutesMatchTheDocument
		}
		if o.Security == nil || len(*o.Security) != 0 {
			t.Errorf("%s: served without credentials, documented with them", op)
		}
	}
}

// operation is the document's operation for method and path, nil when the
// path or the method is not documented.
func operation(doc *openapi3.T, method, path string) *openapi3.Operation {
	item := doc.Paths.Value(path)
	if item == nil {
		return nil
	}
	return item.GetOperation(method)
}

// The document is served without credentials: the committed YAML as it is,
// and the same document as JSON.
func TestServesTheDocument(t *testing.T) {
	s, _ := newTestServer(t)
	y := call(s, http.MethodGet, "/v1/openapi.yaml", "", "")
	if y.Code != http.StatusOK || y.Body.String() != string(olivares.OpenAPIYAML) || y.Header().Get("Content-Type") != "application/yaml" {
		t.Fatalf("openapi.yaml: %d %s, %d bytes", y.Code, y.Header().Get("Content-Type"), y.Body.Len())
	}
	j := call(s, http.MethodGet, "/v1/openapi.json", "", "")
	if j.Code != http.StatusOK || !strings.HasPrefix(j.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("openapi.json: %d %s", j.Code, j.Header().Get("Content-Type"))
	}
	var fromJSON, fromYAML any
	if err := json.Unmarshal(j.Body.Bytes(), &fromJSON); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if err := yaml.Unmarshal(olivares.OpenAPIYAML, &fromYAML); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(fromJSON)
	b, _ := json.Marshal(fromYAML)
	if string(a) != string(b) {
		t.Fatal("openapi.json is not the YAML document")
	}
	if _, err := contract.New(j.Body.Bytes()); err != nil {
		t.Fatalf("openapi.json does not load: %v", err)
	}
}
