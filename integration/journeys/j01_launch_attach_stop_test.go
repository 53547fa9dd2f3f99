package journeys

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// J01 — launch, attach, input, stop with the observed exit code (R-CRT-1,
// R-ATT-1, R-IN-1..4, R-STOP-1..3, R-EXIT-1..5, R-GET-1, R-TR-2, R-AUTH-2).
func TestJ01LaunchAttachInputStop(t *testing.T) {
	byTransport(t, func(t *testing.T, transport string) {
		f := setup(t, transport, integration.ProcOptions{})
		p := f.profile("claude")
		r := f.launch(p)
		if r.State != apitypes.StateStarting && r.State != apitypes.StateIdle {
			t.Fatalf("launch state %q, want starting or idle", r.State)
		}
		if r.Generation != 1 || r.PID == 0 || r.Driver != "claude" || r.WorkspacePath != f.ws.Path || r.ExitCode != nil {
			t.Fatalf("launched run: %+v", r)
		}

		// R-AUTH-2: a viewer reads but may not write.
		f.viewer.Run(r.RunRef)
		for _, action := range []string{"input", "interrupt", "stop", "resume"} {
			if got := f.viewer.Call(http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/"+action, integration.Message("hi")); got.Status != http.StatusForbidden {
				t.Errorf("viewer POST %s: %d %s, want 403", action, got.Status, got.Body)
			}
		}

		s := f.viewer.Attach(r.RunRef, "from=0")
		var acc apitypes.Accepted
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("hello"), &acc)
		if !acc.Accepted {
			t.Fatalf("input answer %+v", acc)
		}
		outs := s.UntilOutput("pong: hello", wait)
		// stderr is its own stream (R-TR-2): the peer writes X there.
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("stderr oops-on-stderr"), nil)
		outs = append(outs, s.UntilStream("stderr", "oops-on-stderr", wait)...)
		for i, o := range outs {
			if o.Stream == "stderr" && strings.Contains(o.Data, "pong") {
				t.Fatalf("protocol output on stderr: %+v", o)
			}
			if i > 0 && o.Seq <= outs[i-1].Seq {
				t.Fatalf("seq not strictly increasing: %d after %d", o.Seq, outs[i-1].Seq)
			}
			if o.Generation != 1 {
				t.Fatalf("generation %d", o.Generation)
			}
		}
		f.operator.AwaitRun(r.RunRef, wait, "idle after its turns", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })

		// Stop: SIGTERM to the group; Claude Code exits 143 on SIGTERM
		// (real-clis.md §1.8). The row shows the observed code.
		var stopped apitypes.Run
		f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, &stopped)
		if stopped.State != apitypes.StateStopped || stopped.ExitCode == nil || *stopped.ExitCode != 143 || stopped.Signal != "" {
			t.Fatalf("after stop: state %q exit %v signal %q", stopped.State, stopped.ExitCode, stopped.Signal)
		}
		end, _ := s.Until(apitypes.SSEEnd, wait)
		if !strings.Contains(string(end.Data), `"exit_code":143`) {
			t.Fatalf("end data %s", end.Data)
		}
		if !s.Ended(wait) {
			t.Fatal("stream still open after end")
		}
		got := f.viewer.Call(http.MethodGet, "/v1/m/sessions/runs/"+r.RunRef, nil)
		for _, field := range []string{`"success"`, `"ok"`, `"passed"`} {
			if strings.Contains(string(got.Body), field) {
				t.Fatalf("run carries a made-up %s field (R-GET-1): %s", field, got.Body)
			}
		}
		kinds := integration.Kinds(f.viewer.Events(r.RunRef))
		for _, want := range [][]string{{"created", "started"}, {"stop_requested", "exited"}} {
			if i := slices.Index(kinds, want[0]); i < 0 || i+1 >= len(kinds) || kinds[i+1] != want[1] {
				t.Fatalf("events %v: want %s then %s", kinds, want[0], want[1])
			}
		}
		if !slices.Contains(kinds, "input_accepted") {
			t.Fatalf("events %v: no input_accepted", kinds)
		}
		// R-STOP-4: stop on a run that is not live is an idempotent 200.
		f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
		if n := len(f.viewer.Events(r.RunRef)); n != len(kinds) {
			t.Fatalf("second stop added ledger rows: %d -> %d", len(kinds), n)
		}
		// Input to a run that is not live is 409 (R-IN-3).
		if got := f.operator.Call(http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/input", integration.Message("late")); got.Status != http.StatusConflict {
			t.Fatalf("input after stop: %d %s", got.Status, got.Body)
		}
	})
}

// J01 variants: exit codes 0 and 1 observed, a SIGTERM-ignoring child
// SIGKILLed after the grace (exit_code null, signal SIGKILL).
func TestJ01ExitCodes(t *testing.T) {
	byTransport(t, func(t *testing.T, transport string) {
		f := setup(t, transport, integration.ProcOptions{StopGrace: 300 * time.Millisecond})
		codex := f.profile("codex")

		// Codex exits 0 on SIGTERM (real-clis.md §2.1): stopped, 0.
		r := f.launch(codex)
		f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
		var out apitypes.Run
		f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, &out)
		if out.State != apitypes.StateStopped || out.ExitCode == nil || *out.ExitCode != 0 {
			t.Fatalf("codex stop: %q %v", out.State, out.ExitCode)
		}

		// A child that exits 1 by itself: failed, exit_code 1 (R-EXIT-5).
		r = f.launch(codex)
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("exit 1"), nil)
		out = f.operator.AwaitRun(r.RunRef, wait, "to exit", func(r apitypes.Run) bool { return !apitypes.Live(r.State) })
		if out.State != apitypes.StateFailed || out.ExitCode == nil || *out.ExitCode != 1 || out.Reason != apitypes.ReasonExitNonZero {
			t.Fatalf("exit 1: %+v", out)
		}

		// SIGTERM ignored: SIGKILL after the grace (R-STOP-1, R-EXIT-3).
		r = f.launch(f.profile("claude"))
		s := f.operator.Attach(r.RunRef, "")
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("ignore-term"), nil)
		s.UntilOutput("ignore", wait)
		f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
		f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, &out)
		if out.State != apitypes.StateStopped || out.ExitCode != nil || out.Signal != "SIGKILL" {
			t.Fatalf("ignore-term stop: state %q exit %v signal %q", out.State, out.ExitCode, out.Signal)
		}
		end, _ := s.Until(apitypes.SSEEnd, wait)
		if !strings.Contains(string(end.Data), `"signal":"SIGKILL"`) || strings.Contains(string(end.Data), "exit_code") {
			t.Fatalf("end data %s", end.Data)
		}
	})
}
