package supervisor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/fake"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// heldRunner starts fake peers whose Wait is held until release is
// closed, while Done already says the child exited: the moment between a
// child's own exit and the supervisor recording it.
type heldRunner struct {
	*fake.Runner
	release chan struct{}

	mu    sync.Mutex
	procs []sessions.Process
}

type heldProcess struct {
	sessions.Process
	release chan struct{}
}

func (p heldProcess) Wait() sessions.Exit { <-p.release; return p.Process.Wait() }

func (r *heldRunner) Start(ctx context.Context, s sessions.Spec) (sessions.Process, error) {
	p, err := r.Runner.Start(ctx, s)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	return heldProcess{Process: p, release: r.release}, nil
}

// TestStopAfterOwnExit: a stop that comes after the child exited on its
// own, before that exit was recorded, signals nothing and writes no
// stop_requested row (R-STOP-4), so that the exit stays the tool's: exit 3
// is failed exit_nonzero, not an operator stop (R-STATE-3 rows 6 and 7).
func TestStopAfterOwnExit(t *testing.T) {
	rn := &heldRunner{Runner: fake.NewRunner(fake.NewStore()), release: make(chan struct{})}
	e := newEnv(t, supervisor.Options{
		Drivers: map[string]cliruntime.Driver{"fake": fake.New()},
		Runners: map[cliruntime.LaunchTransport]sessions.Runner{cliruntime.TransportStdio: rn},
	})
	released := false
	release := func() {
		if !released {
			released = true
			close(rn.release)
		}
	}
	t.Cleanup(release) // before the env's Close, which waits for the run
	e.launchIdle("run_ownexit1")
	e.input("run_ownexit1", "exit 3")
	rn.mu.Lock()
	p := rn.procs[0]
	rn.mu.Unlock()
	select {
	case <-p.Done():
	case <-time.After(waitFor):
		t.Fatalf("the fake did not exit on `exit 3` within %v", waitFor)
	}
	if got := e.get("run_ownexit1"); !apitypes.Live(got.State) {
		t.Fatalf("state %s before the exit is recorded; the test needs it still live", got.State)
	}

	type result struct {
		r   apitypes.Run
		err error
	}
	stopped := make(chan result, 1)
	go func() {
		r, err := e.sup.Stop(context.Background(), "run_ownexit1", 0)
		stopped <- result{r, err}
	}()
	// Stop either answers after the recorded exit or waits for it; the
	// exit is recorded once Wait returns.
	release()
	var res result
	select {
	case res = <-stopped:
	case <-time.After(waitFor):
		t.Fatalf("Stop: no answer within %v", waitFor)
	}
	if res.err != nil {
		t.Fatalf("Stop: %v", res.err)
	}
	if res.r.State != apitypes.StateFailed || res.r.Reason != apitypes.ReasonExitNonZero ||
		res.r.ExitCode == nil || *res.r.ExitCode != 3 {
		t.Fatalf("Stop after the child's own exit 3: state %s reason %q exit %s, want failed exit_nonzero 3",
			res.r.State, res.r.Reason, show(res.r.ExitCode))
	}
	for _, ev := range e.events("run_ownexit1") {
		if ev.Kind == ledger.KindStopRequested {
			t.Fatalf("events %v: a stop_requested row for a child that had already exited", kinds(e.events("run_ownexit1")))
		}
	}
	wantErr(t, "Input after the exit", e.sup.Input(context.Background(), "run_ownexit1", cliruntime.Input{Text: "hi"}), supervisor.ErrNotLive)
}
