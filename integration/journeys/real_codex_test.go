package journeys

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

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
		p := f.realCodexProfile(t, fake)
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

		// R-LIM-1/3/6/7/8: an HTTP 429 usage_limit_reached is a failed turn
		// typed usageLimitExceeded; the reset is the later of the two
		// exhausted windows of account/rateLimits/updated (real-clis.md
		// §2.5). The run carries it under its profile, the ledger records
		// it once (a second limited turn adds no row), and the next good
		// turn clears it.
		now := time.Now().Truncate(time.Second).UTC()
		late := now.Add(50 * time.Hour)
		windows := fakemodel.CodexWindows(
			&fakemodel.Window{UsedPercent: 100, Minutes: 300, ResetAt: now.Add(2 * time.Hour)},
			&fakemodel.Window{UsedPercent: 100, Minutes: 10080, ResetAt: late})
		for _, text := range []string{"limited", "still limited"} {
			fake.Push(fakemodel.OpenAIUsageLimit(windows))
			f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text(text), nil)
			s.UntilOutput(`"usageLimitExceeded"`, wait)
			lim := f.operator.AwaitRun(r.RunRef, wait, "a usage limit", func(r apitypes.Run) bool {
				return r.Limit != nil && r.State == apitypes.StateIdle
			})
			if lim.Limit.Kind != "usage" || lim.Limit.AccountRef != p.Ref || lim.Limit.ResetsAt == nil || !lim.Limit.ResetsAt.Equal(late) {
				t.Fatalf("limit %+v, want usage under %s resetting at %v", lim.Limit, p.Ref, late)
			}
		}
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("fine"), nil)
		s.UntilOutput("pong: fine", wait)
		f.operator.AwaitRun(r.RunRef, wait, "the limit cleared", func(r apitypes.Run) bool { return r.Limit == nil })
		// The clearing came after both limited turns were observed.
		if n := countOf(integration.Kinds(f.viewer.Events(r.RunRef)), "limit_reached"); n != 1 {
			t.Fatalf("%d limit_reached rows after two limited turns, want 1", n)
		}

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
	// The run's row is read once it is idle: a row read earlier may be
	// older than the output already seen (the index follows the ring).
	before := f.operator.AwaitRun(ref, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	last := before.RingLast
	s = f.viewer.Attach(ref, fmt.Sprintf("from=%d", last+1))
	g := fakemodel.NewGate()
	defer g.Release()
	push(fakemodel.Held(g))
	f.post(f.operator, http.StatusAccepted, ref, "input", input, nil)
	ev, ok := s.Next(wait)
	if !ok || ev.Name != apitypes.SSEOutput || ev.Output(t).Seq != last+1 {
		t.Fatalf("first event after reconnecting at %d: %s %s", last+1, ev.Name, ev.Data)
	}
	closedWithin(t, g.Arrived(), "the held turn never reached the fake model")
	f.post(f.operator, http.StatusAccepted, ref, "interrupt", nil, nil)
	after := f.operator.AwaitRun(ref, wait, "idle after the interrupt", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	if after.PID != before.PID || after.Generation != before.Generation {
		t.Fatalf("interrupt changed the process: pid %d gen %d, was pid %d gen %d", after.PID, after.Generation, before.PID, before.Generation)
	}
	return s
}
