package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// codexAPI serves the Codex routes (docs/rules/codex-supervision.md): the
// fleet catalog of native Codex threads, their transcript pages, continue
// and archive (catalog.go holds what the Claude Code catalog shares), and a
// run's pending branch.
type codexAPI struct{ catalog }

func (s *codexAPI) routes() []Route {
	const base = Base + "/catalog/codex/threads"
	return []Route{
		// R-CX-PERM-2, R-CX-PERM-6: listing and transcripts invoke nodes, so
		// they need write; continue and archive also need a person.
		{http.MethodGet, base, auth.PermRunWrite, s.codexThreads, query("search", "host", "limit", "cursor")},
		{http.MethodGet, base + "/:host/:thread/turns", auth.PermRunWrite, s.codexTurns, query("cursor")},
		{http.MethodPost, base + "/:host/:thread/continue", auth.PermRunWrite, s.codexContinue, nil},
		{http.MethodPost, base + "/:host/:thread/archive", auth.PermRunWrite, s.codexArchive, nil},
		// The pending branch's visible history (R-CX-FT-5) is transcript
		// text: write, like the transcript pages.
		{http.MethodGet, Base + "/runs/:ref/codex-branch", auth.PermRunWrite, s.codexBranch, nil},
	}
}

// codexHost reports whether the node advertises Codex supervision.
func codexHost(n store.Node) bool {
	var caps struct {
		CodexSupervision *proto.CodexSupervision `json:"codex_supervision"`
	}
	return json.Unmarshal(n.Capabilities, &caps) == nil && caps.CodexSupervision != nil
}

func (s *codexAPI) codexThreads(c echo.Context) error {
	q, err := s.query(c)
	if err != nil {
		return err
	}
	p := proto.CodexThreadsList{Search: q.search, Limit: q.limit, Cursor: q.cursor}
	fail := func(n store.Node, code, msg string) apitypes.CodexHost {
		return apitypes.CodexHost{Host: n.ID, Hostname: n.Hostname, Rows: []apitypes.CodexThread{}, Error: &apitypes.CodexHostError{Code: code, Message: msg}}
	}
	hosts, err := hostPages(c.Request().Context(), s.core, q, fail, func(ctx context.Context, n store.Node) (apitypes.CodexHost, error) {
		var h apitypes.CodexHost
		err := s.codexPayload(ctx, n.ID, wire.Header{Op: proto.OpCodexThreads}, p, maxCatalogPayload, &h, nil)
		h.Host, h.Hostname = n.ID, n.Hostname
		if h.Rows == nil {
			h.Rows = []apitypes.CodexThread{}
		}
		return h, err
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apitypes.CodexCatalog{Hosts: hosts})
}

// codexPayload calls an op answered with a CodexPayload and chunk frames,
// and decodes the payload into out. A refused page fills tooLarge.
func (s *codexAPI) codexPayload(ctx context.Context, node string, h wire.Header, params any, max int, out any, tooLarge **proto.CodexPageTooLargeInfo) error {
	var hdr proto.CodexPayload
	st, err := s.o.Fleet.Open(ctx, node, h, params, &hdr)
	if err != nil {
		return err
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { st.Close() })
	defer stop()
	if hdr.TooLarge != nil {
		if tooLarge == nil {
			return &wire.Error{Status: http.StatusBadGateway, Code: "bad_reply", Message: "the node refused a payload this route does not page"}
		}
		*tooLarge = hdr.TooLarge
		return nil
	}
	raw, err := proto.ReadChunks(st, hdr.Bytes, max)
	if err != nil {
		return &wire.Error{Status: http.StatusBadGateway, Code: "node_call_failed", Message: "node " + node + ": the reply did not arrive whole"}
	}
	if r, ok := out.(*json.RawMessage); ok {
		*r = raw
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &wire.Error{Status: http.StatusBadGateway, Code: "bad_reply", Message: "node " + node + ": unreadable reply"}
	}
	return nil
}

func (s *codexAPI) codexTurns(c echo.Context) error {
	n, thread, err := s.conversation(c)
	if err != nil {
		return err
	}
	cursor := c.QueryParam("cursor")
	if len(cursor) > maxCursor {
		return apierr.BadRequest("bad_cursor", "the cursor is too long")
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), codexCallTimeout)
	defer cancel()
	var page json.RawMessage
	var big *proto.CodexPageTooLargeInfo
	err = s.codexPayload(ctx, n.ID, wire.Header{Op: proto.OpCodexTurns}, proto.CodexTurnsList{ThreadID: thread, Cursor: cursor},
		proto.MaxCodexPage, &page, &big)
	if err != nil {
		return err
	}
	if big != nil {
		// R-CX-TRN-5/6: refused per request; the cursor sent stays valid
		// and the ones around the page let the client go on.
		return c.JSON(http.StatusUnprocessableEntity, apitypes.CodexPageTooLarge{
			Error: &apitypes.CodexHostError{Code: "page_too_large", Message: "this transcript page is over 20 MiB (" +
				strconv.FormatInt(big.Bytes, 10) + " bytes) and was not sent; show a placeholder and go on with next_cursor"},
			NextCursor: big.NextCursor, BackwardsCursor: big.BackwardsCursor})
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, page)
}

func (s *codexAPI) codexContinue(c echo.Context) error {
	var out proto.CodexContinued
	n, thread, err := s.continueCall(c, proto.OpCodexContinue, func(id, ref, tenant string) any {
		return proto.CodexThreadRef{ThreadID: id, RunRef: ref, Tenant: tenant}
	}, &out)
	if err != nil {
		return err
	}
	if !out.Created {
		return s.continued(c, http.StatusOK, out.Run, n, "") // R-CX-CONT-2: the existing run
	}
	// The branch's name says where it came from; it belongs to the
	// session (R-NAME-4).
	return s.continued(c, http.StatusCreated, out.Run, n, "codex "+thread)
}

func (s *codexAPI) codexArchive(c echo.Context) error {
	if err := refuseAgent(c); err != nil {
		return err
	}
	n, thread, err := s.conversation(c)
	if err != nil {
		return err
	}
	var req apitypes.CodexArchiveRequest
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	if !req.ConfirmNoOtherRunner {
		return apierr.BadRequest("confirmation_required", "archive needs {\"confirmNoOtherRunner\": true}: confirm that no other Codex client runs this thread") // R-CX-ARC-1
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), codexCallTimeout)
	defer cancel()
	var out apitypes.CodexArchived
	if err := s.o.Fleet.Call(ctx, n.ID, wire.Header{Op: proto.OpCodexArchive},
		proto.CodexThreadRef{ThreadID: thread, ConfirmNoOtherRunner: true}, &out); err != nil {
		return err
	}
	out.Host = n.ID
	return c.JSON(http.StatusOK, out)
}

func (s *codexAPI) codexBranch(c echo.Context) error {
	ctx := c.Request().Context()
	r, err := s.refRun(c)
	if err != nil {
		return err
	}
	if r.CodexBinding == nil {
		return apierr.NotFound("codex branch of run", r.RunRef)
	}
	var out apitypes.CodexBranch
	if err := s.call(ctx, r.NodeID, wire.Header{Op: proto.OpCodexBranch, RunRef: r.RunRef}, nil, &out); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
