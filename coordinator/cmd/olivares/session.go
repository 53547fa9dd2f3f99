package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The session commands: a run's launch, lifecycle, input and output.
func sessionCommands() []*command {
	return []*command{
		sessionStart(), sessionList(),
		{name: "session show", arg: "run ref", usage: "olivares session show REF [--json]\n",
			run: func(ctx context.Context, c *call) error {
				r, err := c.cl.Run(ctx, c.arg)
				if err != nil {
					return err
				}
				return c.emit(r, func() { printRun(c.out, r) })
			}},
		{name: "session events", arg: "run ref", usage: "olivares session events REF [--json]   the run's lifecycle evidence\n",
			run: func(ctx context.Context, c *call) error {
				res, err := allEvents(ctx, c.cl, c.arg)
				if err != nil {
					return err
				}
				return c.emit(res, func() {
					tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "SEQ\tAT\tKIND\tGEN\tDETAIL")
					for _, e := range res.Items {
						fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", e.Seq, stamp(e.At), e.Kind, e.Generation, eventDetail(e))
					}
					tw.Flush()
				})
			}},
		sessionInput(),
		{name: "session interrupt", arg: "run ref", usage: "olivares session interrupt REF [--json]  cancel the active turn\n",
			run: func(ctx context.Context, c *call) error {
				acc, err := c.cl.Interrupt(ctx, c.arg)
				if err != nil {
					return err
				}
				return c.emit(acc, func() {
					if acc.Noop {
						fmt.Fprintln(c.out, "no turn was running: nothing to interrupt")
						return
					}
					fmt.Fprintln(c.out, "interrupt accepted")
				})
			}},
		{name: "session stop", arg: "run ref", usage: "olivares session stop REF [--json]     SIGTERM, then SIGKILL, the process group\n",
			run: func(ctx context.Context, c *call) error {
				r, err := c.cl.Stop(ctx, c.arg)
				if err != nil {
					return err
				}
				return c.emit(r, func() { fmt.Fprintf(c.out, "%s %s, %s\n", r.RunRef, runState(r), exitLong(r)) })
			}},
		{name: "session resume", arg: "run ref", usage: "olivares session resume REF [--json]   a new generation on the same conversation\n",
			run: func(ctx context.Context, c *call) error {
				r, err := c.cl.Resume(ctx, c.arg)
				if err != nil {
					return err
				}
				return c.emit(r, func() { fmt.Fprintf(c.out, "%s %s, generation %d\n", r.RunRef, runState(r), r.Generation) })
			}},
		{name: "session approve", arg: "run ref", usage: "olivares session approve REF [--json]  let a launch or resume its profile holds go on (a person, admin)\n",
			run: func(ctx context.Context, c *call) error {
				r, err := c.cl.Approve(ctx, c.arg)
				if err != nil {
					return err
				}
				return c.emit(r, func() { fmt.Fprintf(c.out, "%s %s, generation %d\n", r.RunRef, runState(r), r.Generation) })
			}},
		sessionContinueAtReset(), sessionOnLimit(),
		sessionWait(), sessionDiff(), sessionMove(), sessionHandoff(), sessionAttach(),
		sessionRequests(), sessionAnswer(),
	}
}

type sessionWaitOpts struct {
	states  listFlag
	timeout time.Duration
}

// waitPoll is how often session wait reads the run.
const waitPoll = 500 * time.Millisecond

func sessionWait() *command {
	var o sessionWaitOpts
	return &command{
		name: "session wait", arg: "run ref",
		usage: `olivares session wait REF [--state S ...] [--timeout 2m] [--json]
    Wait until the run is in one of the states (default idle: it waits for
    input), as kubectl wait does; exits 1 at the timeout, when the run
    ends in another state (stopped, failed) first, and when a turn of its
    current generation failed because the profile's account is not signed
    in (olivares profile login).
`,
		flags: func(fs *flag.FlagSet) {
			fs.Var(&o.states, "state", "a state to wait for, repeatable (default idle)")
			fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
		},
		check: func(c *call) error {
			for _, s := range o.states {
				if !slices.Contains(apitypes.States, s) {
					return usageError{fmt.Errorf("session wait: --state %q: use one of %s", s, strings.Join(apitypes.States, ", "))}
				}
			}
			if o.timeout <= 0 {
				return usageError{errors.New("session wait: --timeout must be positive")}
			}
			return nil
		},
		run: func(ctx context.Context, c *call) error {
			want := []string(o.states)
			if len(want) == 0 {
				want = []string{apitypes.StateIdle}
			}
			ctx, cancel := context.WithTimeout(ctx, o.timeout)
			defer cancel()
			tick := time.NewTicker(waitPoll)
			defer tick.Stop()
			// r is the last answer: a call cut short by the timeout keeps
			// it (issue 32 finding 3: the timeout said "still -").
			var r apitypes.Run
			for {
				got, err := c.cl.Run(ctx, c.arg)
				if err != nil && ctx.Err() == nil {
					return err
				}
				if err == nil {
					r = got
				}
				switch {
				case err == nil && slices.Contains(want, r.State) && refusedThisGeneration(ctx, c, r):
					// R-ACCT-8: a turn the tool refused for want of a
					// sign-in is no success, though the run waits for input.
					return notSignedIn(ctx, c, r)
				case err == nil && slices.Contains(want, r.State):
					return c.emit(r, func() { fmt.Fprintf(c.out, "%s %s\n", r.RunRef, runState(r)) })
				case err == nil && !apitypes.Live(r.State) && r.State != apitypes.StatePendingApproval:
					return fmt.Errorf("run %s is %s (%s)%s, not %s", r.RunRef, r.State, exitLong(r), lastErrorText(r), strings.Join(want, " or "))
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("run %s is still %s after %s%s, not %s", c.arg, dash(r.State), o.timeout, lastErrorText(r), strings.Join(want, " or "))
				case <-tick.C:
				}
			}
		},
	}
}

type sessionStartOpts struct {
	profile, workspace, name, isolation, worktreeFrom string
	worktree, noSetup, quiet                          bool
	grants                                            grantFlag
}

func sessionStart() *command {
	var o sessionStartOpts
	return &command{
		name: "session start",
		usage: `olivares session start --profile REF|NAME [--workspace REF|NAME] [--name N]
                       [--isolation native|container|sandbox] [--worktree]
                       [--worktree-from REV] [--no-setup]
                       [--grant KIND:SECRET:ENV[:file] ...] [--quiet|--json]
    Launch a run; --quiet prints only its ref (RUN=$(olivares session start ... -q)). A profile, workspace or secret not given by ref (prof_…,
    ws_…, sec_…) is looked up by its exact name. --grant hands a vault secret
    to the tool as ENV (or as a 0600 file whose path is in ENV); the run is
    tainted by its kind for good, which limits what can be read or handed on
    from it.
`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.profile, "profile", "", "provider profile ref or exact name")
			fs.StringVar(&o.workspace, "workspace", "", "workspace ref or exact name")
			fs.StringVar(&o.name, "name", "", "display name")
			fs.StringVar(&o.isolation, "isolation", "", "sandbox (bubblewrap: the session sees only its working directory and its profile home; docs/isolation.md), container (podman, the same boundary) or native (runs as the agent's user, can read the node's files); default: the profile's")
			fs.BoolVar(&o.worktree, "worktree", false, "run in a new git worktree of the workspace")
			fs.StringVar(&o.worktreeFrom, "worktree-from", "", "branch or commit the worktree starts from (with --worktree)")
			fs.BoolVar(&o.noSetup, "no-setup", false, "skip the workspace setup command for this launch")
			fs.BoolVar(&o.quiet, "quiet", false, "print only the run's ref")
			fs.BoolVar(&o.quiet, "q", false, "short for --quiet")
			fs.Var(&o.grants, "grant", "KIND:SECRET:ENV[:file]: hand a vault secret (ref or name) to the tool, repeatable (KIND: vault_secret, repository_credential, managed_credential or package_registry_token)")
		},
		check: func(c *call) error { return c.required("profile") },
		run: func(ctx context.Context, c *call) error {
			req := apitypes.LaunchRequest{Name: o.name, Isolation: o.isolation, WorktreeFrom: o.worktreeFrom, NoSetup: o.noSetup}
			// R-CRT-2: worktree absent and false are the same; send it only when asked.
			if o.worktree {
				t := true
				req.Worktree = &t
			}
			var err error
			if req.ProviderProfileRef, err = resolveProfile(ctx, c, o.profile); err != nil {
				return err
			}
			if o.workspace != "" {
				if req.WorkspaceRef, err = resolveWorkspace(ctx, c, o.workspace); err != nil {
					return err
				}
			}
			for _, g := range o.grants {
				if g.SecretRef, err = resolveSecret(ctx, c, g.SecretRef); err != nil {
					return err
				}
				req.Grants = append(req.Grants, g)
			}
			r, err := c.cl.Launch(ctx, req)
			if err != nil {
				return err
			}
			if o.quiet && !c.json {
				fmt.Fprintln(c.out, r.RunRef)
				return nil
			}
			return c.emit(r, func() { printRun(c.out, r) })
		},
	}
}

type sessionInputOpts struct {
	text, message, line, file string
}

func sessionInput() *command {
	var o sessionInputOpts
	return &command{
		name: "session input", arg: "run ref",
		usage: `olivares session input REF (--text T | --message M | --line JSON | --file PATH|-) [--json]
    --text for codex, gemini, opencode and grok; --message (plain text) or
    --line (one raw stream-json object) for claude. --file sends a file's
    text (- for standard input) in whichever field the session's tool takes.
`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.text, "text", "", "plain user text (codex, gemini, opencode, grok)")
			fs.StringVar(&o.message, "message", "", "user message text, sent as a JSON string (claude)")
			fs.StringVar(&o.line, "line", "", "one raw stream-json object, forwarded as is (claude)")
			fs.StringVar(&o.file, "file", "", "send this file's text, or - for standard input, as the tool's input")
		},
		check: func(c *call) error {
			n := 0
			for _, f := range []string{"text", "message", "line", "file"} {
				if c.set[f] {
					n++
				}
			}
			if n != 1 {
				return usageError{errors.New("session input: give exactly one of --text, --message, --line or --file")}
			}
			if c.set["line"] && !json.Valid([]byte(o.line)) {
				return usageError{errors.New("session input: --line is not valid JSON")}
			}
			return nil
		},
		run: func(ctx context.Context, c *call) error {
			var req apitypes.InputRequest
			switch {
			case c.set["text"]:
				req.Text = &o.text
			case c.set["message"]:
				m, _ := json.Marshal(o.message)
				req.Message = m
			case c.set["line"]:
				req.Line = json.RawMessage(o.line)
			default:
				raw, err := readInput(o.file, c.in, maxInputRead)
				if err != nil {
					return fmt.Errorf("session input: reading --file: %w", err)
				}
				// The field is the tool's: Claude Code takes a message,
				// the others plain text.
				r, err := c.cl.Run(ctx, c.arg)
				if err != nil {
					return err
				}
				text := string(raw)
				if r.Driver == "claude" {
					m, _ := json.Marshal(text)
					req.Message = m
				} else {
					req.Text = &text
				}
			}
			acc, err := c.cl.Input(ctx, c.arg, req)
			if err != nil {
				return err
			}
			return c.emit(acc, func() { fmt.Fprintln(c.out, "input accepted") })
		},
	}
}

// maxInputRead bounds what session input --file reads.
const maxInputRead = 4 << 20

type sessionListOpts struct {
	state, profile, node, workspace, tool, name string
	attention                                   string
	limit, offset                               int
	archived, snoozed                           bool
}

func sessionList() *command {
	var o sessionListOpts
	return &command{
		name: "session list",
		usage: `olivares session list [--state S] [--profile P] [--node N] [--workspace W] [--tool T] [--name N]
                      [--attention [REASON]] [--limit N] [--offset N] [--archived] [--snoozed] [--json]
    Your pinned runs first, then the others, then those you marked done
    ("Earlier"). Runs you snoozed are hidden until due, archived runs unless
    --archived is given. The filters take refs or names; --name matches
    a part of the session's name, in any case. --attention keeps the runs
    that wait for you (needs_input, needs_decision, needs_approval, failed,
    limited, stalled: a turn that wrote nothing for its profile's
    --stall-after; alone: any of them).
`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.state, "state", "", "only runs in this state")
			fs.StringVar(&o.profile, "profile", "", "only runs of this profile (ref or name)")
			fs.StringVar(&o.node, "node", "", "only runs on this node (id or host name)")
			fs.StringVar(&o.workspace, "workspace", "", "only runs in this workspace (ref or name)")
			fs.StringVar(&o.tool, "tool", "", "only runs of this tool: claude, codex, gemini, opencode or grok")
			fs.StringVar(&o.name, "name", "", "only sessions whose name contains this text (any case)")
			fs.Var(optionalFlag{v: &o.attention, def: apitypes.AttentionAny, takes: attentionWord}, "attention",
				"only runs that wait for you: any (the default), needs_input, needs_decision, needs_approval, failed, limited or stalled")
			fs.IntVar(&o.limit, "limit", 0, "page size, 1..200 (default: the server's, 50)")
			fs.IntVar(&o.offset, "offset", 0, "skip this many runs")
			fs.BoolVar(&o.archived, "archived", false, "include archived runs")
			fs.BoolVar(&o.snoozed, "snoozed", false, "include runs you snoozed")
		},
		check: func(c *call) error {
			if c.set["attention"] && !attentionWord(o.attention) {
				return usageError{fmt.Errorf("session list: --attention %q: use any, %s", o.attention, strings.Join(apitypes.AttentionReasons, ", "))}
			}
			return c.atLeastOne("limit", o.limit)
		},
		run: func(ctx context.Context, c *call) error {
			q := apiclient.RunQuery{State: o.state, Limit: o.limit, Offset: o.offset, Driver: o.tool, Attention: o.attention}
			var err error
			if o.profile != "" {
				if q.ProfileRef, err = resolveProfile(ctx, c, o.profile); err != nil {
					return err
				}
			}
			if o.workspace != "" {
				if q.WorkspaceRef, err = resolveWorkspace(ctx, c, o.workspace); err != nil {
					return err
				}
			}
			if o.node != "" {
				if q.NodeID, err = resolveNode(ctx, c, o.node); err != nil {
					return err
				}
			}
			res, err := c.cl.Runs(ctx, q)
			if err != nil {
				return err
			}
			if o.name != "" {
				res.Items = filterName(res.Items, o.name)
			}
			// R-ARC-4: the list route does not hide archived runs; each client does.
			all := res.Items
			if !o.archived {
				res.Items = []apitypes.Run{}
				for _, r := range all {
					if r.ArchivedAt == nil {
						res.Items = append(res.Items, r)
					}
				}
			}
			return c.emit(res, func() {
				names := registryNames(ctx, c)
				listGroups(c.out, all, o.archived, o.snoozed, names, c.tty)
			})
		},
	}
}

// attentionWord reports whether w is a value of --attention (R-ATTN-4).
func attentionWord(w string) bool {
	return w == apitypes.AttentionAny || slices.Contains(apitypes.AttentionReasons, w)
}

// filterName keeps the runs whose name contains text, in any case.
func filterName(rs []apitypes.Run, text string) []apitypes.Run {
	text = strings.ToLower(text)
	out := []apitypes.Run{}
	for _, r := range rs {
		if strings.Contains(strings.ToLower(r.Name), text) {
			out = append(out, r)
		}
	}
	return out
}

// registryNames maps profile and workspace refs to their names, for the
// list's table; a failed read leaves the refs shown as they are.
func registryNames(ctx context.Context, c *call) map[string]string {
	names := map[string]string{}
	if ps, err := c.cl.Profiles(ctx); err == nil {
		for _, p := range ps.Items {
			names[p.Ref] = p.Name
		}
	}
	if ws, err := c.cl.Workspaces(ctx); err == nil {
		for _, w := range ws.Items {
			names[w.Ref] = w.Name
		}
	}
	return names
}

type sessionDiffOpts struct {
	file        string
	uncommitted bool
}

func sessionDiff() *command {
	var o sessionDiffOpts
	return &command{
		name: "session diff", arg: "run ref",
		usage: `olivares session diff REF [--file PATH | --uncommitted] [--json]
    What the run's worktree branch committed since it left the workspace's
    commit: the changed paths, or one path's unified diff from base to head.
    Edits the agent left uncommitted are counted there; --uncommitted prints
    them as git's diff against the folder's last commit, for any run (the
    worktree, or the workspace the run works in).
`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.file, "file", "", "show this path's unified diff from base to head instead of the list")
			fs.BoolVar(&o.uncommitted, "uncommitted", false, "show the edits not committed yet in the run's folder")
		},
		run: func(ctx context.Context, c *call) error {
			if o.uncommitted {
				if c.set["file"] {
					return usageError{errors.New("session diff: give --file or --uncommitted, not both")}
				}
				u, err := c.cl.Uncommitted(ctx, c.arg)
				if err != nil {
					return err
				}
				return c.emit(u, func() { printUncommitted(c.out, u, c.tty) })
			}
			if c.set["file"] {
				fd, err := c.cl.DiffFile(ctx, c.arg, o.file)
				if err != nil {
					return err
				}
				return c.emit(fd, func() { printFileDiff(c.out, fd, c.tty) })
			}
			d, err := c.cl.Diff(ctx, c.arg)
			if err != nil {
				return err
			}
			return c.emit(d, func() { printDiff(c.out, c.arg, d) })
		},
	}
}

func printDiff(out io.Writer, ref string, d apitypes.Diff) {
	fmt.Fprintf(out, "branch %s\nbase   %s\nhead   %s\n", d.Branch, d.Base, d.Head)
	if len(d.Files) == 0 {
		fmt.Fprintln(out, "no committed change")
	}
	for _, f := range d.Files {
		if f.OldPath != "" {
			fmt.Fprintf(out, "%-12s %s -> %s\n", f.Status, f.OldPath, f.Path)
		} else {
			fmt.Fprintf(out, "%-12s %s\n", f.Status, f.Path)
		}
	}
	if d.Truncated {
		fmt.Fprintf(out, "(more than %d paths: the list stops here)\n", len(d.Files))
	}
	// R-DIFF-9: agents often leave their edits uncommitted; the diff shows
	// committed work only, so say what it leaves out.
	if d.Uncommitted != nil && *d.Uncommitted > 0 {
		n := *d.Uncommitted
		s, have := "s", "have"
		if n == 1 {
			s, have = "", "has"
		}
		fmt.Fprintf(out, "%d path%s in the worktree %s uncommitted changes, not shown: the diff shows what branch %s committed (olivares session diff %s --uncommitted prints them)\n", n, s, have, d.Branch, ref)
	}
}

func sessionMove() *command {
	var profile string
	return &command{
		name: "session move", arg: "run ref",
		usage: `olivares session move REF --profile REF|NAME [--json]
    Carry a stopped Claude Code run's conversation to another Claude Code
    profile of its node; nothing starts, the next resume runs there.
`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&profile, "profile", "", "the Claude Code profile (ref or exact name) to move the run to")
		},
		check: func(c *call) error { return c.required("profile") },
		run: func(ctx context.Context, c *call) error {
			ref, err := resolveProfile(ctx, c, profile)
			if err != nil {
				return err
			}
			r, err := c.cl.Move(ctx, c.arg, ref)
			if err != nil {
				return err
			}
			return c.emit(r, func() {
				fmt.Fprintf(c.out, "%s now on profile %s (%s); resume it to go on\n", r.RunRef, r.ProviderProfileRef, runState(r))
			})
		},
	}
}

type sessionHandoffOpts struct {
	profile, summaryFile, name string
	preview, quiet             bool
}

func sessionHandoff() *command {
	var o sessionHandoffOpts
	return &command{
		name: "session handoff", arg: "run ref",
		usage: `olivares session handoff REF --preview
    Print the summary a handoff would send (generated without a model), to
    review and edit into a file.
olivares session handoff REF --profile REF|NAME [--summary-file F] [--name N] [--quiet|--json]
    Stop the session, write its transcript under the target profile and start
    a new run there (any tool) whose first turn is the summary and the
    transcript's path. --quiet prints only the new run's ref.
`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.profile, "profile", "", "the profile (ref or exact name, any tool) to continue in")
			fs.BoolVar(&o.preview, "preview", false, "print the summary to review (and edit into a file) without handing off")
			fs.StringVar(&o.summaryFile, "summary-file", "", "the reviewed summary to send instead of the generated one")
			fs.StringVar(&o.name, "name", "", "the new run's name")
			fs.BoolVar(&o.quiet, "quiet", false, "print only the new run's ref")
			fs.BoolVar(&o.quiet, "q", false, "short for --quiet")
		},
		check: func(c *call) error {
			if !o.preview {
				return c.required("profile")
			}
			return nil
		},
		run: func(ctx context.Context, c *call) error {
			out, arg := c.out, c.arg
			if o.preview {
				pv, err := c.cl.HandoffPreview(ctx, arg)
				if err != nil {
					return err
				}
				return c.emit(pv, func() {
					fmt.Fprint(out, pv.Summary)
					if !strings.HasSuffix(pv.Summary, "\n") {
						fmt.Fprintln(out)
					}
					fmt.Fprintf(c.err, "(%s session, %d turns; the transcript would be %d bytes. Save and edit the summary, then: olivares session handoff %s --profile P --summary-file F)\n", pv.SourceDriver, pv.Turns, pv.TranscriptBytes, arg)
				})
			}
			ref, err := resolveProfile(ctx, c, o.profile)
			if err != nil {
				return err
			}
			req := apitypes.HandoffRequest{ProviderProfileRef: ref, Name: o.name}
			if o.summaryFile != "" {
				b, err := os.ReadFile(o.summaryFile)
				if err != nil {
					return fmt.Errorf("handoff: reading the summary: %w", err)
				}
				sum := string(b)
				req.Summary = &sum
			}
			res, err := c.cl.Handoff(ctx, arg, req)
			if err != nil {
				return err
			}
			if o.quiet && !c.json {
				fmt.Fprintln(out, res.RunRef)
				return nil
			}
			return c.emit(res, func() {
				fmt.Fprintf(out, "%s handed off to %s (%s on %s): first turn %s\n", arg, res.RunRef, runState(res.Run), res.ProviderProfileRef, res.SummaryState)
				if res.FirstTurn != "" {
					fmt.Fprintf(out, "first turn to send yourself when it is time:\n%s\n", res.FirstTurn)
				}
			})
		},
	}
}

// maxEventPages bounds how many next pages session events follows, so a
// server that hands back the same cursor cannot keep the CLI looping.
const maxEventPages = 10000

// allEvents reads every page of a run's lifecycle ledger. next is the
// opaque cursor handed back as after=.
func allEvents(ctx context.Context, cl *apiclient.Client, ref string) (apitypes.EventList, error) {
	var all apitypes.EventList
	all.Items = []apitypes.Event{}
	after := ""
	for range maxEventPages {
		page, err := cl.Events(ctx, ref, apiclient.EventsQuery{After: after})
		if err != nil {
			return all, err
		}
		all.Items = append(all.Items, page.Items...)
		if page.Next == "" {
			return all, nil
		}
		if page.Next == after {
			return all, fmt.Errorf("the coordinator returned the same events cursor %q twice", after)
		}
		after = page.Next
	}
	return all, fmt.Errorf("more than %d pages of events", maxEventPages)
}

// runState is the state as the API gives it, marked when it is only the last
// one the node reported (R-STATE-7).
func runState(r apitypes.Run) string {
	if r.NodeReachable != nil && !*r.NodeReachable {
		return r.State + " (unreachable)"
	}
	return r.State
}

// exitShort is the EXIT column: the observed code or signal (R-EXIT-*).
func exitShort(r apitypes.Run) string {
	switch {
	case r.ExitCode != nil:
		return strconv.Itoa(*r.ExitCode)
	case r.Signal != "":
		return r.Signal
	}
	return "-"
}

// lastErrorText is "; its tool said: KIND: MESSAGE" for a run with a
// last_error, "" for none.
// cliruntimeAuth is last_error's kind for credentials the tool or its
// provider refused (R-LERR-1).
const cliruntimeAuth = "auth"

// refusedThisGeneration is whether the run's last_error is a sign-in the
// tool refused (R-ACCT-8) since its current generation started: a refusal
// from before a resume (say, before olivares profile login) stands in
// last_error until a turn works (R-LERR-2), but the resumed tool has not
// been refused yet. Without the ledger it counts.
func refusedThisGeneration(ctx context.Context, c *call, r apitypes.Run) bool {
	if r.LastError == nil || r.LastError.Kind != cliruntimeAuth {
		return false
	}
	evs, err := allEvents(ctx, c.cl, r.RunRef)
	if err != nil {
		return true
	}
	for _, e := range evs.Items {
		if e.Kind == "started" && e.Generation == r.Generation && e.At.After(r.LastError.At) {
			return false
		}
	}
	return true
}

// notSignedIn is session wait's answer for a run whose tool is not signed
// in (R-ACCT-8): it names the profile and the command that signs it in.
func notSignedIn(ctx context.Context, c *call, r apitypes.Run) error {
	name := r.ProviderProfileRef
	if p, err := c.cl.Profile(ctx, r.ProviderProfileRef); err == nil {
		name = p.Name
	}
	return fmt.Errorf("run %s is %s but its turn failed: the account of profile %s is not signed in (its tool said: %s); run olivares profile login %s, or give the profile an API key",
		r.RunRef, r.State, name, r.LastError.Message, name)
}

func lastErrorText(r apitypes.Run) string {
	if r.LastError == nil {
		return ""
	}
	return fmt.Sprintf("; its tool said: %s: %s", r.LastError.Kind, r.LastError.Message)
}

func exitLong(r apitypes.Run) string {
	s := "no exit observed"
	switch {
	case r.ExitCode != nil:
		s = fmt.Sprintf("exit code %d", *r.ExitCode)
	case r.Signal != "":
		s = "signal " + r.Signal
	}
	if r.Reason != "" {
		s += " (" + r.Reason + ")"
	}
	return s
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func stampPtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return stamp(*t)
}

func eventDetail(e apitypes.Event) string {
	var parts []string
	if e.PID != 0 {
		parts = append(parts, "pid="+strconv.Itoa(e.PID))
	}
	if e.ExitCode != nil {
		parts = append(parts, "exit_code="+strconv.Itoa(*e.ExitCode))
	}
	if e.Signal != "" {
		parts = append(parts, "signal="+e.Signal)
	}
	if e.Reason != "" {
		parts = append(parts, "reason="+e.Reason)
	}
	if len(e.Detail) > 0 && string(e.Detail) != "null" {
		parts = append(parts, string(e.Detail))
	}
	return dash(strings.Join(parts, " "))
}

func printRun(out io.Writer, r apitypes.Run) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "run\t%s\n", r.RunRef)
	fmt.Fprintf(tw, "state\t%s\n", runState(r))
	fmt.Fprintf(tw, "exit\t%s\n", exitLong(r))
	fmt.Fprintf(tw, "driver\t%s\n", dash(r.Driver))
	fmt.Fprintf(tw, "generation\t%d\n", r.Generation)
	if r.PID != 0 {
		fmt.Fprintf(tw, "pid\t%d\n", r.PID)
	}
	fmt.Fprintf(tw, "isolation\t%s\n", boundary(r.Isolation, ""))
	fmt.Fprintf(tw, "node\t%s\n", r.NodeID)
	fmt.Fprintf(tw, "profile\t%s\n", dash(r.ProviderProfileRef))
	fmt.Fprintf(tw, "workspace\t%s\n", dash(r.WorkspaceRef))
	fmt.Fprintf(tw, "directory\t%s\n", dash(r.WorkspacePath))
	if r.WorktreeBranch != "" {
		fmt.Fprintf(tw, "worktree branch\t%s\n", r.WorktreeBranch)
	}
	if r.Name != "" {
		fmt.Fprintf(tw, "name\t%s\n", r.Name)
	}
	if r.ConversationID != "" {
		fmt.Fprintf(tw, "conversation\t%s\n", r.ConversationID)
	}
	if r.LiveRef != "" {
		fmt.Fprintf(tw, "live ref\t%s\n", r.LiveRef)
	}
	if r.HandoffOf != "" {
		fmt.Fprintf(tw, "handoff of\t%s\n", r.HandoffOf)
	}
	if r.PendingRequests > 0 {
		// R-REQ-3: the tool waits for a person.
		fmt.Fprintf(tw, "requests\t%d waiting for an answer (olivares session requests %s)\n", r.PendingRequests, r.RunRef)
	}
	if r.LastError != nil {
		// R-LERR-1
		fmt.Fprintf(tw, "last error\t%s: %s (%s)\n", r.LastError.Kind, r.LastError.Message, stamp(r.LastError.At))
	}
	if r.LastMessage != "" {
		fmt.Fprintf(tw, "last message\t%s\n", r.LastMessage) // R-LIST-8
	}
	if r.Limit != nil {
		resets := ""
		if r.Limit.ResetsAt != nil {
			resets = ", resets " + stamp(*r.Limit.ResetsAt)
		}
		fmt.Fprintf(tw, "limit\t%s on %s%s\n", r.Limit.Kind, r.Limit.AccountRef, resets)
	}
	if r.ScheduledContinueAt != nil {
		fmt.Fprintf(tw, "continues at\t%s (olivares session continue-at-reset %s --cancel)\n", stamp(*r.ScheduledContinueAt), r.RunRef)
	}
	for _, e := range r.OnLimit {
		fmt.Fprintf(tw, "on limit\t%s\n", onLimitLine(e)) // R-ONL-6
	}
	if r.Usage != nil {
		fmt.Fprintf(tw, "usage\t%d turns, %d in, %d out, %d cache read, %d cache write, %s USD\n", r.Usage.Turns, r.Usage.InputTokens,
			r.Usage.OutputTokens, r.Usage.CacheReadTokens, r.Usage.CacheWriteTokens, cost(*r.Usage))
	}
	if r.RingLast != 0 {
		fmt.Fprintf(tw, "output seq\t%d..%d\n", r.RingFirst, r.RingLast)
	}
	fmt.Fprintf(tw, "pinned / done\t%v / %v\n", r.Pinned, r.Done)
	if r.SnoozedUntil != nil {
		fmt.Fprintf(tw, "snoozed until\t%s\n", stamp(*r.SnoozedUntil))
	}
	if r.ArchivedAt != nil {
		fmt.Fprintf(tw, "archived\t%s\n", stamp(*r.ArchivedAt))
	}
	fmt.Fprintf(tw, "created\t%s\n", stamp(r.CreatedAt))
	fmt.Fprintf(tw, "started\t%s\n", stampPtr(r.StartedAt))
	fmt.Fprintf(tw, "ended\t%s\n", stampPtr(r.EndedAt))
	tw.Flush()
}

// boundary says plainly what a session of isolation iso reaches on its node
// (R-TR-7, docs/isolation.md).
func boundary(iso, network string) string {
	switch iso {
	case "", apitypes.IsolationNative:
		return "native (runs as the agent's user, can read the node's files)"
	case apitypes.IsolationSandbox, apitypes.IsolationContainer:
		if network == "none" {
			return iso + " (sees only its working directory and its profile home; no network)"
		}
		return iso + " (sees only its working directory and its profile home)"
	}
	return iso
}
