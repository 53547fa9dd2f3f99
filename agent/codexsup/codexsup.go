// Package codexsup is the node side of Codex supervision
// (docs/rules/codex-supervision.md): the passive supervision connection to
// a managed `codex app-server` in the node user's own Codex home, the
// catalog page and the transcript pages read through it, the history
// projection a branch starts from, the supervised runs that continue a
// native thread, archive, and the per-thread leases (fencing tokens) that
// keep two Olivares runs from ever writing one native thread.
//
// codexsup never reads rollout files (R-CX-OWN-4), never resumes or writes
// a source thread (R-CX-SRC-1), never answers an approval on the
// supervision connection (R-CX-PASS-1), and never runs anything when the
// node's own config has not enabled it (R-CX-PERM-1).
//
// Buckets (owned here): codexsup_bindings, codexsup_leases.
package codexsup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/proto"
)

// Limits and timeouts.
const (
	// initTimeout bounds the app-server's start and initialize.
	initTimeout = 30 * time.Second
	// stopGrace is the supervision app-server's SIGTERM grace.
	stopGrace = 2 * time.Second
	// ClientName is clientInfo.name of the supervision connection.
	ClientName = "olivares_supervision"
	// ClientVersion is clientInfo.version.
	ClientVersion = "0.1.0"
	// ProfileRef is the node's supervision profile: the profile of every
	// supervised run, whose app-server runs in the supervision Codex home
	// (homeScope user, R-CX-CONN-2), never in a profile home.
	ProfileRef = "prof_codexsupervision"
	// DriverName is the driver table's key for supervised runs; their
	// driver kind stays codex.
	DriverName = "codex-supervision"
)

// Config is the agent config's [codex_supervision] table. Each node
// consents locally (R-CX-PERM-1): nothing of it runs unless Enabled.
type Config struct {
	// Enabled turns supervision on for this node. Default false.
	Enabled bool `toml:"enabled"`
	// CodexHome is the supervision Codex home, the node user's own. When
	// empty: $CODEX_HOME of the agent, else ~/.codex.
	CodexHome string `toml:"codex_home"`
	// Command is the codex program. When empty, "codex", looked up on the
	// agent's path.
	Command string `toml:"command"`
	// Args go between the command and "app-server" (e.g. -c key=value).
	Args []string `toml:"args"`
	// Env is added to the from-scratch environment of the supervision
	// app-servers (a provider key). It may not set HOME or CODEX_HOME.
	Env map[string]string `toml:"env"`
	// Transport is "stdio" (the default). "unix" and "websocket" are not
	// supported: the node then advertises nothing and refuses every
	// supervision call (R-CX-CONN-7/8).
	Transport string `toml:"transport"`
	// HomeScope is "user" (the default for stdio, R-CX-CONN-3). "agent" is
	// not supported, with the same effect as an unsupported transport.
	HomeScope string `toml:"home_scope"`
}

// CheckAndSetDefaults validates c and fills its defaults.
func (c *Config) CheckAndSetDefaults() error {
	switch c.Transport {
	case "", "stdio", "unix", "websocket":
	default:
		return fmt.Errorf("config: codex_supervision.transport %q: use stdio", c.Transport)
	}
	switch c.HomeScope {
	case "", "user", "agent":
	default:
		return fmt.Errorf("config: codex_supervision.home_scope %q: use user", c.HomeScope)
	}
	if c.Command == "" {
		c.Command = "codex"
	}
	for k := range c.Env {
		switch k {
		case "HOME", "CODEX_HOME":
			return fmt.Errorf("config: codex_supervision.env may not set %s", k)
		}
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("config: codex_supervision.env: bad name %q", k)
		}
	}
	if c.CodexHome == "" {
		if h := os.Getenv("CODEX_HOME"); h != "" {
			c.CodexHome = h
		} else if home, err := os.UserHomeDir(); err == nil {
			c.CodexHome = filepath.Join(home, ".codex")
		}
	}
	if c.Enabled && !filepath.IsAbs(c.CodexHome) {
		return fmt.Errorf("config: codex_supervision.codex_home %q must be an absolute path", c.CodexHome)
	}
	c.CodexHome = filepath.Clean(c.CodexHome)
	return nil
}

// unsupported says why a config cannot serve, "" when it can.
func (c Config) unsupported() string {
	switch {
	case !c.Enabled:
		return "codex supervision is not enabled on this node; set [codex_supervision] enabled = true in its agent config"
	case c.Transport != "" && c.Transport != "stdio":
		return fmt.Sprintf("codex supervision supports only the stdio transport, and this node is configured for %q", c.Transport)
	case c.HomeScope != "" && c.HomeScope != "user":
		return fmt.Sprintf("codex supervision supports only homeScope \"user\", and this node is configured for %q", c.HomeScope)
	}
	return ""
}

// Runs is what supervision needs of the node's run runtime.
type Runs interface {
	CreateProfile(registry.ProfileParams) (apitypes.Profile, error)
	Launch(context.Context, supervisor.LaunchParams) (apitypes.Run, error)
	Get(ref string) (apitypes.Run, error)
}

// Options configure a Service.
type Options struct {
	Config Config
	DB     *bbolt.DB
	// NodeID is the host identity of this node's rows (R-CX-SCOPE-2).
	NodeID string
	// Tenant is the node's tenant: the supervision profile's.
	Tenant string
	// Path is the PATH the app-servers get and the command is looked up
	// in: the agent's configured path.
	Path string
	// ProfilesDir holds the supervision profile's own directory.
	ProfilesDir string
	// OnChange is called after a run's binding changed (its row changes).
	OnChange func(runRef string)
	// Log gets the service's lines. When nil, they are dropped.
	Log *slog.Logger

	// spawn replaces the real app-server (tests).
	spawn spawner
}

// Service is a node's Codex supervision.
type Service struct {
	o       Options
	cfg     Config
	reason  string // why it cannot serve; "" when it can
	command string // the resolved program
	home    string // HOME of the app-servers: the node user's
	store   *store
	conn    *Conn
	// maxPage is R-CX-TRN-5's bound, proto.MaxCodexPage (tests lower it).
	maxPage int

	runsMu sync.Mutex
	runs   Runs

	contMu sync.Mutex // serialises continue: one run per source (R-CX-CONT-2)

	holdersMu sync.Mutex
	holders   map[string]bool // archive operations in flight (lease holders)
}

// Open opens the buckets and drops the leases of operations the last agent
// process left (their processes died with it). The app-server is not
// started until the first call.
func Open(o Options) (*Service, error) {
	if o.DB == nil {
		return nil, errors.New("codexsup: DB is required")
	}
	o.Log = logging.OrDiscard(o.Log).With(logging.KeyComponent, "codexsup")
	if o.OnChange == nil {
		o.OnChange = func(string) {}
	}
	st, err := openStore(o.DB)
	if err != nil {
		return nil, err
	}
	s := &Service{o: o, cfg: o.Config, store: st, holders: map[string]bool{}, maxPage: proto.MaxCodexPage}
	s.reason = s.cfg.unsupported()
	s.home = os.Getenv("HOME")
	if s.home == "" {
		s.home, _ = os.UserHomeDir()
	}
	if s.home == "" || !filepath.IsAbs(s.home) {
		s.home = "/"
	}
	if s.reason == "" {
		s.command = lookPath(s.cfg.Command, o.Path)
		if s.command == "" {
			s.reason = fmt.Sprintf("codex supervision is enabled but %q is not on this node's path %s", s.cfg.Command, o.Path)
		}
	}
	spawn := o.spawn
	if spawn == nil {
		spawn = s.spawnAppServer
	}
	s.conn = newConn(spawn, ClientName, ClientVersion, o.Log)
	if s.reason != "" && s.cfg.Enabled {
		o.Log.Warn("codex supervision cannot serve", "reason", s.reason)
	}
	return s, nil
}

// SetRuns connects the run runtime (opened after the Service, since its
// driver table holds the supervised driver).
func (s *Service) SetRuns(r Runs) {
	s.runsMu.Lock()
	s.runs = r
	s.runsMu.Unlock()
}

func (s *Service) runtime() (Runs, error) {
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	if s.runs == nil {
		return nil, refusal.New(ErrNotReady, "the agent's run runtime is not open yet")
	}
	return s.runs, nil
}

// Close stops the supervision app-server.
func (s *Service) Close() { s.conn.Close() }

// Capability is what the node advertises: nil unless supervision is
// enabled with a supported connection and the codex binary was found
// (R-CX-CONN-7).
func (s *Service) Capability() *proto.CodexSupervision {
	if s.reason != "" {
		return nil
	}
	return &proto.CodexSupervision{Transport: "stdio", HomeScope: "user"}
}

// available fails closed when supervision cannot serve (R-CX-CONN-7,
// R-CX-FT-8).
func (s *Service) available() error {
	if s.reason != "" {
		return refusal.New(ErrCodexSupervisionUnavailable, "node %s: %s", s.o.NodeID, s.reason)
	}
	return nil
}

func lookPath(name, path string) string {
	if strings.Contains(name, "/") {
		if fi, err := os.Stat(name); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return name
		}
		return ""
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// extraEnv is what supervision app-servers get beyond the base layout: the
// agent's path and the configured variables.
func (s *Service) extraEnv() []string {
	var extra []string
	if s.o.Path != "" {
		extra = append(extra, "PATH="+s.o.Path)
	}
	keys := make([]string, 0, len(s.cfg.Env))
	for k := range s.cfg.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		extra = append(extra, k+"="+s.cfg.Env[k])
	}
	return extra
}

// env is the from-scratch environment of every supervision app-server
// (R-DRV-5): the driver's base layout with HOME the node user's and
// CODEX_HOME the supervision home, then extraEnv.
func (s *Service) env() ([]string, error) {
	return cliruntime.BuildEnv(cliruntime.LaunchSpec{Home: s.home, Workdir: s.home, Env: s.extraEnv()},
		cliruntime.EnvVar{Key: "CODEX_HOME", Value: s.cfg.CodexHome})
}

func (s *Service) args() []string {
	return append(append([]string(nil), s.cfg.Args...), "app-server")
}

// spawnAppServer starts the supervision connection's app-server as a child
// of the agent: its own process group, dying with the agent.
func (s *Service) spawnAppServer(ctx context.Context) (*proc, error) {
	if err := s.available(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.cfg.CodexHome, 0o700); err != nil {
		return nil, fmt.Errorf("codexsup: codex home: %w", err)
	}
	env, err := s.env()
	if err != nil {
		return nil, err
	}
	p, err := sessions.NewProcRunner().Start(ctx, sessions.Spec{Path: s.command, Args: s.args(), Env: env, Dir: s.home})
	if err != nil {
		return nil, fmt.Errorf("codexsup: start the supervision app-server: %w", err)
	}
	go io.Copy(io.Discard, p.Stderr()) // log lines (real-clis.md §2.1)
	return &proc{stdin: p.Stdin(), stdout: p.Stdout(), stop: func() { p.Stop(stopGrace) }}, nil
}

// notificationMethods are the 86 server notifications of Codex 0.169.0
// (codex app-server generate-json-schema, ServerNotification.json). The
// supervision connection opts out of all of them: it subscribes to nothing
// (R-CX-PASS-1).
var notificationMethods = []string{
	"error", "thread/started", "thread/status/changed", "thread/readState/changed",
	"thread/archived", "thread/deleted", "thread/unarchived", "thread/closed",
	"thread/reverted", "skills/changed", "thread/name/updated", "thread/section/changed",
	"thread/attachment/updated", "thread/goal/updated", "thread/prediction/updated", "thread/goal/cleared",
	"thread/queue/changed", "project/changed", "thread/project/updated", "thread/environment/connected",
	"thread/environment/disconnected", "thread/settings/updated", "thread/tokenUsage/updated", "turn/started",
	"hook/started", "turn/completed", "hook/completed", "turn/diff/updated",
	"turn/plan/updated", "item/started", "item/autoApprovalReview/started", "item/autoApprovalReview/completed",
	"autoApprovalReview/strictReviewRequired", "item/completed", "item/agentMessage/delta", "item/plan/delta",
	"command/exec/outputDelta", "process/outputDelta", "process/exited", "item/commandExecution/outputDelta",
	"item/commandExecution/terminalInteraction", "item/fileChange/outputDelta", "item/fileChange/patchUpdated", "serverRequest/resolved",
	"item/mcpToolCall/progress", "mcpServer/oauthLogin/completed", "mcpServer/startupStatus/updated", "mcpServer/event/stream/notification",
	"account/updated", "account/gatewayOAuth/changed", "account/rateLimits/updated", "app/list/updated",
	"remoteControl/status/changed", "externalAgentConfig/import/progress", "externalAgentConfig/import/completed", "fs/changed",
	"item/reasoning/summaryTextDelta", "item/reasoning/summaryPartAdded", "item/reasoning/textDelta", "thread/compacted",
	"model/rerouted", "model/verification", "modelProvider/authRecoveryStarted", "modelProvider/authRecoveryCompleted",
	"turn/moderationMetadata", "model/safetyBuffering/updated", "warning", "guardianWarning",
	"deprecationNotice", "configWarning", "fuzzyFileSearch/sessionUpdated", "fuzzyFileSearch/sessionCompleted",
	"thread/realtime/started", "thread/realtime/itemAdded", "thread/realtime/item/started", "thread/realtime/item/transcript/delta",
	"thread/realtime/item/completed", "thread/realtime/transcript/delta", "thread/realtime/transcript/done", "thread/realtime/outputAudio/delta",
	"thread/realtime/sdp", "thread/realtime/error", "thread/realtime/closed", "windows/worldWritableWarning",
	"windowsSandbox/setupCompleted", "account/login/completed",
}
