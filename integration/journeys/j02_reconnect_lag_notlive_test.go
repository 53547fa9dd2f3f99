package journeys

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// outputsFrom reads n output events, failing on anything else.
func outputsFrom(t *testing.T, s *integration.Stream, n int) []apitypes.Output {
	t.Helper()
	var outs []apitypes.Output
	for len(outs) < n {
		ev, ok := s.Next(wait)
		if !ok {
			t.Fatalf("stream ended after %d outputs", len(outs))
		}
		if ev.Name != apitypes.SSEOutput {
			t.Fatalf("event %s %s among outputs", ev.Name, ev.Data)
		}
		o := ev.Output(t)
		if integration.Seq(t, ev) != o.Seq {
			t.Fatalf("SSE id %s for seq %d (R-ATT-4)", ev.ID, o.Seq)
		}
		outs = append(outs, o)
	}
	return outs
}

// contiguous fails unless outs are seqs from, from+1, ... (R-RC-6).
func contiguous(t *testing.T, outs []apitypes.Output, from uint64) {
	t.Helper()
	for i, o := range outs {
		if o.Seq != from+uint64(i) {
			t.Fatalf("output %d has seq %d, want %d: a gap or a duplicate (R-RC-6)", i, o.Seq, from+uint64(i))
		}
	}
}

// J02 — reconnect, lag, not live (SDD R04): R-RC-1..9, R-ATT-4..6,
// R-STATE-6.
func TestJ02ReconnectLagNotLive(t *testing.T) {
	byTransport(t, func(t *testing.T, transport string) {
		f := setup(t, transport, integration.ProcOptions{RingMaxBytes: 1 << 20})
		r := f.launch(f.profile("codex"))
		r = f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
		pid := r.PID

		// Read through seq N, drop the connection while the peer keeps
		// writing, reconnect at N+1: no gap, no duplicate (R-RC-1, R-RC-6).
		s := f.viewer.Attach(r.RunRef, "from=0")
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("slow"), nil)
		first := outputsFrom(t, s, 4)
		s.Close()
		last := first[len(first)-1].Seq
		s = f.viewer.Attach(r.RunRef, fmt.Sprintf("from=%d", last+1))
		again := outputsFrom(t, s, 4)
		contiguous(t, again, last+1)
		for _, o := range again {
			if o.Generation != 1 {
				t.Fatalf("generation %d after reconnect", o.Generation)
			}
		}
		// Last-Event-ID is from = id+1 (R-ATT-5).
		s.Close()
		last = again[len(again)-1].Seq
		s = f.viewer.Attach(r.RunRef, "", "Last-Event-ID", fmt.Sprint(last))
		contiguous(t, outputsFrom(t, s, 2), last+1)

		// A tunnel drop ends the stream without end (R-RC-8); the client
		// reconnects at last+1 once the node is back.
		got := outputsFrom(t, s, 1)
		f.env.Fleet().Disconnect(f.agent.ID)
		var seen []apitypes.Output
		for {
			ev, ok := s.Next(wait)
			if !ok {
				break
			}
			if ev.Name != apitypes.SSEOutput {
				t.Fatalf("event %s on a dropped tunnel, want the stream to just end (R-RC-8)", ev.Name)
			}
			seen = append(seen, ev.Output(t))
		}
		last = got[0].Seq
		if len(seen) > 0 {
			last = seen[len(seen)-1].Seq
		}
		f.agent.AwaitConnected(wait)
		s = f.viewer.Attach(r.RunRef, fmt.Sprintf("from=%d", last+1))
		contiguous(t, outputsFrom(t, s, 3), last+1)
		s.Close()
		if now := f.viewer.Run(r.RunRef); now.PID != pid || now.Generation != 1 {
			t.Fatalf("pid %d gen %d after reconnects, want pid %d gen 1: attach never starts a process (R-RC-4)", now.PID, now.Generation, pid)
		}
		f.post(f.operator, http.StatusAccepted, r.RunRef, "interrupt", nil, nil)
		f.operator.AwaitRun(r.RunRef, wait, "idle after interrupt", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })

		// kill -9 of the agent while output flows: every frame a viewer
		// received is still in the ring after the restart (R-RC-7).
		v := f.viewer.Attach(r.RunRef, fmt.Sprintf("from=%d", f.viewer.Run(r.RunRef).RingLast+1))
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("flood 600000"), nil)
		received := outputsFrom(t, v, 3)
		// The agent and the run's holder (issue 30: a held child outlives
		// its agent; with its holder gone it is lost).
		f.agent.Kill()
		f.agent.KillHolders()
		for {
			ev, ok := v.Next(wait)
			if !ok {
				break
			}
			if ev.Name == apitypes.SSEOutput {
				received = append(received, ev.Output(t))
			}
		}
		f.agent.Start()
		f.agent.AwaitConnected(wait)
		lost := f.viewer.AwaitRun(r.RunRef, wait, "lost", func(r apitypes.Run) bool { return r.State == apitypes.StateFailed })
		if lost.Reason != apitypes.ReasonProcessLost || lost.ExitCode != nil || lost.Signal != "" || lost.NodeReachable != nil {
			t.Fatalf("after the agent restart: %+v, want failed/process_lost without exit (R-STATE-6)", lost)
		}
		// Attach on a run that is not live: replay, then notice (R-ATT-6).
		s = f.viewer.Attach(r.RunRef, fmt.Sprintf("from=%d", received[0].Seq))
		notice, replay := s.Until(apitypes.SSENotice, wait)
		var n apitypes.Notice
		json.Unmarshal(notice.Data, &n)
		if n.Kind != "not_live" || n.State != apitypes.StateFailed {
			t.Fatalf("notice %s", notice.Data)
		}
		if !s.Ended(wait) {
			t.Fatal("stream open after notice")
		}
		bySeq := map[uint64]apitypes.Output{}
		for _, o := range replay {
			bySeq[o.Seq] = o
		}
		for _, o := range received {
			if got, ok := bySeq[o.Seq]; !ok || got.Data != o.Data || got.Stream != o.Stream {
				t.Fatalf("frame %d that a viewer received is not in the ring after kill -9", o.Seq)
			}
		}
		evs := f.viewer.Events(r.RunRef)
		kinds := integration.Kinds(evs)
		if !slices.Contains(kinds, "lost") || countOf(kinds, "started") != 1 {
			t.Fatalf("events %v: want one started and a lost row", kinds)
		}

		// Resume is a new generation (R-RC-3); a flood larger than the ring
		// evicts, and a cursor below the oldest frame gets lag first
		// (R-RC-5).
		var res apitypes.Run
		f.post(f.operator, http.StatusOK, r.RunRef, "resume", nil, &res)
		if res.Generation != 2 || !apitypes.Live(res.State) || res.PID == pid {
			t.Fatalf("resume: %+v", res)
		}
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("flood 3000000"), nil)
		f.viewer.AwaitRun(r.RunRef, wait, "flood to evict", func(r apitypes.Run) bool { return r.RingFirst > received[len(received)-1].Seq })
		s = f.viewer.Attach(r.RunRef, "from=1")
		ev, _ := s.Next(wait)
		var lag apitypes.Lag
		json.Unmarshal(ev.Data, &lag)
		if ev.Name != apitypes.SSELag || lag.RequestedFrom != 1 || lag.ResumedFrom <= 1 {
			t.Fatalf("first event %s %s, want lag from 1", ev.Name, ev.Data)
		}
		ev, _ = s.Next(wait)
		if ev.Name != apitypes.SSEOutput || ev.Output(t).Seq != lag.ResumedFrom {
			t.Fatalf("after lag: %s %s, want seq %d", ev.Name, ev.Data, lag.ResumedFrom)
		}
		s.Close()
		// A node that is down keeps the last state, marked unreachable
		// (R-STATE-7).
		f.agent.Kill()
		f.agent.AwaitDisconnectedFrom(f.env, wait)
		var list apitypes.RunList
		f.viewer.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs", nil, &list)
		if len(list.Items) != 1 || list.Items[0].NodeReachable == nil || *list.Items[0].NodeReachable || !apitypes.Live(list.Items[0].State) {
			t.Fatalf("list with the node down: %s", mustJSON(list))
		}
	})
}

func countOf(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

func mustJSON(v any) string {
	var b bytes.Buffer
	json.NewEncoder(&b).Encode(v)
	return strings.TrimSpace(b.String())
}
