package transcript

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// TestMessagesPages walks every page of a session through next, in both
// orders and for both roles, and checks that the pages hold each matching
// message once, oldest to newest within a page, with next absent on the
// last page and total the matching count (R-MSG-6, R-MSG-13, R-MSG-15).
func TestMessagesPages(t *testing.T) {
	s := newSession(t)
	const n = 137
	var users, all []int
	for i := 1; i <= n; i++ {
		if i%3 == 0 {
			s.assistant(fmt.Sprintf("msg_%d", i), fmt.Sprintf("reply %d", i))
		} else {
			s.user(fmt.Sprintf("prompt %d", i))
			users = append(users, i)
		}
		all = append(all, i)
		if i%10 == 0 {
			s.noise(100) // records that are not messages do not take ids
		}
	}
	c := NewCache(0, 0)
	for _, role := range []string{RoleUser, RoleAll} {
		want := users
		if role == RoleAll {
			want = all
		}
		for _, order := range []string{OrderAsc, OrderDesc} {
			for _, limit := range []int{1, 7, 50, 200} {
				var got []int
				cursor := 0
				for pages := 0; ; pages++ {
					if pages > n {
						t.Fatalf("%s/%s/%d: no end", role, order, limit)
					}
					p, err := c.Messages(s.src(), MessagesQuery{Role: role, Order: order, Limit: limit, Cursor: cursor})
					if err != nil {
						t.Fatal(err)
					}
					if p.Total != len(want) {
						t.Fatalf("%s/%s/%d: total %d, want %d", role, order, limit, p.Total, len(want))
					}
					var ids []int
					for _, it := range p.Items {
						ids = append(ids, it.ID)
					}
					if !slices.IsSorted(ids) || len(ids) > limit {
						t.Fatalf("%s/%s/%d: page %v not oldest-first or over the limit", role, order, limit, ids)
					}
					if order == OrderAsc {
						got = append(got, ids...)
					} else {
						got = append(ids, got...)
					}
					if p.Next == nil {
						break
					}
					cursor = *p.Next
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s/%s/%d: pages hold %v, want %v", role, order, limit, got, want)
				}
			}
		}
	}
	// An inclusive cursor: the page starts at it (asc) or ends at it (desc).
	p, _ := c.Messages(s.src(), MessagesQuery{Role: RoleAll, Limit: 2, Cursor: 10})
	if len(p.Items) != 2 || p.Items[0].ID != 10 || *p.Next != 12 {
		t.Errorf("asc from 10: %+v", p)
	}
	p, _ = c.Messages(s.src(), MessagesQuery{Role: RoleAll, Order: OrderDesc, Limit: 2, Cursor: 10})
	if len(p.Items) != 2 || p.Items[1].ID != 10 || *p.Next != 8 {
		t.Errorf("desc from 10: %+v", p)
	}
	// A cursor past the end: an empty last page.
	p, _ = c.Messages(s.src(), MessagesQuery{Role: RoleAll, Cursor: 1000})
	if len(p.Items) != 0 || p.Next != nil || p.Total != n {
		t.Errorf("cursor past the end: %+v", p)
	}
}

// TestMessagesGrow: ids are positions and never change as the transcript
// grows (R-MSG-9); a later request parses only the appended records; a
// record without its newline is not read until it is complete.
func TestMessagesGrow(t *testing.T) {
	s := newSession(t)
	s.user("one")
	s.assistant("m1", "two")
	c := NewCache(0, 0)
	page := func() []string {
		t.Helper()
		p, err := c.Messages(s.src(), MessagesQuery{Role: RoleAll, Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range p.Items {
			out = append(out, fmt.Sprintf("%d:%s", it.ID, it.FirstLine))
		}
		return out
	}
	if got := page(); !slices.Equal(got, []string{"1:one", "2:two"}) {
		t.Fatalf("got %v", got)
	}
	ix := c.lookup(t, s)
	records := ix.records
	s.user("three")
	s.raw(`{"type":"user","timestamp":"2026-11-01T13:00:00Z","message":{"role":"user","content":"fo`, true)
	if got := page(); !slices.Equal(got, []string{"1:one", "2:two", "3:three"}) {
		t.Errorf("after growth: %v", got)
	}
	if parsed := ix.records - records; parsed != 1 {
		t.Errorf("%d records parsed for one appended, want 1 (incremental)", parsed)
	}
	s.raw(`ur"}}`, false)
	if got := page(); !slices.Equal(got, []string{"1:one", "2:two", "3:three", "4:four"}) {
		t.Errorf("after the partial record ended: %v", got)
	}
	// A later record of the same API message extends it, keeping its id.
	s.assistant("m5", "five")
	s.record(map[string]any{"type": "assistant", "message": map[string]any{"id": "m5", "role": "assistant", "content": []any{map[string]any{"type": "text", "text": "and more"}}}})
	if got := page(); !slices.Equal(got, []string{"1:one", "2:two", "3:three", "4:four", "5:five"}) {
		t.Errorf("merged assistant: %v", got)
	}
	m, err := c.Message(s.src(), 5)
	if err != nil || m.Text != "five\nand more" {
		t.Errorf("merged text %q, %v", m.Text, err)
	}
}

// lookup returns the cached index of s's transcript.
func (c *Cache) lookup(t *testing.T, s *session) *fileIndex {
	t.Helper()
	of, err := openInHome(s.home, ".claude", "projects", ClaudeSlug(s.cwd), s.sid+".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer of.f.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.files[of.key]
	if !ok {
		t.Fatal("not indexed")
	}
	return el.Value.(*fileIndex)
}

// TestMessagesRewrite: a transcript that shrank, whose indexed bytes
// changed, or that was replaced by another file is indexed again.
func TestMessagesRewrite(t *testing.T) {
	first := func(c *Cache, s *session) string {
		t.Helper()
		p, err := c.Messages(s.src(), MessagesQuery{Role: RoleAll})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range p.Items {
			out = append(out, it.FirstLine)
		}
		return strings.Join(out, ",")
	}
	t.Run("truncated", func(t *testing.T) {
		s := newSession(t)
		s.user("alpha")
		s.user("beta")
		c := NewCache(0, 0)
		if got := first(c, s); got != "alpha,beta" {
			t.Fatalf("got %q", got)
		}
		must(t, os.Truncate(s.path, 0))
		s.user("gamma")
		if got := first(c, s); got != "gamma" {
			t.Errorf("after truncation: %q, want gamma", got)
		}
	})
	t.Run("same size, other bytes", func(t *testing.T) {
		s := newSession(t)
		s.user("alpha")
		c := NewCache(0, 0)
		first(c, s)
		data, err := os.ReadFile(s.path)
		must(t, err)
		must(t, os.WriteFile(s.path, []byte(strings.Replace(string(data), "alpha", "omega", 1)), 0o600))
		if got := first(c, s); got != "omega" {
			t.Errorf("after an in-place rewrite: %q, want omega", got)
		}
	})
	t.Run("replaced", func(t *testing.T) {
		s := newSession(t)
		s.user("alpha")
		c := NewCache(0, 0)
		first(c, s)
		tmp := s.path + ".new"
		must(t, os.WriteFile(tmp, []byte(`{"type":"user","timestamp":"2026-11-01T00:00:00Z","message":{"role":"user","content":"delta"}}`+"\n"), 0o600))
		must(t, os.Rename(tmp, s.path))
		if got := first(c, s); got != "delta" {
			t.Errorf("after a rename over it: %q, want delta", got)
		}
	})
}

// TestMessageRead: an id read returns the whole text, clipped at 64 KiB
// with [...] and clipped:true (R-MSG-8), later_same (R-MSG-15), the total
// of the session, whatever filters; an unknown id is a 404 (R-MSG-11).
func TestMessageRead(t *testing.T) {
	s := newSession(t)
	big := "start\n" + strings.Repeat("é", MaxTextBytes) // 2 bytes a rune
	s.user("hello")
	s.assistant("m1", "hi")
	s.user(big)
	s.user("hello")
	s.user("  hello  \nsecond line")
	s.assistant("m2", "hello")
	c := NewCache(0, 0)
	m, err := c.Message(s.src(), 1)
	if err != nil || m.Text != "hello" || m.LaterSame != 2 || m.Total != 6 || m.Role != RoleUser || m.Clipped {
		t.Errorf("id 1: %+v, %v; want hello, later_same 2 (same role, same first line), total 6", m, err)
	}
	m, err = c.Message(s.src(), 3)
	if err != nil || !m.Clipped || !strings.HasSuffix(m.Text, ClipMark) || len(m.Text) > MaxTextBytes+len(ClipMark) || m.FirstLine != "start" {
		t.Errorf("id 3: %d bytes, clipped %t, first %q, %v", len(m.Text), m.Clipped, m.FirstLine, err)
	}
	p, err := c.Messages(s.src(), MessagesQuery{Text: true})
	if err != nil || len(p.Items) != 4 || !p.Items[1].Clipped || *p.Items[1].Text != m.Text || p.Items[0].Clipped {
		t.Errorf("text=1 page: %+v, %v", p, err)
	}
	for _, id := range []int{7, 100} {
		if _, err := c.Message(s.src(), id); !isErr(err, ErrUnknownMessage) {
			t.Errorf("id %d: %v, want ErrUnknownMessage", id, err)
		}
	}
	if _, err := c.Message(s.src(), 0); !isErr(err, ErrInvalidParameter) {
		t.Errorf("id 0: %v, want ErrInvalidParameter", err)
	}
}

// TestMessagesFilters: q matches the whole text case-insensitively (R-MSG-4);
// at keeps messages at or after it (R-MSG-5), whether the records' times
// are in order (binary search) or not (scan); total counts the matches.
func TestMessagesFilters(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		s := newSession(t)
		base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
		times := []int{1, 2, 3, 4, 5, 6}
		if !ordered {
			times = []int{1, 5, 2, 6, 3, 4}
		}
		texts := []string{"L'École est fermée", "nothing", "ÉCOLE again", "third\nline with école", "x", "y"}
		for i, sec := range times {
			s.record(map[string]any{"type": "user", "timestamp": base.Add(time.Duration(sec) * time.Second).Format(time.RFC3339Nano),
				"message": map[string]any{"role": "user", "content": texts[i]}})
		}
		c := NewCache(0, 0)
		p, err := c.Messages(s.src(), MessagesQuery{Q: "école"})
		ids := itemIDs(p)
		if err != nil || !slices.Equal(ids, []int{1, 3, 4}) || p.Total != 3 {
			t.Errorf("ordered %t: q=école: %v (total %d), %v; want 1 3 4", ordered, ids, p.Total, err)
		}
		p, err = c.Messages(s.src(), MessagesQuery{At: base.Add(4*time.Second - time.Millisecond/2)})
		ids = itemIDs(p)
		var want []int
		for i, sec := range times {
			if sec >= 4 {
				want = append(want, i+1)
			}
		}
		if err != nil || !slices.Equal(ids, want) || p.Total != len(want) {
			t.Errorf("ordered %t: at: %v, %v; want %v", ordered, ids, err, want)
		}
		p, _ = c.Messages(s.src(), MessagesQuery{At: base.Add(time.Hour)})
		if len(p.Items) != 0 || p.Total != 0 {
			t.Errorf("ordered %t: at after everything: %+v", ordered, p)
		}
		p, _ = c.Messages(s.src(), MessagesQuery{Q: "école", At: base.Add(3 * time.Second), Limit: 1})
		if p.Total == 0 || len(p.Items) != 1 {
			t.Errorf("ordered %t: q and at: %+v", ordered, p)
		}
	}
}

func itemIDs(p apitypes.MessagesPage) []int {
	var ids []int
	for _, it := range p.Items {
		ids = append(ids, it.ID)
	}
	return ids
}

// TestOversizedRecord: a record over MaxRecordBytes is passed over and
// counted as unreadable; the records around it are read.
func TestOversizedRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 32 MiB record")
	}
	s := newSession(t)
	s.user("before")
	s.raw(`{"type":"user","timestamp":"2026-11-01T12:00:05Z","message":{"role":"user","content":"`+strings.Repeat("z", MaxRecordBytes)+`"}}`, false)
	s.user("after")
	c := NewCache(0, 0)
	p, err := c.Messages(s.src(), DefaultMessagesQuery())
	if err != nil || !slices.Equal(itemIDs(p), []int{1, 2}) || p.Items[1].FirstLine != "after" {
		t.Errorf("%+v, %v; want before and after", p, err)
	}
	a, err := c.Activity(s.src(), nil, nil)
	if err != nil || a.Unreadable != 1 {
		t.Errorf("unreadable %d, %v; want 1", a.Unreadable, err)
	}
}
