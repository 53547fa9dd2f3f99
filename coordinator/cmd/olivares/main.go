// Command olivares is the operator CLI of the Olivares coordinator API.
//
//	olivares login --url URL --token T --tenant T [--ca-file FILE]
//	olivares whoami [--json]
//	olivares node list|show ID|revoke ID [--json]
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
	"github.com/olivares-dev/olivares/shared/apitypes"
)

const usage = `olivares: drive an Olivares coordinator.

Usage:
  olivares login --url URL --token T --tenant T [--ca-file FILE]
  olivares login --dev DIR/dev.json
      Check the credentials against the coordinator and save them (0600).
  olivares whoami [--json]
  olivares node list [--json]
  olivares node show ID [--json]
  olivares node revoke ID [--json]      cut the node off now and for good (admin)

Credentials live in $OLIVARES_CONFIG_DIR/credentials.json, else
<user config dir>/olivares/credentials.json.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "olivares:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

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

// client calls the API with the saved credentials.
type client struct {
	c    Credentials
	http *http.Client
}

func newClient(c Credentials) (*client, error) {
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
	return &client{c: c, http: &http.Client{Transport: tr, Timeout: 60 * time.Second}}, nil
}

type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%s (%d %s)", e.Message, e.Status, e.Code) }

func (cl *client) do(ctx context.Context, method, path string, result any) error {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(cl.c.URL, "/")+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+cl.c.Token)
	req.Header.Set("X-Olivares-Tenant", cl.c.Tenant)
	resp, err := cl.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the coordinator at %s: %w", cl.c.URL, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var body struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		json.Unmarshal(raw, &body)
		if body.Error.Message == "" {
			body.Error.Message = resp.Status
		}
		return &apiError{Status: resp.StatusCode, Code: body.Error.Code, Message: body.Error.Message}
	}
	if result != nil {
		return json.Unmarshal(raw, result)
	}
	return nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(out, usage)
		return nil
	}
	cmd, rest := args[0], args[1:]
	if cmd == "node" {
		if len(rest) == 0 {
			return usageError{errors.New("node: want list, show or revoke")}
		}
		cmd, rest = "node "+rest[0], rest[1:]
	}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(out)
	asJSON := fs.Bool("json", false, "print JSON")
	var url, token, tenant, caFile, devFile *string
	if cmd == "login" {
		url = fs.String("url", "", "coordinator API URL")
		token = fs.String("token", "", "bearer token")
		tenant = fs.String("tenant", "", "tenant")
		caFile = fs.String("ca-file", "", "CA PEM to trust for https (the coordinator's ca.pem)")
		devFile = fs.String("dev", "", "take url, token and tenant from a dev mode dev.json")
	}
	// Flags may come after the node id (olivares node show ID --json).
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
	needArg := func() (string, error) {
		if len(pos) != 1 {
			return "", usageError{fmt.Errorf("%s: want exactly one node id", cmd)}
		}
		return pos[0], nil
	}
	emit := func(v any, text func()) error {
		if *asJSON {
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
		if *url == "" || *token == "" || *tenant == "" {
			return usageError{errors.New("login: --url, --token and --tenant are required")}
		}
		creds := Credentials{URL: *url, Token: *token, Tenant: *tenant}
		if *caFile != "" {
			abs, err := filepath.Abs(*caFile)
			if err != nil {
				return err
			}
			creds.CAFile = abs
		}
		cl, err := newClient(creds)
		if err != nil {
			return err
		}
		var who map[string]any
		if err := cl.do(ctx, "GET", "/v1/whoami", &who); err != nil {
			return fmt.Errorf("login refused: %w", err)
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
			fmt.Fprintf(out, "logged in to %s as %v (%v in %s); credentials in %s\n", *url, who["name"], who["role"], *tenant, p)
		})
	}

	creds, err := loadCreds()
	if err != nil {
		return err
	}
	cl, err := newClient(creds)
	if err != nil {
		return err
	}
	switch cmd {
	case "whoami":
		if len(pos) > 0 {
			return usageError{errors.New("whoami takes no argument")}
		}
		var who map[string]any
		if err := cl.do(ctx, "GET", "/v1/whoami", &who); err != nil {
			return err
		}
		return emit(who, func() {
			fmt.Fprintf(out, "%v (%v, %v) in tenant %v at %s\n", who["name"], who["kind"], who["role"], who["tenant"], creds.URL)
		})
	case "node list":
		if len(pos) > 0 {
			return usageError{errors.New("node list takes no argument")}
		}
		var res apitypes.NodeList
		if err := cl.do(ctx, "GET", "/v1/nodes", &res); err != nil {
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
		id, err := needArg()
		if err != nil {
			return err
		}
		method, path := "GET", "/v1/nodes/"+id
		if cmd == "node revoke" {
			method, path = "POST", path+"/revoke"
		}
		var n node
		if err := cl.do(ctx, method, path, &n); err != nil {
			return err
		}
		return emit(n, func() { n.print(out) })
	}
	return usageError{fmt.Errorf("unknown command %q; see olivares --help", cmd)}
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
