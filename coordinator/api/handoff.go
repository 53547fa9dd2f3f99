package api

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
)

// handoffTimeout bounds a handoff: a stop with its grace, the read, the
// launch and up to 30 s for the first turn's acknowledgement.
const handoffTimeout = 5 * time.Minute

// handoffAPI hands a run over to another tool (R-HO); a handoff cancels the run's continue.
type handoffAPI struct {
	*core
	continues *continueAPI
}

func (s *handoffAPI) routes() []Route {
	return []Route{
		{http.MethodGet, Base + "/runs/:ref/handoff", auth.PermRunRead, s.handoffPreview, nil},
		{http.MethodPost, Base + "/runs/:ref/handoff", auth.PermRunWrite, s.idempotent(s.handoff), nil},
	}
}

// handoffPreview is GET /runs/{ref}/handoff (R-HOP-1): read on the node,
// every read audited (R-HOF-7).
func (s *handoffAPI) handoffPreview(c echo.Context) error {
	var out apitypes.HandoffPreview
	r, err := s.runCall(c, proto.OpHandoffPreview, nil, &out, handoffTimeout)
	if err != nil {
		return err
	}
	e := s.auditEntry(c, apitypes.AuditRunHandoffPreview, r.RunRef)
	e.Detail = mustJSON(map[string]any{"turns": out.Turns, "transcript_bytes": out.TranscriptBytes})
	if _, err := s.o.Store.AppendAudit(c.Request().Context(), e); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// handoff is POST /runs/{ref}/handoff (R-HOF-*): the target profile is
// checked here first (R-HOF-18), then the node stops, reads, writes the
// transcript, launches and sends the first turn.
func (s *handoffAPI) handoff(c echo.Context) error {
	src, err := s.refRun(c)
	if err != nil {
		return err
	}
	var req apitypes.HandoffRequest
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	cl := CallerOf(c)
	out, err := s.handoffRun(c.Request().Context(), cl.Tenant, cl.Actor(), src, req, newRunRef(c))
	if err != nil {
		return err
	}
	views, err := s.runViews(c, out.Run)
	if err != nil {
		return err
	}
	out.Run = views[0]
	status := http.StatusCreated
	if out.SummaryState == "waits_for_approval" {
		status = http.StatusAccepted
	}
	return c.JSON(status, out)
}

// handoffRun hands run src of tenant off as new run newRef, audited as
// actor: the route's and an on_limit handoff's one path (R-ONL-3).
func (s *handoffAPI) handoffRun(ctx context.Context, tenant string, actor apitypes.AuditActor, src apitypes.Run, req apitypes.HandoffRequest, newRef string) (apitypes.HandoffResponse, error) {
	var out apitypes.HandoffResponse
	if req.ProviderProfileRef == "" {
		return out, apierr.BadRequest("profile_required", "provider_profile_ref is required: the profile to continue in")
	}
	name, err := checkName(req.Name)
	if err != nil {
		return out, err
	}
	p, err := s.profileInTenant(ctx, tenant, req.ProviderProfileRef)
	if err != nil {
		return out, err
	}
	if p.NodeID != src.NodeID {
		return out, apierr.New(http.StatusConflict, "profile_other_node", "profile %s is on node %s and run %s on node %s; the new run works in the same workspace, so it needs a profile of that node", p.Ref, p.NodeID, src.RunRef, src.NodeID)
	}
	params := proto.RunHandoff{NewRunRef: newRef, Tenant: tenant, ProfileRef: p.Ref, Summary: req.Summary}
	// R-ACCT-7: the new run's profile signs in by its API key, if it has
	// one, as at a launch.
	key, err := s.withProfileKey(ctx, p, nil)
	if err != nil {
		return out, err
	}
	if params.Grants, err = s.openGrants(ctx, tenant, key); err != nil {
		return out, err
	}
	if src.WorkspaceRef != "" {
		if params.Gate, err = s.gate(ctx, src.WorkspaceRef); err != nil {
			return out, err
		}
		if src.WorktreeBranch != "" {
			w, err := s.o.Store.GetWorkspace(ctx, src.WorkspaceRef)
			if err != nil {
				return out, err
			}
			st, err := s.o.Store.GetWorkspaceSettings(ctx, src.WorkspaceRef)
			if err != nil {
				return out, err
			}
			// R-HOF-16, R-SETUP-11: the same approval, no skip.
			params.SetupRefusal = setupRefusal(w, st, false)
		}
	}
	if err := s.runOp(ctx, src, proto.OpHandoff, params, &out, handoffTimeout); err != nil {
		return out, err
	}
	out.Run.NodeID, out.Run.Tenant = src.NodeID, tenant
	s.Audit(ctx, tenant, actor, apitypes.AuditRunStarted, apitypes.AuditTarget{RunRef: out.Run.RunRef, NodeID: out.Run.NodeID},
		map[string]any{"profile_ref": p.Ref, "workspace_ref": src.WorkspaceRef, "handoff_of": src.RunRef})
	// R-CONT-4: the work went on in another run; the source does not
	// continue by itself any more.
	s.continues.CancelContinueFor(ctx, src.RunRef, cancelHandedOff, actor)
	if name != "" {
		if _, err := s.o.Store.UpdateRunMeta(ctx, out.Run.RunRef, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
			m.Name = name
			return nil, nil
		}); err != nil {
			return out, err
		}
	}
	return out, nil
}
