package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/auditchain"
)

// markCommands are the session commands of per-caller and session marks,
// release and delete (issue 5): each is one route.
var markCommands = []string{"session pin", "session unpin", "session snooze", "session unsnooze", "session done",
	"session undone", "session rename", "session archive", "session unarchive", "session cleanup", "session delete"}

func init() {
	for _, cmd := range markCommands {
		commands[cmd] = "run ref"
	}
	commands["audit list"] = ""
	commands["audit verify"] = ""
	groups["audit"] = "list or verify"
}

// runMarks runs one mark command; ok is false for another command.
func runMarks(ctx context.Context, cl *apiclient.Client, cmd, ref string, o *cmdOpts, out io.Writer, emit func(any, func()) error) (bool, error) {
	if !slices.Contains(markCommands, cmd) {
		return false, nil
	}
	switch cmd {
	case "session pin", "session unpin":
		call := cl.Pin
		if cmd == "session unpin" {
			call = cl.Unpin
		}
		st, err := call(ctx, ref)
		if err != nil {
			return true, err
		}
		return true, emit(st, func() {
			if st.Pinned {
				fmt.Fprintf(out, "%s pinned since %s\n", st.RunRef, stampPtr(st.PinnedAt))
			} else {
				fmt.Fprintf(out, "%s not pinned\n", st.RunRef)
			}
		})
	case "session snooze", "session unsnooze", "session done", "session undone":
		var st apitypes.MarkState
		var err error
		switch cmd {
		case "session snooze":
			until := o.until
			if d, err := time.ParseDuration(o.until); err == nil {
				// --until 2h: from now, as a convenience; the server gets an instant.
				until = time.Now().Add(d).UTC().Format(time.RFC3339)
			}
			st, err = cl.Snooze(ctx, ref, until)
		case "session unsnooze":
			st, err = cl.Unsnooze(ctx, ref)
		case "session done":
			st, err = cl.Done(ctx, ref)
		default:
			st, err = cl.Undone(ctx, ref)
		}
		if err != nil {
			return true, err
		}
		return true, emit(st, func() {
			snz := "not snoozed"
			if st.SnoozedUntil != nil {
				snz = "snoozed until " + stamp(*st.SnoozedUntil)
			}
			fmt.Fprintf(out, "%s %s, done %v\n", st.RunRef, snz, st.Done)
		})
	case "session delete":
		if err := cl.DeleteRun(ctx, ref); err != nil {
			return true, err
		}
		return true, emit(map[string]any{"run_ref": ref, "deleted": true}, func() { fmt.Fprintf(out, "%s deleted\n", ref) })
	}
	var r apitypes.Run
	var err error
	switch cmd {
	case "session rename":
		r, err = cl.Rename(ctx, ref, o.name)
	case "session archive":
		r, err = cl.Archive(ctx, ref)
	case "session unarchive":
		r, err = cl.Unarchive(ctx, ref)
	default: // cleanup
		r, err = cl.Cleanup(ctx, ref, apiclient.CleanupRequest{DiscardWorktree: o.discard})
	}
	if err != nil {
		return true, err
	}
	return true, emit(r, func() {
		switch cmd {
		case "session rename":
			fmt.Fprintf(out, "%s named %q\n", r.RunRef, r.Name)
		case "session archive", "session unarchive":
			fmt.Fprintf(out, "%s archived: %s\n", r.RunRef, stampPtr(r.ArchivedAt))
		default:
			fmt.Fprintf(out, "%s %s\n", r.RunRef, runState(r))
		}
	})
}

// listGroups is `session list` as a console shows it to its caller:
// pinned first, snoozed runs hidden until due, done runs under "Earlier",
// archived runs hidden unless asked for (R-ARC-4). The list route may
// repeat a pinned run after the page (R-LIST-3): each run shows once.
func listGroups(out io.Writer, items []apitypes.Run, o *cmdOpts) {
	seen := map[string]bool{}
	var pinned, current, earlier []apitypes.Run
	snoozed, archived := 0, 0
	for _, r := range items {
		if seen[r.RunRef] {
			continue
		}
		seen[r.RunRef] = true
		switch {
		case r.ArchivedAt != nil && !o.archived:
			archived++
		case r.SnoozedUntil != nil && !o.snoozed:
			snoozed++
		case r.Pinned:
			pinned = append(pinned, r)
		case r.Done:
			earlier = append(earlier, r)
		default:
			current = append(current, r)
		}
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	section := func(title string, rs []apitypes.Run) {
		if len(rs) == 0 {
			return
		}
		fmt.Fprintf(tw, "%s\n", title)
		fmt.Fprintln(tw, "RUN\tSTATE\tDRIVER\tGEN\tEXIT\tNODE\tNAME\tCREATED")
		for _, r := range rs {
			name := dash(r.Name)
			if r.ArchivedAt != nil {
				name += " (archived)"
			}
			if r.SnoozedUntil != nil {
				name += " (snoozed until " + stamp(*r.SnoozedUntil) + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.RunRef, runState(r), dash(r.Driver), r.Generation, exitShort(r), r.NodeID, name, stamp(r.CreatedAt))
		}
		fmt.Fprintln(tw)
	}
	section("Pinned", pinned)
	section("Sessions", current)
	section("Earlier", earlier)
	tw.Flush()
	if len(pinned)+len(current)+len(earlier) == 0 {
		fmt.Fprintln(out, "no runs")
	}
	if snoozed > 0 {
		fmt.Fprintf(out, "%d snoozed run(s) hidden until due (--snoozed shows them)\n", snoozed)
	}
	if archived > 0 {
		fmt.Fprintf(out, "%d archived run(s) hidden (--archived shows them)\n", archived)
	}
}

// maxAuditPages bounds how many pages audit list --all and verify follow.
const maxAuditPages = 100000

// runAudit is `olivares audit list` and `olivares audit verify`. verify
// reads the whole ledger and recomputes every hash on this side
// (shared/auditchain), so it does not take the coordinator's word for it.
func runAudit(ctx context.Context, cl *apiclient.Client, cmd string, o *cmdOpts, out io.Writer, emit func(any, func()) error) error {
	q := apiclient.AuditQuery{Limit: 500}
	if cmd == "audit list" {
		q = apiclient.AuditQuery{Event: o.auditFilter["event"], RunRef: o.auditFilter["run"], Actor: o.auditFilter["actor"],
			Since: o.auditFilter["since"], Limit: o.limit}
	}
	all := apitypes.AuditList{Items: []apitypes.AuditEntry{}}
	var v auditchain.Verifier
	var brk *auditchain.Break
	for range maxAuditPages {
		page, err := cl.Audit(ctx, q)
		if err != nil {
			return err
		}
		for _, e := range page.Items {
			if cmd == "audit verify" {
				if b := v.Add(e); b != nil && brk == nil {
					brk = b
				}
				continue
			}
			all.Items = append(all.Items, e)
		}
		all.Next = page.Next
		if page.Next == "" || (cmd == "audit list" && !o.all) || brk != nil {
			break
		}
		if q.Cursor == page.Next {
			return fmt.Errorf("the coordinator returned the same audit cursor %q twice", page.Next)
		}
		q.Cursor = page.Next
	}
	if cmd == "audit list" {
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
