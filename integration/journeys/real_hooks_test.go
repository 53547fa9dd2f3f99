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
// in the run's ledger and refuses the tool the profile denies (R-HOOK-1..3). Without the
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
	for _, hooks := range []bool{true, false} {
		var p apitypes.Profile
		req := apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "claude", Name: "hooks-" + map[bool]string{true: "on", false: "off"}[hooks],
			Home: filepath.Join(t.TempDir(), "home"), Env: env, EngineHooks: hooks}
		if hooks {
			req.DeniedTools = []string{"Bash"}
		}
		f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", req, &p)
		n := len(fake.ModelRequests())
		fake.Push(fakemodel.Tool("Bash", `{"command":"touch `+marker+`","description":"mark"}`), fakemodel.Text("done"))
		r := f.launch(p)
		s := f.viewer.Attach(r.RunRef, "")
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("run the command"), nil)
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
		_, ranErr := os.Stat(marker)
		if hooks {
			if model == "claude-from-the-project" {
				t.Fatal("with the engine's hooks the project's settings were loaded (R-PCS-15)")
			}
			if len(toolUses) != 1 || toolUses[0]["tool"] != "Bash" || toolUses[0]["decision"] != "deny" {
				t.Fatalf("tool_use events: %v, want one Bash deny", toolUses)
			}
			if ranErr == nil {
				t.Fatal("the denied Bash command ran")
			}
		} else {
			if model != "claude-from-the-project" {
				t.Fatalf("without the engine's hooks the request model is %q, want the project's", model)
			}
			if len(toolUses) != 0 {
				t.Fatalf("tool_use events without the engine's hooks: %v", toolUses)
			}
		}
		f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
	}
}
