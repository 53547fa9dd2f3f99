package journeys

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apiclient"
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

// A viewer that stops reading is dropped and never blocks the child: the
// flood's turn ends while the viewer reads nothing (R-TR-10). Its tunnel
// stream is closed while its socket is still open (issue 18), and it gets
// no end: end is the generation's exit only (R-RC-9, R-ATT-7, issue 16);
// the stream just ends, so a client reconnects at last+1 (R-RC-8). Other
// viewers going on is TestConcurrentViewers' and
// TestSlowViewersDoNotStallTheTunnel's.
func TestSlowViewerDropped(t *testing.T) {
	byTransport(t, func(t *testing.T, transport string) {
		f := setup(t, transport, integration.ProcOptions{ViewerQueue: 64, RingMaxBytes: 64 << 20})
		r := f.launch(f.profile("codex"))
		f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
		streams := func() int { return f.env.Fleet().Link(f.agent.ID).OpenStreams }
		base := streams()
		// AttachIdle returns once the answer's head came, so the tunnel
		// stream is open; the body is left unread. The waits below: the
		// flood's turn, the stream's close, then reading what was buffered.
		slow := f.viewer.AttachIdle(r.RunRef, "from=0", 3*wait)
		// More than every buffer between the agent and the slow client holds
		// (socket buffers, the coordinator's viewer queue, tunnel windows).
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("flood 67108864"), nil)
		f.operator.AwaitRun(r.RunRef, wait, "the flood's turn to end", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
		integration.Await(t, wait, "the slow viewer's tunnel stream to close", func() bool { return streams() <= base })
		// Now the slow viewer reads: what was buffered, then the end of the
		// stream (cleanly, or cut when the write deadline broke the
		// connection: both tell a client to reconnect), never an end event.
		outputs := 0
		for {
			ev, err := slow.Next()
			if errors.Is(err, io.EOF) || (err != nil && strings.Contains(err.Error(), "broke")) {
				break
			}
			if err != nil {
				t.Fatalf("slow viewer's stream did not end: %v (after %d outputs)", err, outputs)
			}
			if ev.Type == apitypes.SSEEnd {
				t.Fatalf("slow viewer got end %s", ev.Data)
			}
			outputs++
		}
		t.Logf("%s: the slow viewer read %d events before its stream ended", transport, outputs)
		if got := f.operator.Run(r.RunRef); !apitypes.Live(got.State) {
			t.Fatalf("run not live after the slow viewer: %+v", got)
		}
	})
}

// R-ATT-10: attaches per principal are capped (issue 18): past the cap, 429
// too_many_attaches with a sentence saying how many are open; another
// principal is not affected, and a closed attach frees its slot.
func TestAttachCapPerPrincipal(t *testing.T) {
	f := setupEnv(t, "yamux", integration.Options{Configure: func(c *coordd.Config) { c.API.MaxAttachesPerPrincipal = 2 }}, integration.ProcOptions{})
	r := f.launch(f.profile("codex"))
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	a := f.viewer.Attach(r.RunRef, "from=0")
	f.viewer.Attach(r.RunRef, "from=0")
	attach := func() error {
		s, err := f.viewer.API().Attach(context.Background(), r.RunRef, apiclient.AttachOptions{})
		if err == nil {
			s.Close()
		}
		return err
	}
	err := attach()
	if apiclient.StatusOf(err) != http.StatusTooManyRequests || apiclient.CodeOf(err) != "too_many_attaches" {
		t.Fatalf("third attach: got %v, want 429 too_many_attaches", err)
	}
	if !strings.Contains(err.Error(), "2 attach streams open") {
		t.Errorf("the 429 does not say how many are open: %v", err)
	}
	f.operator.Attach(r.RunRef, "from=0").Close()
	a.Close()
	integration.Await(t, wait, "the closed attach's slot", func() bool { return attach() == nil })
}
