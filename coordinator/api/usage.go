package api

import (
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// usageAPI serves the usage report (R-USE).
type usageAPI struct{ *core }

// usageRoutes: what the fleet spent (docs/rules/usage.md). Reading it is
// run:read, like the runs it sums.
func (s *usageAPI) routes() []Route {
	return []Route{
		{http.MethodGet, Base + "/usage", auth.PermRunRead, s.usage, query("group_by", "from", "to")},
	}
}

// usageGroups are the keys GET /usage groups by (R-USE-7).
var usageGroups = map[string]func(apitypes.UsageTurn) string{
	"profile": func(u apitypes.UsageTurn) string { return u.ProfileRef },
	"node":    func(u apitypes.UsageTurn) string { return u.NodeID },
	"tool":    func(u apitypes.UsageTurn) string { return u.Tool },
	"model":   func(u apitypes.UsageTurn) string { return u.Model },
	"day":     func(u apitypes.UsageTurn) string { return u.At.UTC().Format(time.DateOnly) },
}

// usageTime reads a from/to bound: RFC 3339, or a UTC day YYYY-MM-DD
// meaning its midnight (R-USE-7).
func usageTime(name, v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, apierr.BadRequest("bad_query", "%s %q: give an RFC 3339 time (2026-12-01T00:00:00Z) or a day (2026-12-01)", name, v)
}

func (s *usageAPI) usage(c echo.Context) error {
	ctx := c.Request().Context()
	tenant := CallerOf(c).Tenant
	qp := c.QueryParams()
	for k, v := range qp {
		if len(v) > 1 {
			return apierr.BadRequest("bad_query", "give %s once", k)
		}
	}
	rep := apitypes.UsageReport{GroupBy: qp.Get("group_by"), Groups: []apitypes.UsageGroup{}}
	if rep.GroupBy == "" {
		rep.GroupBy = "profile"
	}
	key, ok := usageGroups[rep.GroupBy]
	if !ok {
		names := make([]string, 0, len(usageGroups))
		for k := range usageGroups {
			names = append(names, k)
		}
		sort.Strings(names)
		return apierr.BadRequest("bad_query", "group_by %q: use one of %s", rep.GroupBy, strings.Join(names, ", "))
	}
	q := store.UsageQuery{Tenant: tenant}
	if v := qp.Get("from"); v != "" {
		t, err := usageTime("from", v)
		if err != nil {
			return err
		}
		q.From, rep.From = t, &t
	}
	if v := qp.Get("to"); v != "" {
		t, err := usageTime("to", v)
		if err != nil {
			return err
		}
		q.To, rep.To = t, &t
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return apierr.BadRequest("bad_query", "from must be before to")
	}
	rows, err := s.o.Store.ListUsage(ctx, q)
	if err != nil {
		return err
	}
	groups := map[string]*apitypes.UsageGroup{}
	for _, u := range rows {
		k := key(u)
		g := groups[k]
		if g == nil {
			g = &apitypes.UsageGroup{Key: k}
			groups[k] = g
		}
		g.Add(u)
		rep.Total.Add(u)
	}
	for _, g := range groups {
		rep.Groups = append(rep.Groups, *g)
	}
	sort.Slice(rep.Groups, func(i, j int) bool { return rep.Groups[i].Key < rep.Groups[j].Key })
	latest, err := s.o.Store.LatestAccountUsage(ctx, tenant)
	if err != nil {
		return err
	}
	rep.Accounts = make([]apitypes.UsageAccount, 0, len(latest))
	for _, u := range latest {
		a := apitypes.UsageAccount{ProfileRef: u.ProfileRef, Tool: u.Tool, At: u.At, RateLimits: u.RateLimits, Limit: u.Limit}
		if a.RateLimits == nil {
			a.RateLimits = []apitypes.RateWindow{}
		}
		rep.Accounts = append(rep.Accounts, a)
	}
	return c.JSON(http.StatusOK, rep)
}
