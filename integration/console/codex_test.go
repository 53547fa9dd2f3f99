package console

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/integration/realcli"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// nativeCodex is the node user's own Codex (as in integration/journeys): a
// real `codex app-server` in the user's Codex home that makes the native
// threads the catalog lists, its turns answered by the fake Responses API.
type nativeCodex struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	next  int
	waits map[int]chan json.RawMessage
	done  map[string]chan struct{} // thread → a turn completed
	ended chan struct{}
}

func writeCodexConfig(t *testing.T, codexHome string, fake *fakemodel.OpenAI) {
	t.Helper()
	writeFile(t, filepath.Join(codexHome, "config.toml"), fmt.Sprintf(`model = "fake-model"
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
`, fake.BaseURL()))
}

func startNative(t *testing.T, bin, codexHome string) *nativeCodex {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "codex"), "app-server")
	home := filepath.Dir(codexHome)
	cmd.Env = []string{"PATH=" + bin + ":" + cliruntime.DefaultPath, "HOME=" + home, "CODEX_HOME=" + codexHome, "FAKE_OPENAI_KEY=test", "TERM=dumb", "LANG=C.UTF-8"}
	cmd.Dir = home
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &nativeCodex{t: t, cmd: cmd, stdin: stdin, waits: map[int]chan json.RawMessage{}, done: map[string]chan struct{}{}, ended: make(chan struct{})}
	go func() {
		defer close(n.ended)
		br := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			var m struct {
				ID     *int            `json:"id"`
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if json.Unmarshal(line, &m) == nil {
				switch {
				case m.ID != nil && m.Method == "":
					n.mu.Lock()
					ch := n.waits[*m.ID]
					n.mu.Unlock()
					if ch != nil {
						if m.Error != nil {
							ch <- nil
						} else {
							ch <- m.Result
						}
					}
				case m.Method == "turn/completed":
					var p struct {
						ThreadID string `json:"threadId"`
					}
					json.Unmarshal(m.Params, &p)
					n.turnDone(p.ThreadID) <- struct{}{}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(n.close)
	n.call("initialize", map[string]any{"clientInfo": map[string]any{"name": "codex_vscode", "title": nil, "version": "1.0.0"}, "capabilities": nil})
	return n
}

func (n *nativeCodex) turnDone(thread string) chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done[thread] == nil {
		n.done[thread] = make(chan struct{}, 16)
	}
	return n.done[thread]
}

func (n *nativeCodex) call(method string, params any) json.RawMessage {
	n.t.Helper()
	n.mu.Lock()
	n.next++
	id := n.next
	ch := make(chan json.RawMessage, 1)
	n.waits[id] = ch
	n.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if _, err := n.stdin.Write(append(b, '\n')); err != nil {
		n.t.Fatalf("native codex %s: %v", method, err)
	}
	select {
	case r := <-ch:
		if r == nil {
			n.t.Fatalf("native codex %s: an error answer", method)
		}
		return r
	case <-time.After(wait):
		n.t.Fatalf("native codex %s: no answer in %v", method, wait)
	}
	return nil
}

// thread starts a thread in cwd, runs one real turn per prompt, names it.
func (n *nativeCodex) thread(cwd, name string, prompts ...string) string {
	n.t.Helper()
	var r struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	json.Unmarshal(n.call("thread/start", map[string]any{"cwd": cwd}), &r)
	for _, p := range prompts {
		n.call("turn/start", map[string]any{"threadId": r.Thread.ID, "input": []map[string]any{{"type": "text", "text": p, "text_elements": []any{}}}})
		select {
		case <-n.turnDone(r.Thread.ID):
		case <-time.After(wait):
			n.t.Fatalf("native turn on %s did not complete", r.Thread.ID)
		}
	}
	n.call("thread/name/set", map[string]any{"threadId": r.Thread.ID, "name": name})
	return r.Thread.ID
}

func (n *nativeCodex) close() {
	n.stdin.Close()
	select {
	case <-n.ended:
	case <-time.After(5 * time.Second):
		syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	}
	n.cmd.Wait()
}

// The Codex catalog on two nodes, with the real Codex
// (docs/rules/codex-supervision.md): both hosts' rows under their node ids (R-CX-SCOPE-2); a bounded
// transcript page shown oldest first (R-CX-TRN-3); continue opens a
// supervised run, which the source's row then names, and the branch's
// canonical thread shows that run as the holder of its lease while it is
// busy; archive needs the no-other-runner confirmation (R-CX-ARC-1); a
// node that goes down is its own error while the other host's rows stay
// (R-CX-HOST-1).
func TestCodexCatalogOnTwoNodes(t *testing.T) {
	bin := realcli.BinDir(t, "codex")
	fake := fakemodel.NewOpenAI()
	defer fake.Close()
	env := integration.NewEnv(t, integration.Options{Heartbeat: 2 * time.Second})
	node := func() (*integration.AgentProc, string) {
		home := filepath.Join(t.TempDir(), "user", ".codex")
		writeCodexConfig(t, home, fake)
		a := env.StartAgentProcess(integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath,
			Config: fmt.Sprintf("\n[codex_supervision]\nenabled = true\ncodex_home = %q\n[codex_supervision.env]\nFAKE_OPENAI_KEY = \"test\"\n", home)})
		a.AwaitConnected(wait)
		t.Cleanup(func() { stopAgent(t, a) })
		return a, home
	}
	a, homeA := node()
	b, homeB := node()
	work := t.TempDir()
	na := startNative(t, bin, homeA)
	alpha := na.thread(work, "Alpha source", "first question", "second question")
	beta := na.thread(work, "beta", "b1")
	na.close()
	nb := startNative(t, bin, homeB)
	gamma := nb.thread(work, "Gamma on B", "g1")
	nb.close()

	p, _, err := env.Coord.Store.PrincipalByCredential(context.Background(), auth.Hash(env.AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, env: env, agent: a, admin: env.Client(env.AdminToken), adminID: p.ID}
	tab := f.signIn()
	f.open(tab, "/codex")
	host := func(id string) string { return fmt.Sprintf(`#codex-hosts [data-host=%s]`, js(id)) }
	row := func(h, thread string) string { return fmt.Sprintf(`%s [data-thread=%s]`, host(h), js(thread)) }
	tab.Await("both hosts with their rows", fmt.Sprintf(`!!document.querySelector(%s) && !!document.querySelector(%s) && !!document.querySelector(%s)`,
		js(row(a.ID, alpha)), js(row(a.ID, beta)), js(row(b.ID, gamma))), wait)
	awaitText(tab, "the title", row(a.ID, alpha), "Alpha source")

	// A transcript page, oldest first.
	tab.Click(row(a.ID, alpha) + " .act-transcript")
	tab.Await("the turns in order", `(() => { const t = document.querySelector('#transcript')?.textContent || ''; return t.indexOf('first question') >= 0 && t.indexOf('first question') < t.indexOf('second question'); })()`, wait)
	tab.Exec(`document.querySelector('#transcript-dialog').close()`)

	// Archive, behind the confirmation.
	tab.Click(row(a.ID, beta) + " .act-archive")
	if exists(tab, "#archive-confirm:not([disabled])") {
		t.Fatal("archive is possible without the confirmation")
	}
	tab.Click("#archive-sure")
	tab.Click("#archive-confirm")
	tab.Await("beta gone from the catalog", fmt.Sprintf(`!document.querySelector(%s)`, js(row(a.ID, beta))), wait)
	var cat apitypes.CodexCatalog
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/catalog/codex/threads?host="+a.ID, nil, &cat)
	for _, r := range cat.Hosts[0].Rows {
		if r.ThreadID == beta {
			t.Fatal("the archived thread is still listed")
		}
	}

	// Continue: a supervised run, and its first turn from the browser.
	tab.Click(row(a.ID, alpha) + " .act-continue")
	tab.Await("the supervised run", `location.pathname.startsWith('/runs/') && !!document.querySelector('#input') && !document.querySelector('#input').disabled`, wait)
	ref := strings.TrimPrefix(browser.Eval[string](tab, `location.pathname`), "/runs/")
	tab.Type("#input", "third question\r")
	tab.Await("the branch's reply", hasItem("assistant", "pong: third question"), 2*wait)
	run := f.admin.AwaitRun(ref, wait, "committed", func(r apitypes.Run) bool {
		return r.CodexBinding != nil && r.CodexBinding.State == apitypes.CodexBranchCommitted && r.State == apitypes.StateIdle
	})
	canon := run.CodexBinding.CanonicalThreadID
	awaitText(tab, "the binding on the run", "#codex-binding", "committed")
	tab.Click("#codex-history")
	awaitText(tab, "the branch's visible history", "#codex-history-dialog .transcript", "second question")
	tab.Exec(`document.querySelector('#codex-history-dialog').close()`)
	f.open(tab, "/codex")
	awaitText(tab, "the source names its supervised run", row(a.ID, alpha)+" .supervised", ref)
	tab.Await("continue opens it again", fmt.Sprintf(`!!document.querySelector(%s)`, js(row(a.ID, alpha)+" .act-open")), wait)
	awaitText(tab, "the canonical thread is busy, written by the run", row(a.ID, canon)+" .lease", ref)
	if exists(tab, row(a.ID, canon)+" .act-archive") || exists(tab, row(a.ID, canon)+" .act-continue") {
		t.Fatal("a busy thread offers archive or continue")
	}

	// Node B goes down: its own error, node A's rows stay.
	stopAgent(t, b)
	b.AwaitDisconnectedFrom(env, wait)
	tab.Click("#codex-go")
	tab.Await("B's error, A's rows", fmt.Sprintf(`!!document.querySelector(%s) && !!document.querySelector(%s + ' .host-error')`, js(row(a.ID, alpha)), js(host(b.ID))), wait)
	awaitText(tab, "the error in words", host(b.ID)+" .host-error", "node_unreachable")
}

// stopAgent ends the agent process gracefully (its codex children with it)
// and waits until it is gone.
func stopAgent(t *testing.T, a *integration.AgentProc) {
	pid := a.Pid()
	if syscall.Kill(pid, syscall.SIGTERM) != nil {
		return
	}
	integration.Await(t, wait, "the agent to exit", func() bool { return syscall.Kill(pid, 0) != nil })
}
