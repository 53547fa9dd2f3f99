package supervisor

import (
	"sort"
	"sync"
	"time"

	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Table is the node's runs in memory, by ref, and their row revisions: what
// the supervisor and its components (Usage, Requests) find a run in.
type Table struct {
	mu   sync.Mutex // guards runs; taken before a run's mu, never after
	runs map[string]*run
	// revMu guards lastRev; it is taken last (under a run's mu, so that a
	// record's revision is taken and set in one step) and nothing is
	// taken under it.
	revMu   sync.Mutex
	lastRev uint64
}

// NextRev returns a new row revision, above every one given so far: the
// run index push labels a row whose only change is its ring bounds with
// it (taken before the row is read, so that no record change is lost).
// Revisions increase across restarts (they start from the wall clock) and
// within one process.
func (t *Table) NextRev() uint64 {
	t.revMu.Lock()
	defer t.revMu.Unlock()
	n := uint64(time.Now().UnixNano())
	if n <= t.lastRev {
		n = t.lastRev + 1
	}
	t.lastRev = n
	return n
}

func (t *Table) get(ref string) (*run, error) {
	t.mu.Lock()
	r := t.runs[ref]
	t.mu.Unlock()
	if r == nil {
		return nil, refusal.New(ErrRunNotFound, "run %q not found", ref)
	}
	return r, nil
}

func (t *Table) all() []*run {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*run, 0, len(t.runs))
	for _, r := range t.runs {
		out = append(out, r)
	}
	return out
}

// add registers r unless a run with its ref is there.
func (t *Table) add(r *run) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.runs[r.ref] != nil {
		return false
	}
	t.runs[r.ref] = r
	return true
}

func (t *Table) remove(ref string) {
	t.mu.Lock()
	delete(t.runs, ref)
	t.mu.Unlock()
}

// rows derives every run's row, newest first. It takes no lock that a
// commit holds (R-STATE-1: rows are derived in memory).
func (t *Table) rows() []apitypes.Run {
	runs := t.all()
	out := make([]apitypes.Run, len(runs))
	for i, r := range runs {
		out[i] = r.snapshot()
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].RunRef > out[j].RunRef
	})
	return out
}

// uses is every run as the registry's in-use check of a deletion sees it
// (R-LIFE-3), newest first.
func (t *Table) uses() []registry.Use {
	var out []registry.Use
	for _, v := range t.rows() {
		r, err := t.get(v.RunRef)
		if err != nil {
			continue
		}
		rec, _ := r.current()
		out = append(out, registry.Use{RunRef: rec.RunRef, ProfileRef: rec.ProfileRef, WorkspaceRef: rec.WorkspaceRef,
			Live:     apitypes.Live(v.State) || v.State == apitypes.StatePendingApproval,
			Worktree: rec.WorktreeBranch != "" && !rec.Released})
	}
	return out
}
