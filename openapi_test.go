package olivares_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	olivares "github.com/olivares-dev/olivares"
	"github.com/olivares-dev/olivares/integration/contract"
)

// The document loads and validates with kin-openapi's own loader, as YAML
// and as the JSON the coordinator serves (issue 17).
func TestDocumentIsValid(t *testing.T) {
	l := openapi3.NewLoader()
	doc, err := l.LoadFromData(olivares.OpenAPIYAML)
	if err != nil {
		t.Fatalf("openapi.yaml does not load: %v", err)
	}
	if err := doc.Validate(l.Context); err != nil {
		t.Fatalf("openapi.yaml is not valid OpenAPI: %v", err)
	}
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi %q, want 3.0.3 (kin-openapi validates 3.0 fully)", doc.OpenAPI)
	}
	j, err := olivares.OpenAPIJSON()
	if err != nil {
		t.Fatalf("openapi.yaml does not convert to JSON: %v", err)
	}
	fromJSON, err := openapi3.NewLoader().LoadFromData(j)
	if err != nil {
		t.Fatalf("the JSON form does not load: %v", err)
	}
	a, _ := json.Marshal(doc)
	b, _ := json.Marshal(fromJSON)
	if string(a) != string(b) {
		t.Error("the JSON form is not the same document as the YAML")
	}
	if _, err := contract.New(olivares.OpenAPIYAML); err != nil {
		t.Fatalf("the checker refuses it: %v", err)
	}
}

// YAMLToJSON refuses what would make two readers see two documents, and
// keeps the document's key order.
func TestYAMLToJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"order kept", "b: 1\na: [x, 2, true, null]\n", `{"b":1,"a":["x",2,true,null]}`},
		{"quoted numbers stay strings", "'200': {d: '2'}\n", `{"200":{"d":"2"}}`},
		{"block text", "d: |\n  two\n  lines\n", `{"d":"two\nlines\n"}`},
		{"an anchor", "a: &x 1\nb: *x\n", ""},
		{"a merge key", "a: {k: 1}\nb:\n  <<: {k: 2}\n", ""},
		{"a duplicate key", "a: 1\na: 2\n", ""},
		{"a timestamp tag", "a: !!timestamp 2001-12-14\n", ""},
		{"two documents", "a: 1\n---\nb: 2\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := olivares.YAMLToJSON([]byte(tt.in))
			if tt.want == "" {
				if err == nil {
					t.Fatalf("got %s, want an error", got)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("got %s, %v, want %s", got, err, tt.want)
			}
		})
	}
}

var ruleID = regexp.MustCompile(`\bR-[A-Z]+(-[A-Z]+)*-[0-9]+`)

// Every operation is written so that a client can be built from the
// document alone: an id, a summary, a description citing the rules it
// implements (Community routes), its permission, and for every error
// status the codes it can answer with; an authenticated operation takes
// the tenant header and documents the authorizer's answers (R-API-3).
func TestEveryOperationIsDocumented(t *testing.T) {
	doc := contract.Must(t).Doc()
	ids := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			if op.OperationID == "" || op.Summary == "" || len(op.Tags) == 0 {
				t.Errorf("%s: operationId, summary and tags are required", name)
			}
			if other, ok := ids[op.OperationID]; ok {
				t.Errorf("%s: operationId %q is also %s's", name, op.OperationID, other)
			}
			ids[op.OperationID] = name
			if strings.HasPrefix(path, "/v1/m/sessions/") && !ruleID.MatchString(op.Description) {
				t.Errorf("%s: the description cites no rule (R-...)", name)
			}
			if p, _ := op.Extensions[contract.ExtPermission].(string); p == "" {
				t.Errorf("%s: no %s", name, contract.ExtPermission)
			}
			public := op.Security != nil && len(*op.Security) == 0
			for status, resp := range op.Responses.Map() {
				code, err := strconv.Atoi(status)
				if err != nil {
					t.Errorf("%s: response %q: give every status its own number", name, status)
					continue
				}
				if code < 400 {
					continue
				}
				if status == "422" && path == "/v1/m/sessions/catalog/codex/threads/{host}/{thread}/turns" {
					continue // page_too_large's own body, CodexPageTooLarge
				}
				if len(contract.ErrorCodes(resp.Value)) == 0 {
					t.Errorf("%s %s: an error response must list its codes (%s)", name, status, contract.ExtErrorCodes)
				}
				// The plain envelope, no overlay: a generator keeps code,
				// message and request_id only then (R-API-14).
				if mt := resp.Value.Content.Get("application/json"); mt == nil || mt.Schema == nil || mt.Schema.Ref != "#/components/schemas/Error" {
					t.Errorf("%s %s: an error response's schema must be $ref: '#/components/schemas/Error'", name, status)
				}
			}
			if public {
				continue
			}
			checks := map[string]string{"401": "unauthenticated"}
			// The routes a caller reaches before picking a tenant have no
			// tenant header (coordinator/api's TestDocumentedPermissions
			// holds the list to the route table's).
			if op.Parameters.GetByInAndName("header", "X-Olivares-Tenant") != nil {
				checks["400"], checks["403"] = "tenant_required", "tenant_forbidden"
			}
			for status, code := range checks {
				r := op.Responses.Value(status)
				if r == nil || !slices.Contains(contract.ErrorCodes(r.Value), code) {
					t.Errorf("%s: %s does not list %s", name, status, code)
				}
			}
			if op.Responses.Value("500") == nil {
				t.Errorf("%s: no 500", name)
			}
		}
	}
}

// A handoff answers the run object and two fields more (R-HOF-12): its
// schema repeats Run's, since additionalProperties: false cannot be
// combined with allOf. The two must not drift.
func TestHandoffResponseIsARun(t *testing.T) {
	doc := contract.Must(t).Doc()
	run := doc.Components.Schemas["Run"].Value
	ho := doc.Components.Schemas["HandoffResponse"].Value
	for name, p := range run.Properties {
		q := ho.Properties[name]
		if q == nil {
			t.Errorf("HandoffResponse lacks %s", name)
			continue
		}
		a, _ := json.Marshal(p)
		b, _ := json.Marshal(q)
		if string(a) != string(b) {
			t.Errorf("%s: HandoffResponse has %s, Run %s", name, b, a)
		}
	}
	for name := range ho.Properties {
		if run.Properties[name] == nil && name != "summary_state" && name != "first_turn" {
			t.Errorf("HandoffResponse has %s, which Run has not", name)
		}
	}
	want := append(slices.Clone(run.Required), "summary_state")
	if got := ho.Required; !reflect.DeepEqual(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("HandoffResponse requires %v, want %v", got, want)
	}
}

// Every request body and every 2xx answer has an example, its own or its
// schema's, and every example in the document matches its schema by the
// validator the contract checker uses (R-API-14); a wrong one fails here.
func TestEveryBodyHasAnExample(t *testing.T) {
	for _, p := range exampleProblems(contract.Must(t).Doc()) {
		t.Error(p)
	}
	// A wrong example is caught: a run in a state that does not exist.
	doc, err := openapi3.NewLoader().LoadFromData(olivares.OpenAPIYAML)
	if err != nil {
		t.Fatal(err)
	}
	run := doc.Components.Schemas["Run"].Value
	bad := maps.Clone(run.Example.(map[string]any))
	bad["state"] = "sleeping"
	run.Example = bad
	if got := exampleProblems(doc); len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), "schema Run") {
		t.Errorf("a Run example in state sleeping: got %q, want it reported", got)
	}
}

// exampleProblems walks doc: each operation's bodies, then each component
// schema's example.
func exampleProblems(doc *openapi3.T) []string {
	var out []string
	check := func(where string, s *openapi3.SchemaRef, v any, opt openapi3.SchemaValidationOption) {
		if err := s.Value.VisitJSON(v, openapi3.MultiErrors(), opt); err != nil {
			out = append(out, fmt.Sprintf("%s: the example does not match its schema: %v", where, err))
		}
	}
	body := func(where string, content openapi3.Content, need bool, opt openapi3.SchemaValidationOption) {
		for ct, mt := range content {
			if mt.Schema == nil {
				continue
			}
			for k, e := range mt.Examples {
				check(where+" "+ct+" "+k, mt.Schema, e.Value.Value, opt)
			}
			switch {
			case mt.Example != nil:
				check(where+" "+ct, mt.Schema, mt.Example, opt)
			case len(mt.Examples) > 0, mt.Schema.Value.Example != nil:
				// The schema's own, checked below with the components.
			case need:
				out = append(out, fmt.Sprintf("%s %s: no example (give the media type or its schema one)", where, ct))
			}
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			if op.RequestBody != nil {
				body(name+" request", op.RequestBody.Value.Content, true, openapi3.VisitAsRequest())
			}
			for status, r := range op.Responses.Map() {
				body(name+" "+status, r.Value.Content, strings.HasPrefix(status, "2"), openapi3.VisitAsResponse())
			}
		}
	}
	for name, s := range doc.Components.Schemas {
		if s.Value.Example != nil {
			check("schema "+name, s, s.Value.Example, openapi3.VisitAsResponse())
		}
	}
	slices.Sort(out)
	return out
}
