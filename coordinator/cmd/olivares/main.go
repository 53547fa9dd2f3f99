// Command olivares is the operator CLI of the Olivares coordinator API. Every
// command is a thin client of one or a few HTTP routes (R-CLI-2): it never
// derives a run's state or invents a result itself, it prints what the API
// answers and exits with the code its HTTP status maps to (see exitCode).
//
// The commands are one table (command.go): each group of commands is built
// in its own file with its own flags (login.go, node.go, profile.go,
// workspace.go, session.go, attach.go, marks.go, activity.go,
// lifecycle.go, vault.go, audit.go, webhook.go, usage.go, codex.go,
// claude.go, completion.go), and olivares --help and every group's and
// command's --help are assembled from their usage fields.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/cmdline"
)

// usageHead and usageTail frame the commands' usage in olivares --help.
const usageHead = `olivares: drive an Olivares coordinator.

Usage:
`

const usageTail = `
olivares --version prints the CLI's version.

Every command and group answers --help (olivares session --help,
olivares session start --help) and runs nothing then.

Exit status: 0 on success, 2 for a usage error, 3 when the API answers 403,
4 for 404 (an unknown ref or name), 5 for 409, 6 for 422, and 1 for anything else.

Output is plain when piped; on a terminal, states and the attached
conversation are coloured unless NO_COLOR is set.

Credentials live in $OLIVARES_CONFIG_DIR/credentials.json, else
<user config dir>/olivares/credentials.json.
`

// usage is the whole of olivares --help: each command's usage in table order.
func usage(tab []*command) string {
	var b strings.Builder
	b.WriteString(usageHead)
	group := ""
	for _, c := range tab {
		if g := groupOf(c.name); g != group || g == "" {
			if b.Len() > len(usageHead) {
				b.WriteString("\n")
			}
			group = g
		}
		b.WriteString(cmdline.Indent(c.usage))
	}
	b.WriteString(usageTail)
	return b.String()
}

func main() {
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
	var es exitStatus
	if !errors.As(err, &es) {
		fmt.Fprintln(stderr, "olivares:", err)
	}
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
	var es exitStatus
	if errors.As(err, &es) {
		return int(es)
	}
	var nf notFound
	if errors.As(err, &nf) {
		return 4
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
	// Own is set when Token is the login's own credential (minted by
	// POST /v1/login or a single sign-on), which logout and the next login
	// revoke; a token that was given as it is stays live.
	Own bool `json:"own,omitempty"`
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

func run(ctx context.Context, args []string, out, errOut io.Writer) (err error) {
	tab := table()
	if len(args) == 0 || cmdline.IsHelp(args[0]) {
		fmt.Fprint(out, usage(tab))
		return nil
	}
	if cmdline.IsVersion(args[0]) {
		fmt.Fprint(out, cmdline.VersionLine("olivares"))
		return nil
	}
	if args[0] == "__complete" { // the completion scripts' helper
		complete(tab, args[1:], out)
		return nil
	}
	name := args[0]
	if cmd, _, prefix := lookup(tab, args); cmd != nil {
		name = cmd.name
	} else if prefix != nil {
		name = strings.Join(prefix, " ")
	}
	// An API error is told in the command's own terms: its flags, not the
	// API's fields.
	defer func() { err = explain(name, err) }()
	return dispatch(ctx, tab, args, stdin, out, errOut)
}
