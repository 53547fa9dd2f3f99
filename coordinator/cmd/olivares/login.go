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
	"net/url"
	"os"
	"path/filepath"
	"syscall"

	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/claudehook"
)

// The commands of the saved login, and the engine's Claude Code hook.
func loginCommands() []*command {
	return []*command{loginCmd(), {
		name: "whoami", usage: "olivares whoami [--json]\n",
		run: func(ctx context.Context, c *call) error {
			who, err := c.cl.Whoami(ctx)
			if err != nil {
				return err
			}
			return c.emit(who, func() {
				fmt.Fprintf(c.out, "%s (%s, %s) in tenant %s at %s\n", who.Name, who.Kind, who.Role, who.Tenant, c.creds.URL)
			})
		},
	}}
}

type loginOpts struct {
	url, token, tenant, caFile, devFile string
	sso, noBrowser                      bool
	listen                              string
}

func loginCmd() *command {
	var o loginOpts
	return &command{
		name: "login", noLogin: true,
		usage: `olivares login --url URL --token T --tenant T [--ca-file FILE]
olivares login --dev DIR/dev.json
    Check the credentials against the coordinator and save a login of its
    own (0600), which works in the token's tenant, ends no later than the
    token and is revoked with it.
olivares login --sso --url URL [--tenant T] [--ca-file FILE] [--listen 127.0.0.1:8250] [--no-browser]
    Sign in with the coordinator's identity provider (single sign-on) in a
    browser; the provider answers on --listen (register
    http://127.0.0.1:8250/oidc/callback there). Saves the session (0600).
`,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&o.sso, "sso", false, "sign in with the coordinator's identity provider in a browser")
			fs.StringVar(&o.listen, "listen", DefaultSSOListen, "with --sso: the loopback address the identity provider answers on")
			fs.BoolVar(&o.noBrowser, "no-browser", false, "with --sso: print the sign-in address instead of opening a browser")
			fs.StringVar(&o.url, "url", "", "coordinator API URL")
			fs.StringVar(&o.token, "token", "", "bearer token")
			fs.StringVar(&o.tenant, "tenant", "", "tenant")
			fs.StringVar(&o.caFile, "ca-file", "", "CA PEM to trust for https (the coordinator's ca.pem)")
			fs.StringVar(&o.devFile, "dev", "", "take url, token and tenant from a dev mode dev.json")
		},
		run: func(ctx context.Context, c *call) error {
			if o.devFile != "" {
				raw, err := os.ReadFile(o.devFile)
				if err != nil {
					return fmt.Errorf("login --dev: %w (is dev mode running? it writes dev.json when ready, and removes it when it stops)", err)
				}
				var dev struct {
					APIURL     string `json:"api_url"`
					AdminToken string `json:"admin_token"`
					Tenant     string `json:"tenant"`
					PID        int    `json:"pid"`
				}
				if err := json.Unmarshal(raw, &dev); err != nil {
					return fmt.Errorf("login --dev %s: %w", o.devFile, err)
				}
				// Issue 32 finding 7: a dev mode that was killed could not
				// remove its dev.json; its pid says it is gone.
				if !processAlive(dev.PID) {
					return fmt.Errorf("login --dev: dev mode is not running: %s is left by process %d, which is gone; start dev mode again (olivares-coordinator dev)", o.devFile, dev.PID)
				}
				o.url, o.token, o.tenant = dev.APIURL, dev.AdminToken, dev.Tenant
			}
			if o.sso {
				if o.url == "" || o.token != "" || o.devFile != "" {
					return usageError{errors.New("login --sso: give --url (and --tenant when you belong to several), not --token or --dev")}
				}
			} else if o.url == "" || o.token == "" || o.tenant == "" {
				return usageError{errors.New("login: --url, --token and --tenant are required (or --sso --url to sign in with the identity provider)")}
			}
			if u, err := url.Parse(o.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usageError{fmt.Errorf("login: --url %q is not a coordinator's address: give https://HOST:PORT (serve), or http://127.0.0.1:7443 for dev mode", o.url)}
			}
			creds := Credentials{URL: o.url, Token: o.token, Tenant: o.tenant}
			if o.caFile != "" {
				abs, err := filepath.Abs(o.caFile)
				if err != nil {
					return err
				}
				creds.CAFile = abs
			}
			if o.sso {
				var err error
				if creds, _, err = loginSSO(ctx, creds, o.listen, !o.noBrowser, c.out, c.err); err != nil {
					return err
				}
			}
			cl, err := newClient(creds, callTimeout)
			if err != nil {
				return err
			}
			who, err := cl.Whoami(ctx)
			if err != nil {
				if unknownAuthority(err) {
					return fmt.Errorf("login: %s presents a certificate this host does not trust (%w); pass --ca-file with the coordinator's CA (STATE_DIR/ca/ca.pem)", o.url, err)
				}
				return fmt.Errorf("login refused: %w", err)
			}
			creds.Own = o.sso
			if !o.sso {
				// R-LIFE-5: keep a credential of this login's own, which
				// olivares logout revokes; the token given stays as it was.
				own, ok, err := ownCredential(ctx, cl)
				if err != nil {
					return fmt.Errorf("login: %w", err)
				}
				if ok {
					creds.Token, creds.Own = own, true
				}
			}
			prev, prevErr := loadCreds()
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
			if prevErr == nil && prev.Own && prev.Token != creds.Token {
				revokePrevious(ctx, prev, c.err)
			}
			return c.emit(who, func() {
				fmt.Fprintf(c.out, "logged in to %s as %s (%s in %s); credentials in %s\n", o.url, who.Name, who.Role, creds.Tenant, p)
			})
		},
	}
}

// exitStatus ends the CLI with a status and nothing more to say: the
// command printed what it had to.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func hookCommands() []*command {
	return []*command{{
		name: "claude-hook", noLogin: true, noJSON: true,
		usage: `olivares claude-hook
    The engine's Claude Code PreToolUse hook: Claude Code runs it for the
    runs of --engine-hooks profiles (it asks the run's agent).
`,
		run: func(ctx context.Context, c *call) error {
			// R-ED-4: Claude Code runs it with the hook input on stdin.
			if code := claudehook.Main(c.in, c.out, c.err, os.Getenv); code != 0 {
				return exitStatus(code)
			}
			return nil
		},
	}}
}

// processAlive reports whether a process with pid exists (a signal 0 can
// be sent to it, or it is someone else's).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EPERM)
}

// revokePrevious revokes the credential of the login a new one replaced
// (issue 32 finding 9): forgotten here, it would stay live on the
// coordinator with no one to log it out. A failure is told, not fatal:
// the new login is saved.
func revokePrevious(ctx context.Context, prev Credentials, errOut io.Writer) {
	cl, err := newClient(prev, callTimeout)
	if err == nil {
		err = cl.Logout(ctx)
	}
	var ae *apiclient.Error
	if err != nil && !(errors.As(err, &ae) && ae.Status == http.StatusUnauthorized) {
		fmt.Fprintf(errOut, "olivares: the previous login's credential at %s was not revoked (%v); revoke it with olivares credential revoke\n", prev.URL, err)
	}
}

// ownCredential trades the token a login was given for a credential of the
// CLI's own (POST /v1/login), which logout revokes without touching the
// token that was pasted or dev.json's. A coordinator without the route
// keeps the given token.
func ownCredential(ctx context.Context, cl *apiclient.Client) (string, bool, error) {
	host, _ := os.Hostname()
	res, err := cl.Login(ctx, "olivares login on "+host)
	var ae *apiclient.Error
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return res.Token, true, nil
}

// unknownAuthority reports whether err is a TLS certificate signed by an
// authority the client does not trust.
func unknownAuthority(err error) bool {
	var ua x509.UnknownAuthorityError
	var cv *tls.CertificateVerificationError
	return errors.As(err, &ua) || errors.As(err, &cv)
}
