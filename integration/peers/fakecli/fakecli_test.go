//go:build linux

package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestClaudeSlug: the project-directory rule of real-clis.md §1.3, on its
// recorded examples.
func TestClaudeSlug(t *testing.T) {
	for _, tc := range []struct{ cwd, want string }{
		{"/srv/scratch/work/c1", "-srv-scratch-work-c1"},
		{"/srv/scratch/work/a.b_c d+e~f@g", "-srv-scratch-work-a-b-c-d-e-f-g"},
		{"/srv/scratch/work/Üñí", "-srv-scratch-work----"},
		{"/x/\U0001F600", "-x---"}, // one '-' per UTF-16 unit: a surrogate pair is two
	} {
		if got := claudeSlug(tc.cwd); got != tc.want {
			t.Errorf("claudeSlug(%q) = %q, want %q", tc.cwd, got, tc.want)
		}
	}
	long := "/" + strings.Repeat("a", 256) // 257 characters
	got := claudeSlug(long)
	if len(got) <= 201 || got[:200] != "-"+strings.Repeat("a", 199) || got[200] != '-' {
		t.Errorf("claudeSlug(257 chars) = %q, want 200 characters, '-', then the hash", got)
	}
}

func TestParseSpecial(t *testing.T) {
	for _, tc := range []struct {
		text string
		want special
	}{
		{"flood 10", special{kind: "flood", n: 10}},
		{"flood x", special{}},
		{"exit 3", special{kind: "exit", n: 3}},
		{"stderr a b", special{kind: "stderr", arg: "a b"}},
		{"slow", special{kind: "slow"}},
		{"slow down", special{}},
		{"hello", special{}},
	} {
		if got := parseSpecial(tc.text); got != tc.want {
			t.Errorf("parseSpecial(%q) = %+v, want %+v", tc.text, got, tc.want)
		}
	}
}

// TestGeminiProjects: a cwd's project name in projects.json (real-clis.md
// §3): the lowercased base name, every other character a '-', and -1, -2 …
// when the name is taken.
func TestGeminiProjects(t *testing.T) {
	g := &gemini{dir: t.TempDir()}
	for _, tc := range []struct{ cwd, want string }{
		{"/srv/work/My Proj.x", "my-proj-x"},
		{"/srv/ga/proj", "proj"},
		{"/srv/gb/proj", "proj-1"},
		{"/srv/gc/proj", "proj-2"},
		{"/srv/ga/proj", "proj"}, // known: the same name again
	} {
		dir, err := g.chats(tc.cwd, true)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := dir, filepath.Join(g.dir, "tmp", tc.want, "chats"); got != want {
			t.Errorf("chats(%q) = %s, want %s", tc.cwd, got, want)
		}
	}
	if _, err := g.chats("/srv/unknown", false); err == nil {
		t.Error("chats of an unregistered cwd without create: no error")
	}
}

// TestGeminiLog: a session written in the chat log's form reads back with
// its messages in order, the injected <session_context> marked as context,
// and a {"$set":{"messages":…}} replacing the list as Gemini CLI's loader
// does.
func TestGeminiLog(t *testing.T) {
	t.Setenv("GEMINI_API_KEY", "test")
	g := &gemini{dir: t.TempDir()}
	s, _, aerr := g.newSession("/srv/work/w")
	if aerr != nil {
		t.Fatal(aerr)
	}
	g.record(s, acpMsg{ID: "u1", User: true, Text: "hello"})
	g.record(s, acpMsg{ID: "a1", Text: "pong: hello"})
	got := g.read(s.ref, s.id)
	if got == nil || len(got.msgs) != 3 || !got.msgs[0].Context || got.msgs[1].Text != "hello" || got.msgs[2].User {
		t.Fatalf("read = %+v", got)
	}
	if texts := got.userTexts(); len(texts) != 1 || texts[0] != "hello" {
		t.Errorf("userTexts() = %q, want [hello]", texts)
	}
	if other := g.read(s.ref, "another-id"); other != nil {
		t.Errorf("read of another id = %+v, want nil", other)
	}
	if err := appendJSONL(s.ref, map[string]any{"$set": map[string]any{"messages": []any{}}}); err != nil {
		t.Fatal(err)
	}
	if got := g.read(s.ref, s.id); got == nil || len(got.msgs) != 0 {
		t.Errorf("after $set messages []: %+v, want no messages", got)
	}
}

// TestOpenCodeID: ids have OpenCode's form, ses_ and 26 letters and digits.
func TestOpenCodeID(t *testing.T) {
	re := regexp.MustCompile(`^ses_[0-9a-f]{12}[0-9A-Za-z]{14}$`)
	seen := map[string]bool{}
	for range 100 {
		id := opencodeID("ses_")
		if !re.MatchString(id) || seen[id] {
			t.Fatalf("opencodeID = %q (seen before: %t)", id, seen[id])
		}
		seen[id] = true
	}
	for _, tc := range []struct{ in, want string }{
		{"msg_23ac805da001eR5vHVvp5b4u1g", "msg_23ac805da001eR5vHVvp5b4u1g"},
		{"7964659d-60c5-40c3-9d6f-1ae207273276", "msg_7964659d60c540c39d6f1ae207"},
		{"x", "msg_x"},
	} {
		if got := ocMessageID(tc.in); got != tc.want {
			t.Errorf("ocMessageID(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
