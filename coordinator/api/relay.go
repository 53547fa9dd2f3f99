package api

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// The attach relay: one tunnel stream of frames in, one SSE client out.
//
// The relay must never let a slow client hold its tunnel stream unread:
// on QUIC, bytes received on a stream and not yet read by the application
// stay charged to the connection's flow-control window, so two stuck
// viewers used to stop every stream of the node's tunnel, heartbeats
// included, until the coordinator dropped the tunnel (issue 16). So the
// stream is read at once, always, by its own goroutine, into a bounded
// per-viewer queue; the client is written from that queue with a deadline
// per flush. A viewer whose queue fills, or whose client does not take a
// flush within the deadline, is dropped: its tunnel stream is closed at
// once and its response ends without an end event, which tells any SSE
// client to reconnect at last+1 (R-RC-8; end is the generation's exit
// only, R-RC-9).

// Attach relay defaults (Options.Attach).
const (
	// DefaultAttachBuffer is what one viewer may have waiting between its
	// tunnel stream and its client: a stream window's worth, what a viewer
	// could lag before the relay drained its stream. It holds at least
	// two of the largest frames (wire.MaxFrame).
	DefaultAttachBuffer = 16 << 20
	// DefaultSSEWriteTimeout bounds each flush to an SSE client.
	DefaultSSEWriteTimeout = 10 * time.Second
	// DefaultSSEKeepAlive is how long an idle SSE stream waits before a
	// ":" comment, which also finds clients that went away.
	DefaultSSEKeepAlive = 15 * time.Second
	// DefaultAttachesPerPrincipal caps one principal's open attaches.
	DefaultAttachesPerPrincipal = 128
)

// AttachOptions tune the attach relay. Zero values take the defaults above.
type AttachOptions struct {
	// Buffer is the bytes one viewer may have waiting; a viewer over it is
	// dropped. When zero, DefaultAttachBuffer; never below 2×wire.MaxFrame.
	Buffer int
	// WriteTimeout is the deadline of each flush to the client. When zero,
	// DefaultSSEWriteTimeout.
	WriteTimeout time.Duration
	// KeepAlive is the idle time before a keep-alive comment. When zero,
	// DefaultSSEKeepAlive.
	KeepAlive time.Duration
	// PerPrincipal caps a principal's open attaches (429 past it). When
	// zero, DefaultAttachesPerPrincipal.
	PerPrincipal int
}

func (o *AttachOptions) setDefaults() {
	if o.Buffer == 0 {
		o.Buffer = DefaultAttachBuffer
	}
	o.Buffer = max(o.Buffer, 2*wire.MaxFrame)
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultSSEWriteTimeout
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = DefaultSSEKeepAlive
	}
	if o.PerPrincipal <= 0 {
		o.PerPrincipal = DefaultAttachesPerPrincipal
	}
}

// sseSink is the client side of a relay: an http.ResponseController over
// the response, or a bare connection in benchmarks.
type sseSink interface {
	io.Writer
	SetWriteDeadline(time.Time) error
	Flush() error
}

// relayEnd says how a relay ended.
type relayEnd int

const (
	relayFinal relayEnd = iota // end or notice sent: the stream is over
	relayLost                  // the tunnel stream ended without end (R-RC-8)
	relaySlow                  // the viewer was dropped for reading too slowly
	relayGone                  // the client went away or failed
)

func (e relayEnd) String() string {
	return [...]string{"final", "lost", "slow", "gone"}[e]
}

// errOverflow: the viewer's queue is full.
var errOverflow = errors.New("api: attach viewer queue overflowed")

// droppedComment is what a dropped viewer is told, if it still reads: an
// SSE comment, ignored by clients, for the person looking at the stream.
const droppedComment = ": dropped: this viewer read too slowly; reconnect with from=last+1\n\n"

// keepAliveComment is written to an idle stream.
const keepAliveComment = ":\n\n"

// relayChunk is the size of the queue's chunks; the reader reads straight
// into a chunk's free space.
const relayChunk = 64 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, 0, relayChunk); return &b }}

// attachQueue is one viewer's bounded buffer between its tunnel stream
// (one writer: fill) and its client (one reader: the relay loop). fill
// reads into the free space of the last chunk, which the relay never
// touches past the length published under mu.
type attachQueue struct {
	max  int
	wake chan struct{} // 1-buffered: data or the end arrived
	done chan struct{} // closed when fill returns

	mu     sync.Mutex
	chunks []*[]byte // unread data: chunks[0][off:], the rest whole
	off    int
	n      int   // unread bytes
	err    error // how the stream ended: io.EOF, a read error, errOverflow
}

func newAttachQueue(max int) *attachQueue {
	return &attachQueue{max: max, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (q *attachQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// fill reads r into the queue until r fails or the queue overflows; on
// overflow it calls drop (which closes the stream, giving its window back
// to the tunnel at once).
func (q *attachQueue) fill(r io.Reader, drop func()) {
	defer close(q.done)
	for {
		q.mu.Lock()
		var tail *[]byte
		if k := len(q.chunks); k > 0 && len(*q.chunks[k-1]) < cap(*q.chunks[k-1]) {
			tail = q.chunks[k-1]
		} else {
			tail = chunkPool.Get().(*[]byte)
			*tail = (*tail)[:0]
			q.chunks = append(q.chunks, tail)
		}
		free := (*tail)[len(*tail):cap(*tail)]
		q.mu.Unlock()

		n, err := r.Read(free)

		q.mu.Lock()
		*tail = (*tail)[:len(*tail)+n]
		q.n += n
		if q.n > q.max {
			err = errOverflow
		}
		if err != nil && q.err == nil {
			q.err = err
		}
		q.mu.Unlock()
		if n > 0 || err != nil {
			q.signal()
		}
		if err != nil {
			if errors.Is(err, errOverflow) {
				drop()
			}
			return
		}
	}
}

// peek returns the unread bytes of the first chunk, and the stream's end
// once everything before it was consumed (errOverflow at once).
func (q *attachQueue) peek() ([]byte, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if errors.Is(q.err, errOverflow) {
		return nil, q.err
	}
	for len(q.chunks) > 0 {
		c := *q.chunks[0]
		if q.off < len(c) {
			return c[q.off:], nil
		}
		if len(q.chunks) == 1 {
			break // fill may be reading into its free space
		}
		q.releaseFirstLocked()
	}
	return nil, q.err
}

func (q *attachQueue) releaseFirstLocked() {
	chunkPool.Put(q.chunks[0])
	q.chunks[0] = nil
	q.chunks = q.chunks[1:]
	q.off = 0
}

// consume marks k bytes of the last peek as read.
func (q *attachQueue) consume(k int) {
	q.mu.Lock()
	q.off += k
	q.n -= k
	if len(q.chunks) > 1 && q.off == len(*q.chunks[0]) {
		q.releaseFirstLocked()
	}
	q.mu.Unlock()
}

// release returns the chunks to the pool; fill must have returned.
func (q *attachQueue) release() {
	q.mu.Lock()
	for len(q.chunks) > 0 {
		q.releaseFirstLocked()
	}
	q.mu.Unlock()
}

// flushAt: events are written once this much is encoded, or once nothing
// more is waiting (a lone echo goes at once).
const flushAt = 256 << 10

// relay copies the attach frames of st to out as SSE events until the
// stream's end or notice, a drop, or ctx's end. It closes st before it
// returns and leaves no goroutine behind.
func relay(ctx context.Context, st io.ReadCloser, out sseSink, o AttachOptions) relayEnd {
	q := newAttachQueue(o.Buffer)
	var closeOnce sync.Once
	closeStream := func() { closeOnce.Do(func() { st.Close() }) }
	go q.fill(st, closeStream)
	stopCtx := context.AfterFunc(ctx, closeStream)
	defer func() {
		stopCtx()
		closeStream()
		<-q.done
		q.release()
	}()

	r := relayWriter{out: out, timeout: o.WriteTimeout, buf: make([]byte, 0, flushAt+64<<10)}
	var pending []byte // a frame that straddles chunks, assembled
	keepAlive := time.NewTimer(o.KeepAlive)
	defer keepAlive.Stop()
	for {
		view, err := q.peek()
		if len(view) == 0 {
			if err := r.flush(); err != nil {
				return relayGone
			}
			switch {
			case errors.Is(err, errOverflow):
				r.dropped()
				return relaySlow
			case err != nil:
				if ctx.Err() != nil {
					return relayGone
				}
				return relayLost
			}
			select {
			case <-q.wake:
			case <-ctx.Done():
				return relayGone
			case <-keepAlive.C:
				r.buf = append(r.buf, keepAliveComment...)
				if err := r.flush(); err != nil {
					return relayGone
				}
				keepAlive.Reset(o.KeepAlive)
			}
			continue
		}
		var (
			used int
			end  relayEnd
			fin  bool
		)
		if len(pending) > 0 {
			used, pending = completeFrame(pending, view)
			if frameLen(pending) > 4+wire.MaxFrame {
				end, fin = relayLost, true
			} else if p, ok := wholeFrame(pending); ok {
				end, fin = r.frame(p)
				pending = pending[:0]
			}
		} else {
			used, end, fin = r.frames(view)
			if !fin && used < len(view) {
				// The start of a frame that goes on in the next chunk.
				pending = append(pending, view[used:]...)
				used = len(view)
			}
		}
		q.consume(used)
		if fin {
			if end == relaySlow {
				r.dropped()
				return end
			}
			if err := r.flush(); err != nil {
				return relayGone
			}
			return end
		}
		if end == relayGone {
			return relayGone
		}
		if len(r.buf) >= flushAt {
			if err := r.flush(); err != nil {
				return relayGone
			}
		}
		if !keepAlive.Stop() {
			select {
			case <-keepAlive.C:
			default:
			}
		}
		keepAlive.Reset(o.KeepAlive)
	}
}

// frameLen is the length of the frame that p starts with, prefix
// included, or -1 when p holds less than its prefix.
func frameLen(p []byte) int {
	if len(p) < 4 {
		return -1
	}
	return 4 + int(binary.BigEndian.Uint32(p))
}

// wholeFrame returns the body of the frame p holds entirely.
func wholeFrame(p []byte) ([]byte, bool) {
	n := frameLen(p)
	if n < 0 || len(p) < n {
		return nil, false
	}
	return p[4:n], true
}

// completeFrame appends to pending what it lacks of its frame from view,
// and says how much of view it took.
func completeFrame(pending, view []byte) (int, []byte) {
	if len(pending) < 4 {
		k := min(4-len(pending), len(view))
		pending = append(pending, view[:k]...)
		if len(pending) < 4 {
			return k, pending
		}
		more, p := completeFrame(pending, view[k:])
		return k + more, p
	}
	need := frameLen(pending) - len(pending)
	k := min(need, len(view))
	return k, append(pending, view[:k]...)
}

// relayWriter encodes events into buf and writes them to the client with
// a deadline per flush.
type relayWriter struct {
	out     sseSink
	timeout time.Duration
	buf     []byte
}

func (r *relayWriter) flush() error {
	if len(r.buf) == 0 {
		return nil
	}
	r.out.SetWriteDeadline(time.Now().Add(r.timeout))
	_, err := r.out.Write(r.buf)
	if err == nil {
		err = r.out.Flush()
	}
	r.buf = r.buf[:0]
	return err
}

// dropped tells the client, if it still reads, why its stream ends.
func (r *relayWriter) dropped() {
	r.buf = append(r.buf, droppedComment...)
	r.flush()
}

// reasonSlowViewer is the reason of an agent's end that drops a viewer.
const reasonSlowViewer = "slow_viewer"

// frames encodes the whole frames at the start of view; used is how many
// bytes they took. fin reports a last frame (end, notice, a drop, or a
// frame that does not parse: relayGone).
func (r *relayWriter) frames(view []byte) (used int, end relayEnd, fin bool) {
	for {
		p, ok := wholeFrame(view[used:])
		if !ok {
			if n := frameLen(view[used:]); n > 4+wire.MaxFrame {
				return used, relayLost, true
			}
			return used, 0, false
		}
		used += 4 + len(p)
		if end, fin := r.frame(p); fin {
			return used, end, true
		}
	}
}

// frame encodes one frame body.
func (r *relayWriter) frame(p []byte) (relayEnd, bool) {
	f, err := proto.ParseAttachFrame(p)
	if err != nil {
		return relayLost, true
	}
	switch f.Type {
	case proto.AttachEnd:
		// An agent that dropped this viewer says so with an end whose
		// reason is slow_viewer; the client hears a drop, not an end.
		var e apitypes.End
		if json.Unmarshal(f.Data, &e) == nil && e.Reason == reasonSlowViewer {
			return relaySlow, true
		}
		r.buf = appendEvent(r.buf, f)
		return relayFinal, true
	case proto.AttachNotice:
		r.buf = appendEvent(r.buf, f)
		return relayFinal, true
	}
	r.buf = appendEvent(r.buf, f)
	return 0, false
}

// streamSlots counts the open streams of one kind, each principal's and
// all of them (issue 18 capped attaches; issue 35 the change streams).
type streamSlots struct {
	mu    sync.Mutex
	open  map[string]int
	total int
}

// acquire takes one of principal's max slots and, when total is not zero,
// one of total; release gives them back (twice is once). ok is false when
// either is full; held is then how many principal has open, or -1 when
// the total is what ran out.
func (a *streamSlots) acquire(principal string, max, total int) (release func(), held int, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.open == nil {
		a.open = map[string]int{}
	}
	if n := a.open[principal]; n >= max {
		return nil, n, false
	}
	if total > 0 && a.total >= total {
		return nil, -1, false
	}
	a.open[principal]++
	a.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			if a.open[principal]--; a.open[principal] <= 0 {
				delete(a.open, principal)
			}
			a.total--
			a.mu.Unlock()
		})
	}, 0, true
}

// openSSE answers 200 with an event stream, unbuffered by proxies, and is
// the sink its frames go to.
func openSSE(c echo.Context) responseSink {
	w := c.Response()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return responseSink{w: w, rc: http.NewResponseController(w)}
}

// responseSink is an SSE response as the relay writes it.
type responseSink struct {
	w  *echo.Response
	rc *http.ResponseController
}

func (s responseSink) Write(p []byte) (int, error) { return s.w.Write(p) }

func (s responseSink) SetWriteDeadline(t time.Time) error { return s.rc.SetWriteDeadline(t) }

func (s responseSink) Flush() error { return s.rc.Flush() }
