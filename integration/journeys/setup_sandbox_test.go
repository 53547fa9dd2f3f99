package journeys

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The workspace's approved setup command through the coordinator, the
// tunnel and a real agent process (R-SETUP-2, docs/isolation.md): a
// sandboxed worktree launch runs it in the new worktree before the tool,
// its output the setup stream on attach ahead of the tool's first output,
// unable to see the agent's state directory; a failing one leaves the run
// failed with setup_failed, the tool never started, and `session attach`
// shows its lines marked setup│; no_setup skips it; a native launch never
// runs it.
func TestSetupCommandSandboxed(t *testing.T) {
	f := setup(t, "yamux", integration.ProcOptions{})
	f.awaitSandboxNode(t)
	newRepo(t, f.wsDir)
	p := f.profile("codex")
	yes := true
	launch := func(iso string, noSetup bool) apitypes.Run {
		t.Helper()
		var r apitypes.Run
		f.operator.Must(http.StatusCreated, http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: p.Ref,
			WorkspaceRef: f.ws.Ref, Worktree: &yes, Isolation: iso, NoSetup: noSetup}, &r)
		return r
	}
	setCommand := func(cmd string) {
		t.Helper()
		var w apitypes.Workspace
		f.admin.Must(http.StatusOK, http.MethodPut, f.workspacePath(f.ws.Ref)+"/setup-command", map[string]string{"command": cmd}, &w)
		f.admin.Must(http.StatusOK, http.MethodPost, f.workspacePath(f.ws.Ref)+"/setup-command/approve", map[string]string{"sha256": w.SetupCommandSHA256}, &w)
	}

	setCommand("echo setup-begins; " + sandboxProbe(f.agent.Dir))
	r := launch(apitypes.IsolationSandbox, false)
	s := f.viewer.Attach(r.RunRef, "from=0")
	outs := s.UntilStream("setup", "no-state-dir", wait)
	for _, o := range outs {
		if o.Stream != "setup" {
			t.Fatalf("a %s frame %q before the setup command ended: want its output first", o.Stream, o.Data)
		}
	}
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("after setup"), nil)
	s.UntilOutput("pong: after setup", wait)
	if b, err := os.ReadFile(filepath.Join(r.WorkspacePath, "sandboxed.txt")); err != nil || string(b) != "inside\n" {
		t.Fatalf("the setup command's file in the worktree: %q %v", b, err)
	}

	// no_setup skips it; a native launch never runs it.
	for _, r := range []apitypes.Run{launch(apitypes.IsolationSandbox, true), launch(apitypes.IsolationNative, false)} {
		f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
		if _, err := os.Stat(filepath.Join(r.WorkspacePath, "sandboxed.txt")); !os.IsNotExist(err) {
			t.Fatalf("%s (%s): the setup command ran (%v)", r.RunRef, r.Isolation, err)
		}
	}

	setCommand("echo about-to-fail; exit 7")
	r = launch(apitypes.IsolationSandbox, false)
	got := f.operator.AwaitRun(r.RunRef, wait, "failed", func(r apitypes.Run) bool { return r.State == apitypes.StateFailed })
	if got.Reason != apitypes.ReasonSetupFailed || got.PID != 0 {
		t.Fatalf("failing setup: reason %q pid %d, want setup_failed and no process", got.Reason, got.PID)
	}
	out, code := f.cli("session", "attach", r.RunRef)
	if code != 0 || !strings.Contains(out, "setup│ about-to-fail") {
		t.Fatalf("session attach of the failed run: exit %d %s", code, out)
	}
	// The tool never started: only the setup stream is in the output.
	s = f.viewer.Attach(r.RunRef, "from=0")
	setupSeen := false
	for {
		ev, ok := s.Next(wait)
		if !ok {
			break
		}
		if ev.Name == apitypes.SSEOutput {
			if o := ev.Output(t); o.Stream != "setup" {
				t.Fatalf("a %s frame %q: the tool started", o.Stream, o.Data)
			}
			setupSeen = true
		}
	}
	if !setupSeen {
		t.Fatal("the failed run's output holds no setup frame")
	}
}
