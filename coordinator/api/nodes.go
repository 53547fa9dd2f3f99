package api

import (
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// fleetAPI serves the node registry (issue 2): list, read, revoke, forget.
type fleetAPI struct{ *core }

func (s *fleetAPI) routes() []Route {
	return []Route{
		// Reading the registry is run:read; revoking and forgetting are
		// run:admin (issue 2, issue 21; the seeds name no fleet
		// permission).
		{http.MethodGet, "/v1/nodes", auth.PermRunRead, s.listNodes, nil},
		{http.MethodGet, "/v1/nodes/:id", auth.PermRunRead, s.getNode, nil},
		{http.MethodPost, "/v1/nodes/:id/revoke", auth.PermRunAdmin, s.revokeNode, nil},
		{http.MethodDelete, "/v1/nodes/:id", auth.PermRunAdmin, s.forgetNode, nil},
	}
}

func (s *fleetAPI) view(n store.Node) apitypes.Node {
	l := s.o.Fleet.Link(n.ID)
	v := apitypes.Node{
		ID: n.ID, Tenant: n.Tenant, Hostname: n.Hostname, Labels: n.Labels,
		Connected: l.Connected, Online: l.Online && n.RevokedAt.IsZero(), Transport: l.Transport,
		ConnectedSince: tp(l.ConnectedSince), LastHeartbeat: tp(l.LastHeartbeat),
		AgentVersion: n.AgentVersion, EnrolledAt: n.EnrolledAt.UTC(), CertSerial: n.CertSerial,
		CertNotAfter: n.CertNotAfter.UTC(), RevokedAt: tp(n.RevokedAt),
	}
	if len(n.Capabilities) > 0 {
		v.Capabilities = n.Capabilities
	}
	if l.Connected && l.RTT > 0 {
		ms := math.Round(float64(l.RTT)/float64(time.Millisecond)*100) / 100
		v.RTTMillis = &ms
	}
	return v
}

func (s *fleetAPI) listNodes(c echo.Context) error {
	ns, err := s.o.Store.ListNodes(c.Request().Context(), CallerOf(c).Tenant)
	out := make([]apitypes.Node, 0, len(ns))
	for _, n := range ns {
		out = append(out, s.view(n))
	}
	return items(c, out, err)
}

func (s *fleetAPI) getNode(c echo.Context) error {
	n, err := s.nodeInTenant(c.Request().Context(), CallerOf(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.view(n))
}

func (s *fleetAPI) revokeNode(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	if _, err := s.nodeInTenant(ctx, CallerOf(c).Tenant, id); err != nil {
		return err
	}
	if err := noBody(c); err != nil {
		return err
	}
	before, _ := s.o.Store.GetNode(ctx, id)
	n, err := s.o.Fleet.Revoke(ctx, id)
	if err != nil {
		return err
	}
	if before.RevokedAt.IsZero() {
		s.auditCaller(c, apitypes.AuditNodeRevoked, apitypes.AuditTarget{NodeID: id}, nil) // R-AUD-2: once
	}
	return c.JSON(http.StatusOK, s.view(n))
}

// forgetNode removes a revoked node from the registry, with the profiles
// and workspaces registered on it (R-LIFE-7). A node that is not revoked
// is 409: revoke it first.
func (s *fleetAPI) forgetNode(c echo.Context) error {
	ctx := c.Request().Context()
	cl := CallerOf(c)
	id := c.Param("id")
	n, err := s.nodeInTenant(ctx, cl.Tenant, id)
	if err != nil {
		return err
	}
	if err := noBody(c); err != nil {
		return err
	}
	if n.RevokedAt.IsZero() {
		return apierr.New(http.StatusConflict, "node_not_revoked", "node %s is not revoked; revoke it first (olivares node revoke %s), then forget it", id, id)
	}
	e := apitypes.AuditEntry{At: s.o.Now().UTC(), Tenant: cl.Tenant, Actor: cl.Actor(), Event: apitypes.AuditNodeForgotten,
		Target: apitypes.AuditTarget{NodeID: id}}
	got, err := s.o.Store.ForgetNode(ctx, id, e)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apierr.NotFound("node", id)
	case errors.Is(err, store.ErrConflict):
		return apierr.New(http.StatusConflict, "node_not_revoked", "node %s is not revoked; revoke it first", id)
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, apitypes.NodeForgotten{ID: id, ProfilesRemoved: got.Profiles, WorkspacesRemoved: got.Workspaces})
}

func tp(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
