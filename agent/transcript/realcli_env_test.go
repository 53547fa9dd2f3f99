//go:build linux

package transcript

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/integration/realcli"
)

// The real-binary tests run Claude Code 2.1.328 and Codex 0.169.0 through
// real turns against the fakemodel servers on 127.0.0.1, then read what
// they wrote with this package. They find the CLIs in $OLIVARES_CLIS_BIN
// and skip with the reason when it is unset or a binary is absent, unless
// OLIVARES_REAL_CLI=1, which makes that a failure (R-DRV-8).
const (
	// fixturesEnv, set to 1, copies what the real runs wrote into
	// testdata/golden as the real fixtures of the golden tests.
	fixturesEnv = "OLIVARES_TRANSCRIPT_FIXTURES"
	// realDeadline bounds every wait on a real process.
	realDeadline = 90 * time.Second
)

// realBinDir returns the directory holding the named CLIs, or skips (fails
// under OLIVARES_REAL_CLI=1) with the reason.
func realBinDir(t *testing.T, names ...string) string {
	t.Helper()
	return realcli.BinDir(t, names...)
}

// realDirs makes a fresh profile home (with .codex in it, which Codex
// needs) and a working directory, by physical path.
func realDirs(t *testing.T) (home, work string) {
	t.Helper()
	// Outside /tmp: Codex's command sandbox needs its helper aliases
	// (real-clis.md §2.6).
	base := realcli.HomeDir(t)
	home, work = filepath.Join(base, "home"), filepath.Join(base, "work")
	for _, d := range []string{filepath.Join(home, ".codex"), work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return home, work
}

// proc is a real CLI process with its stdout lines fed to a Live and kept.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	live   *Live
	exited chan struct{} // closed once the process was waited for

	mu    sync.Mutex
	lines []string
	eof   bool
	wake  chan struct{}
	seen  int // lines already matched by await
}

func startProc(t *testing.T, dir string, env []string, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, stdin: stdin, live: NewLive(), exited: make(chan struct{}), wake: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			p.live.Observe(sc.Bytes())
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.wake)
			p.wake = make(chan struct{})
			p.mu.Unlock()
		}
		p.mu.Lock()
		p.eof = true
		close(p.wake)
		p.wake = make(chan struct{})
		p.mu.Unlock()
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-p.exited:
		case <-time.After(realDeadline):
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", filepath.Base(name), stderr.String())
		}
	})
	return p
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *proc) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("stdin: %v", err)
	}
}

// await waits for the next stdout frame (after the last one await matched)
// that pred accepts.
func (p *proc) await(what string, pred func(map[string]any) bool) map[string]any {
	p.t.Helper()
	deadline := time.After(realDeadline)
	for {
		p.mu.Lock()
		for p.seen < len(p.lines) {
			l := p.lines[p.seen]
			p.seen++
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && pred(m) {
				p.mu.Unlock()
				return m
			}
		}
		eof, wake := p.eof, p.wake
		p.mu.Unlock()
		if eof {
			p.t.Fatalf("%s: stdout ended first", what)
		}
		select {
		case <-wake:
		case <-deadline:
			p.t.Fatalf("%s: not within %v", what, realDeadline)
		}
	}
}

// finish closes stdin and waits for the exit.
func (p *proc) finish() {
	p.t.Helper()
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(realDeadline):
		p.t.Fatalf("no exit within %v of stdin EOF", realDeadline)
	}
}

func (p *proc) stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n") + "\n"
}

// startClaude runs Claude Code in its operate form (real-clis.md §1.1)
// against fake, with the profile home's config dir as CLAUDE_CONFIG_DIR,
// the way the claude driver launches it.
func startClaude(t *testing.T, bin string, fake *fakemodel.Anthropic, home, work string, env []string, args ...string) *proc {
	base := []string{"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TERM=dumb", "LANG=C.UTF-8",
		"CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"), "ANTHROPIC_BASE_URL=" + fake.URL(), "ANTHROPIC_API_KEY=test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_RETRIES=0"}
	full := append([]string{"--print", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--setting-sources", ""}, args...)
	return startProc(t, work, append(base, env...), filepath.Join(bin, "claude"), full...)
}

func userLine(text string) string {
	b, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text}})
	return string(b)
}

// isResult matches a Claude result frame.
func isResult(m map[string]any) bool { return m["type"] == "result" }

// toolArgs marshals a tool call's input.
func toolArgs(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// startCodex runs codex app-server with a config.toml whose fake provider
// points at base (real-clis.md §2.4).
func startCodex(t *testing.T, bin, base, home, work, extraConfig string) *proc {
	t.Helper()
	config := `model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
` + extraConfig + `
[model_providers.fake]
name = "Fake local"
base_url = "` + base + `"
wire_api = "responses"
env_key = "FAKE_OPENAI_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 15000
`
	if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TERM=dumb", "LANG=C.UTF-8",
		"CODEX_HOME=" + filepath.Join(home, ".codex"), "FAKE_OPENAI_KEY=test"}
	return startProc(t, work, env, filepath.Join(bin, "codex"), "app-server")
}

// namespaceProxy sits between Codex and the fake Responses server and
// turns a fake tool call named "<namespace>.<name>" into the namespaced
// call Codex's multi_agent_v1 tools need ("namespace" is a field the fake
// does not write).
func namespaceProxy(t *testing.T, target string) string {
	t.Helper()
	re := regexp.MustCompile(`"name":"([a-z0-9_]+)\.([a-z0-9_]+)"`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.Path, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		fl, _ := w.(http.Flusher)
		for sc.Scan() {
			_, _ = io.WriteString(w, re.ReplaceAllString(sc.Text(), `"name":"$2","namespace":"$1"`)+"\n")
			if fl != nil {
				fl.Flush()
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// rpc sends a JSON-RPC request to app-server and waits for its response.
func (p *proc) rpc(id int, method string, params any) map[string]any {
	p.t.Helper()
	b, _ := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	p.send(string(b))
	r := p.await(method+" response", func(m map[string]any) bool { return m["id"] == float64(id) })
	if r["error"] != nil {
		p.t.Fatalf("%s: %v", method, r["error"])
	}
	return r
}

// codexThread initializes app-server and starts a thread in work.
func (p *proc) codexThread(work string) string {
	p.rpc(1, "initialize", map[string]any{"clientInfo": map[string]any{"name": "olivares", "title": nil, "version": "0.0.1"}, "capabilities": nil})
	r := p.rpc(2, "thread/start", map[string]any{"cwd": work})
	return r["result"].(map[string]any)["thread"].(map[string]any)["id"].(string)
}

// saveFixture copies a real run's profile-home files and stdout into
// testdata/golden/<name> when OLIVARES_TRANSCRIPT_FIXTURES=1.
func saveFixture(t *testing.T, name string, c goldenCase, home string, stdout string) {
	t.Helper()
	if os.Getenv(fixturesEnv) != "1" {
		return
	}
	dir := filepath.Join("testdata", "golden", name)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{filepath.Join(home, ".claude", "projects"), filepath.Join(home, ".codex", "sessions"), filepath.Join(home, ".codex", "archived_sessions")} {
		err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			if !fi.Mode().IsRegular() || !(strings.HasSuffix(p, ".jsonl") || strings.HasSuffix(p, ".json")) {
				return nil
			}
			rel, _ := filepath.Rel(home, p)
			dst := filepath.Join(dir, "home", rel)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, data, 0o644)
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	if stdout != "" {
		if err := os.WriteFile(filepath.Join(dir, "stdout.jsonl"), []byte(stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "case.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("fixture written to %s; run go test -run TestGolden -update to write its want.json", dir)
}

// wait fails unless ch is closed within the real-run deadline.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(realDeadline):
		t.Fatalf("%s: not within %v", what, realDeadline)
	}
}
