package handoff

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

const (
	claudeID = "11111111-2222-4333-8444-555555555555"
	codexID  = "01a23643-8a79-7b72-93b2-655098698f6d"
	geminiID = "8342c94b-f2a5-4a64-b708-76b817404f1c"
)

// layout is where each file reader looks for its conversation, relative to
// the profile home, with Cwd "/w/p".
func layout(tool string) string {
	switch tool {
	case ToolClaude:
		return filepath.Join(".claude", "projects", claudeSlug("/w/p"), claudeID+".jsonl")
	case ToolCodex:
		return filepath.Join(".codex", "sessions", "2026", "12", "02", "rollout-2026-12-02T10-18-45-"+codexID+".jsonl")
	case ToolGemini:
		return filepath.Join(".gemini", "tmp", "p", "chats", "session-2026-12-02T10-18-"+geminiID[:8]+".jsonl")
	}
	panic(tool)
}

// homeWith makes a profile home holding one conversation of tool with the
// given content, and returns its Source and the file's path.
func homeWith(t testing.TB, tool string, content []byte) (Source, string) {
	t.Helper()
	home := t.TempDir()
	p := filepath.Join(home, layout(tool))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, content, 0o600); err != nil {
		t.Fatal(err)
	}
	id := map[string]string{ToolClaude: claudeID, ToolCodex: codexID, ToolGemini: geminiID}[tool]
	if tool == ToolGemini {
		if err := os.WriteFile(filepath.Join(home, ".gemini", "projects.json"), []byte(`{"projects":{"/w/p":"p"}}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return Source{Tool: tool, Home: home, ConversationID: id, Cwd: "/w/p"}, p
}

// geminiHeader is the first line of a chat log of geminiID.
const geminiHeader = `{"sessionId":"` + geminiID + `","projectHash":"abc","startTime":"2026-12-02T10:18:45.000Z","lastUpdated":"2026-12-02T10:18:45.000Z","kind":"main"}`

// sample is a short conversation of each tool: hello, pong, a tool call
// and its result, "bye", "ok".
var sample = map[string]string{
	ToolClaude: `{"type":"queue-operation","operation":"enqueue","content":"hello"}
{"type":"user","uuid":"u1","timestamp":"2026-12-02T10:18:45.000Z","cwd":"/w/p","message":{"role":"user","content":"hello"}}
{"type":"attachment","attachment":{"type":"environment"}}
{"type":"assistant","uuid":"a1","timestamp":"2026-12-02T10:18:46.000Z","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"pong"}]}}
{"type":"assistant","uuid":"a2","timestamp":"2026-12-02T10:18:46.000Z","message":{"id":"msg_2","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/w/p/a.txt"}}]}}
{"type":"user","uuid":"u2","timestamp":"2026-12-02T10:18:47.000Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"text of a"}]}}
{"type":"user","uuid":"u3","timestamp":"2026-12-02T10:18:48.000Z","message":{"role":"user","content":"bye"}}
{"type":"cost-state","totalCostUSD":0}
{"type":"assistant","uuid":"a3","timestamp":"2026-12-02T10:18:49.000Z","message":{"id":"msg_3","role":"assistant","content":[{"type":"text","text":"ok"}]}}
`,
	ToolCodex: `{"timestamp":"2026-12-02T10:18:45.000Z","type":"session_meta","payload":{"id":"` + codexID + `","cwd":"/w/p"}}
{"timestamp":"2026-12-02T10:18:45.000Z","type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"instructions"}]}}
{"timestamp":"2026-12-02T10:18:45.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/w/p</cwd>\n</environment_context>"}]}}
{"timestamp":"2026-12-02T10:18:45.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hello"}]}}
{"timestamp":"2026-12-02T10:18:46.000Z","type":"event_msg","payload":{"type":"item_completed","item":{"type":"AgentMessage"}}}
{"timestamp":"2026-12-02T10:18:46.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"pong"}]}}
{"timestamp":"2026-12-02T10:18:46.000Z","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"cat a.txt\"}","call_id":"call_1"}}
{"timestamp":"2026-12-02T10:18:47.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_1","output":"text of a"}}
{"timestamp":"2026-12-02T10:18:48.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"bye"}]}}
{"timestamp":"2026-12-02T10:18:49.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}}
`,
	ToolGemini: geminiHeader + `
{"$set":{"messages":[{"id":"ctx","timestamp":"2026-12-02T10:18:45.000Z","type":"user","content":[{"text":"<session_context>\nx\n</session_context>"}]}],"lastUpdated":"2026-12-02T10:18:45.000Z"}}
{"id":"m1","timestamp":"2026-12-02T10:18:45.000Z","type":"user","content":[{"text":"hello"}]}
{"$set":{"lastUpdated":"2026-12-02T10:18:45.000Z"}}
{"id":"m2","timestamp":"2026-12-02T10:18:46.000Z","type":"gemini","content":"pong","thoughts":[],"model":"gemini-2.5-pro"}
{"id":"m3","timestamp":"2026-12-02T10:18:46.000Z","type":"gemini","content":"","toolCalls":[{"id":"c1","name":"read_file","args":{"file_path":"/w/p/a.txt"},"result":[{"functionResponse":{"id":"c1","name":"read_file","response":{"output":"text of a"}}}],"status":"success","timestamp":"2026-12-02T10:18:47.000Z"}]}
{"id":"m4","timestamp":"2026-12-02T10:18:47.000Z","type":"user","content":[{"functionResponse":{"id":"c1","name":"read_file","response":{"output":"text of a"}}}]}
{"id":"m5","timestamp":"2026-12-02T10:18:48.000Z","type":"user","content":[{"text":"bye"}]}
{"id":"m6","timestamp":"2026-12-02T10:18:49.000Z","type":"gemini","content":"ok"}
`,
}

// sampleSaid is what every sample reads as (the tool names differ).
var sampleSaid = map[string][]string{
	ToolClaude: {"user: hello", "assistant: pong", `tool_call Read: {"file_path":"/w/p/a.txt"}`, "tool_result Read: text of a", "user: bye", "assistant: ok"},
	ToolCodex:  {"user: hello", "assistant: pong", `tool_call exec_command: {"cmd":"cat a.txt"}`, "tool_result exec_command: text of a", "user: bye", "assistant: ok"},
	ToolGemini: {"user: hello", "assistant: pong", `tool_call read_file: {"file_path":"/w/p/a.txt"}`, "tool_result read_file: text of a", "user: bye", "assistant: ok"},
}

var fileTools = []string{ToolClaude, ToolCodex, ToolGemini}

// parseWith runs tool's line reader over content, as Read does after it
// found the file.
func parseWith(tool string, content []byte, lim limits) (Conversation, error) {
	c := Conversation{Tool: tool}
	var line func([]byte) bool
	var done func()
	switch tool {
	case ToolClaude:
		line = newClaudeReader(&c).line
	case ToolCodex:
		line = newCodexReader(&c).line
	case ToolGemini:
		r := newGeminiReader(&c)
		line, done = r.line, r.finish
	case ToolOpenCode:
		err := decodeExport(bytes.NewReader(content), lim, &c)
		c.finish()
		return c, err
	}
	un, n, err := readLines(context.Background(), bufio.NewReader(bytes.NewReader(content)), lim, line)
	if err != nil {
		return Conversation{}, err
	}
	if done != nil {
		done()
	}
	c.Unreadable += un
	c.Bytes = n
	c.finish()
	return c, nil
}

func readT(t *testing.T, src Source) Conversation {
	t.Helper()
	c, err := Read(context.Background(), src)
	if err != nil {
		t.Fatalf("Read(%s): %v", src.Tool, err)
	}
	return c
}

// wantErr fails unless err is an *Error matching target.
func wantErr(t *testing.T, what string, err error, target *Error) {
	t.Helper()
	var e *Error
	if !is(err, target) || !errors.As(err, &e) || e.Msg == "" {
		t.Errorf("%s: got %v, want %s", what, err, target.Code)
	}
}
