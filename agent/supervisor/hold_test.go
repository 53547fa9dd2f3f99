//go:build linux

package supervisor_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/claude"
	"github.com/olivares-dev/olivares/agent/drivers/codex"
	"github.com/olivares-dev/olivares/agent/holder"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// holderMainEnv makes this test binary a holder (TestMain).
const holderMainEnv = "OLIVARES_SUPERVISOR_TEST_HOLDER"

func message(e *env, ref, text string) {
	e.t.Helper()
	b, _ := json.Marshal(text)
	if err := e.sup.Input(context.Background(), ref, cliruntime.Input{Message: b}); err != nil {
		e.t.Fatalf("Input(%s, %q): %v", ref, text, err)
	}
}

// Issue 30, R-STATE-6: with holders, Close leaves a Claude Code child
// running and the next Open adopts it (same pid and generation, the ledger
// says adopted with the versions, status lists it), its output goes on at
// the ring's last+1, and it takes input. A Codex app-server is held too
// and adopted by asking it for the turn in flight (decisions.md 27): it
// takes input on its thread after the adoption. Stopping the adopted child
// ends its holder.
func TestHolderAdoptsOnOpen(t *testing.T) {
	holders := filepath.Join(t.TempDir(), "holders")
	t.Cleanup(func() { killHolders(holders) })
	e := newEnv(t, supervisor.Options{
		Path:       fakecliDir(t),
		Drivers:    map[string]cliruntime.Driver{"claude": claude.New(), "codex": codex.New()},
		Runners:    map[cliruntime.LaunchTransport]sessions.Runner{cliruntime.TransportStdio: sessions.NewProcRunner()},
		Holders:    &holder.Launcher{Exe: os.Args[0], Env: []string{holderMainEnv + "=1"}, Version: "v1"},
		HoldersDir: holders,
	})
	e.profile("prof_held1", "claude")
	e.launch("run_held1", "prof_held1")
	r := e.awaitState("run_held1", apitypes.StateIdle)
	out := e.tail("run_held1", 0)
	message(e, "run_held1", "before")
	out.awaitText(ring.Stdout, "pong: before")
	e.awaitState("run_held1", apitypes.StateIdle)
	cx, _ := e.codexIdle("run_codex1")
	last := e.get("run_held1").RingLast

	e.sup.Close()
	e.sup = nil
	e.shut()
	if err := syscall.Kill(r.PID, 0); err != nil {
		t.Fatalf("the held child %d died with the agent: %v", r.PID, err)
	}
	e.open()
	got := e.get("run_held1")
	if !apitypes.Live(got.State) || got.PID != r.PID || got.Generation != 1 {
		t.Fatalf("after Open: state %s pid %d gen %d, want live pid %d gen 1", got.State, got.PID, got.Generation, r.PID)
	}
	evs := e.events("run_held1")
	i := slices.IndexFunc(evs, func(ev apitypes.Event) bool { return ev.Kind == ledger.KindAdopted })
	if i < 0 || evs[i].PID != r.PID || string(evs[i].Detail) != `{"from":"v1","to":"v1"}` || slices.ContainsFunc(evs, func(ev apitypes.Event) bool { return ev.Kind == ledger.KindLost }) {
		t.Fatalf("events %v: want adopted (from v1 to v1), no lost", kinds(evs))
	}
	if live := e.sup.Live(); len(live) != 2 || live[0].AdoptedFrom != "v1" || live[1].AdoptedFrom != "v1" {
		t.Fatalf("Live: %+v, want run_codex1 and run_held1 adopted from v1", live)
	}
	if c := e.awaitState("run_codex1", apitypes.StateIdle); c.PID != cx.PID || c.ConversationID != cx.ConversationID {
		t.Fatalf("the codex run after Open: pid %d thread %s, want pid %d thread %s", c.PID, c.ConversationID, cx.PID, cx.ConversationID)
	}
	cout := e.tail("run_codex1", e.get("run_codex1").RingLast+1)
	e.input("run_codex1", "adopted")
	cout.awaitText(ring.Stdout, "pong: adopted", `"turn/completed"`)
	e.awaitState("run_codex1", apitypes.StateIdle)
	if _, err := e.sup.Stop(context.Background(), "run_codex1", 0); err != nil {
		t.Fatal(err)
	}

	out = e.tail("run_held1", last+1)
	message(e, "run_held1", "after")
	out.awaitText(ring.Stdout, "pong: after")
	if f := out.snapshot(); len(f) == 0 || f[0].Seq != last+1 {
		t.Fatalf("first frame after the adoption: %+v, want seq %d", f, last+1)
	}
	e.awaitState("run_held1", apitypes.StateIdle)
	st, err := e.sup.Stop(context.Background(), "run_held1", 0)
	if err != nil || st.ExitCode == nil || *st.ExitCode != 143 {
		t.Fatalf("stop: %+v %v, want exit code 143 (R-STOP-2)", st, err)
	}
	e.await("the holder's directory to go", func() bool {
		_, err := os.Stat(filepath.Join(holders, "run_held1", "1"))
		return os.IsNotExist(err)
	})
}

// killHolders SIGKILLs the holders serving under dir (their children die
// with them), so that a failed test leaves nothing running.
func killHolders(dir string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), "\x00"+dir+"/") {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// Issue 30, resume_after_loss: after a simulated reboot (the holder and its
// child killed while no agent ran) the agent that starts resumes the lost
// run of a profile that asks for it on its exact conversation (the tool
// sees the earlier history), and the ledger says lost, resumed and
// resumed_after_loss; a run of a profile that does not ask stays lost
// (R-STATE-6, R-RC-4).
func TestResumeAfterLoss(t *testing.T) {
	holders := filepath.Join(t.TempDir(), "holders")
	t.Cleanup(func() { killHolders(holders) })
	e := newEnv(t, supervisor.Options{
		Path:       fakecliDir(t),
		Drivers:    map[string]cliruntime.Driver{"claude": claude.New()},
		Runners:    map[cliruntime.LaunchTransport]sessions.Runner{cliruntime.TransportStdio: sessions.NewProcRunner()},
		Holders:    &holder.Launcher{Exe: os.Args[0], Env: []string{holderMainEnv + "=1"}, Version: "v1"},
		HoldersDir: holders,
	})
	if _, err := e.reg.CreateProfile(registry.ProfileParams{Ref: "prof_back1", Tenant: tenant, Tool: "claude", Name: "back",
		Home: filepath.Join(e.dir, "home-back"), Policy: registry.ProfilePolicy{ResumeAfterLoss: true}}); err != nil {
		t.Fatal(err)
	}
	e.profile("prof_gone1", "claude")
	var pids []int
	for _, run := range [][2]string{{"run_back1", "prof_back1"}, {"run_gone1", "prof_gone1"}} {
		e.launch(run[0], run[1])
		r := e.awaitState(run[0], apitypes.StateIdle)
		out := e.tail(run[0], 0)
		message(e, run[0], "before the reboot")
		out.awaitText(ring.Stdout, "pong: before the reboot")
		e.awaitState(run[0], apitypes.StateIdle)
		pids = append(pids, r.PID)
	}
	conv := e.get("run_back1").ConversationID

	// The reboot: the agent goes, then its holders and their children.
	e.sup.Close()
	e.sup = nil
	e.shut()
	killHolders(holders)
	e.await("the children to die with their holders", func() bool {
		return syscall.Kill(pids[0], 0) != nil && syscall.Kill(pids[1], 0) != nil
	})
	e.open()
	got := e.awaitState("run_back1", apitypes.StateIdle)
	if got.Generation != 2 || got.ConversationID != conv || got.PID == pids[0] {
		t.Fatalf("after the reboot: gen %d conversation %s pid %d, want generation 2 on %s", got.Generation, got.ConversationID, got.PID, conv)
	}
	want := []string{ledger.KindLost, ledger.KindResumed, ledger.KindStarted, ledger.KindResumedAfterLoss}
	e.await("lost, resumed, started, resumed_after_loss", func() bool {
		k := kinds(e.events("run_back1"))
		return len(k) >= len(want) && slices.Equal(k[len(k)-len(want):], want)
	})
	out := e.tail("run_back1", got.RingLast+1)
	message(e, "run_back1", "history")
	out.awaitText(ring.Stdout, "before the reboot")
	if g := e.get("run_gone1"); g.State != apitypes.StateFailed || g.Reason != apitypes.ReasonProcessLost {
		t.Fatalf("the run of a profile without resume_after_loss: %s %s, want failed process_lost", g.State, g.Reason)
	}
	if slices.Contains(kinds(e.events("run_gone1")), ledger.KindResumedAfterLoss) {
		t.Fatal("a run of a profile without resume_after_loss was resumed")
	}
}
