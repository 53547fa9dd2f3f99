package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// auditAPI serves the audit ledger to administrators (issue 5).
type auditAPI struct{ *core }

func (s *auditAPI) routes() []Route {
	return []Route{
		{http.MethodGet, "/v1/audit", auth.PermRunAdmin, s.listAudit, query("event", "run_ref", "actor", "since", "until", "limit", "cursor", "order")},
	}
}

// listAudit is GET /v1/audit: the tenant's ledger, oldest first, with
// filters and cursor paging (issue 5); order=newest reverses it (R-AUD-7).
func (s *auditAPI) listAudit(c echo.Context) error {
	q := store.AuditQuery{Tenant: CallerOf(c).Tenant, Limit: 100}
	qp := c.QueryParams()
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
