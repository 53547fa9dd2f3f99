package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/auditchain"
)

type auditListOpts struct {
	event, run, actor, since string
	limit                    int
	all                      bool
}

// The audit commands: the tenant's ledger, and its check on this side.
func auditCommands() []*command {
	var o auditListOpts
	return []*command{{
		name: "audit list",
		usage: `olivares audit list [--event E] [--run REF] [--actor ID] [--since T|2h|3d] [--limit N] [--all] [--json]
    The tenant's audit ledger, oldest first (admin). --since takes an RFC 3339
    instant or a duration back from now.
`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.event, "event", "", "only entries with this event")
			fs.StringVar(&o.run, "run", "", "only entries about this run")
			fs.StringVar(&o.actor, "actor", "", "only entries by this credential id")
			fs.StringVar(&o.since, "since", "", "only entries at or after this: an RFC 3339 instant, or a duration back from now (2h, 3d)")
			fs.IntVar(&o.limit, "limit", 0, "page size, 1..500 (default 100)")
			fs.BoolVar(&o.all, "all", false, "read every page")
		},
		check: func(c *call) error { return c.atLeastOne("limit", o.limit) },
		run: func(ctx context.Context, c *call) error {
			q := apiclient.AuditQuery{Event: o.event, RunRef: o.run, Actor: o.actor, Since: since(o.since), Limit: o.limit}
			return runAudit(ctx, c, q, o.all, false)
		},
	}, {
		name: "audit verify",
		usage: `olivares audit verify [--json]
    Read the whole ledger and recompute its hash chain here; exits 1 and names
    the first broken link when an entry was changed or removed.
`,
		run: func(ctx context.Context, c *call) error {
			return runAudit(ctx, c, apiclient.AuditQuery{Limit: 500}, true, true)
		},
	}}
}

// maxAuditPages bounds how many pages audit list --all and verify follow.
const maxAuditPages = 100000

// runAudit is `olivares audit list` and `olivares audit verify`. verify
// reads the whole ledger and recomputes every hash on this side
// (shared/auditchain), so it does not take the coordinator's word for it.
func runAudit(ctx context.Context, c *call, q apiclient.AuditQuery, allPages, verify bool) error {
	out, emit, cl := c.out, c.emit, c.cl
	all := apitypes.AuditList{Items: []apitypes.AuditEntry{}}
	var v auditchain.Verifier
	var brk *auditchain.Break
	for range maxAuditPages {
		page, err := cl.Audit(ctx, q)
		if err != nil {
			return err
		}
		for _, e := range page.Items {
			if verify {
				if b := v.Add(e); b != nil && brk == nil {
					brk = b
				}
				continue
			}
			all.Items = append(all.Items, e)
		}
		all.Next = page.Next
		if page.Next == "" || (!verify && !allPages) || brk != nil {
			break
		}
		if q.Cursor == page.Next {
			return fmt.Errorf("the coordinator returned the same audit cursor %q twice", page.Next)
		}
		q.Cursor = page.Next
	}
	if !verify {
		return emit(all, func() {
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tAT\tEVENT\tACTOR\tKIND\tTARGET")
			for _, e := range all.Items {
				target := e.Target.RunRef
				if target == "" {
					target = e.Target.WorkspaceRef
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", e.Seq, stamp(e.At), e.Event, e.Actor.CredentialID, e.Actor.Kind, dash(target))
			}
			tw.Flush()
			if all.Next != "" {
				fmt.Fprintf(out, "more: --cursor is not needed, pass --all to read every page\n")
			}
		})
	}
	res := map[string]any{"ok": brk == nil, "entries": v.Count(), "head": v.Head()}
	if brk != nil {
		res["first_broken"] = brk
	}
	if err := emit(res, func() {
		if brk != nil {
			fmt.Fprintf(out, "audit ledger BROKEN at seq %d: %s\n(%d entries before it verified)\n", brk.Seq, brk.Reason, v.Count())
			return
		}
		fmt.Fprintf(out, "audit ledger intact: %d entries, head %s\n", v.Count(), dash(v.Head()))
	}); err != nil {
		return err
	}
	if brk != nil {
		return errVerifyFailed
	}
	return nil
}

// errVerifyFailed makes `audit verify` exit 1 when the chain is broken.
var errVerifyFailed = fmt.Errorf("the audit ledger failed verification")
