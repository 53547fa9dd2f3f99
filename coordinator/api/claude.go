package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Claude Code supervision routes (docs/rules/claude-supervision.md), in the
// shape of the Codex ones: the fleet catalog of stored Claude Code
// conversations, their transcript pages, and continue. Every answer comes
// from the node that holds the conversation.

// claudeAPI serves the Claude Code session catalog (R-CL).
type claudeAPI struct{ *core }

func (s *claudeAPI) routes() []Route {
	const base = Base + "/catalog/claude/sessions"
	return []Route{
		// R-CL-PERM-2: listing and transcripts invoke nodes and show
		// transcript text, so they need write; continue also needs a
		// person.
		{http.MethodGet, base, auth.PermRunWrite, s.claudeSessions, query("search", "host", "limit", "cursor")},
		{http.MethodGet, base + "/:host/:session/messages", auth.PermRunWrite, s.claudeMessages, messagesQuery},
		{http.MethodPost, base + "/:host/:session/continue", auth.PermRunWrite, s.claudeContinue, nil},
	}
}

// claudeHost reports whether the node advertises Claude Code supervision
// and is not revoked.
func claudeHost(n store.Node) bool {
	var caps struct {
		ClaudeSupervision *proto.ClaudeSupervision `json:"claude_supervision"`
	}
	return n.RevokedAt.IsZero() && json.Unmarshal(n.Capabilities, &caps) == nil && caps.ClaudeSupervision != nil
}

// claudeNode loads a host of the caller's tenant that opted in (404
// otherwise, R-CL-PERM-1).
func (s *claudeAPI) claudeNode(ctx context.Context, tenant, id string) (store.Node, error) {
	n, err := s.nodeInTenant(ctx, tenant, id)
	if err != nil {
		return store.Node{}, err
	}
	if !claudeHost(n) {
		return store.Node{}, apierr.New(http.StatusNotFound, "not_found", "host %q has no Claude Code supervision (the node's own config must enable it)", id)
	}
	return n, nil
}

func sessionParam(c echo.Context) (string, error) {
	id := c.Param("session")
	if !apitypes.IsUUID(id) {
		return "", apierr.BadRequest("bad_session_id", "session id %q is not a Claude Code session id", id)
	}
	return id, nil
}

func (s *claudeAPI) claudeSessions(c echo.Context) error {
	ctx := c.Request().Context()
	tenant := CallerOf(c).Tenant
	qp := c.QueryParams()
	for k, v := range qp {
		if len(v) > 1 {
			return apierr.BadRequest("bad_query", "query parameter %q given %d times", k, len(v))
		}
	}
	p := proto.ClaudeSessionsList{Search: qp.Get("search"), Limit: 50, Cursor: qp.Get("cursor")}
	if v := qp.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return apierr.BadRequest("bad_limit", "limit must be an integer from 1 to 100 (rows per host)")
		}
		p.Limit = n
	}
	switch {
	case p.Cursor != "" && qp.Get("host") == "":
		return apierr.BadRequest("cursor_needs_host", "a cursor continues one host's list; give that host with host=")
	case len(p.Cursor) > maxCursor:
		return apierr.BadRequest("bad_cursor", "the cursor is too long")
	case len(p.Search) > maxSearch || !utf8.ValidString(p.Search):
		return apierr.BadRequest("bad_search", "search must be UTF-8 text of at most %d bytes", maxSearch)
	}
	var nodes []store.Node
	if host := qp.Get("host"); host != "" {
		n, err := s.claudeNode(ctx, tenant, host)
		if err != nil {
			return err
		}
		nodes = []store.Node{n}
	} else {
		all, err := s.o.Store.ListNodes(ctx, tenant)
		if err != nil {
			return err
		}
		for _, n := range all {
			if claudeHost(n) {
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
	out := apitypes.ClaudeCatalog{Hosts: make([]apitypes.ClaudeHost, len(nodes))}
	bad := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out.Hosts[i], bad[i] = s.claudeHostPage(ctx, n, p)
		}()
	}
	wg.Wait()
	if err := errors.Join(bad...); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// claudeHostPage is one host's result; a failure stays in it, with no rows
// (R-CL-CAT-2). Only a request the host found malformed (400) fails the
// page.
func (s *claudeAPI) claudeHostPage(ctx context.Context, n store.Node, p proto.ClaudeSessionsList) (apitypes.ClaudeHost, error) {
	fail := func(code, msg string) apitypes.ClaudeHost {
		return apitypes.ClaudeHost{Host: n.ID, Hostname: n.Hostname, Rows: []apitypes.ClaudeSession{},
			Error: &apitypes.CodexHostError{Code: code, Message: msg}}
	}
	if !s.o.Fleet.Link(n.ID).Connected {
		return fail("node_unreachable", "the node has no live tunnel to the coordinator"), nil
	}
	ctx, cancel := context.WithTimeout(ctx, codexHostTimeout)
	defer cancel()
	var h apitypes.ClaudeHost
	if err := s.o.Fleet.Call(ctx, n.ID, wire.Header{Op: proto.OpClaudeSessions}, p, &h); err != nil {
		var we *wire.Error
		switch {
		case errors.As(err, &we) && we.Status == http.StatusBadRequest:
			return apitypes.ClaudeHost{}, we
		case errors.As(err, &we):
			ae := nodeError(we)
			return fail(ae.Code, ae.Message), nil
		case ctx.Err() != nil:
			return fail("host_timeout", "the host did not answer within "+codexHostTimeout.String()), nil
		}
		return fail("host_call_failed", "the call to the host failed"), nil
	}
	h.Host, h.Hostname = n.ID, n.Hostname
	if h.Rows == nil {
		h.Rows = []apitypes.ClaudeSession{}
	}
	return h, nil
}

func (s *claudeAPI) claudeMessages(c echo.Context) error {
	ctx := c.Request().Context()
	n, err := s.claudeNode(ctx, CallerOf(c).Tenant, c.Param("host"))
	if err != nil {
		return err
	}
	id, err := sessionParam(c)
	if err != nil {
		return err
	}
	var out json.RawMessage
	if err := s.call(ctx, n.ID, wire.Header{Op: proto.OpClaudeMessages},
		proto.ClaudeSessionRef{SessionID: id, Query: c.Request().URL.RawQuery}, &out); err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, out)
}

func (s *claudeAPI) claudeContinue(c echo.Context) error {
	if err := refuseAgent(c); err != nil {
		return err
	}
	ctx := c.Request().Context()
	tenant := CallerOf(c).Tenant
	n, err := s.claudeNode(ctx, tenant, c.Param("host"))
	if err != nil {
		return err
	}
	id, err := sessionParam(c)
	if err != nil {
		return err
	}
	var body struct{}
	if err := decodeStrict(c, maxJSONBody, &body); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, codexCallTimeout)
	defer cancel()
	var out proto.ClaudeContinued
	ref := auth.NewID("run_")
	if err := s.o.Fleet.Call(ctx, n.ID, wire.Header{Op: proto.OpClaudeContinue, RunRef: ref},
		proto.ClaudeSessionRef{SessionID: id, RunRef: ref, Tenant: tenant}, &out); err != nil {
		return err
	}
	r := out.Run
	r.NodeID, r.Tenant = n.ID, tenant
	// The run is named after the conversation it continues (R-NAME-4).
	name := "claude " + id
	if out.Title != "" {
		name = "claude: " + out.Title
	}
	if _, err := s.o.Store.UpdateRunMeta(ctx, r.RunRef, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
		m.Name = name
		return nil, nil
	}); err != nil {
		return err
	}
	return s.respondRun(c, http.StatusCreated, r)
}
