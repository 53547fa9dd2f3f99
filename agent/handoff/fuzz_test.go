package handoff

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// Fuzz targets for each record parser (untrusted input: the files the CLIs
// wrote, and opencode's output). The committed corpus is in
// testdata/fuzz/<target>; the seeds below add the samples and the recorded
// real-CLI fixtures. Bounds are lowered so that the fuzzer reaches them.
var fuzzLimits = limits{total: 1 << 20, record: 64 << 10}

func FuzzClaudeLines(f *testing.F)    { fuzzTool(f, ToolClaude, "claude.jsonl") }
func FuzzCodexLines(f *testing.F)     { fuzzTool(f, ToolCodex, "codex.jsonl") }
func FuzzGeminiLog(f *testing.F)      { fuzzTool(f, ToolGemini, "gemini.jsonl") }
func FuzzOpenCodeExport(f *testing.F) { fuzzTool(f, ToolOpenCode, "opencode.json") }

func fuzzTool(f *testing.F, tool, fixture string) {
	if s, ok := sample[tool]; ok {
		f.Add([]byte(s))
		f.Add([]byte(s[:len(s)/2]))
	}
	if b, err := os.ReadFile(filepath.Join("testdata", "golden", fixture)); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseWith(tool, data, fuzzLimits)
		if err != nil {
			if tool != ToolOpenCode && !is(err, ErrRecordTooLarge) && !is(err, ErrConversationTooLarge) {
				t.Fatalf("a file reader failed with %v; only the bounds may stop it", err)
			}
			return
		}
		checkConversation(t, c, bytes.Count(data, []byte("\n"))+1)
	})
}

// checkConversation checks what every reader promises of a Conversation,
// and that the outputs of a handoff can be made from it.
func checkConversation(t *testing.T, c Conversation, lines int) {
	t.Helper()
	if c.Unreadable < 0 || (c.Tool != ToolOpenCode && c.Tool != ToolGemini && c.Unreadable > lines) || c.Turns > len(c.Records) {
		t.Fatalf("unreadable %d of %d lines, turns %d of %d records", c.Unreadable, lines, c.Turns, len(c.Records))
	}
	for i, r := range c.Records {
		limit := map[Kind]int{KindUser: MaxMessageBytes, KindAssistant: MaxMessageBytes, KindToolCall: ToolInputBytes, KindToolResult: ToolResultBytes}[r.Kind]
		if limit == 0 {
			t.Fatalf("record %d has kind %q", i, r.Kind)
		}
		if !utf8.ValidString(r.Text) || len(r.Text) > limit || r.Size < len(r.Text) {
			t.Fatalf("record %d: %d bytes of text (size %d, valid %t), want at most %d", i, len(r.Text), r.Size, utf8.ValidString(r.Text), limit)
		}
	}
	tr := Transcript(c)
	if int64(len(tr)) != TranscriptBytes(c) {
		t.Fatalf("Transcript is %d bytes, TranscriptBytes %d", len(tr), TranscriptBytes(c))
	}
	for _, r := range c.Records {
		if !bytes.Contains(tr, []byte(r.Text)) {
			t.Fatalf("transcript lacks %q", r.Text)
		}
	}
	s := Summary(c)
	if len(s) > MaxSummaryBytes || !utf8.ValidString(s) || !strings.HasPrefix(s, "Handoff of ") {
		t.Fatalf("summary of %d bytes: %.200q", len(s), s)
	}
}
