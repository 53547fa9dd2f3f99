package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// UsageQuery is GET /usage's parameters (docs/rules/usage.md).
type UsageQuery struct {
	GroupBy string // profile (default), node, tool, model or day
	From    string // an RFC 3339 instant or a UTC day YYYY-MM-DD; "" for open
	To      string // likewise, exclusive
}

// Values is the query string of q.
func (q UsageQuery) Values() url.Values {
	v := url.Values{}
	setStr(v, "group_by", q.GroupBy)
	setStr(v, "from", q.From)
	setStr(v, "to", q.To)
	return v
}

// Usage is GET /usage: the tenant's usage summed by q.GroupBy, with each
// account's latest rate-limit report.
func (c *Client) Usage(ctx context.Context, q UsageQuery) (apitypes.UsageReport, error) {
	var r apitypes.UsageReport
	return r, c.get(ctx, "/v1/m/sessions/usage", q.Values(), &r)
}

// ContinueAtReset is POST /runs/{ref}/continue-at-reset: continue the run
// by itself once its limit resets, sending message ("" for the default).
func (c *Client) ContinueAtReset(ctx context.Context, ref, message string) (apitypes.Run, error) {
	var body apitypes.ContinueRequest
	if message != "" {
		body.Message = &message
	}
	return c.runCall(ctx, http.MethodPost, ref, "continue-at-reset", body)
}

// CancelContinueAtReset is DELETE /runs/{ref}/continue-at-reset.
func (c *Client) CancelContinueAtReset(ctx context.Context, ref string) (apitypes.Run, error) {
	return c.runCall(ctx, http.MethodDelete, ref, "continue-at-reset", nil)
}

// OnLimitStep is POST /runs/{ref}/on-limit: run one step of an on_limit
// plan now (continue_at_reset, move:PROFILE or handoff:PROFILE).
func (c *Client) OnLimitStep(ctx context.Context, ref, step string) (apitypes.Run, error) {
	return c.runCall(ctx, http.MethodPost, ref, "on-limit", apitypes.OnLimitRequest{Step: step})
}
