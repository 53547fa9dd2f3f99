package registry_test

import (
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/claude"
	"github.com/olivares-dev/olivares/agent/registry"
)

// TestDeleteInUse (R-LIFE-3): a profile or workspace a live or held run
// needs, or a workspace that holds an unreleased worktree, is not deleted
// (ErrInUse naming the runs and what to do); once free it is; and a start
// that holds the registry keeps a deletion waiting until it registered its
// run.
func TestDeleteInUse(t *testing.T) {
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	reg, err := registry.Open(registry.Options{DB: db, Drivers: map[string]cliruntime.Driver{"claude": claude.New()}})
	if err != nil {
		t.Fatal(err)
	}
	const tenant = "default"
	if _, err := reg.CreateProfile(registry.ProfileParams{Ref: "prof_use1", Tenant: tenant, Tool: "claude", Name: "use", Home: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.CreateWorkspace(registry.WorkspaceParams{Ref: "ws_use1", Tenant: tenant, Name: "use", Path: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	var uses []registry.Use
	reg.SetUses(func() []registry.Use { return uses })
	refused := func(what string, err error, want ...string) {
		t.Helper()
		if !errors.Is(err, registry.ErrInUse) {
			t.Fatalf("%s: got %v, want ErrInUse", what, err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: %q does not say %q", what, err, w)
			}
		}
	}

	uses = []registry.Use{
		{RunRef: "run_a1", ProfileRef: "prof_use1", WorkspaceRef: "ws_use1", Live: true},
		{RunRef: "run_b1", ProfileRef: "prof_use1", WorkspaceRef: "ws_use1", Live: true},
	}
	refused("profile with live runs", reg.DeleteProfile("prof_use1", tenant), "live runs run_a1, run_b1", "olivares session stop")
	refused("workspace with live runs", reg.DeleteWorkspace("ws_use1", tenant), "live runs run_a1, run_b1", "olivares session stop")

	// A stopped run keeps its worktree: the workspace stays, the profile
	// may go.
	uses = []registry.Use{{RunRef: "run_a1", ProfileRef: "prof_use1", WorkspaceRef: "ws_use1", Worktree: true}}
	refused("workspace with a worktree", reg.DeleteWorkspace("ws_use1", tenant), "worktree of run run_a1", "olivares session cleanup")
	if err := reg.DeleteProfile("prof_use1", tenant); err != nil {
		t.Fatalf("profile of a stopped run: %v", err)
	}
	if _, err := reg.ProfileIn("prof_use1", tenant); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("deleted profile: got %v, want ErrNotFound", err)
	}

	// A start holds the registry from its lookup until its run is
	// registered: the deletion waits, then sees the run.
	var released atomic.Bool
	early := make(chan bool, 1)
	reg.SetUses(func() []registry.Use {
		select {
		case early <- !released.Load():
		default:
		}
		return []registry.Use{{RunRef: "run_c1", WorkspaceRef: "ws_use1", Live: true}}
	})
	release := reg.Hold()
	done := make(chan error, 1)
	go func() { done <- reg.DeleteWorkspace("ws_use1", tenant) }()
	for range 100 {
		runtime.Gosched() // give the deletion every chance to run early
	}
	released.Store(true)
	release()
	refused("workspace of a start that was under way", <-done, "live run run_c1")
	if <-early {
		t.Fatal("the deletion checked the runs while a start held the registry")
	}
}
