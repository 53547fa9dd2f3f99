package journeys

import (
	"net/http"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// TestTunnelDropDuringStopGraceRedials (issue 18): a stop that waits out
// its 10 s grace runs on the agent's own context, so a tunnel drop in the
// middle of it does not hold the link: the agent dials again at once (its
// backoff), while the child is still in its grace, and the stop finishes
// on the node and reaches the index through the row push. Before, the
// agent waited for every call it was serving, the stop included, before it
// redialed.
func TestTunnelDropDuringStopGraceRedials(t *testing.T) {
	f := setup(t, "yamux", integration.ProcOptions{StopGrace: 10 * time.Second})
	r := f.launch(f.profile("claude"))
	s := f.operator.Attach(r.RunRef, "")
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("ignore-term"), nil)
	s.UntilOutput("ignore", wait)
	s.Close()
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })

	stopped := make(chan integration.Response, 1)
	go func() {
		stopped <- f.operator.Call(http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/stop", nil)
	}()
	// The stop is under way once the ledger says so.
	integration.Await(t, wait, "stop_requested in the ledger", func() bool {
		var evs apitypes.EventList
		f.operator.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs/"+r.RunRef+"/events", nil, &evs)
		for _, e := range evs.Items {
			if e.Kind == "stop_requested" {
				return true
			}
		}
		return false
	})
	dropped := time.Now()
	f.env.Fleet().Disconnect(f.agent.ID)
	// Within the grace: the bound is below it, so an agent that waits for
	// the stop before it dials again misses it.
	integration.Await(t, 8*time.Second, "the agent to dial again during the stop's grace", func() bool {
		l := f.env.Fleet().Link(f.agent.ID)
		return l.Connected && l.ConnectedSince.After(dropped)
	})
	// And the child is still in its grace: the redial did not wait for it.
	var now apitypes.Run
	f.operator.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs/"+r.RunRef, nil, &now)
	if !apitypes.Live(now.State) {
		t.Fatalf("run %s after the redial, want it still live in its stop grace", now.State)
	}
	<-stopped // answered with an error: its tunnel went away
	// The stop goes on on the node: SIGKILL after the grace, pushed as a row.
	out := f.operator.AwaitRun(r.RunRef, 30*time.Second, "stopped after the grace", func(r apitypes.Run) bool { return r.State == apitypes.StateStopped })
	if out.Signal != "SIGKILL" || out.ExitCode != nil {
		t.Fatalf("after the grace: signal %q exit %v, want SIGKILL and no exit code", out.Signal, out.ExitCode)
	}
}
