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
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
)

// sandboxProbe is a command the model asks for: it writes a file in the
// workspace (writable inside the boundary) and says whether it sees the
// agent's state directory (it must not, docs/isolation.md).
func sandboxProbe(stateDir string) string {
	return "echo inside > sandboxed.txt && (cat " + filepath.Join(stateDir, "agent.toml") + " >/dev/null 2>&1 && echo SEES-STATE || echo no-state-dir)"
}

// awaitSandboxNode checks that the node says sandbox works here (its
// capabilities, R-TR-7), or skips as the sandbox's own tests do.
func (f *fixture) awaitSandboxNode(t *testing.T) { f.awaitIsolation(t, apitypes.IsolationSandbox) }

// awaitIsolation is awaitSandboxNode for isolation iso (sandbox or
// container).
func (f *fixture) awaitIsolation(t *testing.T, iso string) {
	t.Helper()
	if why := f.isolationMissing(t, iso); why != "" {
		t.Skip(why)
	}
}

// sandboxMissing says why sandbox does not work on the fixture's node, ""
// when it does; under OLIVARES_SANDBOX=1 (scripts/test) that fails t.
func (f *fixture) sandboxMissing(t *testing.T) string {
	return f.isolationMissing(t, apitypes.IsolationSandbox)
}

func (f *fixture) isolationMissing(t *testing.T, iso string) string {
	t.Helper()
	why := f.isolationMissingQuiet(t, iso)
	if why == "" {
		return ""
	}
	if os.Getenv("OLIVARES_SANDBOX") == "1" {
		t.Fatalf("the node says %s does not work: %s", iso, why)
	}
	return iso + " does not work on this node (set OLIVARES_SANDBOX=1 to fail instead): " + why
}

// The real Claude Code (2.1.328) with isolation=sandbox on its profile,
// through the coordinator, the tunnel and a real agent process (R-TR-7,
// docs/isolation.md): the run inherits sandbox, a turn answers, a command
// the model asks for is a request a person allows, and it writes its file
// in the workspace but cannot see the agent's state directory; an
// interrupt cancels a held turn in the same process; stop observes Claude
// Code's 143; resume continues the same session.
func TestRealClaudeSandboxed(t *testing.T) { realClaudeIsolated(t, apitypes.IsolationSandbox) }

// TestRealClaudeContainer is TestRealClaudeSandboxed with
// isolation=container on the profile: the same session in a podman
// container (docs/isolation.md).
func TestRealClaudeContainer(t *testing.T) { realClaudeIsolated(t, apitypes.IsolationContainer) }

func realClaudeIsolated(t *testing.T, iso string) {
	bin := realBin(t, "claude")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	f := setup(t, "yamux", integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath, Container: iso == apitypes.IsolationContainer})
	f.awaitIsolation(t, iso)
	p := f.realClaudeProfileWith(fake, apitypes.ProfileCreate{Name: "claude-" + iso, Isolation: iso})
	if p.Isolation != iso {
		t.Fatalf("profile isolation %q, want %s", p.Isolation, iso)
	}
	r := f.launch(p)
	if r.Isolation != iso {
		t.Fatalf("run isolation %q, want the profile's %s", r.Isolation, iso)
	}
	s := f.viewer.Attach(r.RunRef, "from=0")
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("hello"), nil)
	s.UntilOutput("pong: hello", wait)
	sid := f.operator.AwaitRun(r.RunRef, wait, "idle with its session id", func(r apitypes.Run) bool {
		return r.State == apitypes.StateIdle && r.ConversationID != ""
	}).ConversationID

	fake.Push(bash(sandboxProbe(f.agent.Dir)), fakemodel.Text("done-probe"))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("probe"), nil)
	asked := untilRequestEvent(t, s, apitypes.SSERequest)
	f.post(f.operator, http.StatusOK, r.RunRef, "requests/"+asked.ID, apitypes.RequestAnswer{Decision: "allow"}, nil)
	s.UntilOutput(`"result":"done-probe"`, wait)
	if b, err := os.ReadFile(filepath.Join(f.wsDir, "sandboxed.txt")); err != nil || string(b) != "inside\n" {
		t.Fatalf("sandboxed.txt: %q %v, want the allowed command's file in the workspace", b, err)
	}
	if outs := strings.Join(toolOutputs(fake), "|"); !strings.Contains(outs, "no-state-dir") {
		t.Fatalf("the model got %q, want the command not to see the agent's state directory", outs)
	}

	f.reconnectAndInterrupt(t, s, r.RunRef, fake.Push, integration.Message("hold on")).Close()

	var stopped apitypes.Run
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, &stopped)
	if stopped.State != apitypes.StateStopped || stopped.ExitCode == nil || *stopped.ExitCode != 143 {
		t.Fatalf("stop: state %q exit %v signal %q, want Claude Code's 143 (real-clis.md §1.8)", stopped.State, stopped.ExitCode, stopped.Signal)
	}
	var res apitypes.Run
	f.post(f.operator, http.StatusOK, r.RunRef, "resume", nil, &res)
	if res.Generation != 2 || res.ConversationID != sid || res.Isolation != iso {
		t.Fatalf("resume: gen %d session %q isolation %q, want 2 %q %s", res.Generation, res.ConversationID, res.Isolation, sid, iso)
	}
	s = f.viewer.Attach(r.RunRef, "")
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("again"), nil)
	s.UntilOutput("pong: again", wait)
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
}

// The real Codex (0.169.0, approval_policy on-request, read-only sandbox)
// with isolation=sandbox on its profile (R-TR-7): a turn; a command in
// Codex's own sandbox runs (its bubblewrap nests in the agent's); a
// command that asks to leave it is a request a person allows, and it
// writes its file in the workspace but cannot see the agent's state
// directory; interrupt; stop observes Codex's 0; resume continues the
// same thread.
func TestRealCodexSandboxed(t *testing.T) { realCodexIsolated(t, apitypes.IsolationSandbox) }

// TestRealCodexContainer is TestRealCodexSandboxed with
// isolation=container on the profile: Codex's own bubblewrap nests in the
// podman container.
func TestRealCodexContainer(t *testing.T) { realCodexIsolated(t, apitypes.IsolationContainer) }

func realCodexIsolated(t *testing.T, iso string) {
	bin := realBin(t, "codex")
	fake := fakemodel.NewOpenAI()
	defer fake.Close()
	f := setup(t, "yamux", integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath, Container: iso == apitypes.IsolationContainer})
	f.awaitIsolation(t, iso)
	p := f.realCodexProfileWith(t, fake, apitypes.ProfileCreate{Name: "codex-" + iso, Isolation: iso}, "on-request")
	r := f.launch(p)
	if r.Isolation != iso {
		t.Fatalf("run isolation %q, want the profile's %s", r.Isolation, iso)
	}
	thread := f.operator.AwaitRun(r.RunRef, wait, "the app-server handshake", func(r apitypes.Run) bool {
		return r.State == apitypes.StateIdle && r.ConversationID != ""
	}).ConversationID
	s := f.viewer.Attach(r.RunRef, "from=0")
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("hello"), nil)
	s.UntilOutput("pong: hello", wait)

	b, _ := json.Marshal(map[string]string{"cmd": "echo nested-ok"})
	fake.Push(fakemodel.Tool("exec_command", string(b)), fakemodel.Text("done-nested"))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("run echo"), nil)
	s.UntilOutput("done-nested", wait)
	if outs := strings.Join(codexOutputs(fake), "|"); !strings.Contains(outs, "nested-ok") {
		t.Fatalf("the model got %q, want the command's output from Codex's own sandbox", outs)
	}

	fake.Push(escalated(sandboxProbe(f.agent.Dir)), fakemodel.Text("done-probe"))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("probe"), nil)
	asked := untilRequestEvent(t, s, apitypes.SSERequest)
	f.post(f.operator, http.StatusOK, r.RunRef, "requests/"+asked.ID, apitypes.RequestAnswer{Decision: "allow"}, nil)
	s.UntilOutput("done-probe", wait)
	if b, err := os.ReadFile(filepath.Join(f.wsDir, "sandboxed.txt")); err != nil || string(b) != "inside\n" {
		t.Fatalf("sandboxed.txt: %q %v, want the allowed command's file in the workspace", b, err)
	}
	if outs := strings.Join(codexOutputs(fake), "|"); !strings.Contains(outs, "no-state-dir") {
		t.Fatalf("the model got %q, want the command not to see the agent's state directory", outs)
	}
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })

	f.reconnectAndInterrupt(t, s, r.RunRef, fake.Push, integration.Text("hold on")).Close()

	var stopped apitypes.Run
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, &stopped)
	if stopped.State != apitypes.StateStopped || stopped.ExitCode == nil || *stopped.ExitCode != 0 {
		t.Fatalf("stop: state %q exit %v signal %q, want Codex's 0 (real-clis.md §2.1)", stopped.State, stopped.ExitCode, stopped.Signal)
	}
	var res apitypes.Run
	f.post(f.operator, http.StatusOK, r.RunRef, "resume", nil, &res)
	if res.Generation != 2 || res.ConversationID != thread {
		t.Fatalf("resume: gen %d thread %q, want 2 %q", res.Generation, res.ConversationID, thread)
	}
	s = f.viewer.Attach(r.RunRef, "")
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("again"), nil)
	s.UntilOutput("pong: again", wait)
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
}

// A worktree launch under sandbox (R-WT-1, R-TR-7; the seeds' 422
// worktree_isolation is gone, decisions.md departure 26): the real Codex
// commits in its worktree on its branch, and cannot read the workspace's
// own working tree; `session show` marks each run's boundary plainly.
func TestRealCodexSandboxedWorktree(t *testing.T) {
	bin := realBin(t, "codex")
	fake := fakemodel.NewOpenAI()
	defer fake.Close()
	f := setup(t, "yamux", integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	f.awaitSandboxNode(t)
	newRepo(t, f.wsDir)
	p := f.realCodexProfileWith(t, fake, apitypes.ProfileCreate{Name: "codex-worktree", Isolation: apitypes.IsolationSandbox}, "on-request")
	yes := true
	var r apitypes.Run
	f.operator.Must(http.StatusCreated, http.MethodPost, runsPath,
		apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: f.ws.Ref, Worktree: &yes}, &r)
	if r.Isolation != apitypes.IsolationSandbox || r.WorktreeBranch == "" {
		t.Fatalf("worktree launch: isolation %q branch %q", r.Isolation, r.WorktreeBranch)
	}
	f.operator.AwaitRun(r.RunRef, wait, "the handshake", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	s := f.viewer.Attach(r.RunRef, "from=0")
	fake.Push(escalated("echo wt > wt.txt && git add wt.txt && git -c user.name=T -c user.email=t@example.com commit -qm sandboxed && echo committed; cat "+
		filepath.Join(f.wsDir, "README.md")+" || echo no-workspace"), fakemodel.Text("done-commit"))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("commit"), nil)
	asked := untilRequestEvent(t, s, apitypes.SSERequest)
	f.post(f.operator, http.StatusOK, r.RunRef, "requests/"+asked.ID, apitypes.RequestAnswer{Decision: "allow"}, nil)
	s.UntilOutput("done-commit", wait)
	outs := strings.Join(codexOutputs(fake), "|")
	if !strings.Contains(outs, "committed") || !strings.Contains(outs, "no-workspace") {
		t.Fatalf("the model got %q, want a commit in the worktree and no sight of the workspace", outs)
	}
	if got := gitRun(t, f.wsDir, "log", "-1", "--format=%s", r.WorktreeBranch); got != "sandboxed" {
		t.Fatalf("the run's branch %s ends at %q, want the sandboxed commit", r.WorktreeBranch, got)
	}
	if out, code := f.cli("node", "show", f.agent.ID); code != 0 || !strings.Contains(out, "yes (bubblewrap)") {
		t.Fatalf("node show (exit %d) does not say sandbox works:\n%s", code, out)
	}
	if out, code := f.cli("session", "show", r.RunRef); code != 0 || !strings.Contains(out, "sandbox (sees only its working directory and its profile home)") {
		t.Fatalf("session show of a sandboxed run (exit %d):\n%s", code, out)
	}
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)

	native := f.realCodexProfileWith(t, fake, apitypes.ProfileCreate{Name: "codex-native"}, "never")
	n := f.launch(native)
	if out, code := f.cli("session", "show", n.RunRef); code != 0 || !strings.Contains(out, "native (runs as the agent's user, can read the node's files)") {
		t.Fatalf("session show of a native run (exit %d):\n%s", code, out)
	}
	f.post(f.operator, http.StatusOK, n.RunRef, "stop", nil, nil)
}

// A node where bubblewrap is missing says why in its capabilities and in
// `node show`, and a sandbox launch there is 422 isolation_unsupported
// with that reason, before any run exists (R-TR-7).
func TestSandboxUnavailableNode(t *testing.T) {
	f := setup(t, "yamux", integration.ProcOptions{AgentPATH: t.TempDir(), Container: true}) // no bwrap or podman on the agent's PATH
	const why = "bubblewrap (bwrap) is not installed; install the bubblewrap package"
	if got := f.sandboxMissingQuiet(t); !strings.Contains(got, why) {
		t.Fatalf("capabilities' sandbox_error %q, want %q", got, why)
	}
	if out, code := f.cli("node", "show", f.agent.ID); code != 0 || !strings.Contains(out, "no: "+why) {
		t.Fatalf("node show (exit %d) does not say why sandbox does not run:\n%s", code, out)
	}
	p := f.profile("codex")
	resp := f.operator.Call(http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: f.ws.Ref, Isolation: apitypes.IsolationSandbox})
	if resp.Status != http.StatusUnprocessableEntity || resp.ErrorCode() != "isolation_unsupported" || !strings.Contains(string(resp.Body), why) {
		t.Fatalf("a sandbox launch: %d %s, want 422 isolation_unsupported with the reason", resp.Status, resp.Body)
	}
	var list apitypes.RunList
	f.operator.Must(http.StatusOK, http.MethodGet, runsPath, nil, &list)
	if len(list.Items) != 0 {
		t.Fatalf("a refused launch left %d runs", len(list.Items))
	}
	// No podman on its PATH either: container says why, and is 422 too.
	const noEngine = "neither podman nor docker is installed"
	if got := f.isolationMissingQuiet(t, apitypes.IsolationContainer); !strings.Contains(got, noEngine) {
		t.Fatalf("capabilities' container_error %q, want %q", got, noEngine)
	}
	if out, code := f.cli("node", "show", f.agent.ID); code != 0 || !strings.Contains(out, "container") || !strings.Contains(out, "no: "+noEngine) {
		t.Fatalf("node show (exit %d) does not say why container does not run:\n%s", code, out)
	}
	resp = f.operator.Call(http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: f.ws.Ref, Isolation: apitypes.IsolationContainer})
	if resp.Status != http.StatusUnprocessableEntity || resp.ErrorCode() != "isolation_unsupported" || !strings.Contains(string(resp.Body), noEngine) {
		t.Fatalf("a container launch: %d %s, want 422 isolation_unsupported with the reason", resp.Status, resp.Body)
	}
}

// sandboxMissingQuiet is the node's sandbox_error, "" when sandbox works.
func (f *fixture) sandboxMissingQuiet(t *testing.T) string {
	return f.isolationMissingQuiet(t, apitypes.IsolationSandbox)
}

// isolationMissingQuiet is the node's sandbox_error or container_error,
// "" when iso works.
func (f *fixture) isolationMissingQuiet(t *testing.T, iso string) string {
	t.Helper()
	var n apitypes.Node
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/nodes/"+f.agent.ID, nil, &n)
	var c proto.Capabilities
	if err := json.Unmarshal(n.Capabilities, &c); err != nil {
		t.Fatalf("capabilities %s: %v", n.Capabilities, err)
	}
	if iso == apitypes.IsolationContainer {
		if c.Container {
			return ""
		}
		return c.ContainerError
	}
	if c.Sandbox {
		return ""
	}
	return c.SandboxError
}
