package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
)

// auditWindow is R-ACT-8 and R-MSG-10's window: a reader's reads of a run
// are audited once per window and event.
const auditWindow = 15 * time.Minute

// activityAPI serves a run's activity, its sub-agents and its messages (R-ACT, R-AGT, R-MSG), audited at each read.
type activityAPI struct{ *core }

func (s *activityAPI) routes() []Route {
	return []Route{
		{http.MethodGet, Base + "/runs/:ref/activity", auth.PermRunRead, s.activity, nil},
		{http.MethodGet, Base + "/runs/:ref/activity/agents/:agent", auth.PermRunRead, s.subAgent, nil},
		{http.MethodGet, Base + "/runs/:ref/messages", auth.PermRunRead, s.messages, messagesQuery},
	}
}

// auditRead writes a read's audit entry: once per reader, run and window
// (windowed), or at every read.
func (s *activityAPI) auditRead(c echo.Context, event, runRef string, windowed bool) error {
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
func (s *activityAPI) activity(c echo.Context) error {
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
func (s *activityAPI) subAgent(c echo.Context) error {
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
func (s *activityAPI) messages(c echo.Context) error {
	// The node checks the values (R-MSG-16).
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

// messagesQuery are the query parameters of GET /runs/{ref}/messages
// (R-MSG-16).
var messagesQuery = []string{"role", "q", "at", "order", "limit", "cursor", "id", "text"}
