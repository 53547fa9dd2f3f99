package supervisor_test

import (
	"errors"
	"slices"
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

// TestStalledTurn (R-ATTN-6), on an injected clock: a running turn that
// writes nothing over a whole stall_after gets stalled_since (attention
// stalled) and is not killed; a turn that writes is not stalled; the turn's
// end clears it. A stall_after out of bounds is refused.
func TestStalledTurn(t *testing.T) {
	c := &clock{}
	at := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	o := supervisor.Options{
		Drivers: map[string]cliruntime.Driver{"fake": fake.New()},
		Runners: map[cliruntime.LaunchTransport]sessions.Runner{cliruntime.TransportStdio: fake.NewRunner(fake.NewStore())},
	}
	supervisor.SetStallClock(&o, c.after, func() time.Time { return at })
	e := newEnv(t, o)
	e.policyRun("run_stall1", registry.ProfilePolicy{StallAfter: "2m"})

	e.input("run_stall1", "hang")
	e.awaitState("run_stall1", apitypes.StateRunning)
	e.await("the stall check armed at the turn's start", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.timers) > 0
	})
	if ds := c.fire(); !slices.Contains(ds, 2*time.Minute) {
		t.Fatalf("timers fired %v, want the profile's stall_after 2m", ds)
	}
	r := e.get("run_stall1")
	if r.State != apitypes.StateRunning || r.StalledSince == nil || !r.StalledSince.Equal(at) {
		t.Fatalf("after a silent stall_after: state %s stalled_since %v, want running, stalled since %v", r.State, r.StalledSince, at)
	}
	if a := apitypes.AttentionOf(r, at); a != apitypes.AttentionStalled {
		t.Fatalf("attention %q, want stalled", a)
	}
	// Still stalled at the next tick; nothing was killed.
	c.fire()
	if r := e.get("run_stall1"); r.State != apitypes.StateRunning || r.StalledSince == nil {
		t.Fatalf("a stalled run must be left running: %s %v", r.State, r.StalledSince)
	}
	// The turn's end (an interrupt here) clears it.
	if _, err := e.sup.Interrupt(t.Context(), "run_stall1"); err != nil {
		t.Fatal(err)
	}
	e.awaitState("run_stall1", apitypes.StateIdle)
	e.await("stalled_since cleared", func() bool { return e.get("run_stall1").StalledSince == nil })

	// A turn that writes between two ticks is not stalled.
	e.input("run_stall1", "slow")
	e.awaitState("run_stall1", apitypes.StateRunning)
	out := e.tail("run_stall1", e.get("run_stall1").RingLast+1)
	out.awaitText(ring.Stdout, "tick1 ")
	c.fire()
	if r := e.get("run_stall1"); r.StalledSince != nil {
		t.Fatalf("a turn that wrote was marked stalled at %v", r.StalledSince)
	}
	_, _ = e.sup.Interrupt(t.Context(), "run_stall1")
	e.awaitState("run_stall1", apitypes.StateIdle)

	for _, bad := range []string{"5s", "25h", "soon"} {
		_, err := e.reg.CreateProfile(registry.ProfileParams{Ref: "prof_bad1", Tenant: tenant, Tool: "fake", Name: "bad1",
			Home: e.dir + "/bad", Policy: registry.ProfilePolicy{StallAfter: bad}})
		if !errors.Is(err, registry.ErrBadPolicy) {
			t.Fatalf("stall_after %q: %v, want bad_policy", bad, err)
		}
	}
}
