package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Fail over at the limit (docs/rules/usage.md, R-ONL-*). A profile's
// on_limit plan is tried when one of its runs stops on a usage limit: move
// the conversation to another account of the same tool and continue it
// there, hand the work off to another profile, or continue at the reset.
// The plan rides on the continuer (continue.go): starting it sets a
// schedule due now that holds the steps left (store.ContinueSchedule.Plan),
// so the claim that makes a continue fire once across replicas
// (R-CONT-6) makes the plan run once too. Each step goes through the
// manual action's own code (moveRun, stopRun, handoffRun, resumeFor), so it
// is checked as that action is.

// onLimitQueue holds the runs an index push showed limited, for the
// continuer to look at (RunsIndexed must not block).
type onLimitQueue struct {
	mu   sync.Mutex
	refs map[string]bool
}

func (q *onLimitQueue) add(ref string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.refs == nil {
		q.refs = map[string]bool{}
	}
	q.refs[ref] = true
}

func (q *onLimitQueue) take() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, len(q.refs))
	for ref := range q.refs {
		out = append(out, ref)
	}
	q.refs = nil
	slices.Sort(out)
	return out
}

// onLimitClaim is how long a replica holds a schedule while it runs the
// plan's steps: longer than a stop, a move and a handoff take at most
// (5 minutes each), so that no other replica runs the plan meanwhile.
const onLimitClaim = 16 * time.Minute

// Who took a step (OnLimitEntry.By).
const (
	onLimitByPolicy = "policy"
	onLimitByPerson = "person"
)

// onLimitAPI runs the plans and serves POST /runs/{ref}/on-limit: a step
// now, by a person. Its steps are the manual actions' own code, so it
// holds the features that own them.
type onLimitAPI struct {
	*core
	continues *continueAPI
	runs      *runAPI
	handoffs  *handoffAPI
	queue     onLimitQueue // the runs seen limited, for the continuer
}

func (s *onLimitAPI) routes() []Route {
	return []Route{
		{http.MethodPost, Base + "/runs/:ref/on-limit", auth.PermRunWrite, s.onLimitNow, nil},
	}
}

// --- the profile's plan ---

// profileNamed finds tenant's profile by ref or by name.
func (s *core) profileNamed(ctx context.Context, tenant, id string) (apitypes.Profile, bool, error) {
	if p, err := s.o.Store.GetProfile(ctx, id); err == nil && p.Tenant == tenant {
		return p, true, nil
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return apitypes.Profile{}, false, err
	}
	ps, err := s.o.Store.ListProfiles(ctx, tenant)
	if err != nil {
		return apitypes.Profile{}, false, err
	}
	i := slices.IndexFunc(ps, func(p apitypes.Profile) bool { return p.Name == id })
	if i < 0 {
		return apitypes.Profile{}, false, nil
	}
	return ps[i], true, nil
}

func badOnLimit(code, format string, args ...any) error {
	return apierr.New(http.StatusUnprocessableEntity, code, format, args...)
}

// checkOnLimit validates the on_limit plan of profile self (R-ONL-1) and
// returns it with each profile named by its name.
func (s *workspaceAPI) checkOnLimit(ctx context.Context, tenant string, self apitypes.Profile, plan []string) ([]string, error) {
	if len(plan) > apitypes.MaxOnLimitSteps {
		return nil, badOnLimit("bad_on_limit", "on_limit has %d steps; give at most %d", len(plan), apitypes.MaxOnLimitSteps)
	}
	out := make([]string, 0, len(plan))
	for _, step := range plan {
		kind, id, ok := apitypes.ParseOnLimitStep(step)
		if !ok {
			return nil, badOnLimit("bad_on_limit", "on_limit step %q: use continue_at_reset, move:PROFILE or handoff:PROFILE", step)
		}
		if kind == apitypes.OnLimitContinue {
			if len(out) != len(plan)-1 {
				return nil, badOnLimit("bad_on_limit", "on_limit: continue_at_reset waits for the reset, so it can only be the last step")
			}
			out = append(out, step)
			continue
		}
		p, found, err := s.profileNamed(ctx, tenant, id)
		if err != nil {
			return nil, err
		}
		switch {
		case id == self.Name || (self.Ref != "" && (id == self.Ref || p.Ref == self.Ref)):
			return nil, badOnLimit("on_limit_profile_self", "on_limit step %q names this profile itself; name another account", step)
		case !found:
			return nil, badOnLimit("on_limit_profile_unknown", "on_limit step %q: there is no profile %q in this tenant", step, id)
		case kind == apitypes.OnLimitMove && self.Tool != "claude":
			return nil, badOnLimit("on_limit_move_unsupported", "on_limit step %q: only Claude Code runs move between accounts; use handoff:PROFILE for %s", step, self.Tool)
		case kind == apitypes.OnLimitMove && p.Tool != self.Tool:
			return nil, badOnLimit("on_limit_profile_other_tool", "on_limit step %q: profile %s is a %s profile and a run moves only to the same tool (%s); use handoff:%s", step, p.Name, p.Tool, self.Tool, p.Name)
		}
		out = append(out, kind+":"+p.Name)
	}
	return out, nil
}

// --- starting the plan ---

// onLimitSeen queues the limited runs of an index write (R-ONL-2); the
// continuer starts their plans.
func (s *onLimitAPI) onLimitSeen(rows ...apitypes.Run) {
	n := 0
	for _, r := range rows {
		if r.Limit != nil && r.Limit.SeenAt != nil {
			s.queue.add(r.RunRef)
			n++
		}
	}
	if n > 0 {
		s.continues.wakeContinuer()
	}
}

// requeueLimited queues every indexed run that shows a limit, once at the
// continuer's start: a limit the index took just before a coordinator
// stopped (its queue is memory) still starts its plan (R-ONL-2), and one
// already started is skipped by startOnLimits' check of OnLimitSeen.
func (s *onLimitAPI) requeueLimited(ctx context.Context) {
	tenants, err := s.o.Store.ListTenants(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.WarnContext(ctx, "on_limit: cannot read the index to start from", logging.Err(err))
		}
		return
	}
	for _, t := range tenants {
		q := store.RunQuery{Tenant: t.ID, Limit: 200, CursorMode: true}
		for {
			rows, next, err := s.o.Store.ListRuns(ctx, q)
			if err != nil {
				if ctx.Err() == nil {
					s.log.WarnContext(ctx, "on_limit: cannot read the index to start from", logging.Err(err))
				}
				return
			}
			s.onLimitSeen(rows...)
			if next == "" {
				break
			}
			q.Cursor = next
		}
	}
}

// startOnLimits starts the plan of each queued run whose profile has one,
// once per limit (R-ONL-2): the meta's OnLimitSeen is the limit it last
// started for, in the transaction that sets the schedule.
func (s *onLimitAPI) startOnLimits(ctx context.Context) {
	for _, ref := range s.queue.take() {
		r, err := s.o.Store.GetRun(ctx, ref)
		if err != nil || r.Limit == nil || r.Limit.SeenAt == nil {
			continue
		}
		p, err := s.o.Store.GetProfile(ctx, r.ProviderProfileRef)
		if err != nil || len(p.OnLimit) == 0 || p.OnLimitSetBy == nil {
			continue
		}
		now := s.o.Now().UTC()
		_, err = s.o.Store.UpdateRunMeta(ctx, ref, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
			if m.ReleasedAt != nil || m.Continue != nil || (m.OnLimitSeen != nil && !r.Limit.SeenAt.After(*m.OnLimitSeen)) {
				return nil, errNotDue // released, a continue under way, or started already
			}
			m.OnLimitSeen = r.Limit.SeenAt
			ent := apitypes.OnLimitEntry{At: now, Outcome: apitypes.OnLimitLimited, ProfileRef: p.Ref, ProfileName: p.Name,
				ResetsAt: r.Limit.ResetsAt, By: onLimitByPolicy}
			addOnLimit(m, ent)
			m.Continue = &store.ContinueSchedule{At: now, Message: DefaultContinueMessage, Generation: r.Generation, ProfileRef: r.ProviderProfileRef,
				NodeID: r.NodeID, Live: apitypes.Live(r.State), Actor: *p.OnLimitSetBy, Plan: slices.Clone(p.OnLimit)}
			e := onLimitAudit(r, *p.OnLimitSetBy, ent)
			e.Detail = mustJSON(map[string]any{"outcome": ent.Outcome, "profile_ref": p.Ref, "plan": p.OnLimit})
			return &e, nil
		})
		if err != nil && !errors.Is(err, errNotDue) && !errors.Is(err, store.ErrNotFound) {
			s.log.ErrorContext(ctx, "on_limit: start failed", logging.KeyRunRef, ref, logging.Err(err))
		}
	}
}

func addOnLimit(m *store.RunMeta, e apitypes.OnLimitEntry) {
	m.OnLimit = append(m.OnLimit, e)
	if n := len(m.OnLimit) - store.MaxOnLimitEntries; n > 0 {
		m.OnLimit = slices.Delete(m.OnLimit, 0, n)
	}
}

func onLimitAudit(r apitypes.Run, actor apitypes.AuditActor, ent apitypes.OnLimitEntry) apitypes.AuditEntry {
	d := map[string]any{"outcome": ent.Outcome, "by": ent.By}
	for k, v := range map[string]string{"step": ent.Step, "to_profile_ref": ent.ToRef, "new_run_ref": ent.NewRunRef, "code": ent.Code} {
		if v != "" {
			d[k] = v
		}
	}
	return apitypes.AuditEntry{At: ent.At, Tenant: r.Tenant, Actor: actor, Event: apitypes.AuditRunOnLimit,
		Target: apitypes.AuditTarget{RunRef: r.RunRef, NodeID: r.NodeID}, Detail: mustJSON(d)}
}

// recordOnLimit appends an entry to the run's history, audited
// sessions.run.on_limit as actor.
func (s *onLimitAPI) recordOnLimit(ctx context.Context, r apitypes.Run, actor apitypes.AuditActor, ent apitypes.OnLimitEntry) {
	_, err := s.o.Store.UpdateRunMeta(ctx, r.RunRef, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
		addOnLimit(m, ent)
		e := onLimitAudit(r, actor, ent)
		return &e, nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.ErrorContext(ctx, "on_limit: record failed", logging.KeyRunRef, r.RunRef, logging.Err(err))
	}
}

// --- running it ---

// runOnLimitPlan tries the plan's steps in order once its schedule is
// claimed (R-ONL-3): the first that applies ends it; a step that cannot is
// skipped with its reason (R-ONL-5); when none applies the run continues at
// the reset, the last resort.
func (s *onLimitAPI) runOnLimitPlan(ctx context.Context, c store.ContinueSchedule, r apitypes.Run) {
	for _, step := range c.Plan {
		kind, _, _ := apitypes.ParseOnLimitStep(step)
		if kind == apitypes.OnLimitContinue {
			break
		}
		moved, ent, err := s.onLimitStep(ctx, c.Actor, r, step, onLimitByPolicy)
		if err != nil {
			s.recordOnLimit(ctx, r, c.Actor, skipped(ent, err))
			// A move or handoff refused after its stop left the run
			// stopped: the next step sees it as it is now.
			r = s.freshRun(ctx, r)
			continue
		}
		s.recordOnLimit(ctx, r, c.Actor, ent)
		if kind == apitypes.OnLimitMove {
			s.continueMoved(ctx, c, moved)
		}
		return // a handoff dropped the schedule (R-CONT-4)
	}
	s.waitForReset(ctx, c, r, onLimitByPolicy)
}

// skipped is ent as a step that could not apply: the manual action's code
// and sentence (R-ONL-5).
func skipped(ent apitypes.OnLimitEntry, err error) apitypes.OnLimitEntry {
	ent.Outcome = apitypes.OnLimitSkipped
	var we *wire.Error
	if errors.As(err, &we) {
		ent.Code, ent.Reason = we.Code, we.Message
	} else {
		ae := apierr.As(err)
		ent.Code, ent.Reason = ae.Code, ae.Message
	}
	return ent
}

// onLimitStep takes one move or handoff step for run r as actor. It
// returns the entry to record and, for a move, the run as moved.
func (s *onLimitAPI) onLimitStep(ctx context.Context, actor apitypes.AuditActor, r apitypes.Run, step, by string) (apitypes.Run, apitypes.OnLimitEntry, error) {
	ent := apitypes.OnLimitEntry{At: s.o.Now().UTC(), Step: step, ProfileRef: r.ProviderProfileRef, By: by}
	kind, id, ok := apitypes.ParseOnLimitStep(step)
	if !ok || kind == apitypes.OnLimitContinue {
		return apitypes.Run{}, ent, apierr.BadRequest("bad_on_limit", "step %q: use move:PROFILE or handoff:PROFILE", step)
	}
	p, found, err := s.profileNamed(ctx, r.Tenant, id)
	if err != nil {
		return apitypes.Run{}, ent, err
	}
	if !found {
		return apitypes.Run{}, ent, apierr.NotFound("profile", id)
	}
	ent.ToRef, ent.ToName = p.Ref, p.Name
	if until := s.accountLimited(ctx, r.Tenant, p.Ref); until != nil {
		// Moving onto an account that is itself at its limit only meets
		// the limit again (and two plans naming each other would bounce).
		return apitypes.Run{}, ent, apierr.New(http.StatusConflict, "profile_limited", "profile %s is at its own usage limit until %s", p.Name, until.UTC().Format(time.RFC3339))
	}
	if kind == apitypes.OnLimitHandoff {
		out, err := s.handoffs.handoffRun(ctx, r.Tenant, actor, r, apitypes.HandoffRequest{ProviderProfileRef: p.Ref}, auth.NewID("run_"))
		if err != nil {
			return apitypes.Run{}, ent, err
		}
		ent.Outcome, ent.NewRunRef = apitypes.OnLimitHandedOff, out.Run.RunRef
		return apitypes.Run{}, ent, nil
	}
	// A move: the checks the coordinator can make before stopping the run
	// (R-HOF-5's order, for the move the node decides the rest).
	if r.Driver != "claude" {
		return apitypes.Run{}, ent, apierr.New(http.StatusUnprocessableEntity, "move_unsupported", "only Claude Code runs move; run %s is a %s run", r.RunRef, r.Driver)
	}
	if p.Tool != "claude" {
		return apitypes.Run{}, ent, apierr.New(http.StatusConflict, "profile_other_tool", "profile %s is a %s profile; a Claude Code run moves only to a Claude Code profile", p.Name, p.Tool)
	}
	if p.NodeID != r.NodeID {
		_, err := s.runs.moveRun(ctx, r.Tenant, r, p.Ref) // its profile_other_node
		return apitypes.Run{}, ent, err
	}
	if apitypes.Live(r.State) {
		if r, err = s.runs.stopRun(ctx, r.Tenant, actor, r); err != nil {
			return apitypes.Run{}, ent, err
		}
	}
	moved, err := s.runs.moveRun(ctx, r.Tenant, r, p.Ref)
	if err != nil {
		return apitypes.Run{}, ent, err
	}
	ent.Outcome = apitypes.OnLimitMoved
	return moved, ent, nil
}

// accountLimited is when the profile's account's limit resets, when its
// latest usage row ended on a limit still ahead (R-USE-5); nil otherwise.
func (s *onLimitAPI) accountLimited(ctx context.Context, tenant, profileRef string) *time.Time {
	rows, err := s.o.Store.LatestAccountUsage(ctx, tenant)
	if err != nil {
		return nil
	}
	for _, u := range rows {
		if u.ProfileRef == profileRef && u.Limit != nil && u.Limit.ResetsAt != nil && u.Limit.ResetsAt.After(s.o.Now()) {
			return u.Limit.ResetsAt
		}
	}
	return nil
}

// continueMoved continues a run the plan moved: now, on the new account,
// resuming its exact conversation and sending the message (R-ONL-4),
// through the continuer's own firing.
func (s *onLimitAPI) continueMoved(ctx context.Context, c store.ContinueSchedule, moved apitypes.Run) {
	now := s.o.Now().UTC()
	_, err := s.o.Store.UpdateRunMeta(ctx, moved.RunRef, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
		if m.Continue == nil {
			m.Continue = &store.ContinueSchedule{Message: c.Message}
		}
		m.Continue.Actor = c.Actor
		m.Continue.At, m.Continue.Plan, m.Continue.Moved, m.Continue.ClaimedUntil, m.Continue.FiredAt = now, nil, true, time.Time{}, nil
		m.Continue.Generation, m.Continue.ProfileRef, m.Continue.NodeID, m.Continue.Live = moved.Generation, moved.ProviderProfileRef, moved.NodeID, apitypes.Live(moved.State)
		return nil, nil
	})
	if err != nil {
		s.log.ErrorContext(ctx, "on_limit: continue after the move failed", logging.KeyRunRef, moved.RunRef, logging.Err(err))
		return
	}
	s.continues.fireContinue(ctx, moved.RunRef)
}

// waitForReset makes the schedule an ordinary continue at the limit's
// reset (R-CONT-2), audited as scheduled, and records it.
func (s *onLimitAPI) waitForReset(ctx context.Context, c store.ContinueSchedule, r apitypes.Run, by string) {
	at := s.continues.continueAt(r.Limit, 0)
	ent := apitypes.OnLimitEntry{At: s.o.Now().UTC(), Outcome: apitypes.OnLimitWaiting, Step: apitypes.OnLimitContinue,
		ProfileRef: r.ProviderProfileRef, ResetsAt: &at, By: by}
	_, err := s.o.Store.UpdateRunMeta(ctx, r.RunRef, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
		if m.ReleasedAt != nil {
			return nil, store.ErrReleased
		}
		if m.Continue == nil {
			m.Continue = &store.ContinueSchedule{Message: c.Message}
		}
		m.Continue.Actor = c.Actor
		m.Continue.At, m.Continue.Plan, m.Continue.Moved, m.Continue.ClaimedUntil, m.Continue.FiredAt, m.Continue.Attempts = at, nil, false, time.Time{}, nil, 0
		m.Continue.Generation, m.Continue.ProfileRef, m.Continue.NodeID, m.Continue.Live = r.Generation, r.ProviderProfileRef, r.NodeID, apitypes.Live(r.State)
		addOnLimit(m, ent)
		e := apitypes.AuditEntry{At: ent.At, Tenant: r.Tenant, Actor: c.Actor, Event: apitypes.AuditRunContinueScheduled,
			Target: apitypes.AuditTarget{RunRef: r.RunRef, NodeID: r.NodeID}, Detail: mustJSON(map[string]any{"scheduled_at": at, "attempt": 0, "by": by})}
		return &e, nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrReleased) {
		s.log.ErrorContext(ctx, "on_limit: schedule at the reset failed", logging.KeyRunRef, r.RunRef, logging.Err(err))
	}
	s.continues.wakeContinuer()
}

// --- a person runs a step now ---

// onLimitNow is POST /runs/{ref}/on-limit {step} (R-ONL-7): one step of a
// plan, run now by the caller from the limit banner, checked and audited
// as the manual action is; a refusal is the action's own answer.
func (s *onLimitAPI) onLimitNow(c echo.Context) error {
	ctx := c.Request().Context()
	r, err := s.refRun(c)
	if err != nil {
		return err
	}
	var req apitypes.OnLimitRequest
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	kind, _, ok := apitypes.ParseOnLimitStep(req.Step)
	if !ok {
		return apierr.BadRequest("bad_on_limit", "step %q: use continue_at_reset, move:PROFILE or handoff:PROFILE", req.Step)
	}
	if r.Limit == nil {
		return apierr.New(http.StatusConflict, "not_limited", "run %s is not stopped on a limit; send it input instead", r.RunRef)
	}
	cl := CallerOf(c)
	actor := cl.Actor()
	if kind == apitypes.OnLimitContinue {
		if r.ConversationID == "" {
			return apierr.New(http.StatusConflict, "no_conversation", "run %s has no stored conversation to continue", r.RunRef)
		}
		s.waitForReset(ctx, store.ContinueSchedule{Message: DefaultContinueMessage, Actor: actor}, r, onLimitByPerson)
		return s.respondRun(c, http.StatusOK, s.freshRun(ctx, r))
	}
	// A step a person runs replaces whatever the plan had scheduled.
	s.continues.CancelContinueFor(ctx, r.RunRef, cancelByPerson, actor)
	moved, ent, err := s.onLimitStep(ctx, actor, r, req.Step, onLimitByPerson)
	if err != nil {
		return err
	}
	s.recordOnLimit(ctx, r, actor, ent)
	if kind == apitypes.OnLimitHandoff {
		return s.respondRun(c, http.StatusOK, s.freshRun(ctx, r))
	}
	s.continueMoved(ctx, store.ContinueSchedule{Message: DefaultContinueMessage, Actor: actor}, moved)
	return s.respondRun(c, http.StatusOK, s.freshRun(ctx, moved))
}
