package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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

func (s *Server) markRoutes() []Route {
	return []Route{
		// Per-caller marks: a viewer marks for themselves (R-AUTH-1, R-AUTH-5).
		{http.MethodPost, Base + "/runs/:ref/pin", auth.PermRunRead, s.pin},
		{http.MethodDelete, Base + "/runs/:ref/pin", auth.PermRunRead, s.unpin},
		{http.MethodPost, Base + "/runs/:ref/snooze", auth.PermRunRead, s.snooze},
		{http.MethodDelete, Base + "/runs/:ref/snooze", auth.PermRunRead, s.unsnooze},
		{http.MethodPost, Base + "/runs/:ref/done", auth.PermRunRead, s.done},
		{http.MethodDelete, Base + "/runs/:ref/done", auth.PermRunRead, s.undone},
		// Session marks (R-AUTH-1).
		{http.MethodPut, Base + "/runs/:ref/name", auth.PermRunWrite, s.rename},
		{http.MethodPost, Base + "/runs/:ref/archive", auth.PermRunWrite, s.archive},
		{http.MethodDelete, Base + "/runs/:ref/archive", auth.PermRunWrite, s.unarchive},
		// Release and delete (R-AUTH-1).
		{http.MethodPost, Base + "/runs/:ref/cleanup", auth.PermRunAdmin, s.cleanup},
		{http.MethodDelete, Base + "/runs/:ref", auth.PermRunAdmin, s.deleteRun},
	}
}

// runViews turns index rows into run objects for the caller (R-API-6): the
// node's reachability (R-STATE-7), the session's name and archive mark
// (R-NAME-4, R-ARC-3) and the caller's own marks (R-GET-3, R-PIN-5,
// R-SNZ-5, R-DONE-3).
func (s *Server) runViews(c echo.Context, rows ...apitypes.Run) ([]apitypes.Run, error) {
	return s.runViewsFor(c.Request().Context(), CallerOf(c), rows...)
}

// runViewsFor is runViews for a caller outside a request's handler (the
// change stream, R-CHG-2).
func (s *Server) runViewsFor(ctx context.Context, cl Caller, rows ...apitypes.Run) ([]apitypes.Run, error) {
	refs := make([]string, len(rows))
	for i, r := range rows {
		refs[i] = r.RunRef
	}
	metas, err := s.o.Store.GetRunMeta(ctx, refs)
	if err != nil {
		return nil, err
	}
	marks, err := s.o.Store.GetMarks(ctx, cl.Tenant, cl.Owner(), refs)
	if err != nil {
		return nil, err
	}
	now := s.o.Now()
	out := make([]apitypes.Run, len(rows))
	for i, r := range rows {
		if !s.o.Fleet.Link(r.NodeID).Connected {
			f := false
			r.NodeReachable = &f
		} else {
			r.NodeReachable = nil
		}
		meta := metas[r.RunRef]
		r.Name, r.ArchivedAt = meta.Name, utcPtr(meta.ArchivedAt)
		r.ScheduledContinueAt = nil
		if c := meta.Continue; c != nil && c.FiredAt == nil {
			r.ScheduledContinueAt = utcPtr(&c.At) // R-CONT-1
		}
		r.OnLimit = meta.OnLimit // R-ONL-6
		m := marks[r.RunRef]
		r.Pinned, r.PinnedAt, r.Done = m.PinnedAt != nil, utcPtr(m.PinnedAt), m.Done
		r.SnoozedUntil = nil
		if m.SnoozedUntil != nil && now.Before(*m.SnoozedUntil) {
			r.SnoozedUntil = utcPtr(m.SnoozedUntil)
		}
		out[i] = apitypes.WithAttention(r, now) // R-ATTN-1

	}
	return out, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// respondRun answers one run object.
func (s *Server) respondRun(c echo.Context, status int, r apitypes.Run) error {
	v, err := s.runViews(c, r)
	if err != nil {
		return err
	}
	return c.JSON(status, v[0])
}

// pinnedExtras are the caller's pinned runs that match q but are not on the
// page (R-LIST-3), newest pin first, at most maxPinnedExtras.
func (s *Server) pinnedExtras(c echo.Context, q store.RunQuery, page []apitypes.Run) ([]apitypes.Run, error) {
	ctx := c.Request().Context()
	cl := CallerOf(c)
	pins, err := s.o.Store.PinnedMarks(ctx, cl.Tenant, cl.Owner())
	if err != nil {
		return nil, err
	}
	var refs []string
	for _, m := range pins {
		if !slices.ContainsFunc(page, func(r apitypes.Run) bool { return r.RunRef == m.RunRef }) {
			refs = append(refs, m.RunRef)
		}
	}
	// One read for every candidate: on a database store each read is a
	// round trip.
	rows, err := s.o.Store.GetRuns(ctx, refs)
	if err != nil {
		return nil, err
	}
	var out []apitypes.Run
	for _, ref := range slices.Backward(refs) {
		if len(out) == maxPinnedExtras {
			break
		}
		r, ok := rows[ref]
		if !ok || r.Tenant != cl.Tenant || !q.Matches(r) {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// auditEntry is an audit row by the caller about a run (R-AUD-3).
func (s *Server) auditEntry(c echo.Context, event, runRef string) apitypes.AuditEntry {
	cl := CallerOf(c)
	return apitypes.AuditEntry{At: s.o.Now().UTC(), Tenant: cl.Tenant, Actor: cl.Actor(), Event: event,
		Target: apitypes.AuditTarget{RunRef: runRef}}
}

// noBody is R-API-7 for a route that takes no body: an empty body or {} is
// accepted, anything else is 400 bad_body before any effect. Every route
// without a body calls it (TestBodylessRoutes walks the route table);
// cleanup alone accepts any body (R-CLN-2).
func noBody(c echo.Context) error {
	var none struct{}
	return decodeStrict(c, maxJSONBody, &none)
}

// markRun applies fn to the caller's marks on the run (404 for an unknown
// or other tenant's run, 409 once released).
func (s *Server) markRun(c echo.Context, fn func(*store.Marks)) (store.Marks, error) {
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

func (s *Server) markState(ref string, m store.Marks) apitypes.MarkState {
	st := apitypes.MarkState{RunRef: ref, Done: m.Done}
	if m.SnoozedUntil != nil && s.o.Now().Before(*m.SnoozedUntil) {
		st.SnoozedUntil = utcPtr(m.SnoozedUntil)
	}
	return st
}

// pin and unpin are R-PIN-1..8: idempotent, a repeated pin keeps its
// pinned_at, and the store drops the oldest pin past 20.
func (s *Server) pin(c echo.Context) error {
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

func (s *Server) unpin(c echo.Context) error {
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
func (s *Server) snooze(c echo.Context) error {
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
func (s *Server) unsnooze(c echo.Context) error {
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
func (s *Server) done(c echo.Context) error   { return s.setDone(c, true) }
func (s *Server) undone(c echo.Context) error { return s.setDone(c, false) }

func (s *Server) setDone(c echo.Context, done bool) error {
	if err := noBody(c); err != nil {
		return err
	}
	m, err := s.markRun(c, func(m *store.Marks) { m.Done = done })
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.markState(c.Param("ref"), m))
}

// checkName applies R-NAME-1, R-NAME-3 and R-NAME-7: trimmed first, at most
// 200 code points, no control (Cc) or invisible (Cf, Zl, Zp) character.
// The empty name clears it (R-NAME-2).
func checkName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if !utf8.ValidString(name) {
		return "", apierr.BadRequest("bad_name", "the name is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(name); n > maxNameRunes {
		return "", apierr.BadRequest("bad_name", "the name has %d characters; at most %d are allowed", n, maxNameRunes)
	}
	for i, r := range name {
		if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
			return "", apierr.BadRequest("bad_name", "the name holds a control or invisible character (U+%04X at byte %d); remove it", r, i)
		}
	}
	return name, nil
}

// rename is R-NAME-1..7: the same name changes nothing and logs nothing;
// a change is audited with the run ref and never the name.
func (s *Server) rename(c echo.Context) error {
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
func (s *Server) archive(c echo.Context) error {
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

func (s *Server) unarchive(c echo.Context) error {
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

// updateMeta changes the run's session meta with its audit entry in one
// transaction (R-AUD-1) and answers the run.
func (s *Server) updateMeta(c echo.Context, fn func(*store.RunMeta) *apitypes.AuditEntry) error {
	ctx := c.Request().Context()
	r, err := s.refRun(c)
	if err != nil {
		return err
	}
	changed := false
	if _, err := s.o.Store.UpdateRunMeta(ctx, r.RunRef, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
		e := fn(m)
		changed = e != nil
		return e, nil
	}); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return apierr.NotFound("run", r.RunRef)
		}
		return err
	}
	if changed {
		s.publishRuns(r) // R-CHG-2: its name or archive mark
	}
	return s.respondRun(c, http.StatusOK, r)
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
func (s *Server) cleanup(c echo.Context) error {
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
func (s *Server) deleteRun(c echo.Context) error {
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
	s.notify.forget(r.RunRef)
	return c.NoContent(http.StatusNoContent)
}

// listAudit is GET /v1/audit: the tenant's ledger, oldest first, with
// filters and cursor paging (issue 5).
func (s *Server) listAudit(c echo.Context) error {
	q := store.AuditQuery{Tenant: CallerOf(c).Tenant, Limit: 100}
	qp := c.QueryParams()
	for k := range qp {
		switch k {
		case "event", "run_ref", "actor", "since", "until", "limit", "cursor", "order":
		default:
			return apierr.BadRequest("bad_query", "unknown query parameter %q; use event, run_ref, actor, since, until, limit, cursor or order", k)
		}
	}
	switch qp.Get("order") {
	case "", "oldest":
	case "newest":
		q.Newest = true // R-AUD-7
	default:
		return apierr.BadRequest("bad_query", "order %q: use oldest or newest", qp.Get("order"))
	}
	q.Event, q.RunRef, q.Actor, q.Cursor = qp.Get("event"), qp.Get("run_ref"), qp.Get("actor"), qp.Get("cursor")
	for _, b := range []struct {
		name string
		t    *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if v := qp.Get(b.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return apierr.BadRequest("bad_query", "%s %q is not an RFC 3339 instant", b.name, v)
			}
			*b.t = t
		}
	}
	if v := qp.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return apierr.BadRequest("bad_query", "limit must be an integer from 1 to 500")
		}
		q.Limit = n
	}
	items, next, err := s.o.Store.ListAudit(c.Request().Context(), q)
	if errors.Is(err, store.ErrBadCursor) {
		return apierr.BadRequest("bad_cursor", "the cursor is not one this coordinator issued; start again without it")
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apitypes.AuditList{Items: items, Next: next})
}
