package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The lifecycle commands (issue 21): people and their tokens, the CLI's own
// session, tenants, and removing profiles, workspaces and revoked nodes.
// Each is one entry of lifeCommands, with its own flags; run hands them the
// command line before its own dispatch.

const lifecycleUsage = `  olivares principal list [--json]
  olivares principal show ID|NAME [--json]    the principal and its credentials (admin)
  olivares principal create --name N --role viewer|operator|admin [--kind human|agent] [--json]
      A person or automation identity in this tenant, and its first token
      (shown once). Names are unique in a tenant.
  olivares principal revoke ID|NAME [--json]
      Remove the principal from this tenant; with no other tenant left, every
      token it holds stops working at once.
  olivares credential list [--principal ID] [--json]
      The tokens of this tenant's principals, by id (never the token).
  olivares credential create --principal ID [--kind session|api_token] [--label L] [--json]
      Another token for the principal (shown once).
  olivares credential revoke ID [--json]
      The token stops working at once (a leaked token, say).
  olivares logout
      Revoke this login's own credential on the coordinator and forget it here.
  olivares tenant list [--json]          the tenants you belong to and your role in each
  olivares profile delete REF|NAME       remove a profile no live run uses (its home stays)
  olivares workspace delete REF|NAME     remove a workspace no live run or unreleased worktree uses
  olivares node forget ID|HOST [--json]
      Remove a revoked node from the registry, with its profiles and workspaces.
`

// lifeCmd is one lifecycle command: its words, its one positional
// argument ("" for none), its flags and what it does.
type lifeCmd struct {
	name  string
	arg   string
	flags func(fs *flag.FlagSet)
	run   func(ctx context.Context, c *lifeCall) error
}

// lifeCall is what a lifecycle command's run gets: the CLI's call.
type lifeCall = call

// lifeCommands is the table, built anew for each command line.
func lifeCommands() []*lifeCmd {
	var pc struct{ name, role, kind string }
	var cc struct{ principal, kind, label string }
	var cl struct{ principal string }
	return []*lifeCmd{
		{name: "principal list", run: func(ctx context.Context, c *lifeCall) error {
			l, err := c.cl.Principals(ctx)
			if err != nil {
				return err
			}
			return c.emit(l, func() {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PRINCIPAL\tNAME\tKIND\tROLE\tCREATED")
				for _, p := range l.Items {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.ID, p.Name, p.Kind, p.Role, p.CreatedAt.Format(time.RFC3339))
				}
				tw.Flush()
			})
		}},
		{name: "principal show", arg: "principal id or name", run: func(ctx context.Context, c *lifeCall) error {
			id, err := resolvePrincipal(ctx, c, c.arg)
			if err != nil {
				return err
			}
			p, err := c.cl.Principal(ctx, id)
			if err != nil {
				return err
			}
			return c.emit(p, func() {
				fmt.Fprintf(c.out, "%s %q (%s, %s in this tenant), created %s\n", p.ID, p.Name, p.Kind, p.Role, p.CreatedAt.Format(time.RFC3339))
				printCredentials(c.out, p.Credentials)
			})
		}},
		{name: "principal create", flags: func(fs *flag.FlagSet) {
			fs.StringVar(&pc.name, "name", "", "the principal's name (unique in the tenant)")
			fs.StringVar(&pc.role, "role", "", "viewer, operator or admin")
			fs.StringVar(&pc.kind, "kind", "human", "human or agent")
		}, run: func(ctx context.Context, c *lifeCall) error {
			if pc.name == "" || pc.role == "" {
				return usageError{errors.New("principal create: --name and --role are required")}
			}
			res, err := c.cl.CreatePrincipal(ctx, apitypes.PrincipalCreate{Name: pc.name, Role: pc.role, Kind: pc.kind})
			if err != nil {
				return err
			}
			return c.emit(res, func() {
				fmt.Fprintf(c.out, "principal %s (%s, %s in %s), credential %s\ntoken: %s\n(shown once; it is stored only as a hash)\n",
					res.Principal.ID, res.Principal.Kind, res.Principal.Role, c.creds.Tenant, res.CredentialID, res.Token)
			})
		}},
		{name: "principal revoke", arg: "principal id or name", run: func(ctx context.Context, c *lifeCall) error {
			id, err := resolvePrincipal(ctx, c, c.arg)
			if err != nil {
				return err
			}
			res, err := c.cl.RevokePrincipal(ctx, id)
			if err != nil {
				return err
			}
			return c.emit(res, func() {
				fmt.Fprintf(c.out, "principal %s removed from tenant %s", res.ID, res.Tenant)
				if res.CredentialsRevoked > 0 {
					fmt.Fprintf(c.out, "; its %d token(s) no longer work", res.CredentialsRevoked)
				} else {
					fmt.Fprint(c.out, "; it keeps its tokens for its other tenants")
				}
				fmt.Fprintln(c.out)
			})
		}},
		{name: "credential list", flags: func(fs *flag.FlagSet) {
			fs.StringVar(&cl.principal, "principal", "", "only this principal's credentials")
		}, run: func(ctx context.Context, c *lifeCall) error {
			id := cl.principal
			if id != "" {
				var err error
				if id, err = resolvePrincipal(ctx, c, id); err != nil {
					return err
				}
			}
			l, err := c.cl.Credentials(ctx, id)
			if err != nil {
				return err
			}
			return c.emit(l, func() { printCredentials(c.out, l.Items) })
		}},
		{name: "credential create", flags: func(fs *flag.FlagSet) {
			fs.StringVar(&cc.principal, "principal", "", "the principal's id (prn_...) or name")
			fs.StringVar(&cc.kind, "kind", "session", "session (shares the person's pins, snoozes and done marks) or api_token (its own)")
			fs.StringVar(&cc.label, "label", "", "what the token is for")
		}, run: func(ctx context.Context, c *lifeCall) error {
			if cc.principal == "" {
				return usageError{errors.New("credential create: --principal is required")}
			}
			id, err := resolvePrincipal(ctx, c, cc.principal)
			if err != nil {
				return err
			}
			res, err := c.cl.CreateCredential(ctx, id, apitypes.CredentialCreate{Kind: cc.kind, Label: cc.label})
			if err != nil {
				return err
			}
			return c.emit(res, func() {
				fmt.Fprintf(c.out, "credential %s (%s) of principal %s\ntoken: %s\n(shown once; it is stored only as a hash)\n",
					res.Credential.ID, res.Credential.Kind, res.Credential.PrincipalID, res.Token)
			})
		}},
		{name: "credential revoke", arg: "credential id", run: func(ctx context.Context, c *lifeCall) error {
			cr, err := c.cl.RevokeCredential(ctx, c.arg)
			if err != nil {
				return err
			}
			return c.emit(cr, func() {
				fmt.Fprintf(c.out, "credential %s of principal %s revoked: its token no longer works\n", cr.ID, cr.PrincipalID)
				switch n := cr.DerivedRevoked; {
				case n == nil || *n == 0:
				case *n == 1:
					fmt.Fprintln(c.out, "(nor does the 1 credential derived from it: an olivares login or console session made with it)")
				default:
					fmt.Fprintf(c.out, "(nor do the %d credentials derived from it: olivares logins or console sessions made with it)\n", *n)
				}
				if cr.Current {
					fmt.Fprintln(c.out, "(it was this login's own; log in again)")
				}
			})
		}},
		{name: "logout", run: runLogout},
		{name: "tenant list", run: func(ctx context.Context, c *lifeCall) error {
			ts, err := c.cl.Tenants(ctx)
			if err != nil {
				return err
			}
			return c.emit(ts, func() {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "TENANT\tROLE\t")
				for _, t := range ts.Items {
					mark := ""
					if t.ID == c.creds.Tenant {
						mark = "(this login)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", t.ID, t.Role, mark)
				}
				tw.Flush()
			})
		}},
		{name: "profile delete", arg: "profile ref or name", run: func(ctx context.Context, c *lifeCall) error {
			ref, err := resolveProfile(ctx, c, c.arg)
			if err != nil {
				return err
			}
			if err := c.cl.DeleteProfile(ctx, ref); err != nil {
				return err
			}
			return c.emit(map[string]string{"deleted": ref}, func() {
				fmt.Fprintf(c.out, "profile %s deleted (its home directory and files stay on the node)\n", ref)
			})
		}},
		{name: "workspace delete", arg: "workspace ref or name", run: func(ctx context.Context, c *lifeCall) error {
			ref, err := resolveWorkspace(ctx, c, c.arg)
			if err != nil {
				return err
			}
			if err := c.cl.DeleteWorkspace(ctx, ref); err != nil {
				return err
			}
			return c.emit(map[string]string{"deleted": ref}, func() {
				fmt.Fprintf(c.out, "workspace %s deleted (the directory stays on the node)\n", ref)
			})
		}},
		{name: "node forget", arg: "node id or host name", run: func(ctx context.Context, c *lifeCall) error {
			id, err := resolveAnyNode(ctx, c, c.arg)
			if err != nil {
				return err
			}
			res, err := c.cl.ForgetNode(ctx, id)
			if err != nil {
				return err
			}
			return c.emit(res, func() {
				fmt.Fprintf(c.out, "node %s forgotten, with %d profile(s) and %d workspace(s) registered on it; its runs stay as history\n",
					res.ID, res.ProfilesRemoved, res.WorkspacesRemoved)
			})
		}},
	}
}

func printCredentials(out io.Writer, cs []apitypes.Credential) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CREDENTIAL\tPRINCIPAL\tKIND\tTENANT\tFROM\tLABEL\tCREATED\tEXPIRES")
	for _, cr := range cs {
		id := cr.ID
		if cr.Current {
			id += " (this login)"
		}
		exp := "-"
		if cr.ExpiresAt != nil {
			exp = cr.ExpiresAt.Format(time.RFC3339)
		}
		// TENANT "*" serves all the principal's tenants; FROM is the
		// credential this one was derived from (R-LIFE-9, R-LIFE-10).
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, cr.PrincipalID, cr.Kind, dash(cr.Tenant), dash(cr.ParentID),
			dash(cr.Label), cr.CreatedAt.Format(time.RFC3339), exp)
	}
	tw.Flush()
}

// runLogout revokes the saved credential on the coordinator, then forgets
// it here. A credential the coordinator no longer knows is forgotten all
// the same.
func runLogout(ctx context.Context, c *lifeCall) error {
	err := c.cl.Logout(ctx)
	var ae *apiclient.Error
	if err != nil && !(errors.As(err, &ae) && ae.Status == http.StatusUnauthorized) {
		return fmt.Errorf("logout: the coordinator did not revoke this login's credential (%w); nothing was forgotten", err)
	}
	p, perr := credPath()
	if perr != nil {
		return perr
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	fmt.Fprintf(c.out, "logged out of %s: this login's credential is revoked and %s removed\n", c.creds.URL, p)
	return nil
}

// lifecycleCommands are lifeCommands as entries of the CLI's table, each
// with its usage from lifecycleUsage.
func lifecycleCommands() []*command {
	var out []*command
	for _, lc := range lifeCommands() {
		out = append(out, &command{name: lc.name, arg: lc.arg, usage: usageOf(lifecycleUsage, lc.name),
			noJSON: lc.name == "logout", flags: lc.flags, run: lc.run})
	}
	return out
}

// usageOf is the block of text (two-space indented "  olivares NAME ..."
// lines and the lines indented deeper after them) that tells of the
// command name, dedented.
func usageOf(text, name string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, "  olivares "+name+" ") || l == "  olivares "+name:
			in = true
		case strings.HasPrefix(l, "  olivares "):
			in = false
		case !strings.HasPrefix(l, "    "):
			in = false
		}
		if in {
			b.WriteString(strings.TrimPrefix(l, "  ") + "\n")
		}
	}
	return b.String()
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

// profileEnvFlags are profile update's --env, --unset-env and --home.
type profileEnvFlags struct {
	env   envFlag
	unset listFlag
	home  string
}

func (p *profileEnvFlags) define(fs *flag.FlagSet) {
	fs.Var(&p.env, "env", "K=V: set an environment variable of the tool, repeatable; values stay on the node")
	fs.Var(&p.unset, "unset-env", "K: remove an environment variable, repeatable")
	fs.StringVar(&p.home, "home", "", "move the profile to this home directory on the node (created when missing; files stay where they are)")
}

func (p *profileEnvFlags) apply(u *apitypes.ProfileUpdate, set map[string]bool) {
	if set["env"] {
		u.Env = map[string]string(p.env)
	}
	if set["unset-env"] {
		u.UnsetEnv = []string(p.unset)
	}
	if set["home"] {
		u.Home = &p.home
	}
}

// resolvePrincipal returns v when it is a principal id, else the id of the
// principal of this tenant named v (names are unique in a tenant).
func resolvePrincipal(ctx context.Context, c *call, v string) (string, error) {
	if strings.HasPrefix(v, principalIDPrefix) {
		return v, nil
	}
	l, err := c.cl.Principals(ctx)
	if err != nil {
		return "", fmt.Errorf("looking up principal %q: %w", v, err)
	}
	var ids []string
	for _, p := range l.Items {
		if p.Name == v {
			ids = append(ids, p.ID)
		}
	}
	return pickOne("principal", v, ids, "olivares principal list")
}

// principalIDPrefix starts every principal id.
const principalIDPrefix = "prn_"
