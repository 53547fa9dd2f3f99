package supervisor_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/fake"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// fakeEnv is a supervisor whose only tool is the in-process fake: the
// driver under the tool name "fake", its runner for the stdio transport.
func fakeEnv(t *testing.T) (*env, *fake.Store) {
	t.Helper()
	store := fake.NewStore()
	e := newEnv(t, supervisor.Options{
		Drivers: map[string]cliruntime.Driver{"fake": fake.New()},
		Runners: map[cliruntime.LaunchTransport]sessions.Runner{cliruntime.TransportStdio: fake.NewRunner(store)},
	})
	return e, store
}

// profile creates a profile for tool with a home in the test's directory.
func (e *env) profile(ref, tool string) {
	e.t.Helper()
	if _, err := e.reg.CreateProfile(registry.ProfileParams{Ref: ref, Tenant: tenant, Tool: tool, Name: tool,
		Home: filepath.Join(e.dir, "home-"+ref)}); err != nil {
		e.t.Fatalf("CreateProfile(%s): %v", ref, err)
	}
}

func (e *env) launch(ref, profile string) apitypes.Run {
	e.t.Helper()
	r, err := e.sup.Launch(context.Background(), supervisor.LaunchParams{RunRef: ref, Tenant: tenant, ProfileRef: profile})
	if err != nil {
		e.t.Fatalf("Launch(%s): %v", ref, err)
	}
	return r
}

func (e *env) input(ref, text string) {
	e.t.Helper()
	if err := e.sup.Input(context.Background(), ref, cliruntime.Input{Text: text}); err != nil {
		e.t.Fatalf("Input(%s, %q): %v", ref, text, err)
	}
}

// launchIdle launches a fake run and waits for its handshake.
func (e *env) launchIdle(ref string) apitypes.Run {
	e.t.Helper()
	e.profile("prof_"+strings.TrimPrefix(ref, "run_"), "fake")
	r := e.launch(ref, "prof_"+strings.TrimPrefix(ref, "run_"))
	// R-CRT-1, R-STATE-3 row 3: spawned, and the handshake may be pending.
	if r.State != apitypes.StateStarting && r.State != apitypes.StateIdle {
		e.t.Fatalf("Launch: state %s, want starting or idle", r.State)
	}
	return e.awaitState(ref, apitypes.StateIdle)
}

// TestFakeLaunchInput: launch, handshake, one turn, and the ledger of it
// (R-CRT-4, R-IN-1, R-EVT-3, R-EVT-4).
func TestFakeLaunchInput(t *testing.T) {
	e, store := fakeEnv(t)
	e.profile("prof_fake1", "fake")
	r := e.launch("run_fake1", "prof_fake1")
	if r.Generation != 1 || r.PID == 0 || r.LiveRef != "run_fake1.1" {
		t.Fatalf("Launch: generation %d pid %d live_ref %q, want 1, a pid, run_fake1.1", r.Generation, r.PID, r.LiveRef)
	}
	if r.State != apitypes.StateStarting && r.State != apitypes.StateIdle {
		t.Fatalf("Launch: state %s, want starting or idle (R-STATE-3)", r.State)
	}
	if r.ExitCode != nil || r.Signal != "" || r.EndedAt != nil {
		t.Fatalf("Launch: exit %v signal %q ended %v on a live run", r.ExitCode, r.Signal, r.EndedAt)
	}
	idle := e.awaitState("run_fake1", apitypes.StateIdle)
	convs := store.Conversations()
	if len(convs) != 1 || idle.ConversationID != convs[0] {
		t.Fatalf("conversation: run has %q, store has %v", idle.ConversationID, convs)
	}
	if live := e.sup.Live(); len(live) != 1 || live[0].RunRef != "run_fake1" || live[0].PID != r.PID {
		t.Fatalf("Live: got %+v, want run_fake1 pid %d", live, r.PID)
	}

	out := e.tail("run_fake1", 0)
	e.input("run_fake1", "hello there")
	out.awaitText(ring.Stdout, `pong: hello there`, `"status":"completed"`)
	e.awaitState("run_fake1", apitypes.StateIdle)

	// R-CRT-4: created, then started with the generation and pid; R-EVT-3:
	// input_accepted counts.
	evs := e.awaitKinds("run_fake1", ledger.KindCreated, ledger.KindStarted, ledger.KindInputAccepted)
	if evs[1].Generation != 1 || evs[1].PID != r.PID {
		t.Errorf("started: generation %d pid %d, want 1 and %d", evs[1].Generation, evs[1].PID, r.PID)
	}
	if d := detail(t, evs[2]); d["count"] != float64(1) || evs[2].Generation != 1 {
		t.Errorf("input_accepted: detail %v generation %d, want count 1, generation 1", d, evs[2].Generation)
	}
	// R-EVT-4: never the prompt text.
	for _, ev := range evs {
		if strings.Contains(string(ev.Detail), "hello") || strings.Contains(ev.Reason, "hello") {
			t.Errorf("event %s carries the input text: %s %s", ev.Kind, ev.Detail, ev.Reason)
		}
	}
	// The fake speaks on stdout only, beside the input's own frame
	// (R-ATT-11); one seq space from 1.
	frames := out.snapshot()
	if len(frames) == 0 || frames[0].Seq != 1 {
		t.Fatalf("frames: got %d, first %+v, want seq 1 first", len(frames), frames)
	}
	checkSeqs(t, frames)
	for _, f := range frames {
		if (f.Stream != ring.Stdout && f.Stream != ring.Input) || f.Generation != 1 {
			t.Fatalf("frame %d: stream %s generation %d, want stdout or input, 1", f.Seq, f.Stream, f.Generation)
		}
	}
}

// second is the error of a call that returns a value and an error.
func second[T any](_ T, err error) error { return err }

// TestFakeInterrupt: an idle interrupt is an accepted no-op (R-INT-2); a
// running turn is cancelled and the process stays (R-INT-1).
func TestFakeInterrupt(t *testing.T) {
	e, _ := fakeEnv(t)
	r := e.launchIdle("run_intr1")
	out := e.tail("run_intr1", 0)

	if noop, err := e.sup.Interrupt(context.Background(), "run_intr1"); err != nil || !noop {
		t.Fatalf("Interrupt on idle: noop %v, %v; want an accepted no-op that says so (R-INT-2)", noop, err)
	}
	ev := last(e.events("run_intr1"))
	if ev.Kind != ledger.KindInterrupted || detail(t, ev)["noop"] != true || ev.Generation != 1 {
		t.Fatalf("idle interrupt: got %s %s (generation %d), want interrupted {noop:true}", ev.Kind, ev.Detail, ev.Generation)
	}
	if got := e.get("run_intr1"); got.State != apitypes.StateIdle || got.PID != r.PID {
		t.Fatalf("after idle interrupt: state %s pid %d, want idle pid %d", got.State, got.PID, r.PID)
	}

	e.input("run_intr1", "slow")
	// R-STATE-3 row 4: a turn in progress.
	if got := e.get("run_intr1"); got.State != apitypes.StateRunning {
		t.Fatalf("during slow: state %s, want running", got.State)
	}
	out.awaitText(ring.Stdout, "tick1 ")
	if noop, err := e.sup.Interrupt(context.Background(), "run_intr1"); err != nil || noop {
		t.Fatalf("Interrupt during a turn: noop %v, %v", noop, err)
	}
	ev = last(e.events("run_intr1"))
	if ev.Kind != ledger.KindInterrupted || detail(t, ev)["noop"] != false {
		t.Fatalf("turn interrupt: got %s %s, want interrupted {noop:false}", ev.Kind, ev.Detail)
	}
	out.awaitText(ring.Stdout, `"status":"cancelled"`)
	got := e.awaitState("run_intr1", apitypes.StateIdle)
	// R-INT-1: the same process and generation.
	if got.PID != r.PID || got.Generation != 1 || got.LiveRef != r.LiveRef {
		t.Fatalf("after interrupt: pid %d generation %d live_ref %s, want %d 1 %s", got.PID, got.Generation, got.LiveRef, r.PID, r.LiveRef)
	}
	for _, ev := range e.events("run_intr1") {
		switch ev.Kind {
		case ledger.KindExited, ledger.KindLost, ledger.KindStopRequested, ledger.KindResumed:
			t.Fatalf("interrupt ended or replaced the process: %s", ev.Kind)
		}
	}
	// The process still takes turns.
	e.input("run_intr1", "after")
	out.awaitText(ring.Stdout, "pong: after")

	if _, err := e.sup.Stop(context.Background(), "run_intr1", 0); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// R-INT-2: no live process → 409.
	wantErr(t, "Interrupt on a stopped run", second(e.sup.Interrupt(context.Background(), "run_intr1")), supervisor.ErrNotLive)
}

// TestFakeStopResume: stop records stop_requested then exited (R-STOP-1/2);
// a second stop changes nothing (R-STOP-4); resume continues the same
// conversation in generation 2 (R-RES-1, R-RC-3) with one seq space across
// the generations (R-RC-6); a resume of a live run is refused (R-RES-6).
func TestFakeStopResume(t *testing.T) {
	e, store := fakeEnv(t)
	r := e.launchIdle("run_res1")
	out := e.tail("run_res1", 0)
	e.input("run_res1", "first words")
	out.awaitText(ring.Stdout, "pong: first words", `"status":"completed"`)
	conv := e.get("run_res1").ConversationID

	stopped, err := e.sup.Stop(context.Background(), "run_res1", 0)
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// R-STOP-2: the row comes back after the exit was observed; the fake
	// dies of SIGTERM (R-EXIT-3: a signal, no code), and the operator
	// stop makes it stopped (R-STATE-3 row 7).
	if stopped.State != apitypes.StateStopped || stopped.Signal != "SIGTERM" || stopped.ExitCode != nil ||
		stopped.PID != 0 || stopped.LiveRef != "" || stopped.EndedAt == nil {
		t.Fatalf("Stop: got state %s signal %q exit %v pid %d live_ref %q ended %v, want stopped by SIGTERM, not live",
			stopped.State, stopped.Signal, stopped.ExitCode, stopped.PID, stopped.LiveRef, stopped.EndedAt)
	}
	if end := out.awaitEnd(); end.Reason != "exited" {
		t.Fatalf("viewer end: %q, want exited (R-RC-9)", end.Reason)
	}
	evs := e.events("run_res1")
	n := len(evs)
	if n < 2 || evs[n-2].Kind != ledger.KindStopRequested || evs[n-1].Kind != ledger.KindExited ||
		evs[n-1].Signal != "SIGTERM" || evs[n-1].ExitCode != nil || evs[n-1].Generation != 1 || evs[n-1].PID != r.PID {
		t.Fatalf("stop events: got %v (last %+v), want ... stop_requested, exited SIGTERM", kinds(evs), last(evs))
	}

	// R-STOP-4: not live → the row as it is, no new ledger row.
	again, err := e.sup.Stop(context.Background(), "run_res1", 0)
	if err != nil || again.State != apitypes.StateStopped {
		t.Fatalf("second Stop: %v, state %s; want the stopped row", err, again.State)
	}
	if got := e.events("run_res1"); len(got) != n {
		t.Fatalf("second Stop wrote ledger rows: %v", kinds(got[n:]))
	}

	res, err := e.sup.Resume(context.Background(), "run_res1", nil, "")
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	// R-RES-1, R-RC-3: a new generation on the exact conversation.
	if res.Generation != 2 || res.ConversationID != conv || res.PID == 0 || res.PID == r.PID || res.LiveRef != "run_res1.2" {
		t.Fatalf("Resume: generation %d conversation %q pid %d live_ref %q, want 2, %q, a new pid, run_res1.2",
			res.Generation, res.ConversationID, res.PID, res.LiveRef, conv)
	}
	if res.State != apitypes.StateIdle {
		t.Fatalf("Resume: state %s, want idle (the handshake is confirmed before the answer)", res.State)
	}
	// R-EXIT-4: the new generation has no exit yet.
	if res.ExitCode != nil || res.Signal != "" || res.EndedAt != nil {
		t.Fatalf("Resume: exit %v signal %q ended %v carried over", res.ExitCode, res.Signal, res.EndedAt)
	}
	if got := store.Conversations(); len(got) != 1 || got[0] != conv {
		t.Fatalf("store after resume: %v, want only %s (R-RES-2)", got, conv)
	}
	evs = e.events("run_res1")
	if k := kinds(evs[n:]); !equal(k, []string{ledger.KindResumed, ledger.KindStarted}) ||
		evs[n].Generation != 2 || evs[n+1].Generation != 2 || evs[n+1].PID != res.PID {
		t.Fatalf("resume events: got %v, want resumed, started for generation 2", k)
	}

	// R-RES-6: a live run is not resumed again.
	_, err = e.sup.Resume(context.Background(), "run_res1", nil, "")
	wantErr(t, "Resume on a live run", err, supervisor.ErrRunLive)
	if got := e.get("run_res1"); got.Generation != 2 || got.PID != res.PID {
		t.Fatalf("refused resume changed the run: generation %d pid %d", got.Generation, got.PID)
	}

	out2 := e.tail("run_res1", e.get("run_res1").RingLast+1)
	e.input("run_res1", "history")
	out2.awaitText(ring.Stdout, "history: first words")
	if _, err := e.sup.Stop(context.Background(), "run_res1", 0); err != nil {
		t.Fatalf("Stop generation 2: %v", err)
	}

	// R-RC-6: replayed from the oldest, the seqs run on across both
	// generations without a gap or a repeat.
	frames, end := e.replay("run_res1")
	checkSeqs(t, frames)
	if frames[0].Seq != 1 || frames[0].Generation != 1 || last2(frames).Generation != 2 {
		t.Fatalf("replay: first %d/gen %d last gen %d, want seq 1 of generation 1 through generation 2",
			frames[0].Seq, frames[0].Generation, last2(frames).Generation)
	}
	if end.Reason != "exited" {
		t.Fatalf("replay end: %q, want exited", end.Reason)
	}
	if got := e.get("run_res1"); got.RingFirst != 1 || got.RingLast != last2(frames).Seq {
		t.Fatalf("row ring range %d..%d, want 1..%d", got.RingFirst, got.RingLast, last2(frames).Seq)
	}
}

func last2(fs []ring.Frame) ring.Frame { return fs[len(fs)-1] }

// TestFakeResumeConversationGone: a conversation the tool no longer has is
// 409 conversation_unavailable, and nothing falls back to a new one
// (R-RES-2).
func TestFakeResumeConversationGone(t *testing.T) {
	e, store := fakeEnv(t)
	e.launchIdle("run_gone1")
	out := e.tail("run_gone1", 0)
	e.input("run_gone1", "remember me")
	out.awaitText(ring.Stdout, "pong: remember me")
	conv := e.get("run_gone1").ConversationID
	if _, err := e.sup.Stop(context.Background(), "run_gone1", 0); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	store.Remove(conv)

	_, err := e.sup.Resume(context.Background(), "run_gone1", nil, "")
	wantErr(t, "Resume of a removed conversation", err, supervisor.ErrConversationUnavailable)
	if got := store.Conversations(); len(got) != 0 {
		t.Fatalf("store after a refused resume: %v, want no conversation (no fallback)", got)
	}
	got := e.get("run_gone1")
	// The refused generation is the last one: failed, and why (Facts).
	if got.State != apitypes.StateFailed || got.Reason != apitypes.ReasonConversationGone {
		t.Fatalf("after a refused resume: state %s reason %q, want failed %s", got.State, got.Reason, apitypes.ReasonConversationGone)
	}
	if apitypes.Live(got.State) || got.ConversationID != conv || len(e.sup.Live()) != 0 {
		t.Fatalf("after a refused resume: state %s conversation %q live %v, want not live, still %q",
			got.State, got.ConversationID, e.sup.Live(), conv)
	}
	// A second try is refused the same way and starts nothing new either.
	_, err = e.sup.Resume(context.Background(), "run_gone1", nil, "")
	wantErr(t, "second Resume", err, supervisor.ErrConversationUnavailable)
	if got := store.Conversations(); len(got) != 0 {
		t.Fatalf("store after a second refused resume: %v", got)
	}
}

// TestFakeInputChecks: the wrong field is 400 before the live check
// (R-IN-2, R-API-3); input to a run that is not live is 409 (R-IN-3).
func TestFakeInputChecks(t *testing.T) {
	e, _ := fakeEnv(t)
	e.launchIdle("run_input1")
	wrong := cliruntime.Input{Message: []byte(`"hi"`)}
	wantErr(t, "message to a text tool, live", e.sup.Input(context.Background(), "run_input1", wrong), cliruntime.ErrWrongInputField)
	wantErr(t, "no field, live", e.sup.Input(context.Background(), "run_input1", cliruntime.Input{}), cliruntime.ErrInvalidInput)
	if _, err := e.sup.Stop(context.Background(), "run_input1", 0); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	n := len(e.events("run_input1"))
	wantErr(t, "message to a text tool, stopped", e.sup.Input(context.Background(), "run_input1", wrong), cliruntime.ErrWrongInputField)
	wantErr(t, "text to a stopped run", e.sup.Input(context.Background(), "run_input1", cliruntime.Input{Text: "hi"}), supervisor.ErrNotLive)
	if got := e.events("run_input1"); len(got) != n {
		t.Fatalf("refused inputs wrote ledger rows: %v", kinds(got[n:]))
	}
	wantErr(t, "input to an unknown run", e.sup.Input(context.Background(), "run_nosuch1", cliruntime.Input{Text: "hi"}), supervisor.ErrRunNotFound)
}

// TestLaunchRefusals: refusals answer before anything is stored: an
// unknown profile is 404, sandbox on a node without bubblewrap is 422
// isolation_unsupported (R-TR-7),
// container without a runtime is 422 (R-TR-8).
func TestLaunchRefusals(t *testing.T) {
	e, _ := fakeEnv(t)
	e.profile("prof_ref1", "fake")
	ctx := context.Background()
	tests := []struct {
		name string
		p    supervisor.LaunchParams
		want error
	}{
		{"unknown profile", supervisor.LaunchParams{ProfileRef: "prof_nosuch1"}, registry.ErrNotFound},
		{"another tenant's profile", supervisor.LaunchParams{ProfileRef: "prof_ref1", Tenant: "ten_other1"}, registry.ErrNotFound},
		{"unknown workspace", supervisor.LaunchParams{ProfileRef: "prof_ref1", WorkspaceRef: "ws_nosuch1"}, registry.ErrNotFound},
		{"sandbox without bubblewrap", supervisor.LaunchParams{ProfileRef: "prof_ref1", Isolation: apitypes.IsolationSandbox}, supervisor.ErrIsolationUnsupported},
		{"container without podman or docker", supervisor.LaunchParams{ProfileRef: "prof_ref1", Isolation: apitypes.IsolationContainer}, supervisor.ErrIsolationUnsupported},
		{"unknown isolation", supervisor.LaunchParams{ProfileRef: "prof_ref1", Isolation: "vm"}, supervisor.ErrBadIsolation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			p.RunRef = "run_refused1"
			if p.Tenant == "" {
				p.Tenant = tenant
			}
			_, err := e.sup.Launch(ctx, p)
			wantErr(t, tt.name, err, tt.want)
			_, err = e.sup.Get("run_refused1")
			wantErr(t, "Get after a refused launch", err, supervisor.ErrRunNotFound)
			if runs, err := e.led.Runs(); err != nil || len(runs) != 0 {
				t.Fatalf("ledger after a refused launch: %v %v, want no run", runs, err)
			}
		})
	}
}
