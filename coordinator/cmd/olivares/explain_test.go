package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/shared/apiclient"
)

// Every API and node message that names a body field or a query parameter
// reads, at the CLI, with the command's flag instead (issue 17), and no
// message a person reads carries a rule ID. The messages are the ones the
// coordinator and the agent send today, copied from their code.
func TestExplainFlagTerms(t *testing.T) {
	tests := []struct {
		cmd, code, msg string
		want           string
	}{
		// Release (agent/worktree).
		{"session cleanup", "unmerged_work", "branch olivares/run_1 has 2 commits the workspace's current branch does not contain; merge olivares/run_1, or repeat with discard_worktree:true to delete them",
			"branch olivares/run_1 has 2 commits the workspace's current branch does not contain; merge olivares/run_1, or repeat with --discard-worktree to delete them"},
		{"session cleanup", "worktree_unreachable", "worktree /w cannot be reached from this node (gone); restore it, or repeat with discard_worktree:true to release the run and leave the worktree in place",
			"worktree /w cannot be reached from this node (gone); restore it, or repeat with --discard-worktree to release the run and leave the worktree in place"},
		// Launch (coordinator/api, agent/supervisor, agent/worktree).
		{"session start", "setup_not_approved", `setup command "npm ci" of workspace ws_1 is not approved; review it and run olivares agent workspace approve-setup ws_1 --sha256 abc (or launch with no_setup to skip it once)`,
			`setup command "npm ci" of workspace ws_1 is not approved; review it and run olivares agent workspace approve-setup ws_1 --sha256 abc (or start with --no-setup to skip it once)`},
		{"session handoff", "setup_not_approved", `setup command "npm ci" of workspace ws_1 is not approved; review it and run olivares agent workspace approve-setup ws_1 --sha256 abc (or launch with no_setup to skip it once)`,
			`setup command "npm ci" of workspace ws_1 is not approved; review it and run olivares agent workspace approve-setup ws_1 --sha256 abc`},
		{"session start", "worktree_from_without_worktree", "worktree_from needs worktree:true (R-WTF-3)", "--worktree-from needs --worktree"},
		{"session start", "worktree_needs_workspace", "a worktree launch needs a workspace_ref at a git repository's root (R-WT-3)", "a worktree launch needs a --workspace at a git repository's root"},
		{"session start", "worktree_from_unknown", `worktree_from "dev": the repository has no local branch of that name (refs/heads/dev); create it or give a commit id`,
			`--worktree-from "dev": the repository has no local branch of that name (refs/heads/dev); create it or give a commit id`},
		{"session start", "profile_required", "provider_profile_ref is required: the profile (account and tool) to run", "--profile is required: the profile (account and tool) to run"},
		{"session start", "bad_isolation", `isolation "vm": use native, container or sandbox`, `--isolation "vm": use native, container or sandbox`},
		{"session start", "isolation_below_profile", `profile claude runs its sessions with isolation "sandbox"; launch with that isolation, or leave it unset`,
			`profile claude runs its sessions with isolation "sandbox"; start with that --isolation, or leave --isolation out`},
		{"profile add", "bad_policy", `network "none" needs isolation sandbox or container: a native run shares the node's network`,
			`--network none needs --isolation sandbox: a native run shares the node's network`},
		{"profile update", "bad_policy", `isolation "vm": use native, sandbox or container`, `--isolation "vm": use native, sandbox or container`},
		// R-ONL-1: the on_limit plan is --on-limit.
		{"profile add", "on_limit_profile_unknown", `on_limit step "move:b": there is no profile "b" in this tenant`, `--on-limit "move:b": there is no profile "b" in this tenant`},
		{"profile update", "bad_on_limit", `on_limit: continue_at_reset waits for the reset, so it can only be the last step`, `--on-limit: continue_at_reset waits for the reset, so it can only be the last step`},
		{"session start", "bad_grant", `grant kind "x": use vault_secret, repository_credential`, `--grant kind "x": use vault_secret, repository_credential`},
		{"session start", "bad_grant", "a grant needs env: the variable the tool reads it from", "a --grant needs ENV: the variable the tool reads it from"},
		{"session start", "bad_grant", `grant environment name "1X": use letters, digits and '_'`, `--grant ENV "1X": use letters, digits and '_'`},
		{"session start", "bad_grant", "the value granted as TOK holds a NUL byte; grant it as_file", "the value granted as TOK holds a NUL byte; grant it as a file (--grant KIND:SECRET_REF:ENV:file)"},
		{"session start", "grant_files_unsupported", "this agent has no grants directory for a grant as_file", "this agent has no grants directory for a --grant KIND:SECRET_REF:ENV:file"},
		{"session move", "profile_required", "provider_profile_ref is required: the profile to move the run to", "--profile is required: the profile to move the run to"},
		{"session move", "run_not_stopped", "run run_1 is running; stop it before moving it (R-MOVE-3)", "run run_1 is running; stop it before moving it"},
		// Input (coordinator/api, agent/agentd, shared/sessions/cliruntime).
		{"session input", "wrong_input_field", `cliruntime: wrong input field for this driver: "text"; this driver takes "line" or "message"`,
			"this session runs Claude Code: use --message TEXT (or --line with one raw stream-json object), not --text"},
		{"session input", "wrong_input_field", `cliruntime: wrong input field for this driver: "message"; this driver takes "text"`,
			"this session's tool takes plain text: use --text TEXT"},
		{"session input", "invalid_input", `cliruntime: invalid input: "text" is empty`, "--text is empty"},
		{"session input", "invalid_input", `"text" is empty`, "--text is empty"},
		{"session input", "invalid_input", `cliruntime: invalid input: "line" holds a line break`, "--line holds a line break"},
		{"session input", "invalid_input", `give exactly one of "line" or "message" (Claude Code) or "text" (Codex, Grok)`,
			"give exactly one of --line or --message (Claude Code) or --text (Codex, Grok)"},
		// Profiles (agent/supervisor).
		{"profile update", "bad_policy", "engine_hooks applies to Claude Code profiles only, not codex", "--engine-hooks applies to Claude Code profiles only, not codex"},
		{"profile add", "bad_policy", "denied_tools needs engine_hooks: only the engine's hook can refuse a tool", "--deny-tool needs --engine-hooks: only the engine's hook can refuse a tool"},
		{"profile add", "bad_policy", `denied tool "": give a tool name such as Bash, or *`, `--deny-tool "": give a tool name such as Bash, or *`},
		{"profile update", "bad_policy", `allowed workspace "w" is not a workspace ref`, `--allow-workspace "w" is not a workspace ref`},
		{"profile add", "unknown_tool", `tool "vim": use claude, codex, grok, gemini or opencode`, `--tool "vim": use claude, codex, grok, gemini or opencode`},
		// The approval policy (agent/registry) and answers (agent/supervisor).
		{"profile add", "bad_policy", `approvals "sometimes": use ask, deny or allow`, `--approvals "sometimes": use ask, deny or allow`},
		{"profile update", "bad_policy", "approval rule 2 allows everything; set approvals to allow instead, so that it shows", "--approval-rule 2 allows everything; use --approvals allow instead, so that it shows"},
		{"profile update", "bad_policy", `approval rule 1: kind "cmd"; use command, file_change, permission, question or elicitation`, `--approval-rule 1: kind "cmd"; use command, file_change, permission, question or elicitation`},
		{"profile update", "bad_policy", "65 approval rules: at most 64", "65 --approval-rule flags: at most 64"},
		{"profile add", "bad_policy", `ask_timeout "1y": give a duration from 1s to 24h, like 10m`, `--ask-timeout "1y": give a duration from 1s to 24h, like 10m`},
		{"session answer", "bad_answer", "request req_1: an allow takes no text; give text with answer or deny", "request req_1: an allow takes no --text; give --text with --deny or to answer a question"},
		{"session answer", "bad_answer", "request req_1 asks a question: give the answer as text, or pick an option", "request req_1 asks a question: give the answer with --text, or pick an option with --option"},
		{"session answer", "bad_answer", "the text is over 16384 bytes", "--text is over 16384 bytes"},
		{"profile add", "bad_name", `profile name "a b": use 1-64 letters, digits, '.', '_' or '-'`, `--name "a b": use 1-64 letters, digits, '.', '_' or '-'`},
		{"profile add", "home_required", "this agent has no profiles directory; give the profile a home", "this agent has no profiles directory; give the profile a --home"},
		{"profile add", "bad_home", `profile home "rel" must be an absolute path on the node`, `--home "rel" must be an absolute path on the node`},
		{"profile add", "bad_env", `environment name "A-B": use letters, digits and '_'`, `--env name "A-B": use letters, digits and '_'`},
		// Workspaces (agent/supervisor, coordinator/api).
		{"workspace add", "bad_max_read_bytes", "max_read_bytes -1: give a positive byte count, or none for the default (1 MiB)", "--max-read-bytes -1: give a positive byte count, or none for the default (1 MiB)"},
		{"workspace add", "bad_dlp", `dlp "maybe": use allow or deny`, `--dlp "maybe": use allow or deny`},
		{"workspace add", "bad_subpath", `allowed sub-path "../x": give a clean relative path inside the workspace, like src or docs/api`, `--allow-subpath "../x": give a clean relative path inside the workspace, like src or docs/api`},
		{"workspace add", "bad_name", `workspace name "a b": use 1-64 letters, digits, '.', '_' or '-'`, `--name "a b": use 1-64 letters, digits, '.', '_' or '-'`},
		{"workspace add", "bad_path", `workspace path "rel" must be an absolute path on the node`, `--path "rel" must be an absolute path on the node`},
		{"agent workspace approve-setup", "bad_sha256", "sha256 must be the 64 lower-case hex digits of the hash you reviewed", "--sha256 must be the 64 lower-case hex digits of the hash you reviewed"},
		// Marks and vault (coordinator/api).
		{"session snooze", "bad_until", `until "soon" is not an RFC 3339 instant (e.g. 2026-12-03T18:00:00Z)`, `--until "soon" is not an RFC 3339 instant (e.g. 2026-12-03T18:00:00Z)`},
		{"session snooze", "bad_until", "until 2020-01-01T00:00:00Z is not in the future", "--until 2020-01-01T00:00:00Z is not in the future"},
		{"vault add", "bad_value", "the value is over 65536 bytes", "the value in --value-file is over 65536 bytes"},
		// Query parameters (coordinator/api, agent/transcript, agent/codexsup).
		{"session list", "bad_query", "limit must be an integer from 1 to 200 (R-LIST-5)", "--limit must be an integer from 1 to 200"},
		{"session list", "bad_query", "offset must be a non-negative integer, and not combined with pagination=cursor", "--offset must be a non-negative integer"},
		{"session list", "bad_query", `state "gone": use one of released, running`, `--state "gone": use one of released, running`},
		{"audit list", "bad_query", "limit must be an integer from 1 to 500", "--limit must be an integer from 1 to 500"},
		{"audit list", "bad_query", `since "yesterday" is not an RFC 3339 instant`, `--since "yesterday" is not an RFC 3339 instant`},
		{"session attach", "bad_query", "from must be a non-negative integer (the seq to start at)", "--from must be a non-negative integer (the seq to start at)"},
		{"session diff", "path_required", "the path query parameter is required: the file to compare", "--file is required: the file to compare"},
		{"session messages", "invalid_parameter", `role: "bot" is neither user nor all (R-MSG-16)`, `--role: "bot" is neither user nor all`},
		{"session messages", "invalid_parameter", "q: 300 bytes, at most 256 (R-MSG-4)", "--q: 300 bytes, at most 256"},
		{"session messages", "invalid_parameter", `at: "today" is not an RFC 3339 instant (R-MSG-5)`, `--at: "today" is not an RFC 3339 instant`},
		{"session messages", "invalid_parameter", `order: "up" is neither asc nor desc (R-MSG-16)`, `--order: "up" is neither asc nor desc`},
		{"session messages", "invalid_parameter", `limit: "500" is not an integer from 1 to 200 (R-MSG-6)`, `--limit: "500" is not an integer from 1 to 200`},
		{"session messages", "invalid_parameter", "cursor and id are positive integers (R-MSG-16)", "--cursor and --id are positive integers"},
		{"session messages", "invalid_parameter", "id: -1 is not a positive integer (R-MSG-16)", "--id: -1 is not a positive integer"},
		{"codex sessions", "bad_limit", "limit must be an integer from 1 to 100 (rows per host)", "--limit must be an integer from 1 to 100 (rows per host)"},
		{"codex sessions", "cursor_needs_host", "a cursor continues one host's scan; give that host with host=", "--cursor continues one host's scan; give that host with --host"},
		{"codex sessions", "bad_search", "search must be UTF-8 text of at most 1024 bytes", "--search must be UTF-8 text of at most 1024 bytes"},
		{"codex sessions", "bad_cursor", "the cursor is not one this host issued; start again without it", "the cursor is not one this host issued; start again without --cursor"},
		{"codex archive", "confirmation_required", `archive needs {"confirmNoOtherRunner": true}: confirm that no other Codex client runs this thread (R-CX-ARC-1)`,
			"archive needs --confirm-no-other-runner: confirm that no other Codex client runs this thread"},
		{"codex archive", "confirmation_required", "archive needs confirmNoOtherRunner: true: confirm that no other Codex client runs this thread",
			"archive needs --confirm-no-other-runner: confirm that no other Codex client runs this thread"},
		// Rule IDs alone.
		{"codex archive", "thread_active", "thread t is active; only an idle or stored thread can be archived (R-CX-ARC-3)", "thread t is active; only an idle or stored thread can be archived"},
		{"session activity", "transcript_unsafe", "x.jsonl: a symlink (Q-23: the file must be a regular, singly linked file inside the profile home, reached without symlinks)",
			"x.jsonl: a symlink (the file must be a regular, singly linked file inside the profile home, reached without symlinks)"},
		{"session handoff", "handoff_unsupported_tool", "a grok session cannot be handed off: handoff reads Claude Code, Codex, Gemini CLI and OpenCode conversations (R-HOF-1)",
			"a grok session cannot be handed off: handoff reads Claude Code, Codex, Gemini CLI and OpenCode conversations"},
		{"session activity", "workflow", "workflow summaries of this request are over 100 bytes (R-WF-8)", "workflow summaries of this request are over 100 bytes"},
		{"session start", "x", "nothing here (R-ACT-1..9, R-WF-1..10) and (§3.17)", "nothing here and"},
		{"profile add", "bad_name", `profile name "R-DEV-1": use 1-64 letters`, `--name "R-DEV-1": use 1-64 letters`}, // docs:nocite: a profile name
		// Credentials.
		{"node list", "unauthenticated", "missing or unknown bearer token; pass Authorization: Bearer <token> (see olivares login)",
			"the saved token is missing or unknown to the coordinator; log in again with olivares login --url URL --token T --tenant T"},
		{"codex sessions", "unauthenticated", "missing or unknown bearer token; pass Authorization: Bearer <token> (see olivares login)",
			"the token is missing or unknown to the coordinator; pass a valid --token, or log in again with olivares login --url URL --token T --tenant T"},
		{"node list", "tenant_required", "the X-Olivares-Tenant header is missing or malformed; send the tenant id, e.g. X-Olivares-Tenant: default",
			"the saved login names no valid tenant; log in again with olivares login ... --tenant T"},
		// Other commands leave a message that names no field alone.
		{"session stop", "not_live", "run run_1 is not live (state=stopped); resume it first", "run run_1 is not live (state=stopped); resume it first: olivares session resume run_1"},
		{"session input", "pending_approval", "run run_1 waits for a person's approval and takes no input until then; approve it first",
			"run run_1 waits for a person's approval and takes no input until then; approve it first: olivares session approve run_1"},
		{"session resume", "pending_approval", "run run_1 waits for a person's approval; approve it first", "run run_1 waits for a person's approval; approve it first: olivares session approve run_1"},
		{"session cleanup", "run_live", "run run_1 is live (state=idle); stop it before cleanup", "run run_1 is live (state=idle); stop it before cleanup: olivares session stop run_1"},
		{"session resume", "run_live", "run run_1 is live; stop it before resuming", "run run_1 is live; stop it before resuming: olivares session stop run_1"},
		{"principal create", "bad_request", `role "boss": use viewer, operator or admin`, `--role "boss": use viewer, operator or admin`},
		{"credential create", "bad_request", `credential kind "x": use session or api_token`, `--kind "x": use session or api_token`},
	}
	for _, tt := range tests {
		t.Run(tt.cmd+"/"+tt.code, func(t *testing.T) {
			err := &apiclient.Error{Status: http.StatusBadRequest, Code: tt.code, Message: tt.msg}
			got := explainText(tt.cmd, fmt.Errorf("wrapped: %w", err))
			if want := "wrapped: " + tt.want + " (" + tt.code + ")"; got != want {
				t.Errorf("got  %q\nwant %q", got, want)
			}
			if ruleID.MatchString(got) && !strings.Contains(tt.msg, `"R-DEV-1"`) { // docs:nocite: a profile name
				t.Errorf("%q still holds a rule ID", got)
			}
			if told := explain(tt.cmd, err); told.Error() != tt.want+" ("+tt.code+")" || exitCode(told) != exitCode(err) {
				t.Errorf("explain: %q, exit %d; want the text and exit %d", told, exitCode(told), exitCode(err))
			}
		})
	}
}

// ruleID is what no message a person reads may hold.
var ruleID = regexp.MustCompile(`\b(?:R|AT)-[A-Z]+(?:-[A-Z]+)*-\d+|\b[QD]-\d+\b|§\d`)

// Neither the usage text nor any command's flag help quotes a rule ID.
func TestHelpHasNoRuleIDs(t *testing.T) {
	if m := ruleID.FindString(usage(table())); m != "" {
		t.Errorf("the usage text quotes %s", m)
	}
	for _, c := range table() {
		cmd := c.name
		out, _, _ := cli(t, append(strings.Fields(cmd), "--help")...)
		if m := ruleID.FindString(out); m != "" {
			t.Errorf("olivares %s --help quotes %s", cmd, m)
		}
	}
}

// Through the whole CLI: the API's answer is printed in flag terms, with
// the exit code of its status.
func TestAPIErrorsPrintedInFlagTerms(t *testing.T) {
	answers := map[string]struct {
		status      int
		code, msg   string
		wantStderr  string
		wantExit    int
		args        []string
		notInStderr string
	}{
		"/v1/m/sessions/runs/run_1/cleanup": {http.StatusConflict, "unmerged_work", "branch b has 1 commit the workspace's current branch does not contain; merge b, or repeat with discard_worktree:true to delete them",
			"or repeat with --discard-worktree to delete them (unmerged_work)", 5, []string{"session", "cleanup", "run_1"}, "discard_worktree"},
		"/v1/m/sessions/runs/run_1/input": {http.StatusBadRequest, "wrong_input_field", `cliruntime: wrong input field for this driver: "text"; this driver takes "line" or "message"`,
			"this session runs Claude Code: use --message TEXT", 1, []string{"session", "input", "run_1", "--text", "hi"}, `"text"`},
		"/v1/m/sessions/runs/run_1/messages": {http.StatusBadRequest, "invalid_parameter", `order: "up" is neither asc nor desc (R-MSG-16)`,
			`--order: "up" is neither asc nor desc (invalid_parameter)`, 1, []string{"session", "messages", "run_1", "--order", "up"}, "R-MSG"},
		"/v1/m/sessions/runs": {http.StatusConflict, "setup_not_approved", `setup command "make" of workspace ws_1 is not approved; review it and run olivares agent workspace approve-setup ws_1 --sha256 abc (or launch with no_setup to skip it once)`,
			"(or start with --no-setup to skip it once) (setup_not_approved)", 5, []string{"session", "start", "--profile", "prof_1", "--worktree"}, "no_setup"},
	}
	// The messages answer quotes a rule ID, as an older coordinator's did:
	// off the document on purpose, to show the CLI drops it.
	fakeAPIOffContract(t, func(w http.ResponseWriter, r *http.Request) {
		a, ok := answers[r.URL.Path]
		if !ok {
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			return
		}
		writeErr(w, a.status, a.code, a.msg)
	})
	for path, a := range answers {
		_, stderr, code := cli(t, a.args...)
		if code != a.wantExit || !strings.Contains(stderr, a.wantStderr) || strings.Contains(stderr, a.notInStderr) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q without %q", path, code, stderr, a.wantExit, a.wantStderr, a.notInStderr)
		}
	}
}
