package supervisor_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/fake"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// TestDiskStallBlocksNoOtherRun (issue 18): a record commit of run A that
// stalls inside its transaction, holding the file's one writer as an
// fsync that hangs would, blocks neither a listing (GET /runs) nor run B's
// output: B's child writes a megabyte and ends its turn, and B's reader
// takes it all, while A's commit is still stalled. Before, a run's mutex
// was held across its commit, so the listing waited on A, and B's reader
// waited on the file for every record change it made.
func TestDiskStallBlocksNoOtherRun(t *testing.T) {
	store := fake.NewStore()
	var armed atomic.Bool
	entered, release := make(chan struct{}, 1), make(chan struct{})
	o := supervisor.Options{
		Drivers: map[string]cliruntime.Driver{"fake": fake.New()},
		Runners: map[cliruntime.LaunchTransport]sessions.Runner{cliruntime.TransportStdio: fake.NewRunner(store)},
	}
	supervisor.SetInTx(&o, func(ref string) {
		if ref == "run_stallA" && armed.CompareAndSwap(true, false) {
			entered <- struct{}{}
			<-release
		}
	})
	e := newEnv(t, o)
	e.launchIdle("run_stallA")
	e.launchIdle("run_stallB")
	tl := e.tail("run_stallB", 0)

	armed.Store(true)
	interrupted := make(chan error, 1)
	go func() { interrupted <- second(e.sup.Interrupt(context.Background(), "run_stallA")) }()
	select {
	case <-entered:
	case <-time.After(waitFor):
		t.Fatal("A's commit did not start")
	}
	defer close(release)

	listed := make(chan int, 1)
	go func() { listed <- len(e.sup.List()) }()
	select {
	case n := <-listed:
		if n != 2 {
			t.Errorf("List during the stall: got %d runs, want 2", n)
		}
	case <-time.After(waitFor):
		t.Fatal("List blocked on run A's stalled commit")
	}

	e.input("run_stallB", "flood 1048576")
	r := e.awaitState("run_stallB", apitypes.StateIdle) // B's reader saw the turn end
	if r.State != apitypes.StateIdle {
		t.Fatalf("B: got %s, want idle", r.State)
	}
	select {
	case err := <-interrupted:
		t.Fatalf("A's interrupt returned during its stalled commit: %v", err)
	default:
	}
	release <- struct{}{} // unblock now; the deferred close is then a no-op receive
	if err := <-interrupted; err != nil {
		t.Fatalf("A's interrupt: %v", err)
	}
	// Once the disk is back, B's output is all in the ring.
	tl.awaitText(ring.Stdout, "flooded 1048576 bytes")
}

// sinkDriver launches a child that never reads its stdin (sleep), so that
// input piles up in the agent: it takes any text as one line.
type sinkDriver struct{}

func (sinkDriver) Kind() cliruntime.Kind                       { return "sink" }
func (sinkDriver) LaunchTransport() cliruntime.LaunchTransport { return cliruntime.TransportStdio }
func (sinkDriver) Launch(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	p, err := exec.LookPath("sleep")
	if err != nil {
		return cliruntime.Command{}, err
	}
	return cliruntime.Command{Path: p, Args: []string{"600"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: spec.Workdir}, nil
}
func (d sinkDriver) Resume(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	return d.Launch(spec)
}
func (sinkDriver) CheckInput(in cliruntime.Input) error                { return cliruntime.CheckTextInput(in) }
func (sinkDriver) NewSession(cliruntime.LaunchSpec) cliruntime.Session { return &sinkSession{} }

type sinkSession struct{}

func (*sinkSession) Start() cliruntime.Step { return cliruntime.Step{} }
func (*sinkSession) Encode(in cliruntime.Input) (cliruntime.Step, error) {
	return cliruntime.Step{Write: [][]byte{[]byte(in.Text + "\n")}}, nil
}
func (*sinkSession) Interrupt() (cliruntime.Step, bool) { return cliruntime.Step{}, false }
func (*sinkSession) Answer(string, cliruntime.Answer) (cliruntime.Step, error) {
	return cliruntime.Step{}, cliruntime.ErrNoSuchRequest
}
func (*sinkSession) Observe([]byte) cliruntime.Step { return cliruntime.Step{} }
func (*sinkSession) ConversationID() string         { return "" }
func (*sinkSession) TurnActive() bool               { return false }

// TestStdinQueueCappedInBytes (issue 18): a child that stops reading its
// input costs the agent at most MaxStdinQueue bytes; the input past it is
// refused with ErrInputQueueFull (503 input_queue_full), whatever the
// driver, and the run stays live.
func TestStdinQueueCappedInBytes(t *testing.T) {
	const limit = 1 << 20
	e := newEnv(t, supervisor.Options{
		Drivers:       map[string]cliruntime.Driver{"sink": sinkDriver{}},
		Runners:       map[cliruntime.LaunchTransport]sessions.Runner{cliruntime.TransportStdio: sessions.NewProcRunner()},
		MaxStdinQueue: limit,
		StopGrace:     time.Second,
	})
	if _, err := e.reg.CreateProfile(registry.ProfileParams{Ref: "prof_sink1", Tenant: tenant, Tool: "sink", Name: "sink",
		Home: e.dir + "/home-sink"}); err != nil {
		t.Fatal(err)
	}
	e.launch("run_sink1", "prof_sink1")
	chunk := strings.Repeat("a", 64<<10) // one 64 KiB line each
	var err error
	sent := 0
	for i := 0; i < 64 && err == nil; i++ { // the pipe takes 64 KiB, the queue 1 MiB
		if err = e.sup.Input(context.Background(), "run_sink1", cliruntime.Input{Text: "x" + chunk}); err == nil {
			sent++
		}
	}
	if !errors.Is(err, supervisor.ErrInputQueueFull) {
		t.Fatalf("after %d inputs of 64 KiB: got %v, want ErrInputQueueFull", sent, err)
	}
	if max := (limit+(128<<10))/(64<<10) + 2; sent > max {
		t.Errorf("accepted %d inputs of 64 KiB before refusing, want at most %d (the pipe and the cap)", sent, max)
	}
	if st := e.get("run_sink1").State; !apitypes.Live(st) {
		t.Errorf("state after the refusal: %s, want live", st)
	}
	if _, err := e.sup.Stop(context.Background(), "run_sink1", time.Second); err != nil {
		t.Fatal(err)
	}
}
