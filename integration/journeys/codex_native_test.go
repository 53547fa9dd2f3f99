package journeys

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/integration/fakemodel"
)

// nativeCodex is the node user's own Codex (the CLI or an editor): a real
// `codex app-server` 0.169.0 in the user's Codex home, driven by the test to
// make the native threads the catalog lists, with real turns answered by
// the fake Responses API. It is not Olivares: it stands for the other
// clients of that home.
type nativeCodex struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu    sync.Mutex
	next  int
	waits map[int]chan nativeReply
	turns map[string]chan string // thread → turn/completed statuses
	done  chan struct{}
}

type nativeReply struct {
	Result json.RawMessage
	Error  *struct {
		Message string `json:"message"`
	}
}

// writeCodexConfig makes codexHome with a config.toml whose provider is the
// fake Responses API, without retries (real-clis.md §2.4), and model the
// default model.
func writeCodexConfig(t *testing.T, codexHome string, fake *fakemodel.OpenAI, model string) {
	t.Helper()
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`model = %q
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.fake]
name = "Fake local"
base_url = %q
wire_api = "responses"
env_key = "FAKE_OPENAI_KEY"
request_max_retries = 0
stream_max_retries = 0
`, model, fake.BaseURL())
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startNative starts the user's own app-server in codexHome.
func startNative(t *testing.T, bin, codexHome string) *nativeCodex {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "codex"), "app-server")
	home := filepath.Dir(codexHome)
	cmd.Env = []string{"PATH=" + bin + ":" + cliruntime.DefaultPath, "HOME=" + home, "CODEX_HOME=" + codexHome,
		"FAKE_OPENAI_KEY=test", "TERM=dumb", "LANG=C.UTF-8"}
	cmd.Dir = home
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &nativeCodex{t: t, cmd: cmd, stdin: stdin, waits: map[int]chan nativeReply{}, turns: map[string]chan string{}, done: make(chan struct{})}
	go n.readLoop(stdout)
	t.Cleanup(n.close)
	n.call("initialize", map[string]any{"clientInfo": map[string]any{"name": "codex_vscode", "title": nil, "version": "1.0.0"}, "capabilities": nil})
	return n
}

func (n *nativeCodex) readLoop(r io.Reader) {
	defer close(n.done)
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var m struct {
				ID     *int            `json:"id"`
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
				nativeReply
			}
			if json.Unmarshal(line, &m) == nil {
				switch {
				case m.ID != nil && m.Method == "":
					n.mu.Lock()
					ch := n.waits[*m.ID]
					delete(n.waits, *m.ID)
					n.mu.Unlock()
					if ch != nil {
						ch <- m.nativeReply
					}
				case m.Method == "turn/completed":
					var p struct {
						ThreadID string `json:"threadId"`
						Turn     struct {
							Status string `json:"status"`
						} `json:"turn"`
					}
					json.Unmarshal(m.Params, &p)
					n.turnCh(p.ThreadID) <- p.Turn.Status
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (n *nativeCodex) turnCh(thread string) chan string {
	n.mu.Lock()
	defer n.mu.Unlock()
	ch := n.turns[thread]
	if ch == nil {
		ch = make(chan string, 64)
		n.turns[thread] = ch
	}
	return ch
}

// callErr sends a request and returns its result or Codex's error text.
func (n *nativeCodex) callErr(method string, params any) (json.RawMessage, string) {
	n.t.Helper()
	n.mu.Lock()
	n.next++
	id := n.next
	ch := make(chan nativeReply, 1)
	n.waits[id] = ch
	n.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if _, err := n.stdin.Write(append(b, '\n')); err != nil {
		n.t.Fatalf("native codex %s: %v", method, err)
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return nil, r.Error.Message
		}
		return r.Result, ""
	case <-time.After(wait):
		n.t.Fatalf("native codex %s: no answer in %v", method, wait)
	}
	return nil, ""
}

// call is callErr that fails the test on an error answer.
func (n *nativeCodex) call(method string, params any) json.RawMessage {
	n.t.Helper()
	r, e := n.callErr(method, params)
	if e != "" {
		n.t.Fatalf("native codex %s: %s", method, e)
	}
	return r
}

// thread starts a thread in cwd, runs one real turn per prompt, and names
// it when name is not empty. A thread exists on disk from its first turn.
func (n *nativeCodex) thread(cwd, name string, prompts ...string) string {
	n.t.Helper()
	var r struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	json.Unmarshal(n.call("thread/start", map[string]any{"cwd": cwd}), &r)
	for _, p := range prompts {
		n.turn(r.Thread.ID, p)
	}
	if name != "" {
		n.call("thread/name/set", map[string]any{"threadId": r.Thread.ID, "name": name})
	}
	return r.Thread.ID
}

// turnWait bounds one native turn: a deadline, not a timing. One of them
// streams a 21 MiB answer, which took over 30 s on a loaded 2-core machine.
const turnWait = 3 * wait

// turn runs one text turn and waits for it to complete.
func (n *nativeCodex) turn(thread, text string) {
	n.t.Helper()
	n.turnWith(thread, textIn(text))
}

func (n *nativeCodex) turnWith(thread string, input ...map[string]any) {
	n.t.Helper()
	n.call("turn/start", map[string]any{"threadId": thread, "input": input})
	select {
	case st := <-n.turnCh(thread):
		if st != "completed" {
			n.t.Fatalf("native turn on %s: %s", thread, st)
		}
	case <-time.After(turnWait):
		n.t.Fatalf("native turn on %s did not complete in %v", thread, turnWait)
	}
}

func textIn(s string) map[string]any {
	return map[string]any{"type": "text", "text": s, "text_elements": []any{}}
}

// read is thread/read without turns.
func (n *nativeCodex) read(thread string) map[string]any {
	n.t.Helper()
	var r struct {
		Thread map[string]any `json:"thread"`
	}
	json.Unmarshal(n.call("thread/read", map[string]any{"threadId": thread}), &r)
	return r.Thread
}

// close ends the process: stdin EOF makes the app-server exit at once
// (real-clis.md §2.1); the group is killed if it lingers.
func (n *nativeCodex) close() {
	n.stdin.Close()
	select {
	case <-n.done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	}
	n.cmd.Wait()
}
