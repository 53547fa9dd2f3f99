package main

import (
	"context"
	"fmt"
	"io"
	neturl "net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/auditchain"
)

// markCommands are the session commands of per-caller and session marks,
// release and delete (issue 5): each is one route.
var markCommands = map[string]struct{ method, action string }{
	"session pin":       {"POST", "pin"},
	"session unpin":     {"DELETE", "pin"},
	"session snooze":    {"POST", "snooze"},
	"session unsnooze":  {"DELETE", "snooze"},
	"session done":      {"POST", "done"},
	"session undone":    {"DELETE", "done"},
	"session rename":    {"PUT", "name"},
	"session archive":   {"POST", "archive"},
	"session unarchive": {"DELETE", "archive"},
	"session cleanup":   {"POST", "cleanup"},
	"session delete":    {"DELETE", ""},
}

func init() {
	for cmd := range markCommands {
		commands[cmd] = "run ref"
	}
	commands["audit list"] = ""
	commands["audit verify"] = ""
	groups["audit"] = "list or verify"
}

// runMarks runs one mark command; ok is false for another command.
func runMarks(ctx context.Context, cl *client, cmd, ref string, o *cmdOpts, out io.Writer, emit func(any, func()) error) (bool, error) {
	mc, ok := markCommands[cmd]
	if !ok {
		return false, nil
	}
	path := runPath(ref)
	if mc.action != "" {
		path = runPath(ref, mc.action)
	}
	var body any
	switch cmd {
	case "session snooze":
		until := o.until
		if d, err := time.ParseDuration(o.until); err == nil {
			// --until 2h: from now, as a convenience; the server gets an instant.
			until = time.Now().Add(d).UTC().Format(time.RFC3339)
		}
		body = apitypes.SnoozeRequest{Until: &until}
	case "session rename":
		body = apitypes.NameRequest{Name: &o.name}
	case "session cleanup":
		if o.discard {
			body = map[string]bool{"discard_worktree": true}
		}
	}
	switch cmd {
	case "session pin", "session unpin":
		var st apitypes.PinState
		if err := cl.do(ctx, mc.method, path, body, &st); err != nil {
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
		if err := cl.do(ctx, mc.method, path, body, &st); err != nil {
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
		if err := cl.do(ctx, mc.method, path, nil, nil); err != nil {
			return true, err
		}
		return true, emit(map[string]any{"run_ref": ref, "deleted": true}, func() { fmt.Fprintf(out, "%s deleted\n", ref) })
	}
	var r apitypes.Run
	if err := cl.do(ctx, mc.method, path, body, &r); err != nil {
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
func runAudit(ctx context.Context, cl *client, cmd string, o *cmdOpts, out io.Writer, emit func(any, func()) error) error {
	q := neturl.Values{}
	if cmd == "audit list" {
		for flag, param := range map[string]string{"event": "event", "run": "run_ref", "actor": "actor", "since": "since"} {
			if v := o.auditFilter[flag]; v != "" {
				q.Set(param, v)
			}
		}
		if o.set["limit"] {
			q.Set("limit", strconv.Itoa(o.limit))
		}
	} else {
		q.Set("limit", "500")
	}
	all := apitypes.AuditList{Items: []apitypes.AuditEntry{}}
	var v auditchain.Verifier
	var brk *auditchain.Break
	for range maxAuditPages {
		var page apitypes.AuditList
		path := "/v1/audit"
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		if err := cl.do(ctx, "GET", path, nil, &page); err != nil {
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
		if q.Get("cursor") == page.Next {
			return fmt.Errorf("the coordinator returned the same audit cursor %q twice", page.Next)
		}
		q.Set("cursor", page.Next)
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
