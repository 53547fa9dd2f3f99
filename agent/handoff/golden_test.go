package handoff

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// The fixture ids saveFixture puts in place of the real runs' ids.
var fixtures = []struct {
	tool, file, id string
}{
	{ToolClaude, "claude.jsonl", "00000000-0000-4000-8000-00000000c1a0"},
	{ToolCodex, "codex.jsonl", "00000000-0000-7000-8000-0000000c0de0"},
	{ToolGemini, "gemini.jsonl", "00000000-0000-4000-8000-0000000e3171"},
	{ToolOpenCode, "opencode.json", "ses_0000000000000penc0de"},
}

// fixtureHome lays a fixture out in a fresh profile home where its tool
// keeps it, and returns the Source that names it. OpenCode's is served by a
// stand-in opencode that prints the recorded export.
func fixtureHome(t *testing.T, tool, file, id string) Source {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "golden", file))
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	put := func(rel string, b []byte) {
		t.Helper()
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src := Source{Tool: tool, Home: home, ConversationID: id, Cwd: "/home/dev/project"}
	switch tool {
	case ToolClaude:
		put(filepath.Join(".claude", "projects", claudeSlug("/home/dev/project"), id+".jsonl"), raw)
	case ToolCodex:
		put(filepath.Join(".codex", "sessions", "2026", "01", "02", "rollout-2026-01-02T03-04-05-"+id+".jsonl"), raw)
	case ToolGemini:
		put(filepath.Join(".gemini", "projects.json"), []byte(`{"projects":{"/home/dev/project":"project"}}`))
		put(filepath.Join(".gemini", "tmp", "project", "chats", "session-2026-01-02T03-04-"+id[:8]+".jsonl"), raw)
	case ToolOpenCode:
		put("export.json", raw)
		src.OpenCodeBin = stubOpenCode(t, `[ "$1" = export ] && [ "$2" = "`+id+`" ] || exit 3
exec cat "$HOME/export.json"`)
		src.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home}
	}
	return src
}

// stubOpenCode writes an executable stand-in for opencode running script.
func stubOpenCode(t *testing.T, script string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "opencode")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGolden: each recorded conversation (made by the real CLIs in
// realcli_test.go, ids, times and folders normalised) gives the summary
// and transcript in testdata/golden/<tool>.summary.txt and
// <tool>.transcript.md (R-HOF-7, R-HOF-10).
func TestGolden(t *testing.T) {
	t.Parallel()
	for _, f := range fixtures {
		t.Run(f.tool, func(t *testing.T) {
			t.Parallel()
			c, err := Read(context.Background(), fixtureHome(t, f.tool, f.file, f.id))
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if c.Unreadable != 0 || len(c.Records) == 0 {
				t.Errorf("unreadable %d, %d records; want 0 and some", c.Unreadable, len(c.Records))
			}
			golden(t, f.tool+".summary.txt", Summary(c))
			golden(t, f.tool+".transcript.md", string(Transcript(c)))
		})
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s: got\n%s\nwant\n%s", p, got, want)
	}
}
