// Package agentd wires the node agent: state file, identity, capabilities,
// the tunnel link and the local socket. The whole composition is in New and
// Run.
//
// agentd opens no public listener (R-ARCH-1): it dials the coordinator.
package agentd

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/signin"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/olivares-dev/olivares/agent/caps"
	"github.com/olivares-dev/olivares/agent/claudesup"
	"github.com/olivares-dev/olivares/agent/codexsup"
	"github.com/olivares-dev/olivares/agent/holder"
	"github.com/olivares-dev/olivares/agent/identity"
	"github.com/olivares-dev/olivares/agent/isolation"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/link"
	"github.com/olivares-dev/olivares/agent/localapi"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/runread"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/agent/state"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/claudehook"
	"github.com/olivares-dev/olivares/shared/cmdline"
	"github.com/olivares-dev/olivares/shared/config"
	"github.com/olivares-dev/olivares/shared/localsock"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/tunnel"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Version is the agent's version: the release of the three binaries
// (cmdline.Version, set at build time).
var Version = cmdline.Version

// Config is the agent's TOML file.
type Config struct {
	// StateDir holds agent.db, the identity files and agent.sock. Required.
	StateDir string `toml:"state_dir"`
	// Coordinator overrides the tunnel address recorded at enrollment:
	// one host:port (a coordinator, or a load balancer or DNS name in front
	// of several replicas), or a list of replicas' addresses, tried in turn
	// from the one that worked last. When empty, the enrolled address.
	Coordinator config.Addrs `toml:"coordinator"`
	// Transport is "auto" (default), "quic" or "yamux".
	Transport string `toml:"transport"`
	// WorktreeDir is where per-run worktrees go. When empty, worktree
	// launches are refused (503).
	WorktreeDir string `toml:"worktree_dir"`
	// Path is the PATH searched for vendor CLIs. When empty, the agent's.
	Path   string `toml:"path"`
	Tunnel struct {
		// QUICRetry is how often auto mode on yamux tries QUIC again.
		// Default 30s.
		QUICRetry config.Duration `toml:"quic_retry"`
	} `toml:"tunnel"`
	Runs RunsConfig `toml:"runs"`
	// Isolation tunes the isolating runners (docs/isolation.md).
	Isolation struct {
		// Container is "auto" (the default: podman is probed at start) or
		// "off" (no probe; isolation=container is refused with that
		// reason).
		Container string `toml:"container"`
	} `toml:"isolation"`
	// CodexSupervision is this node's consent to Codex supervision
	// (R-CX-PERM-1); off by default.
	CodexSupervision codexsup.Config `toml:"codex_supervision"`
	// ClaudeSupervision is this node's consent to Claude Code supervision
	// (R-CL-PERM-1); off by default.
	ClaudeSupervision claudesup.Config `toml:"claude_supervision"`
	// Log sets the level and format of the agent's log (standard error).
	// When empty, info and json (R-OBS-1).
	Log logging.Config `toml:"log"`
}

// RunsConfig tunes the run runtime.
type RunsConfig struct {
	// StopGrace is the time between SIGTERM and SIGKILL (R-STOP-3).
	// Default 10s.
	StopGrace config.Duration `toml:"stop_grace"`
	// SetupTimeout bounds a worktree run's setup command (R-SETUP-2); zero
	// is supervisor.DefaultSetupTimeout.
	SetupTimeout config.Duration `toml:"setup_timeout"`
	// RingMaxBytes and RingMaxFrames bound each run's retained output
	// (R-RC-7). Defaults 8 MiB and 65,536.
	RingMaxBytes  int64 `toml:"ring_max_bytes"`
	RingMaxFrames int64 `toml:"ring_max_frames"`
	// ViewerQueue is the frames one attach may have waiting before it is
	// dropped as slow. Default 1024.
	ViewerQueue int `toml:"viewer_queue"`
}

// The values of [isolation] container.
const (
	ContainerAuto = "auto"
	ContainerOff  = "off"
)

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	c := Config{Transport: link.TransportAuto}
	c.Tunnel.QUICRetry.Duration = link.DefaultQUICRetry
	c.Runs.StopGrace.Duration = sessions.DefaultGrace
	return c
}

// Load returns DefaultConfig merged with the file at path ("" = none).
func Load(path string) (Config, error) { return config.Load(path, DefaultConfig()) }

// CheckAndSetDefaults validates c.
func (c *Config) CheckAndSetDefaults() error {
	if c.StateDir == "" {
		return errors.New("config: state_dir is required")
	}
	abs, err := filepath.Abs(c.StateDir)
	if err != nil {
		return err
	}
	c.StateDir = abs
	switch c.Isolation.Container {
	case "":
		c.Isolation.Container = ContainerAuto
	case ContainerAuto, ContainerOff:
	default:
		return fmt.Errorf("config: isolation.container %q: use %q or %q", c.Isolation.Container, ContainerAuto, ContainerOff)
	}
	switch c.Transport {
	case "":
		c.Transport = link.TransportAuto
	case link.TransportAuto, tunnel.TransportQUIC, tunnel.TransportYamux:
	default:
		return fmt.Errorf("config: transport %q: use auto, quic or yamux", c.Transport)
	}
	if c.Tunnel.QUICRetry.Duration <= 0 {
		c.Tunnel.QUICRetry.Duration = link.DefaultQUICRetry
	}
	switch {
	case c.Runs.StopGrace.Duration < 0:
		return errors.New("config: runs.stop_grace must not be negative")
	case c.Runs.RingMaxBytes < 0 || c.Runs.RingMaxFrames < 0 || c.Runs.ViewerQueue < 0:
		return errors.New("config: runs.ring_max_bytes, ring_max_frames and viewer_queue must not be negative")
	}
	if c.Runs.StopGrace.Duration == 0 {
		c.Runs.StopGrace.Duration = sessions.DefaultGrace
	}
	if err := c.Log.CheckAndSetDefaults(logging.FormatJSON); err != nil {
		return err
	}
	if err := c.ClaudeSupervision.CheckAndSetDefaults(); err != nil {
		return err
	}
	return c.CodexSupervision.CheckAndSetDefaults()
}

// Agent is one running node agent.
type Agent struct {
	cfg Config
	log *slog.Logger
	// metrics holds the agent's series: the output path, the children,
	// Go's and the process's (R-OBS-8).
	metrics *prometheus.Registry
	db      *bbolt.DB
	id      *identity.Identity
	link    *link.Link
	started time.Time

	capsOnce sync.Mutex
	// sandboxUnavailable says why isolation=sandbox does not work here,
	// "" when it does.
	sandboxUnavailable string
	// container is the podman runner of isolation=container, detected in
	// the background from the agent's start (R-TR-7).
	container *isolation.Container
	caps      *proto.Capabilities

	rings  *ring.Store
	reg    *registry.Registry
	sup    *supervisor.Supervisor
	reads  *runread.Reader
	pusher *pusher
	codex  *codexsup.Service
	claude *claudesup.Service
	signin *signin.Manager

	// opsCtx is the agent's own context for the long operations (stop,
	// handoff, move, starts): it ends when the agent stops, never with a
	// tunnel session. ops tracks them.
	opsCtx    context.Context
	opsCancel context.CancelFunc
	ops       sync.WaitGroup
}

// New opens the state and the identity. logger gets the agent's lines;
// when nil, a logger of cfg.Log on standard error.
func New(cfg Config, logger *slog.Logger) (*Agent, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = logging.New(os.Stderr, cfg.Log)
	}
	if !state.Exists(cfg.StateDir) {
		return nil, fmt.Errorf("%w (state dir %s)", identity.ErrNotEnrolled, cfg.StateDir)
	}
	db, err := state.Open(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	id, err := identity.Load(db, cfg.StateDir)
	if err != nil {
		db.Close()
		return nil, err
	}
	a := &Agent{cfg: cfg, log: logger.With(logging.KeyNodeID, id.NodeID), db: db, id: id, started: time.Now().UTC(), metrics: prometheus.NewRegistry()}
	a.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.opsCtx, a.opsCancel = context.WithCancel(context.Background())
	if err := a.openRuns(); err != nil {
		db.Close()
		return nil, err
	}
	handlers := map[string]link.Handler{
		proto.OpPing:    a.ping,
		proto.OpStatus:  a.statusOp,
		proto.OpMetrics: a.metricsOp,
	}
	for op, h := range a.runHandlers() {
		handlers[op] = h
	}
	for op, h := range a.codexHandlers() {
		handlers[op] = h
	}
	for op, h := range a.signinHandlers() {
		handlers[op] = h
	}
	for op, h := range a.claudeHandlers() {
		handlers[op] = h
	}
	for op, h := range handlers {
		handlers[op] = a.pushBeforeReply(h)
	}
	addrs := []string(cfg.Coordinator)
	if len(addrs) == 0 {
		addrs = []string{id.Coordinator}
	}
	a.link = link.New(link.Options{
		Identity:  id,
		Addrs:     addrs,
		Transport: cfg.Transport,
		QUICRetry: cfg.Tunnel.QUICRetry.Duration,
		Hello:     a.hello,
		Handlers:  handlers,
		OnSession: a.pusher.session,
		Log:       a.log,
	})
	return a, nil
}

// openRuns opens the ring, the ledger and the supervisor on the state file;
// runs that were live when the agent last stopped are recorded lost here.
func (a *Agent) openRuns() error {
	rings, err := ring.Open(a.db, ring.Options{MaxBytes: a.cfg.Runs.RingMaxBytes, MaxFrames: a.cfg.Runs.RingMaxFrames, Metrics: a.metrics})
	if err != nil {
		return err
	}
	led, err := ledger.Open(a.db)
	if err != nil {
		rings.Close()
		return err
	}
	a.pusher = newPusher(a)
	if err := a.openCodex(); err != nil {
		rings.Close()
		return err
	}
	ds := drivers()
	ds[codexsup.DriverName] = a.codex.Driver()
	rns := runners()
	reg, err := registry.Open(registry.Options{DB: a.db, Drivers: ds, ProfilesDir: filepath.Join(a.cfg.StateDir, "profiles")})
	if err != nil {
		rings.Close()
		return err
	}
	// R-TR-7: one contained probe decides whether sandbox runs here.
	sandbox, sandboxErr := isolation.DetectSandbox(context.Background())
	if sandboxErr != nil {
		a.sandboxUnavailable = sandboxErr.Error()
	}
	// R-TR-7: podman's contained probe runs while the agent starts,
	// unless the operator turned the runner off.
	if a.cfg.Isolation.Container == ContainerOff {
		a.container = isolation.ContainerOff(`the container runner is turned off in this agent's config ([isolation] container = "off")`)
	} else {
		a.container = isolation.StartContainer(context.Background(), filepath.Join(a.cfg.StateDir, "container"))
	}
	sup, err := supervisor.Open(supervisor.Options{
		DB: a.db, Ring: rings, Ledger: led, Registry: reg,
		GrantsDir:    filepath.Join(a.cfg.StateDir, "grants"),
		Holders:      holders(),
		HoldersDir:   filepath.Join(a.cfg.StateDir, "holders"),
		WorktreeDir:  a.cfg.WorktreeDir,
		Hook:         supervisor.HookEndpoint{Command: hookCommand(), Socket: a.SocketPath()},
		Path:         a.childPath(),
		Drivers:      ds,
		Runners:      rns,
		StopGrace:    a.cfg.Runs.StopGrace.Duration,
		SetupTimeout: a.cfg.Runs.SetupTimeout.Duration,
		Container:    a.container,
		OnChange:     a.pusher.changed,
		Log:          a.log,
		Metrics:      a.metrics,
		// R-TR-7: nil, with the reason, where bubblewrap does not run.
		Sandbox: sandbox, SandboxUnavailable: a.sandboxUnavailable,
	})
	if err != nil {
		rings.Close()
		return err
	}
	a.rings, a.reg, a.sup = rings, reg, sup
	// R-ACCT-10: attempts are kept in the node's database, and an ended
	// one rides the next run-index push until the coordinator took it.
	a.signin, err = signin.New(signin.Options{Proc: rns[cliruntime.TransportStdio], PTY: rns[cliruntime.TransportPTY], Drivers: ds,
		KeepToken: a.keepToken, DB: a.db, OnEnd: a.pusher.poke,
		OnError: func(err error) { a.log.Error("a sign-in attempt could not be kept", logging.Err(err)) }})
	if err != nil {
		return err
	}
	a.reads = runread.New(runread.Options{Runs: sup.Reads, Registry: reg})
	a.codex.SetRuns(codexRuns{reg, sup})
	return a.openClaude()
}

// childPath is the PATH children get when their profile sets none: the
// configured path, else the agent's own PATH, the one the vendor CLIs were
// found on (caps). Nothing else of the agent's environment reaches them.
func (a *Agent) childPath() string {
	if a.cfg.Path != "" {
		return a.cfg.Path
	}
	return os.Getenv("PATH")
}

// NodeID is the enrolled identity.
func (a *Agent) NodeID() string { return a.id.NodeID }

// SocketPath is the local socket.
func (a *Agent) SocketPath() string { return localapi.SocketPath(a.cfg.StateDir) }

// Link returns the link's status.
func (a *Agent) Link() link.Status { return a.link.Status() }

// StopRuns stops every live run as an operator stop does (SIGTERM, the
// grace, SIGKILL; R-STATE-3: the run is stopped, not failed), all at once,
// and returns how many it stopped. Dev mode calls it before its Ctrl-C
// ends the agent, whose Close would leave them to be recorded lost at the
// next start (R-DEV-6, issue 32 finding 6).
func (a *Agent) StopRuns(ctx context.Context) int {
	var wg sync.WaitGroup
	n := 0
	for _, r := range a.sup.List() {
		if r.State != apitypes.StateStarting && r.State != apitypes.StateRunning && r.State != apitypes.StateIdle {
			continue
		}
		n++
		wg.Add(1)
		go func(ref string) {
			defer wg.Done()
			if _, err := a.sup.Stop(ctx, ref, 0); err != nil {
				a.log.Warn("stopping a run before the agent stops", logging.KeyRunRef, ref, logging.Err(err))
			}
		}(r.RunRef)
	}
	wg.Wait()
	return n
}

// Run serves until ctx ends, then closes the state file.
func (a *Agent) Run(ctx context.Context) error {
	defer func() {
		a.opsCancel()
		a.ops.Wait()
		a.signin.Close() // R-ACCT-4: no sign-in outlives the agent
		a.codex.Close()
		a.sup.Close()
		a.rings.Close()
		a.db.Close()
	}()
	ln, err := localsock.Listen(a.SocketPath())
	if err != nil {
		return err
	}
	defer os.Remove(a.SocketPath())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		localsock.Serve(ctx, ln, localapi.Handlers{Status: a.Status, ClaudeHook: a.claudeHook,
			Metrics: promhttp.HandlerFor(a.metrics, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})}.Handler())
	}()
	a.log.Info("agent started", "version", Version, "state_dir", a.cfg.StateDir, "socket", a.SocketPath())
	err = a.link.Run(ctx)
	cancel()
	wg.Wait()
	return err
}

func (a *Agent) capabilities(ctx context.Context) proto.Capabilities {
	a.capsOnce.Lock()
	defer a.capsOnce.Unlock()
	if a.caps == nil {
		c := caps.Detect(ctx, a.cfg.Path, a.cfg.WorktreeDir)
		c.CodexSupervision = a.codex.Capability()
		c.Sandbox, c.SandboxError = a.sandboxUnavailable == "", a.sandboxUnavailable
		if err := a.container.Err(); err != nil {
			c.ContainerError = err.Error()
		} else {
			c.Container = true
		}
		c.ClaudeSupervision = a.claude.Capability()
		a.caps = &c
	}
	return *a.caps
}

func (a *Agent) hello(ctx context.Context) proto.Hello {
	host, _ := os.Hostname()
	return proto.Hello{Hostname: host, AgentVersion: Version, Capabilities: a.capabilities(ctx)}
}

// Status is the local status (R-ARCH-5).
func (a *Agent) Status(ctx context.Context) localapi.Status {
	return localapi.Status{
		NodeID: a.id.NodeID, Tenant: a.id.Tenant, Version: Version, StateDir: a.cfg.StateDir,
		StartedAt: a.started, Link: a.link.Status(), Capabilities: a.capabilities(ctx), Runs: a.sup.Live(),
	}
}

func (a *Agent) ping(ctx context.Context, h wire.Header, s tunnel.Stream) {
	respond(s, proto.PingReply{NodeID: a.id.NodeID, At: time.Now().UTC()}, nil)
}

func (a *Agent) statusOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	respond(s, a.Status(ctx), nil)
}

// metricsOp answers the coordinator's federation (R-OBS-8) with the
// olivares_agent_* families: Go's and the process's stay on the local
// socket, so they never collide with the coordinator's own.
func (a *Agent) metricsOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	text, err := a.MetricsText(metricsPrefix)
	if err != nil {
		respond(s, nil, err)
		return
	}
	respond(s, proto.MetricsReply{Text: text}, nil)
}

const metricsPrefix = "olivares_agent_"

// MetricsText is the Prometheus text of the agent's families whose name
// starts with prefix ("" for all).
func (a *Agent) MetricsText(prefix string) (string, error) {
	mfs, err := a.metrics.Gather()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), prefix) {
			if err := enc.Encode(mf); err != nil {
				return "", err
			}
		}
	}
	return b.String(), nil
}

// claudeHook is the engine's hook on the local socket, its refusals mapped
// to wire statuses.
func (a *Agent) claudeHook(ctx context.Context, run string, input []byte) (claudehook.Decision, error) {
	d, err := a.sup.ClaudeHook.Decide(ctx, run, input)
	return d, wireErr(err)
}

// TrustPool is the CA bundle the agent trusts now (it changes at renewal).
func (a *Agent) TrustPool() *x509.CertPool { return a.id.Pool() }

// hookCommand is the engine's Claude Code hook command (R-ED-4): this very
// program's claude-hook, when this program is one of Olivares' (olivares-agent,
// or olivares-coordinator with its embedded agent), quoted for the shell
// Claude Code runs hooks with. Otherwise (a test binary) the agent has no
// hook endpoint, and Claude Code runs of engine-hooks profiles read their
// project settings and are gated (R-PCS-15).
func hookCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	switch filepath.Base(exe) {
	case "olivares-agent", "olivares-coordinator", "olivares":
	default:
		return ""
	}
	return "'" + strings.ReplaceAll(exe, "'", `'\''`) + "' claude-hook"
}

// holders starts each adoptable child under `olivares-agent hold`, which
// outlives the agent (issue 30), when this binary is olivares-agent (in a
// test binary or another command there is no hold subcommand: the
// children then die with the agent).
func holders() *holder.Launcher {
	exe, err := os.Executable()
	if err != nil || filepath.Base(exe) != "olivares-agent" {
		return nil
	}
	return &holder.Launcher{Exe: exe, Args: []string{"hold"}, Version: Version}
}

// RegistryRefs lists the refs of the profiles and workspaces registered on
// this node (tests compare them with the coordinator's index).
func (a *Agent) RegistryRefs() (profiles, workspaces []string, err error) { return a.reg.Refs() }

// pushBeforeReply makes h's reply wait until every run row changed before
// it reached the coordinator's index: whatever a caller reads next, on any
// coordinator replica, is at least as new as the answer (issue 24: the
// push is the index's one writer).
func (a *Agent) pushBeforeReply(h link.Handler) link.Handler {
	return func(ctx context.Context, hdr wire.Header, s tunnel.Stream) {
		h(ctx, hdr, &replyAfterPush{Stream: s, push: func() { a.pusher.flush(ctx) }})
	}
}

// replyAfterPush runs push before the stream's first write (the reply).
type replyAfterPush struct {
	tunnel.Stream
	once sync.Once
	push func()
}

func (s *replyAfterPush) Write(p []byte) (int, error) {
	s.once.Do(s.push)
	return s.Stream.Write(p)
}
