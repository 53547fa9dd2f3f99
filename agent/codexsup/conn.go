package codexsup

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"sync"

	"github.com/olivares-dev/olivares/agent/internal/jsonrpc"
	"github.com/olivares-dev/olivares/shared/logging"
)

// maxLine bounds one app-server line the connection reads whole. A page of
// up to 20 MiB (R-CX-TRN-5) fits; a longer line is skipped, and only its
// request id and cursors are read from its ends.
const maxLine = 32 << 20

// Errors of the connection.
var (
	// ErrConnLost: the app-server exited (or its pipes broke) before it
	// answered. The next call starts a new one.
	ErrConnLost = errors.New("codexsup: the codex app-server connection was lost")
	// ErrClosed: the connection was closed with the agent.
	ErrClosed = errors.New("codexsup: the connection is closed")
)

// RPCError is an error answer of the app-server. Its text is Codex's own:
// it is logged on the node and never sent to clients (R-CX-PROJ-2).
type RPCError struct {
	Method  string
	Code    int
	Message string
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("codex %s: %d %s", e.Method, e.Code, e.Message)
}

// LineTooLargeError: the answer was longer than maxLine. Its cursors are
// read from the end of the line when Codex put them there.
type LineTooLargeError struct {
	Method                      string
	Bytes                       int64
	NextCursor, BackwardsCursor string
}

func (e *LineTooLargeError) Error() string {
	return fmt.Sprintf("codex %s: the answer is %d bytes, over what this connection reads whole", e.Method, e.Bytes)
}

// proc is a started app-server: its pipes and how to stop it.
type proc struct {
	stdin  io.WriteCloser
	stdout io.Reader
	// stop ends the process (and waits for it).
	stop func()
}

// spawner starts an app-server. ctx bounds only the start.
type spawner func(ctx context.Context) (*proc, error)

// Conn is the supervision connection: one managed `codex app-server` over
// stdio, started on the first call, started again after it died, stopped
// by Close (R-CX-CONN-2). It is passive (R-CX-PASS-1): it sends only the
// requests its callers make, opts out of every notification, and never
// answers a request of the server (no approval is ever answered).
type Conn struct {
	spawn  spawner
	client clientInfo
	log    *slog.Logger
	// maxLine is the longest line read whole (maxLine; tests lower it).
	maxLine int

	mu     sync.Mutex
	cur    *peer
	closed bool
}

type clientInfo struct {
	Name    string  `json:"name"`
	Title   *string `json:"title"`
	Version string  `json:"version"`
}

func newConn(spawn spawner, name, version string, log *slog.Logger) *Conn {
	return &Conn{spawn: spawn, client: clientInfo{Name: name, Version: version}, log: logging.OrDiscard(log), maxLine: maxLine}
}

// peer is one app-server process and its pending calls.
type peer struct {
	p       *proc
	log     *slog.Logger
	maxLine int

	wmu sync.Mutex // orders writes to stdin

	mu    sync.Mutex
	next  int64
	waits map[int64]*waiter
	dead  bool

	done  chan struct{} // closed once the reader ended
	ready chan struct{} // closed once initialize answered
	err   error         // initialize's error, read after ready
}

type waiter struct {
	method string
	ch     chan reply
}

type reply struct {
	result json.RawMessage
	err    error
}

// Call sends one request and decodes the result into out (when not nil).
func (c *Conn) Call(ctx context.Context, method string, params, out any) error {
	p, err := c.peer(ctx)
	if err != nil {
		return err
	}
	raw, err := p.call(ctx, method, params)
	if err != nil {
		return err
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("codex %s: unexpected answer: %w", method, err)
		}
	}
	return nil
}

// peer returns the live process, starting one when there is none.
func (c *Conn) peer(ctx context.Context) (*peer, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	p := c.cur
	if p == nil || p.isDead() {
		pr, err := c.spawn(ctx)
		if err != nil {
			c.mu.Unlock()
			return nil, err
		}
		p = &peer{p: pr, log: c.log, maxLine: c.maxLine, waits: map[int64]*waiter{}, done: make(chan struct{}), ready: make(chan struct{})}
		c.cur = p
		go p.read()
		go c.initialize(p)
	}
	c.mu.Unlock()
	select {
	case <-p.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if p.err != nil {
		return nil, p.err
	}
	return p, nil
}

type initializeParams struct {
	ClientInfo   clientInfo   `json:"clientInfo"`
	Capabilities capabilities `json:"capabilities"`
}

type capabilities struct {
	// ExperimentalAPI: thread/list's ancestorThreadId needs it (R-CX-ARC-6).
	ExperimentalAPI           bool     `json:"experimentalApi"`
	OptOutNotificationMethods []string `json:"optOutNotificationMethods"`
}

// initialize runs the handshake of a new process; a failure kills it.
func (c *Conn) initialize(p *peer) {
	ctx, cancel := context.WithTimeout(context.Background(), initTimeout)
	defer cancel()
	_, err := p.call(ctx, "initialize", initializeParams{ClientInfo: c.client,
		Capabilities: capabilities{ExperimentalAPI: true, OptOutNotificationMethods: notificationMethods}})
	if err == nil {
		err = p.write(jsonrpc.Notification{JSONRPC: "2.0", Method: "initialized"})
	}
	if err != nil {
		p.err = fmt.Errorf("codexsup: the app-server handshake failed: %w", err)
		p.kill()
	}
	close(p.ready)
}

// Close stops the process; calls in flight fail with ErrConnLost.
func (c *Conn) Close() {
	c.mu.Lock()
	c.closed = true
	p := c.cur
	c.cur = nil
	c.mu.Unlock()
	if p != nil {
		p.kill()
		<-p.done
	}
}

func (p *peer) isDead() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dead
}

func (p *peer) kill() {
	p.mu.Lock()
	p.dead = true
	p.mu.Unlock()
	p.p.stop()
}

func (p *peer) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	w := &waiter{method: method, ch: make(chan reply, 1)}
	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		return nil, ErrConnLost
	}
	p.next++
	id := p.next
	p.waits[id] = w
	p.mu.Unlock()
	if err := p.write(jsonrpc.Request{JSONRPC: "2.0", ID: id, Method: method, Params: params}); err != nil {
		p.forget(id)
		p.kill()
		return nil, ErrConnLost
	}
	select {
	case r := <-w.ch:
		return r.result, r.err
	case <-ctx.Done():
		p.forget(id)
		return nil, ctx.Err()
	}
}

func (p *peer) forget(id int64) {
	p.mu.Lock()
	delete(p.waits, id)
	p.mu.Unlock()
}

// write sends one line; v is one of jsonrpc's own message types, which
// always marshal.
func (p *peer) write(v any) error {
	b := jsonrpc.Line(v)
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_, err := p.p.stdin.Write(b)
	return err
}

// read dispatches answers until stdout ends, then fails what is pending.
func (p *peer) read() {
	defer close(p.done)
	br := bufio.NewReaderSize(p.p.stdout, 256<<10)
	var line []byte
	var head, tail []byte
	var size int64
	over := false
	for {
		chunk, err := br.ReadSlice('\n')
		size += int64(len(chunk))
		switch {
		case over:
			tail = keepTail(tail, chunk)
		case len(line)+len(chunk) > p.maxLine:
			over = true
			head = append([]byte(nil), line[:min(len(line), 256)]...)
			tail = keepTail(keepTail(nil, line[max(0, len(line)-tailKeep):]), chunk)
			line = line[:0]
		default:
			line = append(line, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			if over {
				p.oversized(head, tail, size)
			} else {
				p.dispatch(line)
			}
			line, head, tail, size, over = line[:0], nil, nil, 0, false
			if cap(line) > 1<<20 {
				line = nil // do not keep a large buffer between lines
			}
		}
		if err != nil {
			break
		}
	}
	p.mu.Lock()
	p.dead = true
	waits := p.waits
	p.waits = map[int64]*waiter{}
	p.mu.Unlock()
	for _, w := range waits {
		w.ch <- reply{err: ErrConnLost}
	}
	p.p.stop()
}

const tailKeep = 8 << 10

func keepTail(tail, chunk []byte) []byte {
	tail = append(tail, chunk...)
	if len(tail) > tailKeep {
		tail = append(tail[:0], tail[len(tail)-tailKeep:]...)
	}
	return tail
}

// resultPrefix is how Codex writes every result line: the id, then the
// result, then the closing brace (real-clis.md §2.1).
var resultPrefix = regexp.MustCompile(`^\{"id":(\d{1,18}),"result":`)

func (p *peer) dispatch(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	if m := resultPrefix.FindSubmatch(line[:min(len(line), 48)]); m != nil && line[len(line)-1] == '}' {
		// A result is handed on without a first full scan: the caller's
		// decode validates it (a large transcript page is scanned once).
		id, _ := strconv.ParseInt(string(m[1]), 10, 64)
		if w := p.take(id); w != nil {
			w.ch <- reply{result: append(json.RawMessage(nil), line[len(m[0]):len(line)-1]...)}
		}
		return
	}
	m, ok := jsonrpc.Parse(line)
	switch {
	case !ok:
		// Not a protocol line.
	case m.IsRequest():
		// A server request (an approval, user input, a tool call): the
		// supervision connection never answers one (R-CX-PASS-1).
		p.log.Info("the app-server asked; the passive supervision connection does not answer", "method", m.Method)
	case m.IsNotification():
		// A notification this connection could not opt out of: ignored.
	case m.IsResponse():
		id, ok := m.IntID()
		if !ok {
			return
		}
		w := p.take(id)
		if w == nil {
			return
		}
		if m.HasError {
			w.ch <- reply{err: &RPCError{Method: w.method, Code: m.ErrorCode, Message: m.ErrorMessage}}
			return
		}
		// m.Result aliases the read buffer, which the next line reuses.
		w.ch <- reply{result: append(json.RawMessage(nil), m.Result...)}
	}
}

func (p *peer) take(id int64) *waiter {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.waits[id]
	delete(p.waits, id)
	return w
}

var (
	headID   = regexp.MustCompile(`^\s*\{\s*"id"\s*:\s*(\d+)`)
	tailID   = regexp.MustCompile(`"id"\s*:\s*(\d+)\s*\}\s*$`)
	nextCur  = regexp.MustCompile(`"nextCursor"\s*:\s*("(?:[^"\\]|\\.)*")`)
	backCurs = regexp.MustCompile(`"backwardsCursor"\s*:\s*("(?:[^"\\]|\\.)*")`)
)

// oversized fails the call a line too long to read belonged to. Codex
// writes the id first in a result and last in an error.
func (p *peer) oversized(head, tail []byte, size int64) {
	var idText []byte
	if m := headID.FindSubmatch(head); m != nil {
		idText = m[1]
	} else if m := tailID.FindSubmatch(tail); m != nil {
		idText = m[1]
	}
	id, err := strconv.ParseInt(string(idText), 10, 64)
	if err != nil {
		p.log.Warn("skipped an app-server line that names no request", "bytes", size)
		return
	}
	w := p.take(id)
	if w == nil {
		return
	}
	e := &LineTooLargeError{Method: w.method, Bytes: size}
	if m := nextCur.FindSubmatch(tail); m != nil {
		json.Unmarshal(m[1], &e.NextCursor)
	}
	if m := backCurs.FindSubmatch(tail); m != nil {
		json.Unmarshal(m[1], &e.BackwardsCursor)
	}
	w.ch <- reply{err: e}
}
