package journeys

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) projectConfig(t *testing.T) apitypes.ProjectConfig {
	t.Helper()
	var pc apitypes.ProjectConfig
	f.viewer.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/workspaces/"+f.ws.Ref+"/project-config", nil, &pc)
	return pc
}

func flaggedPaths(pc apitypes.ProjectConfig) map[string]apitypes.ProjectConfigFile {
	out := map[string]apitypes.ProjectConfigFile{}
	for _, f := range pc.Files {
		out[f.Path] = f
	}
	return out
}

// J06 — the repository config gate (R-PCS-1..25, R-AUTH-6, R-RES-4), through
// the coordinator and a real agent process.
func TestJ06ProjectConfigGate(t *testing.T) {
	byTransport(t, func(t *testing.T, transport string) {
		f := setup(t, transport, integration.ProcOptions{})
		marker := filepath.Join(t.TempDir(), "executed")
		cfg := filepath.Join(f.wsDir, ".codex", "config.toml")
		writeFile(t, cfg, "model = \"gpt\"\nnotify = [\"touch\", \""+marker+"\"]\n")
		codex := f.profile("codex")

		// A codex launch is refused: it reads a flagged file (R-PCS-12).
		got := f.operator.Call(http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: codex.Ref, WorkspaceRef: f.ws.Ref})
		if got.Status != http.StatusConflict || got.ErrorCode() != "project_config_not_approved" ||
			!strings.Contains(string(got.Body), ".codex/config.toml") || !strings.Contains(string(got.Body), "approve-project-config") {
			t.Fatalf("codex launch on a flagged repo: %d %s", got.Status, got.Body)
		}
		pc := f.projectConfig(t)
		files := flaggedPaths(pc)
		cf, ok := files[".codex/config.toml"]
		if !ok || len(cf.Keys) != 1 || cf.Keys[0].Path != "notify" || !strings.Contains(string(cf.Keys[0].Value), marker) || pc.SHA256 == "" || pc.Approved {
			t.Fatalf("project-config: %+v", pc)
		}
		if !strings.Contains(string(got.Body), pc.SHA256) {
			t.Fatalf("the refusal does not name the hash %s: %s", pc.SHA256, got.Body)
		}

		// Approval: a person with workspace administration, the current hash.
		approvePath := "/v1/m/sessions/workspaces/" + f.ws.Ref + "/project-config/approve"
		botID, _ := f.env.PrincipalNamed(integration.Tenant, "bot", store.RoleAdmin, store.KindAgent)
		bot := f.env.Client(f.env.Credential(botID, store.CredSession))
		if got := bot.Call(http.MethodPost, approvePath, map[string]string{"sha256": pc.SHA256}); got.Status != http.StatusForbidden || got.ErrorCode() != "agent_identity_refused" {
			t.Fatalf("approval by an agent identity: %d %s", got.Status, got.Body)
		}
		if got := f.operator.Call(http.MethodPost, approvePath, map[string]string{"sha256": pc.SHA256}); got.Status != http.StatusForbidden {
			t.Fatalf("approval by an operator: %d", got.Status)
		}
		if got := f.admin.Call(http.MethodPost, approvePath, map[string]string{"sha256": "AB"}); got.Status != http.StatusBadRequest {
			t.Fatalf("a malformed hash: %d", got.Status)
		}
		if got := f.admin.Call(http.MethodPost, approvePath, map[string]string{"sha256": strings.Repeat("0", 64)}); got.Status != http.StatusConflict {
			t.Fatalf("a stale hash: %d", got.Status)
		}
		var approved apitypes.ProjectConfig
		f.admin.Must(http.StatusOK, http.MethodPost, approvePath, map[string]string{"sha256": pc.SHA256}, &approved)
		if !approved.Approved || approved.Approval == nil || approved.Approval.SHA256 != pc.SHA256 {
			t.Fatalf("approved: %+v", approved)
		}
		aud := audit(t, f.admin, "event="+apitypes.AuditWorkspaceApprovePCfg)
		if len(aud) != 1 || aud[0].Target.WorkspaceRef != f.ws.Ref {
			t.Fatalf("audit: %+v", aud)
		}
		r := f.launch(codex)
		var live []string
		defer func() {
			for _, ref := range live {
				f.post(f.operator, http.StatusOK, ref, "stop", nil, nil)
			}
		}()

		// An unflagged key changes nothing; one character of a flagged
		// value refuses launch and resume (R-PCS-13, R-RES-4).
		writeFile(t, cfg, "model = \"gpt-2\"\nnotify = [\"touch\", \""+marker+"\"]\n")
		f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("hello"), nil)
		f.operator.AwaitRun(r.RunRef, wait, "a conversation", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle && r.ConversationID != "" })
		f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
		live = append(live, f.launch(codex).RunRef)
		writeFile(t, cfg, "model = \"gpt-2\"\nnotify = [\"touch\", \""+marker+"x\"]\n")
		if got := f.operator.Call(http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: codex.Ref, WorkspaceRef: f.ws.Ref}); got.Status != http.StatusConflict {
			t.Fatalf("launch after a flagged change: %d %s", got.Status, got.Body)
		}
		if got := f.operator.Call(http.MethodPost, runURL(r.RunRef, "resume"), nil); got.Status != http.StatusConflict || got.ErrorCode() != "project_config_not_approved" {
			t.Fatalf("resume after a flagged change: %d %s", got.Status, got.Body)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the repository's notify command ran (R-PCS-1: read, never executed)")
		}

		// The depth rule (R-PCS-6, R-PCS-20): 30 header segments above 35
		// nested inline tables is 65 levels, unreadable; 34 is 64, fine.
		header := "[" + strings.TrimSuffix(strings.Repeat("s.", 30), ".") + "]\n"
		nest := func(n int) string {
			return "k = " + strings.Repeat("{a = ", n-1) + "{}" + strings.Repeat("}", n-1) + "\n"
		}
		os.Remove(cfg)
		writeFile(t, cfg, header+nest(35))
		if cf := flaggedPaths(f.projectConfig(t))[".codex/config.toml"]; cf.Unreadable != "too_deep" {
			t.Fatalf("65 levels: %+v, want unreadable too_deep", cf)
		}
		writeFile(t, cfg, header+nest(34))
		if cf, ok := flaggedPaths(f.projectConfig(t))[".codex/config.toml"]; ok {
			t.Fatalf("64 levels flagged: %+v", cf)
		}

		// .env: NO_PROXY is not flagged, HTTPS_PROXY is (R-PCS-4, R-PCS-22);
		// a URL password is masked in the output (R-PCS-25).
		writeFile(t, filepath.Join(f.wsDir, ".env"), "NO_PROXY=localhost\n")
		if _, ok := flaggedPaths(f.projectConfig(t))[".env"]; ok {
			t.Fatal(".env with NO_PROXY flagged")
		}
		writeFile(t, filepath.Join(f.wsDir, ".env"), "NO_PROXY=localhost\nhttps_proxy=http://user:hunter2@proxy:3128\n")
		pc = f.projectConfig(t)
		env := flaggedPaths(pc)[".env"]
		raw, _ := json.Marshal(env)
		if len(env.Keys) != 1 || strings.Contains(string(raw), "hunter2") || !strings.Contains(string(raw), "***") {
			t.Fatalf(".env with https_proxy: %s", raw)
		}
		// A symlinked .mcp.json is flagged (R-PCS-23).
		os.Symlink("/etc/hostname", filepath.Join(f.wsDir, ".mcp.json"))
		if mf := flaggedPaths(f.projectConfig(t))[".mcp.json"]; mf.Unreadable == "" {
			t.Fatalf("symlinked .mcp.json: %+v", mf)
		}

		// Claude: with the engine's hooks it reads none of these files and
		// is not refused; without them it is (R-PCS-15, R-PCS-19).
		writeFile(t, filepath.Join(f.wsDir, ".claude", "settings.json"), `{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"touch `+marker+`"}]}]}}`)
		var hooked apitypes.Profile
		f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{
			NodeID: f.agent.ID, Tool: "claude", Name: "claude-hooked", Home: f.env.ProfileHome(), EngineHooks: true}, &hooked)
		live = append(live, f.launch(hooked).RunRef)
		plain := f.profile("claude")
		if got := f.operator.Call(http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: plain.Ref, WorkspaceRef: f.ws.Ref}); got.Status != http.StatusConflict ||
			!strings.Contains(string(got.Body), ".claude/settings.json") {
			t.Fatalf("claude without the engine's hooks: %d %s", got.Status, got.Body)
		}
		// Grok reads none of the listed files (R-PCS-19, Q-35).
		live = append(live, f.launch(f.profile("grok")).RunRef)
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("a repository hook ran")
		}
	})
}
