package contract

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"sync"
)

// WriteRaw writes req on conn, a bare connection a test drives by hand (a
// viewer that stops reading, say), and returns conn wrapped so that the
// response the test reads from it is checked as it goes: the status and
// headers, then the body, or each SSE event. The request is checked too.
func WriteRaw(t T, conn net.Conn, req *http.Request) (net.Conn, error) {
	c, err := Load()
	if err != nil {
		t.Errorf("contract: openapi.yaml: %v", err)
		return conn, req.Write(conn)
	}
	var body []byte
	if req.Body != nil {
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
	}
	ex := c.begin(req, body)
	out := req.Clone(req.Context())
	if body != nil {
		out.Body = io.NopCloser(bytes.NewReader(body))
	}
	if err := out.Write(conn); err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	rc := &rawConn{Conn: conn, pw: pw}
	rc.wg.Add(1)
	go func() {
		defer rc.wg.Done()
		defer io.Copy(io.Discard, pr) // never leave the test's reads blocked
		report := func(m string) { t.Errorf("%s", m) }
		resp, err := http.ReadResponse(bufio.NewReader(pr), req)
		if err != nil {
			return
		}
		for _, msg := range ex.checkHead(resp.StatusCode, resp.Header) {
			report(msg)
		}
		if stream(resp.Header) {
			status := resp.StatusCode
			b := &sseBody{rc: resp.Body, report: report, check: func(ev Event) []string { return ex.checkEvent(status, ev) }}
			io.Copy(io.Discard, b)
			return
		}
		if b, err := io.ReadAll(resp.Body); err == nil {
			for _, msg := range ex.checkBody(resp.StatusCode, resp.Header, b) {
				report(msg)
			}
		}
	}()
	return rc, nil
}

// rawConn hands what the test reads to the checker as well.
type rawConn struct {
	net.Conn
	pw *io.PipeWriter
	wg sync.WaitGroup
}

func (c *rawConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.pw.Write(p[:n])
	}
	if err != nil {
		c.pw.CloseWithError(err)
	}
	return n, err
}

// Close closes the connection and returns once the checker has checked
// what the test read: nothing is reported after it.
func (c *rawConn) Close() error {
	err := c.Conn.Close()
	c.pw.Close()
	c.wg.Wait()
	return err
}
