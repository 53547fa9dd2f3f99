package codexsup

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

func turnJSON(status string, items ...map[string]any) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"id": "t", "items": items, "status": status, "itemsView": "full"})
	return b
}

func userText(s string) map[string]any {
	return map[string]any{"type": "userMessage", "id": "u", "content": []any{map[string]any{"type": "text", "text": s, "text_elements": []any{}}}}
}

func agentText(s string) map[string]any {
	return map[string]any{"type": "agentMessage", "id": "a", "text": s}
}

// TestHistoryVisible is R-CX-HIST-2/3 and R-CX-FT-6: user and assistant
// text only; images become the placeholder with no payload or path;
// reasoning, tool calls and tool results are left out; a turn still in
// progress is left out (R-CX-CONT-3).
func TestHistoryVisible(t *testing.T) {
	var h History
	turns := []json.RawMessage{ // newest first
		turnJSON("inProgress", userText("not finished yet")),
		turnJSON("completed",
			map[string]any{"type": "userMessage", "id": "u2", "content": []any{
				map[string]any{"type": "text", "text": "what is in these?"},
				map[string]any{"type": "image", "url": "data:image/png;base64,iVBORw0KGgoSECRET"},
				map[string]any{"type": "localImage", "path": "/home/u/secret/shot.png"},
				map[string]any{"type": "mention", "name": "x", "path": "/home/u/secret/file.go"},
			}},
			map[string]any{"type": "reasoning", "id": "r", "summary": []string{"secret reasoning"}, "content": []string{"secret"}},
			map[string]any{"type": "commandExecution", "id": "c", "command": "cat /etc/secret", "aggregatedOutput": "secret output", "status": "completed", "commandActions": []any{}, "cwd": "/w"},
			map[string]any{"type": "mcpToolCall", "id": "m", "server": "s", "tool": "t", "arguments": map[string]any{}, "result": "secret result", "status": "completed"},
			agentText("two images and a mention"),
		),
		turnJSON("interrupted", userText("first"), agentText("")),
		turnJSON("failed", userText("zeroth"), agentText("partial answer")),
	}
	for _, tr := range turns {
		h.AddTurn(tr)
	}
	want := []apitypes.CodexMessage{
		{Role: "user", Text: "zeroth"},
		{Role: "assistant", Text: "partial answer"},
		{Role: "user", Text: "first"},
		{Role: "user", Text: "what is in these?\n[Image attachment]\n[Image attachment]"},
		{Role: "assistant", Text: "two images and a mention"},
	}
	got := h.Messages()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	all, _ := json.Marshal(got)
	if strings.Contains(string(all), "SECRET") || strings.Contains(string(all), "secret") || strings.Contains(string(all), "/home/u") {
		t.Errorf("the history carries a payload, path, reasoning or tool text: %s", all)
	}
}

// TestHistoryBounds is R-CX-HIST-1/4: the newest messages are kept, each
// cut to 64 KiB at a UTF-8 boundary, at most 200 of them and 512 KiB in all,
// emitted in chronological order.
func TestHistoryBounds(t *testing.T) {
	t.Run("200 messages", func(t *testing.T) {
		var h History
		for i := 150; i > 0; i-- { // 300 messages, newest first
			h.AddTurn(turnJSON("completed", userText("q"+itoa(i)), agentText("a"+itoa(i))))
		}
		got := h.Messages()
		if len(got) != MaxHistoryMessages {
			t.Fatalf("got %d messages, want %d", len(got), MaxHistoryMessages)
		}
		if got[0].Text != "q51" || got[len(got)-1].Text != "a150" {
			t.Errorf("kept %q .. %q, want q51 .. a150 (the newest, in order)", got[0].Text, got[len(got)-1].Text)
		}
	})
	t.Run("64 KiB each at a UTF-8 boundary", func(t *testing.T) {
		var h History
		big := strings.Repeat("é", MaxMessageBytes) // 2 bytes each: 128 KiB
		h.AddTurn(turnJSON("completed", userText("short"), agentText("x"+big)))
		got := h.Messages()
		if len(got) != 2 || len(got[1].Text) > MaxMessageBytes || len(got[1].Text) < MaxMessageBytes-1 || !utf8.ValidString(got[1].Text) {
			t.Fatalf("cut message: %d bytes, valid %v; want at most %d, valid UTF-8", len(got[1].Text), utf8.ValidString(got[1].Text), MaxMessageBytes)
		}
	})
	t.Run("512 KiB in all", func(t *testing.T) {
		var h History
		chunk := strings.Repeat("z", 100<<10) // 100 KiB each
		for i := 9; i > 0; i-- {
			h.AddTurn(turnJSON("completed", userText("q"+itoa(i)), agentText(chunk)))
		}
		got := h.Messages()
		total := 0
		for _, m := range got {
			total += len(m.Text)
		}
		// Newest first: a9 (cut to 64 KiB), q9, a8, q8, ... After turns 9..3
		// (14 messages, 458,766 bytes) the answer of turn 2 would pass
		// 512 KiB: the walk stops there.
		if total > MaxHistoryBytes || len(got) != 14 || got[0].Text != "q3" || got[len(got)-1].Text != chunk[:MaxMessageBytes] {
			t.Fatalf("%d messages, %d bytes, oldest %q; want 14, at most %d bytes, oldest q3", len(got), total, got[0].Text[:min(len(got[0].Text), 8)], MaxHistoryBytes)
		}
	})
}
