package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Codex supervision routes (docs/rules/codex-supervision.md): the fleet catalog of
// native Codex threads, transcript pages, continue and archive. The
// coordinator never reads a node's files (R-CX-OWN-4): every answer comes
// from the node that holds the Codex home.
const (
	// codexHostTimeout is the per-host deadline of a catalog fan-out: a slow
	// or dead host becomes its own error, never the page's (R-CX-HOST-1).
	codexHostTimeout = 30 * time.Second
	// codexCallTimeout bounds turns, continue and archive.
	codexCallTimeout = 65 * time.Second
	// maxCatalogPayload bounds one host's catalog page on the wire.
	maxCatalogPayload = 16 << 20
	// maxSearch bounds the search text (bytes).
	maxSearch = 1024
	// maxCursor bounds a cursor given back (bytes).
	maxCursor = 64 << 10
)

// codexAPI serves the Codex thread catalog (R-CX).
type codexAPI struct{ *core }

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

// codexNode loads a host of the caller's tenant that opted in (404
// otherwise: another tenant's node, or one that never consented,
// R-CX-PERM-1).
func (s *codexAPI) codexNode(ctx context.Context, tenant, id string) (store.Node, error) {
	n, err := s.nodeInTenant(ctx, tenant, id)
	if err != nil {
		return store.Node{}, err
	}
	if !codexHost(n) || !n.RevokedAt.IsZero() {
		return store.Node{}, apierr.New(http.StatusNotFound, "not_found", "host %q has no Codex supervision (the node's own config must enable it)", id)
	}
	return n, nil
}

func threadParam(c echo.Context) (string, error) {
	id := c.Param("thread")
	if !apitypes.IsUUID(id) {
		return "", apierr.BadRequest("bad_thread_id", "thread id %q is not a Codex thread id", id)
	}
	return id, nil
}

func (s *codexAPI) codexThreads(c echo.Context) error {
	ctx := c.Request().Context()
	tenant := CallerOf(c).Tenant
	qp := c.QueryParams()
	for k, v := range qp {
		if len(v) > 1 {
			return apierr.BadRequest("bad_query", "query parameter %q given %d times", k, len(v))
		}
	}
	var nodes []store.Node
	if host := qp.Get("host"); host != "" {
		n, err := s.codexNode(ctx, tenant, host)
		if err != nil {
			return err
		}
		nodes = []store.Node{n}
	}
	p := proto.CodexThreadsList{Search: qp.Get("search"), Limit: 50, Cursor: qp.Get("cursor")}
	if v := qp.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return apierr.BadRequest("bad_limit", "limit must be an integer from 1 to 100 (rows per host)")
		}
		p.Limit = n
	}
	switch {
	case p.Cursor != "" && qp.Get("host") == "":
		// Cursors are host-local (Q-48, R-CX-CLI-6).
		return apierr.BadRequest("cursor_needs_host", "a cursor continues one host's scan; give that host with host=")
	case len(p.Cursor) > maxCursor:
		return apierr.BadRequest("bad_cursor", "the cursor is too long")
	case len(p.Search) > maxSearch || !utf8.ValidString(p.Search):
		return apierr.BadRequest("bad_search", "search must be UTF-8 text of at most %d bytes", maxSearch)
	}
	if nodes == nil {
		all, err := s.o.Store.ListNodes(ctx, tenant)
		if err != nil {
			return err
		}
		for _, n := range all {
			if codexHost(n) && n.RevokedAt.IsZero() {
				nodes = append(nodes, n)
			}
		}
	}
	sort.Slice(nodes, func(i, j int) bool {
		if nodes[i].Hostname != nodes[j].Hostname {
			return nodes[i].Hostname < nodes[j].Hostname
		}
		return nodes[i].ID < nodes[j].ID
	})
	out := apitypes.CodexCatalog{Hosts: make([]apitypes.CodexHost, len(nodes))}
	bad := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out.Hosts[i], bad[i] = s.codexHostPage(ctx, n, p)
		}()
	}
	wg.Wait()
	for _, err := range bad {
		if err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, out)
}

// codexHostPage is one host's result; a failure stays in it, with no rows
// and no invented thread state (R-CX-HOST-1/2). Only a request the host
// found malformed (a forged cursor: 400) is the request's error.
func (s *codexAPI) codexHostPage(ctx context.Context, n store.Node, p proto.CodexThreadsList) (apitypes.CodexHost, error) {
	fail := func(code, msg string) apitypes.CodexHost {
		return apitypes.CodexHost{Host: n.ID, Hostname: n.Hostname, Rows: []apitypes.CodexThread{},
			Error: &apitypes.CodexHostError{Code: code, Message: msg}}
	}
	if !s.o.Fleet.Link(n.ID).Connected {
		return fail("node_unreachable", "the node has no live tunnel to the coordinator"), nil
	}
	ctx, cancel := context.WithTimeout(ctx, codexHostTimeout)
	defer cancel()
	var h apitypes.CodexHost
	if err := s.codexPayload(ctx, n.ID, wire.Header{Op: proto.OpCodexThreads}, p, maxCatalogPayload, &h, nil); err != nil {
		var we *wire.Error
		if errors.As(err, &we) {
			if we.Status == http.StatusBadRequest {
				return apitypes.CodexHost{}, we
			}
			ae := nodeError(we)
			return fail(ae.Code, ae.Message), nil
		}
		if ctx.Err() != nil {
			return fail("host_timeout", "the host did not answer within "+codexHostTimeout.String()), nil
		}
		return fail("host_call_failed", "the call to the host failed"), nil
	}
	h.Host, h.Hostname = n.ID, n.Hostname
	if h.Rows == nil {
		h.Rows = []apitypes.CodexThread{}
	}
	return h, nil
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
	ctx := c.Request().Context()
	n, err := s.codexNode(ctx, CallerOf(c).Tenant, c.Param("host"))
	if err != nil {
		return err
	}
	thread, err := threadParam(c)
	if err != nil {
		return err
	}
	cursor := c.QueryParam("cursor")
	if len(cursor) > maxCursor {
		return apierr.BadRequest("bad_cursor", "the cursor is too long")
	}
	ctx, cancel := context.WithTimeout(ctx, codexCallTimeout)
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
	if err := refuseAgent(c); err != nil {
		return err
	}
	ctx := c.Request().Context()
	tenant := CallerOf(c).Tenant
	n, err := s.codexNode(ctx, tenant, c.Param("host"))
	if err != nil {
		return err
	}
	thread, err := threadParam(c)
	if err != nil {
		return err
	}
	var body struct{}
	if err := decodeStrict(c, maxJSONBody, &body); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, codexCallTimeout)
	defer cancel()
	var out proto.CodexContinued
	ref := auth.NewID("run_")
	if err := s.o.Fleet.Call(ctx, n.ID, wire.Header{Op: proto.OpCodexContinue, RunRef: ref},
		proto.CodexThreadRef{ThreadID: thread, RunRef: ref, Tenant: tenant}, &out); err != nil {
		return err
	}
	r := out.Run
	r.NodeID, r.Tenant = n.ID, tenant
	status := http.StatusOK // R-CX-CONT-2: the existing run
	if out.Created {
		status = http.StatusCreated
		// The branch's name says where it came from; it belongs to the
		// session (R-NAME-4).
		if _, err := s.o.Store.UpdateRunMeta(ctx, r.RunRef, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
			m.Name = "codex " + thread
			return nil, nil
		}); err != nil {
			return err
		}
	}
	return s.respondRun(c, status, r)
}

func (s *codexAPI) codexArchive(c echo.Context) error {
	if err := refuseAgent(c); err != nil {
		return err
	}
	ctx := c.Request().Context()
	n, err := s.codexNode(ctx, CallerOf(c).Tenant, c.Param("host"))
	if err != nil {
		return err
	}
	thread, err := threadParam(c)
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
	ctx, cancel := context.WithTimeout(ctx, codexCallTimeout)
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
