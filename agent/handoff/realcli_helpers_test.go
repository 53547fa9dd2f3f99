package handoff

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration/realcli"
)

var update = flag.Bool("update", false, "rewrite testdata/golden: the fixtures from the real-binary tests, and the goldens")

// The real-binary tests find the CLIs in $OLIVARES_CLIS_BIN (scripts/test
// exports it after scripts/install-clis); OLIVARES_REAL_CLI=1 turns a missing
// binary into a failure (R-DRV-8).
const (
	// realDeadline bounds every wait on a real CLI: they start in 0.3–3.5 s
	// on an idle 2-core machine (real-clis.md §5), and the machine is shared.
	realDeadline = 90 * time.Second
)

// realBinDir returns the directory holding the named CLIs, or skips (fails
// under OLIVARES_REAL_CLI=1) with the reason.
func realBinDir(t *testing.T, names ...string) string {
	t.Helper()
	return realcli.BinDir(t, names...)
}

// profile is a fresh profile home and working directory (R-DRV-5), and the
// environment built from scratch as the agent builds it (real-clis.md §6.2).
type profile struct {
	bin, home, work string
	env             []string
}

func newProfile(t *testing.T, bin string, extra ...string) profile {
	t.Helper()
	// Outside /tmp: Codex's command sandbox needs its helper aliases
	// (real-clis.md §2.6).
	home := realcli.HomeDir(t)
	work, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TERM=dumb", "LANG=C.UTF-8",
		"XDG_CONFIG_HOME=" + home + "/.config", "XDG_DATA_HOME=" + home + "/.local/share",
		"XDG_STATE_HOME=" + home + "/.local/state", "XDG_CACHE_HOME=" + home + "/.cache"}
	if err := os.WriteFile(filepath.Join(work, "notes.txt"), []byte("canary-in-notes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return profile{bin: bin, home: home, work: work, env: append(env, extra...)}
}

// proc is a CLI speaking JSON lines on stdio.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	frames chan map[string]any
	// answer, when set, is called on every frame before it is matched
	// (ACP permission requests).
	answer func(p *proc, m map[string]any)
	mu     sync.Mutex
	closed bool
	exited chan struct{}
}

func startProc(t *testing.T, p profile, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(filepath.Join(p.bin, name), args...)
	cmd.Dir = p.work
	cmd.Env = p.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &tailBuffer{max: 8 << 10}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr := &proc{t: t, cmd: cmd, in: in, frames: make(chan map[string]any, 1024), exited: make(chan struct{})}
	go func() {
		defer close(pr.frames)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				pr.frames <- m
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(pr.exited)
	}()
	t.Cleanup(func() {
		pr.closeStdin()
		select {
		case <-pr.exited:
		case <-time.After(realDeadline):
		}
		// The group: the Node wrappers have the real binary as a child.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-pr.exited
		if t.Failed() {
			t.Logf("%s stderr (tail):\n%s", name, stderr.String())
		}
	})
	return pr
}

func (p *proc) send(v any) {
	p.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		p.t.Fatalf("write to the CLI: %v", err)
	}
}

// await returns the first frame matching ok, within realDeadline.
func (p *proc) await(what string, ok func(m map[string]any) bool) map[string]any {
	p.t.Helper()
	deadline := time.After(realDeadline)
	for {
		select {
		case m, open := <-p.frames:
			if !open {
				p.t.Fatalf("%s: the CLI closed stdout first", what)
			}
			if p.answer != nil {
				p.answer(p, m)
			}
			if ok(m) {
				return m
			}
		case <-deadline:
			p.t.Fatalf("%s: not within %v", what, realDeadline)
		}
	}
}

func (p *proc) closeStdin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		p.in.Close()
	}
}

// wait closes stdin and waits for the exit.
func (p *proc) wait() {
	p.t.Helper()
	p.closeStdin()
	select {
	case <-p.exited:
	case <-time.After(realDeadline):
		p.t.Fatalf("the CLI did not exit within %v of stdin EOF", realDeadline)
	}
}

// rpc sends a JSON-RPC request and returns its response.
func (p *proc) rpc(id int, method string, params any) map[string]any {
	p.t.Helper()
	p.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	m := p.await(method, func(m map[string]any) bool {
		v, ok := m["id"].(float64)
		return ok && int(v) == id && m["method"] == nil
	})
	if e, ok := m["error"]; ok {
		p.t.Fatalf("%s: error %v", method, e)
	}
	return m
}

func str(m map[string]any, path ...string) string {
	var v any = m
	for _, k := range path {
		mm, _ := v.(map[string]any)
		v = mm[k]
	}
	s, _ := v.(string)
	return s
}

// said lists a conversation's records as "kind: text" (tool records as
// "kind tool: text"), the form the tests compare.
func said(c Conversation) []string {
	var out []string
	for _, r := range c.Records {
		if r.Kind == KindToolCall || r.Kind == KindToolResult {
			s := string(r.Kind) + " " + r.Tool + ": " + r.Text
			if r.IsError {
				s += " (error)"
			}
			out = append(out, s)
			continue
		}
		out = append(out, string(r.Kind)+": "+r.Text)
	}
	return out
}

// matches reports whether got matches want line by line; a "*" in a want
// line matches any run of characters.
func matches(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range want {
		if !glob(want[i], got[i]) {
			return false
		}
	}
	return true
}

func glob(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return s == pattern
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}

func is(err error, target error) bool { return errors.Is(err, target) }

// exportOf runs opencode export in the profile, for the fixture.
func exportOf(t *testing.T, p profile, sid string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctxT(t), filepath.Join(p.bin, "opencode"), "export", sid)
	cmd.Env = p.env
	cmd.Dir = p.home
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("opencode export: %v", err)
	}
	return out
}

// checkOutputs checks what a handoff makes of c: the summary names the
// source and what was asked, the transcript holds every record and its size
// is the one announced, and the written file is that transcript, 0600.
func checkOutputs(t *testing.T, c Conversation, wantInSummary ...string) {
	t.Helper()
	s := Summary(c)
	for _, w := range append([]string{toolTitle(c.Tool), c.ID}, wantInSummary...) {
		if !strings.Contains(s, w) {
			t.Errorf("summary does not contain %q:\n%s", w, s)
		}
	}
	tr := Transcript(c)
	if got := TranscriptBytes(c); got != int64(len(tr)) {
		t.Errorf("TranscriptBytes = %d, want %d (the transcript's length)", got, len(tr))
	}
	for _, r := range c.Records {
		if !strings.Contains(string(tr), r.Text) {
			t.Errorf("transcript lacks the %s record %q", r.Kind, r.Text)
		}
	}
	path := filepath.Join(t.TempDir(), "target-home", ".olivares", "handoff-"+c.ID+".md")
	n, err := WriteTranscript(path, c)
	if err != nil {
		t.Fatalf("WriteTranscript: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != string(tr) || n != int64(len(tr)) {
		t.Errorf("written transcript: %d bytes (reported %d), err %v; want the %d bytes of Transcript", len(b), n, err, len(tr))
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("transcript mode: %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	ft := FirstTurn(s, path)
	if !strings.HasPrefix(ft, strings.TrimSpace(s)) || !strings.Contains(ft, path) {
		t.Errorf("first turn %q: want the summary, then the transcript path", ft)
	}
}

// Fixture normalisation: the real runs' files become testdata/golden
// inputs with the temporary folders, session ids and times replaced, so
// that a re-recording changes only what the CLIs changed.
var (
	rfc3339   = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	dayStamp  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d-\d\d(-\d\d)?`)
	fixedTime = "2026-01-02T03:04:05.000Z"
)

// saveFixture writes the normalised copy of src to testdata/golden/name
// when -update is set.
func saveFixture(t *testing.T, src, name string, p profile, ids map[string]string) {
	t.Helper()
	if !*update {
		return
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	s = strings.ReplaceAll(s, p.work, "/home/dev/project")
	s = strings.ReplaceAll(s, p.home, "/home/dev")
	s = strings.ReplaceAll(s, claudeSlug(p.work), claudeSlug("/home/dev/project"))
	s = strings.ReplaceAll(s, strings.TrimPrefix(p.work, "/"), "home/dev/project")
	// Gemini CLI's project folder is named after the working directory.
	s = strings.ReplaceAll(s, ".gemini/tmp/"+filepath.Base(p.work), ".gemini/tmp/project")
	for from, to := range ids {
		s = strings.ReplaceAll(s, from, to)
	}
	s = rfc3339.ReplaceAllString(s, fixedTime)
	s = dayStamp.ReplaceAllString(s, "2026-01-02T03-04-05")
	if err := os.MkdirAll(filepath.Join("testdata", "golden"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", "golden", name), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), realDeadline)
	t.Cleanup(cancel)
	return ctx
}
