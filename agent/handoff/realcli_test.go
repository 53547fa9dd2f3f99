package handoff

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/integration/fakemodel"
)

// TestRealClaude: a Claude Code session against the fake Messages server,
// with a tool read, a file write, a failing read and a multi-line answer
// holding ~~~, is read from its transcript (R-HOF-6), first while a turn is
// still streaming (R-HOF-3: read as it is), then after the exit.
func TestRealClaude(t *testing.T) {
	t.Parallel()
	bin := realBinDir(t, "claude")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	p := newProfile(t, bin)
	p.env = append(p.env, "CLAUDE_CONFIG_DIR="+filepath.Join(p.home, ".claude"), "ANTHROPIC_BASE_URL="+fake.URL(),
		"ANTHROPIC_API_KEY=test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_RETRIES=0")
	pr := startProc(t, p, "claude", "--print", "--input-format", "stream-json", "--output-format", "stream-json",
		"--verbose", "--setting-sources", "", "--permission-mode", "acceptEdits")
	var sid string
	turn := func(text string) {
		t.Helper()
		pr.send(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text}})
		res := pr.await("result of "+text, func(m map[string]any) bool { return m["type"] == "result" })
		if res["is_error"] != false {
			t.Fatalf("turn %q ended in error: %v", text, res)
		}
		sid = str(res, "session_id")
	}
	file := func(name string) string { return filepath.Join(p.work, name) }
	input := func(kv ...string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		b, _ := json.Marshal(m)
		return string(b)
	}

	turn("hello")
	fake.Push(fakemodel.Tool("Read", input("file_path", file("notes.txt"))), fakemodel.Text("It says canary-in-notes."))
	turn("Please look at notes.txt\nand tell me what it says.")
	fake.Push(fakemodel.Tool("Write", input("file_path", file("out.txt"), "content", "new file\n")),
		fakemodel.Text("Done:\n~~~\nnew file\n~~~\nwritten."))
	turn("Write a file out.txt with a greeting.")
	fake.Push(fakemodel.Tool("Read", input("file_path", file("missing.txt"))), fakemodel.Text("missing.txt does not exist."))
	turn("Read missing.txt")

	// A turn held mid-stream: the session is running, and a preview reads
	// it as it is, with the last request and nothing of its answer.
	gate := fakemodel.NewGate()
	fake.Push(fakemodel.Held(gate))
	pr.send(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": "one more thing"}})
	select {
	case <-gate.Arrived():
	case <-pr.exited:
		t.Fatal("claude exited before the held answer")
	}
	src := Source{Tool: ToolClaude, Home: p.home, ConversationID: sid, Cwd: p.work}
	running, err := Read(ctxT(t), src)
	if err != nil {
		t.Fatalf("Read while running: %v", err)
	}
	if running.Unreadable != 0 {
		t.Errorf("read while running: %d unreadable, want 0", running.Unreadable)
	}
	gate.Release()
	pr.await("held result", func(m map[string]any) bool { return m["type"] == "result" })
	pr.wait()

	c, err := Read(ctxT(t), src)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	want := []string{
		"user: hello", "assistant: pong: hello",
		"user: Please look at notes.txt\nand tell me what it says.",
		"tool_call Read: " + input("file_path", file("notes.txt")), "tool_result Read: 1\tcanary-in-notes*",
		"assistant: It says canary-in-notes.",
		"user: Write a file out.txt with a greeting.",
		`tool_call Write: {"file_path":"` + file("out.txt") + `","content":"new file\n"}`, "tool_result Write: File created successfully*",
		"assistant: Done:\n~~~\nnew file\n~~~\nwritten.",
		"user: Read missing.txt",
		"tool_call Read: " + input("file_path", file("missing.txt")), "tool_result Read: *(error)",
		"assistant: missing.txt does not exist.",
		"user: one more thing", "assistant: held pong: one more thing",
	}
	if got := said(c); !matches(got, want) {
		t.Errorf("records:\n%q\nwant\n%q", got, want)
	}
	// Claude Code writes its transcript in batches, so the read while
	// running may stop anywhere after the turns already answered: it must
	// be a prefix of the final conversation, holding at least those.
	if n := len(running.Records); n < 10 || n > len(c.Records) || !slices.Equal(said(running), said(c)[:n]) {
		t.Errorf("read while running: %q, want a prefix of the final records holding the first ten", said(running))
	}
	if c.Turns != 10 || c.Unreadable != 0 || c.Cwd != p.work {
		t.Errorf("turns %d, unreadable %d, cwd %q; want 10, 0, %q", c.Turns, c.Unreadable, c.Cwd, p.work)
	}
	checkOutputs(t, c, "First request:\n> hello\n", "> one more thing", "> held pong: one more thing",
		"Read ×2", "Write ×1", "Files changed: out.txt", "Files read: notes.txt, missing.txt")
	saveFixture(t, c.Path, "claude.jsonl", p, map[string]string{sid: "00000000-0000-4000-8000-00000000c1a0"})
}

// TestRealCodex: a Codex thread (app-server) against the fake Responses
// server, with a command that works and one that fails, is read from its
// rollout while the app-server still runs, and again after it exits.
func TestRealCodex(t *testing.T) {
	t.Parallel()
	bin := realBinDir(t, "codex")
	fake := fakemodel.NewOpenAI()
	defer fake.Close()
	p := newProfile(t, bin)
	codexHome := filepath.Join(p.home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
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
`
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p.env = append(p.env, "CODEX_HOME="+codexHome, "FAKE_OPENAI_KEY=test")
	pr := startProc(t, p, "codex", "app-server")
	pr.rpc(1, "initialize", map[string]any{"clientInfo": map[string]any{"name": "olivares", "version": "0"}})
	thread := str(pr.rpc(2, "thread/start", map[string]any{"cwd": p.work}), "result", "thread", "id")
	id := 3
	turn := func(text string) {
		t.Helper()
		pr.rpc(id, "turn/start", map[string]any{"threadId": thread,
			"input": []any{map[string]any{"type": "text", "text": text, "text_elements": []any{}}}})
		id++
		done := pr.await("turn/completed of "+text, func(m map[string]any) bool { return m["method"] == "turn/completed" })
		if s := str(done, "params", "turn", "status"); s != "completed" {
			t.Fatalf("turn %q: status %q", text, s)
		}
	}
	turn("hello codex")
	fake.Push(fakemodel.Tool("exec_command", `{"cmd":"echo canary-from-tool"}`), fakemodel.Text("ran it"))
	turn("run echo")
	fake.Push(fakemodel.Tool("exec_command", `{"cmd":"ls /nonexistent-olivares-dir"}`), fakemodel.Text("it failed"))
	turn("run a failing command")

	src := Source{Tool: ToolCodex, Home: p.home, ConversationID: thread}
	running, err := Read(ctxT(t), src)
	if err != nil {
		t.Fatalf("Read while the app-server runs: %v", err)
	}
	pr.wait()
	c, err := Read(ctxT(t), src)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	want := []string{
		"user: hello codex", "assistant: pong: hello codex",
		"user: run echo",
		`tool_call exec_command: {"cmd":"echo canary-from-tool"}`, "tool_result exec_command: *",
		"assistant: ran it",
		"user: run a failing command",
		`tool_call exec_command: {"cmd":"ls /nonexistent-olivares-dir"}`, "tool_result exec_command: *",
		"assistant: it failed",
	}
	for name, conv := range map[string]Conversation{"running": running, "exited": c} {
		if got := said(conv); !matches(got, want) {
			t.Errorf("%s: records:\n%q\nwant\n%q", name, got, want)
		}
		if conv.Turns != 6 || conv.Unreadable != 0 || conv.Cwd != p.work {
			t.Errorf("%s: turns %d, unreadable %d, cwd %q; want 6, 0, %q", name, conv.Turns, conv.Unreadable, conv.Cwd, p.work)
		}
	}
	if out := c.Records[4].Text; !strings.Contains(out, "canary-from-tool") {
		t.Errorf("echo result %q, want the command's output", out)
	}
	checkOutputs(t, c, "First request:\n> hello codex\n", "> run a failing command", "Last answer:\n> it failed", "exec_command ×2")
	saveFixture(t, c.Path, "codex.jsonl", p, map[string]string{thread: "00000000-0000-7000-8000-0000000c0de0"})
}

// TestRealGemini: a Gemini CLI session (gemini --acp) against the fake
// Gemini API, with a read_file call, is read from its chat log, found
// through projects.json among the throwaway files every start writes.
func TestRealGemini(t *testing.T) {
	t.Parallel()
	bin := realBinDir(t, "gemini")
	fake := fakemodel.NewGemini()
	defer fake.Close()
	p := newProfile(t, bin, "GEMINI_API_KEY=test")
	p.env = append(p.env, "GOOGLE_GEMINI_BASE_URL="+fake.URL())
	pr := startProc(t, p, "gemini", "--acp")
	pr.answer = allowACP
	pr.rpc(0, "initialize", map[string]any{"protocolVersion": 1,
		"clientCapabilities": map[string]any{"fs": map[string]any{"readTextFile": false, "writeTextFile": false}, "terminal": false}})
	sid := str(pr.rpc(1, "session/new", map[string]any{"cwd": p.work, "mcpServers": []any{}}), "result", "sessionId")
	id := 2
	turn := func(text string) {
		t.Helper()
		res := pr.rpc(id, "session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": text}}})
		id++
		if s := str(res, "result", "stopReason"); s != "end_turn" {
			t.Fatalf("prompt %q: stopReason %q", text, s)
		}
	}
	turn("hello gemini")
	fake.Push(fakemodel.Tool("read_file", fmt.Sprintf(`{"file_path":%q}`, filepath.Join(p.work, "notes.txt"))), fakemodel.Text("It says canary-in-notes."))
	turn("read notes.txt")
	pr.wait()

	c, err := Read(ctxT(t), Source{Tool: ToolGemini, Home: p.home, ConversationID: sid, Cwd: p.work})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	want := []string{
		"user: hello gemini", "assistant: pong: hello gemini",
		"user: read notes.txt",
		fmt.Sprintf(`tool_call read_file: {"file_path":%q}`, filepath.Join(p.work, "notes.txt")), "tool_result read_file: canary-in-notes\n",
		"assistant: It says canary-in-notes.",
	}
	if got := said(c); !matches(got, want) {
		t.Errorf("records:\n%q\nwant\n%q", got, want)
		for _, r := range fake.Requests() {
			t.Logf("model request %s %s prompt %q reply %+v", r.Method, r.Path, r.Prompt, r.Reply)
		}
	}
	if c.Turns != 4 || c.Unreadable != 0 || c.Cwd != p.work {
		t.Errorf("turns %d, unreadable %d, cwd %q; want 4, 0, %q", c.Turns, c.Unreadable, c.Cwd, p.work)
	}
	// Without the cwd, every project of projects.json is searched.
	c2, err := Read(ctxT(t), Source{Tool: ToolGemini, Home: p.home, ConversationID: sid})
	if err != nil || !slices.Equal(said(c2), said(c)) {
		t.Errorf("Read without Cwd: %v, %q; want the same records", err, said(c2))
	}
	checkOutputs(t, c, "First request:\n> hello gemini\n", "read_file ×1", "Files read: notes.txt")
	saveFixture(t, c.Path, "gemini.jsonl", p, map[string]string{sid: "00000000-0000-4000-8000-0000000e3171", sid[:8]: "00000000"})
}

// TestRealOpenCode: an OpenCode session (opencode acp) against the fake
// Messages server, with a read and a write, is read through `opencode
// export`, run once and offline under the profile's environment.
func TestRealOpenCode(t *testing.T) {
	t.Parallel()
	bin := realBinDir(t, "opencode")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	p := newProfile(t, bin, "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1")
	cfg := filepath.Join(p.home, ".config", "opencode")
	if err := os.MkdirAll(cfg, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := `{"autoupdate":false,"share":"disabled","model":"anthropic/claude-sonnet-4-5",` +
		`"provider":{"anthropic":{"options":{"baseURL":"` + fake.URL() + `/v1","apiKey":"test"}}}}`
	if err := os.WriteFile(filepath.Join(cfg, "opencode.json"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	// No .npmrc: the acp run gets the offline registry from the
	// environment, and Read must write one before its export.
	pr := startProc(t, append2(p, "NPM_CONFIG_REGISTRY=http://127.0.0.1:9/"), "opencode", "acp")
	pr.answer = allowACP
	pr.rpc(0, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	sid := str(pr.rpc(1, "session/new", map[string]any{"cwd": p.work, "mcpServers": []any{}}), "result", "sessionId")
	id := 2
	turn := func(text string) {
		t.Helper()
		res := pr.rpc(id, "session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": text}}})
		id++
		if s := str(res, "result", "stopReason"); s != "end_turn" {
			t.Fatalf("prompt %q: stopReason %q", text, s)
		}
	}
	turn("hello opencode")
	fake.Push(fakemodel.Tool("read", fmt.Sprintf(`{"filePath":%q}`, filepath.Join(p.work, "notes.txt"))), fakemodel.Text("read it"))
	turn("read notes.txt")
	pr.wait()
	before := len(fake.Requests())

	c, err := Read(ctxT(t), Source{Tool: ToolOpenCode, Home: p.home, ConversationID: sid, Env: p.env,
		OpenCodeBin: filepath.Join(p.bin, "opencode")})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	want := []string{
		"user: hello opencode", "assistant: pong: hello opencode",
		"user: read notes.txt",
		fmt.Sprintf(`tool_call read: {"filePath":%q}`, filepath.Join(p.work, "notes.txt")), "tool_result read: *canary-in-notes*",
		"assistant: read it",
	}
	if !matches(said(c), want) {
		t.Errorf("records:\n%q\nwant\n%q", said(c), want)
	}
	if c.Turns != 4 || c.Unreadable != 0 || c.Cwd != p.work {
		t.Errorf("turns %d, unreadable %d, cwd %q; want 4, 0, %q", c.Turns, c.Unreadable, c.Cwd, p.work)
	}
	if n := len(fake.Requests()); n != before {
		t.Errorf("the export made %d requests to the model server, want none", n-before)
	}
	if b, err := os.ReadFile(filepath.Join(p.home, ".npmrc")); err != nil || string(b) != "registry=http://127.0.0.1:9/\n" {
		t.Errorf(".npmrc after Read: %q, %v; want the offline registry", b, err)
	}
	// An id OpenCode does not know: conversation_unavailable.
	_, err = Read(ctxT(t), Source{Tool: ToolOpenCode, Home: p.home, ConversationID: "ses_olivaresbogus", Env: p.env,
		OpenCodeBin: filepath.Join(p.bin, "opencode")})
	if !is(err, ErrConversationUnavailable) {
		t.Errorf("unknown session: %v, want conversation_unavailable", err)
	}
	checkOutputs(t, c, "First request:\n> hello opencode\n", "read ×1", "Files read: notes.txt")
	if *update {
		// The fixture is the export itself, as Read got it.
		out := filepath.Join(t.TempDir(), "export.json")
		if err := os.WriteFile(out, exportOf(t, p, sid), 0o600); err != nil {
			t.Fatal(err)
		}
		saveFixture(t, out, "opencode.json", p, map[string]string{sid: "ses_0000000000000penc0de"})
	}
}

func append2(p profile, env ...string) profile {
	p.env = append(slices.Clone(p.env), env...)
	return p
}

// allowACP answers an ACP permission request with the first "allow once"
// option.
func allowACP(p *proc, m map[string]any) {
	if m["method"] != "session/request_permission" {
		return
	}
	params, _ := m["params"].(map[string]any)
	opts, _ := params["options"].([]any)
	choice := "proceed_once"
	for _, o := range opts {
		om, _ := o.(map[string]any)
		if k, _ := om["kind"].(string); k == "allow_once" {
			choice, _ = om["optionId"].(string)
			break
		}
	}
	p.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": choice}}})
}
