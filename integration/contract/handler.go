package contract

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"

	"github.com/olivares-dev/olivares/shared/sse"
)

// Handler wraps h, a server under test (the coordinator's handler, or a
// test's fake of it), so that every request it serves and every response
// it writes is checked against the document; each mismatch is reported to
// t. An SSE response's events are checked as they are written.
func Handler(t T, h http.Handler) http.Handler {
	c, err := Load()
	if err != nil {
		t.Errorf("contract: openapi.yaml: %v", err)
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ex := c.begin(r, body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		ctx := r.Context()
		rec := &recorder{w: w, ex: ex, report: func(m string) {
			// A client that went away reads nothing: what the server
			// answers it (a cancelled stream, a proxy's 502) is no one's.
			if ctx.Err() == nil {
				t.Errorf("%s", m)
			}
		}}
		h.ServeHTTP(rec, r)
		rec.finish()
	})
}

// recorder keeps what the check needs. A stream (SSE) goes through as it
// is written, each event read by shared/sse and checked; any other
// response is held until
// the handler returns and checked before the client gets a byte of it, so
// that a report always comes before the test can go on (or end).
type recorder struct {
	w      http.ResponseWriter
	ex     *exchange
	report func(string)

	mu     sync.Mutex
	status int
	header http.Header
	body   bytes.Buffer
	sse    *eventTap
	wrote  bool
}

func (r *recorder) Header() http.Header { return r.w.Header() }

func (r *recorder) WriteHeader(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.wrote {
		r.head(status)
	}
}

// head records the status and checks the head; a stream's goes out at
// once. The caller holds mu.
func (r *recorder) head(status int) {
	r.wrote, r.status, r.header = true, status, r.w.Header().Clone()
	for _, msg := range r.ex.checkHead(status, r.header) {
		r.report(msg)
	}
	if stream(r.header) {
		r.sse = newEventTap(func(ev sse.Event) []string { return r.ex.checkEvent(status, ev) }, r.report)
		r.w.WriteHeader(status)
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.wrote {
		r.head(http.StatusOK)
	}
	if r.sse == nil {
		return r.body.Write(p)
	}
	r.sse.write(p) // checked as shared/sse reads it; finish waits for the last
	return r.w.Write(p)
}

func (r *recorder) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sse == nil {
		return // held until the handler returns
	}
	if f, ok := r.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

// finish checks a held response once the handler returned, then sends it.
func (r *recorder) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.wrote {
		r.head(http.StatusOK)
	}
	if r.sse != nil {
		r.sse.close()
		return
	}
	for _, msg := range r.ex.checkBody(r.status, r.header, r.body.Bytes()) {
		r.report(msg)
	}
	r.w.WriteHeader(r.status)
	r.w.Write(r.body.Bytes())
}

// Proxy serves a reverse proxy to target (a base URL) on a loopback port,
// checking every exchange through it like Handler does, and returns its
// base URL; it stops when cleanup runs. It is for clients a test cannot
// hand a transport, such as the olivares binary run as a subprocess.
func Proxy(t interface {
	T
	Cleanup(func())
}, target string) string {
	u, err := url.Parse(target)
	if err != nil {
		t.Errorf("contract: proxy target %q: %v", target, err)
		return target
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host },
		FlushInterval: -1, // SSE events go through as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// The proxy's own 502 (the server went away under a request)
			// is not the API's answer.
			if rec, ok := w.(*recorder); ok {
				rec.mu.Lock()
				rec.ex.outside = true
				rec.mu.Unlock()
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	srv := httptest.NewServer(Handler(t, rp))
	t.Cleanup(func() {
		// A stream a client left open (a browser's attach) would hold
		// Close forever: cut every connection first.
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL
}
