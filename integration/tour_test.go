package integration

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/integration/realcli"
)

// Finding 11 of issue 21: the README's five-minute tour runs top to bottom
// as written. The test takes the tour's code block from README.md itself
// and runs it with bash -e against the real binaries and the pinned Claude
// Code and Codex, a real dev mode included. Only what ties it to one
// machine is replaced, each replacement checked to apply: the install and
// build lines (done by the test), the ports and /tmp (this test's own), and
// the vendor CLIs' model servers (fake ones on 127.0.0.1: claude and codex
// on PATH are shims that point the real binaries at them, so no turn
// leaves the host). HOME is a fresh directory, so dev mode starts from
// nothing and its state directory is the tour's ~/.local/state/olivares/dev.
func TestReadmeTourRuns(t *testing.T) {
	t.Parallel()
	tr := runTour(t, true)
	text := tr.text
	for _, want := range []string{
		"logged in to http://" + tr.addr,
		"\naccount             signed in", // profile show codex
		"pong: explain this repo",         // the attached conversation, rendered
		"audit ledger intact",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the tour's output lacks %q:\n%s", want, text)
		}
	}
}

// Issue 32: the same tour, as written, against vendor CLIs with no account
// (R-ACCT-8, R-ACCT-9): Claude Code has no key and no sign-in, so it
// answers "Not logged in" without a model request (real-clis.md §1.2);
// Codex has no auth.json and no key, and its provider answers 401, as
// OpenAI's does. The tour still runs top to bottom, and each step says what
// happened: what the step printed holds the sentence below.
func TestReadmeTourNotSignedIn(t *testing.T) {
	t.Parallel()
	tr := runTour(t, false)
	text := tr.text
	codexNo := "the account of profile codex is not signed in (its tool said: unexpected status 401 Unauthorized"
	for _, s := range []struct {
		cmd  string // the command as bash -x traces it, after "+ "
		n    int    // its nth trace, from 1
		want string
	}{
		{"olivares login --dev", 0, "logged in to http://"},
		{"olivares profile show codex", 1, "\naccount             not signed in: Codex has no account in the profile home; run olivares profile login codex\n"},
		{"olivares session wait run_", 1, " idle\n"}, // the tool is up
		{"olivares session wait run_", 2, codexNo},
		{"olivares session wait run_", 2, "; run olivares profile login codex"},
		// The resumed tool is up: the refusal before the resume is no
		// answer of this generation's.
		{"olivares session wait run_", 3, " idle\n"},
		{"olivares session wait run_", 4, codexNo},
		{"olivares session events run_", 1, `error           1    {"kind":"auth"}`},
		{"olivares session list --archived --snoozed", 1, "idle   failed     codex"},
		{"olivares session list --archived --snoozed", 1, "(error: auth)"},
		{"olivares session activity run_", 1, "context      no turn has reported its tokens yet\n"},
		{"olivares session wait run_", 6, "the account of profile claude-a is not signed in (its tool said: Not logged in · Please run /login); run olivares profile login claude-a"},
		{"olivares audit verify", 1, "audit ledger intact"},
	} {
		out := tourStep(text, s.cmd, s.n)
		if !strings.Contains(out, s.want) {
			t.Errorf("%s (#%d) printed\n%s\nwant %q", s.cmd, s.n, out, s.want)
		}
	}
	// The attached conversation shows the refused turn as failed.
	for _, want := range []string{"✗ unexpected status 401 Unauthorized", "── failed"} {
		if !strings.Contains(text, want) {
			t.Errorf("session attach printed no %q", want)
		}
	}
	// Every error the CLI printed is one of the above (and webhook test's):
	// no bare Go error, no success for a refused turn.
	var errs []string
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(line), "olivares: ") {
			errs = append(errs, line)
		}
	}
	var notSignedIn int
	for _, e := range errs {
		if strings.Contains(e, " is not signed in (its tool said: ") {
			notSignedIn++
		}
	}
	if len(errs) != 4 || notSignedIn != 3 || !strings.Contains(strings.Join(errs, ""), "olivares: webhook test: ") {
		t.Errorf("the CLI's errors:\n%s\nwant three not signed in and webhook test's", strings.Join(errs, ""))
	}
	if strings.Contains(text, "pong:") {
		t.Error("a turn was answered without a sign-in")
	}
	// As the real CLIs do without an account: Claude Code asks no model,
	// Codex asks without a key.
	if n := len(tr.anthropic.ModelRequests()); n != 0 {
		t.Errorf("Claude Code made %d model requests without a sign-in", n)
	}
	reqs := tr.openai.ModelRequests()
	for _, r := range reqs {
		if h := r.Header.Get("Authorization"); h != "" {
			t.Errorf("Codex sent Authorization %q without an account", h)
		}
	}
	if len(reqs) != 2 {
		t.Errorf("Codex made %d model requests, want the tour's two turns", len(reqs))
	}
}

// tourStep is what the tour printed after its nth trace of cmd (the last
// with n 0), up to the next traced command (bash -x marks one "+ ", one
// in $(...) "++ ").
func tourStep(text, cmd string, n int) string {
	var out []string
	seen, in := 0, false
	for line := range strings.Lines(text) {
		if trace, ok := strings.CutPrefix(strings.TrimLeft(line, "+"), " "); ok && line[0] == '+' {
			in = false
			if strings.HasPrefix(trace, cmd) {
				seen++
				if n == 0 || seen == n {
					out, in = out[:0], true
				}
			}
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// tour is what runTour ran: its output (each command traced by -x), the
// coordinator's address and the model servers.
type tour struct {
	text, addr string
	anthropic  *fakemodel.Anthropic
	openai     *fakemodel.OpenAI
}

// runTour runs the tour's block with bash -e. signedIn gives the vendor
// CLIs a key; without, they have no account.
func runTour(t *testing.T, signedIn bool) tour {
	t.Helper()
	clis := realcli.BinDir(t, "claude", "codex")
	bin := binaries(t)
	raw, err := os.ReadFile(filepath.Join(repoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	script := tourBlock(t, string(raw))

	dir := shortTempDir(t)
	home := filepath.Join(dir, "home")
	shims := filepath.Join(dir, "shims")
	repo := filepath.Join(dir, "repo")
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{home, shims, repo, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	anthropic := fakemodel.NewAnthropic()
	t.Cleanup(anthropic.Close)
	openai := fakemodel.NewOpenAI()
	t.Cleanup(openai.Close)
	writeShims(t, shims, clis, anthropic, signedIn)
	writeCodexHome(t, home, openai, signedIn)
	if !signedIn {
		for range 10 { // more than the tour's turns
			openai.Push(codexUnauthorized)
		}
	}
	// The workspace: a git repository with a Go module (the setup command
	// is go mod download) and a README.
	for name, text := range map[string]string{"go.mod": "module example.com/tour\n\ngo 1.26\n", "README.md": "# tour\n\nA repository for the tour.\n"} {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "init"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}

	httpAddr, tunnelAddr := freeAddr(t), freeAddr(t)
	for _, r := range []struct{ old, new string }{
		{"/tmp/", tmp + "/"}, // first: the paths below are under /tmp too
		{"bash scripts/install-clis", ": scripts/install-clis"},
		{"export PATH=$PWD/.clis/node_modules/.bin:$PATH", "export PATH=" + shims + ":$PATH"},
		{"go build -o bin/ ./coordinator/cmd/... ./agent/cmd/...", ": go build"},
		{"export PATH=$PWD/bin:$PATH", "export PATH=" + bin + ":$PATH"},
		{"olivares-coordinator dev &", "olivares-coordinator dev --http " + httpAddr + " --tunnel " + tunnelAddr + " &"},
	} {
		if !strings.Contains(script, r.old) {
			t.Fatalf("the tour no longer has %q: update this test with it", r.old)
		}
		script = strings.ReplaceAll(script, r.old, r.new)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-x", "-c", script)
	cmd.Dir = repo
	cmd.Env = []string{"HOME=" + home, "PATH=" + cliruntime.DefaultPath, "LANG=C.UTF-8", "TMPDIR=" + tmp,
		"GOMODCACHE=" + filepath.Join(dir, "gomod"), "GOCACHE=" + filepath.Join(dir, "gocache")}
	// The script and what it starts in the background form one process
	// group, ended as a whole if the test stops early.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// What the script left running in the background must not hold the
	// test once the script is done.
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Cleanup(func() {
		if cmd.Process != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // only the group this test started
		}
	})
	if err != nil {
		t.Fatalf("the tour failed: %v\n%s", err, out.String())
	}
	text := out.String()
	t.Logf("the tour's output:\n%s", text)
	return tour{text, httpAddr, anthropic, openai}
}

// tourBlock is the first sh block after the tour's heading.
func tourBlock(t *testing.T, readme string) string {
	t.Helper()
	_, rest, ok := strings.Cut(readme, "## A five-minute tour")
	if !ok {
		t.Fatal("README.md has no five-minute tour")
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	if !ok {
		t.Fatal("the tour has no sh block")
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("the tour's sh block does not end")
	}
	return block
}

// writeShims puts claude and codex on a PATH folder: each runs the pinned
// binary with its model server set to the fake one, and with a key when
// signedIn (a fresh HOME holds no sign-in).
func writeShims(t *testing.T, dir, clis string, a *fakemodel.Anthropic, signedIn bool) {
	t.Helper()
	claude := "export ANTHROPIC_BASE_URL=" + a.URL() + " CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 CLAUDE_CODE_MAX_RETRIES=0"
	codex := ""
	if signedIn {
		claude += " ANTHROPIC_API_KEY=test"
		codex = "export FAKE_OPENAI_KEY=test"
	}
	for name, env := range map[string]string{"claude": claude, "codex": codex} {
		shim := "#!/bin/sh\n" + env + "\nexec " + filepath.Join(clis, name) + ` "$@"` + "\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(shim), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// codexUnauthorized is what OpenAI answers a request without a key.
var codexUnauthorized = fakemodel.Reply{Status: http.StatusUnauthorized,
	Body: `{"error":{"message":"Missing bearer or basic authentication in header","type":"invalid_request_error","code":null}}`}

// writeCodexHome gives HOME's Codex a config.toml whose provider is the
// fake Responses API (dev mode's codex profile uses the person's home).
// Signed in, its key is in FAKE_OPENAI_KEY; without, the provider takes
// Codex's own sign-in (auth.json) as OpenAI's does, and there is none.
func writeCodexHome(t *testing.T, home string, o *fakemodel.OpenAI, signedIn bool) {
	t.Helper()
	auth := "requires_openai_auth = true\n"
	if signedIn {
		auth = "env_key = \"FAKE_OPENAI_KEY\"\n"
	}
	config := `model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.fake]
name = "Fake local"
base_url = "` + o.BaseURL() + `"
wire_api = "responses"
` + auth + `request_max_retries = 0
stream_max_retries = 0
`
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
}
