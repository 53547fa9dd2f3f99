package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Limits of the run routes.
const (
	maxInputBody = 1 << 20 // R-IN-3
	maxJSONBody  = 1 << 20
	callTimeout  = 60 * time.Second
)

// runAPI serves the runs: launch, list, read, input, stop, resume, attach, move.
type runAPI struct {
	*core
	attaches streamSlots // the open attach streams
}

func (s *runAPI) routes() []Route {
	return []Route{
		// Runs (R-AUTH-1).
		{http.MethodGet, Base + "/runs", auth.PermRunRead, s.listRuns, query("state", "live_ref", "claude_session_id", "node_id", "provider_profile_ref", "workspace_ref", "driver", "attention",
			"limit", "offset", "pagination", "cursor")},
		{http.MethodPost, Base + "/runs", auth.PermRunWrite, s.idempotent(s.countLaunch(s.launch)), nil},
		{http.MethodGet, Base + "/runs/:ref", auth.PermRunRead, s.getRun, nil},
		{http.MethodGet, Base + "/runs/:ref/events", auth.PermRunRead, s.runEvents, query("after", "limit")},
		{http.MethodGet, Base + "/runs/:ref/attach", auth.PermRunRead, s.attach, query("from")},
		{http.MethodPost, Base + "/runs/:ref/input", auth.PermRunWrite, s.input, nil},
		{http.MethodPost, Base + "/runs/:ref/interrupt", auth.PermRunWrite, s.interrupt, nil},
		{http.MethodPost, Base + "/runs/:ref/stop", auth.PermRunWrite, s.stop, nil},
		{http.MethodPost, Base + "/runs/:ref/resume", auth.PermRunWrite, s.resume, nil},
		// the approval a profile's policy asks for, by a person with
		// workspace administration.
		{http.MethodPost, Base + "/runs/:ref/approve", auth.PermWorkspaceAdmin, s.approveRun, nil},
		{http.MethodPost, Base + "/runs/:ref/move", auth.PermRunWrite, s.move, nil},
	}
}

// countLaunch counts each launch by its result (R-OBS-7).
func (s *runAPI) countLaunch(h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := h(c)
		s.metrics.launched(err)
		return err
	}
}

func (s *runAPI) launch(c echo.Context) error {
	ctx := c.Request().Context()
	tenant := CallerOf(c).Tenant
	var req apitypes.LaunchRequest
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	if req.ProviderProfileRef == "" {
		return apierr.BadRequest("profile_required", "provider_profile_ref is required: the profile (account and tool) to run")
	}
	// R-API-3: resource lookups (404) before validation (400/422).
	p, err := s.profileInTenant(ctx, tenant, req.ProviderProfileRef)
	if err != nil {
		return err
	}
	node := p.NodeID
	var ws apitypes.Workspace
	if req.WorkspaceRef != "" {
		w, err := s.o.Store.GetWorkspace(ctx, req.WorkspaceRef)
		if errors.Is(err, store.ErrNotFound) || (err == nil && w.Tenant != tenant) {
			return apierr.NotFound("workspace", req.WorkspaceRef)
		}
		if err != nil {
			return err
		}
		ws = w
		if w.NodeID != node {
			return apierr.New(http.StatusUnprocessableEntity, "node_mismatch", "workspace %s is on node %s and profile %s on node %s; a run needs both on one node", w.Ref, w.NodeID, p.Ref, node)
		}
	}
	name, err := checkName(req.Name)
	if err != nil {
		return err
	}
	grantRefs, err := s.checkGrants(ctx, tenant, req.Grants)
	if err != nil {
		return err
	}
	handed, err := s.withProfileKey(ctx, p, grantRefs)
	if err != nil {
		return err
	}
	grants, err := s.openGrants(ctx, tenant, handed)
	if err != nil {
		return err
	}
	worktree := req.Worktree != nil && *req.Worktree
	setup, setupCmd := "", ""
	switch {
	case req.WorktreeFrom != "" && !worktree:
		return apierr.New(http.StatusUnprocessableEntity, "worktree_from_without_worktree", "worktree_from needs worktree:true") // R-WTF-3
	case worktree && req.WorkspaceRef == "":
		return apierr.New(http.StatusUnprocessableEntity, "worktree_needs_workspace", "a worktree launch needs a workspace_ref at a git repository's root") // R-WT-3
	case worktree:
		st, err := s.o.Store.GetWorkspaceSettings(ctx, ws.Ref)
		if err != nil {
			return err
		}
		// The agent answers this 409 after its own 422 checks and before
		// it creates anything (R-SETUP-8, R-API-3).
		setup = setupRefusal(ws, st, req.NoSetup)
		setupCmd = setupToRun(st, req.NoSetup)
	}
	gate, err := s.gate(ctx, req.WorkspaceRef)
	if err != nil {
		return err
	}
	ref := newRunRef(c)
	var r apitypes.Run
	// The request's second hop: proto.RunLaunch says why it is a copy.
	err = s.call(ctx, node, wire.Header{Op: proto.OpRunLaunch, RunRef: ref}, proto.RunLaunch{
		RunRef: ref, Tenant: tenant, ProfileRef: p.Ref, WorkspaceRef: req.WorkspaceRef,
		Isolation: req.Isolation, TemplateRef: req.TemplateRef, Grants: grants, Gate: gate,
		Worktree: worktree, WorktreeFrom: req.WorktreeFrom, SetupRefusal: setup, SetupCommand: setupCmd}, &r)
	if err != nil {
		return err
	}
	r.NodeID, r.Tenant = node, tenant
	s.auditStart(c, apitypes.AuditRunStarted, r, handed, map[string]any{"profile_ref": p.Ref, "workspace_ref": req.WorkspaceRef, "worktree": worktree})
	if name != "" || len(grantRefs) > 0 {
		// The name belongs to the session, which the coordinator keeps
		// (R-NAME-4; no audit entry for a name given at launch), and so do
		// the grants a resume hands out again.
		if _, err := s.o.Store.UpdateRunMeta(ctx, ref, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
			m.Name, m.Grants = name, grantRefs
			return nil, nil
		}); err != nil {
			return err
		}
	}
	return s.respondRun(c, launchStatus(r), r)
}

func (s *runAPI) listRuns(c echo.Context) error {
	q := store.RunQuery{Tenant: CallerOf(c).Tenant, Limit: 50}
	qp := c.QueryParams()
	q.State, q.LiveRef, q.ClaudeSessionID = qp.Get("state"), qp.Get("live_ref"), qp.Get("claude_session_id")
	// R-LIST-7: the run's node, profile, workspace and tool, exact match.
	q.NodeID, q.ProfileRef, q.WorkspaceRef, q.Driver = qp.Get("node_id"), qp.Get("provider_profile_ref"), qp.Get("workspace_ref"), qp.Get("driver")
	if q.State != "" && !slices.Contains(apitypes.States, q.State) {
		return apierr.BadRequest("bad_query", "state %q: use one of %s", q.State, strings.Join(apitypes.States, ", "))
	}
	// R-ATTN-4: a reason, or any; derived at this instant.
	q.Attention, q.Now = qp.Get("attention"), s.o.Now()
	if qp.Has("attention") && q.Attention != apitypes.AttentionAny && !slices.Contains(apitypes.AttentionReasons, q.Attention) {
		return apierr.BadRequest("bad_query", "attention %q: use any or one of %s", q.Attention, strings.Join(apitypes.AttentionReasons, ", "))
	}
	if v := qp.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			return apierr.BadRequest("bad_query", "limit must be an integer from 1 to 200") // R-LIST-5
		}
		q.Limit = n
	}
	switch qp.Get("pagination") {
	case "":
	case "cursor":
		q.CursorMode, q.Cursor = true, qp.Get("cursor")
	default:
		return apierr.BadRequest("bad_query", "pagination must be \"cursor\" or absent")
	}
	if v := qp.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || q.CursorMode {
			return apierr.BadRequest("bad_query", "offset must be a non-negative integer, and not combined with pagination=cursor")
		}
		q.Offset = n
	}
	if qp.Get("cursor") != "" && !q.CursorMode {
		return apierr.BadRequest("bad_query", "cursor needs pagination=cursor")
	}
	rows, next, err := s.o.Store.ListRuns(c.Request().Context(), q)
	if errors.Is(err, store.ErrBadCursor) {
		return apierr.BadRequest("bad_cursor", "the cursor is not one this coordinator issued; start again without it")
	}
	if err != nil {
		return err
	}
	if !q.CursorMode {
		// R-LIST-3: the caller's pins outside the page are added (R-LIST-4:
		// never in cursor mode).
		extra, err := s.pinnedExtras(c, q, rows)
		if err != nil {
			return err
		}
		rows = append(rows, extra...)
	}
	items, err := s.runViews(c, rows...)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apitypes.RunList{Items: items, Next: next})
}

func (s *runAPI) getRun(c echo.Context) error {
	r, err := s.refRun(c)
	if err != nil {
		return err
	}
	// Served from the index, with no call to the node (issue 24): the
	// row's indexed_at and node_reachable say how fresh it is.
	return s.respondRun(c, http.StatusOK, r)
}

func (s *runAPI) runEvents(c echo.Context) error {
	ctx := c.Request().Context()
	r, err := s.refRun(c)
	if err != nil {
		return err
	}
	p := proto.RunEvents{Limit: 100}
	if v := c.QueryParam("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return apierr.BadRequest("bad_query", "after must be a non-negative integer (a seq from an earlier page's next)")
		}
		p.After = n
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return apierr.BadRequest("bad_query", "limit must be an integer from 1 to 500")
		}
		p.Limit = n
	}
	var out apitypes.EventList
	if err := s.call(ctx, r.NodeID, wire.Header{Op: proto.OpRunEvents, RunRef: r.RunRef}, p, &out); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *runAPI) input(c echo.Context) error {
	var in apitypes.InputRequest
	if err := decodeStrict(c, maxInputBody, &in); err != nil {
		return err
	}
	n := 0
	for _, set := range []bool{in.Line != nil, in.Message != nil, in.Text != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return apierr.BadRequest("invalid_input", "give exactly one of \"line\" or \"message\" (Claude Code) or \"text\" (Codex, Grok)")
	}
	// R-ATT-11: the node records the input with who sent it, by name as
	// they are called when they send it.
	caller := CallerOf(c)
	ri := proto.RunInput{By: caller.Actor().PrincipalID, Name: caller.Principal.Name, InputRequest: in}
	if ri.By == "" {
		ri.By = caller.Actor().CredentialID
	}
	var out apitypes.Accepted
	r, err := s.runCall(c, proto.OpRunInput, ri, &out, callTimeout)
	if err != nil {
		return err
	}
	s.notify.inputSent(r.RunRef) // R-NOTIF-2: a turn begins
	return c.JSON(http.StatusAccepted, out)
}

func (s *runAPI) interrupt(c echo.Context) error {
	if err := noBody(c); err != nil {
		return err
	}
	var out apitypes.Accepted
	if _, err := s.runCall(c, proto.OpRunInterrupt, nil, &out, callTimeout); err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, out)
}

func (s *runAPI) stop(c echo.Context) error {
	if err := noBody(c); err != nil {
		return err
	}
	r, err := s.refRun(c)
	if err != nil {
		return err
	}
	cl := CallerOf(c)
	out, err := s.stopRun(c.Request().Context(), cl.Tenant, cl.Actor(), r)
	if err != nil {
		return err
	}
	return s.respondRun(c, http.StatusOK, out)
}

// stopRun is POST /runs/{ref}/stop for run r, audited as actor: the
// route's and an on_limit move's one path (R-ONL-3).
func (s *runAPI) stopRun(ctx context.Context, tenant string, actor apitypes.AuditActor, r apitypes.Run) (apitypes.Run, error) {
	var out apitypes.Run
	// The agent answers once the exit is observed: up to the grace and
	// the SIGKILL after it.
	if err := s.runOp(ctx, r, proto.OpRunStop, nil, &out, 5*time.Minute); err != nil {
		return apitypes.Run{}, err
	}
	out.NodeID, out.Tenant = r.NodeID, r.Tenant
	if apitypes.Live(r.State) || r.State == apitypes.StatePendingApproval { // R-AUD-2: a no-op stop writes nothing
		s.Audit(ctx, tenant, actor, apitypes.AuditRunStopped, apitypes.AuditTarget{RunRef: r.RunRef, NodeID: r.NodeID}, map[string]any{"exit_code": out.ExitCode, "state": out.State})
	}
	return s.index(ctx, out), nil
}

func (s *runAPI) resume(c echo.Context) error {
	if err := noBody(c); err != nil {
		return err
	}
	out, err := s.startGeneration(c, proto.OpRunResume)
	if err != nil {
		return err
	}
	meta, _ := s.o.Store.GetRunMeta(c.Request().Context(), []string{out.RunRef})
	s.auditStart(c, apitypes.AuditRunResumed, out, meta[out.RunRef].Grants, map[string]any{"generation": out.Generation})
	status := http.StatusOK
	if out.State == apitypes.StatePendingApproval {
		status = http.StatusAccepted // held for a person (R-APPR-1)
	}
	return s.respondRun(c, status, s.index(c.Request().Context(), out))
}

// startGeneration asks the node to start a new generation of the run
// (resume, or approve of a held launch or resume): the run's grants are
// handed out again and the workspace's approved project config is the
// gate (R-GRANT-2, R-PCS-12).
func (s *runAPI) startGeneration(c echo.Context, op string) (apitypes.Run, error) {
	ctx := c.Request().Context()
	r, err := s.refRun(c)
	if err != nil {
		return apitypes.Run{}, err
	}
	params, err := s.resumeParams(ctx, r)
	if err != nil {
		return apitypes.Run{}, err
	}
	var out apitypes.Run
	r, err = s.runCall(c, op, params, &out, callTimeout)
	if err != nil {
		return apitypes.Run{}, err
	}
	out.NodeID, out.Tenant = r.NodeID, r.Tenant
	return out, nil
}

// launchStatus is 201 for a launched run and 202 for one its profile's
// policy holds for a person (R-CRT-5, R-APPR-1).
func launchStatus(r apitypes.Run) int {
	if r.State == apitypes.StatePendingApproval {
		return http.StatusAccepted
	}
	return http.StatusCreated
}

// approveRun lets a held launch or resume go on; agent identities
// may not approve (R-AUTH-6).
func (s *runAPI) approveRun(c echo.Context) error {
	if err := refuseAgent(c); err != nil {
		return err
	}
	if err := noBody(c); err != nil {
		return err
	}
	out, err := s.startGeneration(c, proto.OpRunApprove)
	if err != nil {
		return err
	}
	return s.respondRun(c, http.StatusOK, s.index(c.Request().Context(), out))
}

// attach relays the run's output as SSE (R-ATT-1, R-ATT-4): the agent
// streams binary frames over one tunnel stream (R-TR-10) and this turns
// each into one event whose id is the seq (relay.go). A tunnel loss, a
// coordinator restart or a drop for reading too slowly ends the stream
// without end (R-RC-8); the client reconnects with from=last+1 (R-RC-1).
// A principal has at most Options.Attach.PerPrincipal attaches open (429
// too_many_attaches).
func (s *runAPI) attach(c echo.Context) error {
	ctx := c.Request().Context()
	r, err := s.refRun(c)
	if err != nil {
		return err
	}
	var from uint64
	if v := c.QueryParam("from"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return apierr.BadRequest("bad_query", "from must be a non-negative integer (the seq to start at)")
		}
		from = n
	} else if v := c.Request().Header.Get("Last-Event-ID"); v != "" {
		// R-ATT-5: Last-Event-ID is honoured as from = id+1.
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return apierr.BadRequest("bad_query", "Last-Event-ID must be a seq")
		}
		from = n + 1
	}
	release, n, ok := s.attaches.acquire(CallerOf(c).Principal.ID, s.o.Attach.PerPrincipal, 0)
	if !ok {
		return apierr.New(http.StatusTooManyRequests, "too_many_attaches",
			"you have %d attach streams open, the most one principal may hold at once; close one of them (a dropped viewer's slot is freed once its connection ends), then attach again", n)
	}
	defer release()
	octx, cancel := context.WithTimeout(ctx, callTimeout)
	var reply proto.RunAttachReply
	st, err := s.o.Fleet.Open(octx, r.NodeID, wire.Header{Op: proto.OpRunAttach, RunRef: r.RunRef}, proto.RunAttach{From: from}, &reply)
	cancel()
	if err != nil {
		return err
	}
	sink := openSSE(c)
	sink.SetWriteDeadline(time.Now().Add(s.o.Attach.WriteTimeout))
	if err := sink.Flush(); err != nil {
		st.Close()
		return nil
	}
	s.metrics.attachViewers.Inc()
	end := relay(ctx, st, sink, s.o.Attach)
	s.metrics.attachViewers.Dec()
	if end == relaySlow {
		s.metrics.slowDrops.Inc()
		s.log.InfoContext(ctx, "dropped an attach viewer that read too slowly", logging.KeyRunRef, r.RunRef, logging.KeyPrincipal, CallerOf(c).Principal.ID)
	}
	// The slot is free now, even while the server finishes the response.
	release()
	return nil
}

// move re-attaches a stopped or failed Claude Code run to another profile
// of the same tool on its node (R-MOVE-*). Nothing starts.
func (s *runAPI) move(c echo.Context) error {
	r, err := s.refRun(c)
	if err != nil {
		return err
	}
	var req apitypes.MoveRequest
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	out, err := s.moveRun(c.Request().Context(), CallerOf(c).Tenant, r, req.ProviderProfileRef)
	if err != nil {
		return err
	}
	return s.respondRun(c, http.StatusOK, out)
}

// moveRun is POST /runs/{ref}/move for run r of tenant: the route's and an
// on_limit move's one path (R-ONL-3).
func (s *runAPI) moveRun(ctx context.Context, tenant string, r apitypes.Run, profileRef string) (apitypes.Run, error) {
	if profileRef == "" {
		return apitypes.Run{}, apierr.BadRequest("profile_required", "provider_profile_ref is required: the profile to move the run to")
	}
	p, err := s.profileInTenant(ctx, tenant, profileRef)
	if err != nil {
		return apitypes.Run{}, err
	}
	if p.NodeID != r.NodeID {
		// R-MOVE-3: the target must be in this node's environment.
		return apitypes.Run{}, apierr.New(http.StatusConflict, "profile_other_node", "profile %s is on node %s and run %s on node %s; a run moves only to a profile of its own node (hand it off instead)", p.Ref, p.NodeID, r.RunRef, r.NodeID)
	}
	var out apitypes.Run
	if err := s.runOp(ctx, r, proto.OpRunMove, proto.RunMove{ProfileRef: p.Ref}, &out, 5*time.Minute); err != nil {
		return apitypes.Run{}, err
	}
	out.NodeID, out.Tenant = r.NodeID, r.Tenant
	return s.index(ctx, out), nil
}

// pinnedExtras are the caller's pinned runs that match q but are not on the
// page (R-LIST-3), newest pin first, at most maxPinnedExtras.
func (s *runAPI) pinnedExtras(c echo.Context, q store.RunQuery, page []apitypes.Run) ([]apitypes.Run, error) {
	ctx := c.Request().Context()
	cl := CallerOf(c)
	pins, err := s.o.Store.PinnedMarks(ctx, cl.Tenant, cl.Owner())
	if err != nil {
		return nil, err
	}
	var refs []string
	for _, m := range pins {
		if !slices.ContainsFunc(page, func(r apitypes.Run) bool { return r.RunRef == m.RunRef }) {
			refs = append(refs, m.RunRef)
		}
	}
	// One read for every candidate: on a database store each read is a
	// round trip.
	rows, err := s.o.Store.GetRuns(ctx, refs)
	if err != nil {
		return nil, err
	}
	var out []apitypes.Run
	for _, ref := range slices.Backward(refs) {
		if len(out) == maxPinnedExtras {
			break
		}
		r, ok := rows[ref]
		if !ok || r.Tenant != cl.Tenant || !q.Matches(r) {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// checkGrants validates a launch's grants (400, R-GRANT-1) and that each names
// a secret of the tenant (404, R-TEN-3).
func (s *runAPI) checkGrants(ctx context.Context, tenant string, gs []apitypes.Grant) ([]store.GrantRef, error) {
	var out []store.GrantRef
	for _, g := range gs {
		if !slices.Contains(apitypes.GrantKinds, g.Kind) {
			return nil, apierr.BadRequest("bad_grant", "grant kind %q: use %s", g.Kind, strings.Join(apitypes.GrantKinds, ", "))
		}
		if g.Env == "" {
			return nil, apierr.BadRequest("bad_grant", "a grant needs env: the variable the tool reads it from")
		}
		if _, err := s.secretInTenant(ctx, tenant, g.SecretRef); err != nil {
			return nil, err
		}
		out = append(out, store.GrantRef{Kind: g.Kind, SecretRef: g.SecretRef, Env: g.Env, AsFile: g.AsFile})
	}
	return out, nil
}
