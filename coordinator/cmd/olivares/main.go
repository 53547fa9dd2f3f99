// Command olivares is the operator CLI of the Olivares coordinator API. Every
// command is a thin client of one or a few HTTP routes (R-CLI-2): it never
// derives a run's state or invents a result itself, it prints what the API
// answers and exits with the code its HTTP status maps to (see exitCode).
//
//	olivares login --url URL --token T --tenant T [--ca-file FILE]
//	olivares whoami [--json]
//	olivares node list|show ID|revoke ID [--json]
//	olivares profile add|list|show REF [--json]
//	olivares workspace add|list [--json]
//	olivares session start|list|show|events|input|interrupt|stop|resume|attach
//	olivares codex sessions|continue|archive
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/claudehook"
)

const usage = `olivares: drive an Olivares coordinator.

Usage:
  olivares login --url URL --token T --tenant T [--ca-file FILE]
  olivares login --dev DIR/dev.json
      Check the credentials against the coordinator and save them (0600).
  olivares login --sso --url URL [--tenant T] [--ca-file FILE] [--listen 127.0.0.1:8250] [--no-browser]
      Sign in with the coordinator's identity provider (single sign-on) in a
      browser; the provider answers on --listen (register
      http://127.0.0.1:8250/oidc/callback there). Saves the session (0600).
  olivares whoami [--json]
  olivares node list [--json]
  olivares node show ID [--json]
  olivares node revoke ID [--json]      cut the node off now and for good (admin)

  olivares profile add --node ID --tool claude|codex|grok|gemini|opencode --name NAME [--home DIR]
                       [--env K=V ...] [--json]
      Register a provider profile: one account/config home of one tool on one
      node. Env values stay on the node; only their names are shown again.
      Policy: [--active=false] [--requires-approval] [--allow-workspace WS ...]
      [--engine-hooks [--deny-tool T ...]] (claude: the engine's PreToolUse hook
      sees every tool use and refuses the denied ones; no settings file loaded).
  olivares profile list [--json]
  olivares profile show REF [--json]
  olivares profile update REF|NAME [--active=BOOL] [--requires-approval=BOOL]
                          [--allow-workspace WS ...] [--engine-hooks=BOOL]
                          [--env K=V ...] [--unset-env K ...] [--home DIR] [--json]
      Change the policy, the tool's environment (values stay on the node) or
      the home; it applies to the next launch or resume.
  olivares workspace add --node ID --path DIR --name NAME [--read-only]
                         [--allow-subpath P ...] [--max-read-bytes N] [--dlp allow|deny] [--json]
      Register a directory on a node; DIR is a path on the node, sent as given.
      The file rules apply to what the API shows of it (diffs).
  olivares workspace list [--json]
  olivares workspace show REF|NAME [--json]
  olivares agent workspace setup REF|NAME [--command TEXT]
      Show the workspace's setup command and its hash, or set it to the exact
      TEXT (admin; empty clears). Nothing runs it yet.
  olivares agent workspace approve-setup REF|NAME --sha256 HASH
      Approve the text you reviewed (admin, a person): worktree launches need it.
  olivares agent workspace project-config REF|NAME [--json]
      The agent configuration the repository carries that a tool would honour
      (hooks, MCP servers, base URLs, LD_PRELOAD ...), flagged per file, and its hash.
  olivares agent workspace approve-project-config REF|NAME --sha256 HASH
      Approve what you reviewed (admin, a person): tools that read flagged files
      start only while the approval matches.

  olivares session start --profile REF|NAME [--workspace REF|NAME] [--name N]
                         [--isolation native|container|sandbox] [--worktree]
                         [--worktree-from REV] [--no-setup]
                         [--grant KIND:SECRET_REF:ENV[:file] ...] [--json]
      Launch a run. A profile or workspace not given by ref (prof_…, ws_…) is
      looked up by its exact name. --grant hands a vault secret to the tool as
      ENV (or as a 0600 file whose path is in ENV); the run is tainted by its
      kind for good, which limits what can be read or handed on from it.
  olivares session list [--state S] [--limit N] [--offset N] [--archived] [--snoozed] [--json]
      Your pinned runs first, then the others, then those you marked done
      ("Earlier"). Runs you snoozed are hidden until due, archived runs unless
      --archived is given.
  olivares session show REF [--json]
  olivares session events REF [--json]   the run's lifecycle evidence
  olivares session input REF (--text T | --message M | --line JSON)
      --text for codex and grok; --message (plain text) or --line (one raw
      stream-json object) for claude.
  olivares session interrupt REF         cancel the active turn
  olivares session stop REF [--json]     SIGTERM, then SIGKILL, the process group
  olivares session resume REF [--json]   a new generation on the same conversation
  olivares session diff REF [--file PATH] [--json]
      What the run's worktree branch committed since it left the workspace's
      commit: the changed paths, or one path at base and at head.
  olivares session move REF --profile REF|NAME [--json]
      Carry a stopped Claude Code run's conversation to another Claude Code
      profile of its node; nothing starts, the next resume runs there.
  olivares session handoff REF --preview
      Print the summary a handoff would send (generated without a model), to
      review and edit into a file.
  olivares session handoff REF --profile REF|NAME [--summary-file F] [--name N] [--json]
      Stop the session, write its transcript under the target profile and start
      a new run there (any tool) whose first turn is the summary and the
      transcript's path.
  olivares session activity REF [--agent ID] [--json]
      What the run is doing, read on its node from the tool's own transcript
      (Claude Code, Codex): sub-agents, tasks, todos, files, the model and how
      full its context is. --agent prints one Claude Code sub-agent's turns.
  olivares session messages REF [--role user|all] [--q TEXT] [--at T] [--order asc|desc]
                            [--limit N] [--cursor ID] [--text] [--all] [--json]
  olivares session messages REF --id N [--json]
      What was said in the run: what people sent (--role all adds the tool's
      replies), first lines, or texts with --text (clipped at 64 KiB).
  olivares session approve REF [--json]  let a launch or resume its profile holds go on (a person, admin)
  olivares session attach REF [--from N] [--raw]
      Stream the run's output: stdout and pty frames to stdout, stderr frames
      to stderr. Reconnects by itself at the next seq after a dropped stream;
      exits after the run ends or when it is not live. --raw prints every
      event as one JSON line {"event","id","data"} instead.
  olivares session pin|unpin REF        your pin (at most 20; the oldest drops)
  olivares session snooze REF --until T  hide it from your list until T (RFC 3339, or 2h)
  olivares session unsnooze REF
  olivares session done|undone REF      file it under "Earlier" in your list
  olivares session rename REF --name N   the session's name for everyone; empty clears
  olivares session archive|unarchive REF archived for everyone; it keeps running
  olivares session cleanup REF [--discard-worktree]
      Release a run that is not live (admin): its marks go, it can be deleted.
  olivares session delete REF           delete a released run (admin)

` + lifecycleUsage + `
  olivares vault add NAME --value-file FILE|-   store a secret (admin); never on the command line
  olivares vault list [--json]
  olivares vault delete REF

  olivares audit list [--event E] [--run REF] [--actor ID] [--since T] [--limit N] [--all] [--json]
      The tenant's audit ledger, oldest first (admin).
  olivares audit verify [--json]
      Read the whole ledger and recompute its hash chain here; exits 1 and names
      the first broken link when an entry was changed or removed.

  olivares claude-hook
      The engine's Claude Code PreToolUse hook: Claude Code runs it for the
      runs of --engine-hooks profiles (it asks the run's agent).

` + codexUsage + `
Exit status: 0 on success, 2 for a usage error, 3 when the API answers 403,
4 for 404, 5 for 409, 6 for 422, and 1 for anything else.

Credentials live in $OLIVARES_CONFIG_DIR/credentials.json, else
<user config dir>/olivares/credentials.json.
`

func main() {
	if len(os.Args) > 1 && os.Args[1] == "claude-hook" {
		// The engine's Claude Code hook (R-ED-4): Claude Code runs it with
		// the hook input on stdin.
		os.Exit(claudehook.Main(os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := report(run(ctx, os.Args[1:], os.Stdout, os.Stderr), os.Stderr)
	stop()
	os.Exit(code)
}

// report prints err, if any, as "olivares: <message> (<code>)" and returns
// the process exit code for it.
func report(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "olivares:", err)
	return exitCode(err)
}

type usageError struct{ error }

// exitCode maps an error to the exit status R-CLI-2 names: the API's HTTP
// status decides, a usage error is 2 and anything that is not an API answer
// (no coordinator, bad local file) is 1.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	var ae *apiclient.Error
	if errors.As(err, &ae) {
		return statusExit(ae.Status)
	}
	return 1
}

// statusExit is R-CLI-2's table.
func statusExit(status int) int {
	switch {
	case status >= 200 && status < 300:
		return 0
	case status == http.StatusForbidden:
		return 3
	case status == http.StatusNotFound:
		return 4
	case status == http.StatusConflict:
		return 5
	case status == http.StatusUnprocessableEntity:
		return 6
	}
	return 1
}

// Credentials is the saved login.
type Credentials struct {
	URL    string `json:"url"`
	Token  string `json:"token"`
	Tenant string `json:"tenant"`
	CAFile string `json:"ca_file,omitempty"`
}

func credPath() (string, error) {
	if d := os.Getenv("OLIVARES_CONFIG_DIR"); d != "" {
		return filepath.Join(d, "credentials.json"), nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "olivares", "credentials.json"), nil
}

func loadCreds() (Credentials, error) {
	p, err := credPath()
	if err != nil {
		return Credentials{}, err
	}
	raw, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return Credentials{}, errors.New("not logged in; run olivares login --url URL --token T --tenant T")
	}
	if err != nil {
		return Credentials{}, err
	}
	var c Credentials
	if err := json.Unmarshal(raw, &c); err != nil {
		return Credentials{}, fmt.Errorf("%s: %w", p, err)
	}
	return c, nil
}

// callTimeout bounds each API call of a command; an attach stream has no
// overall bound, only this one for its response headers.
const callTimeout = 60 * time.Second

// newClient is the API client of the saved credentials, trusting the CA
// file's roots for https.
func newClient(c Credentials, timeout time.Duration) (*apiclient.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, err
		}
		roots, err := certs.ParseCertsPEM(pem)
		if err != nil {
			return nil, fmt.Errorf("--ca-file %s: %w", c.CAFile, err)
		}
		pool := x509.NewCertPool()
		for _, r := range roots {
			pool.AddCert(r)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	return apiclient.New(apiclient.Config{URL: c.URL, Token: c.Token, Tenant: c.Tenant,
		HTTPClient: &http.Client{Transport: tr}, Timeout: timeout}), nil
}

// groups are the commands that take a subcommand word.
var groups = map[string]string{
	"node":       "list, show, revoke or forget",
	"profile":    "add, list, show, update or delete",
	"workspace":  "add, list, show or delete",
	"principal":  "list, show, create or revoke",
	"credential": "list, create or revoke",
	"tenant":     "list",
	"session":    "start, list, show, events, input, interrupt, stop, resume, attach, pin, unpin, snooze, unsnooze, done, undone, rename, archive, unarchive, cleanup or delete",
	"codex":      "sessions, continue or archive",
}

func run(ctx context.Context, args []string, out, errOut io.Writer) (err error) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(out, usage)
		return nil
	}
	cmd, rest := args[0], args[1:]
	// An API error is told in the command's own terms: its flags, not the
	// API's fields.
	defer func() { err = explain(cmd, err) }()
	if ok, err := runLifecycle(ctx, args, out); ok {
		return err
	}
	if want, ok := groups[cmd]; ok {
		if len(rest) > 0 && (rest[0] == "-h" || rest[0] == "--help" || rest[0] == "help") {
			fmt.Fprint(out, usage)
			return nil
		}
		if len(rest) == 0 {
			return usageError{fmt.Errorf("%s: want %s", cmd, want)}
		}
		cmd, rest = cmd+" "+rest[0], rest[1:]
		if cmd == "agent workspace" {
			if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
				return usageError{fmt.Errorf("agent workspace: want %s", agentWorkspaceWords)}
			}
			cmd, rest = cmd+" "+rest[0], rest[1:]
		}
	}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(out)
	var o cmdOpts
	if cmd != "session attach" { // attach prints a stream; --raw is its JSON
		fs.BoolVar(&o.json, "json", false, "print JSON")
	}
	var url, token, tenant, caFile, devFile, ssoListen *string
	var ssoLogin, noBrowser *bool
	if cmd == "login" {
		ssoLogin = fs.Bool("sso", false, "sign in with the coordinator's identity provider in a browser")
		ssoListen = fs.String("listen", DefaultSSOListen, "with --sso: the loopback address the identity provider answers on")
		noBrowser = fs.Bool("no-browser", false, "with --sso: print the sign-in address instead of opening a browser")
		url = fs.String("url", "", "coordinator API URL")
		token = fs.String("token", "", "bearer token")
		tenant = fs.String("tenant", "", "tenant")
		caFile = fs.String("ca-file", "", "CA PEM to trust for https (the coordinator's ca.pem)")
		devFile = fs.String("dev", "", "take url, token and tenant from a dev mode dev.json")
	}
	o.define(cmd, fs)
	cx := defineCodex(cmd, fs)
	// Flags may come after the positional argument (olivares node show ID --json).
	var pos []string
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return usageError{err}
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	needArg := func(what string) (string, error) {
		if len(pos) != 1 {
			return "", usageError{fmt.Errorf("%s: want exactly one %s", cmd, what)}
		}
		return pos[0], nil
	}
	emit := func(v any, text func()) error {
		if o.json {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		}
		text()
		return nil
	}

	if cmd == "login" {
		if *devFile != "" {
			raw, err := os.ReadFile(*devFile)
			if err != nil {
				return fmt.Errorf("login --dev: %w (is dev mode running? it writes dev.json when ready)", err)
			}
			var dev struct {
				APIURL     string `json:"api_url"`
				AdminToken string `json:"admin_token"`
				Tenant     string `json:"tenant"`
			}
			if err := json.Unmarshal(raw, &dev); err != nil {
				return fmt.Errorf("login --dev %s: %w", *devFile, err)
			}
			*url, *token, *tenant = dev.APIURL, dev.AdminToken, dev.Tenant
		}
		if *ssoLogin {
			if *url == "" || *token != "" || *devFile != "" {
				return usageError{errors.New("login --sso: give --url (and --tenant when you belong to several), not --token or --dev")}
			}
		} else if *url == "" || *token == "" || *tenant == "" {
			return usageError{errors.New("login: --url, --token and --tenant are required (or --sso --url to sign in with the identity provider)")}
		}
		creds := Credentials{URL: *url, Token: *token, Tenant: *tenant}
		if *caFile != "" {
			abs, err := filepath.Abs(*caFile)
			if err != nil {
				return err
			}
			creds.CAFile = abs
		}
		if *ssoLogin {
			var err error
			if creds, _, err = loginSSO(ctx, creds, *ssoListen, !*noBrowser, out, errOut); err != nil {
				return err
			}
		}
		cl, err := newClient(creds, callTimeout)
		if err != nil {
			return err
		}
		who, err := cl.Whoami(ctx)
		if err != nil {
			return fmt.Errorf("login refused: %w", err)
		}
		if !*ssoLogin {
			// R-LIFE-5: keep a credential of this login's own, which
			// olivares logout revokes; the token given stays as it was.
			own, ok, err := ownCredential(ctx, cl)
			if err != nil {
				return fmt.Errorf("login: %w", err)
			}
			if ok {
				creds.Token = own
			}
		}
		p, err := credPath()
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		raw, _ := json.MarshalIndent(creds, "", "  ")
		if err := certs.WriteFileAtomic(p, raw, 0o600); err != nil {
			return err
		}
		return emit(who, func() {
			fmt.Fprintf(out, "logged in to %s as %s (%s in %s); credentials in %s\n", *url, who.Name, who.Role, creds.Tenant, p)
		})
	}
	if cx != nil {
		if err := cx.check(pos, o.set); err != nil {
			return err
		}
		cx.jsonOut = o.json
		return runCodex(ctx, cx, pos, out)
	}
	if !knownCommand(cmd) {
		return usageError{fmt.Errorf("unknown command %q; see olivares --help", cmd)}
	}
	// Usage errors come before the credentials, so that a typo says so even
	// when not logged in.
	if err := o.check(cmd, pos); err != nil {
		return err
	}

	creds, err := loadCreds()
	if err != nil {
		return err
	}
	cl, err := newClient(creds, callTimeout)
	if err != nil {
		return err
	}
	switch cmd {
	case "whoami":
		if len(pos) > 0 {
			return usageError{errors.New("whoami takes no argument")}
		}
		who, err := cl.Whoami(ctx)
		if err != nil {
			return err
		}
		return emit(who, func() {
			fmt.Fprintf(out, "%s (%s, %s) in tenant %s at %s\n", who.Name, who.Kind, who.Role, who.Tenant, creds.URL)
		})
	case "node list":
		if len(pos) > 0 {
			return usageError{errors.New("node list takes no argument")}
		}
		res, err := cl.Nodes(ctx)
		if err != nil {
			return err
		}
		return emit(res, func() {
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tHOST\tSTATE\tTRANSPORT\tLAST HEARTBEAT\tCERT EXPIRES")
			for _, an := range res.Nodes {
				n := node{an}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, dash(n.Hostname), n.state(), dash(n.Transport), ago(n.LastHeartbeat), n.CertNotAfter.Format(time.RFC3339))
			}
			tw.Flush()
		})
	case "node show", "node revoke":
		id, err := needArg("node id")
		if err != nil {
			return err
		}
		get := cl.Node
		if cmd == "node revoke" {
			get = cl.RevokeNode
		}
		an, err := get(ctx, id)
		if err != nil {
			return err
		}
		n := node{an}
		return emit(n, func() { n.print(out) })
	}
	return runSessions(ctx, cl, cmd, pos, &o, out, errOut, emit)
}

type node struct{ apitypes.Node }

func (n node) state() string { return n.State() }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ago(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return time.Since(*t).Round(time.Second).String() + " ago"
}

func (n node) print(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "node\t%s\n", n.ID)
	fmt.Fprintf(tw, "tenant\t%s\n", n.Tenant)
	fmt.Fprintf(tw, "host\t%s\n", dash(n.Hostname))
	fmt.Fprintf(tw, "state\t%s\n", n.state())
	fmt.Fprintf(tw, "transport\t%s\n", dash(n.Transport))
	if n.ConnectedSince != nil {
		fmt.Fprintf(tw, "connected since\t%s\n", n.ConnectedSince.Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "last heartbeat\t%s\n", ago(n.LastHeartbeat))
	fmt.Fprintf(tw, "agent version\t%s\n", dash(n.AgentVersion))
	fmt.Fprintf(tw, "enrolled\t%s\n", n.EnrolledAt.Format(time.RFC3339))
	fmt.Fprintf(tw, "certificate\t%s, expires %s\n", n.CertSerial, n.CertNotAfter.Format(time.RFC3339))
	if n.RevokedAt != nil {
		fmt.Fprintf(tw, "revoked\t%s\n", n.RevokedAt.Format(time.RFC3339))
	}
	keys := make([]string, 0, len(n.Labels))
	for k := range n.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(tw, "label\t%s=%s\n", k, n.Labels[k])
	}
	var caps struct {
		PTY    bool   `json:"pty"`
		Podman string `json:"podman"`
		Docker string `json:"docker"`
		WT     bool   `json:"worktree_dir_configured"`
		CLIs   []struct {
			Name, Version string
		} `json:"clis"`
	}
	if json.Unmarshal(n.Capabilities, &caps) == nil {
		fmt.Fprintf(tw, "pty\t%v\n", caps.PTY)
		fmt.Fprintf(tw, "podman / docker\t%s / %s\n", dash(caps.Podman), dash(caps.Docker))
		fmt.Fprintf(tw, "worktree dir\t%v\n", caps.WT)
		for _, c := range caps.CLIs {
			fmt.Fprintf(tw, "cli %s\t%s\n", c.Name, dash(c.Version))
		}
	}
	tw.Flush()
}
