package handoff

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestClip: at most max bytes, cut at a UTF-8 boundary, made valid.
func TestClip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		max  int
		want string
		size int
	}{
		{"hello", 10, "hello", 5},
		{"hello", 5, "hello", 5},
		{"hello", 4, "hell", 5},
		{"aé", 2, "a", 3},   // é is 2 bytes: not cut in half
		{"a€b", 3, "a", 5},  // € is 3 bytes
		{"a€b", 4, "a€", 5}, // whole rune kept
		{"a\xffb", 10, "a\uFFFDb", 5},
		{"a\xffb", 2, "a", 5},
		{"", 0, "", 0},
	} {
		got, n := clip(tc.in, tc.max)
		if got != tc.want || n != tc.size {
			t.Errorf("clip(%q, %d) = %q, %d; want %q, %d", tc.in, tc.max, got, n, tc.want, tc.size)
		}
	}
}

// TestTurns (R-HOF-20): each user message is a turn; everything the tool
// does until the next user message is one assistant turn.
func TestTurns(t *testing.T) {
	t.Parallel()
	u, a, call, res := Record{Kind: KindUser}, Record{Kind: KindAssistant}, Record{Kind: KindToolCall}, Record{Kind: KindToolResult}
	for _, tc := range []struct {
		recs []Record
		want int
	}{
		{nil, 0},
		{[]Record{u}, 1},
		{[]Record{u, a}, 2},
		{[]Record{u, u, a}, 3},
		{[]Record{u, a, call, res, a, u, call, res}, 4},
		{[]Record{a, u, a}, 3},
	} {
		c := Conversation{Records: tc.recs}
		c.finish()
		if c.Turns != tc.want {
			t.Errorf("%d records: got %d turns, want %d", len(tc.recs), c.Turns, tc.want)
		}
	}
}

// TestTranscriptClipping (R-HOF-10): a message is kept in full up to 256
// KiB and clipped beyond, saying so; tool calls and results are
// abbreviated, saying so; the unreadable count is stated.
func TestTranscriptClipping(t *testing.T) {
	t.Parallel()
	exact := strings.Repeat("e", MaxMessageBytes)
	big := strings.Repeat("b", MaxMessageBytes) + "TAIL-NOT-KEPT" + strings.Repeat("b", 40<<10)
	c := Conversation{Tool: ToolClaude, ID: claudeID, Unreadable: 2, Records: []Record{
		message(KindUser, time.Time{}, exact),
		message(KindAssistant, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), big),
		toolCall(time.Time{}, "Bash", "t1", []byte(`{"command":"`+strings.Repeat("x", 1000)+`"}`)),
		toolResult(time.Time{}, "Bash", "t1", strings.Repeat("y", 5000), true),
	}}
	c.finish()
	tr := string(Transcript(c))
	if !strings.Contains(tr, "\n"+exact+"\n") || strings.Count(tr, "Message clipped") != 1 {
		t.Errorf("a message of exactly 256 KiB must be whole and not marked clipped")
	}
	if strings.Contains(tr, "TAIL-NOT-KEPT") || !strings.Contains(tr, strings.Repeat("b", MaxMessageBytes)+"\n") {
		t.Errorf("the big message is not clipped at 256 KiB")
	}
	for _, want := range []string{
		"[Message clipped: the first 256 KiB of 296 KiB are shown.]",
		"[Abbreviated: 512 bytes of 1014 bytes shown.]",
		"### Tool result: Bash [t1] (error)",
		"[Abbreviated: 1 KiB of 4.9 KiB shown.]",
		"- Unreadable records: 2 (2 lines or entries of the stored conversation could not be read and are left out)",
		"## Assistant · 2026-12-02T10:00:00Z",
		"- Turns: 2",
	} {
		if !strings.Contains(tr, want) {
			t.Errorf("transcript lacks %q", want)
		}
	}
	if n := TranscriptBytes(c); n != int64(len(tr)) {
		t.Errorf("TranscriptBytes %d, want %d", n, len(tr))
	}
	if !utf8.ValidString(tr) {
		t.Error("transcript is not valid UTF-8")
	}
	c.Unreadable = 1
	if tr := string(Transcript(c)); !strings.Contains(tr, "(1 line or entry of the stored conversation could not be read and is left out)") {
		t.Error("singular unreadable statement missing")
	}
	c.Unreadable = 0
	if tr := string(Transcript(c)); !strings.Contains(tr, "- Unreadable records: 0 (every record") {
		t.Error("zero unreadable statement missing")
	}
}

// TestTranscriptFences: a message holding ~~~ gets a longer fence, so no
// text can close its block or pass for a record heading.
func TestTranscriptFences(t *testing.T) {
	t.Parallel()
	text := "a\n~~~~~\n## User\n~~~\nb"
	c := Conversation{Tool: ToolCodex, ID: codexID, Records: []Record{message(KindAssistant, time.Time{}, text)}}
	tr := string(Transcript(c))
	if !strings.Contains(tr, "\n~~~~~~\n"+text+"\n~~~~~~\n") {
		t.Errorf("fence:\n%s", tr)
	}
}

// TestWriteTranscript (R-HOF-9): written whole or not at all, 0600, in a
// folder made on the way, replacing an older file, no temporary left.
func TestWriteTranscript(t *testing.T) {
	t.Parallel()
	c := parseT(t, ToolClaude, sample[ToolClaude])
	dir := filepath.Join(t.TempDir(), "profile", ".config", "olivares")
	path := filepath.Join(dir, "handoff-1.md")
	n, err := WriteTranscript(path, c)
	if err != nil || n != TranscriptBytes(c) {
		t.Fatalf("WriteTranscript: %d, %v; want %d", n, err, TranscriptBytes(c))
	}
	if err := os.WriteFile(path, []byte("older"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteTranscript(path, c); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != string(Transcript(c)) {
		t.Error("the older file was not replaced")
	}
	fi, _ := os.Stat(path)
	di, _ := os.Stat(dir)
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Errorf("modes: file %v, folder %v; want 0600 and 0700", fi.Mode().Perm(), di.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("folder holds %d entries, want the transcript only", len(ents))
	}
	// A path that cannot be written leaves nothing behind.
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteTranscript(filepath.Join(blocker, "t.md"), c); err == nil {
		t.Error("writing below a file succeeded")
	}
	target := filepath.Join(t.TempDir(), "is-a-dir")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteTranscript(target, c); err == nil {
		t.Error("replacing a folder succeeded")
	}
	if ents, _ := os.ReadDir(filepath.Dir(target)); len(ents) != 1 {
		t.Errorf("a failed write left %d entries, want none but the folder", len(ents)-1)
	}
	if _, err := WriteTranscript("relative.md", c); err == nil {
		t.Error("a relative path was accepted")
	}
}

// TestSummary (R-HOF-7): the parts of the summary, its determinism and its
// bound.
func TestSummary(t *testing.T) {
	t.Parallel()
	c := parseT(t, ToolClaude, sample[ToolClaude])
	c.ID, c.Unreadable = claudeID, 3
	s := Summary(c)
	want := "Handoff of Claude Code session " + claudeID + ": 4 turns.\n" +
		"Working directory: /w/p\n\n" +
		"First request:\n> hello\n\n" +
		"Latest requests (1 of 2):\n> bye\n\n" +
		"Last answer:\n> ok\n\n" +
		"Tools used: Read ×1\n" +
		"Files read: a.txt\n\n" +
		"Note: 3 records of the stored conversation could not be read and are left out.\n"
	if s != want {
		t.Errorf("got\n%s\nwant\n%s", s, want)
	}
	if got := Summary(Conversation{Tool: ToolGemini, ID: geminiID}); !strings.Contains(got, "0 turns") || !strings.Contains(got, "No messages were read") {
		t.Errorf("empty conversation: %q", got)
	}

	// A conversation of extremes stays within MaxSummaryBytes, clips what it
	// quotes, and lists tools most used first, then by name.
	huge := strings.Repeat("line of a long request\n", 5000)
	var recs []Record
	for i := range 40 {
		recs = append(recs, message(KindUser, time.Time{}, fmt.Sprintf("request %d\n%s", i, huge)))
		for j := range 30 {
			recs = append(recs, toolCall(time.Time{}, fmt.Sprintf("tool-%02d-%s", j, strings.Repeat("n", 100)), "",
				[]byte(fmt.Sprintf(`{"file_path":"/w/p/%s/%d-%d.go"}`, strings.Repeat("d", 300), i, j))))
		}
		recs = append(recs, message(KindAssistant, time.Time{}, huge))
	}
	recs = append(recs, toolCall(time.Time{}, "Write", "", []byte(`{"file_path":"/w/p/x"}`)), toolCall(time.Time{}, "Write", "", []byte(`{"file_path":"/w/p/x"}`)))
	big := Conversation{Tool: ToolCodex, ID: codexID, Cwd: "/w/p", Records: recs}
	big.finish()
	s = Summary(big)
	if len(s) > MaxSummaryBytes || !utf8.ValidString(s) {
		t.Errorf("summary of %d bytes (valid UTF-8: %t), want at most %d", len(s), utf8.ValidString(s), MaxSummaryBytes)
	}
	if s != Summary(big) {
		t.Error("summary is not deterministic")
	}
	for _, want := range []string{"> request 0\n", "> request 39\n", "Latest requests (3 of 40):", " […]\n", "Tools used: tool-00-", "and 19 more\n", "Files changed: x\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "> request 36\n") {
		t.Error("more than the last 3 requests quoted")
	}
}

// TestFirstTurn (R-HOF-8): the reviewed summary, then one line naming the
// transcript file.
func TestFirstTurn(t *testing.T) {
	t.Parallel()
	got := FirstTurn("My edited summary.\n\n", "/h/.config/olivares/handoff-run_1.md")
	want := "My edited summary.\n\nRead the file /h/.config/olivares/handoff-run_1.md for the full history of that session before you continue."
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := FirstTurn("  ", "/t.md"); got != "Read the file /t.md for the full history of that session before you continue." {
		t.Errorf("empty summary: %q", got)
	}
}

// TestClaudeSlug: Claude Code's project folder names (real-clis.md §1.3).
func TestClaudeSlug(t *testing.T) {
	t.Parallel()
	long := "/" + strings.Repeat("abcdefghij", 26) // 261 characters
	for _, tc := range []struct{ cwd, want string }{
		{"/srv/scratch/work/c1", "-srv-scratch-work-c1"},
		{"/srv/scratch/work/a.b_c d+e~f@g", "-srv-scratch-work-a-b-c-d-e-f-g"},
		{"/srv/scratch/work/Üñí", "-srv-scratch-work----"},
		{"/x/😀", "-x---"}, // two UTF-16 units
		// Java's String.hashCode of long is 2126071345 (computed
		// independently); in base 36 it is "z5t35d".
		{long, strings.ReplaceAll(long, "/", "-")[:200] + "-z5t35d"},
	} {
		if got := claudeSlug(tc.cwd); got != tc.want {
			t.Errorf("claudeSlug(%.40q) = %q, want %q", tc.cwd, got, tc.want)
		}
	}
}
