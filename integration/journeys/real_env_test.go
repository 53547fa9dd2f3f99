package journeys

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/integration/realcli"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// realBin returns the folder of the pinned vendor CLIs (scripts/install-clis)
// holding name, or skips: R-DRV-8, OLIVARES_REAL_CLI=1 makes it a failure.
func realBin(t *testing.T, name string) string {
	t.Helper()
	return realcli.BinDir(t, name)
}

// realClaudeProfile is a claude profile with a fresh home (R-DRV-5) whose
// model is the fake Messages API: only 127.0.0.1, and no minutes of retries
// (real-clis.md §1.9, §1.10).
func (f *fixture) realClaudeProfile(fake *fakemodel.Anthropic) apitypes.Profile {
	f.t.Helper()
	return f.realClaudeProfileWith(fake, apitypes.ProfileCreate{Name: "claude-real"})
}

// realClaudeProfileWith is realClaudeProfile with the profile's own fields
// (a name, an isolation).
func (f *fixture) realClaudeProfileWith(fake *fakemodel.Anthropic, pc apitypes.ProfileCreate) apitypes.Profile {
	f.t.Helper()
	var p apitypes.Profile
	pc.NodeID, pc.Tool, pc.Home = f.agent.ID, "claude", filepath.Join(realcli.HomeDir(f.t), "home")
	pc.Env = map[string]string{
		"ANTHROPIC_BASE_URL": fake.URL(), "ANTHROPIC_API_KEY": "test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0",
	}
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", pc, &p)
	return p
}

// realCodexProfile is a codex profile with a fresh home whose config.toml
// names the fake Responses API as its provider, with no retries
// (real-clis.md §2.4).
func (f *fixture) realCodexProfile(t *testing.T, fake *fakemodel.OpenAI) apitypes.Profile {
	t.Helper()
	return f.realCodexProfileWith(t, fake, apitypes.ProfileCreate{Name: "codex-real"}, "never")
}

// realCodexProfileWith is realCodexProfile with Codex's approval_policy
// ("on-request": Codex asks before it leaves its read-only sandbox) and
// the profile's own fields (a name, the approval policy).
func (f *fixture) realCodexProfileWith(t *testing.T, fake *fakemodel.OpenAI, pc apitypes.ProfileCreate, approval string) apitypes.Profile {
	t.Helper()
	var p apitypes.Profile
	// Outside /tmp: Codex's command sandbox needs its helper aliases
	// (real-clis.md §2.6).
	pc.NodeID, pc.Tool, pc.Home = f.agent.ID, "codex", filepath.Join(realcli.HomeDir(t), "home")
	pc.Env = map[string]string{"FAKE_OPENAI_KEY": "test"}
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", pc, &p)
	config := `model = "fake-model"
model_provider = "fake"
approval_policy = "` + approval + `"
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
	return p
}
