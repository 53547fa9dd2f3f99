package integration

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Client calls the public API as one credential in one tenant, through the
// env's one API client (shared/apiclient). Token and Tenant are read at
// each call, so a copy with another Tenant asks as that tenant.
type Client struct {
	t      testing.TB
	env    *Env
	Token  string
	Tenant string
	// url, when set, is the API of another replica than the env's
	// coordinator (Via).
	url string
}

// Via returns a copy of c that calls replica r's API.
func (c *Client) Via(r *Replica) *Client {
	cc := *c
	cc.url = r.APIURL()
	return &cc
}

// Client returns a client of the env's API for token in Tenant.
func (e *Env) Client(token string) *Client {
	return &Client{t: e.t, env: e, Token: token, Tenant: Tenant}
}

// API is the typed client for c's token and tenant, for a test that wants
// a method of shared/apiclient (or errors instead of failing).
func (c *Client) API() *apiclient.Client {
	if c.url != "" {
		return apiclient.New(apiclient.Config{URL: c.url, Token: c.Token, Tenant: c.Tenant,
			HTTPClient: c.env.http, CheckEvent: c.env.checkEvent})
	}
	return c.env.API(c.Token, c.Tenant)
}

// Call sends body (JSON-encoded unless it is []byte or nil) and returns the
// answer, whatever its status.
func (c *Client) Call(method, path string, body any) Response {
	c.t.Helper()
	return c.env.call(c.API(), method, path, body, nil)
}

// Send is Call with extra request headers, and an error instead of a
// failed test (for other goroutines).
func (c *Client) Send(method, path string, body any, hdr map[string]string) (Response, error) {
	h := http.Header{}
	for k, v := range hdr {
		h.Set(k, v)
	}
	r, err := c.API().Do(context.Background(), method, path, body, h)
	if err != nil {
		return Response{}, err
	}
	return Response{Status: r.Status, Header: r.Header, Body: r.Body}, nil
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
	c.Must(http.StatusOK, http.MethodGet, apiclient.RunPath(ref), nil, &r)
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
		path := apiclient.RunPath(ref, "events")
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

// SSEEvent is one server-sent event, as shared/sse read it.
type SSEEvent struct {
	Name string // the event type
	ID   string // the last event ID
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

// Stream is an open attach whose events a goroutine reads ahead, so that
// Next can wait with a deadline. It never reconnects: a test sees exactly
// what each connection sent.
type Stream struct {
	t      testing.TB
	s      *apiclient.Stream
	events chan SSEEvent
	closed chan struct{}
	once   sync.Once

	mu      sync.Mutex
	readErr error
}

// attachOptions turns a test's query ("from=5", "" for none) and extra
// header pairs into the client's options.
func attachOptions(t testing.TB, q string, hdr []string) apiclient.AttachOptions {
	t.Helper()
	vs, err := url.ParseQuery(q)
	if err != nil {
		t.Fatalf("attach query %q: %v", q, err)
	}
	var o apiclient.AttachOptions
	if len(vs) > 0 {
		o.Query = vs
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if o.Header == nil {
			o.Header = http.Header{}
		}
		o.Header.Set(hdr[i], hdr[i+1])
	}
	return o
}

// Attach opens GET /runs/{ref}/attach with query q (e.g. "from=5"), and
// extra request headers; it fails the test unless the status is 200.
func (c *Client) Attach(ref, q string, hdr ...string) *Stream {
	c.t.Helper()
	as, err := c.API().Attach(context.Background(), ref, attachOptions(c.t, q, hdr))
	if err != nil {
		c.t.Fatalf("attach %s: %v", ref, err)
	}
	s := &Stream{t: c.t, s: as, events: make(chan SSEEvent, 4096), closed: make(chan struct{})}
	go s.read()
	c.t.Cleanup(s.Close)
	return s
}

func (s *Stream) read() {
	defer close(s.events)
	for {
		ev, err := s.s.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			s.mu.Lock()
			s.readErr = err
			s.mu.Unlock()
			return
		}
		select {
		case s.events <- SSEEvent{Name: ev.Type, ID: ev.ID, Data: ev.Data}:
		case <-s.closed:
			return
		}
	}
}

// Events is the stream's events, for a reader of its own; it is closed
// once the stream has ended.
func (s *Stream) Events() <-chan SSEEvent { return s.events }

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
			s.t.Fatalf("stream ended before a %q event (after %d outputs): %v", name, len(outs), s.Err())
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

// UntilStream reads until an output on stream ("" any of the child's,
// never an input frame, R-ATT-11) whose data contains sub, passing over
// request events.
func (s *Stream) UntilStream(stream, sub string, d time.Duration) []apitypes.Output {
	s.t.Helper()
	var outs []apitypes.Output
	deadline := time.Now().Add(d)
	for {
		ev, ok := s.Next(time.Until(deadline))
		if !ok {
			s.t.Fatalf("stream ended before output %q: %v", sub, s.Err())
		}
		if ev.Name == apitypes.SSERequest || ev.Name == apitypes.SSERequestSettled {
			continue // the tool's requests come between its output (R-REQ-4)
		}
		if ev.Name != apitypes.SSEOutput {
			s.t.Fatalf("event %s %s before output %q", ev.Name, ev.Data, sub)
		}
		o := ev.Output(s.t)
		outs = append(outs, o)
		if strings.Contains(o.Data, sub) && (stream == "" && o.Stream != "input" || o.Stream == stream) {
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
	s.once.Do(func() { close(s.closed) })
	s.s.Close()
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

// AttachIdle opens GET /runs/{ref}/attach?q and reads nothing until the
// test calls Next: a viewer that stops reading, whose connection holds
// only what the socket buffers do. Every read must be done within d of the
// attach. It fails the test unless the status is 200.
func (c *Client) AttachIdle(ref, q string, d time.Duration) *apiclient.Stream {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	s, err := c.API().Attach(ctx, ref, attachOptions(c.t, q, nil))
	if err != nil {
		cancel()
		c.t.Fatalf("attach %s: %v", ref, err)
	}
	c.t.Cleanup(func() {
		s.Close()
		cancel()
	})
	return s
}
