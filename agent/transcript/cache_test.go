package transcript

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestCacheBounds: the cache keeps at most its number of files, least
// recently used out first, and no more than its memory estimate.
func TestCacheBounds(t *testing.T) {
	var ss []*session
	for i := 0; i < 4; i++ {
		s := newSession(t)
		for j := 0; j < 50; j++ {
			s.user(fmt.Sprintf("message %d of session %d, %s", j, i, strings.Repeat("w", 100)))
		}
		ss = append(ss, s)
	}
	c := NewCache(2, 0)
	for _, s := range ss {
		if p, err := c.Messages(s.src(), DefaultMessagesQuery()); err != nil || p.Total != 50 {
			t.Fatalf("%+v, %v", p, err)
		}
	}
	if files, _ := c.Len(); files != 2 {
		t.Errorf("%d files cached, want 2", files)
	}
	// The two most recent stay: reading them again parses nothing.
	ix := c.lookup(t, ss[3])
	before := ix.records
	if _, err := c.Messages(ss[3].src(), DefaultMessagesQuery()); err != nil || ix.records != before {
		t.Errorf("the most recent file was parsed again (%d records, %v)", ix.records-before, err)
	}

	// A memory bound smaller than one index: each request is served, and
	// nothing is kept.
	small := NewCache(10, 1024)
	for _, s := range ss {
		if p, err := small.Messages(s.src(), DefaultMessagesQuery()); err != nil || p.Total != 50 {
			t.Fatalf("%+v, %v", p, err)
		}
	}
	if files, bytes := small.Len(); files > 1 || bytes > 1024 {
		t.Errorf("%d files, %d bytes kept, want at most the bound", files, bytes)
	}
	// A bound that holds two of the four.
	_, one := c.Len()
	mid := NewCache(10, one+one/4)
	for _, s := range ss {
		if _, err := mid.Messages(s.src(), DefaultMessagesQuery()); err != nil {
			t.Fatal(err)
		}
	}
	if files, bytes := mid.Len(); files < 1 || files > 2 || bytes > one+one/4 {
		t.Errorf("%d files, %d bytes kept under a bound of %d", files, bytes, one+one/4)
	}
}

// TestCacheConcurrent: requests for the same and other files, while the
// transcripts grow, under -race; each session's total only grows.
func TestCacheConcurrent(t *testing.T) {
	c := NewCache(0, 0)
	var ss []*session
	for i := 0; i < 3; i++ {
		s := newSession(t)
		s.user("first")
		ss = append(ss, s)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			s := ss[w%len(ss)]
			last := 0
			for i := 0; i < 40; i++ {
				p, err := c.Messages(s.src(), MessagesQuery{Role: RoleAll, Text: i%2 == 0})
				if err != nil {
					t.Error(err)
					return
				}
				if p.Total < last {
					t.Errorf("total went from %d to %d", last, p.Total)
				}
				last = p.Total
				if _, err := c.Activity(s.src(), nil, nil); err != nil {
					t.Error(err)
					return
				}
				if w < len(ss) {
					mu.Lock()
					s.user(fmt.Sprintf("w%d i%d", w, i))
					mu.Unlock()
				}
			}
		}(w)
	}
	wg.Wait()
	for _, s := range ss {
		if p, err := c.Messages(s.src(), DefaultMessagesQuery()); err != nil || p.Total != 41 {
			t.Errorf("final total %d, %v; want 41", p.Total, err)
		}
	}
}
