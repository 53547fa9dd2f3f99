//go:build linux

package supervisor_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/claude"
	"github.com/olivares-dev/olivares/agent/drivers/codex"
	"github.com/olivares-dev/olivares/agent/isolation"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// sandboxEnv is procEnv with the node's bubblewrap runner. Under
// scripts/test (OLIVARES_SANDBOX=1) a node where it does not run fails.
// Each of opts edits the options before the supervisor opens.
func sandboxEnv(t *testing.T, opts ...func(*supervisor.Options)) *env {
	t.Helper()
	sb, err := isolation.DetectSandbox(context.Background())
	if err != nil {
		if os.Getenv("OLIVARES_SANDBOX") == "1" {
			t.Fatalf("sandbox unavailable: %v", err)
		}
		t.Skipf("sandbox unavailable (set OLIVARES_SANDBOX=1 to fail instead): %v", err)
	}
	o := supervisor.Options{
		Path:    fakecliDir(t),
		Drivers: map[string]cliruntime.Driver{"claude": claude.New(), "codex": codex.New()},
		Runners: map[cliruntime.LaunchTransport]sessions.Runner{cliruntime.TransportStdio: sessions.NewProcRunner()},
		Sandbox: sb,
	}
	for _, f := range opts {
		f(&o)
	}
	return newEnv(t, o)
}

// withContainer adds the node's podman runner to an env's options, on the
// same terms as the sandbox's.
func withContainer(t *testing.T) func(*supervisor.Options) {
	t.Helper()
	c, err := isolation.DetectContainer(context.Background(), t.TempDir())
	if err != nil {
		if os.Getenv("OLIVARES_SANDBOX") == "1" {
			t.Fatalf("container unavailable: %v", err)
		}
		t.Skipf("container unavailable (set OLIVARES_SANDBOX=1 to fail instead): %v", err)
	}
	return func(o *supervisor.Options) { o.Container = c }
}

func procCmdline(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/cmdline" }

func (e *env) isolatedProfile(ref, tool, iso, network string) {
	e.t.Helper()
	if _, err := e.reg.CreateProfile(registry.ProfileParams{Ref: ref, Tenant: tenant, Tool: tool, Name: ref,
		Home: filepath.Join(e.dir, "home-"+ref), Policy: registry.ProfilePolicy{Isolation: iso, Network: network}}); err != nil {
		e.t.Fatalf("CreateProfile(%s): %v", ref, err)
	}
}

// TestSandboxRunLifecycle: a run of a profile with isolation=sandbox
// inherits it (R-TR-7) and behaves as a native run: the handshake, a turn,
// stop with the observed exit, resume of the same conversation; a native
// launch of that profile is 409 isolation_below_profile.
func TestSandboxRunLifecycle(t *testing.T) {
	// The child the agent spawned is bubblewrap, with the tool inside.
	runLifecycle(t, sandboxEnv(t), apitypes.IsolationSandbox, "bwrap\x00", "--unshare-net")
}

// TestContainerRunLifecycle is TestSandboxRunLifecycle under
// isolation=container: the child is podman, with the tool in a container
// named after the run.
func TestContainerRunLifecycle(t *testing.T) {
	runLifecycle(t, sandboxEnv(t, withContainer(t)), apitypes.IsolationContainer, "podman\x00", "--network=none", "olivares-run-run_isolated1-")
}

func runLifecycle(t *testing.T, e *env, iso string, cmdline ...string) {
	e.isolatedProfile("prof_isolated1", "codex", iso, isolation.NetworkNone)
	_, err := e.sup.Launch(context.Background(), supervisor.LaunchParams{RunRef: "run_native1", Tenant: tenant, ProfileRef: "prof_isolated1", Isolation: apitypes.IsolationNative})
	wantErr(t, "a native launch of an isolated profile", err, supervisor.ErrIsolationBelowProfile)

	r := e.launch("run_isolated1", "prof_isolated1")
	t.Cleanup(func() {
		if t.Failed() {
			frames, _ := e.replay("run_isolated1")
			for _, f := range frames {
				t.Logf("%s: %s", f.Stream, f.Data)
			}
		}
	})
	if r.Isolation != iso {
		t.Fatalf("isolation %q, want the profile's %s", r.Isolation, iso)
	}
	r = e.awaitState("run_isolated1", apitypes.StateIdle)
	cmd, err := os.ReadFile(procCmdline(r.PID))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range cmdline {
		if !strings.Contains(string(cmd), want) {
			t.Fatalf("the run's process is not contained (no %q): %q", want, cmd)
		}
	}
	out := e.tail("run_isolated1", 0)
	e.input("run_isolated1", "inside")
	out.awaitText(ring.Stdout, "pong: inside", `"turn/completed"`)
	e.awaitState("run_isolated1", apitypes.StateIdle)
	stopped, err := e.sup.Stop(context.Background(), "run_isolated1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if stopped.State != apitypes.StateStopped {
		t.Fatalf("after stop: state %s exit %s signal %q, want stopped", stopped.State, show(stopped.ExitCode), stopped.Signal)
	}
	res, err := e.sup.Resume(context.Background(), "run_isolated1", nil, "")
	if err != nil {
		t.Fatalf("resume under %s: %v", iso, err)
	}
	if res.ConversationID != r.ConversationID || res.Generation != 2 {
		t.Fatalf("resume: conversation %s generation %d, want %s and 2", res.ConversationID, res.Generation, r.ConversationID)
	}
	e.awaitState("run_isolated1", apitypes.StateIdle)
}

// TestSandboxResumeTakesProfile: a profile that isolates its runs from
// now on applies to the next resume of a native run (R-TR-7, R-MOVE-10):
// the run resumes under sandbox, the same conversation.
func TestSandboxResumeTakesProfile(t *testing.T) {
	e := sandboxEnv(t)
	e.isolatedProfile("prof_later1", "codex", "", "")
	r := e.launch("run_later1", "prof_later1")
	if r.Isolation != apitypes.IsolationNative {
		t.Fatalf("isolation %q, want native", r.Isolation)
	}
	r = e.awaitState("run_later1", apitypes.StateIdle)
	// A turn, so that Codex keeps the thread (its rollout).
	out := e.tail("run_later1", 0)
	e.input("run_later1", "native")
	out.awaitText(ring.Stdout, "pong: native", `"turn/completed"`)
	e.awaitState("run_later1", apitypes.StateIdle)
	if _, err := e.sup.Stop(context.Background(), "run_later1", 0); err != nil {
		t.Fatal(err)
	}
	iso := apitypes.IsolationSandbox
	if _, err := e.reg.UpdateProfile("prof_later1", tenant, registry.ProfileUpdate{Isolation: &iso}); err != nil {
		t.Fatal(err)
	}
	res, err := e.sup.Resume(context.Background(), "run_later1", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Isolation != apitypes.IsolationSandbox || res.ConversationID != r.ConversationID {
		t.Fatalf("resume: isolation %q conversation %s, want sandbox and %s", res.Isolation, res.ConversationID, r.ConversationID)
	}
	if cmd, err := os.ReadFile(procCmdline(res.PID)); err != nil || !strings.Contains(string(cmd), "bwrap\x00") {
		t.Fatalf("the resumed process is not contained: %q %v", cmd, err)
	}
}

// TestSandboxUnavailable: a node where bubblewrap does not work refuses a
// sandbox launch, and one of a sandbox profile, with 422 and the reason
// (R-TR-7), before anything is stored.
func TestSandboxUnavailable(t *testing.T) {
	e := newEnv(t, supervisor.Options{
		Path:               fakecliDir(t),
		Drivers:            map[string]cliruntime.Driver{"codex": codex.New()},
		Runners:            map[cliruntime.LaunchTransport]sessions.Runner{cliruntime.TransportStdio: sessions.NewProcRunner()},
		SandboxUnavailable: "bubblewrap (bwrap) is not installed; install the bubblewrap package",
	})
	e.profile("prof_plain1", "codex")
	e.isolatedProfile("prof_sandbox1", "codex", apitypes.IsolationSandbox, "")
	for _, p := range []supervisor.LaunchParams{
		{RunRef: "run_sandbox1", Tenant: tenant, ProfileRef: "prof_plain1", Isolation: apitypes.IsolationSandbox},
		{RunRef: "run_sandbox2", Tenant: tenant, ProfileRef: "prof_sandbox1"},
	} {
		_, err := e.sup.Launch(context.Background(), p)
		wantErr(t, "sandbox without bubblewrap", err, supervisor.ErrIsolationUnsupported)
		if !strings.Contains(err.Error(), "bubblewrap (bwrap) is not installed") {
			t.Fatalf("the refusal does not say why: %v", err)
		}
		_, err = e.sup.Get(p.RunRef)
		wantErr(t, "Get after a refused launch", err, supervisor.ErrRunNotFound)
	}
}
