// Package accesslog is the outermost layer of the coordinator's HTTP
// listener: it gives every request an id (the X-Request-Id header, R-OBS-4),
// writes one access line when the request ends (R-OBS-3), and observes it in
// the request metrics, streams (SSE) apart from the latency histogram
// (R-OBS-7).
//
// accesslog never logs a header value, a query string or a body: only the
// method, the route template, the path, the status, the duration, the bytes
// written and the caller's ids (R-OBS-3).
package accesslog

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olivares-dev/olivares/shared/logging"
)

// Header is the request id's header, on the request (a proxy's id, kept
// when well formed) and on every response.
const Header = "X-Request-Id"

// Unmatched is the route of a request no route answered.
const Unmatched = "unmatched"

// Options configure the layer.
type Options struct {
	// Log gets the access lines. When nil, none are written.
	Log *slog.Logger
	// Metrics registers the request metrics. When nil, they are kept but
	// not exported.
	Metrics prometheus.Registerer
}

// New wraps next.
func New(next http.Handler, o Options) http.Handler {
	reg := o.Metrics
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	h := &handler{next: next, log: logging.OrDiscard(o.Log), m: newMetrics(reg)}
	return h
}

type handler struct {
	next http.Handler
	log  *slog.Logger
	m    *metrics
}

// Info is what the handlers of a request tell its access line.
type info struct {
	mu        sync.Mutex
	route     string
	principal string
	tenant    string
	runRef    string
}

type infoKey struct{}

func infoOf(ctx context.Context) *info {
	i, _ := ctx.Value(infoKey{}).(*info)
	return i
}

// SetRoute names the route template that answers the request ("GET
// /v1/m/sessions/runs/:ref" is route "/v1/m/sessions/runs/:ref"), and the
// run it is about ("" when none). Outside this layer it does nothing.
func SetRoute(ctx context.Context, route, runRef string) {
	if i := infoOf(ctx); i != nil {
		i.mu.Lock()
		i.route, i.runRef = route, runRef
		i.mu.Unlock()
	}
}

// SetCaller names the authenticated principal (its id, never a token) and
// the tenant of the request.
func SetCaller(ctx context.Context, principal, tenant string) {
	if i := infoOf(ctx); i != nil {
		i.mu.Lock()
		i.principal, i.tenant = principal, tenant
		i.mu.Unlock()
	}
}

// NewID makes a request id: "req_" and 26 random base32 characters.
func NewID() string {
	var b [16]byte
	rand.Read(b[:])
	return "req_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// ValidID reports whether a request id from a client or proxy is kept: 1
// to 128 letters, digits, '-', '_', '.' or ':' (R-OBS-4). Anything else is
// replaced, so no id can carry a line break or markup into a log.
func ValidID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := r.Header.Get(Header)
	if !ValidID(id) {
		id = NewID()
	}
	// The handlers behind (echo's RequestID middleware) read the id from
	// the request, and every error body carries it (R-OBS-4).
	r.Header.Set(Header, id)
	w.Header().Set(Header, id)
	in := &info{}
	ctx := context.WithValue(logging.WithRequestID(r.Context(), id), infoKey{}, in)
	rw := &recorder{ResponseWriter: w, h: h, in: in}
	defer func() {
		// A panic that escaped the handlers still gets its access line;
		// net/http then logs it and closes the connection.
		h.done(ctx, r, rw, in, start)
	}()
	h.next.ServeHTTP(rw, r.WithContext(ctx))
}

func (h *handler) done(ctx context.Context, r *http.Request, rw *recorder, in *info, start time.Time) {
	d := time.Since(start)
	status := rw.status
	if status == 0 {
		// Nothing written: net/http answers 200 with an empty body.
		status = http.StatusOK
	}
	in.mu.Lock()
	route, principal, tenant, runRef := in.route, in.principal, in.tenant, in.runRef
	in.mu.Unlock()
	if route == "" {
		route = Unmatched
	}
	method := methodLabel(r.Method)
	code := statusLabel(status)
	if rw.stream {
		h.m.streamsOpen.WithLabelValues(rw.route).Dec()
		h.m.streams.WithLabelValues(route, code).Inc()
	} else {
		h.m.duration.WithLabelValues(method, route, code).Observe(d.Seconds())
	}
	lvl := slog.LevelInfo
	switch {
	case status >= 500:
		lvl = slog.LevelError
	case status < 300 && (route == "/healthz" || route == "/readyz"):
		// Probes every few seconds would drown the log.
		lvl = slog.LevelDebug
	}
	if !h.log.Enabled(ctx, lvl) {
		return
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("method", r.Method), slog.String("route", route), slog.String("path", Redact(r.URL.Path)),
		slog.Int("status", status), logging.Duration(d), slog.Int64("bytes", rw.bytes),
		slog.String("remote", remoteHost(r.RemoteAddr)))
	if rw.stream {
		attrs = append(attrs, slog.Bool("sse", true))
	}
	if principal != "" {
		attrs = append(attrs, slog.String(logging.KeyPrincipal, principal))
	}
	if tenant != "" {
		attrs = append(attrs, slog.String(logging.KeyTenant, tenant))
	}
	if runRef != "" {
		attrs = append(attrs, slog.String(logging.KeyRunRef, runRef))
	}
	h.log.LogAttrs(ctx, lvl, "http request", attrs...)
}

func remoteHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// methodLabel bounds the method label: a client may send any token.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "OTHER"
}

// statusLabel is the status as a label; net/http bounds it to 3 digits.
func statusLabel(s int) string {
	if s < 100 || s > 999 {
		return "other"
	}
	return string([]byte{byte('0' + s/100), byte('0' + s/10%10), byte('0' + s%10)})
}

// recorder notes the status and bytes of a response, and whether it is a
// stream (text/event-stream). It passes Flush and the deadlines of
// http.ResponseController through (Unwrap), so the relay's per-flush
// write deadline still applies.
type recorder struct {
	http.ResponseWriter
	h      *handler
	in     *info
	status int
	bytes  int64
	stream bool
	route  string // the stream's route, as counted open
}

func (rw *recorder) WriteHeader(code int) {
	if rw.status == 0 && code >= 200 {
		rw.status = code
		if strings.HasPrefix(rw.Header().Get("Content-Type"), "text/event-stream") {
			rw.stream = true
			rw.in.mu.Lock()
			rw.route = rw.in.route
			rw.in.mu.Unlock()
			if rw.route == "" {
				rw.route = Unmatched
			}
			rw.h.m.streamsOpen.WithLabelValues(rw.route).Inc()
		}
	}
	rw.ResponseWriter.WriteHeader(code)
}

func (rw *recorder) Write(p []byte) (int, error) {
	if rw.status == 0 {
		rw.WriteHeader(http.StatusOK)
	}
	n, err := rw.ResponseWriter.Write(p)
	rw.bytes += int64(n)
	return n, err
}

// Flush is http.Flusher's, for handlers that assert it.
func (rw *recorder) Flush() {
	if rw.status == 0 {
		rw.WriteHeader(http.StatusOK)
	}
	http.NewResponseController(rw.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (rw *recorder) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// secretPaths are the path prefixes whose rest is a credential: a
// webhook's action URL carries its signed token there (R-NOTIF-11).
var secretPaths = []string{"/v1/m/sessions/actions/"}

// Redact is the path as the log writes it: a credential in it replaced
// by "[redacted]".
func Redact(path string) string {
	for _, p := range secretPaths {
		if strings.HasPrefix(path, p) {
			return p + "[redacted]"
		}
	}
	return path
}
