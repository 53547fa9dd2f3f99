package transcript

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// isErr reports whether err matches the sentinel.
func isErr(err error, sentinel *Error) bool { return err != nil && errors.Is(err, sentinel) }

func asError(err error, e **Error) bool { return errors.As(err, e) }

// session writes a Claude Code transcript into a fresh profile home, one
// record at a time, as the tool does.
type session struct {
	t    *testing.T
	home string
	cwd  string
	sid  string
	path string
	at   time.Time
}

func newSession(t *testing.T) *session {
	t.Helper()
	s := &session{t: t, home: t.TempDir(), cwd: "/nonexistent/olivares/test", sid: "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee",
		at: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	dir := filepath.Join(s.home, ".claude", "projects", ClaudeSlug(s.cwd))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.path = filepath.Join(dir, s.sid+".jsonl")
	return s
}

func (s *session) src() Source {
	return Source{Tool: ToolClaude, Home: s.home, ConversationID: s.sid, Cwd: s.cwd}
}

// next is the time of the next record: one second after the last.
func (s *session) next() string {
	s.at = s.at.Add(time.Second)
	return s.at.Format(time.RFC3339Nano)
}

// raw appends one line as it is (a newline is added unless partial).
func (s *session) raw(line string, partial bool) {
	s.t.Helper()
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	if !partial {
		line += "\n"
	}
	if _, err := f.WriteString(line); err != nil {
		s.t.Fatal(err)
	}
}

func (s *session) record(r map[string]any) {
	s.t.Helper()
	if _, ok := r["timestamp"]; !ok {
		r["timestamp"] = s.next()
	}
	b, err := json.Marshal(r)
	if err != nil {
		s.t.Fatal(err)
	}
	s.raw(string(b), false)
}

func (s *session) user(text string) {
	s.record(map[string]any{"type": "user", "isSidechain": false, "message": map[string]any{"role": "user", "content": text}})
}

func (s *session) assistant(id, text string) {
	s.record(map[string]any{"type": "assistant", "isSidechain": false, "message": map[string]any{"id": id, "role": "assistant",
		"model": "claude-opus-5-5", "content": []any{map[string]any{"type": "text", "text": text}}}})
}

// noise appends a record no reader needs (an API request blob).
func (s *session) noise(size int) {
	s.record(map[string]any{"type": "api-request-blob", "hash": "h", "message": map[string]any{"role": "system",
		"content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("%0*d", size, 0)}}}})
}
