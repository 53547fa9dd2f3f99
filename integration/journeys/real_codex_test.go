package journeys

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/sessions/cliruntime"
)

// realBin returns the folder of the pinned vendor CLIs (scripts/install-clis)
// holding name, or skips: R-DRV-8, OLIVARES_REAL_CLI=1 makes it a failure.
func realBin(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("OLIVARES_CLIS_BIN")
	if _, err := os.Stat(filepath.Join(dir, name)); dir == "" || err != nil {
		msg := "the pinned " + name + " is not installed (bash scripts/install-clis; scripts/test sets OLIVARES_CLIS_BIN)"
		if os.Getenv("OLIVARES_REAL_CLI") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

// J01 and J03 with the real Codex binary (0.169.0) through the coordinator,
// the tunnel and a real agent process, its turns answered by a fake
// Responses API on 127.0.0.1 (R-DRV-3, R-DRV-5; issue 4's coordinator-level
// battery, begun here): launch, attach, input, output, stop with the
// observed exit code, resume of the exact thread with its history.
func TestRealCodexThroughCoordinator(t *testing.T) {
	bin := realBin(t, "codex")
	byTransport(t, func(t *testing.T, transport string) {
		fake := fakemodel.NewOpenAI()
		defer fake.Close()
		f := setup(t, transport, integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
		var p apitypes.Profile
		f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{
			NodeID: f.agent.ID, Tool: "codex", Name: "codex-real", Home: filepath.Join(t.TempDir(), "home"),
			Env: map[string]string{"FAKE_OPENAI_KEY": "test"}}, &p)
		config := `model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.fake]
name = "Fake local"
base_url = "` + fake.BaseURL() + `"
wire_api = "responses"
env_key = "FAKE_OPENAI_KEY"
request_max_retries = 0
stream_max_retries = 0
`
		if err := os.WriteFile(filepath.Join(p.Home, ".codex", "config.toml"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		r := f.launch(p)
		idle := f.operator.AwaitRun(r.RunRef, wait, "the app-server handshake", func(r apitypes.Run) bool {
			return r.State == apitypes.StateIdle && r.ConversationID != ""
		})
		thread := idle.ConversationID

		s := f.viewer.Attach(r.RunRef, "from=0")
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("hello"), nil)
		s.UntilOutput("pong: hello", wait)
		f.operator.AwaitRun(r.RunRef, wait, "idle after the turn", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
		rollouts, _ := filepath.Glob(filepath.Join(p.Home, ".codex", "sessions", "*", "*", "*", "rollout-*"+thread+".jsonl"))
		if len(rollouts) != 1 {
			t.Fatalf("rollout files of thread %s: %v", thread, rollouts)
		}

		s = f.reconnectAndInterrupt(t, s, r.RunRef, fake.Push, integration.Text("hold on"))
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("next"), nil)
		s.UntilOutput("pong: next", wait)
		f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })

		// Codex exits 0 on SIGTERM (real-clis.md §2.1); the row says so.
		var stopped apitypes.Run
		f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, &stopped)
		if stopped.State != apitypes.StateStopped || stopped.ExitCode == nil || *stopped.ExitCode != 0 {
			t.Fatalf("stop: state %q exit %v signal %q", stopped.State, stopped.ExitCode, stopped.Signal)
		}
		s.Until(apitypes.SSEEnd, wait)

		// Resume: the same thread, and the model sees the earlier turn.
		var res apitypes.Run
		f.post(f.operator, http.StatusOK, r.RunRef, "resume", nil, &res)
		if res.Generation != 2 || res.ConversationID != thread {
			t.Fatalf("resume: gen %d thread %q, want 2 %q", res.Generation, res.ConversationID, thread)
		}
		s = f.viewer.Attach(r.RunRef, "")
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("again"), nil)
		s.UntilOutput("pong: again", wait)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		reqs, err := fake.Await(ctx, fakemodel.ResponsesPath, 4)
		if err != nil {
			t.Fatal(err)
		}
		said := reqs[len(reqs)-1].Said()
		if !slices.ContainsFunc(said, func(s string) bool { return strings.Contains(s, "hello") }) {
			t.Fatalf("the resumed turn's request holds no earlier turn: %q", said)
		}
		if again, _ := filepath.Glob(filepath.Join(p.Home, ".codex", "sessions", "*", "*", "*", "rollout-*.jsonl")); len(again) != 1 {
			t.Fatalf("resume wrote a new rollout: %v", again)
		}
		f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
	})
}

// reconnectAndInterrupt drops s, reconnects at last+1 (R-RC-1), and
// interrupts a turn the fake model holds open (R-INT-1): the first event
// after the reconnect is seq last+1, the turn is cancelled, and the process
// is the same. It returns the new stream.
func (f *fixture) reconnectAndInterrupt(t *testing.T, s *integration.Stream, ref string, push func(...fakemodel.Reply), input any) *integration.Stream {
	t.Helper()
	s.Close()
	last := f.viewer.Run(ref).RingLast
	s = f.viewer.Attach(ref, fmt.Sprintf("from=%d", last+1))
	before := f.operator.AwaitRun(ref, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	g := fakemodel.NewGate()
	defer g.Release()
	push(fakemodel.Held(g))
	f.post(f.operator, http.StatusAccepted, ref, "input", input, nil)
	ev, ok := s.Next(wait)
	if !ok || ev.Name != apitypes.SSEOutput || ev.Output(t).Seq != last+1 {
		t.Fatalf("first event after reconnecting at %d: %s %s", last+1, ev.Name, ev.Data)
	}
	select {
	case <-g.Arrived():
	case <-time.After(wait):
		t.Fatal("the held turn never reached the fake model")
	}
	f.post(f.operator, http.StatusAccepted, ref, "interrupt", nil, nil)
	after := f.operator.AwaitRun(ref, wait, "idle after the interrupt", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	if after.PID != before.PID || after.Generation != before.Generation {
		t.Fatalf("interrupt changed the process: pid %d gen %d, was pid %d gen %d", after.PID, after.Generation, before.PID, before.Generation)
	}
	return s
}
