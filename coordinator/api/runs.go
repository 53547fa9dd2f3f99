package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
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

// Tools a profile may name: the contract's (R-DRV-1) and the optional ACP
// drivers.
var tools = []string{"claude", "codex", "grok", "gemini", "opencode"}

func (s *Server) runRoutes() []Route {
	return []Route{
		// Profiles and workspaces: reading is run:read; registering one is
		// workspace administration (R-AUTH-5 models it as its own
		// permission; the seeds name no profile permission).
		{http.MethodPost, Base + "/profiles", auth.PermWorkspaceAdmin, s.createProfile},
		{http.MethodGet, Base + "/profiles", auth.PermRunRead, s.listProfiles},
		{http.MethodGet, Base + "/profiles/:ref", auth.PermRunRead, s.getProfile},
		{http.MethodPatch, Base + "/profiles/:ref", auth.PermWorkspaceAdmin, s.updateProfile},
		{http.MethodPost, Base + "/workspaces", auth.PermWorkspaceAdmin, s.createWorkspace},
		{http.MethodGet, Base + "/workspaces", auth.PermRunRead, s.listWorkspaces},
		// Runs (R-AUTH-1).
		{http.MethodGet, Base + "/runs", auth.PermRunRead, s.listRuns},
		{http.MethodPost, Base + "/runs", auth.PermRunWrite, s.idempotent(s.countLaunch(s.launch))},
		{http.MethodGet, Base + "/runs/:ref", auth.PermRunRead, s.getRun},
		{http.MethodGet, Base + "/runs/:ref/events", auth.PermRunRead, s.runEvents},
		{http.MethodGet, Base + "/runs/:ref/attach", auth.PermRunRead, s.attach},
		{http.MethodPost, Base + "/runs/:ref/input", auth.PermRunWrite, s.input},
		{http.MethodPost, Base + "/runs/:ref/interrupt", auth.PermRunWrite, s.interrupt},
		{http.MethodPost, Base + "/runs/:ref/stop", auth.PermRunWrite, s.stop},
		{http.MethodPost, Base + "/runs/:ref/resume", auth.PermRunWrite, s.resume},
		// the approval a profile's policy asks for, by a person with
		// workspace administration.
		{http.MethodPost, Base + "/runs/:ref/approve", auth.PermWorkspaceAdmin, s.approveRun},
		{http.MethodPost, Base + "/runs/:ref/move", auth.PermRunWrite, s.move},
		// People in the loop (R-REQ-2): the tool's requests and their
		// answers.
		{http.MethodGet, Base + "/runs/:ref/requests", auth.PermRunRead, s.listRequests},
		{http.MethodPost, Base + "/runs/:ref/requests/:id", auth.PermRunWrite, s.answerRequest},
	}
}

// decodeStrict reads a JSON body, refusing unknown fields (R-API-7) and
// trailing data. An empty body decodes as {}.
func decodeStrict(c echo.Context, limit int64, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, limit))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return apierr.New(http.StatusRequestEntityTooLarge, "body_too_large", "the request body is over %d bytes", limit)
		}
		return apierr.BadRequest("bad_body", "cannot read the request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if err := checkUTF8(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apierr.BadRequest("bad_body", "invalid JSON body: %v", err)
	}
	if dec.More() {
		return apierr.BadRequest("bad_body", "invalid JSON body: data after the object")
	}
	return nil
}

// --- profiles and workspaces ---

// CreateProfile registers a profile on its node and in the index as the
// local operator. Dev mode calls it directly.
func (s *Server) CreateProfile(ctx context.Context, tenant string, req apitypes.ProfileCreate) (apitypes.Profile, error) {
	return s.CreateProfileAs(ctx, tenant, req, OperatorActor)
}

// CreateProfileAs registers a profile and audits it as actor (R-AUD-6).
func (s *Server) CreateProfileAs(ctx context.Context, tenant string, req apitypes.ProfileCreate, actor apitypes.AuditActor) (apitypes.Profile, error) {
	if _, err := s.nodeInTenant(ctx, tenant, req.NodeID); err != nil {
		return apitypes.Profile{}, err
	}
	if !slices.Contains(tools, req.Tool) {
		return apitypes.Profile{}, apierr.BadRequest("unknown_tool", "tool %q: use claude, codex, grok, gemini or opencode", req.Tool)
	}
	if req.Name == "" {
		return apitypes.Profile{}, apierr.BadRequest("bad_name", "a profile needs a name")
	}
	if err := s.nameFree(ctx, tenant, "profile", req.Name); err != nil {
		return apitypes.Profile{}, err
	}
	for _, w := range req.AllowedWorkspaces {
		if _, err := s.workspaceRefInTenant(ctx, tenant, w); err != nil {
			return apitypes.Profile{}, err
		}
	}
	plan, err := s.checkOnLimit(ctx, tenant, apitypes.Profile{Tool: req.Tool, Name: req.Name}, req.OnLimit)
	if err != nil {
		return apitypes.Profile{}, err
	}
	ref := auth.NewID("prof_")
	var p apitypes.Profile
	err = s.call(ctx, req.NodeID, wire.Header{Op: proto.OpProfileCreate},
		proto.ProfileCreate{Ref: ref, Tenant: tenant, Tool: req.Tool, Name: req.Name, Home: req.Home, Env: req.Env,
			Inactive: req.Active != nil && !*req.Active, LaunchRequiresApproval: req.LaunchRequiresApproval,
			AllowedWorkspaces: req.AllowedWorkspaces, EngineHooks: req.EngineHooks, DeniedTools: req.DeniedTools,
			Approvals: req.Approvals, ApprovalRules: req.ApprovalRules, AskTimeout: req.AskTimeout,
			StallAfter: req.StallAfter, ResumeAfterLoss: req.ResumeAfterLoss, Isolation: req.Isolation, Network: req.Network}, &p)
	if err != nil {
		s.undoRecord(err, req.NodeID, proto.OpProfileDelete, ref, tenant)
		return apitypes.Profile{}, err
	}
	p.Tenant, p.NodeID = tenant, req.NodeID
	if len(plan) > 0 { // R-ONL-1: the coordinator keeps the plan
		p.OnLimit, p.OnLimitSetBy = plan, &actor
	}
	if err := s.o.Store.CreateProfile(ctx, p); err != nil {
		// The node has it, the index refused it (a name another request,
		// maybe on another replica, took meanwhile): remove it from the
		// node, so that both keep the same records (issue 24).
		s.undoRecord(nil, req.NodeID, proto.OpProfileDelete, ref, tenant)
		if errors.Is(err, store.ErrExists) {
			return apitypes.Profile{}, apierr.New(http.StatusConflict, "name_taken", "a profile named %q exists in this tenant", req.Name)
		}
		return apitypes.Profile{}, err
	}
	details := map[string]any{"tool": p.Tool, "env_keys": p.EnvKeys, "active": p.Active, "launch_requires_approval": p.LaunchRequiresApproval,
		"allowed_workspaces": p.AllowedWorkspaces, "engine_hooks": p.EngineHooks, "denied_tools": p.DeniedTools}
	if len(plan) > 0 {
		details["on_limit"] = plan
	}
	for k, v := range map[string]string{"isolation": p.Isolation, "network": p.Network} {
		if v != "" {
			details[k] = v
		}
	}
	s.Audit(ctx, tenant, actor, apitypes.AuditProfileCreated, apitypes.AuditTarget{ProfileRef: p.Ref, NodeID: p.NodeID}, details)
	return p, nil
}

func (s *Server) nameFree(ctx context.Context, tenant, kind, name string) error {
	var taken bool
	switch kind {
	case "profile":
		ps, err := s.o.Store.ListProfiles(ctx, tenant)
		if err != nil {
			return err
		}
		taken = slices.ContainsFunc(ps, func(p apitypes.Profile) bool { return p.Name == name })
	default:
		ws, err := s.o.Store.ListWorkspaces(ctx, tenant)
		if err != nil {
			return err
		}
		taken = slices.ContainsFunc(ws, func(w apitypes.Workspace) bool { return w.Name == name })
	}
	if taken {
		return apierr.New(http.StatusConflict, "name_taken", "a %s named %q exists in this tenant; pick another name", kind, name)
	}
	return nil
}

func (s *Server) createProfile(c echo.Context) error {
	var req apitypes.ProfileCreate
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	p, err := s.CreateProfileAs(c.Request().Context(), CallerOf(c).Tenant, req, CallerOf(c).Actor())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, p)
}

func (s *Server) listProfiles(c echo.Context) error {
	ps, err := s.o.Store.ListProfiles(c.Request().Context(), CallerOf(c).Tenant)
	if err != nil {
		return err
	}
	if ps == nil {
		ps = []apitypes.Profile{}
	}
	return c.JSON(http.StatusOK, apitypes.ProfileList{Items: ps})
}

func (s *Server) profileInTenant(ctx context.Context, tenant, ref string) (apitypes.Profile, error) {
	p, err := s.o.Store.GetProfile(ctx, ref)
	if errors.Is(err, store.ErrNotFound) || (err == nil && p.Tenant != tenant) {
		return apitypes.Profile{}, apierr.NotFound("profile", ref)
	}
	return p, err
}

func (s *Server) getProfile(c echo.Context) error {
	p, err := s.refProfile(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

// workspaceRefInTenant checks that ref names a workspace of tenant (404
// otherwise, R-TEN-3).
func (s *Server) workspaceRefInTenant(ctx context.Context, tenant, ref string) (apitypes.Workspace, error) {
	w, err := s.o.Store.GetWorkspace(ctx, ref)
	if errors.Is(err, store.ErrNotFound) || (err == nil && w.Tenant != tenant) {
		return apitypes.Workspace{}, apierr.NotFound("workspace", ref)
	}
	return w, err
}

// updateProfile is PATCH /profiles/{ref}: the policy applies from the next
// launch or resume on (R-MOVE-10).
func (s *Server) updateProfile(c echo.Context) error {
	ctx := c.Request().Context()
	tenant := CallerOf(c).Tenant
	p, err := s.refProfile(c)
	if err != nil {
		return err
	}
	var req apitypes.ProfileUpdate
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	if req.AllowedWorkspaces != nil {
		for _, w := range *req.AllowedWorkspaces {
			if _, err := s.workspaceRefInTenant(ctx, tenant, w); err != nil {
				return err
			}
		}
	}
	var plan []string
	if req.OnLimit != nil {
		if plan, err = s.checkOnLimit(ctx, tenant, p, *req.OnLimit); err != nil {
			return err
		}
	}
	// The node keeps the rest of the policy; the coordinator the plan
	// (R-ONL-1).
	out, nodeReq := p, req
	nodeReq.OnLimit = nil
	if req.OnLimit == nil || len(nodeReq.Fields()) > 0 {
		out = apitypes.Profile{}
		if err := s.call(ctx, p.NodeID, wire.Header{Op: proto.OpProfileUpdate}, proto.ProfileUpdate{Ref: p.Ref, Tenant: tenant, ProfileUpdate: nodeReq}, &out); err != nil {
			return err
		}
	}
	out.OnLimit, out.OnLimitSetBy = p.OnLimit, p.OnLimitSetBy
	if req.OnLimit != nil {
		out.OnLimit, out.OnLimitSetBy = nil, nil
		if len(plan) > 0 {
			actor := CallerOf(c).Actor()
			out.OnLimit, out.OnLimitSetBy = plan, &actor
		}
	}
	out.Tenant, out.NodeID = tenant, p.NodeID
	if err := s.o.Store.UpdateProfile(ctx, out); err != nil {
		return err
	}
	// Field names only: env values never leave the node (R-AUD-3).
	detail := map[string]any{"fields": req.Fields()}
	if len(req.Env) > 0 {
		keys := slices.Sorted(maps.Keys(req.Env))
		detail["env_set"] = keys
	}
	if len(req.UnsetEnv) > 0 {
		detail["env_unset"] = req.UnsetEnv
	}
	s.auditCaller(c, apitypes.AuditProfileUpdated, apitypes.AuditTarget{ProfileRef: p.Ref, NodeID: p.NodeID}, detail)
	return c.JSON(http.StatusOK, out)
}

// CreateWorkspace registers a directory of a node as the local operator.
func (s *Server) CreateWorkspace(ctx context.Context, tenant string, req apitypes.WorkspaceCreate) (apitypes.Workspace, error) {
	return s.CreateWorkspaceAs(ctx, tenant, req, OperatorActor)
}

// CreateWorkspaceAs registers a directory and audits it as actor.
func (s *Server) CreateWorkspaceAs(ctx context.Context, tenant string, req apitypes.WorkspaceCreate, actor apitypes.AuditActor) (apitypes.Workspace, error) {
	if _, err := s.nodeInTenant(ctx, tenant, req.NodeID); err != nil {
		return apitypes.Workspace{}, err
	}
	if req.Name == "" || req.Path == "" {
		return apitypes.Workspace{}, apierr.BadRequest("bad_request", "a workspace needs a name and a path")
	}
	if err := s.nameFree(ctx, tenant, "workspace", req.Name); err != nil {
		return apitypes.Workspace{}, err
	}
	ref := auth.NewID("ws_")
	var w apitypes.Workspace
	err := s.call(ctx, req.NodeID, wire.Header{Op: proto.OpWorkspaceCreate},
		proto.WorkspaceCreate{Ref: ref, Tenant: tenant, Name: req.Name, Path: req.Path, ReadOnly: req.ReadOnly,
			AllowedSubpaths: req.AllowedSubpaths, MaxReadBytes: req.MaxReadBytes, DLP: req.DLP}, &w)
	if err != nil {
		s.undoRecord(err, req.NodeID, proto.OpWorkspaceDelete, ref, tenant)
		return apitypes.Workspace{}, err
	}
	w.Tenant, w.NodeID = tenant, req.NodeID
	if err := s.o.Store.CreateWorkspace(ctx, w); err != nil {
		s.undoRecord(nil, req.NodeID, proto.OpWorkspaceDelete, ref, tenant)
		if errors.Is(err, store.ErrExists) {
			return apitypes.Workspace{}, apierr.New(http.StatusConflict, "name_taken", "a workspace named %q exists in this tenant", req.Name)
		}
		return apitypes.Workspace{}, err
	}
	s.Audit(ctx, tenant, actor, apitypes.AuditWorkspaceCreated, apitypes.AuditTarget{WorkspaceRef: w.Ref, NodeID: w.NodeID},
		map[string]any{"read_only": w.ReadOnly, "dlp": w.DLP})
	return w, nil
}

func (s *Server) createWorkspace(c echo.Context) error {
	var req apitypes.WorkspaceCreate
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	w, err := s.CreateWorkspaceAs(c.Request().Context(), CallerOf(c).Tenant, req, CallerOf(c).Actor())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, w)
}

func (s *Server) listWorkspaces(c echo.Context) error {
	ws, err := s.o.Store.ListWorkspaces(c.Request().Context(), CallerOf(c).Tenant)
	if err != nil {
		return err
	}
	if ws == nil {
		ws = []apitypes.Workspace{}
	}
	return c.JSON(http.StatusOK, apitypes.WorkspaceList{Items: ws})
}

// undoTimeout bounds the removal of a record the index did not take.
const undoTimeout = 30 * time.Second

// undoRecord removes record ref from node when its creation did not
// complete in the index: callErr is the create call's error (nil when the
// node created it and the index write failed). A refusal from the node
// created nothing; a call that failed on the way (node_call_failed, a
// cancelled context) may have, so the node is told to delete the ref, which it
// answers 404 when it has none. It runs on its own context: the request's
// may be what ended.
func (s *Server) undoRecord(callErr error, node, op, ref, tenant string) {
	var we *wire.Error
	if callErr != nil && errors.As(callErr, &we) && we.Code != "node_call_failed" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
	defer cancel()
	err := s.o.Fleet.Call(ctx, node, wire.Header{Op: op}, proto.RecordDelete{Ref: ref, Tenant: tenant}, nil)
	if err != nil && !(errors.As(err, &we) && we.Status == http.StatusNotFound) {
		s.echo.Logger.Errorf("api: %s %s on node %s after its index write failed: %v; the node keeps a record the coordinator does not list", op, ref, node, err)
	}
}

// --- runs ---

// call is a fleet call with the route's timeout.
func (s *Server) call(ctx context.Context, node string, h wire.Header, params, result any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return s.o.Fleet.Call(ctx, node, h, params, result)
}

// index returns the indexed row of r, which an agent answered a call
// with: the agent pushes a row it answers with before the answer (issue
// 24: the push is the index's one writer), so the index holds it, with
// indexed_at. When the push did not get through (the agent logs it and
// pushes again later), the answer's row is returned as it is.
func (s *Server) index(ctx context.Context, r apitypes.Run) apitypes.Run {
	got, err := s.o.Store.GetRun(ctx, r.RunRef)
	if err != nil || got.Rev < r.Rev || got.Tenant != r.Tenant {
		return r
	}
	return got
}

// runInTenant loads an index row; another tenant's run is a 404 (R-TEN-3).
func (s *Server) runInTenant(ctx context.Context, tenant, ref string) (apitypes.Run, error) {
	r, err := s.o.Store.GetRun(ctx, ref)
	if errors.Is(err, store.ErrNotFound) || (err == nil && r.Tenant != tenant) {
		return apitypes.Run{}, apierr.NotFound("run", ref)
	}
	return r, err
}

// countLaunch counts each launch by its result (R-OBS-7).
func (s *Server) countLaunch(h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := h(c)
		s.metrics.launched(err)
		return err
	}
}

func (s *Server) launch(c echo.Context) error {
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
	grants, err := s.openGrants(ctx, tenant, grantRefs)
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
	s.auditStart(c, apitypes.AuditRunStarted, r, grantRefs, map[string]any{"profile_ref": p.Ref, "workspace_ref": req.WorkspaceRef, "worktree": worktree})
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

func (s *Server) listRuns(c echo.Context) error {
	q := store.RunQuery{Tenant: CallerOf(c).Tenant, Limit: 50}
	qp := c.QueryParams()
	for k := range qp {
		switch k {
		case "state", "live_ref", "claude_session_id", "node_id", "provider_profile_ref", "workspace_ref", "driver", "attention",
			"limit", "offset", "pagination", "cursor":
		default:
			return apierr.BadRequest("bad_query", "unknown query parameter %q", k)
		}
	}
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

// freshRun is the run's row as the index has it now: its agent pushed
// every change (the index's one writer); runViews marks it unreachable
// while its node has no tunnel (R-STATE-7: the state is never invented).
func (s *Server) freshRun(ctx context.Context, r apitypes.Run) apitypes.Run {
	got, err := s.o.Store.GetRun(ctx, r.RunRef)
	if err != nil || got.Tenant != r.Tenant {
		return r
	}
	return got
}

func (s *Server) getRun(c echo.Context) error {
	r, err := s.refRun(c)
	if err != nil {
		return err
	}
	// Served from the index, with no call to the node (issue 24): the
	// row's indexed_at and node_reachable say how fresh it is.
	return s.respondRun(c, http.StatusOK, r)
}

func (s *Server) runEvents(c echo.Context) error {
	ctx := c.Request().Context()
	r, err := s.refRun(c)
	if err != nil {
		return err
	}
	if err := onlyParams(c, "after", "limit"); err != nil {
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

// runCall forwards a run op to the run's node and, for ops answering a
// row, indexes it.
func (s *Server) runCall(c echo.Context, op string, params, result any, timeout time.Duration) (apitypes.Run, error) {
	ctx := c.Request().Context()
	r, err := s.refRun(c)
	if err != nil {
		return apitypes.Run{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := s.o.Fleet.Call(cctx, r.NodeID, wire.Header{Op: op, RunRef: r.RunRef}, params, result); err != nil {
		return r, err
	}
	return r, nil
}

func (s *Server) input(c echo.Context) error {
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

func (s *Server) interrupt(c echo.Context) error {
	if err := noBody(c); err != nil {
		return err
	}
	var out apitypes.Accepted
	if _, err := s.runCall(c, proto.OpRunInterrupt, nil, &out, callTimeout); err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, out)
}

func (s *Server) stop(c echo.Context) error {
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
func (s *Server) stopRun(ctx context.Context, tenant string, actor apitypes.AuditActor, r apitypes.Run) (apitypes.Run, error) {
	var out apitypes.Run
	// The agent answers once the exit is observed: up to the grace and
	// the SIGKILL after it.
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := s.o.Fleet.Call(cctx, r.NodeID, wire.Header{Op: proto.OpRunStop, RunRef: r.RunRef}, nil, &out); err != nil {
		return apitypes.Run{}, err
	}
	out.NodeID, out.Tenant = r.NodeID, r.Tenant
	if apitypes.Live(r.State) || r.State == apitypes.StatePendingApproval { // R-AUD-2: a no-op stop writes nothing
		s.Audit(ctx, tenant, actor, apitypes.AuditRunStopped, apitypes.AuditTarget{RunRef: r.RunRef, NodeID: r.NodeID}, map[string]any{"exit_code": out.ExitCode, "state": out.State})
	}
	return s.index(ctx, out), nil
}

func (s *Server) resume(c echo.Context) error {
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
func (s *Server) startGeneration(c echo.Context, op string) (apitypes.Run, error) {
	ctx := c.Request().Context()
	r, err := s.refRun(c)
	if err != nil {
		return apitypes.Run{}, err
	}
	grants, err := s.runGrants(ctx, r)
	if err != nil {
		return apitypes.Run{}, err
	}
	gate, err := s.gate(ctx, r.WorkspaceRef)
	if err != nil {
		return apitypes.Run{}, err
	}
	var out apitypes.Run
	r, err = s.runCall(c, op, proto.RunResume{Grants: grants, Gate: gate}, &out, callTimeout)
	if err != nil {
		return apitypes.Run{}, err
	}
	out.NodeID, out.Tenant = r.NodeID, r.Tenant
	return out, nil
}

// auditStart records a run's start or resume, and the grants it was handed
// by kind and secret ref, never their values (R-AUD-6).
func (s *Server) auditStart(c echo.Context, event string, r apitypes.Run, grants []store.GrantRef, detail map[string]any) {
	target := apitypes.AuditTarget{RunRef: r.RunRef, NodeID: r.NodeID}
	s.auditCaller(c, event, target, detail)
	if len(grants) == 0 {
		return
	}
	gs := make([]map[string]any, 0, len(grants))
	for _, g := range grants {
		gs = append(gs, map[string]any{"kind": g.Kind, "secret_ref": g.SecretRef, "env": g.Env, "as_file": g.AsFile})
	}
	s.auditCaller(c, apitypes.AuditRunGranted, target, map[string]any{"on": event, "grants": gs})
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
func (s *Server) approveRun(c echo.Context) error {
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
func (s *Server) attach(c echo.Context) error {
	ctx := c.Request().Context()
	r, err := s.refRun(c)
	if err != nil {
		return err
	}
	if err := onlyParams(c, "from"); err != nil {
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
	w := c.Response()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sink := responseSink{w: w, rc: http.NewResponseController(w)}
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

// responseSink is an SSE response as the relay writes it.
type responseSink struct {
	w  *echo.Response
	rc *http.ResponseController
}

func (s responseSink) Write(p []byte) (int, error)        { return s.w.Write(p) }
func (s responseSink) SetWriteDeadline(t time.Time) error { return s.rc.SetWriteDeadline(t) }
func (s responseSink) Flush() error                       { return s.rc.Flush() }

// move re-attaches a stopped or failed Claude Code run to another profile
// of the same tool on its node (R-MOVE-*). Nothing starts.
func (s *Server) move(c echo.Context) error {
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
func (s *Server) moveRun(ctx context.Context, tenant string, r apitypes.Run, profileRef string) (apitypes.Run, error) {
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
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := s.o.Fleet.Call(cctx, r.NodeID, wire.Header{Op: proto.OpRunMove, RunRef: r.RunRef}, proto.RunMove{ProfileRef: p.Ref}, &out); err != nil {
		return apitypes.Run{}, err
	}
	out.NodeID, out.Tenant = r.NodeID, r.Tenant
	return s.index(ctx, out), nil
}
