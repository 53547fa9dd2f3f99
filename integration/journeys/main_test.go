// Package journeys runs the journeys J01–J08 (docs/rules/journeys.md) end to end: the
// coordinator's HTTP API, the tunnel on both transports (QUIC and yamux),
// and real olivares-agent processes whose children are the fakecli peer
// (R-DRV-2). Nothing sleeps; every wait has a deadline.
package journeys

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

const wait = 30 * time.Second

func TestMain(m *testing.M) {
	integration.RaceDaemons = false // integration.RaceDaemons says why
	code := pgtest.Main(m)
	integration.RemoveBinaries()
	os.Exit(code)
}

// transports are the two tunnel transports every journey runs on (R-DRV-7).
var transports = []string{"quic", "yamux"}

// fixture is one coordinator, one agent process, and credentials.
type fixture struct {
	t        *testing.T
	env      *integration.Env
	agent    *integration.AgentProc
	admin    *integration.Client
	operator *integration.Client
	viewer   *integration.Client
	ws       apitypes.Workspace
	wsDir    string
	cliDir   string // the olivares CLI's config dir, once logged in
}

func setup(t *testing.T, transport string, o integration.ProcOptions) *fixture {
	t.Helper()
	return setupEnv(t, transport, integration.Options{}, o)
}

// setupEnv is setup with the coordinator's options (a clock, say).
func setupEnv(t *testing.T, transport string, eo integration.Options, o integration.ProcOptions) *fixture {
	t.Helper()
	// A bulk flood delays heartbeats behind its data on one TCP
	// connection; under -race on 2 cores 3 × 500 ms is too tight.
	eo.Heartbeat = 2 * time.Second
	env := integration.NewEnv(t, eo)
	o.Transport = transport
	a := env.StartAgentProcess(o)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent output:\n%s", a.Output())
		}
	})
	a.AwaitConnected(wait)
	f := &fixture{t: t, env: env, agent: a,
		admin:    env.Client(env.AdminToken),
		operator: env.Client(env.Principal(integration.Tenant, store.RoleOperator, store.KindHuman)),
		viewer:   env.Client(env.Principal(integration.Tenant, store.RoleViewer, store.KindHuman)),
		wsDir:    t.TempDir(),
	}
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/workspaces",
		apitypes.WorkspaceCreate{NodeID: a.ID, Path: f.wsDir, Name: "w"}, &f.ws)
	return f
}

// profile creates a profile of tool with a fresh home (R-DRV-5). A gemini
// profile gets an API key, the fake's (and the real CLI's) simplest auth.
func (f *fixture) profile(tool string) apitypes.Profile {
	f.t.Helper()
	var p apitypes.Profile
	home := filepath.Join(f.t.TempDir(), "home")
	var env map[string]string
	if tool == "gemini" {
		env = map[string]string{"GEMINI_API_KEY": "test"}
	}
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles",
		apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: tool, Name: fmt.Sprintf("%s-%d", tool, time.Now().UnixNano()), Home: home, Env: env}, &p)
	return p
}

// launch starts a run of profile p in the fixture's workspace.
func (f *fixture) launch(p apitypes.Profile) apitypes.Run {
	f.t.Helper()
	var r apitypes.Run
	f.operator.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/runs",
		apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: f.ws.Ref}, &r)
	return r
}

func (f *fixture) post(c *integration.Client, want int, ref, action string, body, out any) integration.Response {
	f.t.Helper()
	return c.Must(want, http.MethodPost, "/v1/m/sessions/runs/"+ref+"/"+action, body, out)
}

// cli runs the real olivares binary, logged in as the fixture's admin, and
// returns its combined output and exit code.
func (f *fixture) cli(args ...string) (string, int) {
	f.t.Helper()
	run := func(args ...string) (string, int) {
		cmd := exec.Command(filepath.Join(integration.Binaries(f.t), "olivares"), args...)
		cmd.Env = append(os.Environ(), "OLIVARES_CONFIG_DIR="+f.cliDir)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			f.t.Fatal(err)
		}
		return string(out), 0
	}
	if f.cliDir == "" {
		f.cliDir = f.t.TempDir()
		if out, code := run("login", "--url", f.env.CheckedURL(), "--token", f.env.AdminToken, "--tenant", integration.Tenant); code != 0 {
			f.t.Fatalf("olivares login: exit %d %s", code, out)
		}
	}
	return run(args...)
}

// byTransport runs fn once per tunnel transport, in parallel.
func byTransport(t *testing.T, fn func(t *testing.T, transport string)) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			fn(t, tr)
		})
	}
}
