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
// session and tenants. Removing profiles, workspaces and revoked nodes
// stands with their groups (profile.go, workspace.go, node.go).
func lifecycleCommands() []*command {
	var pc struct{ name, role, kind string }
	var cc struct{ principal, kind, label string }
	var cl struct{ principal string }
	return []*command{
		{name: "principal list", usage: "olivares principal list [--json]\n", run: func(ctx context.Context, c *call) error {
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
		{name: "principal show", arg: "principal id or name",
			usage: "olivares principal show ID|NAME [--json]    the principal and its credentials (admin)\n",
			run: func(ctx context.Context, c *call) error {
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
		{name: "principal create", usage: `olivares principal create --name N --role viewer|operator|admin [--kind human|agent] [--json]
    A person or automation identity in this tenant, and its first token
    (shown once). Names are unique in a tenant.
`, flags: func(fs *flag.FlagSet) {
			fs.StringVar(&pc.name, "name", "", "the principal's name (unique in the tenant)")
			fs.StringVar(&pc.role, "role", "", "viewer, operator or admin")
			fs.StringVar(&pc.kind, "kind", "human", "human or agent")
		}, check: func(c *call) error {
			if pc.name == "" || pc.role == "" {
				return usageError{errors.New("principal create: --name and --role are required")}
			}
			return nil
		}, run: func(ctx context.Context, c *call) error {
			res, err := c.cl.CreatePrincipal(ctx, apitypes.PrincipalCreate{Name: pc.name, Role: pc.role, Kind: pc.kind})
			if err != nil {
				return err
			}
			return c.emit(res, func() {
				fmt.Fprintf(c.out, "principal %s (%s, %s in %s), credential %s\ntoken: %s\n(shown once; it is stored only as a hash)\n",
					res.Principal.ID, res.Principal.Kind, res.Principal.Role, c.creds.Tenant, res.CredentialID, res.Token)
			})
		}},
		{name: "principal revoke", arg: "principal id or name", usage: `olivares principal revoke ID|NAME [--json]
    Remove the principal from this tenant; with no other tenant left, every
    token it holds stops working at once.
`, run: func(ctx context.Context, c *call) error {
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
		{name: "credential list", usage: `olivares credential list [--principal ID] [--json]
    The tokens of this tenant's principals, by id (never the token).
`, flags: func(fs *flag.FlagSet) {
			fs.StringVar(&cl.principal, "principal", "", "only this principal's credentials")
		}, run: func(ctx context.Context, c *call) error {
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
		{name: "credential create", usage: `olivares credential create --principal ID [--kind session|api_token] [--label L] [--json]
    Another token for the principal (shown once).
`, flags: func(fs *flag.FlagSet) {
			fs.StringVar(&cc.principal, "principal", "", "the principal's id (prn_...) or name")
			fs.StringVar(&cc.kind, "kind", "session", "session (shares the person's pins, snoozes and done marks) or api_token (its own)")
			fs.StringVar(&cc.label, "label", "", "what the token is for")
		}, check: func(c *call) error {
			if cc.principal == "" {
				return usageError{errors.New("credential create: --principal is required")}
			}
			return nil
		}, run: func(ctx context.Context, c *call) error {
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
		{name: "credential revoke", arg: "credential id", usage: `olivares credential revoke ID [--json]
    The token stops working at once (a leaked token, say).
`, run: func(ctx context.Context, c *call) error {
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
		{name: "logout", noJSON: true, usage: `olivares logout
    Revoke this login's own credential on the coordinator and forget it here.
`, run: runLogout},
		{name: "tenant list", usage: "olivares tenant list [--json]          the tenants you belong to and your role in each\n",
			run: func(ctx context.Context, c *call) error {
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
func runLogout(ctx context.Context, c *call) error {
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
