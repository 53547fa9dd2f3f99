// Package devmode is the main job: a coordinator with one embedded local
// agent, set up on first start and reused after. The agent is enrolled
// through the real join-token flow and dials the real tunnel on loopback;
// there is no in-memory shortcut.
//
// devmode serves plain HTTP on loopback only.
package devmode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/olivares-dev/olivares/agent/agentd"
	agentenroll "github.com/olivares-dev/olivares/agent/enroll"
	"github.com/olivares-dev/olivares/agent/identity"
	"github.com/olivares-dev/olivares/agent/state"
	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Tenant is dev mode's tenant.
const Tenant = "default"

// DevFile is written when everything is ready.
const DevFile = "dev.json"

// Info is the content of dev.json.
type Info struct {
	APIURL      string `json:"api_url"`
	AdminToken  string `json:"admin_token"`
	Tenant      string `json:"tenant"`
	NodeID      string `json:"node_id"`
	AgentSocket string `json:"agent_socket"`
	CAFile      string `json:"ca_file"`
	// SigninURL is the one-time console sign-in link printed at start.
	// It is not written to dev.json: it works once, for 15 minutes.
	SigninURL string `json:"-"`
	// AdminPrincipal is the dev admin's principal id (signin-link
	// --principal).
	AdminPrincipal string `json:"admin_principal,omitempty"`
}

// Options of a dev run.
type Options struct {
	// StateDir: when empty, DefaultStateDir().
	StateDir string
	// HTTP is the API address (loopback). When empty, 127.0.0.1:7443.
	HTTP string
	// Tunnel is the tunnel address (loopback). When empty, 127.0.0.1:7444.
	Tunnel string
	// DisableQUIC leaves the UDP listener out.
	DisableQUIC bool
	// Out gets progress and the usage text. When nil, os.Stdout.
	Out io.Writer
	// Logf gets daemon logs. When nil, written to Out.
	Logf func(string, ...any)
	// Ready is called with the info once dev.json is written.
	Ready func(Info)
}

// DefaultStateDir is $XDG_STATE_HOME/olivares/dev, or ~/.local/state/olivares/dev.
func DefaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "olivares", "dev")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "olivares-dev")
	}
	return filepath.Join(home, ".local", "state", "olivares", "dev")
}

// Run sets up (or reuses) the dev fleet and serves until ctx ends.
func Run(ctx context.Context, o Options) error {
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir()
	}
	if o.HTTP == "" {
		o.HTTP = "127.0.0.1:7443"
	}
	if o.Tunnel == "" {
		o.Tunnel = "127.0.0.1:7444"
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Logf == nil {
		o.Logf = func(f string, a ...any) { fmt.Fprintf(o.Out, f+"\n", a...) }
	}
	if !coordd.IsLoopback(o.HTTP) {
		return fmt.Errorf("dev: --http %s is not a loopback address; dev mode serves plain HTTP on loopback only (use serve mode with TLS)", o.HTTP)
	}
	if !coordd.IsLoopback(o.Tunnel) {
		return fmt.Errorf("dev: --tunnel %s is not a loopback address", o.Tunnel)
	}
	dir, err := filepath.Abs(o.StateDir)
	if err != nil {
		return err
	}
	step := func(format string, a ...any) { fmt.Fprintf(o.Out, "dev: "+format+"\n", a...) }
	step("state in %s", dir)

	cfg := coordd.DefaultConfig()
	cfg.StateDir = filepath.Join(dir, "coordinator")
	cfg.API.Listen = o.HTTP
	cfg.API.Plain = true
	cfg.Tunnel.Listen = o.Tunnel
	cfg.Tunnel.DisableQUIC = o.DisableQUIC
	c, err := coordd.New(cfg, o.Logf)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		return err
	}
	step("coordinator up: api %s, tunnel %s", c.APIURL(), c.TunnelAddr())

	token, err := adminToken(ctx, c, dir)
	if err != nil {
		return err
	}

	agentDir := filepath.Join(dir, "agent")
	if err := enrollIfNeeded(ctx, c, agentDir, step); err != nil {
		return err
	}
	acfg := agentd.DefaultConfig()
	acfg.StateDir = agentDir
	acfg.Coordinator = c.TunnelAddr()
	acfg.WorktreeDir = filepath.Join(dir, "worktrees")
	if err := os.MkdirAll(acfg.WorktreeDir, 0o700); err != nil {
		return err
	}
	a, err := agentd.New(acfg, o.Logf)
	if err != nil {
		return err
	}
	actx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan error, 1)
	go func() { agentDone <- a.Run(actx) }()
	defer func() {
		stopAgent()
		<-agentDone
	}()

	step("waiting for node %s to connect...", a.NodeID())
	if err := awaitConnected(ctx, c, a.NodeID(), 30*time.Second, agentDone); err != nil {
		return err
	}
	if err := setupRuns(ctx, c, a, step); err != nil {
		return err
	}
	admin, _, err := c.Store.PrincipalByCredential(ctx, auth.Hash(token))
	if err != nil {
		return fmt.Errorf("dev: admin principal: %w", err)
	}
	signin, _, err := c.SigninLink(ctx, admin.ID, 0, "")
	if err != nil {
		return fmt.Errorf("dev: console sign-in link: %w", err)
	}
	info := Info{
		APIURL: c.APIURL(), AdminToken: token, Tenant: Tenant, NodeID: a.NodeID(),
		AgentSocket: a.SocketPath(), CAFile: c.CAFile(), SigninURL: signin, AdminPrincipal: admin.ID,
	}
	raw, _ := json.MarshalIndent(info, "", "  ")
	if err := certs.WriteFileAtomic(filepath.Join(dir, DevFile), append(raw, '\n'), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, `
Olivares dev mode is ready (node %s connected over %s).

  Console    %s
             (opens the web console signed in as the dev admin; the link works once,
              for 15 minutes: olivares-coordinator signin-link --principal %s
              --state-dir %s mints another)
  API        %s
  tenant     %s
  admin token in %s

Try:
  go run ./coordinator/cmd/olivares login --dev %s
  go run ./coordinator/cmd/olivares node list
  go run ./coordinator/cmd/olivares profile list
  go run ./coordinator/cmd/olivares session start --profile codex --workspace default
  go run ./agent/cmd/olivares-agent status --state-dir %s

Ctrl-C stops everything.
`, a.NodeID(), c.Fleet.Link(a.NodeID()).Transport, signin, admin.ID, cfg.StateDir, info.APIURL, Tenant, filepath.Join(dir, DevFile),
		filepath.Join(dir, DevFile), agentDir)
	if o.Ready != nil {
		o.Ready(info)
	}
	select {
	case <-ctx.Done():
		step("stopping")
		return nil
	case err := <-c.Errors():
		return err
	case err := <-agentDone:
		agentDone <- err
		if err == nil {
			err = errors.New("agent stopped")
		}
		return fmt.Errorf("dev: embedded agent: %w", err)
	}
}

// setupRuns makes dev mode ready to launch (issue 3): one profile per
// vendor CLI found on the agent's PATH, named after the tool, whose home is
// the user's own (so the CLI's existing login is used), and the directory
// dev mode was started in as workspace "default". Both are made once and
// kept across restarts.
func setupRuns(ctx context.Context, c *coordd.Coordinator, a *agentd.Agent, step func(string, ...any)) error {
	ps, err := c.Store.ListProfiles(ctx, Tenant)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, p := range ps {
		have[p.Name] = true
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return err
	}
	for _, cli := range a.Status(ctx).Capabilities.CLIs {
		if have[cli.Name] { // every CLI the agent looks for is a launchable tool
			continue
		}
		p, err := c.API.CreateProfile(ctx, Tenant, apitypes.ProfileCreate{NodeID: a.NodeID(), Tool: cli.Name, Name: cli.Name, Home: home})
		if err != nil {
			return fmt.Errorf("dev: profile %s: %w", cli.Name, err)
		}
		step("profile %s (%s, home %s)", p.Name, p.Ref, p.Home)
	}
	ws, err := c.Store.ListWorkspaces(ctx, Tenant)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if w.Name == "default" {
			return nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	w, err := c.API.CreateWorkspace(ctx, Tenant, apitypes.WorkspaceCreate{NodeID: a.NodeID(), Path: wd, Name: "default"})
	if err != nil {
		return fmt.Errorf("dev: workspace default: %w", err)
	}
	step("workspace default (%s, %s)", w.Ref, w.Path)
	return nil
}

// adminToken reuses dev.json's admin token when the store still knows it.
func adminToken(ctx context.Context, c *coordd.Coordinator, dir string) (string, error) {
	if raw, err := os.ReadFile(filepath.Join(dir, DevFile)); err == nil {
		var info Info
		if json.Unmarshal(raw, &info) == nil && info.AdminToken != "" {
			if _, _, err := c.Store.PrincipalByCredential(ctx, auth.Hash(info.AdminToken)); err == nil {
				return info.AdminToken, nil
			}
		}
	}
	tok, _, err := c.CreatePrincipal(ctx, Tenant, "dev-admin", store.RoleAdmin, store.KindHuman)
	return tok, err
}

func enrollIfNeeded(ctx context.Context, c *coordd.Coordinator, agentDir string, step func(string, ...any)) error {
	if state.Exists(agentDir) {
		db, err := state.Open(agentDir)
		if err != nil {
			return err
		}
		_, err = identity.Load(db, agentDir)
		db.Close()
		if err == nil {
			return nil
		}
		if !errors.Is(err, identity.ErrNotEnrolled) {
			return err
		}
	}
	host, _ := os.Hostname()
	iss, err := c.Enroll.CreateToken(ctx, Tenant, map[string]string{"dev": "true", "host": sanitize(host)}, 0)
	if err != nil {
		return err
	}
	step("enrolling the local agent as %s (join token, CA pin %s)", iss.NodeID, iss.CAPin)
	_, err = agentenroll.Enroll(ctx, agentenroll.Options{Coordinator: c.TunnelAddr(), Token: iss.Token, CAPin: iss.CAPin, StateDir: agentDir})
	return err
}

func sanitize(s string) string {
	b := []byte(s)
	for i, ch := range b {
		ok := ch == '.' || ch == '_' || ch == '-' || ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z'
		if !ok {
			b[i] = '-'
		}
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

func awaitConnected(ctx context.Context, c *coordd.Coordinator, nodeID string, d time.Duration, agentDone chan error) error {
	deadline := time.After(d)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !c.Fleet.Link(nodeID).Connected {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-agentDone:
			agentDone <- err
			return fmt.Errorf("dev: embedded agent stopped: %v", err)
		case <-deadline:
			return fmt.Errorf("dev: node %s did not connect within %v", nodeID, d)
		case <-t.C:
		}
	}
	return nil
}

// ReadInfo reads dev.json from a dev state dir.
func ReadInfo(dir string) (Info, error) {
	var info Info
	raw, err := os.ReadFile(filepath.Join(dir, DevFile))
	if err != nil {
		return info, err
	}
	return info, json.Unmarshal(raw, &info)
}
