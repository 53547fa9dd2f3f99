package transcript

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestClaudeSlug: the slug rule of real-clis.md §1.3, on its examples: one
// '-' per UTF-16 unit that is not an ASCII letter or digit.
func TestClaudeSlug(t *testing.T) {
	for _, tc := range []struct{ cwd, want string }{
		{"/srv/scratch/work/c1", "-srv-scratch-work-c1"},
		{"/srv/scratch/work/a.b_c d+e~f@g", "-srv-scratch-work-a-b-c-d-e-f-g"},
		{"/srv/scratch/work/Üñí", "-srv-scratch-work----"},
		{"/w/😀", "-w---"}, // a surrogate pair: two units, two dashes
		{"", ""},
	} {
		if got := ClaudeSlug(tc.cwd); got != tc.want {
			t.Errorf("ClaudeSlug(%q) = %q, want %q", tc.cwd, got, tc.want)
		}
	}
	// Over 200 units: the first 200, '-', base 36 of |Java hash|.
	long := "/" + strings.Repeat("abcdefghij", 25) // 251 units
	got := ClaudeSlug(long)
	if len(got) <= 201 || got[:201] != ClaudeSlug(long[:200])+"-" {
		t.Errorf("long slug %q: want the first 200 units and '-'", got)
	}
	// The hash reproduces Java's String.hashCode: "hello" is 99162322.
	if h := ClaudeSlug(strings.Repeat("x", 196) + "hello"); !strings.HasSuffix(h, "-"+javaHashBase36(strings.Repeat("x", 196)+"hello")) {
		t.Errorf("hash suffix of %q", h)
	}
}

// javaHashBase36 is an independent Java String.hashCode (for BMP text),
// written with int64 arithmetic and an explicit 32-bit wrap.
func javaHashBase36(s string) string {
	var h int64
	for _, r := range s {
		h = (h*31 + int64(r)) & 0xffffffff
	}
	if h >= 1<<31 {
		h -= 1 << 32
	}
	if h < 0 {
		h = -h
	}
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	if h == 0 {
		return "0"
	}
	var out []byte
	for h > 0 {
		out = append([]byte{digits[h%36]}, out...)
		h /= 36
	}
	return string(out)
}

// TestLocateStates: pending without an id or while live, missing when the
// run is over and the file is not there (R-ACT-1, R-MSG-2, Q-23).
func TestLocateStates(t *testing.T) {
	s := newSession(t)
	c := NewCache(0, 0)
	for _, tc := range []struct {
		name string
		src  Source
		want State
	}{
		{"no id", Source{Tool: ToolClaude, Home: s.home, Cwd: s.cwd, Live: false}, StatePending},
		{"live, not written", Source{Tool: ToolClaude, Home: s.home, ConversationID: s.sid, Cwd: s.cwd, Live: true}, StatePending},
		{"over, not written", Source{Tool: ToolClaude, Home: s.home, ConversationID: s.sid, Cwd: s.cwd}, StateMissing},
		{"codex over", Source{Tool: ToolCodex, Home: s.home, ConversationID: "01a2b3c4-d5e6-7f80-9a1b-2c3d4e5f6a7b"}, StateMissing},
		{"home absent", Source{Tool: ToolClaude, Home: filepath.Join(s.home, "nope"), ConversationID: s.sid, Live: true}, StatePending},
	} {
		p, err := c.Messages(tc.src, DefaultMessagesQuery())
		if err != nil || p.Transcript != tc.want || p.Total != 0 || p.Items == nil {
			t.Errorf("%s: %+v, %v; want %s and no items", tc.name, p, err, tc.want)
		}
		a, err := c.Activity(tc.src, nil, nil)
		if err != nil || a.Transcript != tc.want {
			t.Errorf("%s: activity %q, %v; want %s", tc.name, a.Transcript, err, tc.want)
		}
	}
	s.user("hello")
	if p, err := c.Messages(s.src(), DefaultMessagesQuery()); err != nil || p.Transcript != StateRead || p.Total != 1 {
		t.Errorf("written: %+v, %v; want read with one message", p, err)
	}
	for _, id := range []string{"../../etc/passwd", "*", "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeee/"} {
		src := s.src()
		src.ConversationID = id
		if _, err := c.Messages(src, DefaultMessagesQuery()); !isErr(err, ErrInvalidSource) {
			t.Errorf("id %q: %v, want ErrInvalidSource", id, err)
		}
	}
	for _, tool := range []string{"grok", "gemini", ""} {
		src := s.src()
		src.Tool = tool
		if _, err := c.Activity(src, nil, nil); !isErr(err, ErrUnsupportedTool) {
			t.Errorf("tool %q: %v, want ErrUnsupportedTool", tool, err)
		}
	}
}

// TestHomeAndLinkRules: a transcript reached through a symlink, a hard
// link or a special file is refused and nothing of it is read; a
// profile home that is itself a symlink is the operator's layout and fine.
func TestHomeAndLinkRules(t *testing.T) {
	outside := t.TempDir()
	real := filepath.Join(outside, "real.jsonl")
	if err := os.WriteFile(real, []byte(`{"type":"user","timestamp":"2026-11-01T00:00:00Z","message":{"role":"user","content":"secret"}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		make func(s *session)
	}{
		{"file symlink", func(s *session) { must(t, os.Symlink(real, s.path)) }},
		{"project dir symlink", func(s *session) {
			dir := filepath.Dir(s.path)
			must(t, os.RemoveAll(dir))
			other := filepath.Join(outside, "proj-"+filepath.Base(s.home))
			must(t, os.MkdirAll(other, 0o700))
			must(t, os.WriteFile(filepath.Join(other, s.sid+".jsonl"), []byte("{}\n"), 0o600))
			must(t, os.Symlink(other, dir))
		}},
		{".claude symlink", func(s *session) {
			root := filepath.Join(s.home, ".claude")
			other := filepath.Join(outside, "claude-"+filepath.Base(s.home))
			must(t, os.Rename(root, other))
			must(t, os.WriteFile(filepath.Join(other, "projects", ClaudeSlug(s.cwd), s.sid+".jsonl"), []byte("{}\n"), 0o600))
			must(t, os.Symlink(other, root))
		}},
		{"hard link", func(s *session) { must(t, os.Link(real, s.path)) }},
		{"fifo", func(s *session) { must(t, syscall.Mkfifo(s.path, 0o600)) }},
		{"directory", func(s *session) { must(t, os.Mkdir(s.path, 0o700)) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t)
			tc.make(s)
			c := NewCache(0, 0)
			_, err := c.Messages(s.src(), DefaultMessagesQuery())
			if !isErr(err, ErrTranscriptUnsafe) {
				t.Errorf("messages: %v, want ErrTranscriptUnsafe", err)
			}
			if _, err := c.Activity(s.src(), nil, nil); !isErr(err, ErrTranscriptUnsafe) {
				t.Errorf("activity: %v, want ErrTranscriptUnsafe", err)
			}
			if files, _ := c.Len(); files != 0 {
				t.Errorf("%d files indexed after a refusal, want none", files)
			}
		})
	}
	t.Run("home through a symlink", func(t *testing.T) {
		s := newSession(t)
		s.user("hello")
		link := filepath.Join(t.TempDir(), "home-link")
		must(t, os.Symlink(s.home, link))
		src := s.src()
		src.Home = link
		if p, err := NewCache(0, 0).Messages(src, DefaultMessagesQuery()); err != nil || p.Total != 1 {
			t.Errorf("%+v, %v; want the message read", p, err)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestLocateClaudeElsewhere: a session resumed from another cwd stays in
// its first project directory (real-clis.md §1.4); it is found there.
func TestLocateClaudeElsewhere(t *testing.T) {
	s := newSession(t)
	s.user("hello")
	src := s.src()
	src.Cwd = "/some/other/place"
	if p, err := NewCache(0, 0).Messages(src, DefaultMessagesQuery()); err != nil || p.Total != 1 {
		t.Errorf("%+v, %v; want the session found in its project directory", p, err)
	}
}

// TestLocateCodex: the rollout in its day folder (from the UUIDv7 id), in
// archived_sessions after an archive (the path hint is not trusted), and
// for an id that is not a v7, anywhere under sessions/.
func TestLocateCodex(t *testing.T) {
	home := t.TempDir()
	id := "01a2b3c4-d5e6-7f80-9a1b-2c3d4e5f6a7b" // 2026-12-26 (UTC)
	rec := `{"timestamp":"2026-12-26T19:12:31.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}` + "\n"
	day := filepath.Join(home, ".codex", "sessions", "2026", "12", "26")
	must(t, os.MkdirAll(day, 0o700))
	name := "rollout-2026-12-26T19-12-31-" + id + ".jsonl"
	must(t, os.WriteFile(filepath.Join(day, name), []byte(rec), 0o600))
	c := NewCache(0, 0)
	src := Source{Tool: ToolCodex, Home: home, ConversationID: id}
	if p, err := c.Messages(src, DefaultMessagesQuery()); err != nil || p.Total != 1 {
		t.Fatalf("in its day folder: %+v, %v", p, err)
	}
	arch := filepath.Join(home, ".codex", "archived_sessions")
	must(t, os.MkdirAll(arch, 0o700))
	must(t, os.Rename(filepath.Join(day, name), filepath.Join(arch, name)))
	if p, err := c.Messages(src, DefaultMessagesQuery()); err != nil || p.Total != 1 {
		t.Errorf("archived: %+v, %v", p, err)
	}
	v4 := "0f8fad5b-d9cb-469f-a165-70867728950e"
	other := filepath.Join(home, ".codex", "sessions", "2025", "01", "02")
	must(t, os.MkdirAll(other, 0o700))
	must(t, os.WriteFile(filepath.Join(other, "rollout-2025-01-02T03-04-05-"+v4+".jsonl"), []byte(rec+rec), 0o600))
	src.ConversationID = v4
	if p, err := c.Messages(src, DefaultMessagesQuery()); err != nil || p.Total != 2 {
		t.Errorf("v4 id: %+v, %v", p, err)
	}
}
