package main

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-REQ-2: `session requests` shows what a pending request asks and how to
// answer it; `session answer` sends the decision and option each flag
// means, and passes the server's refusal through.
func TestSessionRequestsAndAnswer(t *testing.T) {
	pending := apitypes.RunRequest{ID: "req_0123456789abcdef", Kind: "command", Tool: "Bash", Title: "Run make",
		State: apitypes.RequestPending, Detail: apitypes.RequestDetail{Command: "make", Cwd: "/w"},
		Options: []apitypes.RequestOption{{ID: "allow_once", Label: "Allow once", Decision: "allow"},
			{ID: "allow_session", Label: "Allow for this session", Decision: "allow", Session: true},
			{ID: "cancel", Label: "Deny and stop the turn", Decision: "deny"}}}
	question := apitypes.RunRequest{ID: "req_1111111111111111", Kind: "question", Title: "Colour", State: apitypes.RequestPending,
		Detail:  apitypes.RequestDetail{Question: "Which colour?", Text: true},
		Options: []apitypes.RequestOption{{ID: "choice_1", Label: "red", Decision: "answer"}, {ID: "decline", Label: "Do not answer", Decision: "deny"}}}
	var bodies []string
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "GET /v1/m/sessions/runs/run_1/requests":
			writeJSON(w, 200, apitypes.RequestList{Items: []apitypes.RunRequest{pending, question}})
		case "POST /v1/m/sessions/runs/run_1/requests/req_0123456789abcdef", "POST /v1/m/sessions/runs/run_1/requests/req_1111111111111111":
			b, _ := io.ReadAll(r.Body)
			bodies = append(bodies, string(b))
			if strings.Contains(string(b), `"text":"late"`) {
				writeErr(w, 409, "request_settled", "request req_0123456789abcdef was already answered by prn_bob (allow)")
				return
			}
			settled := pending
			settled.State, settled.Decision, settled.OptionID, settled.By = apitypes.RequestSettled, "allow", "allow_once", "prn_me"
			writeJSON(w, 200, settled)
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	})
	out, stderr, code := cli(t, "session", "requests", "run_1")
	for _, want := range []string{"req_0123456789abcdef", "command: make", "in:      /w",
		"olivares session answer run_1 req_0123456789abcdef --deny", "olivares session answer run_1 req_1111111111111111 --text"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("session requests: exit %d, out %q (stderr %q), want %q", code, out, stderr, want)
		}
	}
	for _, tc := range []struct {
		args []string
		body string
	}{
		{[]string{"req_0123456789abcdef"}, `{"decision":"allow"}`},
		{[]string{"req_0123456789abcdef", "--always"}, `{"decision":"allow","option_id":"allow_session"}`},
		{[]string{"req_0123456789abcdef", "--deny", "--text", "not now"}, `{"decision":"deny","text":"not now"}`},
		{[]string{"req_0123456789abcdef", "--option", "cancel"}, `{"decision":"deny","option_id":"cancel"}`},
		{[]string{"req_1111111111111111", "--text", "blue"}, `{"decision":"answer","text":"blue"}`},
	} {
		bodies = nil
		args := append([]string{"session", "answer", "run_1"}, tc.args...)
		if _, stderr, code := cli(t, args...); code != 0 || len(bodies) != 1 || bodies[0] != tc.body {
			t.Errorf("%q: exit %d stderr %q bodies %q, want %s", args, code, stderr, bodies, tc.body)
		}
	}
	if _, stderr, code := cli(t, "session", "answer", "run_1", "req_0123456789abcdef", "--deny", "--text", "late"); code == 0 || !strings.Contains(stderr, "prn_bob") {
		t.Errorf("a late answer: exit %d stderr %q, want the winner named", code, stderr)
	}
	if _, stderr, code := cli(t, "session", "answer", "run_1", "req_0123456789abcdef", "--option", "nope"); code != 2 || !strings.Contains(stderr, "no option") {
		t.Errorf("an unknown option: exit %d stderr %q, want a usage error", code, stderr)
	}
	if _, stderr, code := cli(t, "session", "answer", "run_1", "req_ffffffffffffffff"); code != 4 || !strings.Contains(stderr, "session requests run_1") {
		t.Errorf("an unknown request: exit %d stderr %q, want 4 and how to list them", code, stderr)
	}
	for _, args := range [][]string{
		{"session", "answer", "run_1"},
		{"session", "answer", "run_1", "req_0123456789abcdef", "extra"},
		{"session", "answer", "run_1", "req_0123456789abcdef", "--deny", "--always"},
		{"session", "answer", "run_1", "req_0123456789abcdef", "--always", "--option", "allow_once"},
		{"session", "answer", "run_1", "req_0123456789abcdef", "--deny", "--option", "cancel"},
		{"session", "requests"},
		{"session", "requests", "run_1", "--deny"},
	} {
		bodies = nil
		if _, stderr, code := cli(t, args...); code != 2 || len(bodies) != 0 {
			t.Errorf("%q: exit %d stderr %q, %d answers sent, want a usage error and none", args, code, stderr, len(bodies))
		}
	}
	if out, _, code := cli(t, "session", "requests", "run_1", "--json"); code != 0 || !strings.Contains(out, `"id": "req_0123456789abcdef"`) {
		t.Errorf("session requests --json: exit %d, %q", code, out)
	}
}

// R-REQ-10..12: the profile's approval flags send the policy, in order;
// --approval-rule= alone removes the rules; a malformed rule is a usage
// error before any call.
func TestProfileApprovalFlags(t *testing.T) {
	var creates []apitypes.ProfileCreate
	var patches []map[string]any
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		switch r.Method + " " + r.URL.Path {
		case "GET /v1/nodes":
			writeJSON(w, 200, apitypes.NodeList{Items: []apitypes.Node{{ID: "n1", Hostname: "box"}}})
		case "GET /v1/m/sessions/profiles":
			writeJSON(w, 200, apitypes.ProfileList{Items: []apitypes.Profile{{Ref: "prof_1", Name: "work", NodeID: "n1", Tool: "claude"}}})
		case "POST /v1/m/sessions/profiles":
			var c apitypes.ProfileCreate
			json.Unmarshal(raw, &c)
			creates = append(creates, c)
			writeJSON(w, 201, apitypes.Profile{Ref: "prof_2", Name: c.Name, Tool: c.Tool, Approvals: c.Approvals, ApprovalRules: c.ApprovalRules, AskTimeout: "10m0s"})
		case "PATCH /v1/m/sessions/profiles/prof_1":
			var m map[string]any
			json.Unmarshal(raw, &m)
			patches = append(patches, m)
			writeJSON(w, 200, apitypes.Profile{Ref: "prof_1", Name: "work", Tool: "claude", Approvals: "ask", AskTimeout: "10m0s"})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	})
	out, stderr, code := cli(t, "profile", "add", "--tool", "claude", "--name", "p", "--approvals", "ask",
		"--approval-rule", "allow:Bash:git status", "--approval-rule", "deny:command:rm *", "--approval-rule", "ask:*:", "--ask-timeout", "5m")
	if code != 0 || len(creates) != 1 {
		t.Fatalf("profile add: exit %d, stderr %q", code, stderr)
	}
	wantRules := []apitypes.ApprovalRule{{Action: "allow", Tool: "Bash", Pattern: "git status"}, {Action: "deny", Kind: "command", Pattern: "rm *"}, {Action: "ask"}}
	if c := creates[0]; c.Approvals != "ask" || c.AskTimeout != "5m" || !reflect.DeepEqual(c.ApprovalRules, wantRules) {
		t.Errorf("profile add sent %+v, want ask, 5m and %+v", c, wantRules)
	}
	for _, want := range []string{"allow:Bash:git status\n", "deny:command:rm *\n", "ask:*:\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("profile add printed %q, want %q", out, want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--approvals", "deny"}, `{"approvals":"deny"}`},
		{[]string{"--ask-timeout", "1h"}, `{"ask_timeout":"1h"}`},
		{[]string{"--approval-rule", "allow:file_change:docs/*"}, `{"approval_rules":[{"action":"allow","kind":"file_change","pattern":"docs/*"}]}`},
		{[]string{"--approval-rule="}, `{"approval_rules":[]}`},
	} {
		patches = nil
		args := append([]string{"profile", "update", "work"}, tc.args...)
		_, stderr, code := cli(t, args...)
		var want map[string]any
		json.Unmarshal([]byte(tc.want), &want)
		if code != 0 || len(patches) != 1 || !reflect.DeepEqual(patches[0], want) {
			t.Errorf("%q: exit %d stderr %q, sent %v, want %s", args, code, stderr, patches, tc.want)
		}
	}
	for _, rule := range []string{"allow", "permit:Bash:ls"} {
		creates = nil
		if _, stderr, code := cli(t, "profile", "add", "--tool", "claude", "--name", "p", "--approval-rule", rule); code != 2 || len(creates) != 0 {
			t.Errorf("--approval-rule %q: exit %d stderr %q, want a usage error", rule, code, stderr)
		}
	}
}

// R-REQ-3, R-LERR-1, R-LIST-8: session list marks a run that waits for an
// answer or whose tool failed; session show says how many requests wait,
// where to read them, the last error and the last message.
func TestRequestsAndLastErrorOnTheRun(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	waiting := apitypes.Run{RunRef: "run_w", State: "running", NodeID: "n1", PendingRequests: 2, LastMessage: "Shall I run the tests?"}
	failed := apitypes.Run{RunRef: "run_f", State: "idle", NodeID: "n1",
		LastError: &apitypes.LastError{Kind: "auth", Message: "401 Unauthorized", At: at}}
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/m/sessions/runs":
			writeJSON(w, 200, apitypes.RunList{Items: []apitypes.Run{waiting, failed, {RunRef: "run_ok", State: "idle", NodeID: "n1"}}})
		case "/v1/m/sessions/runs/run_w":
			writeJSON(w, 200, waiting)
		case "/v1/m/sessions/runs/run_f":
			writeJSON(w, 200, failed)
		default:
			writeJSON(w, 200, map[string]any{"items": []any{}})
		}
	})
	out, stderr, code := cli(t, "session", "list")
	if code != 0 {
		t.Fatalf("session list: exit %d, %s", code, stderr)
	}
	for ref, want := range map[string]string{"run_w": "(2 waiting for an answer)", "run_f": "(error: auth)", "run_ok": ""} {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, ref+" ") {
				line = l
			}
		}
		if want == "" && strings.Contains(line, "(") || want != "" && !strings.Contains(line, want) {
			t.Errorf("session list, %s: %q, want %q", ref, line, want)
		}
	}
	for ref, want := range map[string]string{
		"run_w": "2 waiting for an answer (olivares session requests run_w)\nlast message   Shall I run the tests?",
		"run_f": "auth: 401 Unauthorized (2026-01-02T03:04:05Z)",
	} {
		if out, _, code := cli(t, "session", "show", ref); code != 0 || !strings.Contains(out, want) {
			t.Errorf("session show %s: exit %d\n%s\nwant %q", ref, code, out, want)
		}
	}
}
