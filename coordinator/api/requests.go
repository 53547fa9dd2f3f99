package api

import (
	"encoding/json"
	"net/http"
	"regexp"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
)

// requestIDRE is the shape of a request id (req_ and 16 hex digits).
var requestIDRE = regexp.MustCompile(`^req_[0-9a-f]{16}$`)

// requestAPI serves the tool's requests of a run and their answers (R-REQ-2).
type requestAPI struct{ *core }

// listRequests is GET /runs/{ref}/requests (R-REQ-2): the pending requests
// and the last settled ones, from the run's node.
func (s *requestAPI) routes() []Route {
	return []Route{
		// People in the loop (R-REQ-2): the tool's requests and their
		// answers.
		{http.MethodGet, Base + "/runs/:ref/requests", auth.PermRunRead, s.listRequests, nil},
		{http.MethodPost, Base + "/runs/:ref/requests/:id", auth.PermRunWrite, s.answerRequest, nil},
	}
}

func (s *requestAPI) listRequests(c echo.Context) error {
	var out apitypes.RequestList
	if _, err := s.runCall(c, proto.OpRunRequests, nil, &out, callTimeout); err != nil {
		return err
	}
	if out.Items == nil {
		out.Items = []apitypes.RunRequest{}
	}
	return c.JSON(http.StatusOK, out)
}

// answerRequest is POST /runs/{ref}/requests/{id} (R-REQ-2): the first
// valid answer settles the request on the node, which writes it to the
// tool; the answer is audited with the actor, the request's kind and the
// decision, never the text (R-REQ-13).
func (s *requestAPI) answerRequest(c echo.Context) error {
	if err := refuseAgent(c); err != nil {
		return err
	}
	// Another tenant's run is 404 before anything of the request is
	// looked at (R-TEN-3).
	if _, err := s.refRun(c); err != nil {
		return err
	}
	id := c.Param("id")
	if !requestIDRE.MatchString(id) {
		return apierr.New(http.StatusNotFound, "request_not_found", "no request %q: request ids look like req_0123456789abcdef (olivares session requests REF lists them)", id)
	}
	var in apitypes.RequestAnswer
	if err := decodeStrict(c, maxJSONBody, &in); err != nil {
		return err
	}
	switch in.Decision {
	case apitypes.DecisionAllow, apitypes.DecisionDeny, apitypes.DecisionAnswer:
	default:
		return apierr.BadRequest("bad_answer", "decision %q: use allow, deny or answer", in.Decision)
	}
	actor := CallerOf(c).Actor()
	by := actor.PrincipalID
	if by == "" {
		by = actor.CredentialID
	}
	var out apitypes.RunRequest
	r, err := s.runCall(c, proto.OpRunAnswer, proto.RunAnswer{ID: id, By: by, Name: CallerOf(c).Principal.Name, RequestAnswer: in}, &out, callTimeout)
	if err != nil {
		return err
	}
	e := s.auditEntry(c, apitypes.AuditRunRequestAnswered, r.RunRef)
	e.Detail, _ = json.Marshal(map[string]string{"request_id": out.ID, "kind": out.Kind, "decision": out.Decision})
	if _, err := s.o.Store.AppendAudit(c.Request().Context(), e); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
