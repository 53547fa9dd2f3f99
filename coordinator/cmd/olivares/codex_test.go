package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration/contract"
	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

const (
	threadA = "01a23643-8a79-7b72-93b2-655098698f6d"
	nodeA   = "node-aaaa"
	// supervisedCaps are the capabilities of a node that opted in to Codex
	// supervision, as its agent reports them.
	supervisedCaps = `{"pty":true,"worktree_dir_configured":false,"clis":[],"codex_supervision":{"transport":"stdio","home_scope":"user"}}`
)

// TestCodexUsageErrors is R-CX-CLI-5..7 and R-CX-CLI-10: usage errors exit
// 2 before anything is sent, logged in or not.
func TestCodexUsageErrors(t *testing.T) {
	var calls int
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) { calls++ })
	for _, args := range [][]string{
		{"codex", "sessions", "--limit", "0"},
		{"codex", "sessions", "--limit", "101"},
		{"codex", "sessions", "--cursor", "abc"},
		{"codex", "sessions", "--archived"},
		{"codex", "sessions", "extra"},
		{"codex", "continue"},
		{"codex", "continue", threadA, "--archived"},
		{"codex", "archive", threadA},
		{"codex", "archive", threadA, "--include-archived"},
		{"codex", "sessions", "--timeout", "0"},
		{"codex", "fork", threadA},
	} {
		if _, stderr, code := cli(t, args...); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", args, code, stderr)
		}
	}
	if calls != 0 {
		t.Errorf("%d API calls on usage errors, want none", calls)
	}
}

// TestCodexSessions: the catalog route with limit per host (default 50),
// search, host and cursor passed through; --json prints the one document;
// a failed host exits 1 after the page is printed (R-CX-CLI-10).
func TestCodexSessions(t *testing.T) {
	var mu sync.Mutex
	var queries []string
	title := "Fix the parser"
	cat := apitypes.CodexCatalog{Hosts: []apitypes.CodexHost{
		{Host: nodeA, Hostname: "box-a", Rows: []apitypes.CodexThread{{ThreadID: threadA, Title: &title, Cwd: "/w", State: "notLoaded",
			ActiveFlags: []string{}, Source: "cli", UpdatedAt: time.Unix(1796206800, 0).UTC()}}, NextCursor: "c1"},
		{Host: "node-bbbb", Hostname: "box-b", Rows: []apitypes.CodexThread{}, Error: &apitypes.CodexHostError{Code: "node_unreachable", Message: "the node has no live tunnel"}},
	}}
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		if r.URL.Path != apiclient.Base+"/catalog/codex/threads" || r.Method != http.MethodGet {
			writeErr(w, 404, "not_found", "no")
			return
		}
		writeJSON(w, 200, cat)
	})
	stdout, _, code := cli(t, "codex", "sessions", "--json")
	var got apitypes.CodexCatalog
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got.Hosts) != 2 {
		t.Fatalf("--json output %q: %v", stdout, err)
	}
	if code != 1 {
		t.Errorf("a failed host: exit %d, want 1", code)
	}
	if queries[0] != "limit=50" {
		t.Errorf("query %q, want limit=50", queries[0])
	}
	stdout, _, _ = cli(t, "codex", "sessions", "--search", "Parser", "--host", nodeA, "--limit", "7", "--cursor", "c0")
	if q := queries[1]; q != "cursor=c0&host=node-aaaa&limit=7&search=Parser" {
		t.Errorf("query %q", q)
	}
	for _, want := range []string{"host node-aaaa (box-a)", threadA, "Fix the parser", "error: the node has no live tunnel (node_unreachable)",
		`--host node-aaaa --search "Parser" --cursor c1`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestCodexContinueArchive: continue and archive post to the thread's host,
// found alone when --host is not given; archive sends the confirmation; any
// API error exits 1 (R-CX-CLI-10), not the session commands' 3..6.
func TestCodexContinueArchive(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	supervised := []apitypes.Node{
		{ID: nodeA, Connected: true, Capabilities: json.RawMessage(supervisedCaps)},
		{ID: "node-plain", Connected: true, Capabilities: json.RawMessage(`{"pty":true,"worktree_dir_configured":false,"clis":[]}`)},
		{ID: "node-down", Connected: false, Capabilities: json.RawMessage(supervisedCaps)},
	}
	nodes := supervised
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+string(body))
		mu.Unlock()
		switch {
		case r.URL.Path == "/v1/nodes":
			writeJSON(w, 200, apitypes.NodeList{Items: nodes})
		case strings.HasSuffix(r.URL.Path, "/continue") && strings.Contains(r.URL.Path, "01a23643-0000"):
			writeErr(w, 409, "thread_active", "thread is active")
		case strings.HasSuffix(r.URL.Path, "/continue"):
			writeJSON(w, 201, apitypes.Run{RunRef: "run_x1", NodeID: nodeA, State: "idle",
				CodexBinding: &apitypes.CodexBinding{State: "pending", ModelLocked: true}})
		case strings.HasSuffix(r.URL.Path, "/archive"):
			writeJSON(w, 200, apitypes.CodexArchived{Host: nodeA, ThreadID: threadA, Archived: true})
		}
	})
	stdout, _, code := cli(t, "codex", "continue", threadA)
	if code != 0 || !strings.Contains(stdout, "run run_x1") {
		t.Fatalf("continue: exit %d %q", code, stdout)
	}
	if want := "POST " + apiclient.Base + "/catalog/codex/threads" + "/" + nodeA + "/" + threadA + "/continue {}"; seen[1] != want {
		t.Errorf("continue sent %q, want %q", seen[1], want)
	}
	stdout, _, code = cli(t, "codex", "archive", threadA, "--confirm-no-other-runner", "--host", nodeA, "--json")
	var arch apitypes.CodexArchived
	if code != 0 || json.Unmarshal([]byte(stdout), &arch) != nil || !arch.Archived {
		t.Fatalf("archive: exit %d %q", code, stdout)
	}
	if want := "POST " + apiclient.Base + "/catalog/codex/threads" + "/" + nodeA + "/" + threadA + `/archive {"confirmNoOtherRunner":true}`; seen[len(seen)-1] != want {
		t.Errorf("archive sent %q, want %q", seen[len(seen)-1], want)
	}
	if _, stderr, code := cli(t, "codex", "continue", "01a23643-0000-7000-8000-000000000000", "--host", nodeA); code != 1 || !strings.Contains(stderr, "thread_active") {
		t.Errorf("a 409: exit %d %q, want 1", code, stderr)
	}
	nodes = append(nodes, apitypes.Node{ID: "node-other", Connected: true, Capabilities: json.RawMessage(supervisedCaps)})
	if _, stderr, code := cli(t, "codex", "continue", threadA); code != 2 || !strings.Contains(stderr, "--host") {
		t.Errorf("two supervised hosts and no --host: exit %d %q, want 2", code, stderr)
	}
}

// TestCodexFlagsOverride: --url and --token replace the saved login, and
// the timeouts default to R-CX-CLI-3's.
func TestCodexFlagsOverride(t *testing.T) {
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the saved login's server was called: %s", r.URL)
	})
	var auth string
	other := httptest.NewServer(contract.Handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		writeJSON(w, 200, apitypes.CodexCatalog{Hosts: []apitypes.CodexHost{}})
	})))
	defer other.Close()
	if _, stderr, code := cli(t, "codex", "sessions", "--url", other.URL, "--token", "olv_other", "--timeout", "5000"); code != 0 {
		t.Fatalf("exit %d %s", code, stderr)
	}
	if auth != "Bearer olv_other" {
		t.Errorf("Authorization %q, want the --token", auth)
	}
	for _, tt := range []struct {
		o     codexConn
		given bool
		want  time.Duration
	}{
		{codexConn{wait: codexSessionsTimeout}, false, 75 * time.Second},
		{codexConn{wait: codexActionTimeout}, false, 30 * time.Second},
		{codexConn{wait: codexActionTimeout, timeoutMS: 1500}, true, 1500 * time.Millisecond},
	} {
		if err := tt.o.check(&call{cmd: &command{name: "codex archive"}, set: map[string]bool{"timeout": tt.given}}); err != nil || tt.o.wait != tt.want {
			t.Errorf("%+v: timeout %v (%v), want %v", tt.o, tt.o.wait, err, tt.want)
		}
	}
}
