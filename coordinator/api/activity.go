package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
)

// auditWindow is R-ACT-8 and R-MSG-10's window: a reader's reads of a run
// are audited once per window and event.
const auditWindow = 15 * time.Minute

func (s *Server) activityRoutes() []Route {
	return []Route{
		{http.MethodGet, Base + "/runs/:ref/activity", auth.PermRunRead, s.activity},
		{http.MethodGet, Base + "/runs/:ref/activity/agents/:agent", auth.PermRunRead, s.subAgent},
		{http.MethodGet, Base + "/runs/:ref/messages", auth.PermRunRead, s.messages},
	}
}

// auditRead writes a read's audit entry: once per reader, run and window
// (windowed), or at every read.
func (s *Server) auditRead(c echo.Context, event, runRef string, windowed bool) error {
	e := s.auditEntry(c, event, runRef)
	if windowed {
		_, err := s.o.Store.AppendAuditWindowed(c.Request().Context(), e, auditWindow)
		return err
	}
	_, err := s.o.Store.AppendAudit(c.Request().Context(), e)
	return err
}

// activity is GET /runs/{ref}/activity (R-ACT-1): read on the node from the
// tool's own record (R-ACT-2), audited once per reader and run every 15
// minutes (R-ACT-8).
func (s *Server) activity(c echo.Context) error {
	for k := range c.QueryParams() {
		return badQuery(k)
	}
	var out json.RawMessage
	r, err := s.runCall(c, proto.OpRunActivity, nil, &out, callTimeout)
	if err != nil {
		return err
	}
	if err := s.auditRead(c, apitypes.AuditRunActivity, r.RunRef, true); err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, out)
}

// subAgent is GET /runs/{ref}/activity/agents/{agent} (R-AGT-1), audited at
// every read (R-AGT-2).
func (s *Server) subAgent(c echo.Context) error {
	for k := range c.QueryParams() {
		return badQuery(k)
	}
	var out json.RawMessage
	r, err := s.runCall(c, proto.OpRunSubAgent, proto.RunSubAgent{Agent: c.Param("agent")}, &out, callTimeout)
	if err != nil {
		return err
	}
	if err := s.auditRead(c, apitypes.AuditRunActivityAgent, r.RunRef, false); err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, out)
}

// messages is GET /runs/{ref}/messages (R-MSG-1): the node checks the query
// (R-MSG-16) and reads the transcript; a read with text (text=1 or an id
// read) is audited as sessions.run.messages.text, any other as
// sessions.run.messages, each once per reader, run and window (R-MSG-10,
// R-MSG-17).
func (s *Server) messages(c echo.Context) error {
	// Unknown parameters are refused here (R-API-10); the node checks the
	// values (R-MSG-16).
	if err := onlyParams(c, messagesParams...); err != nil {
		return err
	}
	var out json.RawMessage
	r, err := s.runCall(c, proto.OpRunMessages, proto.RunMessages{Query: c.Request().URL.RawQuery}, &out, callTimeout)
	if err != nil {
		return err
	}
	qp := c.QueryParams()
	event := apitypes.AuditRunMessages
	if qp.Get("text") == "1" || qp.Get("id") != "" {
		event = apitypes.AuditRunMessagesText
	}
	if err := s.auditRead(c, event, r.RunRef, true); err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, out)
}

// messagesParams are the query parameters of GET /runs/{ref}/messages
// (R-MSG-16).
var messagesParams = []string{"role", "q", "at", "order", "limit", "cursor", "id", "text"}

// onlyParams refuses a query parameter not in known (R-API-10).
func onlyParams(c echo.Context, known ...string) error {
	for k := range c.QueryParams() {
		if !slices.Contains(known, k) {
			return apierr.BadRequest("bad_query", "unknown query parameter %q; this route takes %s", k, strings.Join(known, ", "))
		}
	}
	return nil
}

func badQuery(k string) error {
	return apierr.BadRequest("bad_query", "unknown query parameter %q", k)
}
