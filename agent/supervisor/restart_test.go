package supervisor_test

import (
	"context"
	"errors"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/fake"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// stuckRunner's Start blocks until release: an agent that dies while a
// launch is spawning, after created and before started committed.
type stuckRunner struct {
	*fake.Runner
	entered, release chan struct{}
}

func (r stuckRunner) Start(ctx context.Context, s sessions.Spec) (sessions.Process, error) {
	close(r.entered)
	<-r.release
	return nil, errors.New("the agent died during the spawn")
}

// TestRestartDuringLaunch: a run whose launch was cut by the agent's death
// between created and started has no process and no recorded exit; after
// the restart it is failed process_lost, not starting for ever (R-STATE-5,
// R-STATE-6), and its ring is not live (R-RC-2).
func TestRestartDuringLaunch(t *testing.T) {
	rn := stuckRunner{Runner: fake.NewRunner(fake.NewStore()), entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, supervisor.Options{
		Drivers: map[string]cliruntime.Driver{"fake": fake.New()},
		Runners: map[cliruntime.LaunchTransport]sessions.Runner{cliruntime.TransportStdio: rn},
	})
	e.profile("prof_cut1", "fake")
	launched := make(chan struct{})
	go func() {
		defer close(launched)
		e.sup.Launch(context.Background(), supervisor.LaunchParams{RunRef: "run_cut1", Tenant: tenant, ProfileRef: "prof_cut1"})
	}()
	<-rn.entered // created is committed; the spawn is under way
	old := e.crash()
	close(rn.release)
	<-launched
	closeBounded(t, old)

	e.open()
	got := e.get("run_cut1")
	if got.State != apitypes.StateFailed || got.Reason != apitypes.ReasonProcessLost || got.ExitCode != nil || got.Signal != "" || got.PID != 0 {
		t.Fatalf("after restart: state %s reason %q exit %s signal %q pid %d, want failed process_lost, no exit",
			got.State, got.Reason, show(got.ExitCode), got.Signal, got.PID)
	}
	if live := e.sup.Live(); len(live) != 0 {
		t.Fatalf("Live after restart: %+v, want none", live)
	}
	evs := e.events("run_cut1")
	if k := kinds(evs); !equal(k, []string{ledger.KindCreated, ledger.KindLost}) || last(evs).Reason != ledger.ReasonProcessLost {
		t.Fatalf("events after restart: %v (last %+v), want created, lost process_lost", k, last(evs))
	}
	if _, end := e.replay("run_cut1"); end.Reason != apitypes.ReasonProcessLost {
		t.Fatalf("replay end: %q, want process_lost", end.Reason)
	}
	n := len(evs)
	if r, err := e.sup.Stop(context.Background(), "run_cut1", 0); err != nil || r.State != apitypes.StateFailed {
		t.Fatalf("Stop: %v state %s, want the failed row (R-STOP-4)", err, r.State)
	}
	wantErr(t, "Input", e.sup.Input(context.Background(), "run_cut1", cliruntime.Input{Text: "x"}), supervisor.ErrNotLive)
	e.shut()
	e.open()
	if got := e.events("run_cut1"); len(got) != n {
		t.Fatalf("a second restart or the stop added rows: %v", kinds(got[n:]))
	}
}
