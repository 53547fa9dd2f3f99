package supervisor

import (
	"sync"
	"sync/atomic"

	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/registry"
)

// Stalled turns (R-ATTN-6): a running turn that has written nothing for
// its profile's stall_after gets stalled_since, which the row carries and
// the coordinator derives attention stalled from. Nothing is killed.
//
// The check is a count, not a clock read per chunk: each read of the
// child's output adds one to out (an atomic add on the reader), and a
// timer armed at the turn's start fires every stall_after; a turn whose
// count did not move over a whole period is stalled. So a stall is seen
// between stall_after and twice it after the last output.
type stall struct {
	out     atomic.Uint64
	stalled atomic.Bool // stalled_since is set; the next output clears it

	mu    sync.Mutex
	armed bool
	stop  func() bool
	ended bool
}

// wrote counts one read of the child's output; it clears a stall.
func (g *generation) wrote() {
	g.stall.out.Add(1)
	if g.stall.stalled.Load() {
		g.unstall()
	}
}

// unstall clears stalled_since.
func (g *generation) unstall() {
	if g.stall.stalled.CompareAndSwap(true, false) {
		g.r.updateAsync(ledger.Event{}, func(rec *record) { rec.StalledSince = nil })
	}
}

// armStall starts the stall check of a turn that started (a no-op while
// one is armed).
func (g *generation) armStall() {
	g.stall.mu.Lock()
	defer g.stall.mu.Unlock()
	if g.stall.armed || g.stall.ended {
		return
	}
	g.stall.armed = true
	g.stallTick(g.stall.out.Load())
}

// stallTick arms the next check: it fires after stall_after and compares
// the output count with seen. The caller holds stall.mu.
func (g *generation) stallTick(seen uint64) {
	r := g.r
	d := registry.DefaultStallAfter
	r.mu.Lock()
	ref := r.rec.ProfileRef
	r.mu.Unlock()
	if p, ok, _ := r.s.o.Registry.Profile(ref); ok {
		d = p.StallAfter()
	}
	g.stall.stop = r.s.o.stallAfter(d, func() {
		g.stall.mu.Lock()
		defer g.stall.mu.Unlock()
		if g.stall.ended {
			return
		}
		r.mu.Lock()
		pending := r.pendingLocked()
		r.mu.Unlock()
		if !g.sess.TurnActive() {
			g.stall.armed = false
			g.unstall()
			return
		}
		now := g.stall.out.Load()
		if now == seen && pending == 0 && g.stall.stalled.CompareAndSwap(false, true) {
			at := r.s.o.now().UTC()
			r.updateAsync(ledger.Event{}, func(rec *record) { rec.StalledSince = &at })
		}
		g.stallTick(now)
	})
}

// endStall stops the check when the process ended; the exit's record
// clears stalled_since.
func (g *generation) endStall() {
	g.stall.mu.Lock()
	defer g.stall.mu.Unlock()
	g.stall.ended = true
	if g.stall.stop != nil {
		g.stall.stop()
	}
}
