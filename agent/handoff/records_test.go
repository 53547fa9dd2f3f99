package handoff

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func parseT(t *testing.T, tool, content string) Conversation {
	t.Helper()
	c, err := parseWith(tool, []byte(content), defaultLimits)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return c
}

// TestClaudeRecords: sub-agent (sidechain) and meta records are left out, a
// record written twice is read once, the text blocks of one answer are one
// message, thinking is left out, images and tool_result blocks read as text.
func TestClaudeRecords(t *testing.T) {
	t.Parallel()
	c := parseT(t, ToolClaude, `{"type":"user","uuid":"u1","message":{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{}}]}}
{"type":"user","uuid":"m1","isMeta":true,"message":{"role":"user","content":"Caveat: injected"}}
{"type":"assistant","uuid":"s1","isSidechain":true,"message":{"id":"msg_s","role":"assistant","content":[{"type":"text","text":"sub-agent"}]}}
{"type":"assistant","uuid":"a1","message":{"id":"msg_1","role":"assistant","content":[{"type":"thinking","thinking":"hmm"}]}}
{"type":"assistant","uuid":"a2","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"part one"}]}}
{"type":"assistant","uuid":"a3","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"part two"}]}}
{"type":"assistant","uuid":"a3","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"part two"}]}}
{"type":"assistant","uuid":"a4","message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Edit","input":{"file_path":"/w/p/x.go","old_string":"a","new_string":"b"}}]}}
{"type":"user","uuid":"u2","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":[{"type":"text","text":"no match"},{"type":"image"}]}]}}
{"type":"assistant","uuid":"a5","message":{"id":"msg_2","role":"assistant","content":[{"type":"text","text":"next answer"}]}}
`)
	want := []string{"user: look", "user: [image]", "assistant: part one\n\npart two",
		`tool_call Edit: {"file_path":"/w/p/x.go","old_string":"a","new_string":"b"}`, "tool_result Edit: no match\n[image] (error)",
		"assistant: next answer"}
	if got := said(c); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if r := c.Records[3]; !r.Writes || !slices.Equal(r.Files, []string{"/w/p/x.go"}) {
		t.Errorf("Edit call: files %q, writes %t", r.Files, r.Writes)
	}
	if c.Unreadable != 0 || c.Turns != 3 {
		t.Errorf("unreadable %d, turns %d; want 0 and 3", c.Unreadable, c.Turns)
	}
}

// TestCodexRecords: developer items, the environment context and AGENTS.md
// are left out; custom tool calls (apply_patch) name their files; an output
// object with success false is an error; reasoning and events are left out.
func TestCodexRecords(t *testing.T) {
	t.Parallel()
	line := func(payload string) string {
		return `{"timestamp":"2026-12-02T10:18:45.5Z","type":"response_item","payload":` + payload + "}\n"
	}
	c := parseT(t, ToolCodex, line(`{"type":"message","role":"developer","content":[{"type":"input_text","text":"dev"}]}`)+
		line(`{"type":"message","role":"user","content":[{"type":"input_text","text":"# AGENTS.md instructions for /w/p\n..."}]}`)+
		line(`{"type":"message","role":"user","content":[{"type":"input_text","text":"<user_instructions>x</user_instructions>"}]}`)+
		line(`{"type":"message","role":"user","content":[{"type":"input_text","text":"fix it"},{"type":"input_image","image_url":"data:"}]}`)+
		line(`{"type":"reasoning","summary":[],"encrypted_content":"x"}`)+
		`{"timestamp":"x","type":"event_msg","payload":{"type":"agent_message","message":"dup"}}`+"\n"+
		line(`{"type":"custom_tool_call","name":"apply_patch","call_id":"c1","input":"*** Begin Patch\n*** Update File: a.go\n@@\n-x\n+y\n*** Add File: b.go\n+z\n*** End Patch"}`)+
		line(`{"type":"custom_tool_call_output","call_id":"c1","output":"Success"}`)+
		line(`{"type":"function_call","name":"shell","call_id":"c2","arguments":"{\"command\":[\"false\"]}"}`)+
		line(`{"type":"function_call_output","call_id":"c2","output":{"content":"exit 1","success":false}}`)+
		line(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}`))
	want := []string{"user: fix it\n[image]", "tool_call apply_patch: *** Begin Patch\n*** Update File: a.go\n@@\n-x\n+y\n*** Add File: b.go\n+z\n*** End Patch",
		"tool_result apply_patch: Success", `tool_call shell: {"command":["false"]}`, "tool_result shell: exit 1 (error)", "assistant: done"}
	if got := said(c); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if r := c.Records[1]; !r.Writes || !slices.Equal(r.Files, []string{"a.go", "b.go"}) {
		t.Errorf("apply_patch: files %q, writes %t", r.Files, r.Writes)
	}
	if at := c.Records[0].At; !at.Equal(time.Date(2026, 12, 2, 10, 18, 45, 5e8, time.UTC)) {
		t.Errorf("time %v", at)
	}
}

// TestGeminiReplay: the chat log is replayed as Gemini CLI loads it:
// $set.messages replaces the list, a message with a known id replaces it in
// place, $rewindTo drops that message and all after it, info/error/warning,
// commands, context and functionResponse-only user messages are not
// conversation.
func TestGeminiReplay(t *testing.T) {
	t.Parallel()
	c := parseT(t, ToolGemini, geminiHeader+`
{"$set":{"messages":[{"id":"old","type":"user","content":"replaced by the next $set"}]}}
{"$set":{"messages":[{"id":"ctx","type":"user","content":[{"text":"<session_context>x</session_context>"}]},{"id":"m1","type":"user","content":"first"},{"id":42}]}}
{"id":"m2","type":"gemini","content":""}
{"id":"i1","type":"info","content":"Switched model"}
{"id":"m2","type":"gemini","content":[{"text":"thought","thought":true},{"text":"answer one"}],"toolCalls":[{"id":"c1","name":"run_shell_command","args":{"command":"ls"},"status":"error","resultDisplay":"denied"}]}
{"id":"m3","type":"user","content":"/help"}
{"id":"m4","type":"user","content":"?"}
{"id":"m5","type":"user","content":"second, to be rewound"}
{"id":"m6","type":"gemini","content":"gone"}
{"$rewindTo":"m5"}
{"id":"m7","type":"user","content":[{"text":"third "},{"text":"in parts"},{"inlineData":{"mimeType":"image/png"}}]}
{"id":"m8","type":"user","content":[{"functionResponse":{"id":"c1","name":"run_shell_command","response":{"error":"denied"}}}]}
{"id":"m9","type":"gemini","content":"ok","toolCalls":[{"id":"c2","name":"write_file","args":{"file_path":"/w/p/n.txt","content":"x"},"result":[{"functionResponse":{"id":"c2","name":"write_file","response":{"error":"disk full"}}}],"status":"error"}]}
`)
	want := []string{"user: first", "assistant: answer one", `tool_call run_shell_command: {"command":"ls"}`, "tool_result run_shell_command: denied (error)",
		"user: third in parts[inline data]", "assistant: ok", `tool_call write_file: {"file_path":"/w/p/n.txt","content":"x"}`, "tool_result write_file: disk full (error)"}
	if got := said(c); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	// The message {"id":42} inside $set could not be read.
	if c.Unreadable != 1 || c.Turns != 4 {
		t.Errorf("unreadable %d, turns %d; want 1 and 4", c.Unreadable, c.Turns)
	}
	// A $rewindTo an unknown id clears everything, as Gemini CLI does.
	c = parseT(t, ToolGemini, geminiHeader+"\n"+`{"id":"m1","type":"user","content":"a"}`+"\n"+`{"$rewindTo":"zz"}`+"\n"+`{"id":"m2","type":"user","content":"b"}`+"\n")
	if got := said(c); !slices.Equal(got, []string{"user: b"}) {
		t.Errorf("after a rewind to an unknown id: %q", got)
	}
}

// TestOpenCodeParts: an export's messages: synthetic and ignored text is
// left out, tool parts give a call and its result (an error state is an
// error), file parts are named, patch parts list the files changed, and a
// message of the wrong shape counts as unreadable.
func TestOpenCodeParts(t *testing.T) {
	t.Parallel()
	c := parseT(t, ToolOpenCode, `{"info":{"id":"ses_1","directory":"/w/p"},"messages":[
 {"info":{"role":"user","time":{"created":1796281587827}},"parts":[{"type":"text","text":"hello"},{"type":"text","text":"injected","synthetic":true},{"type":"file","filename":"a.png"}]},
 {"info":{"role":"assistant"},"parts":[{"type":"step-start"},{"type":"reasoning","text":"hm"},{"type":"text","text":"answer"},
   {"type":"tool","tool":"bash","callID":"t1","state":{"status":"error","input":{"command":"false"},"error":"exit 1"}},
   {"type":"tool","tool":"edit","callID":"t2","state":{"status":"completed","input":{"filePath":"/w/p/a.go"},"output":"edited"}},
   {"type":"tool","tool":"read","callID":"t3","state":{"status":"running","input":{"filePath":"/w/p/b.go"}}},
   {"type":"patch","hash":"h","files":["/w/p/a.go","/w/p/c.go"]},{"type":"step-finish"}]},
 {"info":{"role":"user"},"parts":"not parts"},
 {"info":{"role":"user"},"parts":[{"type":"text","text":"ignored","ignored":true},{"type":"text","text":"bye"}]}],
 "extra":{"anything":[1,2,3]}}`)
	want := []string{"user: hello", "user: [file: a.png]", "assistant: answer",
		`tool_call bash: {"command":"false"}`, "tool_result bash: exit 1 (error)",
		`tool_call edit: {"filePath":"/w/p/a.go"}`, "tool_result edit: edited",
		`tool_call read: {"filePath":"/w/p/b.go"}`,
		"tool_call patch: /w/p/a.go /w/p/c.go", "user: bye"}
	if got := said(c); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if c.Unreadable != 1 || c.Cwd != "/w/p" || c.Turns != 4 {
		t.Errorf("unreadable %d, cwd %q, turns %d; want 1, /w/p, 4", c.Unreadable, c.Cwd, c.Turns)
	}
	if at := c.Records[0].At; !at.Equal(time.UnixMilli(1796281587827)) {
		t.Errorf("time %v", at)
	}
	s := Summary(c)
	if !strings.Contains(s, "Files changed: a.go, c.go\n") || !strings.Contains(s, "Files read: b.go\n") {
		t.Errorf("summary files:\n%s", s)
	}
}

// TestOpenCodeExportRun: how the export is run (R-HOF-6): once, with the
// profile's environment, offline (OPENCODE_DISABLE_* forced, the offline
// registry in the environment and in a new <HOME>/.npmrc, an existing one
// left alone), in HOME; and how its failures read.
func TestOpenCodeExportRun(t *testing.T) {
	t.Parallel()
	export := `{"info":{"id":"ses_x"},"messages":[{"info":{"role":"user"},"parts":[{"type":"text","text":"hi"}]}]}`
	home := t.TempDir()
	runs := filepath.Join(t.TempDir(), "runs")
	bin := stubOpenCode(t, `echo "$PWD $*" >> `+runs+`
env | sort > "$HOME/env.txt"
printf '%s' '`+export+`'`)
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + home, "XDG_DATA_HOME=" + home + "/data", "OPENCODE_DISABLE_AUTOUPDATE=0"}
	c, err := Read(context.Background(), Source{Tool: ToolOpenCode, Home: "/elsewhere", ConversationID: "ses_x", Env: env, OpenCodeBin: bin})
	if err != nil || !slices.Equal(said(c), []string{"user: hi"}) {
		t.Fatalf("Read: %q, %v", said(c), err)
	}
	if b, _ := os.ReadFile(runs); string(b) != home+" export ses_x\n" {
		t.Errorf("runs: %q, want one export of ses_x in HOME", b)
	}
	b, _ := os.ReadFile(filepath.Join(home, "env.txt"))
	for _, want := range []string{"HOME=" + home, "XDG_DATA_HOME=" + home + "/data", "OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_MODELS_FETCH=1", "NPM_CONFIG_REGISTRY=http://127.0.0.1:9/"} {
		if !slices.Contains(strings.Split(string(b), "\n"), want) {
			t.Errorf("export environment lacks %s:\n%s", want, b)
		}
	}
	if b, err := os.ReadFile(filepath.Join(home, ".npmrc")); err != nil || string(b) != "registry=http://127.0.0.1:9/\n" {
		t.Errorf(".npmrc %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(home, ".npmrc")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf(".npmrc mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	// An existing .npmrc is the owner's: left alone.
	if err := os.WriteFile(filepath.Join(home, ".npmrc"), []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(context.Background(), Source{Tool: ToolOpenCode, ConversationID: "ses_x", Env: env, OpenCodeBin: bin}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".npmrc")); string(b) != "mine\n" {
		t.Errorf(".npmrc rewritten: %q", b)
	}
	// Without HOME in Env, Source.Home is HOME; opencode is found on PATH.
	dir := filepath.Dir(bin)
	c, err = Read(context.Background(), Source{Tool: ToolOpenCode, Home: home, ConversationID: "ses_x", Env: []string{"PATH=/nonexistent:" + dir}})
	if err != nil || len(c.Records) != 1 {
		t.Errorf("opencode from PATH: %q, %v", said(c), err)
	}

	for _, tc := range []struct {
		name, script string
		timeout      time.Duration
		want         *Error
	}{
		{"unknown session", `echo 'Error: Session not found: '"$2" >&2; exit 1`, 0, ErrConversationUnavailable},
		{"nothing printed", `echo 'No sessions found' >&2; exit 0`, 0, ErrConversationUnavailable},
		{"failure", `echo 'boom' >&2; exit 2`, 0, ErrExportFailed},
		{"not an export", `echo '[1,2]'`, 0, ErrExportFailed},
		{"cut export", `printf '{"info":{},"messages":[{"info":'`, 0, ErrExportFailed},
		{"too slow", `exec sleep 60`, 300 * time.Millisecond, ErrExportTimeout},
		{"too slow, with a child", `sleep 60; echo never`, 300 * time.Millisecond, ErrExportTimeout},
	} {
		_, err := Read(context.Background(), Source{Tool: ToolOpenCode, Home: home, ConversationID: "ses_x", Env: env,
			OpenCodeBin: stubOpenCode(t, tc.script), Timeout: tc.timeout})
		wantErr(t, tc.name, err, tc.want)
		if tc.name == "failure" && (err == nil || !strings.Contains(err.Error(), "boom")) {
			t.Errorf("failure: %v, want the stderr line in the message", err)
		}
	}
	// The caller's context ends the export too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Read(ctx, Source{Tool: ToolOpenCode, Home: home, ConversationID: "ses_x", Env: env, OpenCodeBin: stubOpenCode(t, `exec sleep 60`)}); err != context.Canceled {
		t.Errorf("cancelled context: %v, want context.Canceled", err)
	}
}
