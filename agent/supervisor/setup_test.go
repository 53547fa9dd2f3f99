//go:build linux

package supervisor_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// setupEnv is sandboxEnv with a worktree directory, a git workspace
// (ws_repo1) and a codex profile (prof_setup1) that runs without
// isolation unless a launch asks for it.
func setupEnv(t *testing.T, timeout time.Duration, opts ...func(*supervisor.Options)) *env {
	t.Helper()
	wts := filepath.Join(t.TempDir(), "worktrees")
	e := sandboxEnv(t, append(opts, func(o *supervisor.Options) { o.WorktreeDir, o.SetupTimeout = wts, timeout })...)
	repo := filepath.Join(e.dir, "repo")
	for _, args := range [][]string{{"init", "-q", "-b", "main", repo}, {"-C", repo, "commit", "-q", "--allow-empty", "-m", "first"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	if _, err := e.reg.CreateWorkspace(registry.WorkspaceParams{Ref: "ws_repo1", Tenant: tenant, Name: "repo", Path: repo}); err != nil {
		t.Fatal(err)
	}
	e.profile("prof_setup1", "codex")
	return e
}

func (e *env) launchSetup(ref, iso, setup string) apitypes.Run {
	e.t.Helper()
	return e.launchSetupOf(ref, "prof_setup1", iso, setup)
}

func (e *env) launchSetupOf(ref, prof, iso, setup string) apitypes.Run {
	e.t.Helper()
	r, err := e.sup.Launch(context.Background(), supervisor.LaunchParams{RunRef: ref, Tenant: tenant, ProfileRef: prof,
		WorkspaceRef: "ws_repo1", Worktree: true, Isolation: iso, SetupCommand: setup})
	if err != nil {
		e.t.Fatalf("Launch(%s): %v", ref, err)
	}
	return r
}

// TestSetupRunsInSandbox: the approved setup command of a sandboxed
// worktree launch runs with sh -c in the new worktree, inside the run's
// boundary (it writes there and cannot read the agent's state file),
// before the tool, its stdout and stderr in the output as the setup
// stream (R-SETUP-2).
func TestSetupRunsInSandbox(t *testing.T) { setupRuns(t, setupEnv(t, 0), apitypes.IsolationSandbox) }

// TestSetupRunsInContainer is TestSetupRunsInSandbox under
// isolation=container: the same boundary, in the run's container runner.
func TestSetupRunsInContainer(t *testing.T) {
	setupRuns(t, setupEnv(t, 0, withContainer(t)), apitypes.IsolationContainer)
}

func setupRuns(t *testing.T, e *env, iso string) {
	cmd := `echo setup-out; echo setup-err >&2; pwd; echo made > setup.txt; cat ` + e.path + ` >/dev/null 2>&1 && echo state-readable || echo state-hidden`
	e.launchSetup("run_setup1", iso, cmd)
	out := e.tail("run_setup1", 0)
	r := e.awaitState("run_setup1", apitypes.StateIdle)
	out.awaitText(ring.Setup, "setup-out", "setup-err", "state-hidden", r.WorkspacePath)
	if strings.Contains(out.text(ring.Setup), "state-readable") {
		t.Fatalf("the setup command read the agent's state file: %q", out.text(ring.Setup))
	}
	if b, err := os.ReadFile(filepath.Join(r.WorkspacePath, "setup.txt")); err != nil || string(b) != "made\n" {
		t.Fatalf("setup.txt in the worktree: %q %v", b, err)
	}
	e.input("run_setup1", "after")
	out.awaitText(ring.Stdout, "pong: after")
	// Every setup frame comes before the tool's first output.
	lastSetup, firstOut := uint64(0), uint64(0)
	for _, f := range out.snapshot() {
		switch {
		case f.Stream == ring.Setup:
			lastSetup = f.Seq
		case f.Stream == ring.Stdout && firstOut == 0:
			firstOut = f.Seq
		}
	}
	if lastSetup == 0 || firstOut < lastSetup {
		t.Fatalf("setup frames up to seq %d, tool output from %d: want setup first", lastSetup, firstOut)
	}
}

// TestSetupFailure: a setup command that exits non-zero, or outlives its
// timeout, leaves the run failed with setup_failed, its output kept, and
// the tool never started (R-SETUP-2).
func TestSetupFailure(t *testing.T) {
	setupFails(t, setupEnv(t, 300*time.Millisecond), apitypes.IsolationSandbox)
}

// TestSetupFailureInContainer is TestSetupFailure under
// isolation=container, with a timeout that leaves podman time to start.
func TestSetupFailureInContainer(t *testing.T) {
	setupFails(t, setupEnv(t, 8*time.Second, withContainer(t)), apitypes.IsolationContainer)
}

// The commands name sleep by its path: the env's PATH is the fake
// tools' directory alone.
func setupFails(t *testing.T, e *env, iso string) {
	for _, c := range []struct{ ref, cmd, want string }{
		{"run_setupexit1", "echo broken; exit 3", "broken"},
		{"run_setuptimeout1", "echo slow; exec /bin/sleep 60", "slow"},
	} {
		ref := c.ref
		e.launchSetup(ref, iso, c.cmd)
		r := e.awaitState(ref, apitypes.StateFailed)
		if r.Reason != apitypes.ReasonSetupFailed || r.PID != 0 {
			t.Fatalf("%s: reason %q pid %d, want setup_failed and no process", ref, r.Reason, r.PID)
		}
		evs := e.awaitKinds(ref, ledger.KindCreated, ledger.KindFailed)
		if evs[1].Reason != apitypes.ReasonSetupFailed {
			t.Fatalf("%s: failed row %+v", ref, evs[1])
		}
		frames, end := e.replay(ref)
		text := ""
		for _, f := range frames {
			if f.Stream != ring.Setup {
				t.Fatalf("%s: a %s frame, want only setup output (the tool never started)", ref, f.Stream)
			}
			text += string(f.Data)
		}
		if !strings.Contains(text, c.want) || end.Reason != apitypes.ReasonSetupFailed {
			t.Fatalf("%s: output %q end %+v", ref, text, end)
		}
	}
}

// TestSetupNotRun: a native run never executes the setup command (it needs
// isolation), and a launch that carries none (no_setup, or no command)
// starts the tool at once (R-SETUP-2, R-SETUP-11).
func TestSetupNotRun(t *testing.T) {
	e := setupEnv(t, 0)
	for ref, iso := range map[string]string{"run_setupnative1": apitypes.IsolationNative, "run_setupnone1": apitypes.IsolationSandbox} {
		cmd := "echo made > setup.txt"
		if iso == apitypes.IsolationSandbox {
			cmd = ""
		}
		e.launchSetup(ref, iso, cmd)
		r := e.awaitState(ref, apitypes.StateIdle)
		if _, err := os.Stat(filepath.Join(r.WorkspacePath, "setup.txt")); !os.IsNotExist(err) {
			t.Fatalf("%s (%s): setup.txt exists (%v): the setup command ran", ref, iso, err)
		}
		for _, f := range e.tail(ref, 0).snapshot() {
			if f.Stream == ring.Setup {
				t.Fatalf("%s: a setup frame %q", ref, f.Data)
			}
		}
	}
}

// TestSetupStop: a stop while the setup command runs ends it at once (not
// after its timeout): the run is stopped, as asked, and the tool never
// started (R-SETUP-2, R-STATE-3).
func TestSetupStop(t *testing.T) {
	e := setupEnv(t, time.Hour)
	e.launchSetup("run_setupstop1", apitypes.IsolationSandbox, "echo waiting; exec /bin/sleep 3600")
	e.tail("run_setupstop1", 0).awaitText(ring.Setup, "waiting")
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	r, err := e.sup.Stop(ctx, "run_setupstop1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != apitypes.StateStopped || r.PID != 0 {
		t.Fatalf("after the stop: state %s pid %d, want stopped with no process", r.State, r.PID)
	}
	e.awaitKinds("run_setupstop1", ledger.KindCreated, ledger.KindStopRequested)
	frames, _ := e.replay("run_setupstop1")
	for _, f := range frames {
		if f.Stream != ring.Setup {
			t.Fatalf("a %s frame: the tool started", f.Stream)
		}
	}
}

// TestSetupAfterApproval: a launch its profile holds for a person's
// approval keeps its setup command and runs it when approved,
// before the tool (R-SETUP-2).
func TestSetupAfterApproval(t *testing.T) {
	e := setupEnv(t, 0)
	if _, err := e.reg.CreateProfile(registry.ProfileParams{Ref: "prof_held1", Tenant: tenant, Tool: "codex", Name: "held",
		Home: filepath.Join(e.dir, "home-held"), Policy: registry.ProfilePolicy{LaunchRequiresApproval: true}}); err != nil {
		t.Fatal(err)
	}
	r := e.launchSetupOf("run_setupheld1", "prof_held1", apitypes.IsolationSandbox, "echo held-setup > setup.txt; echo held-setup")
	if r.State != apitypes.StatePendingApproval {
		t.Fatalf("state %s, want pending_approval", r.State)
	}
	if _, err := os.Stat(filepath.Join(r.WorkspacePath, "setup.txt")); !os.IsNotExist(err) {
		t.Fatalf("the setup command ran before the approval (%v)", err)
	}
	out := e.tail("run_setupheld1", 0)
	if _, err := e.sup.Approve(context.Background(), "run_setupheld1", nil, ""); err != nil {
		t.Fatal(err)
	}
	out.awaitText(ring.Setup, "held-setup")
	e.awaitState("run_setupheld1", apitypes.StateIdle)
	if _, err := os.Stat(filepath.Join(r.WorkspacePath, "setup.txt")); err != nil {
		t.Fatalf("setup.txt after the approval: %v", err)
	}
}
