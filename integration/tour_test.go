package integration

import (
	"bytes"
	"context"
	"fmt"
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
	writeShims(t, shims, clis, anthropic, openai)
	writeCodexHome(t, home, openai)
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
	for _, want := range []string{
		"logged in to http://" + httpAddr,
		"pong: explain this repo", // the attached conversation, rendered
		"audit ledger intact",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the tour's output lacks %q:\n%s", want, text)
		}
	}
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
// binary with its model server set to the fake one.
func writeShims(t *testing.T, dir, clis string, a *fakemodel.Anthropic, o *fakemodel.OpenAI) {
	t.Helper()
	for name, env := range map[string]string{
		"claude": fmt.Sprintf("export ANTHROPIC_BASE_URL=%s ANTHROPIC_API_KEY=test CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 CLAUDE_CODE_MAX_RETRIES=0", a.URL()),
		"codex":  "export FAKE_OPENAI_KEY=test",
	} {
		shim := "#!/bin/sh\n" + env + "\nexec " + filepath.Join(clis, name) + ` "$@"` + "\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(shim), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// writeCodexHome gives HOME's Codex a config.toml whose provider is the
// fake Responses API (dev mode's codex profile uses the person's home).
func writeCodexHome(t *testing.T, home string, o *fakemodel.OpenAI) {
	t.Helper()
	config := `model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.fake]
name = "Fake local"
base_url = "` + o.BaseURL() + `"
wire_api = "responses"
env_key = "FAKE_OPENAI_KEY"
request_max_retries = 0
stream_max_retries = 0
`
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
}
