package contract

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/olivares-dev/olivares/shared/sse"
)

// reports is a T that keeps what it is told.
type reports struct {
	mu   sync.Mutex
	errs []string
}

func (r *reports) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *reports) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

const (
	runPath  = "/v1/m/sessions/runs/run_1"
	pinPath  = "/v1/m/sessions/runs/run_1/pin"
	okPin    = `{"run_ref":"run_1","pinned":true,"pinned_at":"2026-01-02T03:04:05Z"}`
	errBody  = `{"error":{"code":"%s","message":"a sentence"}}`
	sseStart = "id: 1\nevent: output\ndata: {\"seq\":1,\"generation\":1,\"stream\":\"stdout\",\"at\":\"2026-01-02T03:04:05Z\",\"data\":\"hi\",\"encoding\":\"utf8\"}\n\n"
)

// fake answers each request with the canned response of its test.
type fake struct {
	status int
	ctype  string
	body   string
}

func (f fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.ctype != "" {
		w.Header().Set("Content-Type", f.ctype)
	}
	if r.Method == http.MethodOptions {
		w.Header().Set("Allow", "OPTIONS, POST")
	}
	if strings.HasPrefix(f.ctype, "text/event-stream") {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Accel-Buffering", "no")
	}
	w.WriteHeader(f.status)
	io.WriteString(w, f.body)
}

type exchangeCase struct {
	name   string
	method string
	path   string
	hdr    map[string]string
	body   string
	resp   fake
	// want holds a piece of each report expected, in order; none means
	// the exchange must pass.
	want []string
}

func authed(extra ...string) map[string]string {
	h := map[string]string{"Authorization": "Bearer olv_x", "X-Olivares-Tenant": "acme"}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return h
}

var exchangeCases = []exchangeCase{
	{name: "documented answer", method: "POST", path: pinPath, hdr: authed(),
		resp: fake{200, "application/json", okPin}},
	{name: "unauthenticated route", method: "GET", path: "/healthz",
		resp: fake{200, "application/json", `{"status":"ok"}`}},
	{name: "undocumented field", method: "POST", path: pinPath, hdr: authed(),
		resp: fake{200, "application/json", `{"run_ref":"run_1","pinned":true,"pinned_at":null,"colour":"red"}`},
		want: []string{`POST /v1/m/sessions/runs/run_1/pin: status 200: response body doesn't match schema #/components/schemas/PinState: at /: property "colour" is unsupported`}},
	{name: "missing required field", method: "POST", path: pinPath, hdr: authed(),
		resp: fake{200, "application/json", `{"run_ref":"run_1","pinned":true}`},
		want: []string{`pinned_at`}},
	{name: "wrong type", method: "POST", path: pinPath, hdr: authed(),
		resp: fake{200, "application/json", `{"run_ref":"run_1","pinned":"yes","pinned_at":null}`},
		want: []string{`pinned`}},
	{name: "undocumented status", method: "POST", path: pinPath, hdr: authed(),
		resp: fake{418, "application/json", fmt.Sprintf(errBody, "teapot")},
		want: []string{`status 418`}},
	{name: "documented error code", method: "POST", path: pinPath, hdr: authed(),
		resp: fake{409, "application/json", fmt.Sprintf(errBody, "run_released")}},
	{name: "undocumented error code", method: "POST", path: pinPath, hdr: authed(),
		resp: fake{409, "application/json", fmt.Sprintf(errBody, "run_gone")},
		want: []string{`status 409: error code "run_gone" is not one the document lists for this status (run_released)`}},
	{name: "error message quoting a rule ID", method: "POST", path: pinPath, hdr: authed(),
		resp: fake{409, "application/json", `{"error":{"code":"run_released","message":"released (R-PIN-7)"}}`},
		want: []string{`at /error/message`}},
	{name: "error body that is not the envelope", method: "GET", path: runPath, hdr: authed(),
		resp: fake{404, "application/json", `{"message":"no"}`},
		want: []string{`status 404`}},
	{name: "wrong content type", method: "POST", path: pinPath, hdr: authed(),
		resp: fake{200, "text/plain", okPin},
		want: []string{`text/plain`}},
	{name: "invalid request refused", method: "POST", path: pinPath, hdr: authed("X-Olivares-Tenant", ""),
		resp: fake{400, "application/json", fmt.Sprintf(errBody, "tenant_required")}},
	{name: "invalid request accepted", method: "POST", path: pinPath, hdr: authed("X-Olivares-Tenant", "Not A Tenant"),
		resp: fake{200, "application/json", okPin},
		want: []string{`accepted a request the document calls invalid`}},
	{name: "no token accepted", method: "POST", path: pinPath, hdr: map[string]string{"X-Olivares-Tenant": "acme"},
		resp: fake{200, "application/json", okPin},
		want: []string{`accepted a request the document calls invalid`}},
	{name: "undocumented query parameter accepted", method: "GET", path: "/v1/m/sessions/runs?colour=red", hdr: authed(),
		resp: fake{200, "application/json", `{"items":[]}`},
		want: []string{`"colour" is not in the document`}},
	{name: "parameter out of bounds accepted", method: "GET", path: "/v1/m/sessions/runs?limit=201", hdr: authed(),
		resp: fake{200, "application/json", `{"items":[]}`},
		want: []string{`accepted a request the document calls invalid`}},
	{name: "parameter out of bounds refused", method: "GET", path: "/v1/m/sessions/runs?limit=201", hdr: authed(),
		resp: fake{400, "application/json", fmt.Sprintf(errBody, "bad_query")}},
	{name: "unknown body field accepted", method: "PUT", path: runPath + "/name", hdr: authed("Content-Type", "application/json"),
		body: `{"name":"x","colour":"red"}`, resp: fake{400, "application/json", fmt.Sprintf(errBody, "bad_body")}},
	{name: "body on a bodyless operation accepted", method: "POST", path: runPath + "/stop", hdr: authed("Content-Type", "application/json"),
		body: `{"now":true}`, resp: fake{400, "application/json", fmt.Sprintf(errBody, "tenant_required")}},
	{name: "{} on a bodyless operation, without Content-Type", method: "POST", path: pinPath, hdr: authed(),
		body: `{}`, resp: fake{200, "application/json", okPin}},
	{name: "a field on a bodyless operation accepted, without Content-Type", method: "POST", path: pinPath, hdr: authed(),
		body: `{"now":true}`, resp: fake{200, "application/json", okPin},
		want: []string{`accepted a request the document calls invalid`}},
	{name: "a console page is outside the document", method: "GET", path: "/runs/run_1",
		resp: fake{200, "text/html; charset=utf-8", "<!doctype html>"}},
	{name: "the session cookie instead of a token", method: "POST", path: pinPath,
		hdr:  map[string]string{"Cookie": "olivares_session=olv_x", "X-Olivares-Tenant": "acme"},
		resp: fake{200, "application/json", okPin}},
	{name: "a cross-site refusal of a write", method: "POST", path: pinPath, hdr: authed(),
		resp: fake{403, "application/json", fmt.Sprintf(errBody, "cross_site_refused")}},
	{name: "a cross-site refusal of a read", method: "GET", path: runPath, hdr: authed(),
		resp: fake{403, "application/json", fmt.Sprintf(errBody, "cross_site_refused")},
		want: []string{`error code "cross_site_refused" is not one the document lists for this status`}},
	{name: "path off the document, router's 404", method: "GET", path: "/v1/m/session-cockpit/x",
		resp: fake{404, "application/json", fmt.Sprintf(errBody, "not_found")}},
	{name: "path off the document answered", method: "GET", path: "/v1/m/session-cockpit/x",
		resp: fake{200, "application/json", `{}`},
		want: []string{`no such operation`}},
	{name: "the router's OPTIONS answer", method: "OPTIONS", path: runPath + "/stop",
		resp: fake{204, "", ""}},
	{name: "method off the document, router's 405", method: "PATCH", path: "/v1/nodes",
		resp: fake{405, "application/json", fmt.Sprintf(errBody, "method_not_allowed")}},
	{name: "documented SSE", method: "GET", path: runPath + "/attach", hdr: authed(),
		resp: fake{200, "text/event-stream", sseStart + ": a comment\n\nevent: end\ndata: {\"generation\":1,\"exit_code\":0}\n\n"}},
	{name: "SSE with a charset", method: "GET", path: runPath + "/attach", hdr: authed(),
		resp: fake{200, "text/event-stream; charset=utf-8", ""}},
	{name: "undocumented SSE event", method: "GET", path: runPath + "/attach", hdr: authed(),
		resp: fake{200, "text/event-stream", sseStart + "event: progress\ndata: {}\n\n"},
		want: []string{`SSE event "progress" is not in the document`}},
	{name: "SSE data off its schema", method: "GET", path: runPath + "/attach", hdr: authed(),
		resp: fake{200, "text/event-stream", "event: end\ndata: {\"generation\":1,\"reason\":\"tired\"}\n\n"},
		want: []string{`SSE event "end"`}},
	{name: "SSE data split over lines and CRLF", method: "GET", path: runPath + "/attach", hdr: authed(),
		resp: fake{200, "text/event-stream", "event: lag\r\ndata: {\"requested_from\":1,\r\ndata:\"resumed_from\":5}\r\n\r\n"}},
	{name: "SSE data that is not JSON", method: "GET", path: runPath + "/attach", hdr: authed(),
		resp: fake{200, "text/event-stream", "event: lag\ndata: lag\n\n"},
		want: []string{`not JSON`}},
	// Each event is checked as its member of the stream's union, its SSE
	// fields included (R-API-14): an output carries its seq as its id.
	{name: "SSE output without an id", method: "GET", path: runPath + "/attach", hdr: authed(),
		resp: fake{200, "text/event-stream", strings.TrimPrefix(sseStart, "id: 1\n")},
		want: []string{`SSE event "output" does not match its member of the stream's union: at /id: property "id" is missing`}},
}

// check runs the report expectations of one case.
func (tt exchangeCase) check(t *testing.T, got []string) {
	t.Helper()
	if len(got) != len(tt.want) {
		t.Fatalf("got %d reports %q, want %d matching %q", len(got), got, len(tt.want), tt.want)
	}
	for i, w := range tt.want {
		if !strings.Contains(got[i], w) {
			t.Errorf("report %d: got %q, want it to contain %q", i, got[i], w)
		}
	}
}

func (tt exchangeCase) request(t *testing.T, base string) *http.Request {
	t.Helper()
	var body io.Reader
	if tt.body != "" {
		body = strings.NewReader(tt.body)
	}
	req, err := http.NewRequest(tt.method, base+tt.path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range tt.hdr {
		if v == "" {
			continue
		}
		req.Header.Set(k, v)
	}
	return req
}

// The transport reports every mismatch of the document and a server, and
// nothing for a documented exchange.
func TestTransport(t *testing.T) {
	for _, tt := range exchangeCases {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.resp)
			defer srv.Close()
			rec := &reports{}
			req := tt.request(t, srv.URL)
			resp, err := (&http.Client{Transport: Transport(rec, nil)}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if stream(resp.Header) {
				// The events, as shared/apiclient reads them and hands each
				// to EventCheck.
				check := EventCheck(rec)
				rd := sse.NewReader(bytes.NewReader(b))
				for {
					ev, err := rd.Next()
					if err != nil {
						break
					}
					check(req, ev)
				}
			}
			if string(b) != tt.resp.body {
				t.Errorf("the caller read %q, want the server's %q", b, tt.resp.body)
			}
			tt.check(t, rec.all())
		})
	}
}

// The server-side wrapper reports the same mismatches.
func TestHandler(t *testing.T) {
	for _, tt := range exchangeCases {
		t.Run(tt.name, func(t *testing.T) {
			rec := &reports{}
			srv := httptest.NewServer(Handler(rec, tt.resp))
			defer srv.Close()
			resp, err := http.DefaultClient.Do(tt.request(t, srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != tt.resp.body {
				t.Errorf("the client read %q, want %q", b, tt.resp.body)
			}
			tt.check(t, rec.all())
		})
	}
}

// A proxy reports the same mismatches, and passes the answer through.
func TestProxy(t *testing.T) {
	for _, tt := range exchangeCases {
		t.Run(tt.name, func(t *testing.T) {
			upstream := httptest.NewServer(tt.resp)
			defer upstream.Close()
			rec := &reports{}
			base := Proxy(reportsWithCleanup{rec, t}, upstream.URL)
			resp, err := http.DefaultClient.Do(tt.request(t, base))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != tt.resp.body || resp.StatusCode != tt.resp.status {
				t.Errorf("the client read %d %q, want %d %q", resp.StatusCode, b, tt.resp.status, tt.resp.body)
			}
			tt.check(t, rec.all())
		})
	}
}

// reportsWithCleanup keeps the reports and runs cleanups on the test.
type reportsWithCleanup struct {
	*reports
	t *testing.T
}

func (r reportsWithCleanup) Cleanup(f func()) { r.t.Cleanup(f) }
