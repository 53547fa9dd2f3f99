package journeys

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-PCS-15 and R-ED-4 with the real Claude Code binary through the whole
// stack: a run of a profile with the engine's hooks loads none of the
// project's settings (--setting-sources ""), and every tool use passes the
// engine's PreToolUse hook (olivares-agent claude-hook), which records it
// in the run's ledger and refuses the tool the profile denies (R-HOOK-1..3, R-HOOK-5). Without the
// engine's hooks the same project's settings are loaded.
func TestRealClaudeEngineHooks(t *testing.T) {
	bin := realBin(t, "claude")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	f := setup(t, "yamux", integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	// The project's own settings name a model (not a flagged key).
	os.MkdirAll(filepath.Join(f.wsDir, ".claude"), 0o700)
	os.WriteFile(filepath.Join(f.wsDir, ".claude", "settings.json"), []byte(`{"model":"claude-from-the-project"}`), 0o600)
	env := map[string]string{"ANTHROPIC_BASE_URL": fake.URL(), "ANTHROPIC_API_KEY": "test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0"}
	marker := filepath.Join(t.TempDir(), "bash-ran")
	// hooks on with Bash denied: the hook refuses it (R-HOOK-3) and the run
	// shows the refusal, settled by policy (R-REQ-9). hooks on without a
	// denial: no rule decides, so the hook passes (never "allow"), Claude
	// Code asks, and a person denies (R-HOOK-5). hooks off: the same
	// request, and the project's settings are loaded.
	// hooks on with Bash denied under sandbox: the hook reaches the agent
	// from inside the boundary (docs/isolation.md).
	cases := []struct {
		name         string
		hooks, denyB bool
		isolation    string
	}{{"on", true, true, ""}, {"on-ask", true, false, ""}, {"off", false, false, ""}}
	if why := f.sandboxMissing(t); why == "" {
		cases = append(cases, struct {
			name         string
			hooks, denyB bool
			isolation    string
		}{"on-sandboxed", true, true, apitypes.IsolationSandbox})
	} else {
		t.Log(why)
	}
	for _, tc := range cases {
		var p apitypes.Profile
		req := apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "claude", Name: "hooks-" + tc.name,
			Home: f.env.ProfileHome(), Env: env, EngineHooks: tc.hooks, Isolation: tc.isolation}
		if tc.denyB {
			req.DeniedTools = []string{"Bash"}
		}
		f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", req, &p)
		n := len(fake.ModelRequests())
		fake.Push(fakemodel.Tool("Bash", `{"command":"touch `+marker+`","description":"mark"}`), fakemodel.Text("done"))
		r := f.launch(p)
		s := f.viewer.Attach(r.RunRef, "")
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("run the command"), nil)
		if !tc.denyB {
			asked := untilRequestEvent(t, s, apitypes.SSERequest)
			f.post(f.operator, http.StatusOK, r.RunRef, "requests/"+asked.ID, apitypes.RequestAnswer{Decision: "deny"}, nil)
		}
		s.UntilOutput(`"result":"done"`, wait)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		reqs, err := fake.Await(ctx, fakemodel.MessagesPath, n+2)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		model := reqs[n].Model
		var toolUses []map[string]string
		for _, e := range f.viewer.Events(r.RunRef) {
			if e.Kind == "tool_use" {
				var d map[string]string
				json.Unmarshal(e.Detail, &d)
				toolUses = append(toolUses, d)
			}
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: the denied Bash command ran", tc.name)
		}
		var denials []apitypes.RunRequest
		for _, q := range f.requestsOf(f.viewer, r.RunRef) {
			if q.Decision == apitypes.DecisionDeny && q.Tool == "Bash" {
				denials = append(denials, q)
			}
		}
		switch {
		case tc.denyB:
			if len(toolUses) != 1 || toolUses[0]["tool"] != "Bash" || toolUses[0]["decision"] != "deny" {
				t.Fatalf("%s: tool_use events: %v, want one Bash deny", tc.name, toolUses)
			}
			if len(denials) != 1 || denials[0].By != apitypes.ByPolicy {
				t.Fatalf("%s: requests %+v, want one Bash refusal by policy", tc.name, denials)
			}
		case tc.hooks:
			if len(toolUses) != 1 || toolUses[0]["decision"] != "pass" {
				t.Fatalf("%s: tool_use events: %v, want one pass, never an allow for a refused use", tc.name, toolUses)
			}
			if len(denials) != 1 || denials[0].By == apitypes.ByPolicy || denials[0].By == apitypes.ByTool {
				t.Fatalf("%s: requests %+v, want one Bash request a person denied", tc.name, denials)
			}
		default:
			if len(toolUses) != 0 {
				t.Fatalf("without the engine's hooks: tool_use events %v", toolUses)
			}
			if len(denials) != 1 {
				t.Fatalf("%s: requests %+v, want one Bash request a person denied", tc.name, denials)
			}
		}
		if tc.hooks && model == "claude-from-the-project" {
			t.Fatal("with the engine's hooks the project's settings were loaded (R-PCS-15)")
		}
		if !tc.hooks && model != "claude-from-the-project" {
			t.Fatalf("without the engine's hooks the request model is %q, want the project's", model)
		}
		f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
	}
}
