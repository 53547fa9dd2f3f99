package transcript

import (
	"bytes"
	"encoding/json"
	"strings"
)

// ClaudeRecord is the part of a Claude Code transcript record the agent
// reads (real-clis.md §1.3): the one decoding of the format, which this
// package's index and agent/handoff's conversation reader share. Records of
// other types (api-request*, atis-latch, last-prompt, cost-state,
// tools-used, most attachments) are passed over without a decode.
type ClaudeRecord struct {
	Type                      string          `json:"type"`
	Subtype                   string          `json:"subtype"`
	Timestamp                 string          `json:"timestamp"`
	IsSidechain               bool            `json:"isSidechain"`
	IsMeta                    bool            `json:"isMeta"`
	IsCompactSummary          bool            `json:"isCompactSummary"`
	IsVisibleInTranscriptOnly bool            `json:"isVisibleInTranscriptOnly"`
	Origin                    *claudeOrigin   `json:"origin"`
	Message                   *claudeMessage  `json:"message"`
	ToolUseResult             json.RawMessage `json:"toolUseResult"`
	Attachment                *struct {
		Type        string          `json:"type"`
		Prompt      json.RawMessage `json:"prompt"`
		CommandMode string          `json:"commandMode"`
		Origin      *claudeOrigin   `json:"origin"`
	} `json:"attachment"`
	ToolDenialKind string          `json:"toolDenialKind"`
	Operation      string          `json:"operation"`
	Content        json.RawMessage `json:"content"`
}

type claudeOrigin struct {
	Kind string `json:"kind"`
}

type claudeMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"`
	Usage   *claudeUsage    `json:"usage"`
}

type claudeUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// ClaudeBlock is one content block of a Claude Code message (text,
// tool_use, tool_result, image, ...).
type ClaudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// personOrigins are the origin kinds of a user record that a person wrote.
// A record without an origin is the person's too (the SDK and --print
// prompts carry none). Every other kind (task-notification,
// auto-continuation, coordinator, peer, plugin, channel, …) is the tool
// talking to itself.
var personOrigins = map[string]bool{"human": true, "person": true, "composer": true, "voice-call": true, "remote": true, "suggestion": true}

func fromPerson(o *claudeOrigin) bool { return o == nil || o.Kind == "" || personOrigins[o.Kind] }

// ClaudeBlocks decodes a message's content: a string is returned as text
// (isString), anything else as its blocks (none when it is no list of
// blocks).
func ClaudeBlocks(raw json.RawMessage) (text string, isString bool, bs []ClaudeBlock) {
	if len(raw) == 0 {
		return "", false, nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s, true, nil
		}
		return "", false, nil
	}
	_ = json.Unmarshal(raw, &bs)
	return "", false, bs
}

// blockText joins the text blocks of content (a string or blocks).
func blockText(raw json.RawMessage) string {
	s, isString, bs := ClaudeBlocks(raw)
	if isString {
		return s
	}
	var parts []string
	for _, b := range bs {
		if b.Type == "text" && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// claudePersonText is what the person wrote in a prompt's text, or ok
// false when the text is the tool's own: a slash command becomes what was
// typed ("/compact"), shell mode "!cmd"; command output, notifications and
// the "[Request interrupted by user]" marker are not messages.
func claudePersonText(s string) (string, bool) {
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		return "", false
	case strings.HasPrefix(t, "<command-name>"):
		name, _ := between(t, "<command-name>", "</command-name>")
		args, _ := between(t, "<command-args>", "</command-args>")
		out := strings.TrimSpace(name)
		if a := strings.TrimSpace(args); a != "" {
			out += " " + a
		}
		return out, out != ""
	case strings.HasPrefix(t, "<bash-input>"):
		cmd, _ := between(t, "<bash-input>", "</bash-input>")
		return "!" + cmd, true
	case strings.HasPrefix(t, "<local-command-"), strings.HasPrefix(t, "<bash-stdout>"), strings.HasPrefix(t, "<bash-stderr>"),
		strings.HasPrefix(t, "<task-notification>"), strings.HasPrefix(t, "[Request interrupted by user"):
		return "", false
	}
	return s, true
}

// claudeUserText decides whether a user record is a message and returns
// its text. In a session transcript a message is what the person sent:
// not a sidechain, meta, compact-summary or transcript-only record, from a
// person's origin, holding text and no tool_result (see claudePersonText
// for the text rules). In a sub-agent transcript the sidechain records
// are the point, so isSidechain is allowed there.
func claudeUserText(rec *ClaudeRecord, sub bool) (string, bool) {
	if rec.Message == nil || (rec.IsSidechain && !sub) || rec.IsMeta || rec.IsCompactSummary ||
		rec.IsVisibleInTranscriptOnly || !fromPerson(rec.Origin) {
		return "", false
	}
	s, isString, bs := ClaudeBlocks(rec.Message.Content)
	if !isString {
		var parts []string
		for _, b := range bs {
			switch b.Type {
			case "tool_result":
				return "", false
			case "text":
				if b.Text != "" {
					parts = append(parts, b.Text)
				}
			}
		}
		s = strings.Join(parts, "\n")
	}
	return claudePersonText(s)
}

// ClaudePrompt is what a person wrote in a record of a session transcript,
// ok false for any other record (claudeUserText's rules): the first one
// names a stored session in agent/claudesup's catalog.
func ClaudePrompt(rec *ClaudeRecord) (string, bool) { return claudeUserText(rec, false) }

// claudeQueuedText is the prompt of a queued_command attachment: a person's
// message sent while a turn ran, which Claude Code delivers inside the
// running turn instead of as a user record (absorbed_mid_turn).
func claudeQueuedText(rec *ClaudeRecord) (string, bool) {
	a := rec.Attachment
	if a == nil || a.Type != "queued_command" || (a.CommandMode != "" && a.CommandMode != "prompt") ||
		!fromPerson(a.Origin) || !fromPerson(rec.Origin) {
		return "", false
	}
	return claudePersonText(blockText(a.Prompt))
}

// claudeAssistantText is the text of an assistant record.
func claudeAssistantText(rec *ClaudeRecord, sub bool) (string, bool) {
	if rec.Message == nil || (rec.IsSidechain && !sub) {
		return "", false
	}
	s := blockText(rec.Message.Content)
	return s, strings.TrimSpace(s) != ""
}

// claudeText re-reads the text of a message from one of its records.
func claudeText(line []byte, how uint8, sub bool) string {
	var rec ClaudeRecord
	if json.Unmarshal(line, &rec) != nil {
		return ""
	}
	var s string
	switch how {
	case fromClaudeUser:
		s, _ = claudeUserText(&rec, sub)
	case fromClaudeQueued:
		s, _ = claudeQueuedText(&rec)
	case fromClaudeAssistant:
		s, _ = claudeAssistantText(&rec, sub)
	}
	return s
}

// claudeRecord indexes one record of a Claude Code session or sub-agent
// transcript: its message, if it is one, and what it tells the activity.
func (ix *fileIndex) claudeRecord(off int64, line []byte) {
	if t, ok := topString(line, "type"); ok {
		switch string(t) {
		case "user", "assistant":
		case "attachment":
			if !bytes.Contains(line, []byte(`"queued_command"`)) {
				return
			}
		case "system":
			if !bytes.Contains(line, []byte(`"compact_boundary"`)) {
				return
			}
		case "queue-operation":
			if !bytes.Contains(line, []byte("<task-notification>")) {
				return
			}
		default:
			return
		}
	}
	var rec ClaudeRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		ix.skipped++
		return
	}
	sub := ix.kind == kindClaudeSub
	at := parseTime(rec.Timestamp)
	sp := span{off: off, n: int32(len(line))}
	st := ix.claude
	st.seq++
	before := st.mem
	switch rec.Type {
	case "user":
		if text, ok := claudeUserText(&rec, sub); ok {
			ix.addMessage(msgEntry{span: sp, role: roleUser, how: fromClaudeUser, at: at, first: firstLine(text)})
		}
		if rec.Message != nil && (!rec.IsSidechain || sub) {
			st.userRecord(&rec, at)
		}
	case "assistant":
		if text, ok := claudeAssistantText(&rec, sub); ok {
			ix.addAssistant(sp, at, rec.Message.ID, text)
		}
		if rec.Message != nil && (!rec.IsSidechain || sub) {
			st.assistantRecord(&rec, at, sub)
		}
	case "attachment":
		if text, ok := claudeQueuedText(&rec); ok {
			ix.addMessage(msgEntry{span: sp, role: roleUser, how: fromClaudeQueued, at: at, first: firstLine(text)})
		} else if rec.Attachment != nil && rec.Attachment.CommandMode == "task-notification" {
			st.notification(blockText(rec.Attachment.Prompt), at)
		}
	case "system":
		if rec.Subtype == "compact_boundary" && (!rec.IsSidechain || sub) {
			st.compactions++
		}
	case "queue-operation":
		var s string
		if json.Unmarshal(rec.Content, &s) == nil {
			st.notification(s, at)
		}
	}
	ix.mem += st.mem - before
}

// addAssistant adds an assistant message, or extends the last one when the
// record continues the same API message (Claude Code writes one record per
// content block, all with the message's id). The id of a message never
// changes (R-MSG-9); only a first line that was still empty can.
func (ix *fileIndex) addAssistant(sp span, at int64, msgID, text string) {
	if n := len(ix.msgs); n > 0 && msgID != "" {
		last := &ix.msgs[n-1]
		if last.role == roleAssistant && last.msgID == msgID {
			last.more = append(last.more, sp)
			if last.first == "" {
				last.first = firstLine(text)
			}
			ix.mem += 16
			return
		}
	}
	ix.addMessage(msgEntry{span: sp, role: roleAssistant, how: fromClaudeAssistant, at: at, first: firstLine(text), msgID: msgID})
}
