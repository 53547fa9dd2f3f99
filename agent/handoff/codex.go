package handoff

import (
	"context"
	"encoding/json"
	"os"
	"strings"
)

// codexLine is a Codex rollout record (real-clis.md §2.3):
// {"timestamp","type","payload"}. The conversation is in the response_item
// records; event_msg records repeat it for clients, and session_meta,
// turn_context, world_state and token_usage_record are bookkeeping.
type codexLine struct {
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
}

type codexItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Input     json.RawMessage `json:"input"`
	Action    json.RawMessage `json:"action"`
	CallID    string          `json:"call_id"`
	Output    json.RawMessage `json:"output"`
	Cwd       string          `json:"cwd"`
}

// codexContextPrefixes start the user items Codex writes itself: the
// environment block and the project instructions (AGENTS.md).
var codexContextPrefixes = []string{"<environment_context>", "<user_instructions>", "# AGENTS.md instructions"}

type codexReader struct {
	c     *Conversation
	names map[string]string // call_id → tool name
}

func newCodexReader(c *Conversation) *codexReader {
	return &codexReader{c: c, names: map[string]string{}}
}

func (r *codexReader) line(b []byte) bool {
	var l codexLine
	if json.Unmarshal(b, &l) != nil {
		return false
	}
	switch l.Type {
	case "session_meta":
		var m codexItem
		if json.Unmarshal(l.Payload, &m) != nil {
			return false
		}
		if r.c.Cwd == "" {
			r.c.Cwd = m.Cwd
		}
		return true
	case "response_item":
	default:
		return true
	}
	var it codexItem
	if json.Unmarshal(l.Payload, &it) != nil {
		return false
	}
	at := parseTime(l.Timestamp)
	switch it.Type {
	case "message":
		text, ok := codexText(it.Content)
		if !ok {
			return false
		}
		switch it.Role {
		case "user":
			trimmed := strings.TrimSpace(text)
			for _, p := range codexContextPrefixes {
				if strings.HasPrefix(trimmed, p) {
					return true
				}
			}
			r.add(message(KindUser, at, text))
		case "assistant":
			r.add(message(KindAssistant, at, text))
		}
		// developer and system items are instructions, not conversation.
	case "function_call":
		r.names[it.CallID] = it.Name
		r.add(toolCall(at, it.Name, it.CallID, stringOrRaw(it.Arguments)))
	case "custom_tool_call":
		r.names[it.CallID] = it.Name
		r.add(toolCall(at, it.Name, it.CallID, stringOrRaw(it.Input)))
	case "local_shell_call":
		r.names[it.CallID] = "local_shell"
		r.add(toolCall(at, "local_shell", it.CallID, it.Action))
	case "web_search_call":
		r.add(toolCall(at, "web_search", it.CallID, it.Action))
	case "function_call_output", "custom_tool_call_output":
		out, isErr := codexOutput(it.Output)
		r.add(toolResult(at, r.names[it.CallID], it.CallID, out, isErr))
	}
	return true
}

func (r *codexReader) add(rec Record) { r.c.Records = append(r.c.Records, rec) }

// codexText joins a message's text parts (input_text, output_text); an
// image part reads "[image]".
func codexText(raw json.RawMessage) (string, bool) {
	var s string
	if jsonString(raw, &s) {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var out []string
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, p.Text)
		case "input_image":
			out = append(out, "[image]")
		}
	}
	return strings.Join(out, "\n"), true
}

// codexOutput is a call's output: a string, content items, or an object
// {content|output, success}.
func codexOutput(raw json.RawMessage) (string, bool) {
	if t, ok := codexText(raw); ok && (len(raw) == 0 || raw[0] == '"' || raw[0] == '[') {
		return t, false
	}
	var o struct {
		Content json.RawMessage `json:"content"`
		Output  json.RawMessage `json:"output"`
		Success *bool           `json:"success"`
	}
	if json.Unmarshal(raw, &o) == nil && (o.Content != nil || o.Output != nil) {
		body := o.Content
		if body == nil {
			body = o.Output
		}
		t, ok := codexText(body)
		if !ok {
			t = compactInput(body)
		}
		return t, o.Success != nil && !*o.Success
	}
	return compactInput(raw), false
}

// stringOrRaw is a JSON string's value, or the raw JSON when it is not a
// string (function_call arguments are a string holding JSON).
func stringOrRaw(raw json.RawMessage) []byte {
	var s string
	if jsonString(raw, &s) {
		return []byte(s)
	}
	return raw
}

// readCodex reads the thread's rollout under <home>/.codex.
func readCodex(ctx context.Context, src Source, lim limits) (Conversation, error) {
	if !isUUID(src.ConversationID) {
		return Conversation{}, refuse(ErrBadSource, "%q is not a Codex thread id (a UUID)", src.ConversationID)
	}
	home, err := openHome(src.Home)
	if err != nil {
		return Conversation{}, unavailable(err, src)
	}
	defer home.Close()
	dir, name, err := codexRollout(home, src.ConversationID)
	if err != nil {
		return Conversation{}, unavailable(err, src)
	}
	defer dir.Close()
	c := Conversation{Tool: ToolCodex, ID: src.ConversationID}
	r := newCodexReader(&c)
	c.Path, c.Unreadable, c.Bytes, err = readConversationFile(ctx, dir, name, lim, r.line)
	if err != nil {
		return Conversation{}, unavailable(err, src)
	}
	c.finish()
	return c, nil
}

// codexRollout finds rollout-*-<thread>.jsonl in sessions/YYYY/MM/DD/, then
// in archived_sessions/ (real-clis.md §2.2, §2.3).
func codexRollout(home *os.File, thread string) (*os.File, string, error) {
	codex, err := openDirPath(home, ".codex")
	if err != nil {
		return nil, "", err
	}
	defer codex.Close()
	match := func(dir *os.File) (string, bool) {
		names, err := listDir(dir, false)
		if err != nil {
			return "", false
		}
		for _, n := range names {
			if strings.HasPrefix(n, "rollout-") && strings.HasSuffix(n, "-"+thread+".jsonl") {
				return n, true
			}
		}
		return "", false
	}
	if sessions, err := openDirPath(codex, "sessions"); err == nil {
		defer sessions.Close()
		if d, n, ok := codexWalk(sessions, 3, match); ok {
			return d, n, nil
		}
	}
	if archived, err := openDirPath(codex, "archived_sessions"); err == nil {
		if n, ok := match(archived); ok {
			return archived, n, nil
		}
		archived.Close()
	}
	return nil, "", errNotExist
}

// codexWalk descends depth folder levels below dir (newest name first, as
// the dates sort) and returns the first folder where match finds a file.
func codexWalk(dir *os.File, depth int, match func(*os.File) (string, bool)) (*os.File, string, bool) {
	if depth == 0 {
		if n, ok := match(dir); ok {
			d, err := openDirPath(dir)
			return d, n, err == nil
		}
		return nil, "", false
	}
	names, err := listDir(dir, true)
	if err != nil {
		return nil, "", false
	}
	for i := len(names) - 1; i >= 0; i-- {
		sub, err := openDirAt(dir, names[i])
		if err != nil {
			continue
		}
		d, n, ok := codexWalk(sub, depth-1, match)
		sub.Close()
		if ok {
			return d, n, true
		}
	}
	return nil, "", false
}
