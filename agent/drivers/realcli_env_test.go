//go:build linux

package drivers_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/claude"
	"github.com/olivares-dev/olivares/agent/drivers/codex"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/integration/realcli"
)

// realBinDir returns the directory holding the named CLIs, or skips (fails
// under OLIVARES_REAL_CLI=1) with the reason.
func realBinDir(t *testing.T, names ...string) string {
	t.Helper()
	return realcli.BinDir(t, names...)
}

// realPath is the children's PATH: the CLIs' folder first (the agent looks
// the tools up on the child's PATH), then the system's, where node is.
func realPath(bin string) string { return "PATH=" + bin + ":" + cliruntime.DefaultPath }

// realDirs makes a fresh profile home (with CODEX_HOME in it, which must
// exist, real-clis.md §0.2) and a fresh working directory, and returns the
// physical path of the latter (Claude's project slug uses it).
func realDirs(t *testing.T) (home, work string) {
	t.Helper()
	// Outside /tmp: Codex's command sandbox needs its helper aliases (§2.6).
	home = realcli.HomeDir(t)
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	work, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return home, work
}

// claudeSpec is a Claude Code launch in a fresh home (R-DRV-5) against the
// fake Messages server, with an API key. Binary is empty: the runner finds
// claude on the child's PATH.
func claudeSpec(t *testing.T, bin string, fake *fakemodel.Anthropic, env ...string) cliruntime.LaunchSpec {
	t.Helper()
	home, work := realDirs(t)
	base := []string{realPath(bin),
		"ANTHROPIC_BASE_URL=" + fake.URL(),
		// No HEAD /api/hello, no telemetry: only 127.0.0.1 (real-clis.md §1.9).
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		// A retryable error would otherwise back off for minutes (§1.10).
		"CLAUDE_CODE_MAX_RETRIES=0",
	}
	if len(env) == 0 {
		env = []string{"ANTHROPIC_API_KEY=test"}
	}
	logRequestsOnFailure(t, fake.Requests)
	return cliruntime.LaunchSpec{Home: home, Workdir: work, Env: append(base, env...), IsolateSettings: true}
}

// codexSpec is a Codex launch in a fresh home (R-DRV-5) whose config.toml
// points a [model_providers.fake] entry at the fake Responses server, with no
// retries (real-clis.md §2.4, §2.5).
func codexSpec(t *testing.T, bin string, fake *fakemodel.OpenAI) cliruntime.LaunchSpec {
	t.Helper()
	home, work := realDirs(t)
	config := `model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.fake]
name = "Fake local"
base_url = "` + fake.BaseURL() + `"
wire_api = "responses"
env_key = "FAKE_OPENAI_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 15000
`
	if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	logRequestsOnFailure(t, fake.Requests)
	return cliruntime.LaunchSpec{Home: home, Workdir: work, Env: []string{realPath(bin), "FAKE_OPENAI_KEY=test"}}
}

// logRequestsOnFailure logs, when t fails, every request the fake model
// server got, in order, with its time: a failed wait's message shows the
// child's stdio, this the model side.
func logRequestsOnFailure(t *testing.T, requests func() []fakemodel.Request) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		reqs := requests()
		if len(reqs) == 0 {
			t.Log("the model server got no request")
		}
		for i, r := range reqs {
			t.Logf("model request %d at %s: %s %s, prompt %q, stream %t", i+1, r.At.Format("15:04:05.000"), r.Method, r.Path, r.Prompt, r.Stream)
		}
	})
}

// realStart starts spec's launch, or its resume when it names a conversation.
func realStart(t *testing.T, d cliruntime.Driver, spec cliruntime.LaunchSpec) *harness {
	t.Helper()
	launch := d.Launch
	if spec.ConversationID != "" {
		launch = d.Resume
	}
	cmd, err := launch(spec)
	if err != nil {
		t.Fatalf("command: %v", err)
	}
	return start(t, sessions.NewProcRunner(), cmd, d.NewSession(spec))
}

// realTurn sends in and waits for its turn to start and end.
func realTurn(t *testing.T, h *harness, in cliruntime.Input) cliruntime.Event {
	t.Helper()
	if err := h.encode(in); err != nil {
		t.Fatalf("Encode: %v", err)
	}
	h.await(cliruntime.EventTurnStarted)
	return h.await(cliruntime.EventTurnEnded)
}

// wantOK fails unless end is a turn that ended well.
func wantOK(t *testing.T, what string, end cliruntime.Event, reason string) {
	t.Helper()
	if end.IsError || end.Reason != reason {
		t.Fatalf("%s: turn ended %+v (error %q), want no error and reason %q", what, end, end.Error, reason)
	}
}

// since returns the events after the n-th.
func since(h *harness, n int) []cliruntime.Event { return h.all()[n:] }

// limits returns the EventLimit events among evs.
func limits(evs []cliruntime.Event) []cliruntime.Event {
	var out []cliruntime.Event
	for _, e := range evs {
		if e.Kind == cliruntime.EventLimit {
			out = append(out, e)
		}
	}
	return out
}

// wait fails unless ch is closed within the deadline.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(deadline):
		t.Fatalf("%s: not within %v", what, deadline)
	}
}

// awaitModel waits for the fake to have n model requests on path.
func awaitModel(t *testing.T, await func(context.Context, string, int) ([]fakemodel.Request, error), path string, n int) []fakemodel.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	got, err := await(ctx, path, n)
	if err != nil {
		t.Fatalf("model requests to %s: got %d, want %d: %v", path, len(got), n, err)
	}
	return got
}

// claudeSlug is Claude Code's project directory name for a physical cwd
// (real-clis.md §1.3), for paths of at most 200 characters.
func claudeSlug(t *testing.T, cwd string) string {
	t.Helper()
	s := regexp.MustCompile(`[^a-zA-Z0-9]`).ReplaceAllString(cwd, "-")
	if len(s) > 200 {
		t.Fatalf("workdir %q is too long for the simple slug rule", cwd)
	}
	return s
}

// claudeTranscript is where Claude Code keeps session sid for spec
// (CLAUDE_CONFIG_DIR=<home>/.claude, real-clis.md §1.3).
func claudeTranscript(t *testing.T, spec cliruntime.LaunchSpec, sid string) string {
	return filepath.Join(spec.Home, ".claude", "projects", claudeSlug(t, spec.Workdir), sid+".jsonl")
}

// claudeTranscripts lists every session file of the profile home.
func claudeTranscripts(t *testing.T, home string) []string {
	return glob(t, filepath.Join(home, ".claude", "projects", "*", "*.jsonl"))
}

// codexRollouts lists the rollout files of the profile home, by full path.
func codexRollouts(t *testing.T, home string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(home, ".codex", "sessions", "*", "*", "*", "rollout-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// jsonlRecords reads a JSONL file into generic records.
func jsonlRecords(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil {
			t.Fatalf("%s: not JSONL: %.200q", path, l)
		}
		out = append(out, m)
	}
	return out
}

// claudeSaid lists the user and assistant texts of a Claude transcript, as
// "role: text" in file order.
func claudeSaid(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, r := range jsonlRecords(t, path) {
		typ, _ := r["type"].(string)
		if typ != "user" && typ != "assistant" {
			continue
		}
		msg, _ := r["message"].(map[string]any)
		switch c := msg["content"].(type) {
		case string:
			out = append(out, typ+": "+c)
		case []any:
			for _, b := range c {
				if bm, _ := b.(map[string]any); bm["type"] == "text" {
					s, _ := bm["text"].(string)
					out = append(out, typ+": "+s)
				}
			}
		}
	}
	return out
}

// codexSaid lists the user and assistant message texts of a Codex rollout.
func codexSaid(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, r := range jsonlRecords(t, path) {
		p, _ := r["payload"].(map[string]any)
		if r["type"] != "response_item" || p["type"] != "message" {
			continue
		}
		role, _ := p["role"].(string)
		if role != "user" && role != "assistant" {
			continue
		}
		cs, _ := p["content"].([]any)
		for _, c := range cs {
			cm, _ := c.(map[string]any)
			if s, ok := cm["text"].(string); ok {
				out = append(out, role+": "+s)
			}
		}
	}
	return out
}

// inOrder reports whether want occurs in got as a subsequence.
func inOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

var (
	claudeDriver cliruntime.Driver = claude.New()
	codexDriver  cliruntime.Driver = codex.New()
)
