// Package console runs the web console's journeys in a real headless
// Chromium (integration/browser) against a real coordinator and real
// olivares-agent processes whose children are the fakecli peer, and one
// journey with the real Claude Code against the fake Messages API.
package console

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

const wait = 30 * time.Second

func TestMain(m *testing.M) {
	integration.RaceDaemons = false // integration.RaceDaemons says why
	code := m.Run()
	browser.Stop()
	integration.RemoveBinaries()
	os.Exit(code)
}

type fixture struct {
	t     *testing.T
	env   *integration.Env
	agent *integration.AgentProc
	admin *integration.Client
	// adminID is the admin's principal: the browser signs in as them.
	adminID string
	ws      apitypes.Workspace
}

func setup(t *testing.T, o integration.ProcOptions, configure ...func(*coordd.Config)) *fixture {
	t.Helper()
	opts := integration.Options{Heartbeat: 2 * time.Second}
	if len(configure) > 0 {
		opts.Configure = configure[0]
	}
	env := integration.NewEnv(t, opts)
	a := env.StartAgentProcess(o)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent output:\n%s", a.Output())
		}
	})
	a.AwaitConnected(wait)
	p, _, err := env.Coord.Store.PrincipalByCredential(context.Background(), auth.Hash(env.AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, env: env, agent: a, admin: env.Client(env.AdminToken), adminID: p.ID}
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/workspaces",
		apitypes.WorkspaceCreate{NodeID: a.ID, Path: t.TempDir(), Name: "default"}, &f.ws)
	return f
}

func (f *fixture) profile(tool string, env map[string]string) apitypes.Profile {
	f.t.Helper()
	var p apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles",
		apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: tool, Name: fmt.Sprintf("%s-%d", tool, time.Now().UnixNano()%100000),
			Home: f.env.ProfileHome(), Env: env}, &p)
	return p
}

func (f *fixture) launch(c *integration.Client, p apitypes.Profile, name string) apitypes.Run {
	f.t.Helper()
	var r apitypes.Run
	c.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/runs",
		apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: f.ws.Ref, Name: name}, &r)
	return r
}

// link mints a one-time sign-in link for principal id, as dev mode and
// olivares-coordinator signin-link do.
func (f *fixture) link(id string) string {
	f.t.Helper()
	u, _, err := f.env.Coord.SigninLink(context.Background(), id, 0, f.env.CheckedURL())
	if err != nil {
		f.t.Fatal(err)
	}
	return u
}

// signIn opens a sign-in link for the admin in a new tab and waits for the
// sessions list.
func (f *fixture) signIn() *browser.Tab {
	f.t.Helper()
	tab := browser.New(f.t)
	tab.Navigate(f.link(f.adminID))
	tab.Await("the sessions list", `!!document.querySelector('.list-head h1')`, wait)
	return tab
}

func (f *fixture) principal(name, role string) (string, string) {
	return f.env.PrincipalNamed(integration.Tenant, name, role, store.KindHuman)
}
