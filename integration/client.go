package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"sync"

	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Client calls the public API as one credential in one tenant.
type Client struct {
	t      testing.TB
	base   string
	Token  string
	Tenant string
}

// Client returns a client of the env's API for token in Tenant.
func (e *Env) Client(token string) *Client {
	return &Client{t: e.t, base: e.APIURL(), Token: token, Tenant: Tenant}
}

// Call sends body (JSON-encoded unless it is []byte or nil) and returns the
// answer.
func (c *Client) Call(method, path string, body any) Response {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.Tenant != "" {
		req.Header.Set("X-Olivares-Tenant", c.Tenant)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// Must calls and fails the test unless the status is want; it decodes the
// body into out when out is not nil.
func (c *Client) Must(want int, method, path string, body, out any) Response {
	c.t.Helper()
	r := c.Call(method, path, body)
	if r.Status != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, want, r.Body)
	}
	if out != nil {
		r.JSON(c.t, out)
	}
	return r
}

// Run returns GET /runs/{ref}.
func (c *Client) Run(ref string) apitypes.Run {
	c.t.Helper()
	var r apitypes.Run
	c.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs/"+ref, nil, &r)
	return r
}

// AwaitRun polls GET /runs/{ref} until cond holds.
func (c *Client) AwaitRun(ref string, d time.Duration, what string, cond func(apitypes.Run) bool) apitypes.Run {
	c.t.Helper()
	var r apitypes.Run
	Await(c.t, d, "run "+ref+" "+what, func() bool {
		r = c.Run(ref)
		return cond(r)
	})
	return r
}

// Events returns every lifecycle row of the run.
func (c *Client) Events(ref string) []apitypes.Event {
	c.t.Helper()
	var all []apitypes.Event
	after := ""
	for {
		var page apitypes.EventList
		path := "/v1/m/sessions/runs/" + ref + "/events"
		if after != "" {
			path += "?after=" + after
		}
		c.Must(http.StatusOK, http.MethodGet, path, nil, &page)
		all = append(all, page.Items...)
		if page.Next == "" {
			return all
		}
		after = page.Next
	}
}

// Kinds lists the kinds of evs.
func Kinds(evs []apitypes.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

// SSEEvent is one server-sent event.
type SSEEvent struct {
	Name string
	ID   string
	Data []byte
}

// Output decodes an output event.
func (e SSEEvent) Output(t testing.TB) apitypes.Output {
	t.Helper()
	var o apitypes.Output
	if err := json.Unmarshal(e.Data, &o); err != nil {
		t.Fatalf("output %s: %v", e.Data, err)
	}
	return o
}

// Stream is an open attach.
type Stream struct {
	t      testing.TB
	resp   *http.Response
	cancel context.CancelFunc
	events chan SSEEvent

	mu      sync.Mutex
	readErr error
}

// Attach opens GET /runs/{ref}/attach with query q (e.g. "from=5"), and
// extra request headers; it fails the test unless the status is 200.
func (c *Client) Attach(ref, q string, hdr ...string) *Stream {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	u := c.base + "/v1/m/sessions/runs/" + ref + "/attach"
	if q != "" {
		u += "?" + q
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("X-Olivares-Tenant", c.Tenant)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		c.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		c.t.Fatalf("attach %s: status %d: %s", ref, resp.StatusCode, b)
	}
	s := &Stream{t: c.t, resp: resp, cancel: cancel, events: make(chan SSEEvent, 4096)}
	go s.read()
	c.t.Cleanup(s.Close)
	return s
}

func (s *Stream) read() {
	sc := bufio.NewScanner(s.resp.Body)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	var ev SSEEvent
	var data [][]byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Name != "" || data != nil {
				ev.Data = bytes.Join(data, []byte("\n"))
				s.events <- ev
			}
			ev, data = SSEEvent{}, nil
		case strings.HasPrefix(line, "event: "):
			ev.Name = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			ev.ID = line[len("id: "):]
		case strings.HasPrefix(line, "data: "):
			data = append(data, []byte(line[len("data: "):]))
		}
	}
	s.mu.Lock()
	s.readErr = sc.Err()
	s.mu.Unlock()
	close(s.events)
}

// Err is why the stream ended: nil at a clean end of the body.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readErr
}

// Next returns the next event; ok is false once the stream has ended.
func (s *Stream) Next(d time.Duration) (SSEEvent, bool) {
	s.t.Helper()
	select {
	case ev, ok := <-s.events:
		return ev, ok
	case <-time.After(d):
		s.t.Fatalf("no SSE event within %v", d)
		return SSEEvent{}, false
	}
}

// Until reads events until one named name arrives (returned) and gives the
// output events seen before it.
func (s *Stream) Until(name string, d time.Duration) (SSEEvent, []apitypes.Output) {
	s.t.Helper()
	var outs []apitypes.Output
	deadline := time.Now().Add(d)
	for {
		ev, ok := s.Next(time.Until(deadline))
		if !ok {
			s.t.Fatalf("stream ended before a %q event (after %d outputs)", name, len(outs))
		}
		if ev.Name == name {
			return ev, outs
		}
		if ev.Name == apitypes.SSEOutput {
			outs = append(outs, ev.Output(s.t))
		}
	}
}

// UntilOutput reads until an output whose data contains sub.
func (s *Stream) UntilOutput(sub string, d time.Duration) []apitypes.Output {
	return s.UntilStream("", sub, d)
}

// UntilStream reads until an output on stream ("" any) whose data
// contains sub.
func (s *Stream) UntilStream(stream, sub string, d time.Duration) []apitypes.Output {
	s.t.Helper()
	var outs []apitypes.Output
	deadline := time.Now().Add(d)
	for {
		ev, ok := s.Next(time.Until(deadline))
		if !ok {
			s.t.Fatalf("stream ended before output %q", sub)
		}
		if ev.Name != apitypes.SSEOutput {
			s.t.Fatalf("event %s %s before output %q", ev.Name, ev.Data, sub)
		}
		o := ev.Output(s.t)
		outs = append(outs, o)
		if strings.Contains(o.Data, sub) && (stream == "" || o.Stream == stream) {
			return outs
		}
	}
}

// Ended reports that the stream closed, within d.
func (s *Stream) Ended(d time.Duration) bool {
	select {
	case _, ok := <-s.events:
		return !ok
	case <-time.After(d):
		return false
	}
}

// Close drops the connection.
func (s *Stream) Close() {
	s.cancel()
	s.resp.Body.Close()
}

// Seq parses an output's id.
func Seq(t testing.TB, ev SSEEvent) uint64 {
	n, err := strconv.ParseUint(ev.ID, 10, 64)
	if err != nil {
		t.Fatalf("event id %q: %v", ev.ID, err)
	}
	return n
}

// Text returns a JSON body for a text input.
func Text(s string) map[string]string { return map[string]string{"text": s} }

// Message returns a JSON body for a stream-json message input.
func Message(s string) map[string]string { return map[string]string{"message": s} }

// AttachRaw sends GET /runs/{ref}/attach on a bare connection and reads
// nothing: a viewer that stops reading. The caller reads the raw HTTP
// response from the connection later, and closes it.
func (c *Client) AttachRaw(ref, q string) net.Conn {
	c.t.Helper()
	u, err := url.Parse(c.base)
	if err != nil {
		c.t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		c.t.Fatal(err)
	}
	path := "/v1/m/sessions/runs/" + ref + "/attach"
	if q != "" {
		path += "?" + q
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nX-Olivares-Tenant: %s\r\n\r\n", path, u.Host, c.Token, c.Tenant)
	c.t.Cleanup(func() { conn.Close() })
	return conn
}
