package api

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Continue at a limit's reset (docs/rules/usage.md, R-CONT-*). The
// schedule lives in the run's meta in the coordinator's store and the
// coordinator fires it, not the agent: a resume hands the run's grants out
// again and passes the workspace's project-config gate (R-GRANT-2,
// R-PCS-12), both of which only the coordinator holds; the audit ledger is
// here too; and UpdateRunMeta's one transaction is the claim that makes a
// continue fire once however many replicas scan (R-CONT-6).

// ContinueOptions tune the continuer. Zero values take the defaults.
type ContinueOptions struct {
	// Jitter is the most a continue is put after the reset, chosen at
	// random so that thirty runs of one account do not all wake at once.
	// When zero, 60s; negative means none.
	Jitter time.Duration
	// Backoff is the first wait when the limit is met again and the tool
	// names no later reset, or when the node cannot be reached; it doubles
	// per attempt up to MaxBackoff. When zero, 1m.
	Backoff time.Duration
	// MaxBackoff caps the backoff. When zero, 1h.
	MaxBackoff time.Duration
	// Poll is how often the continuer scans the schedules (another
	// replica's, and outcomes to settle) besides its own timers. When
	// zero, 5s.
	Poll time.Duration
}

func (o *ContinueOptions) setDefaults() {
	if o.Jitter == 0 {
		o.Jitter = time.Minute
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Minute
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Hour
	}
	if o.Poll <= 0 {
		o.Poll = 5 * time.Second
	}
}

const (
	// DefaultContinueMessage is what a continue sends when the person gave
	// no message (R-CONT-1).
	DefaultContinueMessage = "continue"
	// maxContinueMessage bounds the message (the input route's own bound
	// is larger; a continue is a nudge, not a document).
	maxContinueMessage = 64 << 10
	// continueClaim is how long a replica holds a schedule while it
	// continues the run (R-CONT-6); a crashed replica's claim runs out.
	continueClaim = 2 * time.Minute
	// continueSettle bounds how long a sent continue waits for its turn's
	// outcome before the schedule is dropped (R-CONT-5).
	continueSettle = 30 * time.Minute
)

// Why a schedule was dropped without continuing (audit detail
// cancel_reason, R-CONT-4).
const (
	cancelByPerson     = "cancelled"
	cancelReleased     = "released"
	cancelMoved        = "moved"
	cancelResumed      = "resumed_elsewhere"
	cancelStopped      = "stopped"
	cancelBusy         = "busy"
	cancelCleared      = "limit_cleared"
	cancelRefused      = "resume_refused"
	cancelHandedOff    = "handed_off"
	cancelDeleted      = "deleted"
	cancelNoOutcome    = "no_outcome"
	cancelOtherFailure = "failed"
	cancelContinued    = "" // settled: the continue went through
)

// continueAPI schedules and fires the continues at a limit's reset (R-CONT).
type continueAPI struct {
	*core
	// wake wakes RunContinuer when a schedule is set.
	wake chan struct{}
	// onLimit starts and runs the on_limit plans the continuer fires.
	onLimit *onLimitAPI
}

func (s *continueAPI) routes() []Route {
	return []Route{
		{http.MethodPost, Base + "/runs/:ref/continue-at-reset", auth.PermRunWrite, s.scheduleContinue, nil},
		{http.MethodDelete, Base + "/runs/:ref/continue-at-reset", auth.PermRunWrite, s.cancelContinue, nil},
	}
}

// continueAt is when to continue: the limit's reset when it is ahead,
// else now plus the backoff of the attempt (none for a first schedule),
// plus jitter (R-CONT-2).
func (s *continueAPI) continueAt(l *apitypes.Limit, attempt int) time.Time {
	now := s.o.Now().UTC()
	at := now
	if attempt > 0 {
		b := s.o.Continue.Backoff
		for i := 1; i < attempt && b < s.o.Continue.MaxBackoff; i++ {
			b *= 2
		}
		at = now.Add(min(b, s.o.Continue.MaxBackoff))
	}
	if l != nil && l.ResetsAt != nil && l.ResetsAt.After(at) {
		at = l.ResetsAt.UTC()
	}
	if j := s.o.Continue.Jitter; j > 0 {
		at = at.Add(rand.N(j))
	}
	return at.Truncate(time.Millisecond)
}

func (s *continueAPI) scheduleContinue(c echo.Context) error {
	ctx := c.Request().Context()
	var req apitypes.ContinueRequest
	if err := decodeStrict(c, maxJSONBody+maxContinueMessage, &req); err != nil {
		return err
	}
	msg := DefaultContinueMessage
	if req.Message != nil {
		msg = *req.Message
		if strings.TrimSpace(msg) == "" || len(msg) > maxContinueMessage || !utf8.ValidString(msg) {
			return apierr.BadRequest("bad_body", "message must be non-empty text of at most 64 KiB; leave it out to send %q", DefaultContinueMessage)
		}
	}
	r, err := s.refRun(c)
	if err != nil {
		return err
	}
	// R-CONT-1: only a run stopped on a limit, with a conversation to go
	// back to.
	if r.Limit == nil {
		return apierr.New(http.StatusConflict, "not_limited", "run %s is not stopped on a limit; send it input instead", r.RunRef)
	}
	if r.ConversationID == "" {
		return apierr.New(http.StatusConflict, "no_conversation", "run %s has no stored conversation to continue", r.RunRef)
	}
	cl := CallerOf(c)
	at := s.continueAt(r.Limit, 0)
	_, err = s.o.Store.UpdateRunMeta(ctx, r.RunRef, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
		if m.ReleasedAt != nil {
			return nil, store.ErrReleased
		}
		m.Continue = &store.ContinueSchedule{At: at, Message: msg, Generation: r.Generation, ProfileRef: r.ProviderProfileRef,
			NodeID: r.NodeID, Live: apitypes.Live(r.State), Actor: cl.Actor()}
		e := s.auditEntry(c, apitypes.AuditRunContinueScheduled, r.RunRef)
		e.Target.NodeID = r.NodeID
		e.Detail = mustJSON(map[string]any{"scheduled_at": at, "attempt": 0})
		return &e, nil
	})
	if errors.Is(err, store.ErrReleased) {
		return apierr.New(http.StatusConflict, "released", "run %s was cleaned up; it cannot continue", r.RunRef)
	}
	if err != nil {
		return err
	}
	s.wakeContinuer()
	return s.respondRun(c, http.StatusOK, r)
}

func (s *continueAPI) cancelContinue(c echo.Context) error {
	if err := noBody(c); err != nil {
		return err
	}
	r, err := s.refRun(c)
	if err != nil {
		return err
	}
	// Idempotent: nothing scheduled is nothing to cancel, and no audit.
	return s.updateMeta(c, func(m *store.RunMeta) *apitypes.AuditEntry {
		if m.Continue == nil {
			return nil
		}
		m.Continue = nil
		e := s.auditEntry(c, apitypes.AuditRunContinueCancelled, r.RunRef)
		e.Detail = mustJSON(map[string]any{"cancel_reason": cancelByPerson})
		return &e
	})
}

// CancelContinueFor drops run ref's schedule because of what happened to
// the run (a handoff from it, R-CONT-4), audited as actor's.
func (s *continueAPI) CancelContinueFor(ctx context.Context, ref, reason string, actor apitypes.AuditActor) {
	_, err := s.o.Store.UpdateRunMeta(ctx, ref, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
		if m.Continue == nil {
			return nil, nil
		}
		m.Continue = nil
		e := apitypes.AuditEntry{At: s.o.Now().UTC(), Tenant: m.Tenant, Actor: actor, Event: apitypes.AuditRunContinueCancelled,
			Target: apitypes.AuditTarget{RunRef: ref}, Detail: mustJSON(map[string]any{"cancel_reason": reason})}
		return &e, nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.ErrorContext(ctx, "continue cancel failed", logging.KeyRunRef, ref, logging.Err(err))
	}
}

// wakeContinuer makes the continuer look at the schedules now.
func (s *continueAPI) wakeContinuer() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// RunContinuer fires the scheduled continues until ctx ends (R-CONT-*).
// Every replica runs one; the claim in the store makes each continue fire
// once.
func (s *continueAPI) RunContinuer(ctx context.Context) {
	s.onLimit.requeueLimited(ctx) // R-ONL-2: what a stopped coordinator had queued
	for {
		wait := s.o.Continue.Poll
		if next := s.continueTick(ctx); !next.IsZero() {
			wait = min(wait, max(next.Sub(s.o.Now()), 0))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-s.wake:
			t.Stop()
		}
	}
}

// continueTick fires what is due and settles what was sent; it returns the
// earliest schedule still ahead (zero if none).
func (s *continueAPI) continueTick(ctx context.Context) time.Time {
	s.onLimit.startOnLimits(ctx) // R-ONL-2
	metas, err := s.o.Store.ListContinues(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.ErrorContext(ctx, "continue scan failed", logging.Err(err))
		}
		return time.Time{}
	}
	now := s.o.Now()
	var next time.Time
	for _, m := range metas {
		c := m.Continue
		switch {
		case c.ClaimedUntil.After(now):
		case c.FiredAt != nil:
			s.settleContinue(ctx, m)
		case c.At.After(now):
			if next.IsZero() || c.At.Before(next) {
				next = c.At
			}
		default:
			s.fireContinue(ctx, m.RunRef)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return next
}

// errNotDue: the schedule changed under us (cancelled, claimed, moved
// ahead); leave it.
var errNotDue = errors.New("continue not due")

// fireContinue claims a due schedule, checks the run is still the one it
// was scheduled for (R-CONT-4), resumes the exact conversation when the
// process is gone, and sends the message (R-CONT-3).
func (s *continueAPI) fireContinue(ctx context.Context, ref string) {
	now := s.o.Now().UTC()
	var c store.ContinueSchedule
	meta, err := s.o.Store.UpdateRunMeta(ctx, ref, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
		if m.Continue == nil || m.Continue.FiredAt != nil || m.Continue.ClaimedUntil.After(now) || m.Continue.At.After(now) {
			return nil, errNotDue
		}
		m.Continue.ClaimedUntil = now.Add(continueClaim)
		if len(m.Continue.Plan) > 0 {
			m.Continue.ClaimedUntil = now.Add(onLimitClaim) // R-ONL-3: its steps' own deadlines
		}
		c = *m.Continue
		return nil, nil
	})
	if errors.Is(err, errNotDue) {
		return
	}
	if errors.Is(err, store.ErrNotFound) {
		return // deleted: its meta went with it
	}
	if err != nil {
		s.log.ErrorContext(ctx, "continue claim failed", logging.KeyRunRef, ref, logging.Err(err))
		return
	}
	r, err := s.o.Store.GetRun(ctx, ref)
	if err != nil {
		s.dropContinue(ctx, ref, meta.Tenant, c, cancelDeleted)
		return
	}
	if reason := continueRefusal(meta, c, r); reason != "" {
		s.dropContinue(ctx, ref, r.Tenant, c, reason)
		return
	}
	if len(c.Plan) > 0 {
		s.onLimit.runOnLimitPlan(ctx, c, r) // R-ONL-3
		return
	}
	if r.Limit != nil && r.Limit.ResetsAt != nil && r.Limit.ResetsAt.After(now) {
		// The tool reported a later reset since: wait for it (R-CONT-3).
		s.rescheduleContinue(ctx, r, c, c.Attempts, nil)
		return
	}
	if !s.o.Fleet.Link(r.NodeID).Connected {
		s.rescheduleContinue(ctx, r, c, c.Attempts+1, nil) // R-CONT-5: back off, not an attempt lost
		return
	}
	resumed := false
	if !apitypes.Live(r.State) {
		out, err := s.resumeFor(ctx, r)
		var we *wire.Error
		switch {
		case errors.As(err, &we) && we.Status >= 400 && we.Status < 500:
			// The node refused: the conversation is held elsewhere or
			// gone (R-RES-2, the Codex thread lease).
			s.log.WarnContext(ctx, "continue: resume refused", logging.KeyRunRef, ref, "code", we.Code)
			s.dropContinue(ctx, ref, r.Tenant, c, cancelRefused)
			return
		case err != nil:
			s.log.WarnContext(ctx, "continue: resume failed", logging.KeyRunRef, ref, logging.Err(err))
			s.rescheduleContinue(ctx, r, c, c.Attempts+1, nil)
			return
		}
		r, resumed = s.index(ctx, out), true
		if r.State == apitypes.StatePendingApproval {
			s.dropContinue(ctx, ref, r.Tenant, c, cancelBusy)
			return
		}
	}
	in := apitypes.InputRequest{Text: &c.Message}
	if r.Driver == "claude" {
		in = apitypes.InputRequest{Message: json.RawMessage(mustJSON(c.Message))}
	}
	// The outcome is what the run reports after this instant, taken before
	// the send: a refusal can come back before the call does (R-CONT-5).
	fired := s.o.Now().UTC()
	if err := s.runOp(ctx, r, proto.OpRunInput, in, &apitypes.Accepted{}, callTimeout); err != nil {
		s.log.WarnContext(ctx, "continue: input failed", logging.KeyRunRef, ref, logging.Err(err))
		s.rescheduleContinue(ctx, r, c, c.Attempts+1, nil)
		return
	}
	_, err = s.o.Store.UpdateRunMeta(ctx, ref, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
		if m.Continue == nil {
			return nil, nil // cancelled while it fired: the message went anyway
		}
		m.Continue.FiredAt, m.Continue.ClaimedUntil = &fired, time.Time{}
		m.Continue.Generation, m.Continue.Live = r.Generation, true
		e := apitypes.AuditEntry{At: fired, Tenant: r.Tenant, Actor: c.Actor, Event: apitypes.AuditRunContinued,
			Target: apitypes.AuditTarget{RunRef: ref, NodeID: r.NodeID},
			Detail: mustJSON(map[string]any{"generation": r.Generation, "attempt": c.Attempts, "resumed": resumed})}
		return &e, nil
	})
	if err != nil {
		s.log.ErrorContext(ctx, "continue: record failed", logging.KeyRunRef, ref, logging.Err(err))
	}
}

// continueRefusal says why a due schedule must not fire (R-CONT-4), ""
// when it may.
func continueRefusal(meta store.RunMeta, c store.ContinueSchedule, r apitypes.Run) string {
	switch {
	case meta.ReleasedAt != nil || r.State == apitypes.StateReleased:
		return cancelReleased
	case r.ProviderProfileRef != c.ProfileRef || r.NodeID != c.NodeID:
		return cancelMoved
	case r.Generation != c.Generation:
		return cancelResumed
	case c.Live && !apitypes.Live(r.State):
		return cancelStopped
	case r.State == apitypes.StateRunning || r.State == apitypes.StateStarting || r.State == apitypes.StatePendingApproval:
		return cancelBusy
	case r.Limit == nil && !c.Moved: // R-ONL-4: a move cleared it
		return cancelCleared
	}
	return ""
}

// resumeFor is POST /runs/{ref}/resume on the continuer's behalf: the
// run's grants again and the workspace's gate (R-GRANT-2, R-PCS-12).
func (s *continueAPI) resumeFor(ctx context.Context, r apitypes.Run) (apitypes.Run, error) {
	params, err := s.resumeParams(ctx, r)
	if err != nil {
		return apitypes.Run{}, err
	}
	var out apitypes.Run
	if err := s.runOp(ctx, r, proto.OpRunResume, params, &out, callTimeout); err != nil {
		return apitypes.Run{}, err
	}
	out.NodeID, out.Tenant = r.NodeID, r.Tenant
	return out, nil
}

// settleContinue looks at the run after its continue was sent (R-CONT-5):
// the limit met again reschedules with backoff; a turn that went well (the
// limit cleared, R-LIM-8) or failed otherwise, a process gone, or no
// outcome for too long ends the schedule.
func (s *continueAPI) settleContinue(ctx context.Context, m store.RunMeta) {
	c := *m.Continue
	r, err := s.o.Store.GetRun(ctx, m.RunRef)
	if err != nil {
		s.dropContinue(ctx, m.RunRef, m.Tenant, c, cancelDeleted)
		return
	}
	after := r.LastError != nil && r.LastError.At.After(*c.FiredAt)
	again := r.Limit != nil && r.Limit.SeenAt != nil && r.Limit.SeenAt.After(*c.FiredAt)
	switch {
	case again || (after && r.LastError.Kind == "rate_limit"):
		s.rescheduleContinue(ctx, r, c, c.Attempts+1, c.FiredAt)
	case after:
		s.dropContinue(ctx, m.RunRef, r.Tenant, c, cancelOtherFailure)
	case r.Limit == nil:
		s.dropContinue(ctx, m.RunRef, r.Tenant, c, cancelContinued)
	case r.Generation != c.Generation || !apitypes.Live(r.State):
		s.dropContinue(ctx, m.RunRef, r.Tenant, c, cancelStopped)
	case s.o.Now().Sub(*c.FiredAt) > continueSettle:
		s.dropContinue(ctx, m.RunRef, r.Tenant, c, cancelNoOutcome)
	}
}

// rescheduleContinue puts the schedule at the limit's reset or the
// attempt's backoff (R-CONT-5), audited as scheduled again. fired, when
// set, is the continue whose outcome this is: a schedule changed since is
// left alone.
func (s *continueAPI) rescheduleContinue(ctx context.Context, r apitypes.Run, c store.ContinueSchedule, attempt int, fired *time.Time) {
	at := s.continueAt(r.Limit, attempt)
	_, err := s.o.Store.UpdateRunMeta(ctx, r.RunRef, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
		if m.Continue == nil || (fired != nil && (m.Continue.FiredAt == nil || !m.Continue.FiredAt.Equal(*fired))) {
			return nil, nil
		}
		m.Continue.At, m.Continue.Attempts, m.Continue.FiredAt, m.Continue.ClaimedUntil = at, attempt, nil, time.Time{}
		if fired != nil {
			m.Continue.Moved = false // the new account's limit: an ordinary continue now (R-ONL-4)
		}
		m.Continue.Generation, m.Continue.Live = r.Generation, apitypes.Live(r.State)
		e := apitypes.AuditEntry{At: s.o.Now().UTC(), Tenant: r.Tenant, Actor: c.Actor, Event: apitypes.AuditRunContinueScheduled,
			Target: apitypes.AuditTarget{RunRef: r.RunRef, NodeID: r.NodeID}, Detail: mustJSON(map[string]any{"scheduled_at": at, "attempt": attempt})}
		return &e, nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.ErrorContext(ctx, "continue: reschedule failed", logging.KeyRunRef, r.RunRef, logging.Err(err))
	}
}

// dropContinue ends the schedule; reason "" is a continue that went
// through (nothing more to audit), any other is audited as a cancel.
func (s *continueAPI) dropContinue(ctx context.Context, ref, tenant string, c store.ContinueSchedule, reason string) {
	_, err := s.o.Store.UpdateRunMeta(ctx, ref, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
		if m.Continue == nil {
			return nil, nil
		}
		m.Continue = nil
		if reason == cancelContinued {
			return nil, nil
		}
		e := apitypes.AuditEntry{At: s.o.Now().UTC(), Tenant: tenant, Actor: c.Actor, Event: apitypes.AuditRunContinueCancelled,
			Target: apitypes.AuditTarget{RunRef: ref}, Detail: mustJSON(map[string]any{"cancel_reason": reason})}
		return &e, nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.ErrorContext(ctx, "continue: drop failed", logging.KeyRunRef, ref, logging.Err(err))
	}
}
