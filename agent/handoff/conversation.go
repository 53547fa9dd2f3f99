package handoff

import (
	"bytes"
	"encoding/json"
	"path"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits.
const (
	// MaxConversationBytes: a larger conversation is refused (R-HOF-15).
	MaxConversationBytes = 256 << 20
	// MaxRecordBytes: a conversation holding a larger record (a JSONL line,
	// an exported message) is refused (R-HOF-15).
	MaxRecordBytes = 32 << 20
	// MaxMessageBytes: the transcript holds each message in full up to this
	// size, and says so when it clips one (R-HOF-10).
	MaxMessageBytes = 256 << 10
	// ToolInputBytes and ToolResultBytes: tool calls and results are
	// abbreviated to this many bytes (R-HOF-10 says "abbreviated" without a
	// number; [P]).
	ToolInputBytes  = 512
	ToolResultBytes = 1024
)

// Tool names of a Source and a Conversation.
const (
	ToolClaude   = "claude"
	ToolCodex    = "codex"
	ToolGemini   = "gemini"
	ToolOpenCode = "opencode"
)

// toolTitle is the name a person knows the tool by.
func toolTitle(tool string) string {
	switch tool {
	case ToolClaude:
		return "Claude Code"
	case ToolCodex:
		return "Codex"
	case ToolGemini:
		return "Gemini CLI"
	case ToolOpenCode:
		return "OpenCode"
	}
	return tool
}

// Kind is what a Record holds.
type Kind string

const (
	// KindUser is text the person sent.
	KindUser Kind = "user"
	// KindAssistant is text the tool's model answered.
	KindAssistant Kind = "assistant"
	// KindToolCall is a tool call of the model: Tool and Text, the
	// abbreviated input.
	KindToolCall Kind = "tool_call"
	// KindToolResult is a tool's result: Tool (when the source names it) and
	// Text, the abbreviated output.
	KindToolResult Kind = "tool_result"
)

// Record is one entry of a conversation, in the tool-neutral form.
type Record struct {
	Kind Kind
	// At is when the tool wrote the record; zero when the source does not
	// say.
	At time.Time
	// Text is the message (at most MaxMessageBytes), the tool call's input
	// (at most ToolInputBytes, compact JSON when the input is JSON) or the
	// tool's result (at most ToolResultBytes). Always valid UTF-8.
	Text string
	// Size is the length in bytes of the whole text before clipping;
	// Size > len(Text) means Text was clipped.
	Size int
	// Tool is the tool's name, CallID the call's id as the source gives it.
	Tool   string
	CallID string
	// IsError is set on a tool result the source marks as failed.
	IsError bool
	// Files are the paths a tool call names (file tools and patches only),
	// as the source gives them; Writes says the call changes them.
	Files  []string
	Writes bool
}

// Clipped reports whether Text is shorter than the source's text.
func (r Record) Clipped() bool { return r.Size > len(r.Text) }

// Conversation is a session's stored conversation, read without a model.
type Conversation struct {
	// Tool is the source tool (ToolClaude ...), ID its session id.
	Tool, ID string
	// Path is the file read ("" for OpenCode, read through its export).
	Path string
	// Cwd is the session's working directory when the records say it.
	Cwd string
	// Records are the entries in conversation order.
	Records []Record
	// Unreadable counts the lines or entries that could not be read; they
	// are left out of Records (R-HOF-10). A last line still being written
	// is not counted (R-HOF-3).
	Unreadable int
	// Turns is the number of user and assistant turns (R-HOF-20): each user
	// message is one turn, and everything the tool did between two user
	// messages (answers, tool calls, results) is one assistant turn.
	Turns int
	// Bytes is how much of the source was read.
	Bytes int64
}

// finish counts the turns (R-HOF-20).
func (c *Conversation) finish() {
	turns, last := 0, Kind("")
	for _, r := range c.Records {
		side := KindAssistant
		if r.Kind == KindUser {
			side = KindUser
		}
		if side == KindUser || side != last {
			turns++
		}
		last = side
	}
	c.Turns = turns
}

// clip returns s made valid UTF-8 (an invalid byte becomes U+FFFD) and
// cut to at most max bytes at a rune boundary, and the length of the valid
// text before the cut.
func clip(s string, max int) (string, int) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	n := len(s)
	if n > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s, n
}

// message makes a user or assistant record.
func message(kind Kind, at time.Time, text string) Record {
	t, n := clip(text, MaxMessageBytes)
	return Record{Kind: kind, At: at, Text: t, Size: n}
}

// toolCall makes a tool call record from its input (JSON or text).
func toolCall(at time.Time, name, id string, input []byte) Record {
	text := compactInput(input)
	t, n := clip(text, ToolInputBytes)
	files, writes := touchedFiles(name, input)
	return Record{Kind: KindToolCall, At: at, Text: t, Size: n, Tool: name, CallID: id, Files: files, Writes: writes}
}

// toolResult makes a tool result record.
func toolResult(at time.Time, name, id, output string, isError bool) Record {
	t, n := clip(output, ToolResultBytes)
	return Record{Kind: KindToolResult, At: at, Text: t, Size: n, Tool: name, CallID: id, IsError: isError}
}

// compactInput is a tool input on one line: compact JSON when it is JSON (a
// JSON string is unquoted), the text otherwise.
func compactInput(input []byte) string {
	input = bytes.TrimSpace(input)
	var s string
	if jsonString(input, &s) {
		return s
	}
	var buf bytes.Buffer
	if json.Compact(&buf, input) == nil {
		return buf.String()
	}
	return string(input)
}

// File tools, by lowercased name, that take a path (Claude Code, Gemini CLI,
// OpenCode) or a patch (Codex apply_patch, OpenCode patch).
var (
	writeTools = map[string]bool{"write": true, "edit": true, "multiedit": true, "notebookedit": true,
		"write_file": true, "replace": true, "edit_file": true, "apply_patch": true, "patch": true}
	readTools = map[string]bool{"read": true, "read_file": true, "read_many_files": true, "view": true}
)

// touchedFiles returns the paths a file tool's input names.
func touchedFiles(name string, input []byte) ([]string, bool) {
	lname := strings.ToLower(name)
	writes := writeTools[lname]
	if !writes && !readTools[lname] {
		return nil, false
	}
	var files []string
	var obj map[string]json.RawMessage
	if json.Unmarshal(input, &obj) == nil {
		for _, k := range []string{"file_path", "filePath", "absolute_path", "notebook_path", "path"} {
			var p string
			if json.Unmarshal(obj[k], &p) == nil && p != "" {
				files = append(files, p)
				break
			}
		}
		var paths []string
		if json.Unmarshal(obj["paths"], &paths) == nil {
			files = append(files, paths...)
		}
		for _, k := range []string{"input", "patch", "patchText"} {
			var p string
			if json.Unmarshal(obj[k], &p) == nil {
				files = append(files, patchFiles(p)...)
			}
		}
	} else if lname == "apply_patch" || lname == "patch" {
		// A freeform (custom) tool call: the input is the patch itself.
		files = patchFiles(string(input))
	}
	return files, writes
}

// patchFiles lists the files of an apply_patch patch ("*** Add File: x").
func patchFiles(p string) []string {
	var out []string
	for _, line := range strings.Split(p, "\n") {
		line = strings.TrimRight(line, "\r")
		for _, h := range []string{"*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "} {
			if f, ok := strings.CutPrefix(line, h); ok && strings.TrimSpace(f) != "" {
				out = append(out, strings.TrimSpace(f))
			}
		}
	}
	return out
}

// relPath shows p relative to cwd when it lies below it.
func relPath(cwd, p string) string {
	if cwd == "" || !path.IsAbs(p) {
		return p
	}
	if rest, ok := strings.CutPrefix(path.Clean(p), strings.TrimSuffix(path.Clean(cwd), "/")+"/"); ok && rest != "" {
		return rest
	}
	return p
}

// parseTime reads an RFC 3339 time; zero when it is not one.
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// msTime reads Unix milliseconds; zero for 0.
func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// jsonString decodes raw into s when raw is a JSON string. Looking at the
// first byte first spares a second scan of every value that is not one
// (most are arrays or objects), which is most of a reader's time.
func jsonString(raw []byte, s *string) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, s) == nil
}
