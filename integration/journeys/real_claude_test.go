package journeys

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// J01 and J03 with the real Claude Code binary (2.1.328) through the
// coordinator, the tunnel and a real agent process, its turns answered by a
// fake Messages API on 127.0.0.1 (R-DRV-3, R-DRV-5, R-TR-2): a message in,
// the answer out on attach, SIGTERM observed as 143, and --resume of the
// same session appending to the same transcript with its history.
func TestRealClaudeThroughCoordinator(t *testing.T) {
	bin := realBin(t, "claude")
	byTransport(t, func(t *testing.T, transport string) {
		fake := fakemodel.NewAnthropic()
		defer fake.Close()
		f := setup(t, transport, integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
		p := f.realClaudeProfile(fake)
		r := f.launch(p)
		s := f.viewer.Attach(r.RunRef, "from=0")
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("hello"), nil)
		s.UntilOutput("pong: hello", wait)
		idle := f.operator.AwaitRun(r.RunRef, wait, "idle with its session id", func(r apitypes.Run) bool {
			return r.State == apitypes.StateIdle && r.ConversationID != ""
		})
		sid := idle.ConversationID
		if idle.ClaudeSessionID != sid {
			t.Fatalf("claude_session_id %q, conversation_id %q", idle.ClaudeSessionID, sid)
		}
		transcript := filepath.Join(p.Home, ".claude", "projects", "*", sid+".jsonl")
		if m, _ := filepath.Glob(transcript); len(m) != 1 {
			t.Fatalf("transcript %s: %v", transcript, m)
		}

		// Claude Code exits 143 on SIGTERM (real-clis.md §1.8).
		var stopped apitypes.Run
		f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, &stopped)
		if stopped.State != apitypes.StateStopped || stopped.ExitCode == nil || *stopped.ExitCode != 143 {
			t.Fatalf("stop: state %q exit %v signal %q", stopped.State, stopped.ExitCode, stopped.Signal)
		}

		var res apitypes.Run
		f.post(f.operator, http.StatusOK, r.RunRef, "resume", nil, &res)
		if res.Generation != 2 || res.ConversationID != sid {
			t.Fatalf("resume: gen %d session %q, want 2 %q", res.Generation, res.ConversationID, sid)
		}
		s = f.viewer.Attach(r.RunRef, "")
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("again"), nil)
		s.UntilOutput("pong: again", wait)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if _, err := fake.Await(ctx, fakemodel.MessagesPath, 2); err != nil {
			t.Fatal(err)
		}
		reqs := fake.ModelRequests()
		said := reqs[len(reqs)-1].Said()
		if !slices.ContainsFunc(said, func(s string) bool { return strings.Contains(s, "hello") }) {
			t.Fatalf("the resumed turn's request holds no earlier turn: %q", said)
		}
		if m, _ := filepath.Glob(filepath.Join(p.Home, ".claude", "projects", "*", "*.jsonl")); len(m) != 1 {
			t.Fatalf("resume wrote another transcript: %v", m)
		}

		// Reconnect at last+1, then interrupt a turn the fake model holds
		// open: cancelled by a control_request, the process stays and takes
		// the next turn (R-RC-1, R-INT-1).
		s = f.reconnectAndInterrupt(t, s, r.RunRef, fake.Push, integration.Message("hold on"))

		// R-LIM-1/4/5/7/8: a 429 ends the turn on a rate limit; the run
		// carries it under its profile, the ledger records it once, and
		// the next successful turn clears it.
		fake.Push(fakemodel.AnthropicRateLimited())
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("limited"), nil)
		lim := f.operator.AwaitRun(r.RunRef, wait, "a limit", func(r apitypes.Run) bool { return r.Limit != nil })
		if lim.Limit.Kind != "rate" || lim.Limit.AccountRef != p.Ref {
			t.Fatalf("limit %+v, want rate under %s", lim.Limit, p.Ref)
		}
		f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("fine"), nil)
		s.UntilOutput("pong: fine", wait)
		f.operator.AwaitRun(r.RunRef, wait, "the limit cleared", func(r apitypes.Run) bool { return r.Limit == nil })
		if n := countOf(integration.Kinds(f.viewer.Events(r.RunRef)), "limit_reached"); n != 1 {
			t.Fatalf("%d limit_reached rows, want 1", n)
		}
		f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
	})
}
