package apiclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// RunQuery filters GET /runs; empty fields are not sent.
type RunQuery struct {
	State   string // one of apitypes.States
	LiveRef string
	// Exact-match filters on the run's node, profile, workspace and tool
	// (node_id, provider_profile_ref, workspace_ref, driver).
	NodeID          string
	ProfileRef      string
	WorkspaceRef    string
	Driver          string
	ClaudeSessionID string
	// Attention is any or a reason (R-ATTN-4); "" for no filter.
	Attention string
	Limit     int // 1..200; 0 for the server's default (50)
	Offset    int
	// CursorPages asks for cursor pagination (pagination=cursor); Cursor
	// is an earlier page's next.
	CursorPages bool
	Cursor      string
}

// Values is the query string of q.
func (q RunQuery) Values() url.Values {
	v := url.Values{}
	setStr(v, "state", q.State)
	setStr(v, "live_ref", q.LiveRef)
	setStr(v, "claude_session_id", q.ClaudeSessionID)
	setStr(v, "node_id", q.NodeID)
	setStr(v, "provider_profile_ref", q.ProfileRef)
	setStr(v, "workspace_ref", q.WorkspaceRef)
	setStr(v, "driver", q.Driver)
	setStr(v, "attention", q.Attention)
	setInt(v, "limit", q.Limit)
	setInt(v, "offset", q.Offset)
	if q.CursorPages {
		v.Set("pagination", "cursor")
	}
	setStr(v, "cursor", q.Cursor)
	return v
}

// Runs is GET /runs: one page of the tenant's runs, with the caller's
// marks (R-LIST-1..5).
func (c *Client) Runs(ctx context.Context, q RunQuery) (apitypes.RunList, error) {
	var l apitypes.RunList
	return l, c.get(ctx, Base+"/runs", q.Values(), &l)
}

// Launch is POST /runs. The run is starting (201), or pending_approval
// when its profile holds launches for a person (202).
func (c *Client) Launch(ctx context.Context, req apitypes.LaunchRequest) (apitypes.Run, error) {
	var r apitypes.Run
	return r, c.call(ctx, http.MethodPost, Base+"/runs", req, &r)
}

// Run is GET /runs/{ref}.
func (c *Client) Run(ctx context.Context, ref string) (apitypes.Run, error) {
	var r apitypes.Run
	return r, c.get(ctx, RunPath(ref), nil, &r)
}

// EventsQuery pages GET /runs/{ref}/events; empty fields are not sent.
type EventsQuery struct {
	After string // an earlier page's next
	Limit int    // 1..500; 0 for the server's default (100)
}

// Events is GET /runs/{ref}/events: one page of the run's lifecycle
// ledger.
func (c *Client) Events(ctx context.Context, ref string, q EventsQuery) (apitypes.EventList, error) {
	v := url.Values{}
	setStr(v, "after", q.After)
	setInt(v, "limit", q.Limit)
	var l apitypes.EventList
	return l, c.get(ctx, RunPath(ref, "events"), v, &l)
}

// Input is POST /runs/{ref}/input: text (Codex, Grok, Gemini CLI,
// OpenCode), or a message or a line (Claude Code).
func (c *Client) Input(ctx context.Context, ref string, in apitypes.InputRequest) (apitypes.Accepted, error) {
	var a apitypes.Accepted
	return a, c.call(ctx, http.MethodPost, RunPath(ref, "input"), in, &a)
}

// Interrupt is POST /runs/{ref}/interrupt: cancel the active turn.
func (c *Client) Interrupt(ctx context.Context, ref string) (apitypes.Accepted, error) {
	var a apitypes.Accepted
	return a, c.call(ctx, http.MethodPost, RunPath(ref, "interrupt"), nil, &a)
}

// Stop is POST /runs/{ref}/stop; it answers once the exit is observed.
func (c *Client) Stop(ctx context.Context, ref string) (apitypes.Run, error) {
	return c.runCall(ctx, http.MethodPost, ref, "stop", nil)
}

// Resume is POST /runs/{ref}/resume: a new generation on the same
// conversation.
func (c *Client) Resume(ctx context.Context, ref string) (apitypes.Run, error) {
	return c.runCall(ctx, http.MethodPost, ref, "resume", nil)
}

// Approve is POST /runs/{ref}/approve: a held launch or resume goes on.
func (c *Client) Approve(ctx context.Context, ref string) (apitypes.Run, error) {
	return c.runCall(ctx, http.MethodPost, ref, "approve", nil)
}

// Move is POST /runs/{ref}/move: a stopped Claude Code run's conversation
// to another profile of its node.
func (c *Client) Move(ctx context.Context, ref, profileRef string) (apitypes.Run, error) {
	return c.runCall(ctx, http.MethodPost, ref, "move", apitypes.MoveRequest{ProviderProfileRef: profileRef})
}

// Requests is GET /runs/{ref}/requests: the tool's pending requests and
// the last settled ones.
func (c *Client) Requests(ctx context.Context, ref string) (apitypes.RequestList, error) {
	var out apitypes.RequestList
	return out, c.get(ctx, RunPath(ref, "requests"), nil, &out)
}

// AnswerRequest is POST /runs/{ref}/requests/{id}: the first valid answer
// settles the request (409 request_settled names who answered first).
func (c *Client) AnswerRequest(ctx context.Context, ref, id string, a apitypes.RequestAnswer) (apitypes.RunRequest, error) {
	var out apitypes.RunRequest
	return out, c.call(ctx, http.MethodPost, RunPath(ref, "requests", id), a, &out)
}

func (c *Client) runCall(ctx context.Context, method, ref, action string, body any) (apitypes.Run, error) {
	var r apitypes.Run
	path := RunPath(ref)
	if action != "" {
		path = RunPath(ref, action)
	}
	return r, c.call(ctx, method, path, body, &r)
}

// Diff is GET /runs/{ref}/diff: what the run's worktree branch committed.
func (c *Client) Diff(ctx context.Context, ref string) (apitypes.Diff, error) {
	var d apitypes.Diff
	return d, c.get(ctx, RunPath(ref, "diff"), nil, &d)
}

// DiffFile is GET /runs/{ref}/diff/file?path=: one path at base and at
// head.
func (c *Client) DiffFile(ctx context.Context, ref, path string) (apitypes.FileDiff, error) {
	var d apitypes.FileDiff
	return d, c.get(ctx, RunPath(ref, "diff", "file"), url.Values{"path": {path}}, &d)
}

// Uncommitted is GET /runs/{ref}/diff/uncommitted: the edits in the run's
// folder its last commit does not hold (R-DIFF-10).
func (c *Client) Uncommitted(ctx context.Context, ref string) (apitypes.UncommittedDiff, error) {
	var d apitypes.UncommittedDiff
	return d, c.get(ctx, RunPath(ref, "diff", "uncommitted"), nil, &d)
}

// HandoffPreview is GET /runs/{ref}/handoff: the summary a handoff would
// send.
func (c *Client) HandoffPreview(ctx context.Context, ref string) (apitypes.HandoffPreview, error) {
	var p apitypes.HandoffPreview
	return p, c.get(ctx, RunPath(ref, "handoff"), nil, &p)
}

// Handoff is POST /runs/{ref}/handoff: the session continues in another
// profile's tool.
func (c *Client) Handoff(ctx context.Context, ref string, req apitypes.HandoffRequest) (apitypes.HandoffResponse, error) {
	var h apitypes.HandoffResponse
	return h, c.call(ctx, http.MethodPost, RunPath(ref, "handoff"), req, &h)
}

// Activity is GET /runs/{ref}/activity: what the run is doing.
func (c *Client) Activity(ctx context.Context, ref string) (apitypes.Activity, error) {
	var a apitypes.Activity
	return a, c.get(ctx, RunPath(ref, "activity"), nil, &a)
}

// SubAgent is GET /runs/{ref}/activity/agents/{agent}: one Claude Code
// sub-agent's turns.
func (c *Client) SubAgent(ctx context.Context, ref, agent string) (apitypes.SubAgentTurns, error) {
	var t apitypes.SubAgentTurns
	return t, c.get(ctx, RunPath(ref, "activity", "agents", esc(agent)), nil, &t)
}

// MessagesQuery filters GET /runs/{ref}/messages; empty fields are not
// sent, and the node checks the rest (R-MSG-16).
type MessagesQuery struct {
	Role   string // apitypes.RoleUser (the default) or apitypes.RoleAll
	Q      string // text the messages contain, any case
	At     string // an RFC 3339 instant: messages at or after it
	Order  string // asc (the default) or desc
	Limit  int    // 1..200, at most 50 with Text; 0 for the default (50)
	Cursor int    // the id the page starts from: an earlier page's next
	Text   bool   // each message's text, not only its first line
}

// Values is the query string of q.
func (q MessagesQuery) Values() url.Values {
	v := url.Values{}
	setStr(v, "role", q.Role)
	setStr(v, "q", q.Q)
	setStr(v, "at", q.At)
	setStr(v, "order", q.Order)
	setInt(v, "limit", q.Limit)
	setInt(v, "cursor", q.Cursor)
	if q.Text {
		v.Set("text", "1")
	}
	return v
}

// Messages is GET /runs/{ref}/messages: one page of what was said.
func (c *Client) Messages(ctx context.Context, ref string, q MessagesQuery) (apitypes.MessagesPage, error) {
	var p apitypes.MessagesPage
	return p, c.get(ctx, RunPath(ref, "messages"), q.Values(), &p)
}

// Message is GET /runs/{ref}/messages?id=: one message whole (up to its
// clip).
func (c *Client) Message(ctx context.Context, ref string, id int) (apitypes.MessageRead, error) {
	var m apitypes.MessageRead
	return m, c.get(ctx, RunPath(ref, "messages"), url.Values{"id": {strconv.Itoa(id)}}, &m)
}

// Pin is POST /runs/{ref}/pin: the caller's own pin.
func (c *Client) Pin(ctx context.Context, ref string) (apitypes.PinState, error) {
	return c.pinCall(ctx, http.MethodPost, ref)
}

// Unpin is DELETE /runs/{ref}/pin.
func (c *Client) Unpin(ctx context.Context, ref string) (apitypes.PinState, error) {
	return c.pinCall(ctx, http.MethodDelete, ref)
}

func (c *Client) pinCall(ctx context.Context, method, ref string) (apitypes.PinState, error) {
	var s apitypes.PinState
	return s, c.call(ctx, method, RunPath(ref, "pin"), nil, &s)
}

// Snooze is POST /runs/{ref}/snooze: hidden from the caller's list until
// until, an RFC 3339 instant in the future.
func (c *Client) Snooze(ctx context.Context, ref, until string) (apitypes.MarkState, error) {
	return c.markCall(ctx, http.MethodPost, ref, "snooze", apitypes.SnoozeRequest{Until: &until})
}

// Unsnooze is DELETE /runs/{ref}/snooze.
func (c *Client) Unsnooze(ctx context.Context, ref string) (apitypes.MarkState, error) {
	return c.markCall(ctx, http.MethodDelete, ref, "snooze", nil)
}

// Done is POST /runs/{ref}/done: the caller files it under "Earlier".
func (c *Client) Done(ctx context.Context, ref string) (apitypes.MarkState, error) {
	return c.markCall(ctx, http.MethodPost, ref, "done", nil)
}

// Undone is DELETE /runs/{ref}/done.
func (c *Client) Undone(ctx context.Context, ref string) (apitypes.MarkState, error) {
	return c.markCall(ctx, http.MethodDelete, ref, "done", nil)
}

func (c *Client) markCall(ctx context.Context, method, ref, action string, body any) (apitypes.MarkState, error) {
	var s apitypes.MarkState
	return s, c.call(ctx, method, RunPath(ref, action), body, &s)
}

// Rename is PUT /runs/{ref}/name: the session's name for everyone ("" clears
// it).
func (c *Client) Rename(ctx context.Context, ref, name string) (apitypes.Run, error) {
	return c.runCall(ctx, http.MethodPut, ref, "name", apitypes.NameRequest{Name: &name})
}

// Archive is POST /runs/{ref}/archive: archived for everyone.
func (c *Client) Archive(ctx context.Context, ref string) (apitypes.Run, error) {
	return c.runCall(ctx, http.MethodPost, ref, "archive", nil)
}

// Unarchive is DELETE /runs/{ref}/archive.
func (c *Client) Unarchive(ctx context.Context, ref string) (apitypes.Run, error) {
	return c.runCall(ctx, http.MethodDelete, ref, "archive", nil)
}

// CleanupRequest is the body of POST /runs/{ref}/cleanup.
type CleanupRequest struct {
	// DiscardWorktree releases the run even when its worktree holds work
	// that is not merged, deleting it.
	DiscardWorktree bool `json:"discard_worktree,omitempty"`
}

// Cleanup is POST /runs/{ref}/cleanup: release a run that is not live.
func (c *Client) Cleanup(ctx context.Context, ref string, req CleanupRequest) (apitypes.Run, error) {
	var body any
	if req.DiscardWorktree {
		body = req
	}
	return c.runCall(ctx, http.MethodPost, ref, "cleanup", body)
}

// DeleteRun is DELETE /runs/{ref}: a released run goes for good.
func (c *Client) DeleteRun(ctx context.Context, ref string) error {
	return c.call(ctx, http.MethodDelete, RunPath(ref), nil, nil)
}
