package codex_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/cliruntime/cliruntimetest"
	"github.com/olivares-dev/olivares/agent/drivers/codex"
)

// branchDriver gives every session the options its scenario needs.
type branchDriver struct {
	codex.Driver
	opts func() codex.Options
}

func (d branchDriver) NewSession(spec cliruntime.LaunchSpec) cliruntime.Session {
	return codex.NewSessionWith(spec, d.opts())
}

// fence is an in-memory lease table of one run: Check fails for a thread
// it never acquired or that was taken from it.
type fence struct {
	mu      sync.Mutex
	held    map[string]bool
	lost    map[string]bool
	journal []string
}

func newFence() *fence { return &fence{held: map[string]bool{}, lost: map[string]bool{}} }

func (f *fence) Acquire(thread string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.journal = append(f.journal, "acquire "+thread)
	f.held[thread] = true
	return nil
}

func (f *fence) Check(thread string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.journal = append(f.journal, "check "+thread)
	if !f.held[thread] || f.lost[thread] {
		return errors.New("lease lost")
	}
	return nil
}

func (f *fence) Release(thread string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.journal = append(f.journal, "release "+thread)
	delete(f.held, thread)
}

const (
	source    = "01a23aa3-1e06-7852-b4c8-25510d88cb84"
	forkID    = "01a23aa3-1ff2-7d50-acde-5f39b9940d2c"
	canonical = "01a23aa3-201f-76f3-8fcd-eda29ec94839"
)

var history = []codex.Message{
	{Role: "user", Text: "first question"},
	{Role: "assistant", Text: "pong: first question"},
}

// TestBranchScripts: the first turn of a supervised branch, byte-exact
// (R-CX-FT-1..4, AT-CX-04/05): thread/fork with only the source id,
// thread/start with threadSource "appServer" and exactly the fork's model
// and provider, the history injected, the binding committed, the turn run
// and the fork archived; a failed attempt leaves the branch pending and is
// retried by the next input (R-CX-FT-7).
func TestBranchScripts(t *testing.T) {
	var commits []codex.BranchCommit
	var failures, archived []string
	d := branchDriver{opts: func() codex.Options {
		f := newFence()
		return codex.Options{
			Fence: f,
			Branch: &codex.Branch{Source: source, History: history,
				Commit: func(c codex.BranchCommit) error { commits = append(commits, c); return nil },
				Failed: func(r string) { failures = append(failures, r) }},
			Archived: func(th string) { archived = append(archived, th) },
		}
	}}
	cliruntimetest.RunScripts(t, d, "testdata/branch/*.txt")
	want := codex.BranchCommit{Canonical: canonical, Fork: forkID, Model: "fake-new", ModelProvider: "fake"}
	if len(commits) == 0 || slices.ContainsFunc(commits, func(c codex.BranchCommit) bool { return c != want }) {
		t.Errorf("commits %+v, want each %+v", commits, want)
	}
	if len(failures) == 0 {
		t.Errorf("no attempt failed; the retry script expects failures")
	}
	if !slices.Contains(archived, forkID) {
		t.Errorf("archived %v, want the fork %s", archived, forkID)
	}
}

// TestBranchCommitRefused: a binding race (the commit refused) fails the
// turn closed (R-CX-FT-8): nothing runs, both new threads are archived, and
// the branch stays pending.
func TestBranchCommitRefused(t *testing.T) {
	f := newFence()
	var failed string
	s := codex.NewSessionWith(cliruntimetest.DefaultSpec, codex.Options{Fence: f, Branch: &codex.Branch{
		Source: source, History: history,
		Commit: func(codex.BranchCommit) error { return errors.New("supervision is disabled") },
		Failed: func(r string) { failed = r },
	}})
	var written []string
	feed := func(st cliruntime.Step) {
		for _, w := range st.Write {
			written = append(written, strings.TrimSpace(string(w)))
		}
	}
	feed(s.Start())
	feed(s.Observe([]byte(`{"id":1,"result":{}}`)))
	st, err := s.Encode(cliruntime.Input{Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	feed(st)
	feed(s.Observe([]byte(fmt.Sprintf(`{"id":2,"result":{"thread":{"id":%q},"model":"m","modelProvider":"p"}}`, forkID))))
	feed(s.Observe([]byte(fmt.Sprintf(`{"id":3,"result":{"thread":{"id":%q}}}`, canonical))))
	st = s.Observe([]byte(`{"id":4,"result":{}}`))
	feed(st)
	if !strings.Contains(failed, "supervision is disabled") {
		t.Errorf("Failed got %q, want the commit's error", failed)
	}
	for _, w := range written {
		if strings.Contains(w, `"turn/start"`) {
			t.Errorf("a turn was started after the commit was refused: %s", w)
		}
	}
	var archives []string
	for _, w := range written {
		if strings.Contains(w, `"thread/archive"`) {
			archives = append(archives, w)
		}
	}
	if len(archives) != 2 || !strings.Contains(archives[0], canonical) || !strings.Contains(archives[1], forkID) {
		t.Errorf("archives %q, want the canonical thread and the fork", archives)
	}
	if s.ConversationID() != "" || s.TurnActive() {
		t.Errorf("conversation %q active %v, want none and idle", s.ConversationID(), s.TurnActive())
	}
}

// TestFenceLost: a run whose lease was taken (an archive fenced it out)
// writes nothing: resume refuses the thread, and a turn is not sent.
func TestFenceLost(t *testing.T) {
	f := newFence()
	f.held[canonical] = true
	f.lost[canonical] = true
	spec := cliruntimetest.DefaultSpec
	spec.ConversationID = canonical
	s := codex.NewSessionWith(spec, codex.Options{Fence: f})
	s.Start()
	st := s.Observe([]byte(`{"id":1,"result":{}}`))
	if len(st.Events) != 1 || st.Events[0].Kind != cliruntime.EventConversationUnavailable {
		t.Fatalf("events %+v, want conversation_unavailable", st.Events)
	}
	for _, w := range st.Write {
		if strings.Contains(string(w), "thread/resume") {
			t.Fatalf("thread/resume sent without the lease: %s", w)
		}
	}

	// A live run whose lease goes: the next input is dropped, not sent.
	g := newFence()
	g.held[canonical] = true
	s = codex.NewSessionWith(spec, codex.Options{Fence: g})
	s.Start()
	s.Observe([]byte(`{"id":1,"result":{}}`))
	s.Observe([]byte(fmt.Sprintf(`{"id":2,"result":{"thread":{"id":%q}}}`, canonical)))
	g.lost[canonical] = true
	st, err := s.Encode(cliruntime.Input{Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Write) != 0 || len(st.Events) != 1 || st.Events[0].Kind != cliruntime.EventError {
		t.Fatalf("step %+v, want no write and one error", st)
	}
	if s.TurnActive() {
		t.Fatal("the dropped input left a turn active")
	}
}

// FuzzBranchObserve: a branch session (and a fenced resume) never panics
// and writes whole lines, whatever the app-server sends.
func FuzzBranchObserve(f *testing.F) {
	d := branchDriver{opts: func() codex.Options {
		return codex.Options{Fence: newFence(), Branch: &codex.Branch{Source: source, History: history,
			Commit: func(codex.BranchCommit) error { return nil }}}
	}}
	cliruntimetest.FuzzObserve(f, d, canonical, "testdata/branch/*.txt")
}
