package journeys

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Two read-only viewers that stop reading (their sockets left open) must
// not slow any other stream of the node's tunnel (issue 16, R-TR-10,
// R-ATT-7, R-TUN-6): a
// third, fast viewer gets every frame of the flood, node calls answer,
// input is echoed, and the node's tunnel is never dropped (its heartbeats
// go on). On QUIC the coordinator used to leave the stuck viewers' bytes
// unread in the connection's receive window until the window was full and
// every stream of the connection, heartbeats included, stood still.
func TestSlowViewersDoNotStallTheTunnel(t *testing.T) {
	byTransport(t, func(t *testing.T, transport string) {
		f := setup(t, transport, integration.ProcOptions{RingMaxBytes: 256 << 20, RingMaxFrames: 1 << 20})
		link := f.agent.AwaitConnected(wait)
		r := f.launch(f.profile("codex"))
		f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })

		var slow []net.Conn
		for range 2 {
			slow = append(slow, f.viewer.AttachRaw(r.RunRef, "from=0"))
		}
		// The fast viewer reads everything, as fast as it comes, and, like
		// any SSE client, reconnects at last+1 if it is dropped (on a
		// loaded machine under -race even a fast reader can fall 8 MiB
		// behind; the reconnects are logged).
		var (
			mu         sync.Mutex
			seqs       []uint64
			bad        error
			reconnects int
			stop       atomic.Bool
			cur        *integration.Stream
		)
		fast := func(q string) *integration.Stream {
			s, err := f.viewer.TryAttach(r.RunRef, q)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				bad = err
				return nil
			}
			cur = s
			return s
		}
		first := fast("from=0")
		fastDone := make(chan struct{})
		go func() {
			defer close(fastDone)
			s := first
			for s != nil {
				for ev := range s.Events() {
					mu.Lock()
					if ev.Name != apitypes.SSEOutput {
						if bad == nil {
							bad = &eventError{ev}
						}
					} else {
						var o apitypes.Output
						json.Unmarshal(ev.Data, &o)
						seqs = append(seqs, o.Seq)
					}
					mu.Unlock()
				}
				if stop.Load() {
					return
				}
				mu.Lock()
				reconnects++
				next := uint64(0)
				if len(seqs) > 0 {
					next = seqs[len(seqs)-1] + 1
				}
				mu.Unlock()
				s = fast(fmt.Sprintf("from=%d", next))
			}
		}()
		defer func() {
			stop.Store(true)
			mu.Lock()
			if cur != nil {
				cur.Close()
			}
			mu.Unlock()
			<-fastDone
		}()

		// 48 MiB: more than every window and socket buffer between the
		// agent and a stuck client holds (16 MiB QUIC connection window,
		// 8-16 MiB stream windows, the agent's viewer queue).
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("flood 50331648"), nil)
		// While the flood runs, node calls answer and the node stays
		// connected on the same tunnel.
		calls := 0
		integration.Await(t, 5*wait, "the flood's turn to end", func() bool {
			var evs apitypes.EventList
			f.viewer.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs/"+r.RunRef+"/events?limit=1", nil, &evs)
			calls++
			return f.viewer.Run(r.RunRef).State == apitypes.StateIdle
		})
		t.Logf("flood done")
		// Input is echoed while the stuck viewers still hold their streams.
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("after the flood"), nil)
		last := f.operator.AwaitRun(r.RunRef, wait, "the echo's turn to end", func(x apitypes.Run) bool {
			return x.State == apitypes.StateIdle && x.RingLast > 0
		}).RingLast
		t.Logf("echo done")
		integration.Await(t, 5*wait, "the fast viewer to get every frame", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return bad != nil || (len(seqs) > 0 && seqs[len(seqs)-1] >= last)
		})
		mu.Lock()
		if bad != nil {
			t.Fatalf("fast viewer: %v", bad)
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] != seqs[i-1]+1 {
				t.Fatalf("fast viewer: seq %d after %d", seqs[i], seqs[i-1])
			}
		}
		mu.Unlock()
		now := f.env.Fleet().Link(f.agent.ID)
		if !now.Connected || !now.ConnectedSince.Equal(link.ConnectedSince) {
			t.Fatalf("the node's tunnel was replaced: connected since %v, then %v (connected %v)", link.ConnectedSince, now.ConnectedSince, now.Connected)
		}
		if st := f.env.Fleet().Stats(); st.Reconnects != 0 {
			t.Fatalf("reconnects: got %d, want 0", st.Reconnects)
		}
		t.Logf("%s: %d frames to the fast viewer (%d reconnects), %d node calls during the flood", transport, len(seqs), reconnects, calls)
		for _, c := range slow {
			c.Close()
		}
	})
}

type eventError struct{ ev integration.SSEEvent }

func (e *eventError) Error() string { return "unexpected event " + e.ev.Name + " " + string(e.ev.Data) }
