package registry

import (
	"errors"
	"strings"

	"github.com/olivares-dev/olivares/agent/refusal"
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
// DeleteProfile and DeleteWorkspace check. Without it nothing is in use.
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

// usesLocked lists the runs under useMu.
func (g *Registry) usesLocked() []Use {
	if g.uses == nil {
		return nil
	}
	return g.uses()
}

// DeleteProfile removes a profile of tenant that no run needs any more:
// none is live or waits for approval on it (R-LIFE-3). Its home and the
// files in it stay: a home may be a person's own.
func (g *Registry) DeleteProfile(ref, tenant string) error {
	g.useMu.Lock()
	defer g.useMu.Unlock()
	if _, err := g.ProfileIn(ref, tenant); err != nil {
		return err
	}
	var users []string
	for _, u := range g.usesLocked() {
		if u.ProfileRef == ref && u.Live {
			users = append(users, u.RunRef)
		}
	}
	if len(users) > 0 {
		return refusal.New(ErrInUse, "profile %s is used by %s %s; stop %s first (olivares session stop REF)",
			ref, plural(len(users), "live run", "live runs"), strings.Join(users, ", "), plural(len(users), "it", "them"))
	}
	return g.deleteRecord(bucketProfiles, "profile", ref, tenant)
}

// DeleteWorkspace removes a workspace of tenant that no run needs: none is
// live or waits for approval in it, and no run keeps a worktree of it that
// was not released. The directory stays.
func (g *Registry) DeleteWorkspace(ref, tenant string) error {
	g.useMu.Lock()
	defer g.useMu.Unlock()
	if _, err := g.WorkspaceIn(ref, tenant); err != nil {
		return err
	}
	var live, worktrees []string
	for _, u := range g.usesLocked() {
		switch {
		case u.WorkspaceRef != ref:
		case u.Live:
			live = append(live, u.RunRef)
		case u.Worktree:
			worktrees = append(worktrees, u.RunRef)
		}
	}
	switch {
	case len(live) > 0:
		return refusal.New(ErrInUse, "workspace %s is used by %s %s; stop %s first (olivares session stop REF)",
			ref, plural(len(live), "live run", "live runs"), strings.Join(live, ", "), plural(len(live), "it", "them"))
	case len(worktrees) > 0:
		return refusal.New(ErrInUse, "workspace %s still holds the worktree of %s %s; release %s first (olivares session cleanup REF)",
			ref, plural(len(worktrees), "run", "runs"), strings.Join(worktrees, ", "), plural(len(worktrees), "it", "them"))
	}
	return g.deleteRecord(bucketWorkspaces, "workspace", ref, tenant)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
