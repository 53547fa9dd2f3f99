package journeys

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// calls reads the peer's call log in a profile home (fakecli: every start
// and every resume, J03).
func calls(t *testing.T, home string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(home, ".fakecli", "calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func globCount(t *testing.T, pattern string) int {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// J03 — interrupt and resume of the exact conversation (R-INT-1/2,
// R-RES-1..6, R-IN-2), with the codex and grok peers, and Claude Code's
// --resume.
func TestJ03InterruptResume(t *testing.T) {
	tools := []struct {
		tool string
		// input builds the right field; wrong is a field the driver does not take.
		input func(string) any
		wrong any
		// conversations globs the stored conversations under a home.
		conversations string
	}{
		{"codex", func(s string) any { return integration.Text(s) }, integration.Message("hi"), ".codex/sessions/*/*/*/rollout-*.jsonl"},
		{"grok", func(s string) any { return integration.Text(s) }, map[string]any{"line": map[string]string{"type": "user"}}, ".grok/sessions/*/*"},
		{"claude", func(s string) any { return integration.Message(s) }, integration.Text("hi"), ".claude/projects/*/*.jsonl"},
	}
	byTransport(t, func(t *testing.T, transport string) {
		f := setup(t, transport, integration.ProcOptions{})
		for _, tt := range tools {
			t.Run(tt.tool, func(t *testing.T) {
				p := f.profile(tt.tool)
				r := f.launch(p)
				ref := r.RunRef
				// R-IN-2: the wrong field for the driver is 400.
				if got := f.operator.Call(http.MethodPost, "/v1/m/sessions/runs/"+ref+"/input", tt.wrong); got.Status != http.StatusBadRequest {
					t.Fatalf("wrong input field: %d %s, want 400", got.Status, got.Body)
				}
				s := f.viewer.Attach(ref, "")
				f.post(f.operator, http.StatusAccepted, ref, "input", tt.input("hello"), nil)
				s.UntilOutput("pong: hello", wait)
				idle := f.operator.AwaitRun(ref, wait, "idle with a conversation", func(r apitypes.Run) bool {
					return r.State == apitypes.StateIdle && r.ConversationID != ""
				})
				conv, pid := idle.ConversationID, idle.PID

				// Interrupt cancels the running turn; the process stays
				// (R-INT-1). Idle, it is a no-op (R-INT-2).
				f.post(f.operator, http.StatusAccepted, ref, "input", tt.input("slow"), nil)
				f.operator.AwaitRun(ref, wait, "running", func(r apitypes.Run) bool { return r.State == apitypes.StateRunning })
				var acc apitypes.Accepted
				f.post(f.operator, http.StatusAccepted, ref, "interrupt", nil, &acc)
				if acc.Noop {
					t.Fatal("the interrupt of a running turn said noop")
				}
				after := f.operator.AwaitRun(ref, wait, "idle after interrupt", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
				if after.PID != pid || after.Generation != 1 {
					t.Fatalf("interrupt changed the process: pid %d→%d gen %d", pid, after.PID, after.Generation)
				}
				f.post(f.operator, http.StatusAccepted, ref, "interrupt", nil, &acc)
				if !acc.Noop {
					t.Fatal("the interrupt of an idle run did not say noop (R-INT-2)")
				}
				evs := f.viewer.Events(ref)
				var noops []bool
				for _, e := range evs {
					if e.Kind == "interrupted" {
						var d struct{ Noop bool }
						json.Unmarshal(e.Detail, &d)
						noops = append(noops, d.Noop)
					}
				}
				if len(noops) != 2 || noops[0] || !noops[1] {
					t.Fatalf("interrupted rows noop=%v, want [false true]", noops)
				}

				// Resume on a live run is 409 (R-RES-6).
				if got := f.operator.Call(http.MethodPost, "/v1/m/sessions/runs/"+ref+"/resume", nil); got.Status != http.StatusConflict {
					t.Fatalf("resume while live: %d %s", got.Status, got.Body)
				}
				f.post(f.operator, http.StatusOK, ref, "stop", nil, nil)

				// Resume: generation 2 on the same conversation (R-RES-1);
				// the peer was asked for exactly that id.
				var res apitypes.Run
				f.post(f.operator, http.StatusOK, ref, "resume", nil, &res)
				if res.Generation != 2 || res.ConversationID != conv || !apitypes.Live(res.State) {
					t.Fatalf("resume: gen %d conv %q state %q, want gen 2 conv %q live", res.Generation, res.ConversationID, res.State, conv)
				}
				// The child logs its start itself: wait for it.
				integration.Await(t, wait, "the peer to log the resume of "+conv+" (R-RES-1)", func() bool {
					n := 0
					for _, c := range calls(t, p.Home) {
						if c["resume"] == conv {
							n++
						}
					}
					return n == 1
				})
				f.post(f.operator, http.StatusAccepted, ref, "input", tt.input("history"), nil)
				s = f.viewer.Attach(ref, "")
				s.UntilOutput("hello", wait)
				f.operator.AwaitRun(ref, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
				f.post(f.operator, http.StatusOK, ref, "stop", nil, nil)

				// The stored conversation removed: 409 and no new one
				// (R-RES-2).
				pattern := filepath.Join(p.Home, tt.conversations)
				for _, m := range must(filepath.Glob(pattern)) {
					if err := os.RemoveAll(m); err != nil {
						t.Fatal(err)
					}
				}
				got := f.operator.Call(http.MethodPost, "/v1/m/sessions/runs/"+ref+"/resume", nil)
				if got.Status != http.StatusConflict || got.ErrorCode() != "conversation_unavailable" {
					t.Fatalf("resume of a removed conversation: %d %s, want 409 conversation_unavailable", got.Status, got.Body)
				}
				if n := globCount(t, pattern); n != 0 {
					t.Fatalf("a refused resume created %d conversations (R-RES-2)", n)
				}
				if now := f.operator.Run(ref); apitypes.Live(now.State) {
					t.Fatalf("run live after a refused resume: %+v", now)
				}
			})
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
