package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// session list's filters go to the server as GET /runs query parameters
// (R-LIST-7), names resolved; --name is matched here.
func TestSessionListFilters(t *testing.T) {
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/m/sessions/runs":
			want := "driver=claude&node_id=n1&provider_profile_ref=prof_1&state=idle&workspace_ref=ws_1"
			if got := r.URL.RawQuery; got != want {
				t.Errorf("query %q, want %q", got, want)
			}
			writeJSON(w, 200, apitypes.RunList{Items: []apitypes.Run{
				{RunRef: "run_1", State: "idle", Name: "Fix the parser"}, {RunRef: "run_2", State: "idle", Name: "docs"}}})
		case "/v1/m/sessions/profiles":
			writeJSON(w, 200, apitypes.ProfileList{Items: []apitypes.Profile{{Ref: "prof_1", Name: "work"}}})
		case "/v1/m/sessions/workspaces":
			writeJSON(w, 200, apitypes.WorkspaceList{Items: []apitypes.Workspace{{Ref: "ws_1", Name: "repo"}}})
		case "/v1/nodes":
			writeJSON(w, 200, apitypes.NodeList{Items: []apitypes.Node{{ID: "n1", Hostname: "box"}, {ID: "n2", Hostname: "other"}}})
		default:
			t.Errorf("unexpected %s", r.URL)
		}
	})
	out, stderr, code := cli(t, "session", "list", "--profile", "work", "--workspace", "repo", "--node", "box", "--tool", "claude", "--state", "idle", "--name", "PARSER")
	if code != 0 || !strings.Contains(out, "run_1") || strings.Contains(out, "run_2") {
		t.Errorf("list: exit %d %s\n%s", code, stderr, out)
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("piped output is coloured: %q", out)
	}
}

// session input --file sends a file's text, or standard input's, in the
// field the session's tool takes.
func TestSessionInputFile(t *testing.T) {
	var bodies []map[string]any
	driver := "claude"
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "GET /v1/m/sessions/runs/run_1":
			writeJSON(w, 200, apitypes.Run{RunRef: "run_1", Driver: driver, State: "idle"})
		case "POST /v1/m/sessions/runs/run_1/input":
			raw, _ := io.ReadAll(r.Body)
			var m map[string]any
			json.Unmarshal(raw, &m)
			bodies = append(bodies, m)
			writeJSON(w, 202, apitypes.Accepted{Accepted: true})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	})
	file := filepath.Join(t.TempDir(), "prompt.md")
	os.WriteFile(file, []byte("line one\nline two\n"), 0o600)
	if _, stderr, code := cli(t, "session", "input", "run_1", "--file", file); code != 0 {
		t.Fatalf("input --file: exit %d %s", code, stderr)
	}
	driver = "codex"
	stdin = strings.NewReader("from stdin")
	t.Cleanup(func() { stdin = os.Stdin })
	if _, stderr, code := cli(t, "session", "input", "run_1", "--file", "-"); code != 0 {
		t.Fatalf("input --file -: exit %d %s", code, stderr)
	}
	want := []map[string]any{{"message": "line one\nline two\n"}, {"text": "from stdin"}}
	if len(bodies) != 2 || bodies[0]["message"] != want[0]["message"] || bodies[1]["text"] != want[1]["text"] {
		t.Errorf("bodies %v, want %v", bodies, want)
	}
	if _, _, code := cli(t, "session", "input", "run_1", "--file", filepath.Join(t.TempDir(), "none")); code != 1 {
		t.Errorf("input --file of a missing file: exit %d, want 1", code)
	}
}

// audit list --since takes a duration back from now.
func TestAuditSinceDuration(t *testing.T) {
	var since string
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		since = r.URL.Query().Get("since")
		writeJSON(w, 200, apitypes.AuditList{Items: []apitypes.AuditEntry{}})
	})
	before := time.Now().Add(-2 * time.Hour).Add(-time.Second)
	if _, stderr, code := cli(t, "audit", "list", "--since", "2h"); code != 0 {
		t.Fatalf("audit list --since 2h: exit %d %s", code, stderr)
	}
	at, err := time.Parse(time.RFC3339, since)
	if err != nil || at.Before(before) || at.After(time.Now().Add(-2*time.Hour).Add(time.Second)) {
		t.Errorf("since=%q, want about 2h ago", since)
	}
	cli(t, "audit", "list", "--since", "3d")
	if at, err := time.Parse(time.RFC3339, since); err != nil || time.Since(at) < 71*time.Hour {
		t.Errorf("since=%q for 3d", since)
	}
	cli(t, "audit", "list", "--since", "2026-01-02T03:04:05Z")
	if since != "2026-01-02T03:04:05Z" {
		t.Errorf("since=%q, want the instant as given", since)
	}
}

// usage sends --by, --from (a duration back from now) and --to as GET
// /usage's parameters and prints the groups, the total and the accounts
// (R-USE-7).
func TestUsageTable(t *testing.T) {
	var query string
	reset := time.Date(2026, 12, 2, 11, 16, 15, 0, time.UTC)
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/m/sessions/profiles" {
			writeJSON(w, 200, apitypes.ProfileList{Items: []apitypes.Profile{{Ref: "prof_2", Name: "team-codex"}}})
			return
		}
		if r.URL.Path != "/v1/m/sessions/usage" {
			t.Errorf("unexpected %s", r.URL)
		}
		query = r.URL.RawQuery
		cost := 0.0125
		writeJSON(w, 200, apitypes.UsageReport{GroupBy: "node",
			Groups: []apitypes.UsageGroup{{Key: "n1", UsageTotals: apitypes.UsageTotals{Turns: 2, InputTokens: 22, OutputTokens: 10, CacheReadTokens: 300, CostUSD: cost}},
				{Key: "n2", UsageTotals: apitypes.UsageTotals{Turns: 1, InputTokens: 234, OutputTokens: 56, CacheReadTokens: 1000, CostTurnsUnknown: 1}}},
			Total: apitypes.UsageTotals{Turns: 3, InputTokens: 256, OutputTokens: 66, CacheReadTokens: 1300, CostUSD: cost, CostTurnsUnknown: 1},
			Accounts: []apitypes.UsageAccount{{ProfileRef: "prof_2", Tool: "codex", At: reset.Add(-time.Hour),
				RateLimits: []apitypes.RateWindow{{Name: "primary", UsedPercent: 100, ResetsAt: &reset}},
				Limit:      &apitypes.Limit{Kind: "usage", ResetsAt: &reset, AccountRef: "prof_2"}}}})
	})
	out, stderr, code := cli(t, "usage", "--by", "node", "--from", "7d", "--to", "2026-12-31")
	if code != 0 {
		t.Fatalf("usage: exit %d %s", code, stderr)
	}
	q, _ := url.ParseQuery(query)
	from, err := time.Parse(time.RFC3339, q.Get("from"))
	if q.Get("group_by") != "node" || q.Get("to") != "2026-12-31" || err != nil || time.Since(from) < 167*time.Hour {
		t.Errorf("query %q, want group_by=node, from 7 days back, to as given", query)
	}
	for _, want := range []string{"NODE", "n1", "0.0125", "n2", "0.0000*", "total", "1300", "1 turns whose tool reports no cost",
		"team-codex (prof_2)", "primary", "100%", "usage until 2026-12-02T11:16:15Z"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// session continue-at-reset POSTs the message (none for the default) and
// prints when the run continues; --cancel DELETEs (R-CONT-1, R-CONT-7).
func TestSessionContinueAtReset(t *testing.T) {
	var calls []string
	at := time.Date(2026, 12, 3, 18, 0, 5, 0, time.UTC)
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		calls = append(calls, r.Method+" "+r.URL.Path+" "+string(raw))
		run := apitypes.Run{RunRef: "run_1", State: "stopped"}
		if r.Method == http.MethodPost {
			run.ScheduledContinueAt = &at
		}
		writeJSON(w, 200, run)
	})
	out, stderr, code := cli(t, "session", "continue-at-reset", "run_1", "--message", "go on")
	if code != 0 || !strings.Contains(out, "run_1 continues at 2026-12-03T18:00:05Z") {
		t.Errorf("continue-at-reset: exit %d %s\n%s", code, stderr, out)
	}
	cli(t, "session", "continue-at-reset", "run_1")
	out, _, code = cli(t, "session", "continue-at-reset", "run_1", "--cancel")
	if code != 0 || !strings.Contains(out, "nothing scheduled") {
		t.Errorf("--cancel: exit %d\n%s", code, out)
	}
	want := []string{
		`POST /v1/m/sessions/runs/run_1/continue-at-reset {"message":"go on"}`,
		`POST /v1/m/sessions/runs/run_1/continue-at-reset {}`,
		`DELETE /v1/m/sessions/runs/run_1/continue-at-reset `,
	}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
	if _, _, code := cli(t, "session", "continue-at-reset", "run_1", "--cancel", "--message", "x"); code != 2 {
		t.Errorf("--cancel --message: exit %d, want 2", code)
	}
}

// R-CLI-8, issue 32 finding 10: --until takes tomorrow, days and a day as well as a
// duration, and a word it does not take is the CLI's usage error, before
// any call.
func TestSnoozeUntilWords(t *testing.T) {
	now := time.Date(2026, 12, 5, 23, 30, 0, 0, time.UTC)
	for _, tt := range []struct{ in, want string }{
		{"2h", "2026-12-06T01:30:00Z"},
		{"3d", "2026-12-08T23:30:00Z"},
		{"tomorrow", "2026-12-06T00:00:00Z"},
		{"2026-12-07", "2026-12-07T00:00:00Z"},
		{"2026-12-07T08:00:00Z", "2026-12-07T08:00:00Z"},
	} {
		if got, err := instant(tt.in, now); err != nil || got != tt.want {
			t.Errorf("instant(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
		}
	}
	var body string
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		body = string(raw)
		writeJSON(w, 200, apitypes.MarkState{RunRef: "run_1"})
	})
	if _, stderr, code := cli(t, "session", "snooze", "run_1", "--until", "tomorrow"); code != 0 || !strings.Contains(body, `"until":"20`) {
		t.Errorf("snooze --until tomorrow: exit %d %s, body %s", code, stderr, body)
	}
	body = ""
	if _, stderr, code := cli(t, "session", "snooze", "run_1", "--until", "soonish"); code != 2 || body != "" ||
		!strings.Contains(stderr, `--until "soonish" is not a time: give an RFC 3339 instant, a day (2026-12-07), tomorrow, or a duration`) {
		t.Errorf("snooze --until soonish: exit %d %q, body %q", code, stderr, body)
	}
}

// R-CLI-8, issue 32 finding 10: usage --by names its own values, not the API's
// group_by.
func TestUsageByWord(t *testing.T) {
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) { t.Errorf("called %s", r.URL) })
	_, stderr, code := cli(t, "usage", "--by", "nodes")
	if code != 2 || !strings.Contains(stderr, `usage: --by takes profile, node, tool, model or day, not "nodes" (did you mean node?)`) || strings.Contains(stderr, "group_by") {
		t.Errorf("usage --by nodes: exit %d %q", code, stderr)
	}
}

// session on-limit POSTs the step and prints what it came to; profile
// update --on-limit replaces the plan and --on-limit= alone clears it
// (R-ONL-1, R-ONL-7).
func TestSessionOnLimitAndProfilePlan(t *testing.T) {
	var calls []string
	at := time.Date(2026, 12, 3, 14, 2, 0, 0, time.UTC)
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		calls = append(calls, r.Method+" "+r.URL.Path+" "+string(raw))
		switch {
		case strings.HasSuffix(r.URL.Path, "/on-limit"):
			writeJSON(w, 200, apitypes.Run{RunRef: "run_1", State: "idle", OnLimit: []apitypes.OnLimitEntry{
				{At: at, Outcome: apitypes.OnLimitMoved, Step: "move:claude-b", ToRef: "prof_b", ToName: "claude-b", By: "person"}}})
		default:
			writeJSON(w, 200, apitypes.Profile{Ref: "prof_a", Name: "claude-a", Tool: "claude", Approvals: "ask", AskTimeout: "10m0s", OnLimit: []string{"move:claude-b"}})
		}
	})
	out, stderr, code := cli(t, "session", "on-limit", "run_1", "move:claude-b")
	if code != 0 || !strings.Contains(out, "run_1: moved to claude-b, by a person at 2026-12-03T14:02:00Z") {
		t.Errorf("session on-limit: exit %d %s\n%s", code, stderr, out)
	}
	out, stderr, code = cli(t, "profile", "update", "prof_a", "--on-limit", "move:claude-b", "--on-limit", "continue_at_reset")
	if code != 0 || !strings.Contains(out, "on limit") {
		t.Errorf("profile update: exit %d %s\n%s", code, stderr, out)
	}
	cli(t, "profile", "update", "prof_a", "--on-limit=")
	want := []string{
		`POST /v1/m/sessions/runs/run_1/on-limit {"step":"move:claude-b"}`,
		`PATCH /v1/m/sessions/profiles/prof_a {"on_limit":["move:claude-b","continue_at_reset"]}`,
		`PATCH /v1/m/sessions/profiles/prof_a {"on_limit":[]}`,
	}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
}
