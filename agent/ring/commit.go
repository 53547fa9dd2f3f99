package ring

import (
	"time"

	bbolt "go.etcd.io/bbolt"
)

// batch is one ring's share of a group commit: a snapshot of the head of
// its pending queue and the state before and after it.
type batch struct {
	r      *Ring
	ops    []op
	frames int
	bytes  int
	base   state
	res    state // computed inside the transaction
	skip   bool  // the ring was deleted before the transaction ran
	// evicted counts the frames this transaction evicted (R-RC-7).
	evicted int
}

const (
	minRetry = 10 * time.Millisecond
	maxRetry = time.Second
)

// commitLoop is the Store's one writer. Each round it takes the head of
// every dirty ring's queue, commits all of them in one bbolt transaction,
// and only then publishes the frames to viewers. There is no timer: a frame
// that finds the store idle is committed at once (a lone echo waits for one
// commit), and whatever arrives while a transaction commits goes into the
// next one, so batches grow with the load by themselves. It returns after
// Close, once everything appended before Close is committed.
func (s *Store) commitLoop() {
	defer close(s.done)
	var retry time.Duration
	stopping, sealed := false, false
	for {
		if !stopping {
			select {
			case <-s.wake:
			case <-s.stop:
				stopping = true
			}
		}
		for {
			bs := s.collect()
			if len(bs) == 0 {
				if stopping {
					if !sealed {
						s.seal()
						sealed = true
						continue
					}
					return
				}
				break
			}
			if h := s.opts.beforeCommit; h != nil {
				h()
			}
			err := s.commit(bs)
			if err == nil {
				retry = 0
				s.setCommitError(nil)
				s.publish(bs)
				continue
			}
			s.setCommitError(err)
			s.requeue(bs)
			if stopping {
				s.closeErr = err // Close fails what is left
				return
			}
			retry = min(max(2*retry, minRetry), maxRetry)
			t := time.NewTimer(retry)
			select {
			case <-t.C:
			case <-s.stop:
				stopping = true
			}
			t.Stop()
		}
	}
}

// seal waits out every Append that checked closing before Close set it:
// after taking each ring's mu once, no new op can be enqueued.
func (s *Store) seal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rings {
		r.mu.Lock()
		r.room.Broadcast() // blocked Appends see closing and return ErrClosed
		r.mu.Unlock()
	}
}

// collect snapshots the head of every dirty ring's queue, at most
// FlushFrames frames / FlushBytes bytes per ring.
func (s *Store) collect() []*batch {
	s.dirtyMu.Lock()
	rings := s.dirty
	s.dirty = nil
	s.dirtyMu.Unlock()
	var out []*batch
	o := &s.opts
	for _, r := range rings {
		r.mu.Lock()
		r.queued = false
		if r.failed != nil || len(r.pending) == 0 {
			r.mu.Unlock()
			continue
		}
		b := &batch{r: r, base: r.st}
		n := 0
		for ; n < len(r.pending); n++ {
			p := r.pending[n]
			if p.kind != opFrame {
				continue
			}
			l := len(p.f.Data)
			if b.frames > 0 && (b.frames >= o.FlushFrames || b.bytes+l > o.FlushBytes) {
				break
			}
			b.frames++
			b.bytes += l
		}
		b.ops = append([]op(nil), r.pending[:n]...)
		r.inflight, r.inflightFrames, r.inflightBytes = n, b.frames, b.bytes
		if n < len(r.pending) { // capped: the rest is a full batch already
			r.queued = true
			s.dirtyMu.Lock()
			s.dirty = append(s.dirty, r)
			s.dirtyMu.Unlock()
		}
		r.mu.Unlock()
		out = append(out, b)
	}
	return out
}

// commit writes the batches in one transaction and, once it committed,
// observes it (R-OBS-8): once per transaction, never per frame.
func (s *Store) commit(bs []*batch) error {
	start := time.Now()
	return s.db.Update(func(tx *bbolt.Tx) error {
		tx.OnCommit(func() {
			// bbolt's write time: the pages, the meta page and both
			// fdatasyncs of this commit.
			st := tx.Stats()
			s.m.observe(bs, time.Since(start), st.GetWriteTime())
		})
		root, err := tx.CreateBucketIfNotExists(rootBucket)
		if err != nil {
			return err
		}
		for _, b := range bs {
			b.skip = b.r.deleted.Load()
			if b.skip {
				continue
			}
			if err := b.write(root, &s.opts); err != nil {
				return err
			}
		}
		return nil
	})
}

// write stores the batch's frames, evicts beyond the caps and writes meta,
// all inside the caller's transaction. It changes nothing in memory.
func (b *batch) write(root *bbolt.Bucket, o *Options) error {
	rb, err := root.CreateBucketIfNotExists(b.r.key)
	if err != nil {
		return err
	}
	fb, err := rb.CreateBucketIfNotExists(framesBucket)
	if err != nil {
		return err
	}
	// Keys only ever grow at the end, so split pages can be packed full.
	fb.FillPercent = 1.0
	st := b.base
	for _, p := range b.ops {
		switch p.kind {
		case opEnd:
			st.ended, st.reason = true, p.reason
		case opReopen:
			st.ended, st.reason = false, ""
		case opFrame:
			f := p.f
			if err := fb.Put(seqKey(f.Seq), p.enc); err != nil {
				return err
			}
			if st.frames == 0 {
				st.first = f.Seq
			}
			st.last, st.next = f.Seq, f.Seq+1
			st.frames++
			st.bytes += int64(len(f.Data))
			st.ended, st.reason = false, ""
			if p.mark != 0 {
				if st.marks.gen != f.Generation {
					st.marks = marks{gen: f.Generation}
				}
				st.marks.m[f.Stream] = p.mark
			}
		}
	}
	// R-RC-7: evict the oldest frames beyond MaxFrames / MaxBytes, keeping
	// the newest, in the transaction that added the new ones.
	b.evicted = 0 // a retried transaction counts again
	if st.frames > 1 && (st.frames > o.MaxFrames || st.bytes > o.MaxBytes) {
		c := fb.Cursor()
		for st.frames > 1 && (st.frames > o.MaxFrames || st.bytes > o.MaxBytes) {
			k, v := c.First()
			if k == nil {
				break
			}
			st.frames--
			st.bytes -= frameDataLen(v)
			b.evicted++
			if err := c.Delete(); err != nil {
				return err
			}
		}
		k, _ := c.First()
		if st.first, err = keySeq(k); err != nil {
			return err
		}
	}
	b.res = st
	if st.marks != b.base.marks {
		if err := rb.Put(marksKey, encodeMarks(st.marks)); err != nil {
			return err
		}
	}
	return rb.Put(metaKey, encodeMeta(meta{next: st.next, frames: st.frames, bytes: st.bytes,
		ended: st.ended, reason: st.reason}))
}

// publish runs after a successful commit: it drops the committed ops from
// each ring's queue, hands the frames to live viewers (never waiting on
// one), ends viewers at an End, and wakes Appends and End/Flush waiters.
func (s *Store) publish(bs []*batch) {
	for _, b := range bs {
		r := b.r
		r.mu.Lock()
		if b.skip || r.failed != nil { // deleted: Delete already answered the waiters
			r.mu.Unlock()
			continue
		}
		n := len(b.ops)
		m := copy(r.pending, r.pending[n:])
		clear(r.pending[m:])
		r.pending = r.pending[:m]
		r.pendingFrames -= b.frames
		r.pendingBytes -= b.bytes
		r.inflight, r.inflightFrames, r.inflightBytes = 0, 0, 0
		for _, p := range b.ops {
			switch p.kind {
			case opEnd:
				for v := range r.viewers {
					v.finishLocked(p.reason, nil)
				}
				clear(r.viewers)
			case opFrame:
				if p.f.Seq < b.res.first {
					continue // evicted by this same transaction; the viewer sees a Lag
				}
				for v := range r.viewers {
					select {
					case v.ch <- p.f:
					default: // never wait for a viewer (R-TR-10)
						v.finishLocked(ReasonSlowViewer, nil)
						delete(r.viewers, v)
					}
				}
			}
		}
		r.st = b.res
		r.notifyPublishLocked()
		r.room.Broadcast()
		r.mu.Unlock()
		for _, p := range b.ops {
			if p.done != nil {
				p.done <- nil
			}
		}
	}
}

// requeue puts a failed batch back: its ops stay at the head of the queue
// and are retried.
func (s *Store) requeue(bs []*batch) {
	for _, b := range bs {
		r := b.r
		r.mu.Lock()
		if r.failed == nil {
			r.inflight, r.inflightFrames, r.inflightBytes = 0, 0, 0
			if !r.queued && len(r.pending) > 0 {
				r.queued = true
				s.dirtyMu.Lock()
				s.dirty = append(s.dirty, r)
				s.dirtyMu.Unlock()
			}
			r.room.Broadcast() // let Appends at the bound see ErrCommit
		}
		r.mu.Unlock()
	}
}
