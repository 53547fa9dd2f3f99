package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Limits of the mark routes.
const (
	// maxNameRunes is R-NAME-3's bound, in code points (R-NAME-7).
	maxNameRunes = 200
	// maxPinnedExtras bounds the pinned rows added to a page (R-LIST-3).
	maxPinnedExtras = 20
	// maxCleanupBody is how much of a cleanup body is read: any body is
	// accepted (R-CLN-2) but only a small one can confirm.
	maxCleanupBody = 64 << 10
)

// markAPI serves the per-caller marks (pin, snooze, done), the session marks (name, archive), release and delete.
type markAPI struct{ *core }

func (s *markAPI) routes() []Route {
	return []Route{
		// Per-caller marks: a viewer marks for themselves (R-AUTH-1, R-AUTH-5).
		{http.MethodPost, Base + "/runs/:ref/pin", auth.PermRunRead, s.pin, nil},
		{http.MethodDelete, Base + "/runs/:ref/pin", auth.PermRunRead, s.unpin, nil},
		{http.MethodPost, Base + "/runs/:ref/snooze", auth.PermRunRead, s.snooze, nil},
		{http.MethodDelete, Base + "/runs/:ref/snooze", auth.PermRunRead, s.unsnooze, nil},
		{http.MethodPost, Base + "/runs/:ref/done", auth.PermRunRead, s.done, nil},
		{http.MethodDelete, Base + "/runs/:ref/done", auth.PermRunRead, s.undone, nil},
		// Session marks (R-AUTH-1).
		{http.MethodPut, Base + "/runs/:ref/name", auth.PermRunWrite, s.rename, nil},
		{http.MethodPost, Base + "/runs/:ref/archive", auth.PermRunWrite, s.archive, nil},
		{http.MethodDelete, Base + "/runs/:ref/archive", auth.PermRunWrite, s.unarchive, nil},
		// Release and delete (R-AUTH-1).
		{http.MethodPost, Base + "/runs/:ref/cleanup", auth.PermRunAdmin, s.cleanup, nil},
		{http.MethodDelete, Base + "/runs/:ref", auth.PermRunAdmin, s.deleteRun, nil},
	}
}

// markRun applies fn to the caller's marks on the run (404 for an unknown
// or other tenant's run, 409 once released).
func (s *markAPI) markRun(c echo.Context, fn func(*store.Marks)) (store.Marks, error) {
	ctx := c.Request().Context()
	cl := CallerOf(c)
	r, err := s.refRun(c)
	if err != nil {
		return store.Marks{}, err
	}
	if r.State == apitypes.StateReleased {
		return store.Marks{}, releasedErr(r.RunRef)
	}
	m, err := s.o.Store.UpdateMarks(ctx, store.MarkKey{Tenant: cl.Tenant, Owner: cl.Owner(), RunRef: r.RunRef}, fn)
	switch {
	case errors.Is(err, store.ErrReleased):
		return store.Marks{}, releasedErr(r.RunRef)
	case errors.Is(err, store.ErrNotFound):
		return store.Marks{}, apierr.NotFound("run", r.RunRef)
	case err == nil:
		s.publishMarks(cl, r.RunRef, m) // R-CHG-2: the caller's alone
	}
	return m, err
}

// releasedErr is R-PIN-7, R-SNZ-6 and R-DONE-4's 409.
func releasedErr(ref string) error {
	return apierr.New(http.StatusConflict, "run_released", "run %s was released (cleaned up); it takes no pin, snooze or done mark", ref)
}

func pinState(ref string, m store.Marks) apitypes.PinState {
	return apitypes.PinState{RunRef: ref, Pinned: m.PinnedAt != nil, PinnedAt: utcPtr(m.PinnedAt)}
}

func (s *markAPI) markState(ref string, m store.Marks) apitypes.MarkState {
	st := apitypes.MarkState{RunRef: ref, Done: m.Done}
	if m.SnoozedUntil != nil && s.o.Now().Before(*m.SnoozedUntil) {
		st.SnoozedUntil = utcPtr(m.SnoozedUntil)
	}
	return st
}

// pin and unpin are R-PIN-1..8: idempotent, a repeated pin keeps its
// pinned_at, and the store drops the oldest pin past 20.
func (s *markAPI) pin(c echo.Context) error {
	if err := noBody(c); err != nil {
		return err
	}
	now := s.o.Now().UTC().Truncate(time.Microsecond)
	m, err := s.markRun(c, func(m *store.Marks) {
		if m.PinnedAt == nil {
			m.PinnedAt = &now
		}
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pinState(c.Param("ref"), m))
}

func (s *markAPI) unpin(c echo.Context) error {
	if err := noBody(c); err != nil {
		return err
	}
	m, err := s.markRun(c, func(m *store.Marks) { m.PinnedAt = nil })
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pinState(c.Param("ref"), m))
}

// snooze is R-SNZ-1..3: until must be an RFC 3339 instant in the future; a
// second POST moves it.
func (s *markAPI) snooze(c echo.Context) error {
	var req apitypes.SnoozeRequest
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	if req.Until == nil {
		return apierr.BadRequest("bad_until", "until is required: the RFC 3339 instant the snooze ends")
	}
	until, err := time.Parse(time.RFC3339, *req.Until)
	if err != nil {
		return apierr.BadRequest("bad_until", "until %q is not an RFC 3339 instant (e.g. 2026-12-03T18:00:00Z)", *req.Until)
	}
	if !until.After(s.o.Now()) {
		return apierr.BadRequest("bad_until", "until %s is not in the future", until.UTC().Format(time.RFC3339))
	}
	until = until.UTC()
	m, err := s.markRun(c, func(m *store.Marks) { m.SnoozedUntil = &until })
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.markState(c.Param("ref"), m))
}

// unsnooze is idempotent (R-SNZ-7).
func (s *markAPI) unsnooze(c echo.Context) error {
	if err := noBody(c); err != nil {
		return err
	}
	m, err := s.markRun(c, func(m *store.Marks) { m.SnoozedUntil = nil })
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.markState(c.Param("ref"), m))
}

// done and undone are R-DONE-1..5: idempotent, independent of a snooze.
func (s *markAPI) done(c echo.Context) error   { return s.setDone(c, true) }
func (s *markAPI) undone(c echo.Context) error { return s.setDone(c, false) }

func (s *markAPI) setDone(c echo.Context, done bool) error {
	if err := noBody(c); err != nil {
		return err
	}
	m, err := s.markRun(c, func(m *store.Marks) { m.Done = done })
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.markState(c.Param("ref"), m))
}

// rename is R-NAME-1..7: the same name changes nothing and logs nothing;
// a change is audited with the run ref and never the name.
func (s *markAPI) rename(c echo.Context) error {
	var req apitypes.NameRequest
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	if req.Name == nil {
		return apierr.BadRequest("bad_name", "name is required (an empty name clears it)")
	}
	name, err := checkName(*req.Name)
	if err != nil {
		return err
	}
	return s.updateMeta(c, func(m *store.RunMeta) *apitypes.AuditEntry {
		if m.Name == name {
			return nil
		}
		m.Name = name
		e := s.auditEntry(c, apitypes.AuditRunRenamed, m.RunRef)
		return &e
	})
}

// archive and unarchive are R-ARC-1..6: for everybody, idempotent, the
// first archived_at kept, audited only when the mark changes. Neither
// stops nor removes the run.
func (s *markAPI) archive(c echo.Context) error {
	if err := noBody(c); err != nil {
		return err
	}
	return s.updateMeta(c, func(m *store.RunMeta) *apitypes.AuditEntry {
		if m.ArchivedAt != nil {
			return nil
		}
		now := s.o.Now().UTC().Truncate(time.Microsecond)
		m.ArchivedAt = &now
		e := s.auditEntry(c, apitypes.AuditRunArchived, m.RunRef)
		return &e
	})
}

func (s *markAPI) unarchive(c echo.Context) error {
	if err := noBody(c); err != nil {
		return err
	}
	return s.updateMeta(c, func(m *store.RunMeta) *apitypes.AuditEntry {
		if m.ArchivedAt == nil {
			return nil
		}
		m.ArchivedAt = nil
		e := s.auditEntry(c, apitypes.AuditRunUnarchived, m.RunRef)
		return &e
	})
}

// discardConfirmed reads a cleanup body: any body is accepted, and only an
// explicit JSON true for discard_worktree confirms (R-CLN-1, R-CLN-2).
func discardConfirmed(c echo.Context) bool {
	body, _ := io.ReadAll(io.LimitReader(c.Request().Body, maxCleanupBody+1))
	if len(body) > maxCleanupBody {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return false
	}
	return string(bytes.TrimSpace(m["discard_worktree"])) == "true"
}

// cleanup releases a run (R-CLN-*): the node releases it (a live run is
// 409), then every mark on it goes (R-CLN-7). Releasing a released run is
// 200 with no new event (R-CLN-8).
func (s *markAPI) cleanup(c echo.Context) error {
	discard := discardConfirmed(c)
	var out apitypes.Run
	r, err := s.runCall(c, proto.OpRunRelease, proto.RunRelease{DiscardWorktree: discard}, &out, 5*time.Minute)
	if err != nil {
		return err
	}
	out.NodeID, out.Tenant = r.NodeID, r.Tenant
	ctx := c.Request().Context()
	if out.State == apitypes.StateReleased {
		if _, err := s.o.Store.ReleaseRun(ctx, r.RunRef, s.o.Now()); err != nil {
			return err
		}
	}
	return s.respondRun(c, http.StatusOK, out)
}

// deleteRun is R-DEL-1..5: only a released run; the node drops its record,
// ring and ledger, then the index row goes with its audit entry in one
// transaction. A second delete is 404.
func (s *markAPI) deleteRun(c echo.Context) error {
	if err := noBody(c); err != nil {
		return err
	}
	ctx := c.Request().Context()
	r, err := s.refRun(c)
	if err != nil {
		return err
	}
	if !s.o.Fleet.Link(r.NodeID).Connected {
		return apierr.New(http.StatusServiceUnavailable, "node_unreachable", "node %s is not connected; the run's output and ledger live there, so it cannot be deleted until the node is back", r.NodeID)
	}
	if r = s.freshRun(ctx, r); r.State != apitypes.StateReleased {
		return apierr.New(http.StatusConflict, "not_released", "session must be cleaned before delete (state=%s)", r.State)
	}
	if r.CodexBinding != nil && r.CodexBinding.ModelLocked {
		// R-CX-LOCK-1, AT-CX-09: deleting it would drop the native binding.
		return apierr.New(http.StatusConflict, "model_locked", "run %s is a model-locked Codex supervision branch of thread %s; it cannot be deleted while it guards that binding", r.RunRef, r.CodexBinding.SourceThreadID)
	}
	err = s.call(ctx, r.NodeID, wire.Header{Op: proto.OpRunDelete, RunRef: r.RunRef}, nil, nil)
	var we *wire.Error
	if err != nil && !(errors.As(err, &we) && we.Status == http.StatusNotFound) {
		// A 404 from the node: an earlier delete removed it there and
		// did not get to the index; finish it.
		return err
	}
	if err := s.o.Store.DeleteRun(ctx, r.RunRef, s.auditEntry(c, apitypes.AuditRunDeleted, r.RunRef)); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return apierr.NotFound("run", r.RunRef)
		}
		return err
	}
	s.changes.add(change{tenant: r.Tenant, event: apitypes.ChangeRunRemoved, data: apitypes.RunRemoved{RunRef: r.RunRef}})
	s.replicas.announce(r.Tenant, r.RunRef)
	s.notify.forget(r.RunRef)
	return c.NoContent(http.StatusNoContent)
}
