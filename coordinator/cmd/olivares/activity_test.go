package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-CLI-1: with context_percent null the CLI shows the tokens and an
// "unknown window" notice; with it, the bar and both figures.
func TestSessionActivityContextMeter(t *testing.T) {
	tokens, window, pct := int64(34000), int64(1000000), 3.4
	model := "claude-opus-5-5"
	known := true
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method+" "+r.URL.Path != "GET /v1/m/sessions/runs/run_1/activity" {
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			return
		}
		a := apitypes.Activity{Agents: []apitypes.ActivityAgent{{ID: "a1", Type: "Explore", State: "running", Description: "find the tests\nand more"}},
			Tasks: []apitypes.ActivityTask{}, Files: []apitypes.FileChange{{Path: "notes.txt", Added: 2, Created: true}},
			Todos:  []apitypes.Todo{{Content: "read", Status: "completed"}, {Content: "write", Status: "in_progress"}},
			Skills: []apitypes.Skill{}, MCPServers: []apitypes.MCPServer{}, Model: &model, ContextTokens: &tokens, Transcript: apitypes.TranscriptRead}
		if known {
			a.ContextWindow, a.ContextPercent = &window, &pct
		}
		writeJSON(w, 200, a)
	})
	out, stderr, code := cli(t, "session", "activity", "run_1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"3.4%", "34000 / 1000000 tokens", "AGENTS (1)", "a1", "find the tests", "[x] read", "[>] write", "notes.txt", "new"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "and more") || strings.Contains(out, "unknown window") {
		t.Errorf("output:\n%s", out)
	}
	known = false
	out, _, _ = cli(t, "session", "activity", "run_1")
	if !strings.Contains(out, "34000 tokens (unknown window") || strings.Contains(out, "%") {
		t.Errorf("null context_percent:\n%s", out)
	}
}

// session messages sends each flag as its query parameter, follows next
// with --all, and maps the node's refusals to exit codes (R-CLI-2).
func TestSessionMessages(t *testing.T) {
	var queries []string
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/m/sessions/runs/run_1/messages" {
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			return
		}
		q := r.URL.Query()
		queries = append(queries, r.URL.RawQuery)
		switch {
		case q.Get("role") == "bot":
			writeErr(w, 400, "invalid_parameter", "role: want user or all")
		case q.Get("id") == "7":
			writeJSON(w, 200, apitypes.MessageRead{ID: 7, Role: "user", FirstLine: "fix it", Text: "fix it\nplease", LaterSame: 2, Total: 9, Transcript: apitypes.TranscriptRead})
		case q.Get("id") != "":
			writeErr(w, 404, "unknown_message", "no message 8")
		case q.Get("cursor") == "":
			next := 3
			writeJSON(w, 200, apitypes.MessagesPage{Items: []apitypes.MessageItem{{ID: 1, Role: "user", FirstLine: "one"}, {ID: 2, Role: "user", FirstLine: "two"}}, Total: 3, Next: &next, Transcript: apitypes.TranscriptRead})
		default:
			writeJSON(w, 200, apitypes.MessagesPage{Items: []apitypes.MessageItem{{ID: 3, Role: "user", FirstLine: "three"}}, Total: 3, Transcript: apitypes.TranscriptRead})
		}
	})
	out, stderr, code := cli(t, "session", "messages", "run_1", "--q", "fix", "--limit", "2")
	if code != 0 || !strings.Contains(out, "two") || strings.Contains(out, "three") || !strings.Contains(out, "--cursor 3") {
		t.Fatalf("one page: exit %d\n%s%s", code, out, stderr)
	}
	if queries[0] != "limit=2&q=fix" {
		t.Errorf("query %q", queries[0])
	}
	out, _, code = cli(t, "session", "messages", "run_1", "--all")
	if code != 0 || !strings.Contains(out, "three") || !strings.Contains(out, "3 shown of 3") {
		t.Errorf("--all: exit %d\n%s", code, out)
	}
	out, _, _ = cli(t, "session", "messages", "run_1", "--id", "7")
	if !strings.Contains(out, "fix it\nplease") || !strings.Contains(out, "2 later user message(s)") {
		t.Errorf("--id:\n%s", out)
	}
	if _, _, code := cli(t, "session", "messages", "run_1", "--id", "8"); code != 4 {
		t.Errorf("unknown id: exit %d, want 4", code)
	}
	if _, stderr, code := cli(t, "session", "messages", "run_1", "--role", "bot"); code != 1 || !strings.Contains(stderr, "invalid_parameter") {
		t.Errorf("bad role: exit %d, %s", code, stderr)
	}
}
