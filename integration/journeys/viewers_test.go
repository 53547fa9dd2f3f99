package journeys

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// 100 concurrent viewers of one run through the coordinator all get the
// same frames (R-TR-10: each viewer has its own cursor and queue).
func TestConcurrentViewers(t *testing.T) {
	byTransport(t, func(t *testing.T, transport string) {
		f := setup(t, transport, integration.ProcOptions{RingMaxBytes: 64 << 20})
		r := f.launch(f.profile("codex"))
		f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
		const n = 100
		var target atomic.Uint64 // the last seq, once the turn ended
		seqs := make([][]uint64, n)
		var wg sync.WaitGroup
		for i := range n {
			s := f.viewer.Attach(r.RunRef, "from=0")
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if l := target.Load(); l != 0 && len(seqs[i]) > 0 && seqs[i][len(seqs[i])-1] >= l {
						return
					}
					ev, ok := s.Next(wait)
					if !ok {
						t.Errorf("viewer %d: stream ended after %d frames: %v", i, len(seqs[i]), s.Err())
						return
					}
					if ev.Name != apitypes.SSEOutput {
						t.Errorf("viewer %d: %s %s", i, ev.Name, ev.Data)
						return
					}
					var o apitypes.Output
					json.Unmarshal(ev.Data, &o)
					seqs[i] = append(seqs[i], o.Seq)
				}
			}()
		}
		// After the 202 the turn counts as active (queued or running), so
		// the next idle is the flood's end.
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("flood 262144"), nil)
		last := f.operator.AwaitRun(r.RunRef, wait, "the flood's turn to end", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle }).RingLast
		target.Store(last)
		// Wake readers that already hold the last frame.
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("done"), nil)
		wg.Wait()
		if t.Failed() {
			return
		}
		for i := 1; i < n; i++ {
			a, b := seqs[0], seqs[i]
			m := min(len(a), len(b))
			for j := 0; j < m; j++ {
				if a[j] != b[j] {
					t.Fatalf("viewer %d frame %d: seq %d, viewer 0 seq %d", i, j, b[j], a[j])
				}
			}
			if a[m-1] < last || b[m-1] < last {
				t.Fatalf("viewer %d got %d frames, viewer 0 %d, up to seq %d", i, len(b), len(a), last)
			}
		}
	})
}

// A viewer that stops reading is dropped with end reason slow_viewer, and
// never blocks the child: the flood's turn ends while the viewer reads
// nothing (R-TR-10). Other viewers going on is TestConcurrentViewers'.
func TestSlowViewerDropped(t *testing.T) {
	f := setup(t, "yamux", integration.ProcOptions{ViewerQueue: 64, RingMaxBytes: 64 << 20})
	r := f.launch(f.profile("codex"))
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	// The two waits below: the flood's turn, then reading what was buffered.
	slow := f.viewer.AttachIdle(r.RunRef, "from=0", 2*wait)
	// More than every buffer between the agent and the slow client holds
	// (socket buffers, tunnel windows), so its queue overflows.
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("flood 67108864"), nil)
	f.operator.AwaitRun(r.RunRef, wait, "the flood's turn to end", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	// Now the slow viewer reads: what was buffered, then end.
	for {
		ev, err := slow.Next()
		if err != nil {
			t.Fatalf("slow viewer got no end: %v", err)
		}
		if ev.Type == apitypes.SSEEnd {
			if !strings.Contains(string(ev.Data), "slow_viewer") {
				t.Fatalf("slow viewer end %s", ev.Data)
			}
			break
		}
	}
	if got := f.operator.Run(r.RunRef); !apitypes.Live(got.State) {
		t.Fatalf("run not live after the slow viewer: %+v", got)
	}
}
