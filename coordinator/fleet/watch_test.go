package fleet

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/olivares-dev/olivares/shared/tunnel"
)

// quietSession is a tunnel session whose only behaviour is being closed and
// saying when it last received bytes; the watchdog needs nothing else.
type quietSession struct {
	tunnel.Session
	done     chan struct{}
	once     sync.Once
	sending  atomic.Bool // while set, bytes are arriving now
	received atomic.Int64
}

func (s *quietSession) Done() <-chan struct{} { return s.done }
func (s *quietSession) Close() error          { s.once.Do(func() { close(s.done) }); return nil }
func (s *quietSession) LastReceived() time.Time {
	if s.sending.Load() {
		s.received.Store(time.Now().UnixNano())
	}
	if n := s.received.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

func closed(s *quietSession) bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// A node is dropped after 3 heartbeats of silence, and only then: bytes of
// any stream count as life, so a tunnel busy with output whose heartbeat
// queues behind it is kept (R-TUN-4).
func TestWatchDropsOnlyASilentNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hb = time.Second
		f := New(Options{Heartbeat: hb})
		defer f.Close()
		// Two nodes, one watchdog: the other keeps its heartbeats.
		s, alive := &quietSession{done: make(chan struct{})}, &quietSession{done: make(chan struct{})}
		l, la := &link{nodeID: "node-1", sess: s}, &link{nodeID: "node-2", sess: alive}
		l.lastBeat.Store(time.Now().UnixNano())
		la.lastBeat.Store(time.Now().UnixNano())
		f.links[l.nodeID], f.links[la.nodeID] = l, la
		s.sending.Store(true)
		alive.sending.Store(true)
		go f.watch()

		// No heartbeat for 10 intervals, but bytes arriving all along.
		time.Sleep(10 * hb)
		synctest.Wait()
		if closed(s) {
			t.Fatal("a node whose tunnel kept receiving bytes was dropped for missing heartbeats")
		}

		// Then nothing at all: dropped after 3 intervals, not before.
		s.sending.Store(false)
		s.LastReceived()
		time.Sleep(3*hb - hb/4)
		synctest.Wait()
		if closed(s) {
			t.Fatal("dropped before 3 heartbeats of silence")
		}
		time.Sleep(hb)
		synctest.Wait()
		if !closed(s) {
			t.Fatal("a node silent for more than 3 heartbeats was kept")
		}
		if closed(alive) {
			t.Fatal("the watchdog closed a node that was not silent")
		}
	})
}
