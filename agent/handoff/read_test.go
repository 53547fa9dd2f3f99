package handoff

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReadSamples: each file reader finds its conversation where the tool
// keeps it and reads the conversation records only (R-HOF-6), with the
// session's cwd, turns and no unreadable record.
func TestReadSamples(t *testing.T) {
	t.Parallel()
	for _, tool := range fileTools {
		src, path := homeWith(t, tool, []byte(sample[tool]))
		c := readT(t, src)
		if got := said(c); !slices.Equal(got, sampleSaid[tool]) {
			t.Errorf("%s: got %q, want %q", tool, got, sampleSaid[tool])
		}
		if c.Turns != 4 || c.Unreadable != 0 || c.Cwd != "/w/p" || c.Path != path || c.ID != src.ConversationID || c.Tool != tool {
			t.Errorf("%s: turns %d, unreadable %d, cwd %q, path %q, id %q; want 4, 0, /w/p, %q, %q", tool, c.Turns, c.Unreadable, c.Cwd, c.Path, c.ID, path, src.ConversationID)
		}
		if c.Bytes != int64(len(sample[tool])) {
			t.Errorf("%s: Bytes %d, want %d", tool, c.Bytes, len(sample[tool]))
		}
		// Without the cwd every project folder is searched.
		src.Cwd = ""
		if c2 := readT(t, src); !slices.Equal(said(c2), said(c)) {
			t.Errorf("%s without Cwd: %q", tool, said(c2))
		}
	}
}

// TestHalfWrittenLastLine (R-HOF-3): a running session is read as it is: a
// last line cut short (with or without its newline) is being written and
// not counted; a cut line followed by others is unreadable and counted, and
// so is a record of a conversation type whose shape is wrong.
func TestHalfWrittenLastLine(t *testing.T) {
	t.Parallel()
	for _, tool := range fileTools {
		lines := strings.SplitAfter(strings.TrimSuffix(sample[tool], "\n"), "\n")
		full := lines[len(lines)-1]
		cut := full[:len(full)/2]
		bad := map[string]string{
			ToolClaude: `{"type":"user","uuid":"ux","message":{"role":"user","content":42}}`,
			ToolCodex:  `{"timestamp":"x","type":"response_item","payload":{"type":"message","role":"user","content":42}}`,
			ToolGemini: `{"id":"mx","type":"user","content":42}`,
		}[tool]
		prefix := strings.Join(lines[:len(lines)-1], "")
		for _, tc := range []struct {
			name       string
			content    string
			unreadable int
			last       bool // the last sample record is read
		}{
			{"complete", sample[tool], 0, true},
			{"cut last line", prefix + cut, 0, false},
			{"cut last line with newline", prefix + cut + "\n", 0, false},
			{"cut last line then blank lines", prefix + cut + "\n\n  \n", 0, false},
			{"cut line in the middle", prefix + cut + "\n" + full + "\n", 1, true},
			{"two cut lines in the middle", prefix + cut + "\n" + cut + "\n" + full + "\n", 2, true},
			{"wrong shape", prefix + bad + "\n" + full + "\n", 1, true},
			{"not JSON", prefix + "not json at all\n" + full + "\n", 1, true},
		} {
			src, _ := homeWith(t, tool, []byte(tc.content))
			c := readT(t, src)
			want := sampleSaid[tool]
			if !tc.last {
				want = want[:len(want)-1]
			}
			if got := said(c); !slices.Equal(got, want) || c.Unreadable != tc.unreadable {
				t.Errorf("%s, %s: got %q with %d unreadable, want %q with %d", tool, tc.name, got, c.Unreadable, want, tc.unreadable)
			}
		}
	}
}

// TestReadErrors: the refusals of Read and their statuses.
func TestReadErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home := t.TempDir()
	for _, tc := range []struct {
		name string
		src  Source
		want *Error
	}{
		{"grok (R-HOF-1)", Source{Tool: "grok", Home: home, ConversationID: claudeID}, ErrUnsupportedTool},
		{"unknown tool", Source{Tool: "cursor", Home: home, ConversationID: claudeID}, ErrUnsupportedTool},
		{"claude id with a path", Source{Tool: ToolClaude, Home: home, ConversationID: "../../etc/passwd"}, ErrBadSource},
		{"codex id not a uuid", Source{Tool: ToolCodex, Home: home, ConversationID: "x"}, ErrBadSource},
		{"gemini empty id", Source{Tool: ToolGemini, Home: home}, ErrBadSource},
		{"opencode id an option", Source{Tool: ToolOpenCode, Home: home, ConversationID: "--help", OpenCodeBin: "/bin/true"}, ErrBadSource},
		{"opencode relative binary", Source{Tool: ToolOpenCode, Home: home, ConversationID: "ses_a", OpenCodeBin: "opencode"}, ErrBadSource},
		{"opencode not on PATH", Source{Tool: ToolOpenCode, Home: home, ConversationID: "ses_a", Env: []string{"PATH=" + home}}, ErrBadSource},
		{"relative home", Source{Tool: ToolClaude, Home: "home", ConversationID: claudeID}, ErrBadSource},
		{"claude, nothing stored", Source{Tool: ToolClaude, Home: home, ConversationID: claudeID}, ErrConversationUnavailable},
		{"codex, nothing stored", Source{Tool: ToolCodex, Home: home, ConversationID: codexID}, ErrConversationUnavailable},
		{"gemini, nothing stored", Source{Tool: ToolGemini, Home: home, ConversationID: geminiID}, ErrConversationUnavailable},
		{"no home", Source{Tool: ToolClaude, Home: filepath.Join(home, "absent"), ConversationID: claudeID}, ErrConversationUnavailable},
	} {
		_, err := Read(ctx, tc.src)
		wantErr(t, tc.name, err, tc.want)
	}
	// Another session's files are not this one.
	src, _ := homeWith(t, ToolClaude, []byte(sample[ToolClaude]))
	src.ConversationID = "99999999-2222-4333-8444-555555555555"
	_, err := Read(ctx, src)
	wantErr(t, "claude, another id", err, ErrConversationUnavailable)
	src, _ = homeWith(t, ToolCodex, []byte(sample[ToolCodex]))
	src.ConversationID = "01a23643-8a79-7b72-93b2-000000000000"
	_, err = Read(ctx, src)
	wantErr(t, "codex, another id", err, ErrConversationUnavailable)
	// A Gemini log with this id's 8-hex suffix but another session inside.
	other := strings.Replace(sample[ToolGemini], geminiID, geminiID[:8]+"-0000-4000-8000-000000000000", 1)
	src, _ = homeWith(t, ToolGemini, []byte(other))
	_, err = Read(ctx, src)
	wantErr(t, "gemini, same suffix, another session", err, ErrConversationUnavailable)
}

// TestGeminiPicksFullLog: each Gemini CLI start writes throwaway logs, and
// session/load an extra header-only one with the same suffix (real-clis.md
// §3): the log with the conversation is read.
func TestGeminiPicksFullLog(t *testing.T) {
	t.Parallel()
	src, path := homeWith(t, ToolGemini, []byte(sample[ToolGemini]))
	dir := filepath.Dir(path)
	for name, content := range map[string]string{
		"session-2026-12-01T09-00-" + geminiID[:8] + ".jsonl": geminiHeader + "\n",
		"session-2026-12-03T09-00-" + geminiID[:8] + ".jsonl": geminiHeader + "\n",
		"session-2026-12-03T09-00-aaaaaaaa.jsonl":             strings.ReplaceAll(sample[ToolGemini], geminiID, "aaaaaaaa-f2a5-4a64-b708-76b817404f1c"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := readT(t, src)
	if !slices.Equal(said(c), sampleSaid[ToolGemini]) || c.Path != path {
		t.Errorf("got %q from %s, want the sample from %s", said(c), c.Path, path)
	}
}

// TestCodexArchived: an archived thread is read from archived_sessions/.
func TestCodexArchived(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	dir := filepath.Join(home, ".codex", "archived_sessions")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".codex", "sessions", "2026", "12", "01"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rollout-2026-12-02T10-18-45-"+codexID+".jsonl"), []byte(sample[ToolCodex]), 0o600); err != nil {
		t.Fatal(err)
	}
	c := readT(t, Source{Tool: ToolCodex, Home: home, ConversationID: codexID})
	if !slices.Equal(said(c), sampleSaid[ToolCodex]) {
		t.Errorf("got %q", said(c))
	}
}
