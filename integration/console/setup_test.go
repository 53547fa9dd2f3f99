package console

import (
	"context"
	"net/http"
	"os"
	"testing"

	"github.com/olivares-dev/olivares/agent/isolation"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-SETUP-2: the run view shows the setup command's output in a collapsed
// "setup" pane above the conversation, never as conversation; a run that
// ran none shows no such pane.
func TestSetupPane(t *testing.T) {
	if _, err := isolation.DetectSandbox(context.Background()); err != nil {
		if os.Getenv("OLIVARES_SANDBOX") == "1" {
			t.Fatalf("sandbox unavailable: %v", err)
		}
		t.Skipf("sandbox unavailable (set OLIVARES_SANDBOX=1 to fail instead): %v", err)
	}
	f := setup(t, integration.ProcOptions{})
	gitRun(t, f.ws.Path, "init", "-q", "-b", "main")
	gitRun(t, f.ws.Path, "commit", "-q", "--allow-empty", "-m", "one")
	var w apitypes.Workspace
	path := "/v1/m/sessions/workspaces/" + f.ws.Ref + "/setup-command"
	f.admin.Must(http.StatusOK, http.MethodPut, path, map[string]string{"command": "echo setup-line-one; echo setup-line-two >&2"}, &w)
	f.admin.Must(http.StatusOK, http.MethodPost, path+"/approve", map[string]string{"sha256": w.SetupCommandSHA256}, &w)
	p := f.profile("codex", nil)
	yes := true
	var withSetup, plain apitypes.Run
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/runs", apitypes.LaunchRequest{ProviderProfileRef: p.Ref,
		WorkspaceRef: f.ws.Ref, Worktree: &yes, Isolation: apitypes.IsolationSandbox, Name: "with setup"}, &withSetup)
	plain = f.launch(f.admin, p, "no setup")

	tab := f.signIn()
	f.open(tab, "/runs/"+withSetup.RunRef)
	tab.Await("the setup pane with both lines", `document.querySelector('#setup-box')?.hidden === false && document.querySelector('#setup').textContent.includes('setup-line-one') && document.querySelector('#setup').textContent.includes('setup-line-two')`, wait)
	tab.Await("the setup pane collapsed, above the conversation", `!document.querySelector('#setup-box').open && document.querySelector('#setup-box').compareDocumentPosition(document.querySelector('#timeline')) & Node.DOCUMENT_POSITION_FOLLOWING`, wait)
	tab.Type("#input", "after setup\r")
	tab.Await("the reply", hasItem("assistant", "pong: after setup"), wait)
	if browser.Eval[bool](tab, `[...document.querySelectorAll('#timeline .item')].some(e => e.textContent.includes('setup-line'))`) {
		t.Fatal("the setup output is in the conversation")
	}
	f.open(tab, "/runs/"+plain.RunRef)
	tab.Type("#input", "plain\r")
	tab.Await("the reply", hasItem("assistant", "pong: plain"), wait)
	tab.Await("no setup pane", `document.querySelector('#setup-box')?.hidden === true`, wait)
}
