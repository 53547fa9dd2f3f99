package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/cmdline"
)

// usageCommands: what the fleet spent (docs/rules/usage.md).
func usageCommands() []*command {
	var q apiclient.UsageQuery
	return []*command{{
		name: "usage",
		usage: `olivares usage [--by profile|node|tool|model|day] [--from T|3d] [--to T] [--json]
    What the tenant's runs spent: turns, tokens (input without cache, output,
    cache reads and writes) and the cost the tools reported, per profile
    (account), node, tool, model or UTC day, then each account's latest
    rate-limit windows and limit. --from and --to take an RFC 3339 instant,
    a day (2026-12-01) or, for --from, a duration back from now (2h, 7d).
`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&q.GroupBy, "by", "profile", "group by profile, node, tool, model or day")
			fs.StringVar(&q.From, "from", "", "turns that ended at or after this: an instant, a day, or a duration back from now")
			fs.StringVar(&q.To, "to", "", "turns that ended before this: an instant or a day")
		},
		check: func(c *call) error {
			// The API would name its parameter (group_by); the person gave --by.
			if by := []string{"profile", "node", "tool", "model", "day"}; !slices.Contains(by, q.GroupBy) {
				return usageError{fmt.Errorf("usage: --by takes %s, not %q%s", cmdline.OrList(by), q.GroupBy, cmdline.DidYouMean(q.GroupBy, by))}
			}
			return nil
		},
		run: func(ctx context.Context, c *call) error {
			if q.From != "" {
				q.From = since(q.From)
			}
			r, err := c.cl.Usage(ctx, q)
			if err != nil {
				return err
			}
			// Profile names, for the table only: a profile deleted since
			// keeps its ref.
			names := map[string]string{}
			if ps, err := c.cl.Profiles(ctx); err == nil {
				for _, p := range ps.Items {
					names[p.Ref] = p.Name
				}
			}
			return c.emit(r, func() { printUsage(c, r, names) })
		},
	}}
}

func printUsage(c *call, r apitypes.UsageReport, names map[string]string) {
	account := func(ref string) string {
		if n := names[ref]; n != "" {
			return n + " (" + ref + ")"
		}
		return dash(ref)
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tTURNS\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tCOST USD\t\n", strings.ToUpper(r.GroupBy))
	row := func(key string, t apitypes.UsageTotals) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n", key, t.Turns, t.InputTokens, t.OutputTokens, t.CacheReadTokens, t.CacheWriteTokens, cost(t))
	}
	for _, g := range r.Groups {
		key := dash(g.Key)
		if r.GroupBy == "profile" {
			key = account(g.Key)
		}
		row(key, g.UsageTotals)
	}
	row("total", r.Total)
	tw.Flush()
	if r.Total.CostTurnsUnknown > 0 {
		fmt.Fprintf(c.out, "* the cost leaves out %d turns whose tool reports no cost\n", r.Total.CostTurnsUnknown)
	}
	if len(r.Accounts) == 0 {
		return
	}
	fmt.Fprintln(c.out)
	tw = tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT\tTOOL\tREPORTED\tWINDOW\tUSED\tRESETS\tLIMIT")
	for _, a := range r.Accounts {
		limit := "-"
		if a.Limit != nil {
			limit = a.Limit.Kind + " until " + stampPtr(a.Limit.ResetsAt)
		}
		if len(a.RateLimits) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t%s\n", account(a.ProfileRef), a.Tool, stamp(a.At), limit)
		}
		for _, w := range a.RateLimits {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f%%\t%s\t%s\n", account(a.ProfileRef), a.Tool, stamp(a.At), w.Name, w.UsedPercent, stampPtr(w.ResetsAt), limit)
		}
	}
	tw.Flush()
}

// cost prints a sum, starred when some turns reported none.
func cost(t apitypes.UsageTotals) string {
	s := fmt.Sprintf("%.4f", t.CostUSD)
	if t.CostTurnsUnknown > 0 {
		s += "*"
	}
	return s
}
