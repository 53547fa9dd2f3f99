package ring

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	bbolt "go.etcd.io/bbolt"
)

// Stream says which of the child's outputs a frame came from.
type Stream uint8

// The streams a runner produces: ProcRunner gives Stdout and Stderr kept
// apart, PTYRunner gives PTY (stdin/stdout on the terminal) and Stderr.
const (
	Stdout Stream = 1
	Stderr Stream = 2
	PTY    Stream = 3
	// Notice is not the child's output: the agent's own notice at its
	// place in the output, e.g. that a replayed history was withheld
	// (R-HW-3, R-HW-4). Its data is a JSON object.
	Notice Stream = 4
	// Request is not the child's output either: a request the tool asked
	// a person, or its settlement, at its place in the output (R-REQ-4).
	// Its data is the request's JSON (apitypes.RunRequest).
	Request Stream = 5
	// Input is not the child's output either: one input a person sent,
	// at its place in the conversation, with who sent it (R-ATT-11). Its
	// data is the input's JSON (apitypes.InputFrame).
	Input Stream = 6
	// Setup is the output (stdout and stderr together) of the workspace's
	// setup command, run before the tool of a worktree run (R-SETUP-2).
	Setup Stream = 7
)

// String returns the wire name used by attach (R-ATT-4).
func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	case PTY:
		return "pty"
	case Notice:
		return "notice"
	case Request:
		return "request"
	case Input:
		return "input"
	case Setup:
		return "setup"
	}
	return fmt.Sprintf("stream(%d)", uint8(s))
}

func (s Stream) valid() bool { return s >= Stdout && s <= Setup }

// Frame is one chunk of output. Seq is strictly increasing per run across
// generations and agent restarts, never reused once a viewer could see it
// (R-RC-6). A Frame handed out by a Viewer is shared with other viewers:
// Data must not be modified.
type Frame struct {
	Seq        uint64
	Generation uint32
	Stream     Stream
	At         time.Time // UTC, taken when Append was called
	Data       []byte    // 1..MaxFrameData bytes
}

// Limits and defaults.
const (
	// MaxFrameData bounds one frame. Append splits larger writes into
	// consecutive frames of at most this size: 64 KiB is one full pipe
	// buffer on Linux, so a normal read never splits, and one frame stays a
	// modest SSE event.
	MaxFrameData = 64 << 10

	DefaultMaxBytes    = 8 << 20 // R-RC-7
	DefaultMaxFrames   = 65536   // R-RC-7
	DefaultFlushFrames = 256
	DefaultFlushBytes  = 1 << 20
	DefaultViewerQueue = 1024

	// MaxRunRefLen bounds a run reference (it is a bbolt key).
	MaxRunRefLen = 512

	// backpressureBatches: Append waits once a ring holds this many full
	// batches that are not committed yet.
	backpressureBatches = 4
)

// End reasons set by this package. Reasons passed to Ring.End are the
// caller's (e.g. "exited", "process_lost").
const (
	// ReasonSlowViewer: the viewer's queue overflowed and it was dropped;
	// it may reconnect with from = last seq received + 1 (R-RC-1).
	ReasonSlowViewer = "slow_viewer"
	// ReasonEnded is used when Ring.End is given an empty reason.
	ReasonEnded = "ended"
)

// Options tune a Store. The zero value is the production configuration.
type Options struct {
	// MaxBytes bounds the Data bytes retained per run; the oldest frames
	// are evicted beyond it, in the transaction that commits the new ones.
	// The newest frame is always kept. When zero, 8 MiB (R-RC-7).
	MaxBytes int64
	// MaxFrames bounds the frames retained per run, like MaxBytes; the
	// first bound reached wins. When zero, 65,536 (R-RC-7).
	MaxFrames int64
	// FlushFrames caps the frames one run contributes to one transaction.
	// When zero, 256.
	FlushFrames int
	// FlushBytes caps the Data bytes one run contributes to one
	// transaction (a single larger frame still goes alone). When zero,
	// 1 MiB: measured on this kind of disk, a bbolt commit of 1 MiB costs
	// about twice an append of the same bytes with fdatasync, while one of
	// 16 KiB costs the whole fsync for very little data.
	//
	// There is no coalescing timer: a frame that finds the committer idle
	// is committed at once, and frames that arrive while a transaction
	// commits wait for the next one, so a busy run's batches grow to these
	// caps by themselves and a lone echo waits for one commit, not a window.
	FlushBytes int
	// Now stamps Frame.At. When nil, time.Now.
	Now func() time.Time
	// Metrics registers the ring's metrics (R-OBS-8): commit and fsync
	// latency, frames and bytes appended, frames evicted. When nil, they
	// are kept but not exported.
	Metrics prometheus.Registerer

	// beforeCommit, when set (tests), runs in the committer before each
	// transaction: a place to stall the disk.
	beforeCommit func()
}

// CheckAndSetDefaults fills zero fields with their defaults and names the
// first field that is out of range.
func (o *Options) CheckAndSetDefaults() error {
	switch {
	case o.MaxBytes < 0:
		return fmt.Errorf("%w: MaxBytes %d is negative", ErrBadOptions, o.MaxBytes)
	case o.MaxFrames < 0:
		return fmt.Errorf("%w: MaxFrames %d is negative", ErrBadOptions, o.MaxFrames)
	case o.FlushFrames < 0:
		return fmt.Errorf("%w: FlushFrames %d is negative", ErrBadOptions, o.FlushFrames)
	case o.FlushBytes < 0:
		return fmt.Errorf("%w: FlushBytes %d is negative", ErrBadOptions, o.FlushBytes)
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxFrames == 0 {
		o.MaxFrames = DefaultMaxFrames
	}
	if o.FlushFrames == 0 {
		o.FlushFrames = DefaultFlushFrames
	}
	if o.FlushBytes == 0 {
		o.FlushBytes = DefaultFlushBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Store holds the rings of every run in one bbolt file and runs the single
// committer goroutine that group-commits all of them.
type Store struct {
	db   *bbolt.DB
	opts Options

	closing atomic.Bool // set (under mu) before stop is closed

	mu    sync.Mutex // guards rings; may be held while taking a Ring's mu
	rings map[string]*Ring

	dirtyMu sync.Mutex // guards dirty; never held while taking a Ring's mu
	dirty   []*Ring    // rings with uncollected ops

	errMu     sync.Mutex
	commitErr error // last commit failure, nil after a success

	wake chan struct{} // cap 1: some ring has uncollected ops
	stop chan struct{} // closed by Close
	done chan struct{} // closed when the committer returns

	closeOnce sync.Once
	closeErr  error // written by the committer before done is closed

	m *metrics
}

// Open starts a Store on db, creating its bucket. The caller keeps owning
// db and closes it after Store.Close.
func Open(db *bbolt.DB, o Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("ring: nil db")
	}
	if err := o.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	err := db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(rootBucket)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ring: create bucket: %w", err)
	}
	s := &Store{
		db:    db,
		opts:  o,
		rings: make(map[string]*Ring),
		wake:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
		m:     newMetrics(o.Metrics),
	}
	go s.commitLoop()
	return s, nil
}

func checkRef(ref string) error {
	if ref == "" || len(ref) > MaxRunRefLen {
		return ErrBadRunRef
	}
	return nil
}

// Ring opens the ring of runRef, loading its retained range and next seq
// from disk, or creates it (nothing is written until the first Append).
// Every call for one run returns the same *Ring.
func (s *Store) Ring(runRef string) (*Ring, error) {
	if err := checkRef(runRef); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return nil, ErrClosed
	}
	if r := s.rings[runRef]; r != nil {
		return r, nil
	}
	st, err := s.load(runRef)
	if err != nil {
		return nil, err
	}
	r := &Ring{s: s, ref: runRef, key: []byte(runRef), nextSeq: st.next, st: st,
		viewers: make(map[*Viewer]struct{})}
	r.room = sync.NewCond(&r.mu)
	s.rings[runRef] = r
	return r, nil
}

func (s *Store) load(ref string) (state, error) {
	st := state{next: 1}
	err := s.db.View(func(tx *bbolt.Tx) error {
		rb := tx.Bucket(rootBucket).Bucket([]byte(ref))
		if rb == nil {
			return nil
		}
		if v := rb.Get(metaKey); v != nil {
			m, err := decodeMeta(v)
			if err != nil {
				return err
			}
			st.next, st.frames, st.bytes, st.ended, st.reason = m.next, m.frames, m.bytes, m.ended, m.reason
		}
		if v := rb.Get(marksKey); v != nil {
			m, err := decodeMarks(v)
			if err != nil {
				return err
			}
			st.marks = m
		}
		fb := rb.Bucket(framesBucket)
		if fb == nil {
			return nil
		}
		c := fb.Cursor()
		k, _ := c.First()
		if k == nil {
			st.frames, st.bytes = 0, 0
			return nil
		}
		first, err := keySeq(k)
		if err != nil {
			return err
		}
		k, _ = c.Last()
		last, err := keySeq(k)
		if err != nil {
			return err
		}
		st.first, st.last = first, last
		if st.next <= last { // never hand out a stored seq again (R-RC-6)
			st.next = last + 1
		}
		return nil
	})
	if err != nil {
		return state{}, fmt.Errorf("ring: load %q: %w", ref, err)
	}
	return st, nil
}

// Runs lists the run refs that have a ring on disk.
func (s *Store) Runs() ([]string, error) {
	var refs []string
	err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(rootBucket).ForEachBucket(func(k []byte) error {
			refs = append(refs, string(k))
			return nil
		})
	})
	return refs, err
}

// Delete removes runRef's ring from disk. Pending frames are discarded,
// blocked Appends and waiting Ends return ErrDeleted, and viewers' Next
// returns ErrDeleted. Deleting a run without a ring is not an error.
func (s *Store) Delete(runRef string) error {
	if err := checkRef(runRef); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock() // held so a concurrent Ring(runRef) cannot load what is being deleted
	if s.closing.Load() {
		return ErrClosed
	}
	if r := s.rings[runRef]; r != nil {
		delete(s.rings, runRef)
		r.mu.Lock()
		r.deleted.Store(true) // read by the committer inside its transaction
		r.failLocked(ErrDeleted)
		r.mu.Unlock()
	}
	// bbolt runs one writer at a time: a commit that started before the
	// flag was set finishes before this one, and any later one skips r.
	return s.db.Update(func(tx *bbolt.Tx) error {
		root := tx.Bucket(rootBucket)
		if root.Bucket([]byte(runRef)) == nil {
			return nil
		}
		return root.DeleteBucket([]byte(runRef))
	})
}

// Close commits every pending frame and End, stops the committer, and ends
// every viewer with ErrClosed. It does not close the bbolt DB. It returns
// the error of the final commit, if that failed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing.Store(true)
		s.mu.Unlock()
		close(s.stop)
		<-s.done
		err := s.closeErr
		if err == nil {
			err = ErrClosed
		}
		s.mu.Lock()
		for _, r := range s.rings {
			r.mu.Lock()
			r.failLocked(err)
			r.mu.Unlock()
		}
		s.mu.Unlock()
	})
	return s.closeErr
}

func (s *Store) commitError() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.commitErr
}

func (s *Store) setCommitError(err error) {
	s.errMu.Lock()
	s.commitErr = err
	s.errMu.Unlock()
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// state is a ring's committed state: what is on disk and what viewers may
// see. Only the committer changes it, under the ring's mu.
type state struct {
	next        uint64 // next seq after the last committed frame
	first, last uint64 // retained range; meaningful when frames > 0
	frames      int64
	bytes       int64
	ended       bool
	reason      string
	marks       marks
}

type opKind uint8

const (
	opFrame opKind = iota
	opEnd
	opFlush
	opReopen
)

// op is one entry of a ring's pending queue, committed in order.
type op struct {
	kind   opKind
	f      *Frame     // opFrame
	mark   uint64     // opFrame: the source mark committed with it, 0 for none
	enc    []byte     // opFrame: the stored record; f.Data aliases its tail
	reason string     // opEnd
	done   chan error // opEnd, opFlush, opReopen: cap 1, receives exactly one value
}

// Ring is one run's output. Append, End and Flush may be called from any
// goroutine; Append calls from one goroutine keep their order.
type Ring struct {
	s       *Store
	ref     string
	key     []byte
	deleted atomic.Bool

	mu   sync.Mutex
	room *sync.Cond // Appends waiting for backpressure to clear

	nextSeq        uint64 // next seq to assign
	pending        []op   // not yet committed; pending[:inflight] is in the committer's hands
	pendingFrames  int
	pendingBytes   int
	inflight       int
	inflightFrames int
	inflightBytes  int
	queued         bool // in Store.dirty
	failed         error

	st      state
	viewers map[*Viewer]struct{} // viewers tailing live (past their replay)
	pubs    uint64               // publishes so far
	pubCh   chan struct{}        // closed at the next publish; nil when nobody waits
}

// publishedLocked returns a channel closed at the first publish after the
// pubs-th one (at once if that happened already).
func (r *Ring) publishedLocked(pubs uint64) <-chan struct{} {
	if r.pubs != pubs || r.failed != nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	if r.pubCh == nil {
		r.pubCh = make(chan struct{})
	}
	return r.pubCh
}

func (r *Ring) notifyPublishLocked() {
	r.pubs++
	if r.pubCh != nil {
		close(r.pubCh)
		r.pubCh = nil
	}
}

// Ref returns the run reference.
func (r *Ring) Ref() string { return r.ref }

// Append stores data as one or more frames (split at MaxFrameData) and
// returns the seq of the last one. data is copied; empty data appends
// nothing and returns 0. The frames reach viewers once committed.
//
// Append never waits for a viewer. It waits only when the run already has
// four full batches (by default 1,024 frames or 4 MiB) that the disk has not
// committed yet, i.e. when the child writes faster than the disk: that
// slows the child's pipe to disk speed and bounds memory. If commits are
// failing at that point it returns ErrCommit instead of waiting. It returns
// ErrClosed or ErrDeleted once the store or ring is gone; on an error the
// seq of the last frame already appended (or 0) is returned with it.
//
// Appending to an ended ring makes it live again (a resume's new
// generation, R-RC-3).
func (r *Ring) Append(gen uint32, s Stream, data []byte) (uint64, error) {
	return r.AppendMark(gen, s, data, 0)
}

// AppendMark is Append that also commits mark, the source's number of the
// bytes (a holder's record), with the last frame: Mark returns it once
// committed. A mark of 0 is none.
func (r *Ring) AppendMark(gen uint32, s Stream, data []byte, mark uint64) (uint64, error) {
	if !s.valid() {
		return 0, ErrBadStream
	}
	var seq uint64
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(data) > 0 {
		if err := r.waitRoomLocked(); err != nil {
			return seq, err
		}
		n := min(len(data), MaxFrameData)
		// One copy of the bytes: the record as it is stored, whose tail
		// is the frame's Data that viewers share.
		f := &Frame{Seq: r.nextSeq, Generation: gen, Stream: s, At: r.s.opts.Now().UTC()}
		enc := encodeFrame(f, data[:n])
		f.Data = enc[frameHeaderLen:]
		r.nextSeq++
		o := op{kind: opFrame, f: f, enc: enc}
		if n == len(data) {
			o.mark = mark
		}
		r.enqueueLocked(o)
		seq = f.Seq
		data = data[n:]
	}
	return seq, nil
}

// waitRoomLocked implements Append's bounded backpressure.
func (r *Ring) waitRoomLocked() error {
	for {
		if err := r.goneLocked(); err != nil {
			return err
		}
		o := &r.s.opts
		if r.pendingFrames < backpressureBatches*o.FlushFrames && r.pendingBytes < backpressureBatches*o.FlushBytes {
			return nil
		}
		if err := r.s.commitError(); err != nil {
			return fmt.Errorf("%w: %w", ErrCommit, err)
		}
		r.room.Wait()
	}
}

func (r *Ring) goneLocked() error {
	switch {
	case r.failed != nil:
		return r.failed
	case r.s.closing.Load():
		return ErrClosed
	}
	return nil
}

func (r *Ring) enqueueLocked(o op) {
	s := r.s
	r.pending = append(r.pending, o)
	if o.kind == opFrame {
		r.pendingFrames++
		r.pendingBytes += len(o.f.Data)
	}
	if !r.queued {
		r.queued = true
		s.dirtyMu.Lock()
		s.dirty = append(s.dirty, r)
		s.dirtyMu.Unlock()
		signal(s.wake)
	}
}

// End marks the run not live once every frame appended before it is
// committed: live viewers receive their remaining frames and then
// End{reason}; later Subscribes replay and then end (R-ATT-6, R-RC-9). The
// end state is persisted, so it survives an agent restart. End returns
// after the commit (while commits are failing it waits for the retry, at
// most until Close); the error is that of a store closed or ring deleted
// meanwhile, or of the final commit at Close. An empty reason becomes
// ReasonEnded.
func (r *Ring) End(reason string) error {
	if reason == "" {
		reason = ReasonEnded
	}
	return r.barrier(op{kind: opEnd, reason: reason})
}

// Reopen makes an ended ring live again before its next frame: a resume's
// new generation is live from its spawn, not from its first output, so a
// viewer that subscribes in between tails it instead of ending (R-RC-3).
// It returns after the commit; on a live ring it changes nothing.
func (r *Ring) Reopen() error { return r.barrier(op{kind: opReopen}) }

// Flush returns once every frame appended before the call is committed.
func (r *Ring) Flush() error { return r.barrier(op{kind: opFlush}) }

func (r *Ring) barrier(o op) error {
	o.done = make(chan error, 1)
	r.mu.Lock()
	if err := r.goneLocked(); err != nil {
		r.mu.Unlock()
		return err
	}
	r.enqueueLocked(o)
	r.mu.Unlock()
	return <-o.done
}

// failLocked ends the ring's in-memory life: pending ops are dropped (their
// waiters get err), blocked Appends wake and return err, viewers get err.
func (r *Ring) failLocked(err error) {
	if r.failed != nil {
		return
	}
	r.failed = err
	for _, o := range r.pending {
		if o.done != nil {
			o.done <- err
		}
	}
	r.pending = nil
	r.pendingFrames, r.pendingBytes = 0, 0
	r.inflight, r.inflightFrames, r.inflightBytes = 0, 0, 0
	for v := range r.viewers {
		v.finishLocked("", err)
	}
	clear(r.viewers)
	r.notifyPublishLocked()
	r.room.Broadcast()
}

// Range returns the first and last retained (committed) seq, or 0, 0 when
// the ring holds no frame.
func (r *Ring) Range() (first, last uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.st.frames == 0 {
		return 0, 0
	}
	return r.st.first, r.st.last
}

// Bytes returns the Data bytes retained on disk.
func (r *Ring) Bytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.bytes
}

// Frames returns the number of frames retained on disk.
func (r *Ring) Frames() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.frames
}

// Mark returns the last mark committed for stream s of generation gen
// (AppendMark), 0 when none: it survives a restart of the agent.
func (r *Ring) Mark(gen uint32, s Stream) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.st.marks.gen != gen || !s.valid() {
		return 0
	}
	return r.st.marks.m[s]
}

// Live reports whether the ring is open for live tailing: true until an
// End is committed (in this process or before a restart) and again after a
// later Append. A ring reopened after an agent restart whose run was never
// ended stays Live until the caller decides: the supervisor that finds the
// process gone calls End("process_lost") (R-STATE-6, R-RC-2).
func (r *Ring) Live() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.st.ended
}

// EndReason returns the reason of the committed End, or "" while Live.
func (r *Ring) EndReason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.reason
}
