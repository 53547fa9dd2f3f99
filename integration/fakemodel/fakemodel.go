// Package fakemodel is the model side of the real-binary battery: fake
// Anthropic Messages and OpenAI Responses servers on httptest, which the real
// Claude Code and Codex binaries talk to offline (real-clis.md §1.9, §2.4,
// §6.3). Each server records every request it gets, so that a test can check
// the history a CLI sent, and answers each model request with the next Reply
// a test queued: text, a tool call, a stream held open until released, or a
// failure (real-clis.md §1.10, §2.5).
//
// The servers listen on 127.0.0.1 only and never reach anything else.
package fakemodel

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Reply is the answer to one model request (one POST /v1/messages or
// /v1/responses; a turn with a tool call makes two). The zero Reply is the
// default: an echo, "pong: <prompt>", where the prompt is the last user text.
type Reply struct {
	// Text is the assistant's answer; "" means the echo.
	Text string
	// Tool, when set, answers with one tool call and no text.
	Tool *ToolCall
	// Hold, when set, opens the stream, sends one text delta ("held") and
	// then waits for Hold.Release or for the client to go away.
	Hold *Gate
	// Status, when it is neither 0 nor 200, is an HTTP error: the server
	// answers it with Body (application/json) instead of a stream.
	Status int
	Body   string
	// Header is added to the response, error or stream (rate-limit headers).
	Header http.Header
	// Failed (OpenAI only) ends a 200 stream with response.failed carrying
	// this error code (real-clis.md §2.5: rate_limit_exceeded gives Codex's
	// rateLimitExceeded).
	Failed string
	// Usage (Anthropic only), when set, is the request's usage instead of
	// 11 input tokens: what Claude Code's context meter reads.
	Usage *Usage
}

// Usage is the input side of a Messages API usage object.
type Usage struct {
	InputTokens, CacheReadInputTokens, CacheCreationInputTokens int
}

// ToolCall is a tool call the model makes.
type ToolCall struct {
	// ID is the tool_use id (Anthropic) or call_id (OpenAI); "" picks one.
	ID   string
	Name string
	// Input is the tool's JSON arguments.
	Input string
}

// Text answers with s.
func Text(s string) Reply { return Reply{Text: s} }

// Tool answers with one call of the tool name with the JSON input.
func Tool(name, input string) Reply { return Reply{Tool: &ToolCall{Name: name, Input: input}} }

// Held answers with a stream that g holds open.
func Held(g *Gate) Reply { return Reply{Hold: g} }

// Gate holds a streamed answer open (interrupt tests). Its channels tell what
// the server saw; none is ever sent on, they are only closed.
type Gate struct {
	arrived, release, gone chan struct{}
	a, r, g                sync.Once
}

// NewGate returns a gate that holds its answer until Release.
func NewGate() *Gate {
	return &Gate{arrived: make(chan struct{}), release: make(chan struct{}), gone: make(chan struct{})}
}

// Arrived is closed once the held request has come in and its first delta
// has been flushed to the client.
func (g *Gate) Arrived() <-chan struct{} { return g.arrived }

// Gone is closed when the client went away while the answer was held (the
// CLI cancelled the request).
func (g *Gate) Gone() <-chan struct{} { return g.gone }

// Release lets the held answer finish. Safe to call more than once.
func (g *Gate) Release() { g.r.Do(func() { close(g.release) }) }

// hold waits for Release (true) or for the request's end (false).
func (g *Gate) hold(ctx context.Context) bool {
	g.a.Do(func() { close(g.arrived) })
	select {
	case <-g.release:
		return true
	case <-ctx.Done():
		g.g.Do(func() { close(g.gone) })
		return false
	}
}

// Message is one entry of the history a CLI sent, reduced to what a test
// checks. Role is the API's role ("user", "assistant", "system",
// "developer"); an OpenAI function_call is an "assistant" entry and a
// function_call_output a "tool" entry.
type Message struct {
	Role string
	// Texts are the message's text blocks in order (Claude precedes user
	// text with <system-reminder> blocks).
	Texts []string
	// ToolCalls are the ids of the tool calls the message makes, ToolResults
	// the ids of the calls it answers; Outputs are the results' text.
	ToolCalls   []string
	ToolResults []string
	Outputs     []string
}

// Request is one request a server got.
type Request struct {
	At     time.Time
	Method string
	// Path has no query string (Claude Code adds ?beta=true).
	Path   string
	Query  string
	Header http.Header
	Body   []byte
	// Model and Stream are the body's fields, History its messages (input
	// items for OpenAI), and Prompt the last text block of the last user
	// message; all zero for a request without a JSON body.
	Model   string
	Stream  bool
	History []Message
	Prompt  string
	// Reply is what the server answered a model request with.
	Reply Reply
}

// Said lists every text of the history as "role: text", in order: the form
// a test checks the history with.
func (r Request) Said() []string {
	var out []string
	for _, m := range r.History {
		for _, t := range m.Texts {
			out = append(out, m.Role+": "+t)
		}
	}
	return out
}

// log is what both servers share: the reply queue and the request record.
type log struct {
	mu      sync.Mutex
	queue   []Reply
	reqs    []Request
	wake    chan struct{}
	counter int
}

func newLog() *log { return &log{wake: make(chan struct{})} }

// push queues replies for the next model requests, in order.
func (l *log) push(r ...Reply) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queue = append(l.queue, r...)
}

// next pops the next queued reply; the zero Reply when none is queued.
func (l *log) next() Reply {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) == 0 {
		return Reply{}
	}
	r := l.queue[0]
	l.queue = l.queue[1:]
	return r
}

func (l *log) id() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counter++
	return l.counter
}

func (l *log) record(r Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, r)
	close(l.wake)
	l.wake = make(chan struct{})
}

func (l *log) requests() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Request(nil), l.reqs...)
}

// await waits until n requests for path have been recorded and returns them.
func (l *log) await(ctx context.Context, path string, n int) ([]Request, error) {
	for {
		l.mu.Lock()
		var got []Request
		for _, r := range l.reqs {
			if r.Path == path {
				got = append(got, r)
			}
		}
		wake := l.wake
		l.mu.Unlock()
		if len(got) >= n {
			return got, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return got, ctx.Err()
		}
	}
}

// server is an httptest server on 127.0.0.1 with a request log.
type server struct {
	*log
	srv *httptest.Server
}

func (s *server) URL() string { return s.srv.URL }

// Close shuts the server down; a held answer ends as if the client left.
func (s *server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Push queues replies for the next model requests, in order.
func (s *server) Push(r ...Reply) { s.log.push(r...) }

// Requests returns every request recorded so far, in arrival order.
func (s *server) Requests() []Request { return s.log.requests() }

// Await waits until n requests to path have been recorded (model requests:
// the server's ModelPath) and returns all of them for path.
func (s *server) Await(ctx context.Context, path string, n int) ([]Request, error) {
	return s.log.await(ctx, path, n)
}

// modelRequests returns the recorded POSTs to path.
func (s *server) modelRequests(path string) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Path == path && r.Method == http.MethodPost {
			out = append(out, r)
		}
	}
	return out
}

func setHeader(w http.ResponseWriter, h http.Header) {
	for k, vs := range h {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
}
