package supervisor_test

import (
	"context"
	"slices"
	"testing"

	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// TestReleaseAndDelete: a live run cannot be released (R-CLN-8); a release
// writes one cleaned event and is idempotent; a released run takes no new
// generation (R-RES-6); delete needs a released run (R-DEL-2) and removes
// its record, ring and ledger (R-DEL-1), for good across a restart.
func TestReleaseAndDelete(t *testing.T) {
	e, _ := fakeEnv(t)
	ctx := context.Background()
	e.launchIdle("run_rel1")
	e.launchIdle("run_keep1")

	_, err := e.sup.Release(ctx, "run_rel1", false)
	wantErr(t, "release of a live run", err, supervisor.ErrRunLive)
	err = e.sup.Delete(context.Background(), "run_rel1")
	wantErr(t, "delete of a live run", err, supervisor.ErrNotReleased)
	if _, err := e.sup.Stop(context.Background(), "run_rel1", 0); err != nil {
		t.Fatal(err)
	}
	err = e.sup.Delete(context.Background(), "run_rel1")
	wantErr(t, "delete of a stopped run", err, supervisor.ErrNotReleased)

	for range 2 {
		r, err := e.sup.Release(ctx, "run_rel1", false)
		if err != nil || r.State != apitypes.StateReleased {
			t.Fatalf("Release: %+v, %v", r.State, err)
		}
	}
	evs := e.events("run_rel1")
	if n := len(slices.DeleteFunc(kinds(evs), func(k string) bool { return k != "cleaned" })); n != 1 {
		t.Fatalf("cleaned events: %d, want 1 (%v)", n, kinds(evs))
	}
	if d := detail(t, last(evs)); d["worktree"] != "none" {
		t.Fatalf("cleaned detail: %v, want worktree none (R-CLN-6, R-CLN-9)", d)
	}
	_, err = e.sup.Resume(ctx, "run_rel1", nil, "")
	wantErr(t, "resume of a released run", err, supervisor.ErrReleased)

	if err := e.sup.Delete(context.Background(), "run_rel1"); err != nil {
		t.Fatal(err)
	}
	_, err = e.sup.Get("run_rel1")
	wantErr(t, "get after delete", err, supervisor.ErrRunNotFound)
	e.shut()
	e.open()
	_, err = e.sup.Get("run_rel1")
	wantErr(t, "get after delete and restart", err, supervisor.ErrRunNotFound)
	if evs, _ := e.led.List("run_rel1"); len(evs) != 0 {
		t.Fatalf("the ledger survived the delete: %d events", len(evs))
	}
	if refs, _ := e.rings.Runs(); slices.Contains(refs, "run_rel1") {
		t.Fatal("the ring survived the delete")
	}
	if _, err := e.sup.Get("run_keep1"); err != nil {
		t.Fatalf("another run went with it: %v", err)
	}
}
