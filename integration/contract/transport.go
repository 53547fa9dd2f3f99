package contract

import (
	"bytes"
	"io"
	"net/http"
)

// Transport wraps next (http.DefaultTransport when nil) so that every
// request it sends and every response it receives is checked against the
// document; each mismatch is reported to t. An SSE response's status and
// headers are checked here, its events by EventCheck as the client reads
// them.
func Transport(t T, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	c, err := Load()
	if err != nil {
		t.Errorf("contract: openapi.yaml: %v", err)
		return next
	}
	return &transport{t: t, c: c, next: next}
}

type transport struct {
	t    T
	c    *Checker
	next http.RoundTripper
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	ex := tr.c.begin(req, body)
	out := req.Clone(req.Context())
	if body != nil {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		out.ContentLength = int64(len(body))
	}
	resp, err := tr.next.RoundTrip(out)
	if err != nil {
		return resp, err
	}
	for _, msg := range ex.checkHead(resp.StatusCode, resp.Header) {
		tr.t.Errorf("%s", msg)
	}
	status := resp.StatusCode
	if stream(resp.Header) {
		return resp, nil // the events: EventCheck
	}
	b, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errReader{rerr}))
	if rerr == nil {
		for _, msg := range ex.checkBody(status, resp.Header, b) {
			tr.t.Errorf("%s", msg)
		}
	}
	return resp, nil
}

// errReader ends a replayed body with the error its first read met.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}

// CloseIdleConnections closes the idle connections of the transport
// underneath, so that http.Client.CloseIdleConnections still works.
func (tr *transport) CloseIdleConnections() {
	if c, ok := tr.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
