package claudesup

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/claude"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/agent/transcript"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
)

// fakeRuns records launches; runs holds the runs that exist.
type fakeRuns struct {
	launched []supervisor.LaunchParams
	runs     map[string]apitypes.Run
}

func (f *fakeRuns) Launch(_ context.Context, p supervisor.LaunchParams) (apitypes.Run, error) {
	f.launched = append(f.launched, p)
	r := apitypes.Run{RunRef: p.RunRef, ConversationID: p.ConversationID, ProviderProfileRef: p.ProfileRef}
	f.runs[p.RunRef] = r
	return r, nil
}

func (f *fakeRuns) Get(ref string) (apitypes.Run, error) {
	if r, ok := f.runs[ref]; ok {
		return r, nil
	}
	return apitypes.Run{}, refusal.New(supervisor.ErrRunNotFound, "no run %s", ref)
}

func (f *fakeRuns) List() []apitypes.Run {
	var out []apitypes.Run
	for _, r := range f.runs {
		out = append(out, r)
	}
	return out
}

type fakeReads struct{ src transcript.Source }

func (f *fakeReads) SourceMessages(src transcript.Source, _ url.Values) (any, error) {
	f.src = src
	return apitypes.MessagesPage{}, nil
}

type env struct {
	s     *Service
	runs  *fakeRuns
	reads *fakeReads
	reg   *registry.Registry
	user  string
}

func newEnv(t testing.TB, enabled bool) *env {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	reg, err := registry.Open(registry.Options{DB: db, Drivers: map[string]cliruntime.Driver{"claude": claude.New()}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{runs: &fakeRuns{runs: map[string]apitypes.Run{}}, reads: &fakeReads{}, reg: reg, user: t.TempDir()}
	cfg := Config{Enabled: enabled, UserHomes: []string{e.user}, Env: map[string]string{"ANTHROPIC_API_KEY": "k"}}
	if err := cfg.CheckAndSetDefaults(); err != nil {
		t.Fatal(err)
	}
	e.s, err = Open(Options{Config: cfg, DB: db, Registry: reg, Runs: e.runs, Reads: e.reads, Tenant: "default"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func sid(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

// conversation writes a transcript of Claude Code's shape (real-clis.md
// §1.3, §1.11) under home, last changed at mtime.
func conversation(t testing.TB, home, cwd, id string, mtime time.Time, lines ...string) {
	t.Helper()
	dir := filepath.Join(home, ".claude", "projects", transcript.ClaudeSlug(cwd))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, id+".jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(p, mtime, mtime)
}

func prompt(cwd, text string) string {
	return fmt.Sprintf(`{"type":"user","cwd":%q,"message":{"role":"user","content":%q},"timestamp":"2026-12-05T10:00:00Z"}`, cwd, text)
}

// TestCatalog is R-CL-CAT-1, R-CL-PROJ-1/2, R-CL-SRCH-1 and R-CL-HOME-1:
// the user home's and the Claude profiles' conversations, newest first,
// titled as Claude Code titles them (a custom title in the tail beats the
// first prompt), a conversation in two homes once, search on titles and
// directories, pages per host.
func TestCatalog(t *testing.T) {
	e := newEnv(t, true)
	profHome := filepath.Join(t.TempDir(), "prof")
	if _, err := e.reg.CreateProfile(registry.ProfileParams{Ref: "prof_abcd1234", Tenant: "default", Tool: "claude", Name: "p", Home: profHome}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	pad := `{"type":"attachment","attachment":{"type":"x","content":"` + strings.Repeat("x", 300<<10) + `"}}`
	conversation(t, e.user, "/src/shop", sid(1), t0, prompt("/src/shop", "fix the upload test\nmore"), pad,
		`{"type":"custom-title","customTitle":"Upload fix","sessionId":"x"}`)
	conversation(t, e.user, "/src/blog", sid(2), t0.Add(time.Minute), prompt("/src/blog", "write the post"))
	conversation(t, profHome, "/src/api", sid(3), t0.Add(2*time.Minute), `{"type":"summary","summary":"API work"}`, prompt("/src/api", "ignored"))
	// The same conversation in both homes: the newer file is the row.
	conversation(t, profHome, "/src/blog", sid(2), t0.Add(3*time.Minute), prompt("/src/blog", "write the post, moved"))
	conversation(t, e.user, "/src/none", sid(4), t0.Add(-time.Minute), `{"type":"attachment","cwd":"/src/none"}`)

	h, err := e.s.Sessions(proto.ClaudeSessionsList{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range h.Rows {
		title := "<nil>"
		if r.Title != nil {
			title = *r.Title
		}
		got = append(got, fmt.Sprintf("%s|%s|%s|%s", r.SessionID[len(r.SessionID)-1:], title, r.Cwd, r.ProfileRef))
	}
	want := []string{"2|write the post, moved|/src/blog|prof_abcd1234", "3|API work|/src/api|prof_abcd1234",
		"1|Upload fix|/src/shop|", "4|<nil>|/src/none|"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if h.Rows[2].SizeBytes < 300<<10 || !h.Rows[2].UpdatedAt.Equal(t0) {
		t.Errorf("row 1: %+v", h.Rows[2])
	}
	for q, n := range map[string]int{"UPLOAD": 1, "src/": 4, "moved": 1, "none": 1, "otter": 0} {
		if h, _ := e.s.Sessions(proto.ClaudeSessionsList{Search: q}); len(h.Rows) != n {
			t.Errorf("search %q: %d rows, want %d", q, len(h.Rows), n)
		}
	}
	p1, _ := e.s.Sessions(proto.ClaudeSessionsList{Limit: 3})
	p2, _ := e.s.Sessions(proto.ClaudeSessionsList{Limit: 3, Cursor: p1.NextCursor})
	if len(p1.Rows) != 3 || p1.NextCursor == "" || len(p2.Rows) != 1 || p2.NextCursor != "" || p2.Rows[0].SessionID != sid(4) {
		t.Errorf("pages: %+v / %+v", p1, p2)
	}
	for _, bad := range []proto.ClaudeSessionsList{{Cursor: "x"}, {Limit: 101}} {
		if _, err := e.s.Sessions(bad); !errors.Is(err, ErrBadCursor) && !errors.Is(err, ErrBadLimit) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	// R-CL-TRN-1: pages are read from the home that holds it, by the one
	// reader.
	if _, err := e.s.Messages(proto.ClaudeSessionRef{SessionID: sid(3), Query: "role=all"}); err != nil ||
		e.reads.src != (transcript.Source{Tool: "claude", Home: profHome, ConversationID: sid(3), Cwd: "/src/api"}) {
		t.Errorf("messages: %v %+v", err, e.reads.src)
	}
}

// procStart is field 22 of /proc/<pid>/stat, as Claude Code records it.
func procStart(t *testing.T, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Skip("no /proc here")
	}
	return strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))[19]
}

func liveFile(t *testing.T, home string, pid int, id, start string) {
	dir := filepath.Join(home, ".claude", "sessions")
	os.MkdirAll(dir, 0o700)
	b := fmt.Sprintf(`{"pid":%d,"sessionId":%q,"cwd":"/src","procStart":%q,"kind":"interactive"}`, pid, id, start)
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(pid)+".json"), []byte(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRunning is R-CL-RUN-1/2: Claude Code's own session file of a live
// process marks the conversation and continue refuses it; a file whose pid
// now names another process (its start differs) or no process is ignored.
func TestRunning(t *testing.T) {
	e := newEnv(t, true)
	cwd := t.TempDir()
	for i := 1; i <= 3; i++ {
		conversation(t, e.user, cwd, sid(i), time.Now(), prompt(cwd, fmt.Sprint("conversation ", i)))
	}
	me := os.Getpid()
	liveFile(t, e.user, me, sid(1), procStart(t, me))
	liveFile(t, e.user, me+1_000_000, sid(2), "1") // no such pid
	dir := filepath.Join(e.user, ".claude", "sessions")
	os.WriteFile(filepath.Join(dir, "reused.json"), fmt.Appendf(nil, `{"pid":%d,"sessionId":%q,"procStart":"1"}`, me, sid(3)), 0o600)
	h, err := e.s.Sessions(proto.ClaudeSessionsList{})
	if err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	for _, r := range h.Rows {
		pids[r.SessionID] = r.RunningPID
	}
	if pids[sid(1)] != me || pids[sid(2)] != 0 || pids[sid(3)] != 0 {
		t.Fatalf("running pids %v, want only %s → %d", pids, sid(1), me)
	}
	_, _, err = e.s.Continue(context.Background(), proto.ClaudeSessionRef{SessionID: sid(1), RunRef: "run_aaaa1111", Tenant: "default"})
	if !errors.Is(err, ErrSessionRunning) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", me)) || len(e.runs.launched) != 0 {
		t.Fatalf("continue of a running conversation: %v (launched %d)", err, len(e.runs.launched))
	}
	if _, _, err := e.s.Continue(context.Background(), proto.ClaudeSessionRef{SessionID: sid(2), RunRef: "run_aaaa2222", Tenant: "default"}); err != nil {
		t.Fatalf("continue of a conversation whose process is gone: %v", err)
	}
}

// TestContinueLease is R-CL-CONT-1 and R-CL-LEASE-1: continue launches the
// exact conversation in its directory under a profile of the user home
// (made once, with the configured environment); while the run exists a
// second continue is refused naming it, and so is a conversation an
// ordinary run of the node has; once the run is gone, continue works again.
func TestContinueLease(t *testing.T) {
	e := newEnv(t, true)
	cwd := t.TempDir()
	conversation(t, e.user, cwd, sid(1), time.Now(), prompt(cwd, "hello"))
	conversation(t, e.user, "/gone/dir", sid(2), time.Now(), prompt("/gone/dir", "hello"))
	ctx := context.Background()
	r, title, err := e.s.Continue(ctx, proto.ClaudeSessionRef{SessionID: sid(1), RunRef: "run_aaaa1111", Tenant: "default"})
	if err != nil || title != "hello" || r.ConversationID != sid(1) {
		t.Fatalf("continue: %v %q %+v", err, title, r)
	}
	lp := e.runs.launched[0]
	prof, ok, _ := e.reg.Profile(lp.ProfileRef)
	if lp.ConversationID != sid(1) || lp.Workdir != cwd || !ok || prof.Home != e.user || prof.Env["ANTHROPIC_API_KEY"] != "k" || prof.Tool != "claude" {
		t.Fatalf("launch %+v under %+v", lp, prof)
	}
	_, _, err = e.s.Continue(ctx, proto.ClaudeSessionRef{SessionID: sid(1), RunRef: "run_aaaa2222", Tenant: "default"})
	if !errors.Is(err, ErrSessionLeased) || !strings.Contains(err.Error(), "run_aaaa1111") {
		t.Fatalf("second continue: %v", err)
	}
	if h, _ := e.s.Sessions(proto.ClaudeSessionsList{Search: cwd}); len(h.Rows) != 1 || h.Rows[0].LeaseHolder != "run_aaaa1111" {
		t.Errorf("row: %+v", h.Rows)
	}
	delete(e.runs.runs, "run_aaaa1111")
	e.runs.runs["run_other111"] = apitypes.Run{RunRef: "run_other111", ConversationID: sid(1)}
	if _, _, err = e.s.Continue(ctx, proto.ClaudeSessionRef{SessionID: sid(1), RunRef: "run_aaaa3333", Tenant: "default"}); !errors.Is(err, ErrSessionLeased) || !strings.Contains(err.Error(), "run_other111") {
		t.Fatalf("continue of an ordinary run's conversation: %v", err)
	}
	delete(e.runs.runs, "run_other111")
	if _, _, err = e.s.Continue(ctx, proto.ClaudeSessionRef{SessionID: sid(1), RunRef: "run_aaaa4444", Tenant: "default"}); err != nil {
		t.Fatalf("continue once the holder is gone: %v", err)
	}
	if e.runs.launched[1].ProfileRef != lp.ProfileRef {
		t.Errorf("a second profile for the same home: %s", e.runs.launched[1].ProfileRef)
	}
	if _, _, err = e.s.Continue(ctx, proto.ClaudeSessionRef{SessionID: sid(2), RunRef: "run_aaaa5555", Tenant: "default"}); !errors.Is(err, ErrWorkdirMissing) {
		t.Errorf("continue in a gone directory: %v", err)
	}
	for id, want := range map[string]error{"not-a-uuid": ErrBadSessionID, sid(9): ErrSessionNotFound} {
		if _, _, err := e.s.Continue(ctx, proto.ClaudeSessionRef{SessionID: id, RunRef: "run_aaaa6666", Tenant: "default"}); !errors.Is(err, want) {
			t.Errorf("continue %s: %v, want %v", id, err, want)
		}
	}
}

// TestOptOut is R-CL-PERM-1: a node that did not enable it advertises
// nothing and lists, reads and continues nothing.
func TestOptOut(t *testing.T) {
	e := newEnv(t, false)
	conversation(t, e.user, "/src", sid(1), time.Now(), prompt("/src", "hello"))
	if c := e.s.Capability(); c != nil {
		t.Errorf("capability %+v", c)
	}
	if _, err := e.s.Sessions(proto.ClaudeSessionsList{}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("sessions: %v", err)
	}
	if _, err := e.s.Messages(proto.ClaudeSessionRef{SessionID: sid(1)}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("messages: %v", err)
	}
	if _, _, err := e.s.Continue(context.Background(), proto.ClaudeSessionRef{SessionID: sid(1)}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("continue: %v", err)
	}
}
