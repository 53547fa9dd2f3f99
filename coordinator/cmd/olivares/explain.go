package main

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/olivares-dev/olivares/shared/apiclient"
)

// An API error names what the API takes: body fields (discard_worktree,
// no_setup), query parameters (limit, cursor), the input field of a tool
// ("text"). A person at the CLI gave flags, so explain tells the same
// error with the command's flags, and without the rule IDs some messages
// carry (those belong in docs and tests, not in what a person reads). The
// error keeps its status, so the exit code is the API's (R-CLI-2).

// explain returns err told in cmd's terms; an error that is not an API
// answer is the CLI's own and returned as it is.
func explain(cmd string, err error) error {
	if err == nil {
		return nil
	}
	text := explainText(cmd, err)
	if text == err.Error() {
		return err
	}
	return &toldError{err: err, text: text}
}

// toldError is an error told in the CLI's terms; it unwraps to the error
// it tells.
type toldError struct {
	err  error
	text string
}

func (e *toldError) Error() string { return e.text }
func (e *toldError) Unwrap() error { return e.err }

// explainText is err's text in cmd's terms.
func explainText(cmd string, err error) string {
	var ae *apiclient.Error
	if !errors.As(err, &ae) {
		return err.Error()
	}
	msg := flagTerms(cmd, ae.Code, scrubRuleIDs(ae.Message))
	if ae.Code == "" {
		msg = fmt.Sprintf("%s (HTTP %d)", msg, ae.Status)
	} else {
		msg = fmt.Sprintf("%s (%s)", msg, ae.Code)
	}
	// The API error may be wrapped ("looking up profile "x": ..."): keep
	// what wraps it.
	return strings.Replace(err.Error(), ae.Error(), msg, 1)
}

// ruleIDRe matches a rule ID such as R-MSG-16, R-CX-ARC-1, R-ACT-1..9,
// AT-CX-09, Q-23 or D-01, and a section sign with its number.
const ruleIDRe = `(?:(?:R|AT)(?:-[A-Z]+)+-\d+[a-z]?(?:\.\.\d+)?|[QD]-\d+|§\d+(?:\.\d+)*)`

var (
	// "(R-WTF-3)", "(R-CX-ARC-5, R-CX-ARC-6)", a section in parentheses.
	ruleParens = regexp.MustCompile(`\s*\(` + ruleIDRe + `(?:(?:,\s*|\s+and\s+|/)` + ruleIDRe + `)*\)`)
	// "(Q-23: the file must be ...)" keeps what it explains.
	rulePrefix = regexp.MustCompile(`\(` + ruleIDRe + `:\s*`)
)

// scrubRuleIDs removes the rule IDs an API message cites in parentheses
// (where the API puts them); a bare one could be a name someone chose.
func scrubRuleIDs(s string) string {
	if !strings.ContainsAny(s, "RQDA§") {
		return s
	}
	s = ruleParens.ReplaceAllString(s, "")
	return rulePrefix.ReplaceAllString(s, "(")
}

// term rewrites what matches re in the messages of the commands cmds (nil:
// every command) and, when code is not "", of that error code only. A
// whole term is the whole message: no later term applies.
type term struct {
	cmds  []string
	code  string
	re    *regexp.Regexp
	repl  string
	whole bool
}

func t(cmds []string, code, re, repl string) term {
	return term{cmds: cmds, code: code, re: regexp.MustCompile(re), repl: repl}
}

// whole is a term that replaces the whole message.
func whole(cmds []string, code, re, msg string) term {
	return term{cmds: cmds, code: code, re: regexp.MustCompile(re), repl: msg, whole: true}
}

var (
	anyCmd      []string
	inputCmd    = []string{"session input"}
	startCmd    = []string{"session start"}
	handoffCmd  = []string{"session handoff"}
	profileCmds = []string{"profile add", "profile update"}
	answerCmd   = []string{"session answer"}
	codexCmds   = []string{"codex sessions", "codex continue", "codex archive", "codex"}
	claudeCmds  = []string{"claude sessions", "claude show", "claude continue"}
)

// terms are applied in order. Each names the exact phrase an API or node
// error uses (coordinator/api, agent/supervisor, agent/worktree,
// agent/transcript, agent/codexsup, shared/sessions/cliruntime).
var terms = []term{
	// Credentials.
	whole([]string{"login"}, "unauthenticated", `.`, "the coordinator does not know the token given with --token (mistyped, or revoked); check it, or ask an admin for one (olivares principal create, or olivares-coordinator principal create)"),
	whole(codexCmds, "unauthenticated", `.`, "the token is missing or unknown to the coordinator; pass a valid --token, or log in again with olivares login --url URL --token T --tenant T"),
	whole(anyCmd, "unauthenticated", `.`, "the saved token is missing or unknown to the coordinator; log in again with olivares login --url URL --token T --tenant T"),
	whole(anyCmd, "tenant_required", `.`, "the saved login names no valid tenant; log in again with olivares login ... --tenant T"),

	// Input: the tool takes one field, and each is a flag.
	whole(inputCmd, "wrong_input_field", `takes "line" or "message"`, `this session runs Claude Code: use --message TEXT (or --line with one raw stream-json object), not --text`),
	whole(inputCmd, "wrong_input_field", `takes "text"`, `this session's tool takes plain text: use --text TEXT`),
	t(anyCmd, "", `cliruntime: (?:invalid input|wrong input field for this driver): `, ""),
	t(inputCmd, "", `"(text|line|message)"`, "--$1"),

	// Launch.
	t(anyCmd, "", `worktree_from needs worktree:\s*true`, "--worktree-from needs --worktree"),
	t(anyCmd, "", `\bworktree_from\b`, "--worktree-from"),
	t(anyCmd, "", `\bworktree:\s*true\b`, "--worktree"),
	t(anyCmd, "", `a workspace_ref at`, "a --workspace at"),
	t(startCmd, "", `\bworkspace_ref\b`, "--workspace"),
	t(anyCmd, "", `\bprovider_profile_ref\b`, "--profile"),
	// A handoff runs the setup command with no way to skip it.
	t(handoffCmd, "", `\s*\(or launch with no_setup to skip it once\)`, ""),
	t(anyCmd, "", `launch with no_setup`, "start with --no-setup"),
	t(anyCmd, "", `\bno_setup\b`, "--no-setup"),
	t(startCmd, "", `^isolation "`, `--isolation "`),
	t(startCmd, "", `^grant kind `, "--grant kind "),
	t(startCmd, "", `a grant needs env:`, "a --grant needs ENV:"),
	t(startCmd, "", `^grant environment name `, "--grant ENV "),
	t(anyCmd, "", `grant it as_file`, "grant it as a file (--grant KIND:SECRET_REF:ENV:file)"),
	t(anyCmd, "", `a grant as_file`, "a --grant KIND:SECRET_REF:ENV:file"),

	// Lifecycle: what to do next is a command.
	t(anyCmd, "", `^run (\S+) (waits for a person's approval.*); approve it first$`, "run $1 $2; approve it first: olivares session approve $1"),
	t(anyCmd, "", `^run (\S+) (is not live .*); resume it first$`, "run $1 $2; resume it first: olivares session resume $1"),
	t(anyCmd, "", `^run (\S+) is live(.*); stop it (before \w+)$`, "run $1 is live$2; stop it $3: olivares session stop $1"),
	t(anyCmd, "", `^run (\S+) (is live and bound to thread \S+); stop it first$`, "run $1 $2; stop it first: olivares session stop $1"),

	// Release.
	t(anyCmd, "", `\bdiscard_worktree(?::\s*true)?`, "--discard-worktree"),

	// Profiles.
	t(anyCmd, "", `denied_tools needs engine_hooks`, "--deny-tool needs --engine-hooks"),
	t(anyCmd, "", `\bengine_hooks\b`, "--engine-hooks"),
	t(anyCmd, "", `\bdenied_tools\b`, "--deny-tool"),
	t(profileCmds, "", `^denied tool `, "--deny-tool "),
	t(profileCmds, "", `^allowed workspace `, "--allow-workspace "),
	t(profileCmds, "", `^tool "`, `--tool "`),
	t(profileCmds, "", `^profile name `, "--name "),
	t(profileCmds, "", `^profile home `, "--home "),
	t(profileCmds, "", `give the profile a home`, "give the profile a --home"),
	t(profileCmds, "", `^environment name `, "--env name "),
	// The approval policy (R-REQ-10..12).
	t(profileCmds, "bad_policy", `^approvals "`, `--approvals "`),
	t(profileCmds, "bad_policy", `^approval rule (\d+)`, "--approval-rule $1"),
	t(profileCmds, "bad_policy", `^(\d+) approval rules`, "$1 --approval-rule flags"),
	t(profileCmds, "bad_policy", `set approvals to allow instead`, "use --approvals allow instead"),
	t(profileCmds, "bad_policy", `^ask_timeout "`, `--ask-timeout "`),
	t(profileCmds, "bad_policy", `^stall_after "`, `--stall-after "`),
	// Isolation (R-TR-7).
	t(profileCmds, "bad_policy", `^network "none" needs isolation sandbox or container`, `--network none needs --isolation sandbox`),
	t(profileCmds, "bad_policy", `^(isolation|network) "`, `--$1 "`),
	// The on_limit plan (R-ONL-1): a step is an --on-limit value.
	t(profileCmds, "", `^on_limit step `, "--on-limit "),
	t(profileCmds, "", `^on_limit has `, "--on-limit is given "),
	t(profileCmds, "", `^on_limit: `, "--on-limit: "),
	t(startCmd, "isolation_below_profile", `launch with that isolation, or leave it unset`, "start with that --isolation, or leave --isolation out"),

	// Answers to a tool's requests (R-REQ-2).
	t(answerCmd, "bad_answer", `an allow takes no text; give text with answer or deny`, "an allow takes no --text; give --text with --deny or to answer a question"),
	t(answerCmd, "bad_answer", `give the answer as text, or pick an option`, "give the answer with --text, or pick an option with --option"),
	t(answerCmd, "bad_answer", `^the text is over`, "--text is over"),

	// Workspaces.
	t(anyCmd, "", `\bmax_read_bytes\b`, "--max-read-bytes"),
	t([]string{"workspace add"}, "", `^dlp "`, `--dlp "`),
	t([]string{"workspace add"}, "", `^allowed sub-path `, "--allow-subpath "),
	t([]string{"workspace add"}, "", `^workspace name `, "--name "),
	t([]string{"workspace add"}, "", `^workspace path "`, `--path "`),
	t([]string{"agent workspace approve-setup", "agent workspace approve-project-config"}, "", `^sha256 must be`, "--sha256 must be"),
	t([]string{"agent workspace setup"}, "", `^command is required`, "--command is required"),

	// People and tokens.
	t([]string{"credential create"}, "", `^credential kind "`, `--kind "`),
	t([]string{"principal create"}, "", `^(kind|role) "`, `--$1 "`),
	t([]string{"principal create"}, "", `^give the principal a name`, "give --name"),
	t([]string{"credential create"}, "", `^a label is`, "--label is"),

	// Marks.
	t([]string{"session snooze"}, "", `^until `, "--until "),
	t([]string{"session rename"}, "", `^name is required`, "--name is required"),

	// Vault.
	t([]string{"vault add"}, "", `^the value is over`, "the value in --value-file is over"),
	t([]string{"vault add"}, "", `^value is required`, "--value-file is required"),

	// Query parameters of the list commands.
	t([]string{"session list", "audit list", "codex sessions"}, "", `^limit must be`, "--limit must be"),
	t([]string{"session list"}, "", `^offset must be a non-negative integer, and not combined with pagination=cursor`, "--offset must be a non-negative integer"),
	t([]string{"session list"}, "", `^state "`, `--state "`),
	t([]string{"audit list"}, "", `^since "`, `--since "`),
	t([]string{"session attach"}, "", `^from must be`, "--from must be"),
	t([]string{"session diff"}, "", `the path query parameter is required`, "--file is required"),
	t([]string{"session messages"}, "", `^(role|q|at|order|limit|cursor|id): `, "--$1: "),
	t([]string{"session messages"}, "", `^cursor and id are`, "--cursor and --id are"),

	// The Codex catalog.
	t(codexCmds, "", `a cursor continues one host's scan; give that host with host=`, "--cursor continues one host's scan; give that host with --host"),
	t(codexCmds, "", `^search must be`, "--search must be"),
	t(codexCmds, "bad_cursor", `start again without it`, "start again without --cursor"),
	t(codexCmds, "", `archive needs (?:\{"confirmNoOtherRunner": true\}|confirmNoOtherRunner: true)`, "archive needs --confirm-no-other-runner"),

	// The Claude Code catalog (agent/claudesup).
	t(claudeCmds, "", `a cursor continues one host's list; give that host with host=`, "--cursor continues one host's list; give that host with --host"),
	t(claudeCmds, "", `^(search|limit) must be`, "--$1 must be"),
	t(claudeCmds, "session_leased", `^run (\S+) already continues conversation (\S+); open that run \(resume it when it has ended\)$`,
		"run $1 already continues conversation $2; attach it with olivares session attach $1 (olivares session resume $1 once it has ended)"),
	t(claudeCmds, "session_running", `end it there, then continue$`, "end it there, then run olivares claude continue again"),
}

// flagTerms rewrites an API message of code for cmd.
func flagTerms(cmd, code, msg string) string {
	for _, tm := range terms {
		if tm.cmds != nil && !slices.Contains(tm.cmds, cmd) {
			continue
		}
		if tm.code != "" && tm.code != code {
			continue
		}
		switch {
		case !tm.re.MatchString(msg):
		case tm.whole:
			return tm.repl
		default:
			msg = tm.re.ReplaceAllString(msg, tm.repl)
		}
	}
	return msg
}
