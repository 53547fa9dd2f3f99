package registry

import (
	"errors"
	"strings"

	"github.com/olivares-dev/olivares/agent/refusal"
	bbolt "go.etcd.io/bbolt"
)

// ErrInUse: a profile or workspace cannot be deleted while a run needs it
// (R-LIFE-3).
var ErrInUse = errors.New("registry: in use")

// Use is a run as the in-use check of a deletion sees it.
type Use struct {
	RunRef, ProfileRef, WorkspaceRef string
	// Live: the run is live or waits for approval.
	Live bool
	// Worktree: the run keeps a worktree that was not released (releasing
	// it needs the workspace's repository).
	Worktree bool
}

// SetUses gives the registry the node's runs (the supervisor's), which
// DeleteProfile and DeleteWorkspace check; until then nothing is in use.
func (g *Registry) SetUses(uses func() []Use) {
	g.useMu.Lock()
	defer g.useMu.Unlock()
	g.uses = uses
}

// Hold keeps every profile and workspace from being deleted until release
// is called: a start holds it from its profile lookup until its run is
// registered, so no launch slips between a deletion's check and its delete
// (R-LIFE-3).
func (g *Registry) Hold() (release func()) {
	g.useMu.RLock()
	return g.useMu.RUnlock
}

// DeleteProfile removes a profile of tenant that no run needs any more:
// none is live or waits for approval on it (R-LIFE-3). Its home and the
// files in it stay: a home may be a person's own.
func (g *Registry) DeleteProfile(ref, tenant string) error {
	return g.deleteUnused(bucketProfiles, "profile", ref, tenant, func(u Use) bool { return u.ProfileRef == ref })
}

// DeleteWorkspace removes a workspace of tenant that no run needs: none is
// live or waits for approval in it, and no run keeps a worktree of it that
// was not released. The directory stays.
func (g *Registry) DeleteWorkspace(ref, tenant string) error {
	return g.deleteUnused(bucketWorkspaces, "workspace", ref, tenant, func(u Use) bool { return u.WorkspaceRef == ref })
}

// deleteUnused deletes the record unless a run that needs it is live, or
// keeps a worktree of a workspace. A record that is not there is not found
// first, whatever uses its ref.
func (g *Registry) deleteUnused(bucket []byte, what, ref, tenant string, needs func(Use) bool) error {
	g.useMu.Lock()
	defer g.useMu.Unlock()
	if err := g.o.DB.View(func(tx *bbolt.Tx) error { return found(tx, bucket, what, ref, tenant) }); err != nil {
		return err
	}
	var live, worktrees []string
	for _, u := range g.uses() {
		switch {
		case !needs(u):
		case u.Live:
			live = append(live, u.RunRef)
		case u.Worktree && what == "workspace":
			worktrees = append(worktrees, u.RunRef)
		}
	}
	switch {
	case len(live) > 0:
		return refusal.New(ErrInUse, "%s %s is used by %s %s; stop %s first (olivares session stop REF)",
			what, ref, plural(len(live), "live run", "live runs"), strings.Join(live, ", "), plural(len(live), "it", "them"))
	case len(worktrees) > 0:
		return refusal.New(ErrInUse, "workspace %s still holds the worktree of %s %s; release %s first (olivares session cleanup REF)",
			ref, plural(len(worktrees), "run", "runs"), strings.Join(worktrees, ", "), plural(len(worktrees), "it", "them"))
	}
	return g.o.DB.Update(func(tx *bbolt.Tx) error {
		if err := found(tx, bucket, what, ref, tenant); err != nil {
			return err
		}
		return tx.Bucket(bucket).Delete([]byte(ref))
	})
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
