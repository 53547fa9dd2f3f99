// Package contract checks HTTP traffic against the API document,
// openapi.yaml at the repository root, in tests: every request a test sends
// and every response it gets (status, headers, body, and each SSE event as
// it is read, with shared/sse) is validated with kin-openapi's
// openapi3filter, and a mismatch fails the test that produced it with the
// method, the path, the status and the validator's words.
//
// Three ways in: Transport for a test's client (with EventCheck for the
// events shared/apiclient reads), Handler around a server under test or a
// test's fake of it, and Proxy in front of a server for clients that run
// as processes of their own (the olivares binary, a browser).
//
// Only tests import contract. Validation never runs on the production
// request path: the coordinator serves the document and nothing else of it.
//
// A request the document calls invalid is not itself a failure: tests probe
// refusals (a missing tenant header, limit=201, an unknown field). It is a
// failure when the server accepts it (answers below 400), because then the
// document and the server disagree about what is valid.
package contract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	olivares "github.com/olivares-dev/olivares"
	"github.com/olivares-dev/olivares/shared/sse"
)

// T is where a mismatch is reported: a *testing.T, or anything with its
// Errorf.
type T interface {
	Errorf(format string, args ...any)
}

// Checker validates exchanges against one document.
type Checker struct {
	doc    *openapi3.T
	router routers.Router
	// events holds each operation's SSE events: event name → the member
	// of its stream's union (sseEvents).
	events map[*openapi3.Operation]map[string]*openapi3.Schema
}

// Operation extensions the checker reads.
const (
	// ExtAnyBody marks an operation that accepts any request body, JSON or
	// not (POST /runs/{ref}/cleanup, R-CLN-2): OpenAPI cannot say so.
	ExtAnyBody = "x-olivares-any-body"
	// ExtPermission names the permission an operation needs.
	ExtPermission = "x-olivares-permission"
	// ExtErrorCodes lists the codes an error response can carry. The
	// body's schema is the plain Error envelope, so that generated clients
	// keep its code, message and request_id; the codes sit beside it.
	ExtErrorCodes = "x-olivares-error-codes"
)

var (
	loadOnce sync.Once
	loaded   *Checker
	loadErr  error
)

// Load returns the checker of the embedded openapi.yaml, loaded and
// validated once per test binary.
func Load() (*Checker, error) {
	loadOnce.Do(func() {
		// The HTML a redirect carries (single sign-on) is text, like
		// text/plain; the validator knows no decoder for it by itself.
		openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
		loaded, loadErr = New(olivares.OpenAPIYAML)
	})
	return loaded, loadErr
}

// Must is Load for tests: a document that does not load fails the test.
func Must(t interface {
	Helper()
	Fatalf(string, ...any)
}) *Checker {
	t.Helper()
	c, err := Load()
	if err != nil {
		t.Fatalf("contract: openapi.yaml: %v", err)
	}
	return c
}

// New loads and validates a document and builds its router.
func New(yamlDoc []byte) (*Checker, error) {
	l := openapi3.NewLoader()
	doc, err := l.LoadFromData(yamlDoc)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(l.Context); err != nil {
		return nil, err
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	c := &Checker{doc: doc, router: router, events: map[*openapi3.Operation]map[string]*openapi3.Schema{}}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			mt := op.Responses.Value("200")
			if mt == nil || mt.Value.Content.Get("text/event-stream") == nil {
				continue
			}
			evs, err := sseEvents(mt.Value.Content.Get("text/event-stream").Schema)
			if err != nil {
				return nil, fmt.Errorf("%s %s: text/event-stream: %w", method, path, err)
			}
			c.events[op] = evs
		}
	}
	return c, nil
}

// Doc is the loaded document.
func (c *Checker) Doc() *openapi3.T { return c.doc }

// sseEvents reads a stream's union: a oneOf whose members are each one
// event as {event, id, data}, event an enum of its one name.
func sseEvents(union *openapi3.SchemaRef) (map[string]*openapi3.Schema, error) {
	if union == nil || union.Value == nil || len(union.Value.OneOf) == 0 {
		return nil, errors.New("want a schema that is a oneOf of the stream's events")
	}
	out := map[string]*openapi3.Schema{}
	for _, m := range union.Value.OneOf {
		ev := m.Value.Properties["event"]
		if ev == nil || ev.Value == nil || len(ev.Value.Enum) != 1 || m.Value.Properties["data"] == nil {
			return nil, fmt.Errorf("member %s: want {event: {enum: [<its name>]}, data: ...}", m.Ref)
		}
		name, _ := ev.Value.Enum[0].(string)
		if out[name] != nil {
			return nil, fmt.Errorf("event %q: two members", name)
		}
		out[name] = m.Value
	}
	return out, nil
}

// options are the validator's options: every status must be documented,
// a body on an operation without one is refused, and a bearer token must
// be present where the operation needs one.
func options() *openapi3filter.Options {
	o := &openapi3filter.Options{
		IncludeResponseStatus:             true,
		RejectWhenRequestBodyNotSpecified: true,
		MultiError:                        true,
		AuthenticationFunc:                authenticate,
	}
	o.WithCustomSchemaErrorFunc(schemaError)
	return o
}

// schemaError words a schema mismatch: where and why, and for a
// combinator (allOf, oneOf) the mismatch inside it, which the validator's
// own words leave out.
func schemaError(e *openapi3.SchemaError) string {
	reason := e.Reason
	if reason == "" && e.SchemaField == "not" && e.Schema != nil && e.Schema.Not != nil && e.Schema.Not.Value != nil {
		b, _ := json.Marshal(e.Schema.Not.Value)
		reason = "matches " + string(b) + ", which it must not"
	}
	msg := "at /" + strings.Join(e.JSONPointer(), "/") + ": " + reason
	var inner *openapi3.SchemaError
	if e.Origin != nil && errors.As(e.Origin, &inner) {
		msg += " (" + schemaError(inner) + ")"
	}
	return msg
}

// authenticate checks that the request carries the credential of one of
// the document's security schemes: Authorization: Bearer <token>, or the
// console's session cookie when no Authorization header is sent. Whether
// the credential is known is the server's business (401).
func authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	r := in.RequestValidationInput.Request
	h := r.Header.Get("Authorization")
	switch s := in.SecurityScheme; {
	case s.Type == "http" && s.Scheme == "bearer":
		if tok, ok := strings.CutPrefix(h, "Bearer "); !ok || tok == "" {
			return in.NewError(errors.New("no Authorization: Bearer <token> header"))
		}
	case s.Type == "apiKey" && s.In == "cookie":
		if ck, err := r.Cookie(s.Name); err != nil || ck.Value == "" || h != "" {
			return in.NewError(fmt.Errorf("no %s cookie (without an Authorization header)", s.Name))
		}
	default:
		return in.NewError(fmt.Errorf("security scheme %q is not one the checker knows", in.SecuritySchemeName))
	}
	return nil
}

// exchange is one request on its way: what the document says about it.
type exchange struct {
	c      *Checker
	method string
	path   string
	// route is nil for a path or method the document does not have.
	route   *routers.Route
	routeEr error
	in      *openapi3filter.RequestValidationInput
	// reqErr says why the document calls the request invalid.
	reqErr error
	// outside: the path is not the API's (the console's pages); nothing
	// of the exchange is checked.
	outside bool
}

// begin finds the request's operation and validates the request. body is
// the request's body, already read.
func (c *Checker) begin(req *http.Request, body []byte) *exchange {
	ex := &exchange{c: c, method: req.Method, path: req.URL.Path}
	if !strings.HasPrefix(ex.path, "/v1/") && c.doc.Paths.Find(ex.path) == nil {
		// The console's pages and assets share the listener; they are not
		// API operations and the document does not describe them.
		ex.outside = true
		return ex
	}
	vreq := req.Clone(context.Background())
	vreq.Body = io.NopCloser(bytes.NewReader(body))
	if len(body) == 0 {
		vreq.Body = http.NoBody
	} else if vreq.Header.Get("Content-Type") == "" {
		// The API reads a body as JSON whatever its Content-Type says (the
		// document's Bodies paragraph); only the console's sign-in routes
		// insist on the header, and they answer 415 without it.
		vreq.Header.Set("Content-Type", "application/json")
	}
	route, params, err := c.router.FindRoute(vreq)
	if err != nil {
		ex.routeEr = err
		return ex
	}
	ex.route = route
	opts := options()
	if anyBody, _ := route.Operation.Extensions[ExtAnyBody].(bool); anyBody {
		// The operation takes any bytes, JSON or not: nothing to check.
		opts.ExcludeRequestBody = true
	}
	ex.in = &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: opts}
	var errs []string
	if err := openapi3filter.ValidateRequest(context.Background(), ex.in); err != nil {
		errs = append(errs, err.Error())
	}
	// A query parameter the operation does not declare is invalid too: a
	// server that accepts it has a parameter the document lacks.
	for k := range req.URL.Query() {
		if route.Operation.Parameters.GetByInAndName(openapi3.ParameterInQuery, k) == nil &&
			route.PathItem.Parameters.GetByInAndName(openapi3.ParameterInQuery, k) == nil {
			errs = append(errs, fmt.Sprintf("query parameter %q is not in the document", k))
		}
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		ex.reqErr = errors.New(strings.Join(errs, "; "))
	}
	return ex
}

// label names the exchange in a report.
func (ex *exchange) label(status int) string {
	return fmt.Sprintf("contract: %s %s: status %d", ex.method, ex.path, status)
}

// checkHead checks what is known once the response's status and headers
// are: the status is documented (or, off the document's paths, the
// router's own 404/405), the request was refused if the document calls it
// invalid, and the documented headers.
func (ex *exchange) checkHead(status int, h http.Header) []string {
	if ex.outside {
		return nil
	}
	if ex.route == nil {
		switch {
		case status == http.StatusNotFound || status == http.StatusMethodNotAllowed:
		case ex.method == http.MethodOptions && status == http.StatusNoContent && h.Get("Allow") != "":
			// The router answers OPTIONS on a known path with its methods
			// in Allow and no CORS header (so a browser's cross-origin
			// preflight fails): the document says so in its description.
		default:
			return []string{fmt.Sprintf("%s: the document has no such operation (%v), yet the server answered it", ex.label(status), ex.routeEr)}
		}
		return nil
	}
	var out []string
	if ex.reqErr != nil && status < 400 {
		out = append(out, fmt.Sprintf("%s: the server accepted a request the document calls invalid: %v", ex.label(status), ex.reqErr))
	}
	rin := ex.responseInput(status, h)
	rin.Options.ExcludeResponseBody = true
	if err := openapi3filter.ValidateResponse(context.Background(), rin); err != nil {
		out = append(out, fmt.Sprintf("%s: %v", ex.label(status), err))
	}
	return out
}

func (ex *exchange) responseInput(status int, h http.Header) *openapi3filter.ResponseValidationInput {
	return &openapi3filter.ResponseValidationInput{RequestValidationInput: ex.in, Status: status, Header: h, Options: options()}
}

// checkBody checks a whole (non-stream) response body against its
// status's documented content.
func (ex *exchange) checkBody(status int, h http.Header, body []byte) []string {
	if ex.outside {
		return nil
	}
	if ex.route == nil {
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			return nil // checkHead reported it, or it is the router's OPTIONS answer
		}
		// Off the document: the router's own answer, an R-API-4 body.
		var e struct {
			Error *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		want := map[int]string{http.StatusNotFound: "not_found", http.StatusMethodNotAllowed: "method_not_allowed"}[status]
		if ex.method == http.MethodHead {
			return nil
		}
		if json.Unmarshal(body, &e) != nil || e.Error == nil || e.Error.Code != want || e.Error.Message == "" {
			return []string{fmt.Sprintf("%s: the router's answer is not {\"error\":{\"code\":%q,...}}: %.200s", ex.label(status), want, body)}
		}
		return nil
	}
	resp := ex.route.Operation.Responses.Status(status)
	if resp == nil || resp.Value == nil {
		return nil // checkHead reported it
	}
	if len(resp.Value.Content) == 0 {
		if len(body) > 0 && ex.method != http.MethodHead {
			return []string{fmt.Sprintf("%s: the document gives this status no body, yet it has one: %.200s", ex.label(status), body)}
		}
		return nil
	}
	rin := ex.responseInput(status, h)
	rin.SetBodyBytes(body)
	var out []string
	if err := openapi3filter.ValidateResponse(context.Background(), rin); err != nil {
		out = append(out, fmt.Sprintf("%s: %v", ex.label(status), err))
	}
	if msg := codeMismatch(resp.Value, body); msg != "" {
		out = append(out, fmt.Sprintf("%s: %s", ex.label(status), msg))
	}
	return out
}

// codeMismatch names the problem when an error body's code is not among
// those the document lists for its status (ExtErrorCodes).
func codeMismatch(resp *openapi3.Response, body []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Code == "" {
		return ""
	}
	codes := ErrorCodes(resp)
	if codes == nil || slices.Contains(codes, e.Error.Code) {
		return ""
	}
	return fmt.Sprintf("error code %q is not one the document lists for this status (%s)", e.Error.Code, strings.Join(codes, ", "))
}

// ErrorCodes are the codes an error response can carry, its
// ExtErrorCodes; nil when it lists none.
func ErrorCodes(resp *openapi3.Response) []string {
	raw, _ := resp.Extensions[ExtErrorCodes].([]any)
	var out []string
	for _, v := range raw {
		if str, ok := v.(string); ok {
			out = append(out, str)
		}
	}
	return out
}

// stream reports whether the response is an SSE stream.
func stream(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

// checkEvent checks one SSE event of the exchange's stream.
func (ex *exchange) checkEvent(status int, ev sse.Event) []string {
	if ex.outside || ex.route == nil {
		return nil
	}
	evs := ex.c.events[ex.route.Operation]
	if evs == nil {
		return []string{fmt.Sprintf("%s: an SSE event %q on an operation without a text/event-stream union", ex.label(status), ev.Type)}
	}
	s, ok := evs[ev.Type]
	if !ok {
		return []string{fmt.Sprintf("%s: SSE event %q is not in the document (%s)", ex.label(status), ev.Type, strings.Join(sortedKeys(evs), ", "))}
	}
	var v any
	if err := json.Unmarshal(ev.Data, &v); err != nil {
		return []string{fmt.Sprintf("%s: SSE event %q: data is not JSON: %.200s", ex.label(status), ev.Type, ev.Data)}
	}
	// The event as the union's member reads it. ID is the stream's last
	// id, which an event without an id field of its own inherits.
	frame := map[string]any{"event": ev.Type, "data": v}
	if ev.ID != "" {
		frame["id"] = ev.ID
	}
	if err := s.VisitJSON(frame, openapi3.MultiErrors(), openapi3.VisitAsResponse(),
		openapi3.SetSchemaErrorMessageCustomizer(schemaError)); err != nil {
		return []string{fmt.Sprintf("%s: SSE event %q does not match its member of the stream's union: %v: %.300s", ex.label(status), ev.Type, err, ev.Data)}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
