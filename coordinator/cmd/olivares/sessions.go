package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Ref prefixes: a --profile or --workspace value without one is a name.
const (
	profileRefPrefix   = "prof_"
	workspaceRefPrefix = "ws_"
)

// cmdOpts holds the flags of the profile, workspace and session commands.
// Each command defines only its own flags, so a flag it does not take is a
// usage error.
type cmdOpts struct {
	json bool
	set  map[string]bool // the flags given on the command line

	node, tool, name, home, path string
	env                          envFlag

	profile, workspace, isolation, worktreeFrom string
	worktree, noSetup                           bool

	state         string
	limit, offset int
	archived      bool
	text, message string
	line          string
	from          uint64
	raw           bool

	command, sha256  string
	readOnly         bool
	subpaths         listFlag
	maxRead          int64
	dlp              string
	policy           policyFlags
	grants           grantFlag
	preview          bool
	summaryFile      string
	valueFile        string
	until            string
	discard, snoozed bool
	all              bool
	auditFilter      map[string]string
	agent            string
	messages         messagesFlags
	envEdit          profileEnvFlags
}

// commands lists each command with its positional argument, if any.
var commands = map[string]string{
	"whoami": "", "node list": "", "node show": "node id", "node revoke": "node id",
	"profile add": "", "profile list": "", "profile show": "profile ref", "profile update": "profile ref or name",
	"session approve": "run ref", "session move": "run ref", "session diff": "run ref", "session handoff": "run ref",
	"workspace add": "", "workspace list": "",
	"session start": "", "session list": "",
	"session show": "run ref", "session events": "run ref", "session input": "run ref",
	"session interrupt": "run ref", "session stop": "run ref", "session resume": "run ref",
	"session attach": "run ref",
}

func knownCommand(cmd string) bool {
	_, ok := commands[cmd]
	return ok
}

func (o *cmdOpts) define(cmd string, fs *flag.FlagSet) {
	o.defineActivity(cmd, fs)
	switch cmd {
	case "profile add":
		fs.StringVar(&o.node, "node", "", "node id the profile lives on")
		fs.StringVar(&o.tool, "tool", "", "claude, codex, grok, gemini or opencode")
		fs.StringVar(&o.name, "name", "", "profile name")
		fs.StringVar(&o.home, "home", "", "config home directory on the node (default: the tool's own)")
		fs.Var(&o.env, "env", "K=V environment for the tool, repeatable; values stay on the node")
		o.definePolicy(fs)
	case "profile update":
		o.definePolicy(fs)
		o.envEdit.define(fs)
	case "workspace add":
		fs.StringVar(&o.node, "node", "", "node id the directory is on")
		fs.StringVar(&o.path, "path", "", "absolute directory path on the node")
		fs.StringVar(&o.name, "name", "", "workspace name")
		fs.BoolVar(&o.readOnly, "read-only", false, "runs may not write it (no worktree launches)")
		fs.Var(&o.subpaths, "allow-subpath", "relative sub-path whose files the API may show, repeatable (default: all)")
		fs.Int64Var(&o.maxRead, "max-read-bytes", 0, "cap of a file read through the API (default 1 MiB)")
		fs.StringVar(&o.dlp, "dlp", "", "allow (default) or deny file reads through the API")
	case "agent workspace setup":
		fs.StringVar(&o.command, "command", "", "set the setup command to this exact text (empty clears); without it, show it")
	case "agent workspace approve-setup", "agent workspace approve-project-config":
		fs.StringVar(&o.sha256, "sha256", "", "the sha256 of what you reviewed")
	case "session start":
		fs.StringVar(&o.profile, "profile", "", "provider profile ref or exact name")
		fs.StringVar(&o.workspace, "workspace", "", "workspace ref or exact name")
		fs.StringVar(&o.name, "name", "", "display name")
		fs.StringVar(&o.isolation, "isolation", "", "native (default), container or sandbox")
		fs.BoolVar(&o.worktree, "worktree", false, "run in a new git worktree of the workspace")
		fs.StringVar(&o.worktreeFrom, "worktree-from", "", "branch or commit the worktree starts from (with --worktree)")
		fs.BoolVar(&o.noSetup, "no-setup", false, "skip the workspace setup command for this launch")
		fs.Var(&o.grants, "grant", "KIND:SECRET_REF:ENV[:file]: hand a vault secret to the tool, repeatable (KIND: vault_secret, repository_credential, managed_credential or package_registry_token)")
	case "vault add":
		fs.StringVar(&o.valueFile, "value-file", "", "file holding the value, or - for standard input")
	case "session list":
		fs.StringVar(&o.state, "state", "", "only runs in this state")
		fs.IntVar(&o.limit, "limit", 0, "page size, 1..200 (default: the server's, 50)")
		fs.IntVar(&o.offset, "offset", 0, "skip this many runs")
		fs.BoolVar(&o.archived, "archived", false, "include archived runs")
		fs.BoolVar(&o.snoozed, "snoozed", false, "include runs you snoozed")
	case "session input":
		fs.StringVar(&o.text, "text", "", "plain user text (codex, grok)")
		fs.StringVar(&o.message, "message", "", "user message text, sent as a JSON string (claude)")
		fs.StringVar(&o.line, "line", "", "one raw stream-json object, forwarded as is (claude)")
	case "session attach":
		fs.Uint64Var(&o.from, "from", 0, "first seq to stream (default: the oldest retained frame)")
		fs.BoolVar(&o.raw, "raw", false, "print each event as one JSON line instead of the output")
	case "session move":
		fs.StringVar(&o.profile, "profile", "", "the Claude Code profile (ref or exact name) to move the run to")
	case "session diff":
		fs.StringVar(&o.path, "file", "", "show this path at base and at head instead of the list")
	case "session handoff":
		fs.StringVar(&o.profile, "profile", "", "the profile (ref or exact name, any tool) to continue in")
		fs.BoolVar(&o.preview, "preview", false, "print the summary to review (and edit into a file) without handing off")
		fs.StringVar(&o.summaryFile, "summary-file", "", "the reviewed summary to send instead of the generated one")
		fs.StringVar(&o.name, "name", "", "the new run's name")
	case "session snooze":
		fs.StringVar(&o.until, "until", "", "when the snooze ends: an RFC 3339 instant, or a duration from now (2h)")
	case "session rename":
		fs.StringVar(&o.name, "name", "", "the new name; empty clears it")
	case "session cleanup":
		fs.BoolVar(&o.discard, "discard-worktree", false, "remove the worktree and its branch even with unmerged work")
	case "audit list":
		o.auditFilter = map[string]string{}
		for _, f := range []string{"event", "run", "actor", "since"} {
			fs.Func(f, "only entries with this "+f, func(v string) error { o.auditFilter[f] = v; return nil })
		}
		fs.IntVar(&o.limit, "limit", 0, "page size, 1..500 (default 100)")
		fs.BoolVar(&o.all, "all", false, "read every page")
	}
}

// check validates what the server cannot: arity and required flags.
func (o *cmdOpts) check(cmd string, pos []string) error {
	switch what := commands[cmd]; {
	case what != "" && len(pos) != 1:
		return usageError{fmt.Errorf("%s: want exactly one %s", cmd, what)}
	case what == "" && len(pos) > 0:
		return usageError{fmt.Errorf("%s takes no argument", cmd)}
	}
	required := func(names ...string) error {
		var missing []string
		for _, n := range names {
			if !o.set[n] {
				missing = append(missing, "--"+n)
			}
		}
		if len(missing) > 0 {
			return usageError{fmt.Errorf("%s: %s required", cmd, strings.Join(missing, ", "))}
		}
		return nil
	}
	// A count the API takes only when it is positive: 0 would be sent as
	// nothing, and the server's default used instead of what was asked.
	positive := func(names ...string) error {
		for _, n := range names {
			v := map[string]int{"limit": o.limit, "cursor": o.messages.cursor, "id": o.messages.id}[n]
			if cmd == "session messages" && n == "limit" {
				v = o.messages.limit
			}
			if o.set[n] && v < 1 {
				return usageError{fmt.Errorf("%s: --%s must be at least 1", cmd, n)}
			}
		}
		return nil
	}
	switch cmd {
	case "session list", "audit list":
		return positive("limit")
	case "session messages":
		return positive("limit", "cursor", "id")
	case "profile add":
		return required("node", "tool", "name")
	case "workspace add":
		return required("node", "path", "name")
	case "session start":
		return required("profile")
	case "session snooze":
		return required("until")
	case "vault add":
		return required("value-file")
	case "session move":
		return required("profile")
	case "session handoff":
		if !o.preview {
			return required("profile")
		}
	case "agent workspace approve-setup", "agent workspace approve-project-config":
		return required("sha256")
	case "session rename":
		return required("name")
	case "session input":
		n := 0
		for _, f := range []string{"text", "message", "line"} {
			if o.set[f] {
				n++
			}
		}
		if n != 1 {
			return usageError{errors.New("session input: give exactly one of --text, --message or --line")}
		}
		if o.set["line"] && !json.Valid([]byte(o.line)) {
			return usageError{errors.New("session input: --line is not valid JSON")}
		}
	}
	return nil
}

// policyFlags are a profile's policy flags (R-MOVE-3, Q-53, R-PCS-15).
type policyFlags struct {
	active, requiresApproval, engineHooks bool
	allowWorkspaces, denyTools            listFlag
}

func (o *cmdOpts) definePolicy(fs *flag.FlagSet) {
	fs.BoolVar(&o.policy.active, "active", true, "the profile takes launches (--active=false deactivates it)")
	fs.BoolVar(&o.policy.requiresApproval, "requires-approval", false, "hold each launch and resume until a person approves it (olivares session approve)")
	fs.BoolVar(&o.policy.engineHooks, "engine-hooks", false, "claude: carry the engine's hooks and load no settings file (--setting-sources \"\")")
	fs.Var(&o.policy.allowWorkspaces, "allow-workspace", "workspace ref the profile may run in, repeatable (default: any)")
	fs.Var(&o.policy.denyTools, "deny-tool", "claude, with --engine-hooks: a tool the engine's hook refuses (Bash, Write, ... or *), repeatable")
}

// profileUpdate is the PATCH body of the policy flags given.
func (o *cmdOpts) profileUpdate() apitypes.ProfileUpdate {
	var u apitypes.ProfileUpdate
	if o.set["active"] {
		u.Active = &o.policy.active
	}
	if o.set["requires-approval"] {
		u.LaunchRequiresApproval = &o.policy.requiresApproval
	}
	if o.set["engine-hooks"] {
		u.EngineHooks = &o.policy.engineHooks
	}
	if o.set["allow-workspace"] {
		ws := []string(o.policy.allowWorkspaces)
		u.AllowedWorkspaces = &ws
	}
	if o.set["deny-tool"] {
		ts := []string(o.policy.denyTools)
		u.DeniedTools = &ts
	}
	o.envEdit.apply(&u, o.set)
	return u
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// envFlag collects repeated --env K=V.
type envFlag map[string]string

func (e *envFlag) String() string {
	keys := make([]string, 0, len(*e))
	for k := range *e {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func (e *envFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want K=V, got %q", s)
	}
	if *e == nil {
		*e = envFlag{}
	}
	if _, dup := (*e)[k]; dup {
		return fmt.Errorf("%s given twice", k)
	}
	(*e)[k] = v
	return nil
}

func runSessions(ctx context.Context, cl *apiclient.Client, cmd string, pos []string, o *cmdOpts, out, errOut io.Writer, emit func(any, func()) error) error {
	arg := ""
	if len(pos) == 1 {
		arg = pos[0]
	}
	if ok, err := runMarks(ctx, cl, cmd, arg, o, out, emit); ok {
		return err
	}
	if ok, err := runWorkspaces(ctx, cl, cmd, arg, o, out, emit); ok {
		return err
	}
	if ok, err := runVault(ctx, cl, cmd, arg, o, os.Stdin, out, emit); ok {
		return err
	}
	if ok, err := runActivity(ctx, cl, cmd, arg, o, out, emit); ok {
		return err
	}
	if cmd == "audit list" || cmd == "audit verify" {
		return runAudit(ctx, cl, cmd, o, out, emit)
	}
	switch cmd {
	case "profile add":
		req := apitypes.ProfileCreate{NodeID: o.node, Tool: o.tool, Name: o.name, Home: o.home, Env: o.env,
			LaunchRequiresApproval: o.policy.requiresApproval, AllowedWorkspaces: o.policy.allowWorkspaces, EngineHooks: o.policy.engineHooks,
			DeniedTools: o.policy.denyTools}
		if o.set["active"] {
			req.Active = &o.policy.active
		}
		p, err := cl.CreateProfile(ctx, req)
		if err != nil {
			return err
		}
		return emit(p, func() { printProfile(out, p) })
	case "profile list":
		res, err := cl.Profiles(ctx)
		if err != nil {
			return err
		}
		return emit(res, func() {
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PROFILE\tTOOL\tNAME\tNODE\tHOME\tENV\tCREATED")
			for _, p := range res.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Ref, p.Tool, p.Name, p.NodeID, dash(p.Home), dash(strings.Join(p.EnvKeys, ",")), stamp(p.CreatedAt))
			}
			tw.Flush()
		})
	case "profile update":
		ref, err := resolveProfile(ctx, cl, arg)
		if err != nil {
			return err
		}
		p, err := cl.UpdateProfile(ctx, ref, o.profileUpdate())
		if err != nil {
			return err
		}
		return emit(p, func() { printProfile(out, p) })
	case "session handoff":
		if o.preview {
			pv, err := cl.HandoffPreview(ctx, arg)
			if err != nil {
				return err
			}
			return emit(pv, func() {
				fmt.Fprint(out, pv.Summary)
				if !strings.HasSuffix(pv.Summary, "\n") {
					fmt.Fprintln(out)
				}
				fmt.Fprintf(errOut, "(%s session, %d turns; the transcript would be %d bytes. Save and edit the summary, then: olivares session handoff %s --profile P --summary-file F)\n", pv.SourceDriver, pv.Turns, pv.TranscriptBytes, arg)
			})
		}
		ref, err := resolveProfile(ctx, cl, o.profile)
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
		res, err := cl.Handoff(ctx, arg, req)
		if err != nil {
			return err
		}
		return emit(res, func() {
			fmt.Fprintf(out, "%s handed off to %s (%s on %s): first turn %s\n", arg, res.RunRef, runState(res.Run), res.ProviderProfileRef, res.SummaryState)
			if res.FirstTurn != "" {
				fmt.Fprintf(out, "first turn to send yourself when it is time:\n%s\n", res.FirstTurn)
			}
		})
	case "session diff":
		if o.set["file"] {
			fd, err := cl.DiffFile(ctx, arg, o.path)
			if err != nil {
				return err
			}
			return emit(fd, func() { printFileDiff(out, fd) })
		}
		d, err := cl.Diff(ctx, arg)
		if err != nil {
			return err
		}
		return emit(d, func() {
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
		})
	case "session move":
		ref, err := resolveProfile(ctx, cl, o.profile)
		if err != nil {
			return err
		}
		r, err := cl.Move(ctx, arg, ref)
		if err != nil {
			return err
		}
		return emit(r, func() {
			fmt.Fprintf(out, "%s now on profile %s (%s); resume it to go on\n", r.RunRef, r.ProviderProfileRef, runState(r))
		})
	case "session approve":
		r, err := cl.Approve(ctx, arg)
		if err != nil {
			return err
		}
		return emit(r, func() { fmt.Fprintf(out, "%s %s, generation %d\n", r.RunRef, runState(r), r.Generation) })
	case "profile show":
		p, err := cl.Profile(ctx, arg)
		if err != nil {
			return err
		}
		return emit(p, func() { printProfile(out, p) })
	case "workspace add":
		req := apitypes.WorkspaceCreate{NodeID: o.node, Path: o.path, Name: o.name, ReadOnly: o.readOnly,
			AllowedSubpaths: o.subpaths, MaxReadBytes: o.maxRead, DLP: o.dlp}
		w, err := cl.CreateWorkspace(ctx, req)
		if err != nil {
			return err
		}
		return emit(w, func() { printWorkspace(out, w) })
	case "workspace list":
		res, err := cl.Workspaces(ctx)
		if err != nil {
			return err
		}
		return emit(res, func() {
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "WORKSPACE\tNAME\tNODE\tPATH\tCREATED")
			for _, w := range res.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", w.Ref, w.Name, w.NodeID, w.Path, stamp(w.CreatedAt))
			}
			tw.Flush()
		})

	case "session start":
		req := apitypes.LaunchRequest{Name: o.name, Isolation: o.isolation, WorktreeFrom: o.worktreeFrom, NoSetup: o.noSetup, Grants: o.grants}
		// R-CRT-2: worktree absent and false are the same; send it only when asked.
		if o.worktree {
			t := true
			req.Worktree = &t
		}
		var err error
		if req.ProviderProfileRef, err = resolveProfile(ctx, cl, o.profile); err != nil {
			return err
		}
		if o.workspace != "" {
			if req.WorkspaceRef, err = resolveWorkspace(ctx, cl, o.workspace); err != nil {
				return err
			}
		}
		r, err := cl.Launch(ctx, req)
		if err != nil {
			return err
		}
		return emit(r, func() { printRun(out, r) })
	case "session list":
		res, err := cl.Runs(ctx, apiclient.RunQuery{State: o.state, Limit: o.limit, Offset: o.offset})
		if err != nil {
			return err
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
		return emit(res, func() { listGroups(out, all, o) })
	case "session show":
		r, err := cl.Run(ctx, arg)
		if err != nil {
			return err
		}
		return emit(r, func() { printRun(out, r) })
	case "session events":
		res, err := allEvents(ctx, cl, arg)
		if err != nil {
			return err
		}
		return emit(res, func() {
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tAT\tKIND\tGEN\tDETAIL")
			for _, e := range res.Items {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", e.Seq, stamp(e.At), e.Kind, e.Generation, eventDetail(e))
			}
			tw.Flush()
		})
	case "session input":
		var req apitypes.InputRequest
		switch {
		case o.set["text"]:
			req.Text = &o.text
		case o.set["message"]:
			m, _ := json.Marshal(o.message)
			req.Message = m
		default:
			req.Line = json.RawMessage(o.line)
		}
		acc, err := cl.Input(ctx, arg, req)
		if err != nil {
			return err
		}
		return emit(acc, func() { fmt.Fprintln(out, "input accepted") })
	case "session interrupt":
		acc, err := cl.Interrupt(ctx, arg)
		if err != nil {
			return err
		}
		return emit(acc, func() { fmt.Fprintln(out, "interrupt accepted") })
	case "session stop":
		r, err := cl.Stop(ctx, arg)
		if err != nil {
			return err
		}
		return emit(r, func() { fmt.Fprintf(out, "%s %s, %s\n", r.RunRef, runState(r), exitLong(r)) })
	case "session resume":
		r, err := cl.Resume(ctx, arg)
		if err != nil {
			return err
		}
		return emit(r, func() { fmt.Fprintf(out, "%s %s, generation %d\n", r.RunRef, runState(r), r.Generation) })
	case "session attach":
		a := newAttacher(cl, arg, o.raw, out, errOut)
		return a.run(ctx, o.from, o.set["from"])
	}
	return usageError{fmt.Errorf("unknown command %q; see olivares --help", cmd)}
}

// resolveProfile returns v when it is a profile ref, else the ref of the one
// profile named exactly v.
func resolveProfile(ctx context.Context, cl *apiclient.Client, v string) (string, error) {
	if strings.HasPrefix(v, profileRefPrefix) {
		return v, nil
	}
	res, err := cl.Profiles(ctx)
	if err != nil {
		return "", fmt.Errorf("looking up profile %q: %w", v, err)
	}
	var refs []string
	for _, p := range res.Items {
		if p.Name == v {
			refs = append(refs, p.Ref+" on "+p.NodeID)
		}
	}
	return pickOne("profile", v, refs, "olivares profile list")
}

// resolveWorkspace is resolveProfile for workspaces.
func resolveWorkspace(ctx context.Context, cl *apiclient.Client, v string) (string, error) {
	if strings.HasPrefix(v, workspaceRefPrefix) {
		return v, nil
	}
	res, err := cl.Workspaces(ctx)
	if err != nil {
		return "", fmt.Errorf("looking up workspace %q: %w", v, err)
	}
	var refs []string
	for _, w := range res.Items {
		if w.Name == v {
			refs = append(refs, w.Ref+" on "+w.NodeID)
		}
	}
	return pickOne("workspace", v, refs, "olivares workspace list")
}

// pickOne returns the ref of the single match; each match is "REF on NODE".
func pickOne(kind, name string, matches []string, listCmd string) (string, error) {
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("no %s is named %q; see %s", kind, name, listCmd)
	case 1:
		ref, _, _ := strings.Cut(matches[0], " ")
		return ref, nil
	}
	return "", fmt.Errorf("%d %ss are named %q (%s); pass the ref instead", len(matches), kind, name, strings.Join(matches, ", "))
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

func printProfile(out io.Writer, p apitypes.Profile) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "profile\t%s\n", p.Ref)
	fmt.Fprintf(tw, "name\t%s\n", p.Name)
	fmt.Fprintf(tw, "tool\t%s\n", p.Tool)
	fmt.Fprintf(tw, "node\t%s\n", p.NodeID)
	fmt.Fprintf(tw, "home\t%s\n", dash(p.Home))
	fmt.Fprintf(tw, "env\t%s\n", dash(strings.Join(p.EnvKeys, ", ")))
	fmt.Fprintf(tw, "active\t%v\n", p.Active)
	fmt.Fprintf(tw, "requires approval\t%v\n", p.LaunchRequiresApproval)
	fmt.Fprintf(tw, "allowed workspaces\t%s\n", dash(strings.Join(p.AllowedWorkspaces, ", ")))
	if p.Tool == "claude" {
		fmt.Fprintf(tw, "engine hooks\t%v\n", p.EngineHooks)
		fmt.Fprintf(tw, "denied tools\t%s\n", dash(strings.Join(p.DeniedTools, ", ")))
	}
	fmt.Fprintf(tw, "created\t%s\n", stamp(p.CreatedAt))
	tw.Flush()
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
	fmt.Fprintf(tw, "isolation\t%s\n", dash(r.Isolation))
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
	if r.Limit != nil {
		resets := ""
		if r.Limit.ResetsAt != nil {
			resets = ", resets " + stamp(*r.Limit.ResetsAt)
		}
		fmt.Fprintf(tw, "limit\t%s on %s%s\n", r.Limit.Kind, r.Limit.AccountRef, resets)
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

// printFileDiff shows a path at base and at head (R-DIFF-3), each as the
// API gives it.
func printFileDiff(out io.Writer, fd apitypes.FileDiff) {
	if fd.Binary {
		fmt.Fprintf(out, "%s: binary content, not shown\n", fd.Path)
		return
	}
	side := func(name, text string, truncated bool) {
		cut := ""
		if truncated {
			cut = " (cut at the read limit)"
		}
		fmt.Fprintf(out, "--- %s at %s%s\n%s", fd.Path, name, cut, text)
		if text != "" && !strings.HasSuffix(text, "\n") {
			fmt.Fprintln(out)
		}
	}
	side("base", fd.Original, fd.OriginalTruncated)
	side("head", fd.Modified, fd.ModifiedTruncated)
}
