package supervisor

import (
	"errors"
	"strings"

	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// ErrInUse: a profile or workspace cannot be deleted while a run needs it
// (R-LIFE-3).
var ErrInUse = errors.New("supervisor: in use")

// DeleteProfile removes a profile that no run needs any more: none is live
// or waits for approval on it. Starts hold useMu (read) from their profile
// lookup until their run is registered, so no launch slips between the
// check and the delete (R-LIFE-3).
func (s *Supervisor) DeleteProfile(ref, tenant string) error {
	s.useMu.Lock()
	defer s.useMu.Unlock()
	if _, err := s.o.Registry.ProfileIn(ref, tenant); err != nil {
		return err
	}
	var users []string
	for _, r := range s.List() {
		if r.ProviderProfileRef == ref && (apitypes.Live(r.State) || r.State == apitypes.StatePendingApproval) {
			users = append(users, r.RunRef)
		}
	}
	if len(users) > 0 {
		return refusal.New(ErrInUse, "profile %s is used by %s %s; stop %s first (olivares session stop REF)",
			ref, plural(len(users), "live run", "live runs"), strings.Join(users, ", "), plural(len(users), "it", "them"))
	}
	return s.o.Registry.DeleteProfile(ref, tenant)
}

// DeleteWorkspace removes a workspace that no run needs: none is live or
// waits for approval in it, and no run keeps a worktree of it that was not
// released (releasing one needs the workspace's repository).
func (s *Supervisor) DeleteWorkspace(ref, tenant string) error {
	s.useMu.Lock()
	defer s.useMu.Unlock()
	if _, err := s.o.Registry.WorkspaceIn(ref, tenant); err != nil {
		return err
	}
	var live, worktrees []string
	s.mu.Lock()
	runs := make([]*run, 0, len(s.runs))
	for _, r := range s.runs {
		runs = append(runs, r)
	}
	s.mu.Unlock()
	for _, r := range runs {
		v := r.snapshot()
		r.mu.Lock()
		rec := r.rec
		r.mu.Unlock()
		if rec.WorkspaceRef != ref {
			continue
		}
		switch {
		case apitypes.Live(v.State) || v.State == apitypes.StatePendingApproval:
			live = append(live, v.RunRef)
		case rec.WorktreeBranch != "" && !rec.Released:
			worktrees = append(worktrees, v.RunRef)
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
	return s.o.Registry.DeleteWorkspace(ref, tenant)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
