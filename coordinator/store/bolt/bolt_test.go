package bolt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(filepath.Join(t.TempDir(), "coordinator.db"))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
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
