package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The session commands of per-caller and session marks, release and delete
// (issue 5): each is one route.
func markCommands() []*command {
	simple := func(name, usage string, do func(context.Context, *call) (any, func(), error)) *command {
		return &command{name: name, arg: "run ref", usage: usage, run: func(ctx context.Context, c *call) error {
			v, text, err := do(ctx, c)
			if err != nil {
				return err
			}
			return c.emit(v, text)
		}}
	}
	pin := func(unpin bool) func(context.Context, *call) (any, func(), error) {
		return func(ctx context.Context, c *call) (any, func(), error) {
			call := c.cl.Pin
			if unpin {
				call = c.cl.Unpin
			}
			st, err := call(ctx, c.arg)
			return st, func() {
				if st.Pinned {
					fmt.Fprintf(c.out, "%s pinned since %s\n", st.RunRef, stampPtr(st.PinnedAt))
				} else {
					fmt.Fprintf(c.out, "%s not pinned\n", st.RunRef)
				}
			}, err
		}
	}
	mark := func(f func(ctx context.Context, c *call) (apitypes.MarkState, error)) func(context.Context, *call) (any, func(), error) {
		return func(ctx context.Context, c *call) (any, func(), error) {
			st, err := f(ctx, c)
			return st, func() {
				snz := "not snoozed"
				if st.SnoozedUntil != nil {
					snz = "snoozed until " + stamp(*st.SnoozedUntil)
				}
				fmt.Fprintf(c.out, "%s %s, done %v\n", st.RunRef, snz, st.Done)
			}, err
		}
	}
	runMark := func(f func(ctx context.Context, c *call) (apitypes.Run, error), text func(c *call, r apitypes.Run)) func(context.Context, *call) (any, func(), error) {
		return func(ctx context.Context, c *call) (any, func(), error) {
			r, err := f(ctx, c)
			return r, func() { text(c, r) }, err
		}
	}
	archived := func(c *call, r apitypes.Run) {
		fmt.Fprintf(c.out, "%s archived: %s\n", r.RunRef, stampPtr(r.ArchivedAt))
	}
	var until, name string
	var discard bool
	snooze := simple("session snooze", "olivares session snooze REF --until T  hide it from your list until T (RFC 3339, a day, tomorrow, or 2h)\n",
		mark(func(ctx context.Context, c *call) (apitypes.MarkState, error) {
			// --until 2h: from now, as a convenience; the server gets an instant.
			at, err := instant(until, time.Now())
			if err != nil {
				return apitypes.MarkState{}, err
			}
			return c.cl.Snooze(ctx, c.arg, at)
		}))
	snooze.flags = func(fs *flag.FlagSet) {
		fs.StringVar(&until, "until", "", "when the snooze ends: an RFC 3339 instant, a day (2026-12-07), tomorrow, or a duration from now (2h, 3d)")
	}
	snooze.check = func(c *call) error {
		if err := c.required("until"); err != nil {
			return err
		}
		if _, err := instant(until, time.Now()); err != nil {
			return usageError{fmt.Errorf("session snooze: --until %w", err)}
		}
		return nil
	}
	rename := simple("session rename", "olivares session rename REF --name N   the session's name for everyone; empty clears\n",
		runMark(func(ctx context.Context, c *call) (apitypes.Run, error) { return c.cl.Rename(ctx, c.arg, name) },
			func(c *call, r apitypes.Run) { fmt.Fprintf(c.out, "%s named %q\n", r.RunRef, r.Name) }))
	rename.flags = func(fs *flag.FlagSet) { fs.StringVar(&name, "name", "", "the new name; empty clears it") }
	rename.check = func(c *call) error { return c.required("name") }
	cleanup := simple("session cleanup", `olivares session cleanup REF [--discard-worktree]
    Release a run that is not live (admin): its marks go, it can be deleted.
`, runMark(func(ctx context.Context, c *call) (apitypes.Run, error) {
		return c.cl.Cleanup(ctx, c.arg, apiclient.CleanupRequest{DiscardWorktree: discard})
	}, func(c *call, r apitypes.Run) { fmt.Fprintf(c.out, "%s %s\n", r.RunRef, runState(r)) }))
	cleanup.flags = func(fs *flag.FlagSet) {
		fs.BoolVar(&discard, "discard-worktree", false, "remove the worktree and its branch even with unmerged work")
	}
	return []*command{
		simple("session pin", "olivares session pin REF              your pin (at most 20; the oldest drops)\n", pin(false)),
		simple("session unpin", "olivares session unpin REF\n", pin(true)),
		snooze,
		simple("session unsnooze", "olivares session unsnooze REF\n", mark(func(ctx context.Context, c *call) (apitypes.MarkState, error) { return c.cl.Unsnooze(ctx, c.arg) })),
		simple("session done", "olivares session done REF             file it under \"Earlier\" in your list\n", mark(func(ctx context.Context, c *call) (apitypes.MarkState, error) { return c.cl.Done(ctx, c.arg) })),
		simple("session undone", "olivares session undone REF\n", mark(func(ctx context.Context, c *call) (apitypes.MarkState, error) { return c.cl.Undone(ctx, c.arg) })),
		rename,
		simple("session archive", "olivares session archive REF          archived for everyone; it keeps running\n",
			runMark(func(ctx context.Context, c *call) (apitypes.Run, error) { return c.cl.Archive(ctx, c.arg) }, archived)),
		simple("session unarchive", "olivares session unarchive REF\n",
			runMark(func(ctx context.Context, c *call) (apitypes.Run, error) { return c.cl.Unarchive(ctx, c.arg) }, archived)),
		cleanup,
		{name: "session delete", arg: "run ref", usage: "olivares session delete REF           delete a released run (admin)\n",
			run: func(ctx context.Context, c *call) error {
				if err := c.cl.DeleteRun(ctx, c.arg); err != nil {
					return err
				}
				return c.emit(map[string]any{"run_ref": c.arg, "deleted": true}, func() { fmt.Fprintf(c.out, "%s deleted\n", c.arg) })
			}},
	}
}

// instant is an RFC 3339 instant given as one, as a duration from now
// (--until 2h, 3d), as a day (the start of it, local time) or as
// "tomorrow" (the start of tomorrow, local time); an error for anything
// else, so that a typo is the CLI's usage error and not the API's.
func instant(v string, now time.Time) (string, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return now.Add(d).UTC().Format(time.RFC3339), nil
	}
	if d, err := parseDays(v); err == nil {
		return now.Add(d).UTC().Format(time.RFC3339), nil
	}
	if v == "tomorrow" {
		y, m, d := now.Date()
		return time.Date(y, m, d+1, 0, 0, 0, 0, now.Location()).UTC().Format(time.RFC3339), nil
	}
	if day, err := time.ParseInLocation(time.DateOnly, v, now.Location()); err == nil {
		return day.UTC().Format(time.RFC3339), nil
	}
	if _, err := time.Parse(time.RFC3339, v); err == nil {
		return v, nil
	}
	return "", fmt.Errorf("%q is not a time: give an RFC 3339 instant, a day (2026-12-07), tomorrow, or a duration from now (2h, 3d)", v)
}

// since is an RFC 3339 instant given as one, or as a duration back from
// now (--since 2h, 3d).
func since(v string) string {
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return time.Now().Add(-d).UTC().Format(time.RFC3339)
	}
	if d, err := parseDays(v); err == nil {
		return time.Now().Add(-d).UTC().Format(time.RFC3339)
	}
	return v
}

// parseDays reads "3d" (days, which time.ParseDuration does not take).
func parseDays(v string) (time.Duration, error) {
	n, ok := strings.CutSuffix(v, "d")
	if !ok {
		return 0, fmt.Errorf("not days")
	}
	d, err := strconv.Atoi(n)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("not days")
	}
	return time.Duration(d) * 24 * time.Hour, nil
}

// listGroups is `session list` as a console shows it to its caller:
// pinned first, snoozed runs hidden until due, done runs under "Earlier",
// archived runs hidden unless asked for (R-ARC-4). The list route may
// repeat a pinned run after the page (R-LIST-3): each run shows once.
func listGroups(out io.Writer, items []apitypes.Run, showArchived, showSnoozed bool, names map[string]string, tty termOut) {
	seen := map[string]bool{}
	var pinned, current, earlier []apitypes.Run
	snoozed, archived := 0, 0
	for _, r := range items {
		if seen[r.RunRef] {
			continue
		}
		seen[r.RunRef] = true
		switch {
		case r.ArchivedAt != nil && !showArchived:
			archived++
		case r.SnoozedUntil != nil && !showSnoozed:
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
		fmt.Fprintf(tw, "RUN\t%s\tATTENTION\tTOOL\tGEN\tEXIT\tNODE\tPROFILE\tWORKSPACE\tNAME\tCREATED\n", tty.cell(sgrHeader, "STATE"))
		for _, r := range rs {
			name := dash(r.Name)
			if r.ArchivedAt != nil {
				name += " (archived)"
			}
			if r.SnoozedUntil != nil {
				name += " (snoozed until " + stamp(*r.SnoozedUntil) + ")"
			}
			if r.PendingRequests > 0 {
				// R-REQ-3: the tool waits for a person.
				name += fmt.Sprintf(" (%d waiting for an answer)", r.PendingRequests)
			}
			if r.LastError != nil {
				name += " (error: " + r.LastError.Kind + ")" // R-LERR-1
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.RunRef, tty.state(r.State, runState(r)), attentionCell(r), dash(r.Driver), r.Generation, exitShort(r), r.NodeID,
				nameOf(names, r.ProviderProfileRef), nameOf(names, r.WorkspaceRef), name, stamp(r.CreatedAt))
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

// attentionCell is the ATTENTION column (R-ATTN-5): the reason, with the
// reset time of a limit; "-" for none.
func attentionCell(r apitypes.Run) string {
	if r.Attention == nil {
		return "-"
	}
	a := *r.Attention
	if a == apitypes.AttentionLimited && r.Limit != nil && r.Limit.ResetsAt != nil {
		a += " until " + stamp(*r.Limit.ResetsAt)
	}
	return a
}

// nameOf is a ref's name when it is known, else the ref, "-" for none.
func nameOf(names map[string]string, ref string) string {
	if n := names[ref]; n != "" {
		return n
	}
	return dash(ref)
}
