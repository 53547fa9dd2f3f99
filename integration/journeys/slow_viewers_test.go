package journeys

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apiclient"
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

		// Two viewers that read nothing after the answer's head (their
		// tunnel streams are open).
		for range 2 {
			f.viewer.AttachIdle(r.RunRef, "from=0", 10*wait)
		}
		// The fast viewer reads everything, as fast as it comes, and, like
		// any SSE client, reconnects at last+1 if it is dropped (on a
		// loaded machine under -race even a fast reader can fall a queue
		// behind; the reconnects are logged).
		var (
			mu         sync.Mutex
			seqs       []uint64
			bad        error
			reconnects int
		)
		ctx, cancel := context.WithCancel(context.Background())
		fast, err := f.viewer.API().Attach(ctx, r.RunRef, apiclient.AttachOptions{HaveFrom: true, Reconnect: true,
			OnReconnect: func(error, uint64, bool) {
				mu.Lock()
				reconnects++
				mu.Unlock()
			}})
		if err != nil {
			t.Fatal(err)
		}
		fastDone := make(chan struct{})
		go func() {
			defer close(fastDone)
			for {
				ev, err := fast.Next()
				mu.Lock()
				switch {
				case err != nil:
					if ctx.Err() == nil && bad == nil {
						bad = err
					}
				case ev.Type != apitypes.SSEOutput:
					if bad == nil {
						bad = fmt.Errorf("unexpected event %s %s", ev.Type, ev.Data)
					}
				default:
					var o apitypes.Output
					json.Unmarshal(ev.Data, &o)
					seqs = append(seqs, o.Seq)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
		defer func() {
			cancel()
			fast.Close()
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
		frames, recs := len(seqs), reconnects
		mu.Unlock()
		now := f.env.Fleet().Link(f.agent.ID)
		if !now.Connected || !now.ConnectedSince.Equal(link.ConnectedSince) {
			t.Fatalf("the node's tunnel was replaced: connected since %v, then %v (connected %v)", link.ConnectedSince, now.ConnectedSince, now.Connected)
		}
		if st := f.env.Fleet().Stats(); st.Reconnects != 0 {
			t.Fatalf("reconnects: got %d, want 0", st.Reconnects)
		}
		t.Logf("%s: %d frames to the fast viewer (%d reconnects), %d node calls during the flood", transport, frames, recs, calls)
	})
}
