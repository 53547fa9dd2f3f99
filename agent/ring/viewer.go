package ring

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// EventKind tells which field of an Event is set.
type EventKind uint8

// Event kinds a Viewer yields; the SSE layer maps them to output, lag and
// notice/end (R-ATT-1, R-ATT-4).
const (
	EventFrame EventKind = iota + 1
	EventLag
	EventEnd
)

func (k EventKind) String() string {
	switch k {
	case EventFrame:
		return "frame"
	case EventLag:
		return "lag"
	case EventEnd:
		return "end"
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Lag says the frames RequestedFrom..ResumedFrom-1 were evicted before the
// viewer read them; the next frame is ResumedFrom (R-RC-5, R-RC-7).
type Lag struct {
	RequestedFrom uint64
	ResumedFrom   uint64
}

// End closes a viewer's stream: the run was ended with Reason (every frame
// committed before the End was delivered first), or the viewer was dropped
// with ReasonSlowViewer after the frames already queued for it.
type End struct {
	Reason string
}

// Event is one item of a viewer's stream.
type Event struct {
	Kind  EventKind
	Frame Frame // EventFrame
	Lag   Lag   // EventLag
	End   End   // EventEnd
}

const (
	replayFrames = 64
	replayBytes  = 256 << 10
)

// Viewer is one attach's cursor. It replays retained frames from the disk
// until it reaches the last committed seq, then switches (under the ring's
// lock, so nothing is missed or repeated) to a bounded queue fed by the
// committer. Next is for one goroutine at a time; Close may be called from
// any.
type Viewer struct {
	r      *Ring
	closed atomic.Bool
	ch     chan *Frame
	endCh  chan struct{} // closed by finishLocked; no send on ch follows

	// guarded by r.mu; read without it only after endCh is closed
	finished bool
	reason   string
	err      error

	// owned by the Next caller
	next   uint64 // seq of the next frame to yield; 0: the oldest retained
	oldest bool   // from was 0: no Lag before the first frame
	live   bool
	done   bool
	buf    []Frame
	bi     int
	held   *Frame // a frame to yield after the Lag that precedes it
}

// Subscribe returns a viewer that yields the retained frames from seq
// from on, then the live ones. from 0 means the oldest retained frame
// (R-ATT-5) and never yields a Lag at the start; any from below the oldest
// retained frame yields Lag{from, oldest} first (R-RC-5), including from 1
// after eviction. A from above the last seq waits for that seq. queue is
// the number of committed frames the viewer may have waiting before it is
// dropped with ReasonSlowViewer; when <= 0, DefaultViewerQueue. On a ring
// that is not Live the viewer replays and then yields End (R-ATT-6).
func (r *Ring) Subscribe(from uint64, queue int) *Viewer {
	if queue <= 0 {
		queue = DefaultViewerQueue
	}
	v := &Viewer{r: r, ch: make(chan *Frame, queue), endCh: make(chan struct{}), next: from, oldest: from == 0}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.goneLocked() == nil && !r.st.ended {
		v.tryLiveLocked() // a viewer with nothing to replay queues from now on
	}
	return v
}

// resolveLocked turns from 0 into the oldest retained seq.
func (v *Viewer) resolveLocked() {
	if v.next != 0 {
		return
	}
	st := &v.r.st
	v.next = st.next
	if st.frames > 0 {
		v.next = st.first
	}
}

// tryLiveLocked resolves from 0 and, when the cursor is past the last
// committed frame, registers the viewer for live frames. Frames are
// published under the same lock, so the switch misses and repeats nothing.
func (v *Viewer) tryLiveLocked() bool {
	st := &v.r.st
	v.resolveLocked()
	if st.frames > 0 && v.next <= st.last {
		return false
	}
	v.r.viewers[v] = struct{}{}
	v.live = true
	return true
}

// Close detaches the viewer; its Next returns ErrViewerClosed.
func (v *Viewer) Close() {
	v.closed.Store(true)
	v.r.mu.Lock()
	defer v.r.mu.Unlock()
	delete(v.r.viewers, v)
	v.finishLocked("", ErrViewerClosed)
}

func (v *Viewer) finishLocked(reason string, err error) {
	if v.finished {
		return
	}
	v.finished, v.reason, v.err = true, reason, err
	close(v.endCh)
}

// Next returns the viewer's next event. After an EventEnd it returns
// io.EOF. It returns ctx's error when ctx is done first, ErrClosed when the
// store closes (the stream ends without End, R-RC-8), ErrDeleted when the
// ring is deleted, and ErrViewerClosed after Close.
func (v *Viewer) Next(ctx context.Context) (Event, error) {
	for {
		if v.closed.Load() {
			return Event{}, ErrViewerClosed
		}
		if f := v.held; f != nil {
			v.held = nil
			v.next = f.Seq + 1
			return Event{Kind: EventFrame, Frame: *f}, nil
		}
		if v.bi < len(v.buf) {
			f := v.buf[v.bi]
			v.buf[v.bi] = Frame{}
			v.bi++
			v.next = f.Seq + 1
			return Event{Kind: EventFrame, Frame: f}, nil
		}
		if v.done {
			return Event{}, io.EOF
		}
		if err := ctx.Err(); err != nil {
			return Event{}, err
		}
		if !v.live {
			ev, ok, err := v.replay(ctx)
			if err != nil {
				return Event{}, err
			}
			if ok {
				return ev, nil
			}
			continue
		}
		var f *Frame
		select {
		case f = <-v.ch:
		default:
			select {
			case f = <-v.ch:
			case <-v.endCh:
				if v.err != nil {
					return Event{}, v.err
				}
				select { // frames queued before the end come first
				case f = <-v.ch:
				default:
					v.done = true
					return Event{Kind: EventEnd, End: End{Reason: v.reason}}, nil
				}
			case <-ctx.Done():
				return Event{}, ctx.Err()
			}
		}
		if ev, ok := v.accept(f); ok {
			return ev, nil
		}
	}
}

// accept turns a queued frame into an event: frames below the cursor (a
// from in the future) are skipped, a jump means eviction.
func (v *Viewer) accept(f *Frame) (Event, bool) {
	switch {
	case f.Seq < v.next:
		return Event{}, false
	case f.Seq > v.next:
		lag := Lag{RequestedFrom: v.next, ResumedFrom: f.Seq}
		v.held, v.next = f, f.Seq
		return Event{Kind: EventLag, Lag: lag}, true
	}
	v.next = f.Seq + 1
	return Event{Kind: EventFrame, Frame: *f}, true
}

// replay reads the next chunk of retained frames, or, once the cursor is
// past the last committed frame, ends the viewer (ring not live) or
// switches it to live tailing. ok reports an event to return.
func (v *Viewer) replay(ctx context.Context) (Event, bool, error) {
	r := v.r
	r.mu.Lock()
	if v.finished {
		err := v.err
		r.mu.Unlock()
		return Event{}, false, err
	}
	if err := r.goneLocked(); err != nil {
		r.mu.Unlock()
		return Event{}, false, err
	}
	st, pubs := r.st, r.pubs
	v.resolveLocked()
	if st.ended && (st.frames == 0 || v.next > st.last) {
		r.mu.Unlock()
		v.done = true // replayed everything of a run that is not live (R-ATT-6)
		return Event{Kind: EventEnd, End: End{Reason: st.reason}}, true, nil
	}
	if !st.ended && v.tryLiveLocked() {
		r.mu.Unlock()
		return Event{}, false, nil
	}
	r.mu.Unlock()

	first, err := v.read(st.last)
	if err != nil {
		if errors.Is(err, bolterrors.ErrDatabaseNotOpen) || r.s.closing.Load() {
			return Event{}, false, ErrClosed
		}
		if r.deleted.Load() {
			return Event{}, false, ErrDeleted
		}
		return Event{}, false, err
	}
	if len(v.buf) == 0 {
		// A commit not published yet evicted everything up to st.last: wait
		// for its publish rather than announce a Lag with no frame behind it.
		r.mu.Lock()
		ch := r.publishedLocked(pubs)
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return Event{}, false, ctx.Err()
		}
		return Event{}, false, nil
	}
	if v.oldest {
		v.oldest = false
		v.next = max(v.next, first) // "the oldest" is whatever is oldest now
	}
	if first > v.next { // evicted while the viewer was away (R-RC-5); v.buf[0] is first
		lag := Lag{RequestedFrom: v.next, ResumedFrom: first}
		v.next = first
		return Event{Kind: EventLag, Lag: lag}, true, nil
	}
	return Event{}, false, nil
}

// read loads one chunk of frames from v.next through last into v.buf and
// returns the first seq found at or after v.next (which may be past last).
func (v *Viewer) read(last uint64) (uint64, error) {
	v.buf, v.bi = v.buf[:0], 0
	var first uint64
	err := v.r.s.db.View(func(tx *bbolt.Tx) error {
		var fb *bbolt.Bucket
		if rb := tx.Bucket(rootBucket).Bucket(v.r.key); rb != nil {
			fb = rb.Bucket(framesBucket)
		}
		if fb == nil {
			return ErrDeleted
		}
		c := fb.Cursor()
		size := 0
		for k, val := c.Seek(seqKey(v.next)); k != nil; k, val = c.Next() {
			seq, err := keySeq(k)
			if err != nil {
				return err
			}
			if first == 0 {
				first = seq
			}
			if seq > last {
				break
			}
			f, err := decodeFrame(seq, val)
			if err != nil {
				return err
			}
			v.buf = append(v.buf, f)
			if size += len(f.Data); len(v.buf) >= replayFrames || size >= replayBytes {
				break
			}
		}
		if first == 0 {
			return fmt.Errorf("%w: frames %d..%d missing", ErrCorrupt, v.next, last)
		}
		return nil
	})
	return first, err
}
