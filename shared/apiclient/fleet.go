package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Whoami is GET /v1/whoami: the caller in its tenant.
func (c *Client) Whoami(ctx context.Context) (apitypes.Whoami, error) {
	var w apitypes.Whoami
	return w, c.get(ctx, "/v1/whoami", nil, &w)
}

// Tenants is GET /v1/tenants: the caller and every tenant it belongs to,
// with its role there. It needs no tenant: a client asks it before it
// picks one.
func (c *Client) Tenants(ctx context.Context) (apitypes.Tenants, error) {
	var t apitypes.Tenants
	return t, c.get(ctx, "/v1/tenants", nil, &t)
}

// Nodes is GET /v1/nodes: the tenant's node registry.
func (c *Client) Nodes(ctx context.Context) (apitypes.NodeList, error) {
	var l apitypes.NodeList
	return l, c.get(ctx, "/v1/nodes", nil, &l)
}

// Node is GET /v1/nodes/{id}.
func (c *Client) Node(ctx context.Context, id string) (apitypes.Node, error) {
	var n apitypes.Node
	return n, c.get(ctx, "/v1/nodes/"+esc(id), nil, &n)
}

// RevokeNode is POST /v1/nodes/{id}/revoke: the node is cut off now and
// for good.
func (c *Client) RevokeNode(ctx context.Context, id string) (apitypes.Node, error) {
	var n apitypes.Node
	return n, c.call(ctx, http.MethodPost, "/v1/nodes/"+esc(id)+"/revoke", nil, &n)
}

// AuditQuery filters GET /v1/audit; empty fields are not sent.
type AuditQuery struct {
	Event  string // an event name
	RunRef string // run_ref
	Actor  string // a principal or credential id
	Since  string // an RFC 3339 instant
	Limit  int    // 1..500; 0 for the server's default (100)
	Cursor string // an earlier page's next
}

// Values is the query string of q.
func (q AuditQuery) Values() url.Values {
	v := url.Values{}
	setStr(v, "event", q.Event)
	setStr(v, "run_ref", q.RunRef)
	setStr(v, "actor", q.Actor)
	setStr(v, "since", q.Since)
	setInt(v, "limit", q.Limit)
	setStr(v, "cursor", q.Cursor)
	return v
}

// Audit is GET /v1/audit: one page of the tenant's audit ledger, oldest
// first.
func (c *Client) Audit(ctx context.Context, q AuditQuery) (apitypes.AuditList, error) {
	var l apitypes.AuditList
	return l, c.get(ctx, "/v1/audit", q.Values(), &l)
}

// Healthz is GET /healthz: nil when the coordinator answers 200.
func (c *Client) Healthz(ctx context.Context) error {
	return c.call(ctx, http.MethodGet, "/healthz", nil, nil)
}

// Readyz is GET /readyz: nil when the coordinator is ready, else an *Error
// (503 not_ready) saying why.
func (c *Client) Readyz(ctx context.Context) error {
	return c.call(ctx, http.MethodGet, "/readyz", nil, nil)
}

// Metrics is GET /metrics: the Prometheus text exposition.
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	resp, err := c.Do(ctx, http.MethodGet, "/metrics", nil, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, resp.Err()
}
