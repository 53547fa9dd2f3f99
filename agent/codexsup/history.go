package codexsup

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"unicode/utf8"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// History bounds (R-CX-HIST-1).
const (
	MaxHistoryMessages = 200
	MaxHistoryBytes    = 512 << 10
	MaxMessageBytes    = 64 << 10
	// ImagePlaceholder replaces an image or local image (R-CX-HIST-2).
	ImagePlaceholder = "[Image attachment]"
	// historyPageTurns and maxHistoryPages bound the walk over the source's
	// turn pages: a source of tool-only turns cannot make it read forever.
	historyPageTurns = 10
	maxHistoryPages  = 50
)

type turnView struct {
	Status string            `json:"status"`
	Items  []json.RawMessage `json:"items"`
}

// itemView is read item by item: the other item kinds have other shapes
// (a reasoning item's content is strings), and none may spoil the turn.
type itemView struct {
	Type    string          `json:"type"`
	Content json.RawMessage `json:"content"`
	Text    string          `json:"text"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// terminal: a turn the source has finished (R-CX-CONT-3); a turn in
// progress is left out (R-CX-SRC-4).
func (t turnView) terminal() bool {
	switch t.Status {
	case "completed", "interrupted", "failed":
		return true
	}
	return false
}

// visible returns a turn's user and assistant messages in order. Reasoning,
// tool calls and tool results, and every other item, are left out
// (R-CX-HIST-3); an image becomes the placeholder and its payload or path
// is never copied (R-CX-HIST-2).
func (t turnView) visible() []apitypes.CodexMessage {
	var out []apitypes.CodexMessage
	for _, raw := range t.Items {
		var it itemView
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		switch it.Type {
		case "userMessage":
			var parts []contentPart
			if json.Unmarshal(it.Content, &parts) != nil {
				continue
			}
			text := ""
			for _, p := range parts {
				var part string
				switch p.Type {
				case "text":
					part = p.Text
				case "image", "localImage":
					part = ImagePlaceholder
				}
				if part == "" {
					continue
				}
				if text != "" {
					text += "\n"
				}
				text += part
			}
			if text != "" {
				out = append(out, apitypes.CodexMessage{Role: "user", Text: text})
			}
		case "agentMessage":
			if it.Text != "" {
				out = append(out, apitypes.CodexMessage{Role: "assistant", Text: it.Text})
			}
		}
	}
	return out
}

// History is R-CX-HIST-4: fed messages from the newest backwards, it cuts
// each to MaxMessageBytes at a UTF-8 boundary and stops before the 201st
// message or before the total would pass MaxHistoryBytes.
type History struct {
	kept  []apitypes.CodexMessage // newest first
	bytes int
	full  bool
}

// Add takes the next older message; false once the history is full.
func (h *History) Add(m apitypes.CodexMessage) bool {
	if h.full {
		return false
	}
	m.Text = cutUTF8(m.Text, MaxMessageBytes)
	if len(h.kept) == MaxHistoryMessages || h.bytes+len(m.Text) > MaxHistoryBytes {
		h.full = true
		return false
	}
	h.kept = append(h.kept, m)
	h.bytes += len(m.Text)
	return true
}

// AddTurn takes the next older turn (its JSON as Codex gave it).
func (h *History) AddTurn(raw json.RawMessage) bool {
	var t turnView
	if json.Unmarshal(raw, &t) != nil || !t.terminal() {
		return !h.full
	}
	msgs := t.visible()
	for i := len(msgs) - 1; i >= 0; i-- {
		if !h.Add(msgs[i]) {
			return false
		}
	}
	return true
}

// Messages are the kept messages in chronological order.
func (h *History) Messages() []apitypes.CodexMessage {
	out := slices.Clone(h.kept)
	slices.Reverse(out)
	if out == nil {
		out = []apitypes.CodexMessage{}
	}
	return out
}

// cutUTF8 cuts s to at most n bytes without splitting a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

type turnsParams struct {
	ThreadID      string  `json:"threadId"`
	Cursor        *string `json:"cursor,omitempty"`
	Limit         int     `json:"limit"`
	ItemsView     string  `json:"itemsView"`
	SortDirection string  `json:"sortDirection"`
}

type turnsResult struct {
	Data            []json.RawMessage `json:"data"`
	NextCursor      *string           `json:"nextCursor"`
	BackwardsCursor *string           `json:"backwardsCursor"`
}

// history projects the source's visible history through its turn pages,
// newest first (never an unbounded thread/read, R-CX-TRN-4).
func (s *Service) history(ctx context.Context, threadID string) ([]apitypes.CodexMessage, error) {
	var h History
	var cursor *string
	for range maxHistoryPages {
		var res turnsResult
		err := s.conn.Call(ctx, "thread/turns/list", turnsParams{ThreadID: threadID, Cursor: cursor,
			Limit: historyPageTurns, ItemsView: "full", SortDirection: "desc"}, &res)
		var big *LineTooLargeError
		if errors.As(err, &big) {
			// A page too large to read: its turns are left out.
			s.o.Log.Warn("history page skipped: too large", "thread", threadID, "bytes", big.Bytes)
			if big.NextCursor == "" {
				break
			}
			c := big.NextCursor
			cursor = &c
			continue
		}
		if err != nil {
			return nil, s.codexErr("thread/turns/list", err)
		}
		for _, raw := range res.Data {
			if !h.AddTurn(raw) {
				return h.Messages(), nil
			}
		}
		if res.NextCursor == nil || *res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	return h.Messages(), nil
}
