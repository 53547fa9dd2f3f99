package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/olivares-dev/olivares/certs"
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
					return fmt.Errorf("login --dev: %w (is dev mode running? it writes dev.json when ready)", err)
				}
				var dev struct {
					APIURL     string `json:"api_url"`
					AdminToken string `json:"admin_token"`
					Tenant     string `json:"tenant"`
				}
				if err := json.Unmarshal(raw, &dev); err != nil {
					return fmt.Errorf("login --dev %s: %w", o.devFile, err)
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
				return fmt.Errorf("login refused: %w", err)
			}
			if !o.sso {
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
