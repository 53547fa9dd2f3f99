package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"

	"github.com/olivares-dev/olivares/agent/transcript"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// claudeLine is a Claude Code transcript record (real-clis.md §1.3), as
// agent/transcript decodes it (the one decoding of the format), with the
// two members only a handoff reads. Only "user" and "assistant" records
// carry the conversation; every other type (queue-operation, attachment,
// api-request*, last-prompt, cost-state, …) is bookkeeping.
type claudeLine struct {
	transcript.ClaudeRecord
	UUID string `json:"uuid"`
	Cwd  string `json:"cwd"`
	// The members only the activity index reads are stepped over here, not
	// copied (a shallower field hides the embedded one of its name).
	ToolUseResult skipJSON `json:"toolUseResult"`
	Attachment    skipJSON `json:"attachment"`
	Content       skipJSON `json:"content"`
}

// claudeBlock is a content block as agent/transcript decodes it, but for
// a tool_result's content, decoded in the same pass as the block (a string
// or a list of blocks), not copied raw and scanned again.
type claudeBlock struct {
	transcript.ClaudeBlock
	Content any `json:"content"`
}

// skipJSON decodes any value into nothing.
type skipJSON struct{}

func (*skipJSON) UnmarshalJSON([]byte) error { return nil }

// claudeReader turns transcript lines into records.
type claudeReader struct {
	c     *Conversation
	names map[string]string // tool_use id → tool name
	seen  map[string]bool   // record uuids already read
	// lastMsg is the API message id of the last record when it is
	// assistant text, so that the blocks of one answer, which Claude Code
	// writes as one record each, read as one message.
	lastMsg string
}

func newClaudeReader(c *Conversation) *claudeReader {
	return &claudeReader{c: c, names: map[string]string{}, seen: map[string]bool{}}
}

// line reads one transcript line; false when it is not a record this
// reader can read.
func (r *claudeReader) line(b []byte) bool {
	var l claudeLine
	if json.Unmarshal(b, &l) != nil {
		return false
	}
	if l.Type != "user" && l.Type != "assistant" {
		return true
	}
	if l.Message == nil {
		return false
	}
	// Sub-agent (sidechain) records and injected meta messages are not the
	// conversation; a record written twice (a resume may copy history) is
	// read once.
	if l.IsSidechain || l.IsMeta || (l.UUID != "" && r.seen[l.UUID]) {
		return true
	}
	at := parseTime(l.Timestamp)
	var s string
	if jsonString(l.Message.Content, &s) {
		r.add(l.Type, l.Message.ID, message(Kind(l.Type), at, s))
	} else {
		var blocks []claudeBlock
		if json.Unmarshal(l.Message.Content, &blocks) != nil {
			return false
		}
		kind := Kind(l.Type)
		for _, b := range blocks {
			switch b.Type {
			case "text":
				r.add(l.Type, l.Message.ID, message(kind, at, b.Text))
			case "image", "document":
				r.add(l.Type, l.Message.ID, message(kind, at, "["+b.Type+"]"))
			case "tool_use", "server_tool_use":
				r.names[b.ID] = b.Name
				r.add(l.Type, "", toolCall(at, b.Name, b.ID, b.Input))
			case "tool_result", "web_search_tool_result":
				r.add(l.Type, "", toolResult(at, r.names[b.ToolUseID], b.ToolUseID, blockText(b.Content), b.IsError))
			}
		}
	}
	if l.UUID != "" {
		r.seen[l.UUID] = true
	}
	if r.c.Cwd == "" && l.Cwd != "" {
		r.c.Cwd = l.Cwd
	}
	return true
}

// add appends rec, joining assistant text to the text before it when both
// come from the same API message.
func (r *claudeReader) add(typ, msgID string, rec Record) {
	recs := r.c.Records
	if rec.Kind == KindAssistant && msgID != "" && msgID == r.lastMsg && len(recs) > 0 && recs[len(recs)-1].Kind == KindAssistant {
		prev := &recs[len(recs)-1]
		size := prev.Size + 2 + rec.Size
		if !prev.Clipped() {
			prev.Text, _ = clip(prev.Text+"\n\n"+rec.Text, MaxMessageBytes)
		}
		prev.Size = size
		return
	}
	r.c.Records = append(recs, rec)
	r.lastMsg = ""
	if rec.Kind == KindAssistant {
		r.lastMsg = msgID
	}
}

// blockText is a tool_result's content: a string, or blocks whose texts
// are joined (an image block reads "[image]").
func blockText(content any) string {
	switch v := content.(type) {
	case nil:
		return ""
	case string:
		return v
	case []any:
		var parts []string
		for _, b := range v {
			m, _ := b.(map[string]any)
			typ, _ := m["type"].(string)
			switch typ {
			case "text":
				text, _ := m["text"].(string)
				parts = append(parts, text)
			case "":
			default:
				parts = append(parts, "["+typ+"]")
			}
		}
		return strings.Join(parts, "\n")
	}
	b, _ := json.Marshal(content)
	return string(b)
}

// readClaude reads <home>/.claude/projects/<slug>/<id>.jsonl.
func readClaude(ctx context.Context, src Source, lim limits) (Conversation, error) {
	if !isUUID(src.ConversationID) {
		return Conversation{}, refuse(ErrBadSource, "%q is not a Claude Code session id (a UUID)", src.ConversationID)
	}
	home, err := openHome(src.Home)
	if err != nil {
		return Conversation{}, unavailable(err, src)
	}
	defer home.Close()
	projects, err := openDirPath(home, ".claude", "projects")
	if err != nil {
		return Conversation{}, unavailable(err, src)
	}
	defer projects.Close()
	name := src.ConversationID + ".jsonl"
	dir, err := claudeProjectDir(projects, src.Cwd, name)
	if err != nil {
		return Conversation{}, unavailable(err, src)
	}
	defer dir.Close()
	c := Conversation{Tool: ToolClaude, ID: src.ConversationID}
	r := newClaudeReader(&c)
	c.Path, c.Unreadable, c.Bytes, err = readConversationFile(ctx, dir, name, lim, r.line)
	if err != nil {
		return Conversation{}, unavailable(err, src)
	}
	c.finish()
	return c, nil
}

// claudeProjectDir finds the project folder holding name: the one of cwd's
// slug first, then every project folder in name order (a resumed session
// stays in the folder of the cwd it started in, real-clis.md §1.4).
func claudeProjectDir(projects *os.File, cwd, name string) (*os.File, error) {
	if cwd != "" {
		d, err := openDirAt(projects, claudeSlug(cwd))
		if err == nil {
			if existsAt(d, name) {
				return d, nil
			}
			d.Close()
		} else if !errors.Is(err, errNotExist) {
			return nil, err
		}
	}
	dirs, err := listDir(projects, true)
	if err != nil {
		return nil, err
	}
	for _, slug := range dirs {
		d, err := openDirAt(projects, slug)
		if err != nil {
			continue
		}
		if existsAt(d, name) {
			return d, nil
		}
		d.Close()
	}
	return nil, errNotExist
}

// claudeSlug is Claude Code's project folder name for a physical cwd
// (real-clis.md §1.3), as agent/transcript computes it for activity and
// messages.
var claudeSlug = transcript.ClaudeSlug

// isUUID: a session id's 8-4-4-4-12 hex form (Claude Code, Codex, Gemini
// CLI all use it).
var isUUID = apitypes.IsUUID
