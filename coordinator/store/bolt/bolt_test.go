package bolt

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/store/storetest"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Backend{Open: func(t *testing.T) store.Store {
		s, err := Open(filepath.Join(t.TempDir(), "coordinator.db"))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	}})
}

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

func mustOpen(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "coordinator.db")
	s := mustOpen(t, path)

	p := store.Principal{ID: "p1", Name: "Ana", Kind: store.KindHuman, Roles: map[string]string{"t1": store.RoleAdmin}, CreatedAt: t0}
	c := store.Credential{Hash: "aa", PrincipalID: "p1", CreatedAt: t0}
	used := store.JoinToken{Hash: "j1", NodeID: "n1", Tenant: "t1", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	unused := store.JoinToken{Hash: "j2", NodeID: "n2", Tenant: "t1", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	issue := func(jt store.JoinToken) (store.Node, error) {
		return store.Node{ID: jt.NodeID, Tenant: jt.Tenant, EnrolledAt: t0, CertSerial: "01"}, nil
	}
	steps := []error{
		s.PutTenant(ctx, store.Tenant{ID: "t1", CreatedAt: t0}),
		s.CreatePrincipal(ctx, p, c),
		s.CreateJoinToken(ctx, used),
		s.CreateJoinToken(ctx, unused),
	}
	if err := errors.Join(steps...); err != nil {
		t.Fatalf("setup: %v", err)
	}
	if _, err := s.Enroll(ctx, "j1", t0, issue); err != nil {
		t.Fatalf("Enroll: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = mustOpen(t, path)
	if _, err := s.GetTenant(ctx, "t1"); err != nil {
		t.Errorf("GetTenant after reopen: %v", err)
	}
	gotP, _, err := s.PrincipalByCredential(ctx, "aa")
	if err != nil || gotP.Roles["t1"] != store.RoleAdmin {
		t.Errorf("PrincipalByCredential after reopen: got %+v, %v; want p1 with admin on t1", gotP, err)
	}
	if n, err := s.GetNode(ctx, "n1"); err != nil || n.CertSerial != "01" {
		t.Errorf("GetNode after reopen: got %+v, %v", n, err)
	}
	if _, err := s.Enroll(ctx, "j1", t0, issue); !errors.Is(err, store.ErrTokenUsed) {
		t.Errorf("Enroll(used token) after reopen: got %v, want %v", err, store.ErrTokenUsed)
	}
	if _, err := s.Enroll(ctx, "j2", t0, issue); err != nil {
		t.Errorf("Enroll(unused token) after reopen: got %v, want nil", err)
	}
}

func TestFileMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no unix permissions")
	}
	path := filepath.Join(t.TempDir(), "coordinator.db")
	mustOpen(t, path)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// The umask may only take bits away from 0600.
	if perm := fi.Mode().Perm(); perm&^0o600 != 0 {
		t.Errorf("file mode: got %v, want at most 0600", perm)
	}
}

// TestOpenLocked checks that a second opener fails with a message that says
// why instead of hanging. bbolt locks with flock, which binds the lock to the
// open file description, so a second open(2) in the same process conflicts
// just like a second process would.
func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "coordinator.db")
	first := mustOpen(t, path)

	// open with a short timeout: Open's one second is the same code path,
	// only slower.
	start := time.Now()
	s, err := open(path, 50*time.Millisecond)
	if err == nil {
		_ = s.Close()
		t.Fatal("second open of a locked file: got nil error")
	}
	if !errors.Is(err, bolterrors.ErrTimeout) {
		t.Errorf("second open: got %v, want an error wrapping %v", err, bolterrors.ErrTimeout)
	}
	want := "open " + path + ": another process holds it (is the coordinator already running?)"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("second open: got %q, want it to contain %q", err, want)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("second open took %v; the lock timeout is not applied", d)
	}

	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s, err = open(path, 50*time.Millisecond)
	if err != nil {
		t.Fatalf("open after the holder closed: %v", err)
	}
	_ = s.Close()
}

func TestOpenMissingDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such-dir", "coordinator.db")
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Open in a missing directory: got %v, want an error naming %s", err, path)
	}
}

// TestRejectsBadInput covers the checks this backend makes beyond the
// interface comments: keys may not be empty and records must agree with each
// other. Nothing is written on rejection.
func TestRejectsBadInput(t *testing.T) {
	ctx := t.Context()
	s := mustOpen(t, filepath.Join(t.TempDir(), "coordinator.db"))
	jt := store.JoinToken{Hash: "j1", NodeID: "n1", Tenant: "t1", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := s.CreateJoinToken(ctx, jt); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enroll(ctx, "j1", t0, func(jt store.JoinToken) (store.Node, error) {
		return store.Node{ID: jt.NodeID, Tenant: jt.Tenant}, nil
	}); err != nil {
		t.Fatal(err)
	}

	p := store.Principal{ID: "p1", Kind: store.KindHuman}
	tests := []struct {
		name string
		call func() error
	}{
		{"PutTenant empty id", func() error { return s.PutTenant(ctx, store.Tenant{}) }},
		{"CreatePrincipal empty id", func() error {
			return s.CreatePrincipal(ctx, store.Principal{}, store.Credential{Hash: "h"})
		}},
		{"CreatePrincipal empty hash", func() error {
			return s.CreatePrincipal(ctx, p, store.Credential{PrincipalID: "p1"})
		}},
		{"CreatePrincipal credential of another principal", func() error {
			return s.CreatePrincipal(ctx, p, store.Credential{Hash: "h", PrincipalID: "p2"})
		}},
		{"AddCredential empty hash", func() error { return s.AddCredential(ctx, store.Credential{PrincipalID: "p1"}) }},
		{"CreateJoinToken empty hash", func() error { return s.CreateJoinToken(ctx, store.JoinToken{NodeID: "n9"}) }},
		{"Enroll issue returns empty id", func() error {
			if err := s.CreateJoinToken(ctx, store.JoinToken{Hash: "j2", ExpiresAt: t0.Add(time.Hour)}); err != nil {
				return err
			}
			_, err := s.Enroll(ctx, "j2", t0, func(store.JoinToken) (store.Node, error) { return store.Node{}, nil })
			return err
		}},
		{"UpdateNode changes the id", func() error {
			_, err := s.UpdateNode(ctx, "n1", func(n *store.Node) error { n.ID = "n2"; return nil })
			return err
		}},
	}
	for _, tt := range tests {
		if err := tt.call(); err == nil {
			t.Errorf("%s: got nil error", tt.name)
		}
	}
	if _, err := s.GetPrincipal(ctx, "p1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetPrincipal after rejected creates: got %v, want %v", err, store.ErrNotFound)
	}
	if _, err := s.GetNode(ctx, "n2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetNode(n2) after rejected update: got %v, want %v", err, store.ErrNotFound)
	}
	// j2 was not consumed by the rejected Enroll.
	if _, err := s.Enroll(ctx, "j2", t0, func(store.JoinToken) (store.Node, error) { return store.Node{ID: "n3"}, nil }); err != nil {
		t.Errorf("Enroll(j2) after a rejected Enroll: %v", err)
	}
}

func TestCanceledContext(t *testing.T) {
	s := mustOpen(t, filepath.Join(t.TempDir(), "coordinator.db"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.PutTenant(ctx, store.Tenant{ID: "t1"}); !errors.Is(err, context.Canceled) {
		t.Errorf("PutTenant with a canceled context: got %v, want %v", err, context.Canceled)
	}
	if _, err := s.GetTenant(t.Context(), "t1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetTenant: got %v, want %v", err, store.ErrNotFound)
	}
}

// TestRejectsBadIndexInput covers the run, profile and workspace checks this
// backend makes beyond the interface comments. Nothing is written on
// rejection.
func TestRejectsBadIndexInput(t *testing.T) {
	ctx := t.Context()
	s := mustOpen(t, filepath.Join(t.TempDir(), "coordinator.db"))
	tests := []struct {
		name string
		call func() error
	}{
		{"PutRun empty ref", func() error { _, err := s.PutRun(ctx, apitypes.Run{Tenant: "t1", Rev: 1}); return err }},
		{"PutRun empty tenant", func() error { _, err := s.PutRun(ctx, apitypes.Run{RunRef: "r-1", Rev: 1}); return err }},
		{"ListRuns empty tenant", func() error { _, _, err := s.ListRuns(ctx, store.RunQuery{}); return err }},
		{"ListRuns negative limit", func() error { _, _, err := s.ListRuns(ctx, store.RunQuery{Tenant: "t1", Limit: -1}); return err }},
		{"ListRuns negative offset", func() error { _, _, err := s.ListRuns(ctx, store.RunQuery{Tenant: "t1", Offset: -1}); return err }},
		{"ListRuns offset with cursor mode", func() error {
			_, _, err := s.ListRuns(ctx, store.RunQuery{Tenant: "t1", Offset: 2, CursorMode: true})
			return err
		}},
		{"CreateProfile empty ref", func() error { return s.CreateProfile(ctx, apitypes.Profile{Tenant: "t1", Name: "a"}) }},
		{"CreateProfile empty tenant", func() error { return s.CreateProfile(ctx, apitypes.Profile{Ref: "pp-1", Name: "a"}) }},
		{"CreateProfile empty name", func() error { return s.CreateProfile(ctx, apitypes.Profile{Ref: "pp-1", Tenant: "t1"}) }},
		{"ListProfiles empty tenant", func() error { _, err := s.ListProfiles(ctx, ""); return err }},
		{"CreateWorkspace empty ref", func() error { return s.CreateWorkspace(ctx, apitypes.Workspace{Tenant: "t1", Name: "a"}) }},
		{"CreateWorkspace empty tenant", func() error { return s.CreateWorkspace(ctx, apitypes.Workspace{Ref: "ws-1", Name: "a"}) }},
		{"CreateWorkspace empty name", func() error { return s.CreateWorkspace(ctx, apitypes.Workspace{Ref: "ws-1", Tenant: "t1"}) }},
		{"ListWorkspaces empty tenant", func() error { _, err := s.ListWorkspaces(ctx, ""); return err }},
	}
	for _, tt := range tests {
		if err := tt.call(); err == nil {
			t.Errorf("%s: got nil error", tt.name)
		}
	}
	for _, ref := range []string{"", "r-1"} {
		if _, err := s.GetRun(ctx, ref); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetRun(%q) after rejected puts: got %v, want %v", ref, err, store.ErrNotFound)
		}
	}
	if _, err := s.GetProfile(ctx, "pp-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetProfile after rejected creates: got %v, want %v", err, store.ErrNotFound)
	}
	if _, err := s.GetWorkspace(ctx, "ws-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetWorkspace after rejected creates: got %v, want %v", err, store.ErrNotFound)
	}
}

// TestRunTimeOrder: the index orders by the full time.Time, which the
// conformance suite (whole seconds only) cannot see: nanoseconds, times
// before 1970 and the zero time, where UnixNano would overflow.
func TestRunTimeOrder(t *testing.T) {
	ctx := t.Context()
	s := mustOpen(t, filepath.Join(t.TempDir(), "coordinator.db"))
	times := []struct {
		ref string
		at  time.Time
	}{
		// Newest first.
		{"r-far", time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
		{"r-1s", t0.Add(time.Second)},
		{"r-999ms", t0.Add(999 * time.Millisecond)},
		{"r-1ns", t0.Add(time.Nanosecond)},
		{"r-t0", t0},
		{"r-t0-1ns", t0.Add(-time.Nanosecond)},
		{"r-epoch", time.Unix(0, 0)},
		{"r-1960", time.Date(1960, 1, 1, 0, 0, 0, 500, time.FixedZone("x", 3600))},
		{"r-zero", time.Time{}},
	}
	want := make([]string, len(times))
	for i, tt := range times {
		want[i] = tt.ref
	}
	// Put oldest first so that insertion order is not the answer.
	for i := len(times) - 1; i >= 0; i-- {
		r := apitypes.Run{RunRef: times[i].ref, Tenant: "t1", NodeID: "n1", CreatedAt: times[i].at, Rev: 1}
		if _, err := s.PutRun(ctx, r); err != nil {
			t.Fatalf("PutRun(%s): %v", r.RunRef, err)
		}
	}
	runs, _, err := s.ListRuns(ctx, store.RunQuery{Tenant: "t1"})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.RunRef)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("ListRuns order: got %v, want %v", got, want)
	}
	got = nil
	q := store.RunQuery{Tenant: "t1", Limit: 1, CursorMode: true}
	for range len(times) + 1 {
		runs, next, err := s.ListRuns(ctx, q)
		if err != nil {
			t.Fatalf("ListRuns(cursor %q): %v", q.Cursor, err)
		}
		for _, r := range runs {
			got = append(got, r.RunRef)
		}
		if next == "" {
			break
		}
		q.Cursor = next
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("cursor pages order: got %v, want %v", got, want)
	}
}

// TestCursorFormat: cursors that decode as base64 but are not this store's
// format are ErrBadCursor, not a silent first page.
func TestCursorFormat(t *testing.T) {
	ctx := t.Context()
	s := mustOpen(t, filepath.Join(t.TempDir(), "coordinator.db"))
	for i := range 3 {
		r := apitypes.Run{RunRef: "r-" + string(rune('a'+i)), Tenant: "t1", NodeID: "n1", CreatedAt: t0.Add(time.Duration(i) * time.Minute), Rev: 1}
		if _, err := s.PutRun(ctx, r); err != nil {
			t.Fatalf("PutRun: %v", err)
		}
	}
	_, next, err := s.ListRuns(ctx, store.RunQuery{Tenant: "t1", Limit: 1, CursorMode: true})
	if err != nil || next == "" {
		t.Fatalf("ListRuns: next %q, %v; want a cursor", next, err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(next)
	if err != nil {
		t.Fatalf("cursor %q is not unpadded base64url: %v", next, err)
	}
	enc := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	edit := func(fn func(b []byte) []byte) string {
		return enc(fn(append([]byte(nil), raw...)))
	}
	bad := map[string]string{
		"version only":  enc(raw[:1]),
		"no ref":        enc(raw[:1+runTimeLen]),
		"other version": edit(func(b []byte) []byte { b[0] = 2; return b }),
		"nanoseconds >= 1s": edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[1+8:], uint32(time.Second))
			return b
		}),
		"padded":        next + "==",
		"std alphabet":  strings.NewReplacer("-", "+", "_", "/").Replace(next) + "+/",
		"trailing junk": next + "!",
	}
	for name, c := range bad {
		if _, _, err := s.ListRuns(ctx, store.RunQuery{Tenant: "t1", CursorMode: true, Cursor: c}); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("ListRuns(cursor %s %q): got %v, want %v", name, c, err, store.ErrBadCursor)
		}
	}
	// A Cursor without CursorMode is still a cursor, not ignored.
	runs, _, err := s.ListRuns(ctx, store.RunQuery{Tenant: "t1", Limit: 5, Cursor: next})
	if err != nil || len(runs) != 2 {
		t.Errorf("ListRuns(Cursor set, CursorMode false): got %d runs, %v; want 2, nil", len(runs), err)
	}
}

// TestReopenIndexes: the run, profile and workspace indexes survive a restart
// and stay in step with their records.
func TestReopenIndexes(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "coordinator.db")
	s := mustOpen(t, path)
	for i := range 3 {
		r := apitypes.Run{RunRef: "r-" + string(rune('a'+i)), Tenant: "t1", NodeID: "n1", CreatedAt: t0.Add(time.Duration(i) * time.Minute), Rev: 2}
		if _, err := s.PutRun(ctx, r); err != nil {
			t.Fatalf("PutRun: %v", err)
		}
	}
	steps := []error{
		s.CreateProfile(ctx, apitypes.Profile{Ref: "pp-1", Tenant: "t1", NodeID: "n1", Tool: "claude", Name: "work", CreatedAt: t0}),
		s.CreateWorkspace(ctx, apitypes.Workspace{Ref: "ws-1", Tenant: "t1", NodeID: "n1", Name: "olivares", Path: "/src", CreatedAt: t0}),
	}
	if err := errors.Join(steps...); err != nil {
		t.Fatalf("setup: %v", err)
	}
	_, next, err := s.ListRuns(ctx, store.RunQuery{Tenant: "t1", Limit: 1, CursorMode: true})
	if err != nil || next == "" {
		t.Fatalf("ListRuns: next %q, %v; want a cursor", next, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = mustOpen(t, path)
	// A cursor issued before the restart still pages on.
	runs, _, err := s.ListRuns(ctx, store.RunQuery{Tenant: "t1", CursorMode: true, Cursor: next})
	if err != nil || len(runs) != 2 || runs[0].RunRef != "r-b" || runs[1].RunRef != "r-a" {
		t.Errorf("ListRuns(cursor from before reopen): got %+v, %v; want r-b, r-a", runs, err)
	}
	if wrote, err := s.PutRun(ctx, apitypes.Run{RunRef: "r-a", Tenant: "t1", NodeID: "n1", CreatedAt: t0, Rev: 1}); err != nil || wrote {
		t.Errorf("PutRun(stale rev) after reopen: got %v, %v; want false, nil", wrote, err)
	}
	if _, err := s.PutRun(ctx, apitypes.Run{RunRef: "r-a", Tenant: "t2", NodeID: "n1", CreatedAt: t0, Rev: 9}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("PutRun(other tenant) after reopen: got %v, want %v", err, store.ErrConflict)
	}
	err = s.CreateProfile(ctx, apitypes.Profile{Ref: "pp-2", Tenant: "t1", NodeID: "n1", Tool: "codex", Name: "work", CreatedAt: t0})
	if !errors.Is(err, store.ErrExists) {
		t.Errorf("CreateProfile(taken name) after reopen: got %v, want %v", err, store.ErrExists)
	}
	err = s.CreateWorkspace(ctx, apitypes.Workspace{Ref: "ws-2", Tenant: "t1", NodeID: "n1", Name: "olivares", Path: "/src2", CreatedAt: t0})
	if !errors.Is(err, store.ErrExists) {
		t.Errorf("CreateWorkspace(taken name) after reopen: got %v, want %v", err, store.ErrExists)
	}
	if ps, err := s.ListProfiles(ctx, "t1"); err != nil || len(ps) != 1 || ps[0].Ref != "pp-1" {
		t.Errorf("ListProfiles after reopen: got %+v, %v; want pp-1", ps, err)
	}
	if ws, err := s.ListWorkspaces(ctx, "t1"); err != nil || len(ws) != 1 || ws[0].Ref != "ws-1" {
		t.Errorf("ListWorkspaces after reopen: got %+v, %v; want ws-1", ws, err)
	}
}

// TestPutRunsGroupCommit: index pushes that arrive while one commits are
// committed together, in one transaction, and each call still learns its
// own rows' fate (issue 34: a thousand nodes pushing at once pay one fsync
// per batch).
func TestPutRunsGroupCommit(t *testing.T) {
	ctx := t.Context()
	s := mustOpen(t, filepath.Join(t.TempDir(), "coordinator.db"))
	// Another writer holds the file's one write transaction.
	hold, held := make(chan struct{}), make(chan struct{})
	go s.db.Update(func(*bbolt.Tx) error { close(held); <-hold; return nil })
	<-held
	type result struct {
		i       int
		wrote   int
		refused map[string]error
		err     error
	}
	results := make(chan result, 21)
	put := func(i int) {
		rows := []apitypes.Run{{RunRef: fmt.Sprintf("run-%d", i), Tenant: "t1", Rev: 1}}
		if i%5 == 0 {
			rows = append(rows, apitypes.Run{RunRef: fmt.Sprintf("bad-%d", i), Rev: 1}) // no tenant: refused
		}
		w, ref, err := s.PutRuns(ctx, rows)
		results <- result{i, w, ref, err}
	}
	go put(0) // the leader: it waits for the write transaction
	pending := func() int { s.pushes.mu.Lock(); defer s.pushes.mu.Unlock(); return len(s.pushes.pending) }
	leading := func() bool {
		s.pushes.mu.Lock()
		defer s.pushes.mu.Unlock()
		return s.pushes.leading && len(s.pushes.pending) == 0
	}
	for !leading() {
		runtime.Gosched()
	}
	for i := 1; i <= 20; i++ {
		go put(i)
	}
	for pending() < 20 {
		runtime.Gosched()
	}
	close(hold)
	for range 21 {
		r := <-results
		if r.err != nil || r.wrote != 1 {
			t.Fatalf("call %d: wrote %d, err %v; want 1 row written", r.i, r.wrote, r.err)
		}
		if want := 0; r.i%5 == 0 {
			want = 1
			if r.refused[fmt.Sprintf("bad-%d", r.i)] == nil || len(r.refused) != want {
				t.Fatalf("call %d: refused %v, want its own bad row only", r.i, r.refused)
			}
		} else if len(r.refused) != 0 {
			t.Fatalf("call %d: refused %v, want none (another call's refusal?)", r.i, r.refused)
		}
	}
	commits := func() (int, bool) {
		s.pushes.mu.Lock()
		defer s.pushes.mu.Unlock()
		return s.pushes.commits, s.pushes.leading
	}
	n, lead := commits()
	for ; lead; n, lead = commits() {
		runtime.Gosched() // the leader counts its last commit after its callers heard
	}
	if n != 2 {
		t.Fatalf("21 calls took %d transactions, want 2 (the first alone, the 20 that waited together)", n)
	}
	for i := 0; i <= 20; i++ {
		if _, err := s.GetRun(ctx, fmt.Sprintf("run-%d", i)); err != nil {
			t.Fatalf("run-%d: %v", i, err)
		}
	}
}
