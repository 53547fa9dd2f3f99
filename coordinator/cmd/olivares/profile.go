package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The profile commands: one account/config home of one tool on one node.
func profileCommands() []*command {
	return []*command{profileAdd(), {
		name: "profile list", usage: "olivares profile list [--json]\n",
		run: func(ctx context.Context, c *call) error {
			res, err := c.cl.Profiles(ctx)
			if err != nil {
				return err
			}
			return c.emit(res, func() {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PROFILE\tTOOL\tNAME\tNODE\tHOME\tENV\tCREATED")
				for _, p := range res.Items {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Ref, p.Tool, p.Name, p.NodeID, dash(p.Home), dash(strings.Join(p.EnvKeys, ",")), stamp(p.CreatedAt))
				}
				tw.Flush()
			})
		},
	}, {
		name: "profile show", arg: "profile ref or name", usage: "olivares profile show REF|NAME [--json]\n",
		run: func(ctx context.Context, c *call) error {
			ref, err := resolveProfile(ctx, c, c.arg)
			if err != nil {
				return err
			}
			p, err := c.cl.Profile(ctx, ref)
			if err != nil {
				return err
			}
			return c.emit(p, func() {
				// R-ACCT-9: the node says; an unreachable one says why.
				a, err := c.cl.ProfileAccount(ctx, ref)
				printProfile(c.out, p, "account\t"+accountText(p, a, err))
			})
		},
	}, profileUpdate(), profileLogin(),
		{name: "profile delete", arg: "profile ref or name",
			usage: "olivares profile delete REF|NAME       remove a profile no live run uses (its home stays)\n",
			run: func(ctx context.Context, c *call) error {
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
	}
}

// policyOpts are a profile's policy flags (R-MOVE-3, Q-53, R-PCS-15,
// R-REQ-10..12).
type policyOpts struct {
	active, requiresApproval, engineHooks bool
	resumeAfterLoss                       bool
	allowWorkspaces, denyTools            listFlag
	approvals, askTimeout, stallAfter     string
	isolation, network                    string
	rules                                 ruleFlag
	onLimit                               listFlag
	apiKey                                string
}

// plan is --on-limit's steps; --on-limit= alone is none.
func (o *policyOpts) plan() []string {
	out := []string{}
	for _, s := range o.onLimit {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (o *policyOpts) define(fs *flag.FlagSet, update bool) {
	fs.BoolVar(&o.active, "active", true, "the profile takes launches (--active=false deactivates it)")
	fs.BoolVar(&o.requiresApproval, "requires-approval", false, "hold each launch and resume until a person approves it (olivares session approve)")
	fs.BoolVar(&o.engineHooks, "engine-hooks", false, "claude: carry the engine's hooks and load no settings file (--setting-sources \"\")")
	if update {
		fs.Var(&o.allowWorkspaces, "allow-workspace", "workspace (ref or name) the profile may run in, repeatable; the list given replaces the old one, and --allow-workspace= alone allows any workspace again")
		fs.Var(&o.denyTools, "deny-tool", "claude, with --engine-hooks: add a tool the engine's hook refuses (Bash, Write, ... or *), repeatable")
	} else {
		fs.Var(&o.allowWorkspaces, "allow-workspace", "workspace (ref or name) the profile may run in, repeatable (default: any)")
		fs.Var(&o.denyTools, "deny-tool", "claude, with --engine-hooks: a tool the engine's hook refuses (Bash, Write, ... or *), repeatable")
	}
	fs.StringVar(&o.approvals, "approvals", "", "what answers the tool's requests that no rule decides: ask (a person; the default), deny or allow")
	rules := "ACTION:TOOL_OR_KIND:PATTERN, a rule tried in order (ACTION allow, deny or ask; a tool such as Bash, or a kind: command, file_change, permission, question, elicitation, or * for any; * in the pattern matches anything), repeatable, e.g. allow:Bash:git status"
	if update {
		rules += "; the rules given replace the old ones, and --approval-rule= alone removes them all"
	}
	fs.Var(&o.rules, "approval-rule", rules)
	fs.StringVar(&o.askTimeout, "ask-timeout", "", "how long a request waits for a person before it is denied, 1s to 24h, like 10m (the default)")
	fs.StringVar(&o.stallAfter, "stall-after", "", "how long a running turn may write nothing before the session is marked stalled (attention stalled; nothing is stopped), 1m to 24h, like 10m (the default)")
	fs.BoolVar(&o.resumeAfterLoss, "resume-after-loss", false, "after a host reboot, the agent resumes each session of the profile whose process was lost on its conversation (default: off; such sessions stay failed, process_lost)")
	fs.StringVar(&o.isolation, "isolation", "", "what the profile's sessions run in unless a launch asks for stricter: native (the default: the tool runs as the agent's user and can read the node's files), sandbox (bubblewrap: only its working directory and its home; see docs/isolation.md) or container (podman, the same boundary)")
	fs.StringVar(&o.network, "network", "", "an isolated session's network: host (the default) or none")
	onLimit := "a step tried, in order, when a session stops on a usage limit: move:PROFILE (claude: the same conversation on another account), handoff:PROFILE (another profile, any tool, with the handoff summary) or continue_at_reset (last); repeatable. Rotating accounts must respect each vendor's terms"
	if update {
		onLimit += "; the steps given replace the old ones, and --on-limit= alone removes them"
	}
	fs.Var(&o.onLimit, "on-limit", onLimit)
	apiKey := "a vault secret (name or ref, olivares vault add) every session of the profile gets as its tool's API key (ANTHROPIC_API_KEY for claude and opencode, OPENAI_API_KEY for codex, GEMINI_API_KEY, XAI_API_KEY for grok): the alternative to olivares profile login"
	if update {
		apiKey += "; --api-key= alone removes it"
	}
	fs.StringVar(&o.apiKey, "api-key", "", apiKey)
}

// apiKeyRef is --api-key as a secret's ref; "" stays "" (none, or remove).
func (o *policyOpts) apiKeyRef(ctx context.Context, c *call) (string, error) {
	if o.apiKey == "" {
		return "", nil
	}
	return resolveSecret(ctx, c, o.apiKey)
}

// ruleFlag collects repeated --approval-rule ACTION:TOOL_OR_KIND:PATTERN;
// an empty value adds nothing, so --approval-rule= alone is no rule.
type ruleFlag []apitypes.ApprovalRule

func (r *ruleFlag) String() string {
	var s []string
	for _, x := range *r {
		s = append(s, ruleText(x))
	}
	return strings.Join(s, ",")
}

// ruleText is a rule as --approval-rule takes it: ACTION:TOOL_OR_KIND:PATTERN.
func ruleText(r apitypes.ApprovalRule) string {
	what := "*"
	switch {
	case r.Tool != "" && r.Kind != "":
		what = r.Tool + " (" + r.Kind + ")"
	case r.Tool != "":
		what = r.Tool
	case r.Kind != "":
		what = r.Kind
	}
	return r.Action + ":" + what + ":" + r.Pattern
}

func (r *ruleFlag) Set(s string) error {
	if s == "" {
		return nil
	}
	action, rest, ok := strings.Cut(s, ":")
	if !ok {
		return fmt.Errorf("want ACTION:TOOL_OR_KIND:PATTERN, like allow:Bash:git status, got %q", s)
	}
	switch action {
	case "allow", "deny", "ask":
	default:
		return fmt.Errorf("%q: the action is allow, deny or ask, not %q", s, action)
	}
	what, pattern, _ := strings.Cut(rest, ":")
	rule := apitypes.ApprovalRule{Action: action, Pattern: pattern}
	switch what {
	case apitypes.RequestCommand, apitypes.RequestFileChange, apitypes.RequestPermission, apitypes.RequestQuestion, apitypes.RequestElicitation:
		rule.Kind = what
	case "", "*":
	default:
		rule.Tool = what
	}
	*r = append(*r, rule)
	return nil
}

// workspaceRefs resolves each --allow-workspace value to a ref; empty
// values are left out, so --allow-workspace= alone is the empty list.
func (o *policyOpts) workspaceRefs(ctx context.Context, c *call) ([]string, error) {
	refs := []string{}
	for _, v := range o.allowWorkspaces {
		if v == "" {
			continue
		}
		ref, err := resolveWorkspace(ctx, c, v)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	return refs, nil
}

type profileAddOpts struct {
	node, tool, name, home string
	env                    envFlag
	policy                 policyOpts
}

func profileAdd() *command {
	var o profileAddOpts
	return &command{
		name: "profile add",
		usage: `olivares profile add --tool claude|codex|grok|gemini|opencode --name NAME [--node ID|HOST]
                     [--home DIR] [--env K=V ...] [--json]
    Register a provider profile: one account/config home of one tool on one
    node (--node may be left out when the tenant has one node). Env values
    stay on the node; only their names are shown again.
    Policy: [--active=false] [--requires-approval] [--allow-workspace WS ...]
    [--engine-hooks [--deny-tool T ...]] (claude: the engine's PreToolUse hook
    sees every tool use and refuses the denied ones; no settings file loaded)
    [--approvals ask|deny|allow] [--approval-rule ACTION:TOOL_OR_KIND:PATTERN ...]
    [--ask-timeout D]: what answers the tool's requests to run a command,
    change files or use a tool (see profile update --help).
    [--stall-after D]: a turn that writes nothing this long is marked
    stalled (10m by default).
    [--resume-after-loss]: after a host reboot the agent resumes the
    profile's lost sessions on their conversations.
    [--isolation native|sandbox|container] [--network host|none]: what the
    profile's sessions can reach on the node (sandbox, container: only their
    working directory and the profile's home).
    [--on-limit STEP ...]: what to do when a session stops on a usage limit,
    tried in order: move:PROFILE, handoff:PROFILE, continue_at_reset (see
    profile update --help).
    [--api-key SECRET]: a vault secret every session gets as the tool's API
    key, instead of a sign-in (olivares profile login).
`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.node, "node", "", "node (id or host name) the profile lives on (default: the tenant's only node)")
			fs.StringVar(&o.tool, "tool", "", "claude, codex, grok, gemini or opencode")
			fs.StringVar(&o.name, "name", "", "profile name")
			fs.StringVar(&o.home, "home", "", "config home directory on the node (default: the tool's own)")
			fs.Var(&o.env, "env", "K=V environment for the tool, repeatable; values stay on the node")
			o.policy.define(fs, false)
		},
		check: func(c *call) error { return c.required("tool", "name") },
		run: func(ctx context.Context, c *call) error {
			node, err := resolveNode(ctx, c, o.node)
			if err != nil {
				return err
			}
			ws, err := o.policy.workspaceRefs(ctx, c)
			if err != nil {
				return err
			}
			key, err := o.policy.apiKeyRef(ctx, c)
			if err != nil {
				return err
			}
			req := apitypes.ProfileCreate{NodeID: node, Tool: o.tool, Name: o.name, Home: o.home, Env: o.env, APIKeyRef: key,
				LaunchRequiresApproval: o.policy.requiresApproval, AllowedWorkspaces: ws, EngineHooks: o.policy.engineHooks,
				DeniedTools: o.policy.denyTools, Approvals: o.policy.approvals, ApprovalRules: o.policy.rules, AskTimeout: o.policy.askTimeout,
				Isolation: o.policy.isolation, Network: o.policy.network, OnLimit: o.policy.plan(),
				StallAfter: o.policy.stallAfter, ResumeAfterLoss: o.policy.resumeAfterLoss}
			if c.set["active"] {
				req.Active = &o.policy.active
			}
			p, err := c.cl.CreateProfile(ctx, req)
			if err != nil {
				return err
			}
			return c.emit(p, func() { printProfile(c.out, p) })
		},
	}
}

type profileUpdateOpts struct {
	policy      policyOpts
	allowTools  listFlag
	clearDenied bool
	envEdit     profileEnvFlags
}

func profileUpdate() *command {
	var o profileUpdateOpts
	return &command{
		name: "profile update", arg: "profile ref or name",
		usage: `olivares profile update REF|NAME [--active=BOOL] [--requires-approval=BOOL] [--engine-hooks=BOOL]
                        [--allow-workspace WS ...] [--deny-tool T ...] [--allow-tool T ...]
                        [--clear-denied-tools] [--env K=V ...] [--unset-env K ...] [--home DIR]
                        [--approvals ask|deny|allow] [--approval-rule ACTION:TOOL_OR_KIND:PATTERN ...]
                        [--ask-timeout D] [--stall-after D] [--resume-after-loss=BOOL]
                        [--isolation native|sandbox|container] [--network host|none]
                        [--on-limit STEP ...] [--api-key SECRET] [--json]
    Change the policy, the tool's environment (values stay on the node) or
    the home; it applies to the next launch or resume. The
    --allow-workspace list replaces the old one (--allow-workspace= alone:
    any workspace again); --deny-tool adds to the denied tools, --allow-tool
    takes one off the list, --clear-denied-tools empties it.
    --approvals says what answers the tool's requests (to run a command,
    change files, ...) that no rule decides: a person (ask, the default), or
    deny, or allow. The --approval-rule list replaces the old one
    (--approval-rule= alone: no rule); rules are tried in order, e.g.
    --approval-rule 'allow:Bash:git status' --approval-rule 'deny:command:rm *';
    an allow never covers a command chained with ; & | or a redirection its
    pattern does not show. A request nobody answers is denied after
    --ask-timeout (10m by default). A turn that writes nothing for
    --stall-after (10m by default) is marked stalled; nothing is stopped.
    --on-limit is the plan tried when a session stops on a usage limit, in
    order: move:PROFILE moves a Claude Code session to another Claude Code
    account and continues the same conversation there; handoff:PROFILE hands
    the work to another profile (any tool) with the handoff summary;
    continue_at_reset waits for the reset (last). A step that cannot apply
    is skipped and the session shows why; when none applies it waits for the
    reset. The list replaces the old one (--on-limit= alone: no plan).
    Rotating accounts at a limit must respect each vendor's terms.
    --api-key names a vault secret (olivares vault add) every session of the
    profile gets as its tool's API key, instead of a sign-in; --api-key=
    alone removes it. Sessions launched before keep the key they started with.
`,
		flags: func(fs *flag.FlagSet) {
			o.policy.define(fs, true)
			fs.Var(&o.allowTools, "allow-tool", "claude: take this tool off the denied tools, repeatable")
			fs.BoolVar(&o.clearDenied, "clear-denied-tools", false, "claude: empty the denied tools (before any --deny-tool)")
			o.envEdit.define(fs)
		},
		check: func(c *call) error {
			for _, t := range o.allowTools {
				if slices.Contains(o.policy.denyTools, t) {
					return usageError{fmt.Errorf("profile update: %s is given to both --deny-tool and --allow-tool", t)}
				}
			}
			return nil
		},
		run: func(ctx context.Context, c *call) error {
			ref, err := resolveProfile(ctx, c, c.arg)
			if err != nil {
				return err
			}
			var u apitypes.ProfileUpdate
			if c.set["active"] {
				u.Active = &o.policy.active
			}
			if c.set["requires-approval"] {
				u.LaunchRequiresApproval = &o.policy.requiresApproval
			}
			if c.set["engine-hooks"] {
				u.EngineHooks = &o.policy.engineHooks
			}
			if c.set["isolation"] {
				u.Isolation = &o.policy.isolation
			}
			if c.set["network"] {
				u.Network = &o.policy.network
			}
			if c.set["allow-workspace"] {
				ws, err := o.policy.workspaceRefs(ctx, c)
				if err != nil {
					return err
				}
				u.AllowedWorkspaces = &ws
			}
			if c.set["deny-tool"] || c.set["allow-tool"] || c.set["clear-denied-tools"] {
				cur, err := c.cl.Profile(ctx, ref)
				if err != nil {
					return err
				}
				denied := deniedTools(cur.DeniedTools, o.clearDenied, o.policy.denyTools, o.allowTools)
				u.DeniedTools = &denied
			}
			if c.set["approvals"] {
				u.Approvals = &o.policy.approvals
			}
			if c.set["approval-rule"] {
				rs := []apitypes.ApprovalRule(o.policy.rules)
				if rs == nil {
					rs = []apitypes.ApprovalRule{}
				}
				u.ApprovalRules = &rs
			}
			if c.set["ask-timeout"] {
				u.AskTimeout = &o.policy.askTimeout
			}
			if c.set["on-limit"] {
				plan := o.policy.plan()
				u.OnLimit = &plan
			}
			if c.set["stall-after"] {
				u.StallAfter = &o.policy.stallAfter
			}
			if c.set["resume-after-loss"] {
				u.ResumeAfterLoss = &o.policy.resumeAfterLoss
			}
			if c.set["api-key"] {
				key, err := o.policy.apiKeyRef(ctx, c)
				if err != nil {
					return err
				}
				u.APIKeyRef = &key
			}
			o.envEdit.apply(&u, c.set)
			if len(c.set) == 0 || (len(c.set) == 1 && c.json) {
				return usageError{errors.New("profile update: give at least one flag to change (see olivares profile update --help)")}
			}
			p, err := c.cl.UpdateProfile(ctx, ref, u)
			if err != nil {
				return err
			}
			return c.emit(p, func() { printProfile(c.out, p) })
		},
	}
}

// deniedTools is the denied list after an update: cur, emptied first when
// clear, with add appended and remove taken off, each tool once.
func deniedTools(cur []string, clear bool, add, remove []string) []string {
	out := []string{}
	if !clear {
		out = append(out, cur...)
	}
	for _, t := range add {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return slices.DeleteFunc(out, func(t string) bool { return slices.Contains(remove, t) })
}

// resolveProfile returns v when it is a profile ref, else the ref of the one
// profile named exactly v.
func resolveProfile(ctx context.Context, c *call, v string) (string, error) {
	if strings.HasPrefix(v, profileRefPrefix) {
		return v, nil
	}
	res, err := c.cl.Profiles(ctx)
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

// Ref prefixes: a value without one is a name.
const (
	profileRefPrefix   = "prof_"
	workspaceRefPrefix = "ws_"
	secretRefPrefix    = "sec_"
)

// notFound is an unknown name: it exits 4, as an unknown ref does when the
// API answers 404 (R-CLI-2).
type notFound struct{ error }

// pickOne returns the ref of the single match; each match is "REF on NODE".
func pickOne(kind, name string, matches []string, listCmd string) (string, error) {
	switch len(matches) {
	case 0:
		return "", notFound{fmt.Errorf("no %s is named %q; see %s", kind, name, listCmd)}
	case 1:
		ref, _, _ := strings.Cut(matches[0], " ")
		return ref, nil
	}
	return "", fmt.Errorf("%d %ss are named %q (%s); pass the ref instead", len(matches), kind, name, strings.Join(matches, ", "))
}

func printProfile(out io.Writer, p apitypes.Profile, rows ...string) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "profile\t%s\n", p.Ref)
	fmt.Fprintf(tw, "name\t%s\n", p.Name)
	fmt.Fprintf(tw, "tool\t%s\n", p.Tool)
	fmt.Fprintf(tw, "node\t%s\n", p.NodeID)
	fmt.Fprintf(tw, "home\t%s\n", dash(p.Home))
	fmt.Fprintf(tw, "env\t%s\n", dash(strings.Join(p.EnvKeys, ", ")))
	fmt.Fprintf(tw, "active\t%v\n", p.Active)
	fmt.Fprintf(tw, "requires approval\t%v\n", p.LaunchRequiresApproval)
	allowed := strings.Join(p.AllowedWorkspaces, ", ")
	if allowed == "" {
		allowed = "any"
	}
	fmt.Fprintf(tw, "allowed workspaces\t%s\n", allowed)
	if p.Tool == "claude" {
		fmt.Fprintf(tw, "engine hooks\t%v\n", p.EngineHooks)
		fmt.Fprintf(tw, "denied tools\t%s\n", dash(strings.Join(p.DeniedTools, ", ")))
	}
	fmt.Fprintf(tw, "approvals\t%s, ask timeout %s\n", dash(p.Approvals), dash(p.AskTimeout))
	fmt.Fprintf(tw, "stall after\t%s\n", dash(p.StallAfter))
	fmt.Fprintf(tw, "resume after loss\t%v\n", p.ResumeAfterLoss)
	fmt.Fprintf(tw, "isolation\t%s\n", boundary(p.Isolation, p.Network))
	for i, r := range p.ApprovalRules {
		// As --approval-rule takes it.
		fmt.Fprintf(tw, "approval rule %d\t%s\n", i+1, ruleText(r))
	}
	if len(p.OnLimit) > 0 {
		fmt.Fprintf(tw, "on limit\t%s\n", strings.Join(p.OnLimit, ", then "))
	}
	if p.APIKeyRef != "" {
		fmt.Fprintf(tw, "api key\tvault secret %s, as %s\n", p.APIKeyRef, apitypes.APIKeyEnv[p.Tool])
	}
	fmt.Fprintf(tw, "created\t%s\n", stamp(p.CreatedAt))
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	tw.Flush()
}

// accountText is a profile's account in words (R-ACCT-9): signed in or
// not, how and as whom, and the windows of its plan when a turn reported
// them.
func accountText(p apitypes.Profile, a apitypes.ProfileAccount, err error) string {
	if err != nil {
		return "unknown: " + err.Error()
	}
	s, msg, login := "unknown", a.Message, ""
	switch {
	case a.SignedIn == nil:
	case *a.SignedIn:
		s = "signed in"
		if a.Email != "" {
			s += " as " + a.Email
		}
		if a.Plan != "" {
			s += " (" + a.Plan + ")"
		}
	default:
		// The node's words start "not signed in: ", said once here.
		s, msg = "not signed in", strings.TrimPrefix(msg, "not signed in: ")
		login = "; run olivares profile login " + p.Name
	}
	if msg != "" {
		s += ": " + msg
	}
	for _, w := range a.RateLimits {
		s += fmt.Sprintf("; %s window %.0f%% used", w.Name, w.UsedPercent)
		if w.ResetsAt != nil {
			s += ", resets " + stamp(*w.ResetsAt)
		}
	}
	return s + login
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
