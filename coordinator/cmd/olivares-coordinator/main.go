// Command olivares-coordinator is the Olivares control plane: the public API,
// the node tunnels, enrollment and the CA. Its commands are one table,
// commands, whose usage fields make olivares-coordinator --help.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/coordinator/devmode"
	"github.com/olivares-dev/olivares/coordinator/store/bolt"
	"github.com/olivares-dev/olivares/coordinator/store/postgres"
	"github.com/olivares-dev/olivares/coordinator/store/transfer"
	"github.com/olivares-dev/olivares/shared/claudehook"
	"github.com/olivares-dev/olivares/shared/cmdline"
	"github.com/olivares-dev/olivares/shared/localsock"
)

// commands is the command table: olivares-coordinator --help and each
// command's and group's --help come from its usage fields.
var commands = &cmdline.Table{
	Bin:  "olivares-coordinator",
	Head: "olivares-coordinator: the Olivares control plane.\n\nUsage:\n",
	Tail: `
olivares-coordinator --version prints the version.

token, principal and signin-link talk to the running coordinator over DIR/admin.sock:
only the coordinator opens its store.
`,
	Commands: []cmdline.Command{{
		Name: "dev", Run: cmdDev,
		Usage: `olivares-coordinator dev [--state-dir DIR] [--http 127.0.0.1:7443] [--tunnel 127.0.0.1:7444] [--metrics 127.0.0.1:0] [--reenroll] [--log-level LEVEL]
    Everything on this host: CA, tenant "default", an admin, one local agent
    enrolled with a real join token over the real tunnel. Writes DIR/dev.json.
    Port 0 picks a free port (the tunnel's too) and keeps it across restarts
    while it is free. --reenroll enrolls the local agent again after its node
    was revoked, and moves its profiles and workspace default to the new node.
    Started by go run, it stops when go run is killed. Logs are text
    (key=value) on standard output.
`,
	}, {
		Name: "serve", Run: cmdServe,
		Usage: `olivares-coordinator serve --config FILE [--state-dir DIR] [--log-level LEVEL]
    Production mode: TLS on the public API, tunnel listener for agents, and
    Prometheus /metrics on its own listener ([metrics] listen, default
    127.0.0.1:7445, loopback; "off" for none; token_file to ask a bearer token).
    SIGHUP reloads the API's certificate files and the CA (after ca promote)
    without dropping tunnels; SIGTERM drains requests, then stops. Logs go
    to standard error, one JSON object per line ([log] format = "text" for
    key=value), at info and above (--log-level or [log] level), with one
    access line per request carrying its X-Request-Id.
`,
	}, {
		Name: "ca init", Run: cmdCAInit,
		Usage: "olivares-coordinator ca init --dir DIR        create (or show) the CA\n",
	}, {
		Name: "ca rotate", Run: cmdCARoot,
		Usage: "olivares-coordinator ca rotate --dir DIR      add a next root to the bundle\n",
	}, {
		Name: "ca promote", Run: cmdCARoot,
		Usage: "olivares-coordinator ca promote --dir DIR     make the next root the signer\n",
	}, {
		Name: "token create", Run: cmdTokenCreate,
		Usage: `olivares-coordinator token create [--ttl 30m] [--label k=v]... [--tenant default] [--state-dir DIR] [--json]
    A single-use join token for one new node, and the CA pin to check.
`,
	}, {
		Name: "principal create", Run: cmdPrincipalCreate,
		Usage: `olivares-coordinator principal create --tenant T --name N --role viewer|operator|admin --kind human|agent [--new-tenant] [--state-dir DIR] [--json]
    A principal and its bearer token (shown once). Names are unique in a
    tenant; a tenant that does not exist is refused unless --new-tenant.
`,
	}, {
		Name: "tenant create", Run: cmdTenantCreate,
		Usage: "olivares-coordinator tenant create ID [--state-dir DIR] [--json]    create a tenant\n",
	}, {
		Name: "tenant list", Run: cmdTenantList,
		Usage: "olivares-coordinator tenant list [--state-dir DIR] [--json]         list them all\n",
	}, {
		Name: "principal add-credential", Run: cmdAddCredential,
		Usage: `olivares-coordinator principal add-credential --principal ID [--kind session|api_token] [--label L] [--state-dir DIR] [--json]
    Another bearer token for the principal (shown once). A session credential
    (a console or olivares login session) shares the person's pins, snoozes and
    done marks; an API token keeps its own.
`,
	}, {
		Name: "signin-link", Run: cmdSigninLink,
		Usage: `olivares-coordinator signin-link --principal ID [--ttl 15m] [--url BASE] [--state-dir DIR] [--json]
    A one-time link that signs the person into the web console (single use,
    15 minutes by default, at most 24h). --url is the console's address as the
    person reaches it (default: the API's listen address).
`,
	}, {
		Name: "migrate", Run: cmdMigrate,
		Usage: `olivares-coordinator migrate --from-bbolt FILE --to-postgres DSN
    Copy a single-node deployment's store (STATE_DIR/coordinator.db, with the
    coordinator stopped) into a PostgreSQL database, then verify the copy:
    the count of every kind of record and each tenant's audit chain. Run it
    again to pick up what changed; an unchanged file writes nothing. Then
    set [store] driver = "postgres" and dsn in the coordinator's config.
`,
	}},
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "claude-hook" {
		// The engine's Claude Code hook (R-ED-4): Claude Code runs it with
		// the hook input on stdin.
		os.Exit(claudehook.Main(os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := report(ctx, commands.Run(ctx, os.Args[1:], os.Stdout), os.Stderr)
	stop()
	os.Exit(code)
}

// report prints err, if any, and returns the exit status: 2 for a usage
// error, 1 for any other. A start-up that Ctrl-C (or SIGTERM) cut short
// says so, not "context canceled" (issue 32 finding 12).
func report(ctx context.Context, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, errHelp) {
		return 0
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "olivares-coordinator: stopped while starting (interrupted); nothing was left running")
		return 1
	}
	fmt.Fprintln(stderr, "olivares-coordinator:", err)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

type usageError = cmdline.UsageError

var errHelp = cmdline.ErrHelp

func cmdDev(ctx context.Context, c *cmdline.Call) error {
	fs := c.Flags
	dir := fs.String("state-dir", devmode.DefaultStateDir(), "state directory (created on first start, reused after)")
	httpAddr := fs.String("http", "127.0.0.1:7443", "API address (loopback only; port 0 picks one, dev.json has it)")
	tun := fs.String("tunnel", "127.0.0.1:7444", "tunnel address, TCP and UDP (loopback only; a free port when --http has port 0, dev.json has it)")
	noQUIC := fs.Bool("no-quic", false, "leave out the QUIC listener (the agent falls back to yamux)")
	metrics := fs.String("metrics", "127.0.0.1:0", "Prometheus /metrics address, apart from the API (loopback only; port 0 picks one, dev.json has it)")
	reenroll := fs.Bool("reenroll", false, "when the local node was revoked: enroll this host again and move its profiles and workspace default to the new node")
	level := fs.String("log-level", "info", "debug, info, warn or error (the log is text on standard output)")
	if err := c.Parse(); err != nil {
		return err
	}
	tunnel := *tun
	if !c.Given("tunnel") {
		tunnel = "" // dev mode picks: 7444, or a free port with --http ...:0
	}
	// Started by go run: stop with it (R-DEV-1).
	if err := devmode.DieWithGoRun(); err != nil {
		return err
	}
	return devmode.Run(ctx, devmode.Options{StateDir: *dir, HTTP: *httpAddr, Tunnel: tunnel, DisableQUIC: *noQUIC, Reenroll: *reenroll, Metrics: *metrics, Out: c.Out, LogLevel: *level})
}

func cmdServe(ctx context.Context, c *cmdline.Call) error {
	fs, out := c.Flags, c.Out
	cfgPath := fs.String("config", "", "TOML config file")
	dir := fs.String("state-dir", "", "state directory (overrides state_dir)")
	level := fs.String("log-level", "", "debug, info, warn or error (overrides [log] level; default info)")
	if err := c.Parse(); err != nil {
		return err
	}
	if *cfgPath == "" && *dir == "" {
		return usageError{Err: errors.New("serve: --config FILE is required (deploy/olivares-coordinator.toml is an example; olivares-coordinator dev needs none)")}
	}
	cfg, err := coordd.Load(*cfgPath)
	if err != nil {
		return err
	}
	if *dir != "" {
		cfg.StateDir = *dir
	}
	if *level != "" {
		cfg.Log.Level = *level
	}
	co, err := coordd.New(cfg, nil)
	if err != nil {
		return err
	}
	defer co.Close()
	if err := co.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "olivares-coordinator: serving %s, tunnel %s, CA pin %s\n", co.APIURL(), co.TunnelAddr(), certs.Pin(co.Authority.Roots()[0]))
	if u := co.MetricsURL(); u != "" {
		fmt.Fprintf(out, "olivares-coordinator: metrics on %s\n", u)
	}
	// SIGHUP reloads the certificates (a renewed API certificate, a
	// promoted CA root) without dropping a tunnel or a stream.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-co.Errors():
			return err
		case <-hup:
			if err := co.Reload(); err != nil {
				fmt.Fprintf(os.Stderr, "olivares-coordinator: SIGHUP: %v (still serving the previous certificates)\n", err)
				continue
			}
			fmt.Fprintln(out, "olivares-coordinator: SIGHUP: certificates reloaded")
		}
	}
}

// caDir is the --dir of the ca commands.
func caDir(c *cmdline.Call) (string, error) {
	dir := c.Flags.String("dir", "", "CA directory")
	if err := c.Parse(); err != nil {
		return "", err
	}
	if *dir == "" {
		return "", usageError{Err: errors.New("ca: --dir is required")}
	}
	return *dir, nil
}

func cmdCAInit(_ context.Context, c *cmdline.Call) error {
	dir, err := caDir(c)
	if err != nil {
		return err
	}
	a, created, err := certs.InitAuthority(dir, time.Now())
	if err != nil {
		return err
	}
	verb := "created"
	if !created {
		verb = "exists"
	}
	fmt.Fprintf(c.Out, "CA %s in %s\nCA pin: %s\n", verb, dir, certs.Pin(a.Current))
	return nil
}

// cmdCARoot is ca rotate and ca promote.
func cmdCARoot(_ context.Context, c *cmdline.Call) error {
	dir, err := caDir(c)
	if err != nil {
		return err
	}
	a, err := certs.LoadAuthority(dir)
	if err != nil {
		return err
	}
	sub := strings.TrimPrefix(c.Flags.Name(), "ca ")
	if sub == "rotate" {
		err = a.Rotate(dir, time.Now())
	} else {
		err = a.Promote(dir, time.Now())
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Out, "CA %sd; signer pin %s; bundle holds %d roots (send the coordinator SIGHUP, or restart it, to apply)\n", sub, certs.Pin(a.Current), len(a.Roots()))
	return nil
}

type labels map[string]string

func (l labels) String() string { return "" }
func (l labels) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("label %q: want key=value", s)
	}
	l[k] = v
	return nil
}

// admin is a command that talks to the running coordinator over its admin
// socket, with --state-dir and --json. Left out, --state-dir is
// $OLIVARES_STATE_DIR, else dev mode's; the command then says which
// coordinator it spoke to (issue 32 finding 8: a principal meant for
// serve's coordinator must not land in dev mode's without a word).
type admin struct {
	c    *cmdline.Call
	dir  string
	json bool
}

func newAdmin(c *cmdline.Call) *admin {
	a := &admin{c: c}
	dir := filepath.Join(devmode.DefaultStateDir(), "coordinator")
	c.Flags.StringVar(&a.dir, "state-dir", cmp.Or(os.Getenv("OLIVARES_STATE_DIR"), dir), "the running coordinator's state directory (default: $OLIVARES_STATE_DIR, else dev mode's)")
	c.Flags.BoolVar(&a.json, "json", false, "print JSON")
	return a
}

// do sends req and reads the answer into resp, then prints on standard
// error which coordinator answered when --state-dir was left out; with
// --json it prints resp and the command is done.
func (a *admin) do(ctx context.Context, method, path string, req, resp any) (done bool, err error) {
	err = localsock.Do(ctx, filepath.Join(a.dir, coordd.AdminSock), method, path, req, resp)
	if errors.Is(err, localsock.ErrNotRunning) {
		err = fmt.Errorf("no coordinator is running with state dir %s (start it with olivares-coordinator serve or dev, or pass --state-dir: serve's is its config's state_dir)", a.dir)
	}
	if err != nil {
		return true, err
	}
	if !a.c.Given("state-dir") {
		whose := "$OLIVARES_STATE_DIR"
		if os.Getenv("OLIVARES_STATE_DIR") == "" {
			whose = "dev mode's"
		}
		fmt.Fprintf(os.Stderr, "olivares-coordinator: %s: the coordinator of state dir %s (%s; --state-dir names another)\n", a.c.Flags.Name(), a.dir, whose)
	}
	if a.json {
		return true, json.NewEncoder(a.c.Out).Encode(resp)
	}
	return false, nil
}

func cmdTokenCreate(ctx context.Context, c *cmdline.Call) error {
	fs, a := c.Flags, newAdmin(c)
	ttl := fs.Duration("ttl", 30*time.Minute, "token lifetime (at most 24h)")
	tenant := fs.String("tenant", "default", "tenant the node joins")
	lb := labels{}
	fs.Var(lb, "label", "node label k=v (repeatable)")
	if err := c.Parse(); err != nil {
		return err
	}
	var resp coordd.TokenResponse
	if done, err := a.do(ctx, "POST", "/join-tokens", coordd.TokenRequest{Tenant: *tenant, Labels: lb, TTL: *ttl}, &resp); done {
		return err
	}
	fmt.Fprintf(c.Out, "join token: %s\nnode id:    %s\nCA pin:     %s\nexpires:    %s\n\nOn the node:\n  olivares-agent enroll --coordinator %s --token %s --ca-pin %s\n",
		resp.Token, resp.NodeID, resp.CAPin, resp.ExpiresAt.Format(time.RFC3339), resp.Coordinator, resp.Token, resp.CAPin)
	return nil
}

func cmdPrincipalCreate(ctx context.Context, c *cmdline.Call) error {
	fs, a := c.Flags, newAdmin(c)
	tenant := fs.String("tenant", "", "tenant")
	name := fs.String("name", "", "name")
	role := fs.String("role", "", "viewer, operator or admin")
	kind := fs.String("kind", "human", "human or agent")
	newTenant := fs.Bool("new-tenant", false, "create the tenant when it does not exist (otherwise an unknown tenant is refused)")
	if err := c.Parse(); err != nil {
		return err
	}
	if *tenant == "" || *name == "" || *role == "" {
		return usageError{Err: errors.New("principal create: --tenant, --name and --role are required")}
	}
	var resp coordd.PrincipalResponse
	if done, err := a.do(ctx, "POST", "/principals", coordd.PrincipalRequest{Tenant: *tenant, Name: *name, Role: *role, Kind: *kind, NewTenant: *newTenant}, &resp); done {
		return err
	}
	fmt.Fprintf(c.Out, "principal %s (%s, %s in %s)\ntoken: %s\n(shown once; it is stored only as a hash)\n", resp.PrincipalID, resp.Kind, resp.Role, resp.Tenant, resp.Token)
	return nil
}

func cmdTenantCreate(ctx context.Context, c *cmdline.Call) error {
	a := newAdmin(c)
	var id string
	if len(c.Args) > 0 && !strings.HasPrefix(c.Args[0], "-") {
		id, c.Args = c.Args[0], c.Args[1:]
	}
	if err := c.Parse(); err != nil {
		return err
	}
	if id == "" {
		return usageError{Err: errors.New("tenant create: give the tenant's id (tenant create ID)")}
	}
	var t struct {
		ID        string    `json:"id"`
		CreatedAt time.Time `json:"created_at"`
	}
	if done, err := a.do(ctx, "POST", "/tenants", coordd.TenantRequest{ID: id}, &t); done {
		return err
	}
	fmt.Fprintf(c.Out, "tenant %s created; add people with olivares-coordinator principal create --tenant %s ...\n", t.ID, t.ID)
	return nil
}

func cmdTenantList(ctx context.Context, c *cmdline.Call) error {
	a := newAdmin(c)
	if err := c.Parse(); err != nil {
		return err
	}
	var resp struct {
		Items []struct {
			ID        string    `json:"id"`
			CreatedAt time.Time `json:"created_at"`
		} `json:"items"`
	}
	if done, err := a.do(ctx, "GET", "/tenants", nil, &resp); done {
		return err
	}
	for _, t := range resp.Items {
		fmt.Fprintf(c.Out, "%s\t%s\n", t.ID, t.CreatedAt.UTC().Format(time.RFC3339))
	}
	return nil
}

func cmdAddCredential(ctx context.Context, c *cmdline.Call) error {
	fs, a := c.Flags, newAdmin(c)
	principal := fs.String("principal", "", "principal id (prn_...)")
	kind := fs.String("kind", "session", "session (shares the person's marks) or api_token (its own)")
	label := fs.String("label", "", "what the credential is for")
	if err := c.Parse(); err != nil {
		return err
	}
	if *principal == "" {
		return usageError{Err: errors.New("principal add-credential: --principal is required")}
	}
	var resp coordd.CredentialResponse
	if done, err := a.do(ctx, "POST", "/credentials", coordd.CredentialRequest{PrincipalID: *principal, Kind: *kind, Label: *label}, &resp); done {
		return err
	}
	fmt.Fprintf(c.Out, "credential %s (%s) of principal %s\ntoken: %s\n(shown once; it is stored only as a hash)\n", resp.CredentialID, resp.Kind, resp.PrincipalID, resp.Token)
	return nil
}

func cmdSigninLink(ctx context.Context, c *cmdline.Call) error {
	fs, a := c.Flags, newAdmin(c)
	principal := fs.String("principal", "", "the person's principal id (prn_...)")
	ttl := fs.Duration("ttl", 15*time.Minute, "how long the link may be used (at most 24h)")
	base := fs.String("url", "", "the console's address as the person reaches it (default: the API listen address)")
	if err := c.Parse(); err != nil {
		return err
	}
	if *principal == "" {
		return usageError{Err: errors.New("signin-link: --principal is required")}
	}
	var resp coordd.SigninLinkResponse
	if done, err := a.do(ctx, "POST", "/signin-links", coordd.SigninLinkRequest{PrincipalID: *principal, TTL: *ttl, BaseURL: *base}, &resp); done {
		return err
	}
	fmt.Fprintf(c.Out, "%s\n(signs %s into the console once, until %s)\n", resp.URL, resp.PrincipalID, resp.ExpiresAt.Format(time.RFC3339))
	return nil
}

func cmdMigrate(ctx context.Context, c *cmdline.Call) error {
	fs, out := c.Flags, c.Out
	from := fs.String("from-bbolt", "", "the coordinator's bbolt file (STATE_DIR/coordinator.db); stop the coordinator first")
	to := fs.String("to-postgres", "", "the PostgreSQL DSN (postgres://user@host:5432/db?sslmode=...); PGPASSWORD or ~/.pgpass supply the password")
	if err := c.Parse(); err != nil {
		return err
	}
	if *from == "" || *to == "" {
		return usageError{Err: errors.New("migrate: --from-bbolt and --to-postgres are required")}
	}
	if _, err := os.Stat(*from); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	src, err := bolt.OpenReadOnly(*from)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer src.Close()
	dst, err := postgres.Open(ctx, postgres.Options{DSN: *to})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer dst.Close()
	fmt.Fprintf(out, "migrate: copying %s into PostgreSQL\n", *from)
	rep, err := transfer.Copy(ctx, src, dst, out)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	n := 0
	for _, k := range rep.Kinds {
		n += k.Source
	}
	fmt.Fprintf(out, "migrate: done: %d records, %d written, %d audit chains verified\n", n, rep.Written(), len(rep.Chains))
	fmt.Fprintf(out, "migrate: now set [store] driver = \"postgres\" and dsn in the coordinator's config, and start it with the same state dir (CA and vault key)\n")
	return nil
}
