package ring

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestNoTimerOnALoneFrame: the committer waits on no clock. A frame that
// arrives while another transaction commits goes into the very next
// transaction, which starts as soon as the first one is published: in a
// synctest bubble, where only timers move the clock, the second frame
// reaches its viewer with no time elapsed. The old 2 ms coalescing window
// showed here as 2 ms (issue 18: every lone echo waited it out).
func TestNoTimerOnALoneFrame(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	synctest.Test(t, func(t *testing.T) {
		db := openDB(t, path)
		defer db.Close()
		started := make(chan struct{}, 1)
		release := make(chan struct{})
		var commits atomic.Int32
		s, err := Open(db, Options{beforeCommit: func() {
			if commits.Add(1) == 1 {
				started <- struct{}{}
				<-release // the disk stalls on the first transaction
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		r, err := s.Ring("run_lone")
		if err != nil {
			t.Fatal(err)
		}
		v := r.Subscribe(0, 0)
		defer v.Close()
		ctx := context.Background()
		mustAppend(t, r, 1, Stdout, []byte("first"))
		<-started
		mustAppend(t, r, 1, Stdout, []byte("echo"))
		close(release)
		if ev, err := v.Next(ctx); err != nil || string(ev.Frame.Data) != "first" {
			t.Fatalf("first event: got %v %q, want frame first", err, ev.Frame.Data)
		}
		start := time.Now()
		ev, err := v.Next(ctx)
		if err != nil || string(ev.Frame.Data) != "echo" {
			t.Fatalf("second event: got %v %q, want frame echo", err, ev.Frame.Data)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the frame that arrived during a commit waited %v of the clock, want 0 (no timer)", d)
		}
		if n := commits.Load(); n != 2 {
			t.Errorf("got %d transactions, want 2", n)
		}
	})
}

// TestBatchesGrowUnderLoad: frames appended while a transaction commits
// all go into the next one (up to the caps), not one transaction each.
func TestBatchesGrowUnderLoad(t *testing.T) {
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	var commits atomic.Int32
	e := newEnv(t, Options{beforeCommit: func() {
		if commits.Add(1) == 1 {
			started <- struct{}{}
			<-release
		}
	}})
	r := e.ring("run_load")
	mustAppend(t, r, 1, Stdout, payload(0))
	<-started
	const n = 100
	for i := 1; i <= n; i++ {
		mustAppend(t, r, 1, Stdout, payload(i))
	}
	close(release)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	// The first transaction, the 100 frames, and (at most) the Flush.
	if got := commits.Load(); got > 3 {
		t.Errorf("got %d transactions for %d frames appended during one commit, want at most 3", got, n)
	}
	if _, last := r.Range(); last != n+1 {
		t.Errorf("last seq %d, want %d", last, n+1)
	}
}
