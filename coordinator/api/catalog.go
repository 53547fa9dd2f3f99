package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/wire"
)

// The fleet catalogs of a tool's stored conversations: Codex threads
// (codex.go) and Claude Code sessions (claude.go). Both list the hosts
// that opted in, a page per host fanned out in parallel, read a
// conversation's transcript on its host and continue it there; catalog is
// that shared part, parameterised by the tool. The coordinator never reads
// a node's files (R-CX-OWN-4): every answer comes from the node that holds
// the conversation.
const (
	// codexHostTimeout is the per-host deadline of a catalog fan-out: a slow
	// or dead host becomes its own error, never the page's (R-CX-HOST-1).
	codexHostTimeout = 30 * time.Second
	// codexCallTimeout bounds transcripts, continue and archive.
	codexCallTimeout = 65 * time.Second
	// maxCatalogPayload bounds one host's catalog page on the wire.
	maxCatalogPayload = 16 << 20
	// maxSearch bounds the search text (bytes).
	maxSearch = 1024
	// maxCursor bounds a cursor given back (bytes).
	maxCursor = 64 << 10
)

// catalog is one tool's catalog: what differs between the tools is here.
type catalog struct {
	*core
	// tool names the tool in messages ("Codex", "Claude Code").
	tool string
	// param is the path parameter of a conversation's id ("thread",
	// "session"); a malformed id is 400 bad_<param>_id.
	param string
	// supervises reports whether a node advertises the tool's supervision.
	supervises func(store.Node) bool
}

// host loads a host of the caller's tenant that opted in and is not
// revoked (404 otherwise: another tenant's node, or one that never
// consented, R-CX-PERM-1, R-CL-PERM-1).
func (s *catalog) host(ctx context.Context, tenant, id string) (store.Node, error) {
	n, err := s.nodeInTenant(ctx, tenant, id)
	if err != nil {
		return store.Node{}, err
	}
	if !s.supervises(n) || !n.RevokedAt.IsZero() {
		return store.Node{}, apierr.New(http.StatusNotFound, "not_found", "host %q has no %s supervision (the node's own config must enable it)", id, s.tool)
	}
	return n, nil
}

// conversation is the route's host and conversation id.
func (s *catalog) conversation(c echo.Context) (store.Node, string, error) {
	n, err := s.host(c.Request().Context(), CallerOf(c).Tenant, c.Param("host"))
	if err != nil {
		return store.Node{}, "", err
	}
	id := c.Param(s.param)
	if !apitypes.IsUUID(id) {
		return store.Node{}, "", apierr.BadRequest("bad_"+s.param+"_id", "%s id %q is not a %s %s id", s.param, id, s.tool, s.param)
	}
	return n, id, nil
}

// catalogQuery is a catalog page's query: the hosts to ask (one, or every
// host that opted in, by hostname) and what to ask each.
type catalogQuery struct {
	hosts          []store.Node
	search, cursor string
	limit          int
}

func (s *catalog) query(c echo.Context) (catalogQuery, error) {
	ctx := c.Request().Context()
	tenant := CallerOf(c).Tenant
	qp := c.QueryParams()
	for k, v := range qp {
		if len(v) > 1 {
			return catalogQuery{}, apierr.BadRequest("bad_query", "query parameter %q given %d times", k, len(v))
		}
	}
	q := catalogQuery{search: qp.Get("search"), cursor: qp.Get("cursor"), limit: 50}
	if host := qp.Get("host"); host != "" {
		n, err := s.host(ctx, tenant, host)
		if err != nil {
			return catalogQuery{}, err
		}
		q.hosts = []store.Node{n}
	}
	if v := qp.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return catalogQuery{}, apierr.BadRequest("bad_limit", "limit must be an integer from 1 to 100 (rows per host)")
		}
		q.limit = n
	}
	switch {
	case q.cursor != "" && qp.Get("host") == "":
		// Cursors are host-local (Q-48, R-CX-CLI-6).
		return catalogQuery{}, apierr.BadRequest("cursor_needs_host", "a cursor continues one host's scan; give that host with host=")
	case len(q.cursor) > maxCursor:
		return catalogQuery{}, apierr.BadRequest("bad_cursor", "the cursor is too long")
	case len(q.search) > maxSearch || !utf8.ValidString(q.search):
		return catalogQuery{}, apierr.BadRequest("bad_search", "search must be UTF-8 text of at most %d bytes", maxSearch)
	}
	if q.hosts == nil {
		all, err := s.o.Store.ListNodes(ctx, tenant)
		if err != nil {
			return catalogQuery{}, err
		}
		for _, n := range all {
			if s.supervises(n) && n.RevokedAt.IsZero() {
				q.hosts = append(q.hosts, n)
			}
		}
	}
	slices.SortFunc(q.hosts, func(a, b store.Node) int {
		if c := strings.Compare(a.Hostname, b.Hostname); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return q, nil
}

// hostPages asks every host of q in parallel, each within
// codexHostTimeout. A host's failure stays in its own page, made by fail,
// with no rows and no invented state (R-CX-HOST-1/2, R-CL-CAT-2); only a
// request a host found malformed (a forged cursor: 400) fails the whole
// answer.
func hostPages[H any](ctx context.Context, s *core, q catalogQuery, fail func(n store.Node, code, msg string) H, ask func(ctx context.Context, n store.Node) (H, error)) ([]H, error) {
	out := make([]H, len(q.hosts))
	bad := make([]error, len(q.hosts))
	var wg sync.WaitGroup
	for i, n := range q.hosts {
		wg.Go(func() {
			if !s.o.Fleet.Link(n.ID).Connected {
				out[i] = fail(n, "node_unreachable", "the node has no live tunnel to the coordinator")
				return
			}
			ctx, cancel := context.WithTimeout(ctx, codexHostTimeout)
			defer cancel()
			h, err := ask(ctx, n)
			var we *wire.Error
			switch {
			case err == nil:
				out[i] = h
			case errors.As(err, &we) && we.Status == http.StatusBadRequest:
				bad[i] = we
			case errors.As(err, &we):
				ae := nodeError(we)
				out[i] = fail(n, ae.Code, ae.Message)
			case ctx.Err() != nil:
				out[i] = fail(n, "host_timeout", "the host did not answer within "+codexHostTimeout.String())
			default:
				out[i] = fail(n, "host_call_failed", "the call to the host failed")
			}
		})
	}
	wg.Wait()
	return out, errors.Join(bad...)
}

// continueCall asks the conversation's host to continue it in a new
// supervised run, for a person (R-CX-PERM-6, R-CL-PERM-2), with an empty
// body; params makes the op's parameters from the conversation id, the
// new run's ref and the tenant.
func (s *catalog) continueCall(c echo.Context, op string, params func(id, ref, tenant string) any, out any) (store.Node, string, error) {
	if err := refuseAgent(c); err != nil {
		return store.Node{}, "", err
	}
	n, id, err := s.conversation(c)
	if err != nil {
		return store.Node{}, "", err
	}
	var body struct{}
	if err := decodeStrict(c, maxJSONBody, &body); err != nil {
		return store.Node{}, "", err
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), codexCallTimeout)
	defer cancel()
	ref, tenant := auth.NewID("run_"), CallerOf(c).Tenant
	return n, id, s.o.Fleet.Call(ctx, n.ID, wire.Header{Op: op, RunRef: ref}, params(id, ref, tenant), out)
}

// continued answers the run a continue made (or found), named after the
// conversation when name is not "" (R-NAME-4).
func (s *catalog) continued(c echo.Context, status int, r apitypes.Run, n store.Node, name string) error {
	r.NodeID, r.Tenant = n.ID, CallerOf(c).Tenant
	if name != "" {
		if _, err := s.o.Store.UpdateRunMeta(c.Request().Context(), r.RunRef, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
			m.Name = name
			return nil, nil
		}); err != nil {
			return err
		}
	}
	return s.respondRun(c, status, r)
}
