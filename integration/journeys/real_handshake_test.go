package journeys

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The handshake-only mode of the real-binary battery (R-DRV-3, R-DRV-4)
// through the coordinator, the tunnel and a real agent process: no model
// turn at all, every exchange a protocol handshake. Launch, attach from 0,
// the handshake's answer on attach, reconnect at last+1, stop with the
// observed exit code, and resume refused with 409 conversation_unavailable,
// because a conversation without a turn was never stored by the tool
// (R-RES-2: never a new conversation in its place). The fake model server
// is there only to prove that nothing reached it.

// TestRealClaudeHandshakeThroughCoordinator: the control-protocol
// initialize goes in as a raw line through POST input and its
// control_response comes out on attach (real-clis.md §1.7); SIGTERM is 143.
func TestRealClaudeHandshakeThroughCoordinator(t *testing.T) {
	bin := realBin(t, "claude")
	byTransport(t, func(t *testing.T, transport string) {
		fake := fakemodel.NewAnthropic()
		defer fake.Close()
		f := setup(t, transport, integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
		p := f.realClaudeProfile(fake)
		r := f.launch(p)
		s := f.viewer.Attach(r.RunRef, "from=0")
		var from uint64
		for i := 1; i <= 2; i++ {
			id := fmt.Sprintf("hs-%d", i)
			line := json.RawMessage(`{"type":"control_request","request_id":"` + id + `","request":{"subtype":"initialize"}}`)
			f.post(f.operator, http.StatusAccepted, r.RunRef, "input", apitypes.InputRequest{Line: line}, nil)
			outs := s.UntilOutput(`"request_id":"`+id+`"`, wait)
			if i == 2 && outs[0].Seq != from {
				t.Fatalf("first frame after reconnecting at %d: seq %d", from, outs[0].Seq)
			}
			if i == 1 {
				s, from = f.reconnect(t, s, r.RunRef)
			}
		}
		got := f.operator.Run(r.RunRef)
		if got.State != apitypes.StateIdle || got.ConversationID != "" {
			t.Fatalf("after handshakes: state %q conversation %q, want idle and none", got.State, got.ConversationID)
		}
		f.stopAndRefuseResume(t, s, r.RunRef, from, 143)
		if n := len(fake.Requests()); n != 0 {
			t.Fatalf("the handshakes made %d requests to the model server, want none", n)
		}
		if m, _ := filepath.Glob(filepath.Join(p.Home, ".claude", "projects", "*", "*.jsonl")); len(m) != 0 {
			t.Fatalf("transcripts after handshakes only: %v", m)
		}
	})
}

// TestRealCodexHandshakeThroughCoordinator: the app-server handshake
// (initialize, thread/start) names the thread without a model request; the
// run is idle with that thread; SIGTERM is 0 (real-clis.md §2.1), and the
// thread has no rollout (§2.3), so Codex itself refuses thread/resume.
func TestRealCodexHandshakeThroughCoordinator(t *testing.T) {
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
		s := f.viewer.Attach(r.RunRef, "from=0")
		s.UntilOutput(idle.ConversationID, wait)
		s, from := f.reconnect(t, s, r.RunRef)
		f.stopAndRefuseResume(t, s, r.RunRef, from, 0)
		if n := len(fake.Requests()); n != 0 {
			t.Fatalf("the handshake made %d requests to the model server, want none", n)
		}
		if m, _ := filepath.Glob(filepath.Join(p.Home, ".codex", "sessions", "*", "*", "*", "*.jsonl")); len(m) != 0 {
			t.Fatalf("rollouts after the handshake only: %v", m)
		}
	})
}

// reconnect drops s and attaches again at last+1 (R-RC-1), returning the
// new stream and the cursor it asked for.
func (f *fixture) reconnect(t *testing.T, s *integration.Stream, ref string) (*integration.Stream, uint64) {
	t.Helper()
	s.Close()
	from := f.viewer.Run(ref).RingLast + 1
	return f.viewer.Attach(ref, fmt.Sprintf("from=%d", from)), from
}

// stopAndRefuseResume stops ref, checks the exit code the agent observed
// and that s, attached at from, ends with nothing replayed below it; then
// that resume answers 409 conversation_unavailable and leaves the run not
// live (R-RES-2). Claude's refusal comes before any spawn, so its run stays
// stopped; Codex refuses thread/resume itself, so its run is the failed
// generation that asked, with that reason.
func (f *fixture) stopAndRefuseResume(t *testing.T, s *integration.Stream, ref string, from uint64, code int) {
	t.Helper()
	var stopped apitypes.Run
	f.post(f.operator, http.StatusOK, ref, "stop", nil, &stopped)
	if stopped.State != apitypes.StateStopped || stopped.ExitCode == nil || *stopped.ExitCode != code {
		t.Fatalf("stop: state %q exit %v signal %q, want stopped with %d", stopped.State, stopped.ExitCode, stopped.Signal, code)
	}
	ev, outs := s.Until(apitypes.SSEEnd, wait)
	if ev.Name != apitypes.SSEEnd {
		t.Fatalf("the stream ended with %q, want end", ev.Name)
	}
	for _, o := range outs {
		if o.Seq < from {
			t.Fatalf("seq %d after reconnecting at %d", o.Seq, from)
		}
	}
	got := f.operator.Call(http.MethodPost, "/v1/m/sessions/runs/"+ref+"/resume", nil)
	if got.Status != http.StatusConflict || got.ErrorCode() != "conversation_unavailable" {
		t.Fatalf("resume without a stored conversation: %d %s, want 409 conversation_unavailable", got.Status, got.Body)
	}
	after := f.operator.Run(ref)
	switch {
	case after.State == apitypes.StateStopped && after.Generation == stopped.Generation:
	case after.State == apitypes.StateFailed && after.Reason == apitypes.ReasonConversationGone:
	default:
		t.Fatalf("after the refused resume: state %q reason %q gen %d, want stopped gen %d or failed %s",
			after.State, after.Reason, after.Generation, stopped.Generation, apitypes.ReasonConversationGone)
	}
}
