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
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/olivares-dev/olivares/agent/agentd"
	agentenroll "github.com/olivares-dev/olivares/agent/enroll"
	"github.com/olivares-dev/olivares/agent/identity"
	"github.com/olivares-dev/olivares/agent/link"
	"github.com/olivares-dev/olivares/agent/state"
	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/coordinator/api"
	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/config"
	"github.com/olivares-dev/olivares/shared/logging"
)

// Tenant is dev mode's tenant.
const Tenant = "default"

// DevFile is written when everything is ready, and exists only while dev
// mode runs: on its way out dev mode renames it to LastFile, so that a
// script waiting for DevFile never takes a stopped dev mode's for a ready
// one (R-DEV-5, issue 32 finding 7). A DevFile left by a dev mode that was killed
// names a pid that is gone (olivares login --dev checks it).
const DevFile = "dev.json"

// LastFile is the DevFile of the last dev mode that stopped: the next start
// reuses its ports (R-DEV-3) and its admin token.
const LastFile = "dev.last.json"

// Info is the content of dev.json.
type Info struct {
	APIURL string `json:"api_url"`
	// Tunnel is the tunnel's host:port, where other agents enroll and
	// dial (olivares-agent enroll --coordinator).
	Tunnel      string `json:"tunnel"`
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
	// PID is the dev process's.
	PID int `json:"pid"`
	// MetricsURL is the /metrics of the coordinator's metrics listener.
	MetricsURL string `json:"metrics_url,omitempty"`
}

// Options of a dev run.
type Options struct {
	// StateDir: when empty, DefaultStateDir().
	StateDir string
	// HTTP is the API address (loopback). When empty, 127.0.0.1:7443.
	HTTP string
	// Tunnel is the tunnel address (loopback). When empty, 127.0.0.1:7444,
	// or a free port when HTTP asks for port 0 (R-DEV-3).
	Tunnel string
	// Reenroll enrolls the local agent again when its node was revoked,
	// and moves the node's profiles, workspaces and runs to the new one
	// (R-DEV-2).
	Reenroll bool
	// DisableQUIC leaves the UDP listener out.
	DisableQUIC bool
	// Metrics is the /metrics listener (loopback). When empty,
	// 127.0.0.1:0, a free port (dev.json has the URL).
	Metrics string
	// Out gets progress and the usage text. When nil, os.Stdout.
	Out io.Writer
	// Log gets the daemons' lines. When nil, text at LogLevel on Out
	// (R-OBS-1: dev mode's format is text).
	Log *slog.Logger
	// LogLevel is debug, info, warn or error. When empty, info.
	LogLevel string
	// Ready is called with the info once dev.json is written.
	Ready func(Info)
}

// stopRunsWithin bounds the stop of the live runs at Ctrl-C: the stop
// grace (10 s) and the SIGKILL after it.
const stopRunsWithin = 15 * time.Second

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
		if portOf(o.HTTP) == "0" {
			o.Tunnel = "127.0.0.1:0"
		}
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Log == nil {
		lc := logging.Config{Level: o.LogLevel}
		if err := lc.CheckAndSetDefaults(logging.FormatText); err != nil {
			return fmt.Errorf("dev: --log-level: %w", err)
		}
		o.Log = logging.New(o.Out, lc)
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
	// R-DEV-3: port 0 asks for a free port; the ports of the last start
	// are taken again while free, so that a saved login keeps working.
	if prev, err := readLast(dir); err == nil {
		if a := strings.TrimPrefix(prev.APIURL, "http://"); portOf(o.HTTP) == "0" && a != "" && portFree(a, false) {
			o.HTTP = a
		}
		if portOf(o.Tunnel) == "0" && prev.Tunnel != "" && portFree(prev.Tunnel, !o.DisableQUIC) {
			o.Tunnel = prev.Tunnel
		}
	}

	cfg := coordd.DefaultConfig()
	cfg.StateDir = filepath.Join(dir, "coordinator")
	cfg.API.Listen = o.HTTP
	cfg.API.Plain = true
	cfg.Tunnel.Listen = o.Tunnel
	cfg.Tunnel.DisableQUIC = o.DisableQUIC
	cfg.Metrics.Listen = o.Metrics
	if cfg.Metrics.Listen == "" {
		cfg.Metrics.Listen = "127.0.0.1:0"
	}
	if !coordd.IsLoopback(cfg.Metrics.Listen) {
		return fmt.Errorf("dev: --metrics %s: dev mode listens on loopback only", cfg.Metrics.Listen)
	}
	c, err := coordd.New(cfg, o.Log)
	if err != nil {
		return err
	}
	defer c.Close()
	// The store is this process's now (its lock is held): a dev.json still
	// here is a killed dev mode's, not ready.
	if err := retire(dir); err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	step("coordinator up: api %s, tunnel %s", c.APIURL(), c.TunnelAddr())

	token, err := adminToken(ctx, c, dir)
	if err != nil {
		return err
	}

	agentDir := filepath.Join(dir, "agent")
	if err := enrollIfNeeded(ctx, c, agentDir, o.Reenroll, step); err != nil {
		return err
	}
	acfg := agentd.DefaultConfig()
	acfg.StateDir = agentDir
	acfg.Coordinator = config.Addrs{c.TunnelAddr()}
	acfg.WorktreeDir = filepath.Join(dir, "worktrees")
	if err := os.MkdirAll(acfg.WorktreeDir, 0o700); err != nil {
		return err
	}
	a, err := agentd.New(acfg, o.Log)
	if err != nil {
		return err
	}
	// The agent outlives ctx until its runs are stopped (below): Ctrl-C
	// must not close it under them.
	actx, stopAgent := context.WithCancel(context.WithoutCancel(ctx))
	agentDone := make(chan error, 1)
	go func() { agentDone <- a.Run(actx) }()
	defer func() {
		// Dev mode stops its runs itself, as session stop does, while the
		// tunnel still carries their end: stopped, not failed and lost
		// (R-DEV-6, issue 32 finding 6).
		sctx, cancel := context.WithTimeout(context.Background(), stopRunsWithin)
		if n := a.StopRuns(sctx); n > 0 {
			step("stopped %d live run(s)", n)
		}
		cancel()
		stopAgent()
		<-agentDone
	}()

	step("waiting for node %s to connect...", a.NodeID())
	if err := awaitConnected(ctx, c, a.NodeID(), 30*time.Second, agentDone); err != nil {
		return err
	}
	profiles, err := setupRuns(ctx, c, a, step)
	if err != nil {
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
		APIURL: c.APIURL(), Tunnel: c.TunnelAddr(), AdminToken: token, Tenant: Tenant, NodeID: a.NodeID(),
		AgentSocket: a.SocketPath(), CAFile: c.CAFile(), SigninURL: signin, AdminPrincipal: admin.ID, PID: os.Getpid(),
		MetricsURL: c.MetricsURL(),
	}
	raw, _ := json.MarshalIndent(info, "", "  ")
	if err := certs.WriteFileAtomic(filepath.Join(dir, DevFile), append(raw, '\n'), 0o600); err != nil {
		return err
	}
	// First of the deferred: dev.json goes before the runs and the
	// coordinator stop.
	defer retire(dir)
	// Only commands that work here are suggested (R-DEV-4): a session of
	// a profile dev mode registered, or how to get the vendor CLIs.
	olivares, agentCmd := commandsFor(os.Args[0])
	try := "  " + olivares + " session start --profile " + firstOr(profiles, "") + " --workspace default\n"
	if len(profiles) == 0 {
		try = noCLIs
	}
	fmt.Fprintf(o.Out, `
Olivares dev mode is ready (node %s connected over %s).

  Console    %s
             (opens the web console signed in as the dev admin; the link works once,
              for 15 minutes: olivares-coordinator signin-link --principal %s
              --state-dir %s mints another)
  API        %s
  tunnel     %s
  metrics    %s
  tenant     %s
  admin token in %s

Try:
  %[12]s login --dev %[10]s
  %[12]s node list
  %[12]s profile list
%[11]s  %[13]s status --state-dir %[14]s

Ctrl-C stops everything.
`, a.NodeID(), c.Fleet.Link(a.NodeID()).Transport, signin, admin.ID, cfg.StateDir, info.APIURL, info.Tunnel, info.MetricsURL, Tenant, filepath.Join(dir, DevFile),
		try, olivares, agentCmd, agentDir)
	if o.Ready != nil {
		o.Ready(info)
	}
	watch := time.NewTicker(time.Second)
	defer watch.Stop()
	told := false
	for {
		select {
		case <-ctx.Done():
			step("stopping")
			return nil
		case err := <-c.Errors():
			return err
		case err := <-agentDone:
			agentDone <- err
			if ctx.Err() != nil {
				// Ctrl-C stops the agent too: select may see its end
				// before the context's.
				step("stopping")
				return nil
			}
			if err == nil {
				err = errors.New("agent stopped")
			}
			return fmt.Errorf("dev: embedded agent: %w", err)
		case <-watch.C:
			if !told && a.Link().State == link.StateRevoked {
				told = true
				step("the local node %s was revoked: it will not connect again. Stop dev mode and start it with --reenroll to enroll this host again (its profiles and workspace default move to the new node)", a.NodeID())
			}
		}
	}
}

// commandsFor is how the usage names the olivares and olivares-agent
// commands (issue 32 finding 8): go run with the package when dev mode was
// started by go run, the sibling binaries when they lie beside this one,
// else their names (on PATH).
func commandsFor(exe string) (olivares, agent string) {
	if p, err := os.Executable(); err == nil {
		exe = p
	}
	if underGoBuild(exe) {
		return "go run ./coordinator/cmd/olivares", "go run ./agent/cmd/olivares-agent"
	}
	olivares, agent = "olivares", "olivares-agent"
	dir := filepath.Dir(exe)
	if _, err := os.Stat(filepath.Join(dir, olivares)); err == nil {
		if found, err := exec.LookPath(olivares); err != nil || filepath.Dir(found) != dir {
			olivares = filepath.Join(dir, olivares)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, agent)); err == nil {
		if found, err := exec.LookPath(agent); err != nil || filepath.Dir(found) != dir {
			agent = filepath.Join(dir, agent)
		}
	}
	return olivares, agent
}

// underGoBuild reports whether exe was built by go run: it lives in a
// go-build* temp dir.
func underGoBuild(exe string) bool {
	for _, part := range strings.Split(filepath.ToSlash(exe), "/") {
		if strings.HasPrefix(part, "go-build") {
			return true
		}
	}
	return false
}

// retire renames dev.json to dev.last.json: dev mode is not (or no longer)
// ready.
func retire(dir string) error {
	err := os.Rename(filepath.Join(dir, DevFile), filepath.Join(dir, LastFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// readLast is the info of the last dev mode: dev.json when one was killed,
// else dev.last.json.
func readLast(dir string) (Info, error) {
	info, err := ReadInfo(dir)
	if errors.Is(err, os.ErrNotExist) {
		var raw []byte
		if raw, err = os.ReadFile(filepath.Join(dir, LastFile)); err == nil {
			err = json.Unmarshal(raw, &info)
		}
	}
	return info, err
}

// noCLIs is the usage's advice when no vendor CLI was found (R-DEV-4).
const noCLIs = `  (no vendor CLI was found on PATH, so no profile was registered and no session
   can start yet. Install the pinned ones with bash scripts/install-clis; they land
   in .clis/node_modules/.bin: export PATH="$PWD/.clis/node_modules/.bin:$PATH" and
   start dev mode again.)
`

func firstOr(ss []string, def string) string {
	if len(ss) == 0 {
		return def
	}
	return ss[0]
}

// portOf is the port of a host:port ("" when malformed).
func portOf(addr string) string {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return p
}

// portFree reports whether addr can be listened on now (TCP, and UDP with
// udp).
func portFree(addr string, udp bool) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	ln.Close()
	if udp {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		pc.Close()
	}
	return true
}

// setupRuns makes dev mode ready to launch (issue 3): one profile per
// vendor CLI found on the agent's PATH, named after the tool, whose home is
// the user's own (so the CLI's existing login is used), and the directory
// dev mode was started in as workspace "default". Both are made once and
// kept across restarts. It returns the names of the tenant's profiles of
// this node; with no CLI on PATH it says so and how to get them (R-DEV-4).
func setupRuns(ctx context.Context, c *coordd.Coordinator, a *agentd.Agent, step func(string, ...any)) ([]string, error) {
	ps, err := c.Store.ListProfiles(ctx, Tenant)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	var names []string
	for _, p := range ps {
		have[p.Name] = true
		if p.NodeID == a.NodeID() {
			names = append(names, p.Name)
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, err
	}
	clis := a.Status(ctx).Capabilities.CLIs
	if len(clis) == 0 {
		step("no vendor CLI (claude, codex, grok, gemini, opencode) on PATH, so no new profile: bash scripts/install-clis installs the pinned ones in .clis/node_modules/.bin; put that directory on PATH and start dev mode again")
	}
	for _, cli := range clis {
		if have[cli.Name] { // every CLI the agent looks for is a launchable tool
			continue
		}
		p, err := c.API.CreateProfile(ctx, Tenant, apitypes.ProfileCreate{NodeID: a.NodeID(), Tool: cli.Name, Name: cli.Name, Home: home})
		if err != nil {
			return nil, fmt.Errorf("dev: profile %s: %w", cli.Name, err)
		}
		names = append(names, p.Name)
		// Dev mode's profiles stay native (R-TR-7): they use the user's own
		// home and login. Say what that means.
		step("profile %s (%s, home %s, isolation native: its sessions run as you and can read your files; olivares profile update %s --isolation sandbox contains them)", p.Name, p.Ref, p.Home, p.Name)
	}
	ws, err := c.Store.ListWorkspaces(ctx, Tenant)
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		if w.Name == "default" {
			return names, nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	w, err := c.API.CreateWorkspace(ctx, Tenant, apitypes.WorkspaceCreate{NodeID: a.NodeID(), Path: wd, Name: "default"})
	if err != nil {
		return nil, fmt.Errorf("dev: workspace default: %w", err)
	}
	step("workspace default (%s, %s)", w.Ref, w.Path)
	return names, nil
}

// adminToken reuses the last dev mode's admin token when the store still
// knows it.
func adminToken(ctx context.Context, c *coordd.Coordinator, dir string) (string, error) {
	if info, err := readLast(dir); err == nil {
		if info.AdminToken != "" {
			if _, _, err := c.Store.PrincipalByCredential(ctx, auth.Hash(info.AdminToken)); err == nil {
				return info.AdminToken, nil
			}
		}
	}
	// The dev admin exists but its token was revoked: it gets a new one
	// (names are unique in a tenant, R-LIFE-4).
	ps, err := c.Store.ListPrincipals(ctx, Tenant)
	if err != nil {
		return "", err
	}
	for _, p := range ps {
		if p.Name == devAdmin && p.Roles[Tenant] == store.RoleAdmin {
			tok, _, err := c.AddCredential(ctx, p.ID, store.CredSession, "dev.json")
			return tok, err
		}
	}
	tok, _, err := c.CreatePrincipal(ctx, Tenant, devAdmin, store.RoleAdmin, store.KindHuman)
	return tok, err
}

// devAdmin is the dev admin principal's name.
const devAdmin = "dev-admin"

// enrollIfNeeded enrolls the local agent on first start. A node the
// coordinator revoked (or forgot) is refused with the way out (R-DEV-2):
// with reenroll, the agent enrolls again in the same state dir, and the old
// node's profiles, workspaces and runs move to the new one.
func enrollIfNeeded(ctx context.Context, c *coordd.Coordinator, agentDir string, reenroll bool, step func(string, ...any)) error {
	old := ""
	if state.Exists(agentDir) {
		db, err := state.Open(agentDir)
		if err != nil {
			return err
		}
		id, err := identity.Load(db, agentDir)
		db.Close()
		switch {
		case err == nil:
			old = id.NodeID
		case !errors.Is(err, identity.ErrNotEnrolled):
			return err
		}
	}
	if old != "" {
		n, err := c.Store.GetNode(ctx, old)
		gone := errors.Is(err, store.ErrNotFound)
		if err != nil && !gone {
			return err
		}
		if !gone && n.RevokedAt.IsZero() {
			if reenroll {
				step("--reenroll: node %s is not revoked; it is kept", old)
			}
			return nil
		}
		if !reenroll {
			what := "was revoked at " + n.RevokedAt.UTC().Format(time.RFC3339)
			if gone {
				what = "was revoked and forgotten"
			}
			return fmt.Errorf("dev: the local node %s %s, so it cannot connect. Start dev mode with --reenroll to enroll this host again as a new node; its profiles and workspace default move there, and its runs stay as history", old, what)
		}
	}
	host, _ := os.Hostname()
	iss, err := c.Enroll.CreateToken(ctx, Tenant, map[string]string{"dev": "true", "host": sanitize(host)}, 0)
	if err != nil {
		return err
	}
	step("enrolling the local agent as %s (join token, CA pin %s)", iss.NodeID, iss.CAPin)
	if _, err := agentenroll.Enroll(ctx, agentenroll.Options{Coordinator: c.TunnelAddr(), Token: iss.Token, CAPin: iss.CAPin, StateDir: agentDir, Replace: old != ""}); err != nil {
		return err
	}
	if old == "" {
		return nil
	}
	e := apitypes.AuditEntry{At: time.Now().UTC(), Tenant: Tenant, Actor: api.OperatorActor, Event: apitypes.AuditNodeReassigned,
		Target: apitypes.AuditTarget{NodeID: iss.NodeID}}
	e.Detail, _ = json.Marshal(map[string]string{"from": old})
	moved, err := c.Store.ReassignNode(ctx, old, iss.NodeID, e)
	if errors.Is(err, store.ErrNotFound) {
		step("node %s was forgotten: nothing to move to %s", old, iss.NodeID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("dev: move node %s's records to %s: %w", old, iss.NodeID, err)
	}
	step("moved %d profiles, %d workspaces and %d runs from revoked node %s to %s", moved.Profiles, moved.Workspaces, moved.Runs, old, iss.NodeID)
	return nil
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
