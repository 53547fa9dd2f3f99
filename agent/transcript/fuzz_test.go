package transcript

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// The record parsers read files that the tools (and whoever can write into
// a profile home) wrote: no input may make them panic, and what they keep
// must hold the index's invariants. Seeds: testdata/fuzz/<Fuzz…>/, real
// records of the fixtures and hand-made edge cases.

func checkIndex(t *testing.T, ix *fileIndex) {
	t.Helper()
	users := 0
	for i, m := range ix.msgs {
		if m.role != roleUser && m.role != roleAssistant {
			t.Fatalf("message %d: role %d", i+1, m.role)
		}
		if !utf8.ValidString(m.first) || utf8.RuneCountInString(m.first) > MaxFirstLineRunes || strings.ContainsRune(m.first, '\n') {
			t.Fatalf("message %d: first line %q", i+1, m.first)
		}
		if m.role == roleUser {
			if users >= len(ix.userIDs) || int(ix.userIDs[users]) != i+1 {
				t.Fatalf("user ids %v out of step at message %d", ix.userIDs, i+1)
			}
			users++
		}
	}
	if users != len(ix.userIDs) {
		t.Fatalf("%d user messages, %d user ids", users, len(ix.userIDs))
	}
}

func FuzzClaudeRecord(f *testing.F) {
	f.Add([]byte(`{"type":"user","timestamp":"2026-11-01T00:00:00Z","message":{"role":"user","content":"hi"}}`))
	f.Add([]byte(`{"type":"assistant","message":{"id":"m","role":"assistant","model":"x","content":[{"type":"tool_use","id":"t","name":"Agent","input":{"run_in_background":false}}]}}`))
	f.Add([]byte(`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"x"}],"is_error":true}]},"toolUseResult":{"status":"completed","agentId":"a","content":[1]}}`))
	f.Add([]byte(`{"type":"queue-operation","operation":"enqueue","content":"<task-notification><task-id>a</task-id><status>killed</status></task-notification>"}`))
	f.Add([]byte(`{"type":"attachment","attachment":{"type":"queued_command","prompt":[{"type":"text","text":"x"}],"commandMode":"prompt"}}`))
	f.Add([]byte(`{"type":"system","subtype":"compact_boundary"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, kind := range []parseKind{kindClaudeMain, kindClaudeSub} {
			ix := newFileIndex(fileKey{}, kind)
			ix.record(0, line)
			ix.record(int64(len(line)+1), line) // twice: a tool use and its repeat
			checkIndex(t, ix)
			for _, how := range []uint8{fromClaudeUser, fromClaudeQueued, fromClaudeAssistant} {
				_ = claudeText(line, how, kind == kindClaudeSub)
			}
			buildFuzzActivity(t, ToolClaude, ix)
		}
	})
}

func FuzzCodexRecord(f *testing.F) {
	f.Add([]byte(`{"timestamp":"2026-12-02T10:18:21.672Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}`))
	f.Add([]byte(`{"type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"c"}}`))
	f.Add([]byte(`{"type":"response_item","payload":{"type":"function_call_output","call_id":"c","output":"Process running with session ID 7"}}`))
	f.Add([]byte(`{"type":"event_msg","payload":{"type":"item_completed","item":{"type":"CollabAgentToolCall","agents_states":{"k":{"status":"errored"}},"receiver_thread_ids":["k"]}}}`))
	f.Add([]byte(`{"type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"total_tokens":5},"model_context_window":10}}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		ix := newFileIndex(fileKey{}, kindCodex)
		ix.record(0, line)
		ix.record(int64(len(line)+1), line)
		checkIndex(t, ix)
		_ = codexText(line)
		buildFuzzActivity(t, ToolCodex, ix)
	})
}

// buildFuzzActivity assembles an Activity from a fuzzed state, live and
// not, with a home that does not exist (no sub-agent file or summary).
func buildFuzzActivity(t *testing.T, tool string, ix *fileIndex) {
	for _, live := range []bool{false, true} {
		a := emptyActivity(StateRead)
		b := &builder{c: NewCache(1, 0), src: Source{Tool: tool, Home: "/nonexistent/olivares-fuzz", Live: live}, a: &a,
			live: &LiveSnapshot{Dropped: 1, Progress: []ProgressSnapshot{{TaskID: "t", Rows: []WorkflowRow{{Type: "workflow_agent", Index: 1, PhaseIndex: 1, State: "start"}}}}}}
		if tool == ToolClaude {
			b.claude(&openedFile{rel: []string{".claude", "projects", "p", "s.jsonl"}}, ix, &WindowReport{ModelUsage: map[string]ModelWindow{"x": {ContextWindow: 1}}})
		} else {
			b.codex(ix)
		}
		b.finish()
		if _, err := json.Marshal(a); err != nil {
			t.Fatalf("activity does not marshal: %v", err)
		}
		for _, ag := range a.Agents {
			if !validState(ag.State) {
				t.Fatalf("agent state %q", ag.State)
			}
		}
		for _, tk := range a.Tasks {
			if !validState(tk.State) {
				t.Fatalf("task state %q", tk.State)
			}
		}
	}
}

// validState is one of R-ACT-3's states.
func validState(s string) bool {
	switch s {
	case StateRunning, StateCompleted, StateFailed, StateStopped, StateScheduled:
		return true
	}
	return false
}

func FuzzParseMessagesQuery(f *testing.F) {
	for _, s := range []string{"", "role=all&order=desc&limit=200&cursor=5", "text=1&limit=200", "q=%C3%A9&at=2026-11-20T10:00:00Z", "id=3", "limit=0", "role=x&role=y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseMessagesQuery(v)
		if err != nil {
			if !isErr(err, ErrInvalidParameter) {
				t.Fatalf("%q: %v, want ErrInvalidParameter", raw, err)
			}
			return
		}
		switch {
		case q.Role != RoleUser && q.Role != RoleAll,
			q.Order != OrderAsc && q.Order != OrderDesc,
			q.Limit < 1 || q.Limit > MaxLimit,
			q.Text && q.Limit > MaxTextLimit,
			len(q.Q) > MaxQueryBytes,
			q.Cursor < 0 || q.ID < 0:
			t.Fatalf("%q: accepted %+v", raw, q)
		}
	})
}

func FuzzLiveObserve(f *testing.F) {
	f.Add([]byte(`{"type":"result","modelUsage":{"m":{"contextWindow":1}}}`))
	f.Add([]byte(`{"duration_ms":1,"type":"result","modelUsage":{"m":{"contextWindow":1}}}`))
	f.Add([]byte(`{"type":"system","subtype":"task_progress","task_id":"t","workflow_progress":[{"type":"workflow_agent","index":1}]}`))
	f.Add([]byte(`{"type":"system","subtype":"init","mcp_servers":[{"name":"a","status":"b"}]}`))
	f.Add([]byte(`{"method":"turn/plan/updated","params":{"plan":[{"step":"s","status":"inProgress"}]},"emittedAtMs":1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		l := NewLive()
		l.Observe(line)
		s := l.Snapshot()
		if len(s.Progress) > MaxProgressSnapshots {
			t.Fatal("buffer over its bound")
		}
	})
}

// FuzzTopString: whenever the input is a JSON object whose key occurs once
// at the top level with a plain string value, topString finds exactly that
// value; it never reports a value that is not there.
func FuzzTopString(f *testing.F) {
	f.Add([]byte(`{"type":"user","x":{"type":"no"}}`), "type")
	f.Add([]byte(`{"a":[1,{"type":"x"}],"type":"y"}`), "type")
	f.Add([]byte(`{"a":"\"type\":\"z\"","type":"q"}`), "type")
	f.Add([]byte(` { "method" : "turn/plan/updated" } `), "method")
	f.Fuzz(func(t *testing.T, b []byte, key string) {
		got, ok := topString(b, key)
		if ok && !bytes.Contains(b, got) {
			t.Fatalf("value %q is not in the input", got)
		}
		if !json.Valid(b) {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return
		}
		count := 0
		var want *string
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return
			}
			if k == key {
				count++
				var s string
				if json.Unmarshal(raw, &s) == nil && !bytes.ContainsRune(raw, '\\') {
					want = &s
				}
			}
		}
		if count != 1 {
			return
		}
		// encoding/json turns invalid UTF-8 into U+FFFD; topString keeps
		// the bytes (the callers compare them with ASCII names).
		if want != nil && (!ok || (utf8.Valid(got) && string(got) != *want)) {
			t.Fatalf("topString(%q, %q) = %q, %t; want %q", b, key, got, ok, *want)
		}
		if want == nil && ok {
			t.Fatalf("topString(%q, %q) = %q; the value is no plain string", b, key, got)
		}
	})
}
