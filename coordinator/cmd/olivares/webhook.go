package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The webhook commands (R-NOTIF-1): each is one route.
func webhookCommands() []*command {
	var (
		reasons listFlag
		quiet   bool
		actAs   string
	)
	return []*command{{
		name: "webhook add", arg: "URL",
		usage: `olivares webhook add URL [--reason R]... [--act-as PRINCIPAL] [--quiet|--json]   tell URL when a run needs a person (admin)
    Prints the signing secret once: keep it to check X-Olivares-Signature.
    --act-as gives each delivery for a decision one signed link per answer (allow, deny), which
    settles the request once, as PRINCIPAL: yourself (--act-as me), or an operator of the tenant.
    Anyone who reads the delivery can answer with it.
    --quiet prints only the webhook's id (HOOK=$(olivares webhook add URL -q)), the secret on stderr.
`,
		flags: func(fs *flag.FlagSet) {
			fs.Var(&reasons, "reason", "only this attention reason (repeat; default: every one): "+strings.Join(apitypes.AttentionReasons, ", "))
			fs.StringVar(&actAs, "act-as", "", "the principal id the delivery's action links answer as: me (yourself), or an operator's id")
			fs.BoolVar(&quiet, "quiet", false, "print only the webhook's id (the secret goes to stderr)")
			fs.BoolVar(&quiet, "q", false, "short for --quiet")
		},
		check: func(c *call) error {
			for _, r := range reasons {
				if !attentionWord(r) || r == apitypes.AttentionAny {
					return usageError{fmt.Errorf("webhook add: --reason %q: use %s", r, strings.Join(apitypes.AttentionReasons, ", "))}
				}
			}
			return nil
		},
		run: func(ctx context.Context, c *call) error {
			if actAs == "me" {
				who, err := c.cl.Whoami(ctx)
				if err != nil {
					return err
				}
				actAs = who.PrincipalID
			}
			w, err := c.cl.CreateWebhook(ctx, apitypes.WebhookCreate{URL: c.arg, Reasons: reasons, ActAs: actAs})
			if err != nil {
				return err
			}
			if quiet && !c.json {
				fmt.Fprintln(c.out, w.ID)
				fmt.Fprintf(c.err, "secret (shown once): %s\n", w.Secret)
				return nil
			}
			return c.emit(w, func() {
				fmt.Fprintf(c.out, "webhook %s added for %s\nsecret (shown once): %s\n", w.ID, reasonsText(w.Reasons), w.Secret)
			})
		},
	}, {
		name: "webhook list", usage: "olivares webhook list [--json]\n",
		run: func(ctx context.Context, c *call) error {
			l, err := c.cl.Webhooks(ctx)
			if err != nil {
				return err
			}
			return c.emit(l, func() {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "WEBHOOK\tURL\tREASONS\tACTS AS\tLAST DELIVERY")
				for _, w := range l.Items {
					as := w.ActAs
					if as == "" {
						as = "-"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", w.ID, w.URL, reasonsText(w.Reasons), as, deliveryText(w.LastDelivery))
				}
				tw.Flush()
				if len(l.Items) == 0 {
					fmt.Fprintln(c.out, "no webhooks (olivares webhook add URL adds one)")
				}
			})
		},
	}, {
		name: "webhook delete", arg: "webhook id", usage: "olivares webhook delete ID [--json]\n",
		run: func(ctx context.Context, c *call) error {
			if err := c.cl.DeleteWebhook(ctx, c.arg); err != nil {
				return err
			}
			return c.emit(map[string]any{"id": c.arg, "deleted": true}, func() { fmt.Fprintf(c.out, "%s deleted\n", c.arg) })
		},
	}, {
		name: "webhook deliveries", arg: "webhook id", usage: "olivares webhook deliveries ID [--json]   the newest 50, newest first\n",
		run: func(ctx context.Context, c *call) error {
			l, err := c.cl.WebhookDeliveries(ctx, c.arg)
			if err != nil {
				return err
			}
			return c.emit(l, func() { printDeliveries(c.out, l.Items) })
		},
	}, {
		name: "webhook test", arg: "webhook id", usage: "olivares webhook test ID [--json]        send one signed test delivery now; exit 1 unless delivered\n",
		run: func(ctx context.Context, c *call) error {
			d, err := c.cl.TestWebhook(ctx, c.arg)
			if err != nil {
				return err
			}
			if err := c.emit(d, func() { fmt.Fprintf(c.out, "test delivery %s: %s\n", d.ID, deliveryText(&d)) }); err != nil {
				return err
			}
			// Issue 32 finding 11: a script checks the exit status.
			if d.State != apitypes.DeliveryDelivered {
				return fmt.Errorf("webhook test: the receiver did not take the test delivery (%s); olivares webhook deliveries %s shows its answer", deliveryText(&d), c.arg)
			}
			return nil
		},
	}}
}

func reasonsText(rs []string) string {
	if len(rs) == 0 {
		return "every reason"
	}
	return strings.Join(rs, ", ")
}

// deliveryText is one delivery's outcome in a few words.
func deliveryText(d *apitypes.WebhookDelivery) string {
	if d == nil {
		return "-"
	}
	out := d.State
	if d.LastStatus != 0 {
		out += fmt.Sprintf(" (HTTP %d", d.LastStatus)
	} else if d.LastError != "" {
		out += " (" + d.LastError
	} else {
		out += " ("
	}
	out += fmt.Sprintf(", %d attempt(s), %s)", d.Attempts, stamp(d.UpdatedAt))
	return strings.Replace(out, "(, ", "(", 1)
}

func printDeliveries(out io.Writer, ds []apitypes.WebhookDelivery) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DELIVERY\tEVENT\tRUN\tATTENTION\tOUTCOME\tRESPONSE")
	for _, d := range ds {
		resp := strings.ReplaceAll(d.LastResponse, "\n", " ")
		if r := []rune(resp); len(r) > 60 {
			resp = string(r[:60]) + "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.ID, d.Event, dash(d.RunRef), dash(d.Attention), deliveryText(&d), dash(resp))
	}
	tw.Flush()
	if len(ds) == 0 {
		fmt.Fprintln(out, "no deliveries yet")
	}
}
