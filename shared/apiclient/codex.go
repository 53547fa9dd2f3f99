package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// catalog is the base path of the Codex catalog routes.
const catalog = Base + "/catalog/codex/threads"

// CodexThreadsQuery filters GET /catalog/codex/threads; empty fields are
// not sent.
type CodexThreadsQuery struct {
	Search string // title text, any case
	Host   string // one host (node id); a Cursor needs it
	Limit  int    // rows per host, 1..100; 0 for the default (50)
	Cursor string // continues Host's scan
}

// Values is the query string of q.
func (q CodexThreadsQuery) Values() url.Values {
	v := url.Values{}
	setStr(v, "search", q.Search)
	setStr(v, "host", q.Host)
	setInt(v, "limit", q.Limit)
	setStr(v, "cursor", q.Cursor)
	return v
}

// CodexThreads is GET /catalog/codex/threads: the fleet catalog of native
// Codex threads, per host; a host that failed carries its own error.
func (c *Client) CodexThreads(ctx context.Context, q CodexThreadsQuery) (apitypes.CodexCatalog, error) {
	var cat apitypes.CodexCatalog
	return cat, c.get(ctx, catalog, q.Values(), &cat)
}

func threadPath(host, thread, action string) string {
	return catalog + "/" + esc(host) + "/" + esc(thread) + "/" + action
}

// CodexTurns is GET /catalog/codex/threads/{host}/{thread}/turns: one turn
// page (cursor "" for the newest). A page over the limit is an *Error with
// code page_too_large; PageTooLarge reads its cursors.
func (c *Client) CodexTurns(ctx context.Context, host, thread, cursor string) (apitypes.CodexTurnsPage, error) {
	v := url.Values{}
	setStr(v, "cursor", cursor)
	var p apitypes.CodexTurnsPage
	return p, c.get(ctx, threadPath(host, thread, "turns"), v, &p)
}

// PageTooLarge returns the body of a refused Codex turn page in err: the
// cursors around it, so that a client can go on.
func PageTooLarge(err error) (apitypes.CodexPageTooLarge, bool) {
	var e *Error
	if !errors.As(err, &e) || e.Code != "page_too_large" {
		return apitypes.CodexPageTooLarge{}, false
	}
	var p apitypes.CodexPageTooLarge
	return p, json.Unmarshal(e.Body, &p) == nil
}

// CodexContinue is POST /catalog/codex/threads/{host}/{thread}/continue:
// the run that continues the thread; created is false when a run already
// continued it (200) and true for a new one (201).
func (c *Client) CodexContinue(ctx context.Context, host, thread string) (r apitypes.Run, created bool, err error) {
	resp, err := c.Do(ctx, http.MethodPost, threadPath(host, thread, "continue"), struct{}{}, nil)
	if err != nil {
		return r, false, err
	}
	if err := resp.Err(); err != nil {
		return r, false, err
	}
	if err := json.Unmarshal(resp.Body, &r); err != nil {
		return r, false, errors.New("POST " + resp.Path + ": the coordinator's answer does not decode: " + err.Error())
	}
	return r, resp.Status == http.StatusCreated, nil
}

// CodexArchive is POST /catalog/codex/threads/{host}/{thread}/archive. The
// API refuses it unless confirmNoOtherRunner says that no other Codex
// client runs the thread.
func (c *Client) CodexArchive(ctx context.Context, host, thread string, confirmNoOtherRunner bool) (apitypes.CodexArchived, error) {
	var a apitypes.CodexArchived
	return a, c.call(ctx, http.MethodPost, threadPath(host, thread, "archive"), apitypes.CodexArchiveRequest{ConfirmNoOtherRunner: confirmNoOtherRunner}, &a)
}

// CodexBranch is GET /runs/{ref}/codex-branch: a Codex supervision run's
// pending branch and its visible history.
func (c *Client) CodexBranch(ctx context.Context, ref string) (apitypes.CodexBranch, error) {
	var b apitypes.CodexBranch
	return b, c.get(ctx, RunPath(ref, "codex-branch"), nil, &b)
}
