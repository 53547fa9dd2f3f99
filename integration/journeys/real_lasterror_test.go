package journeys

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/integration/realcli"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// errorEvents are the run's "error" lifecycle events' kinds.
func errorEvents(c *integration.Client, ref string) []string {
	var kinds []string
	for _, e := range c.Events(ref) {
		if e.Kind == "error" {
			var d map[string]string
			json.Unmarshal(e.Detail, &d)
			kinds = append(kinds, d["kind"])
		}
	}
	return kinds
}

// R-LERR-1..3 with the real Claude Code and Codex through the
// coordinator: a model that answers 401 leaves the run idle with a
// last_error of kind auth (and an error event), shown by GET /runs and
// GET /runs/{ref}; the next good turn clears it.
func TestRealLastError(t *testing.T) {
	for _, tool := range []string{"claude", "codex"} {
		t.Run(tool, func(t *testing.T) {
			bin := realBin(t, tool)
			f := setup(t, "yamux", integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
			var p apitypes.Profile
			var push func(...fakemodel.Reply)
			var unauthorized fakemodel.Reply
			input := integration.Text
			switch tool {
			case "claude":
				fake := fakemodel.NewAnthropic()
				defer fake.Close()
				p, push, input = f.realClaudeProfile(fake), fake.Push, integration.Message
				unauthorized = fakemodel.Reply{Status: http.StatusUnauthorized, Header: http.Header{"X-Should-Retry": {"false"}},
					Body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`}
			case "codex":
				fake := fakemodel.NewOpenAI()
				defer fake.Close()
				p, push = f.realCodexProfile(t, fake), fake.Push
				unauthorized = fakemodel.Reply{Status: http.StatusUnauthorized,
					Body: `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`}
			}
			r := f.launch(p)
			f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
			push(unauthorized)
			f.post(f.operator, http.StatusAccepted, r.RunRef, "input", input("hello"), nil)
			failed := f.operator.AwaitRun(r.RunRef, wait, "a last_error", func(r apitypes.Run) bool {
				return r.State == apitypes.StateIdle && r.LastError != nil
			})
			if failed.LastError.Kind != cliruntime.ErrorAuth || failed.LastError.Message == "" || failed.LastError.At.IsZero() {
				t.Fatalf("last_error %+v, want kind auth with the tool's message", failed.LastError)
			}
			var list apitypes.RunList
			f.viewer.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs", nil, &list)
			if len(list.Items) != 1 || list.Items[0].LastError == nil {
				t.Fatalf("GET /runs: %+v, want the run's last_error", list.Items)
			}
			// The ledger row is the saver's commit, a moment after the row.
			var kinds []string
			f.operator.AwaitRun(r.RunRef, wait, "an error event", func(apitypes.Run) bool {
				kinds = errorEvents(f.viewer, r.RunRef)
				return len(kinds) > 0
			})
			if len(kinds) != 1 || kinds[0] != cliruntime.ErrorAuth {
				t.Fatalf("error events %v, want one auth", kinds)
			}
			out, code := f.cli("session", "show", r.RunRef)
			if code != 0 || !strings.Contains(out, "last error") || !strings.Contains(out, "auth:") {
				t.Fatalf("session show: exit %d\n%s", code, out)
			}
			f.post(f.operator, http.StatusAccepted, r.RunRef, "input", input("again"), nil)
			f.operator.AwaitRun(r.RunRef, wait, "last_error cleared by a good turn", func(r apitypes.Run) bool {
				return r.State == apitypes.StateIdle && r.LastError == nil
			})
		})
	}
}

// R-LERR-1, R-LERR-2: a Codex that keeps retrying its provider
// ("Reconnecting... 1/2") says so in last_error while its turn still runs,
// instead of a run that looks busy and well; once the provider answers and
// the turn ends well, last_error is cleared.
func TestRealCodexReconnecting(t *testing.T) {
	bin := realBin(t, "codex")
	f := setup(t, "yamux", integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	fake := fakemodel.NewOpenAI()
	defer fake.Close()
	p := f.realCodexProfile(t, fake)
	cfg := filepath.Join(p.Home, ".codex", "config.toml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	retrying := strings.ReplaceAll(strings.ReplaceAll(string(b), "request_max_retries = 0", "request_max_retries = 2"), "stream_max_retries = 0", "stream_max_retries = 2")
	if err := os.WriteFile(cfg, []byte(retrying), 0o600); err != nil {
		t.Fatal(err)
	}
	gate := fakemodel.NewGate()
	defer gate.Release()
	down := fakemodel.Reply{Status: http.StatusServiceUnavailable, Body: `{"error":{"message":"fake: down","type":"server_error"}}`}
	// Codex retries the request twice without a word, then reconnects
	// ("Reconnecting... 1/2", measured on 0.169.0); the fourth answer holds.
	fake.Push(down, down, down, fakemodel.Held(gate))
	r := f.launch(p)
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("hello"), nil)
	got := f.operator.AwaitRun(r.RunRef, wait, "last_error while the turn runs", func(r apitypes.Run) bool {
		return r.LastError != nil
	})
	if got.LastError.Kind != cliruntime.ErrorRetrying || !strings.Contains(got.LastError.Message, "Reconnecting") || got.State != apitypes.StateRunning {
		t.Fatalf("while Codex retries: state %s last_error %+v, want running and reconnecting", got.State, got.LastError)
	}
	gate.Release()
	f.operator.AwaitRun(r.RunRef, wait, "idle, last_error cleared", func(r apitypes.Run) bool {
		return r.State == apitypes.StateIdle && r.LastError == nil
	})
}

// R-ACCT-8 with the real Claude Code: a profile with no API key and no
// sign-in gets "Not logged in · Please run /login" without a model request
// (real-clis.md §1.2). The run's last_error is kind auth, its attention
// failed, and session wait exits non-zero naming the profile and the
// command that signs it in, instead of printing idle and exiting 0.
func TestRealClaudeNotSignedIn(t *testing.T) {
	bin := realBin(t, "claude")
	f := setup(t, "yamux", integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	var p apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{
		NodeID: f.agent.ID, Tool: "claude", Name: "claude-nokey", Home: filepath.Join(realcli.HomeDir(t), "home"),
		Env: map[string]string{"ANTHROPIC_BASE_URL": fake.URL(), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0"},
	}, &p)
	r := f.launch(p)
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("hello"), nil)
	failed := f.operator.AwaitRun(r.RunRef, wait, "a last_error", func(r apitypes.Run) bool {
		return r.State == apitypes.StateIdle && r.LastError != nil
	})
	if failed.LastError.Kind != cliruntime.ErrorAuth || !strings.Contains(failed.LastError.Message, "Not logged in") {
		t.Fatalf("last_error %+v, want kind auth with Claude Code's Not logged in", failed.LastError)
	}
	if failed.Attention == nil || *failed.Attention != apitypes.AttentionFailed {
		t.Fatalf("attention %v, want failed", failed.Attention)
	}
	out, code := f.cli("session", "wait", r.RunRef, "--timeout", "20s")
	if code == 0 || !strings.Contains(out, "the account of profile claude-nokey is not signed in") || !strings.Contains(out, "olivares profile login claude-nokey") {
		t.Fatalf("session wait: exit %d\n%s\nwant non-zero naming the profile and olivares profile login", code, out)
	}
	if n := len(fake.Requests()); n != 0 {
		t.Fatalf("the model server saw %d requests, want none (no key, no sign-in)", n)
	}
}
