package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/sse"
)

// Reconnect backoff of an attach stream: it doubles from the first to the
// cap, and starts over once a connection has delivered a frame.
const (
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// maxErrorBody bounds what is read of an attach's error answer.
const maxErrorBody = 1 << 20

// ErrSlowViewer is the cause a reconnecting stream reports after the
// coordinator dropped it for reading too slowly: the stream ended without
// end after a ": dropped" comment (or, from coordinators before issue 16,
// an end event with reason slow_viewer). The run still lives, so it picks
// up where it was.
var ErrSlowViewer = errors.New("the coordinator dropped this viewer for reading too slowly")

// AttachOptions shape an attach stream.
type AttachOptions struct {
	// From is the first seq to stream (from=) when HaveFrom; otherwise
	// the stream starts at the oldest retained frame.
	From     uint64
	HaveFrom bool
	// LastEventID, when not "" and HaveFrom is false, is sent as
	// Last-Event-ID on the first connection: the stream resumes after
	// that seq (R-ATT-5).
	LastEventID string
	// Reconnect makes the stream reconnect by itself after a connection
	// ends without an end or notice event (a tunnel loss, a coordinator
	// restart, a 5xx, a slow-viewer drop), at the seq after the last
	// frame it returned (R-RC-1, R-RC-8), and skip frames a server replays
	// that it already returned (R-RC-6). The stream then ends with io.EOF
	// after an end or notice event. Without Reconnect, the stream ends
	// when the server closes the body.
	Reconnect bool
	// OnReconnect, when not nil, is told before each reconnect why the
	// last connection ended (nil for a body that just ended) and the seq
	// the next asks for (have false: the oldest retained frame).
	OnReconnect func(cause error, next uint64, have bool)
	// MinBackoff and MaxBackoff bound the pause between reconnects; when
	// zero, DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Wait pauses between reconnects and returns an error when ctx ends;
	// when nil, it sleeps. Tests pass one that does not.
	Wait func(ctx context.Context, d time.Duration) error
	// Query adds parameters to every connection's URL as they are (tests
	// send what a well-behaved client would not).
	Query url.Values
	// Header adds request headers to every connection.
	Header http.Header
}

// Stream is an open attach: a run's output as server-sent events. It is
// not safe for concurrent use, except Close.
type Stream struct {
	c    *Client
	ref  string
	opts AttachOptions

	ctx    context.Context
	cancel context.CancelFunc

	req      *http.Request // of the current connection
	header   http.Header   // its response headers
	body     io.ReadCloser
	rd       *sse.Reader
	connStop context.CancelFunc

	next       uint64 // the seq to ask for on the next connection
	have       bool   // next is known
	first      bool   // no connection was made yet
	done       bool   // an end or notice was returned (Reconnect)
	cause      error  // why the last connection ended, for OnReconnect
	progressed bool   // the current connection delivered a frame
	backoff    time.Duration
	err        error // sticky
}

// Attach opens GET /runs/{ref}/attach. It returns once the coordinator has
// answered the first connection: an error answer is an *Error (with
// Reconnect, only a 4xx; a 5xx or no answer is retried by Next). ctx bounds
// the whole stream; Close ends it sooner.
func (c *Client) Attach(ctx context.Context, ref string, opts AttachOptions) (*Stream, error) {
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.Wait == nil {
		opts.Wait = sleep
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Stream{c: c, ref: ref, opts: opts, ctx: ctx, cancel: cancel, next: opts.From, have: opts.HaveFrom, first: true, backoff: opts.MinBackoff}
	if err := s.connect(); err != nil {
		if !opts.Reconnect || !retryable(err) {
			cancel()
			return nil, err
		}
		s.cause = err
	}
	return s, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryable reports whether another connection may fare better: no
// answer, a 5xx (the coordinator restarting, the node's tunnel down), or a
// 429 (too many attaches open: one of ours may not be freed yet). Another
// 4xx will not change.
func retryable(err error) bool {
	if errors.Is(err, ErrUnreachable) {
		return true
	}
	st := StatusOf(err)
	return st >= 500 || st == http.StatusTooManyRequests
}

// connect makes one connection and reads its response headers.
func (s *Stream) connect() error {
	q := url.Values{}
	for k, vs := range s.opts.Query {
		q[k] = append([]string(nil), vs...)
	}
	if s.have {
		q.Set("from", strconv.FormatUint(s.next, 10))
	}
	path := RunPath(s.ref, "attach")
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	cctx, stop := context.WithCancel(s.ctx)
	req, err := s.c.newRequest(cctx, http.MethodGet, path, nil)
	if err != nil {
		stop()
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, vs := range s.opts.Header {
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	if s.first && !s.have && s.opts.LastEventID != "" {
		req.Header.Set("Last-Event-ID", s.opts.LastEventID)
	}
	s.first = false
	// The timeout bounds the wait for the headers, never the stream.
	var timer *time.Timer
	if t := s.c.cfg.Timeout; t > 0 {
		timer = time.AfterFunc(t, stop)
	}
	resp, err := s.c.hc.Do(req)
	if timer != nil && !timer.Stop() {
		if err == nil {
			resp.Body.Close()
		}
		stop()
		return fmt.Errorf("%w at %s: no answer to the attach of %s within %v", ErrUnreachable, s.c.base, s.ref, s.c.cfg.Timeout)
	}
	if err != nil {
		stop()
		if s.ctx.Err() != nil {
			return s.ctx.Err()
		}
		return s.c.unreachable(err)
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		stop()
		return errorOf(http.MethodGet, path, resp.StatusCode, raw)
	}
	s.req, s.header, s.body, s.connStop = req, resp.Header, resp.Body, stop
	s.rd = sse.NewReader(resp.Body)
	s.progressed = false
	return nil
}

// closeConn ends the current connection, if any.
func (s *Stream) closeConn() {
	if s.body != nil {
		s.body.Close()
		s.connStop()
		s.body, s.rd, s.connStop = nil, nil, nil
	}
}

// Header is the response header of the current (or last) connection.
func (s *Stream) Header() http.Header { return s.header }

// Next returns the next event: output (apitypes.SSEOutput), lag, end,
// notice or olivares_notice. It returns io.EOF when the stream is over
// (with Reconnect, after an end or notice), the context's error once it
// ends or Close was called, an *Error for an error answer that a reconnect
// cannot fix, sse.ErrTooLarge (wrapped) for an event over the reader's
// limit, or an error of CheckEvent. An error is returned again by every
// later call.
func (s *Stream) Next() (sse.Event, error) {
	for {
		if s.err != nil {
			return sse.Event{}, s.err
		}
		if s.rd == nil {
			if s.done {
				s.err = io.EOF
				continue
			}
			if err := s.reconnect(); err != nil {
				s.fail(err)
			}
			continue
		}
		ev, err := s.rd.Next()
		if err != nil {
			lastComment := s.rd.LastComment()
			s.closeConn()
			switch {
			case s.ctx.Err() != nil:
				s.fail(s.ctx.Err())
			case errors.Is(err, sse.ErrTooLarge):
				// Reading the same frame again would fail the same way.
				s.fail(err)
			case !s.opts.Reconnect && errors.Is(err, io.EOF):
				s.fail(io.EOF)
			case !s.opts.Reconnect:
				s.fail(fmt.Errorf("the attach stream of %s broke: %w", s.ref, err))
			case errors.Is(err, io.EOF) && strings.HasPrefix(lastComment, "dropped"):
				s.cause = ErrSlowViewer
			case errors.Is(err, io.EOF):
				s.cause = nil
			default:
				s.cause = err
			}
			continue
		}
		if h := s.c.cfg.CheckEvent; h != nil {
			if err := h(s.req, ev); err != nil {
				s.closeConn()
				s.fail(err)
				continue
			}
		}
		skip, err := s.track(ev)
		if err != nil {
			s.closeConn()
			s.fail(err)
			continue
		}
		if skip {
			continue
		}
		return ev, nil
	}
}

// track follows the stream's position; skip is true for a frame a
// reconnecting stream already returned.
func (s *Stream) track(ev sse.Event) (skip bool, err error) {
	switch ev.Type {
	case apitypes.SSEOutput, apitypes.SSEOlivaresNotice, apitypes.SSERequest, apitypes.SSERequestSettled:
		// Frames of the ring: their id is their seq (R-ATT-4).
		seq, perr := strconv.ParseUint(ev.ID, 10, 64)
		if perr != nil {
			return false, nil
		}
		if s.opts.Reconnect && s.have && seq < s.next {
			return true, nil // already returned (R-RC-6)
		}
		s.next, s.have, s.progressed = seq+1, true, true
	case apitypes.SSELag:
		var l apitypes.Lag
		if err := json.Unmarshal(ev.Data, &l); err != nil {
			return false, fmt.Errorf("a bad lag event from the coordinator: %w", err)
		}
		if !s.have || l.ResumedFrom > s.next {
			s.next, s.have = l.ResumedFrom, true
		}
	case apitypes.SSEEnd:
		if !s.opts.Reconnect {
			break
		}
		var e apitypes.End
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return false, fmt.Errorf("a bad end event from the coordinator: %w", err)
		}
		s.closeConn()
		if e.Reason == "slow_viewer" {
			// The process still lives: pick up where we were.
			s.cause = ErrSlowViewer
		} else {
			s.done = true
		}
	case apitypes.SSENotice:
		if s.opts.Reconnect {
			s.closeConn()
			s.done = true
		}
	}
	return false, nil
}

// reconnect pauses and connects again, reporting the cause first.
func (s *Stream) reconnect() error {
	if s.progressed {
		s.backoff = s.opts.MinBackoff
	}
	if s.opts.OnReconnect != nil {
		s.opts.OnReconnect(s.cause, s.next, s.have)
	}
	if err := s.opts.Wait(s.ctx, s.backoff); err != nil {
		return err
	}
	s.backoff = min(s.backoff*2, s.opts.MaxBackoff)
	err := s.connect()
	if err != nil && retryable(err) && s.ctx.Err() == nil {
		s.cause, s.progressed = err, false
		return nil // try again, after the next pause
	}
	return err
}

// fail makes err the stream's sticky error.
func (s *Stream) fail(err error) {
	s.err = err
	s.cancel()
}

// Close ends the stream and its connection. Next then returns the
// context's error.
func (s *Stream) Close() error {
	s.cancel()
	return nil
}
