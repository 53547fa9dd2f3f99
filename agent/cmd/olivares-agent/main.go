// Command olivares-agent is the Olivares node daemon. Its commands are one
// table, commands, whose usage fields make olivares-agent --help.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/olivares-dev/olivares/agent/agentd"
	"github.com/olivares-dev/olivares/agent/enroll"
	"github.com/olivares-dev/olivares/agent/holder"
	"github.com/olivares-dev/olivares/agent/link"
	"github.com/olivares-dev/olivares/agent/localapi"
	"github.com/olivares-dev/olivares/shared/claudehook"
	"github.com/olivares-dev/olivares/shared/cmdline"
	"github.com/olivares-dev/olivares/shared/localsock"
)

// commands is the command table: olivares-agent --help and each command's
// --help come from its usage fields.
var commands = &cmdline.Table{
	Bin:  "olivares-agent",
	Head: "olivares-agent: the Olivares node daemon.\n\nUsage:\n",
	Tail: `
olivares-agent --version prints the version.

The default state dir is $OLIVARES_AGENT_STATE_DIR, else /var/lib/olivares-agent.
`,
	Commands: []cmdline.Command{{
		Name: "enroll", Run: cmdEnroll,
		Usage: `olivares-agent enroll --coordinator HOST:PORT --token T --ca-pin sha256:... [--state-dir DIR]
olivares-agent enroll --join FILE|- [--state-dir DIR]
    Make this node's key (it never leaves), check the coordinator against the
    pin, then trade the join token and a CSR for a certificate. --join reads
    the coordinator, token and pin from the JSON of olivares-coordinator
    token create --json (a file, or - for standard input).
`,
	}, {
		Name: "run", Run: cmdRun,
		Usage: `olivares-agent run [--config FILE] [--state-dir DIR] [--transport auto|quic|yamux] [--log-level LEVEL]
    Dial the coordinator and serve it. Logs go to standard error, one JSON
    object per line ([log] format = "text" for key=value), at info and
    above (--log-level or [log] level: debug, info, warn, error).
`,
	}, {
		Name: "status", Run: cmdStatus,
		Usage: `olivares-agent status [--state-dir DIR] [--json]
    Ask the running agent for its state. Exit 1 when none answers.
`,
	}},
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "claude-hook" {
		// The engine's Claude Code hook (R-ED-4): Claude Code runs it with
		// the hook input on stdin.
		os.Exit(claudehook.Main(os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	if len(os.Args) > 1 && os.Args[1] == "hold" {
		// A run's holder (issue 30), started by the agent itself: it keeps
		// the run's child alive across agent restarts.
		os.Exit(holder.Main(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := commands.Run(ctx, os.Args[1:], os.Stdout); err != nil && !errors.Is(err, errHelp) {
		fmt.Fprintln(os.Stderr, "olivares-agent:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError = cmdline.UsageError

var errHelp = cmdline.ErrHelp

// stateDir is the --state-dir every command takes.
func stateDir(fs *flag.FlagSet) *string {
	return fs.String("state-dir", cmp.Or(os.Getenv("OLIVARES_AGENT_STATE_DIR"), "/var/lib/olivares-agent"), "state directory")
}

func cmdEnroll(ctx context.Context, c *cmdline.Call) error {
	fs := c.Flags
	dir := stateDir(fs)
	coord := fs.String("coordinator", "", "coordinator tunnel address HOST:PORT")
	token := fs.String("token", "", "join token (from olivares-coordinator token create)")
	pin := fs.String("ca-pin", "", "CA pin sha256:... (from token create)")
	join := fs.String("join", "", "read --coordinator, --token and --ca-pin from token create --json output in this file (- for standard input)")
	if err := c.Parse(); err != nil {
		return err
	}
	if *join != "" {
		j, err := readJoin(*join, os.Stdin)
		if err != nil {
			return err
		}
		// A flag given as well wins over the file.
		if !c.Given("coordinator") {
			*coord = j.Coordinator
		}
		if !c.Given("token") {
			*token = j.Token
		}
		if !c.Given("ca-pin") {
			*pin = j.CAPin
		}
	}
	id, err := enroll.Enroll(ctx, enroll.Options{Coordinator: *coord, Token: *token, CAPin: *pin, StateDir: *dir})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Out, "enrolled as node %s (tenant %s); certificate valid until %s\nstart it with: olivares-agent run --state-dir %s\n",
		id.NodeID, id.Tenant, id.Leaf().NotAfter.UTC().Format(time.RFC3339), *dir)
	return nil
}

func cmdRun(ctx context.Context, c *cmdline.Call) error {
	fs := c.Flags
	dir := stateDir(fs)
	cfgPath := fs.String("config", "", "TOML config file")
	transport := fs.String("transport", "", "auto, quic or yamux (overrides the config)")
	coord := fs.String("coordinator", "", "coordinator address HOST:PORT, or several replicas' as HOST:PORT,HOST:PORT (overrides the enrolled one)")
	level := fs.String("log-level", "", "debug, info, warn or error (overrides [log] level; default info)")
	if err := c.Parse(); err != nil {
		return err
	}
	cfg, err := agentd.Load(*cfgPath)
	if err != nil {
		return err
	}
	if c.Given("state-dir") || cfg.StateDir == "" {
		cfg.StateDir = *dir
	}
	if *transport != "" {
		cfg.Transport = *transport
	}
	if *coord != "" {
		cfg.Coordinator = strings.Split(*coord, ",")
		if err := cfg.Coordinator.Check(); err != nil {
			return fmt.Errorf("--coordinator: %w", err)
		}
	}
	if *level != "" {
		cfg.Log.Level = *level
	}
	a, err := agentd.New(cfg, nil)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

func cmdStatus(ctx context.Context, c *cmdline.Call) error {
	dir := stateDir(c.Flags)
	asJSON := c.Flags.Bool("json", false, "print one JSON object")
	if err := c.Parse(); err != nil {
		return err
	}
	sock := localapi.SocketPath(*dir)
	st, err := localapi.GetStatus(ctx, sock)
	if err != nil {
		if errors.Is(err, localsock.ErrNotRunning) {
			return fmt.Errorf("no agent is running with state dir %s (nothing answers on %s); %s", *dir, sock, startHint(*dir))
		}
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(c.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	printStatus(c.Out, st)
	return nil
}

// startHint is how to start the agent of dir: dev mode runs the agent of
// its state dir's agent/ itself (issue 32 finding 8), so that one is
// started with dev mode.
func startHint(dir string) string {
	abs, err := filepath.Abs(dir)
	if err == nil && filepath.Base(abs) == "agent" {
		devDir := filepath.Dir(abs)
		// dev.json while dev mode runs, dev.last.json after (coordinator/devmode).
		for _, f := range []string{"dev.json", "dev.last.json"} {
			if _, err := os.Stat(filepath.Join(devDir, f)); err == nil {
				return "it is dev mode's agent: start dev mode with olivares-coordinator dev --state-dir " + devDir
			}
		}
	}
	return "start it with olivares-agent run --state-dir " + dir
}

// joinFile is what enroll --join reads: olivares-coordinator token create
// --json.
type joinFile struct {
	Coordinator string `json:"coordinator"`
	Token       string `json:"token"`
	CAPin       string `json:"ca_pin"`
}

func readJoin(path string, stdin io.Reader) (joinFile, error) {
	var raw []byte
	var err error
	if path == "-" {
		raw, err = io.ReadAll(io.LimitReader(stdin, 1<<20))
	} else {
		raw, err = os.ReadFile(path)
	}
	if err != nil {
		return joinFile{}, fmt.Errorf("enroll --join: %w", err)
	}
	var j joinFile
	if err := json.Unmarshal(raw, &j); err != nil {
		return joinFile{}, fmt.Errorf("enroll --join %s: not the JSON of olivares-coordinator token create --json: %w", path, err)
	}
	if j.Token == "" || j.CAPin == "" || j.Coordinator == "" {
		return joinFile{}, fmt.Errorf("enroll --join %s: it lacks the token, the CA pin or the coordinator's address", path)
	}
	return j, nil
}

// linkText is the link's line of status (issue 32 finding 13): the
// transport only while connected, and for a link that is down, when it
// was last up rather than a "since" that is not its state's.
func linkText(l link.Status) string {
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	switch {
	case l.State == "connected":
		return fmt.Sprintf("connected over %s (config %s) since %s", l.Transport, l.Configured, at(l.Since))
	case l.State == link.StateRevoked:
		return fmt.Sprintf("revoked since %s: this node will not connect again (config %s)", at(l.Since), l.Configured)
	case l.Connects == 0:
		return fmt.Sprintf("%s (config %s), never connected since the agent started", l.State, l.Configured)
	}
	return fmt.Sprintf("%s (config %s), last connected at %s", l.State, l.Configured, at(l.Since))
}

func printStatus(out io.Writer, st localapi.Status) {
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	l := st.Link
	fmt.Fprintf(out, "node:          %s (tenant %s, agent %s)\n", st.NodeID, st.Tenant, st.Version)
	fmt.Fprintf(out, "coordinator:   %s\n", l.Coordinator)
	fmt.Fprintf(out, "link:          %s\n", linkText(l))
	if l.LastError != "" {
		fmt.Fprintf(out, "last error:    %s\n", l.LastError)
	}
	fmt.Fprintf(out, "heartbeat:     %s (rtt %v)\n", ts(l.LastHeartbeat), l.RTT)
	fmt.Fprintf(out, "certificate:   valid until %s, renews at %s\n", ts(l.CertNotAfter), ts(l.NextRenewal))
	c := st.Capabilities
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	runtime := []string{}
	if c.Podman != "" {
		runtime = append(runtime, "podman")
	}
	if c.Docker != "" {
		runtime = append(runtime, "docker")
	}
	if len(runtime) == 0 {
		runtime = append(runtime, "none")
	}
	wt := "not configured"
	if c.WorktreeDirReady {
		wt = c.WorktreeDir
	}
	fmt.Fprintf(out, "pty:           %s\ncontainers:    %s\nworktree dir:  %s\n", yes(c.PTY), strings.Join(runtime, ", "), wt)
	if len(c.CLIs) == 0 {
		fmt.Fprintf(out, "vendor CLIs:   none on PATH\n")
	}
	for _, cli := range c.CLIs {
		v := cli.Version
		if cli.Error != "" {
			v += " (" + cli.Error + ")"
		}
		fmt.Fprintf(out, "cli %-10s %s  %s\n", cli.Name+":", v, cli.Path)
	}
	if len(st.Runs) == 0 {
		fmt.Fprintf(out, "live runs:     none\n")
		return
	}
	fmt.Fprintf(out, "live runs:     %d\n", len(st.Runs))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  RUN\tDRIVER\tGEN\tPID\tSTATE\tRING SEQ\tADOPTED FROM")
	for _, r := range st.Runs {
		seq := "empty"
		if r.LastSeq != 0 {
			seq = fmt.Sprintf("%d..%d", r.FirstSeq, r.LastSeq)
		}
		// A run this agent took over from its holder names the agent
		// version that started it (issue 30).
		adopted := "-"
		if r.AdoptedFrom != "" {
			adopted = "agent " + r.AdoptedFrom
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\t%s\t%s\n", r.RunRef, r.Driver, r.Generation, r.PID, r.State, seq, adopted)
	}
	tw.Flush()
}
