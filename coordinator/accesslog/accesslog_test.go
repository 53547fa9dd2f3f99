package accesslog

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/olivares-dev/olivares/shared/logging"
)

// R-OBS-3: one line per request with its fields, never the query string
// or a header; R-OBS-7: an event stream is counted apart from the latency
// histogram.
func TestOneLinePerRequest(t *testing.T) {
	var buf bytes.Buffer
	reg := prometheus.NewRegistry()
	h := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SetRoute(r.Context(), "/v1/things/:id", "")
		SetCaller(r.Context(), "prn_1", "default")
		if r.URL.Path == "/v1/things/stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			w.Write([]byte("data: x\n\n"))
			return
		}
		w.WriteHeader(http.StatusTeapot)
		w.Write([]byte("hello"))
	}), Options{Log: logging.New(&buf, logging.Config{Level: "debug", Format: logging.FormatJSON}), Metrics: reg})

	req := httptest.NewRequest(http.MethodGet, "/v1/things/7?token=s3cret", nil)
	req.Header.Set("Authorization", "Bearer tok-s3cret")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	id := rec.Header().Get(Header)
	if !strings.HasPrefix(id, "req_") {
		t.Fatalf("X-Request-Id: got %q, want a req_ id", id)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want 1: %q", len(lines), lines)
	}
	if strings.Contains(lines[0], "s3cret") {
		t.Fatalf("the line holds the query or a header: %s", lines[0])
	}
	var l map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &l); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"msg": "http request", "method": "GET", "route": "/v1/things/:id", "path": "/v1/things/7",
		"status": float64(418), "bytes": float64(5), "request_id": id, "principal": "prn_1", "tenant": "default"} {
		if l[k] != want {
			t.Errorf("%s: got %v, want %v", k, l[k], want)
		}
	}

	buf.Reset()
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/things/stream", nil))
	if !strings.Contains(buf.String(), `"sse":true`) {
		t.Fatalf("the stream's line lacks sse: %s", buf.String())
	}
	if got := testutil.CollectAndCount(reg, "olivares_api_request_duration_seconds"); got != 1 {
		t.Errorf("latency series: got %d, want 1 (the stream left out)", got)
	}
	if got := testutil.ToFloat64(h.(*handler).m.streams.WithLabelValues("/v1/things/:id", "200")); got != 1 {
		t.Errorf("streams counted: got %v, want 1", got)
	}
	if got := testutil.ToFloat64(h.(*handler).m.streamsOpen.WithLabelValues("/v1/things/:id")); got != 0 {
		t.Errorf("streams open after the end: got %v, want 0", got)
	}
}

// R-OBS-4: which incoming ids are kept.
func TestValidID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"req_abc", true}, {"proxy-42.a_b:c", true}, {strings.Repeat("a", 128), true},
		{"", false}, {strings.Repeat("a", 129), false}, {"a b", false}, {"a\nb", false}, {`a"b`, false}, {"é", false},
	} {
		if got := ValidID(tc.id); got != tc.want {
			t.Errorf("ValidID(%q): got %v, want %v", tc.id, got, tc.want)
		}
	}
}

// R-NOTIF-11: a webhook's action URL is a credential; its line says the
// route and a redacted path, never the token.
func TestActionURLNeverLogged(t *testing.T) {
	var buf bytes.Buffer
	h := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SetRoute(r.Context(), "/v1/m/sessions/actions/:token", "")
		w.WriteHeader(http.StatusConflict)
	}), Options{Log: logging.New(&buf, logging.Config{Level: "debug", Format: logging.FormatJSON}), Metrics: prometheus.NewRegistry()})
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(m, "/v1/m/sessions/actions/eyJoIjoid2hfMSJ9.s3cretMAC", nil))
	}
	if strings.Contains(buf.String(), "s3cret") || strings.Contains(buf.String(), "eyJoIjoid2hfMSJ9") ||
		strings.Count(buf.String(), `"path":"/v1/m/sessions/actions/[redacted]"`) != 2 {
		t.Fatalf("log:\n%s", buf.String())
	}
}
