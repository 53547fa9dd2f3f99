package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// maxSetupCommand is R-SETUP-3's bound on the setup command, in bytes.
const maxSetupCommand = 8192

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// workspaceAPI serves the workspaces and profiles: registering, reading, deleting, the setup command and the project config and their approvals.
type workspaceAPI struct{ *core }

func (s *workspaceAPI) routes() []Route {
	return []Route{
		// Profiles and workspaces: reading is run:read; registering one is
		// workspace administration (R-AUTH-5 models it as its own
		// permission; the seeds name no profile permission).
		{http.MethodPost, Base + "/profiles", auth.PermWorkspaceAdmin, created(s.createProfile), nil},
		{http.MethodGet, Base + "/profiles", auth.PermRunRead, s.listProfiles, nil},
		{http.MethodGet, Base + "/profiles/:ref", auth.PermRunRead, s.getProfile, nil},
		{http.MethodPatch, Base + "/profiles/:ref", auth.PermWorkspaceAdmin, s.updateProfile, nil},
		{http.MethodPost, Base + "/workspaces", auth.PermWorkspaceAdmin, created(s.createWorkspace), nil},
		{http.MethodGet, Base + "/workspaces", auth.PermRunRead, s.listWorkspaces, nil},
		// R-AUTH-5: reading is run:read; the setup command and its approval
		// are workspace administration, and approvals refuse an agent
		// identity (R-AUTH-6).
		{http.MethodGet, Base + "/workspaces/:ref", auth.PermRunRead, s.getWorkspace, nil},
		{http.MethodPut, Base + "/workspaces/:ref/setup-command", auth.PermWorkspaceAdmin, s.putSetupCommand, nil},
		{http.MethodPost, Base + "/workspaces/:ref/setup-command/approve", auth.PermWorkspaceAdmin, s.approveSetup, nil},
		// Deleting a profile or workspace needs workspace administration,
		// like creating one (issue 21).
		{http.MethodDelete, Base + "/profiles/:ref", auth.PermWorkspaceAdmin, s.deleteProfile, nil},
		{http.MethodDelete, Base + "/workspaces/:ref", auth.PermWorkspaceAdmin, s.deleteWorkspace, nil},
		// R-PCS-10/11: reading is run:read; approving is workspace
		// administration by a person.
		{http.MethodGet, Base + "/workspaces/:ref/project-config", auth.PermRunRead, s.getProjectConfig, nil},
		{http.MethodPost, Base + "/workspaces/:ref/project-config/approve", auth.PermWorkspaceAdmin, s.approveProjectConfig, nil},
	}
}

// hashText is the lowercase hex SHA-256 of the exact bytes (R-SETUP-12).
func hashText(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func approvalState(a *store.Approval) *apitypes.ApprovalState {
	if a == nil {
		return nil
	}
	return &apitypes.ApprovalState{SHA256: a.SHA256, Actor: a.Actor, At: a.At.UTC()}
}

// setupApproved: an approval applies only while its hash is the current
// text's (R-SETUP-5, R-SETUP-9). Without a command there is nothing to
// approve and setup_approved is false (R-SETUP-12).
func setupApproved(st store.WorkspaceSettings) bool {
	return st.SetupCommand != "" && st.SetupApproval != nil && st.SetupApproval.SHA256 == hashText(st.SetupCommand)
}

// workspaceView is GET /workspaces/{ref}: the registration and the setup
// command with its approval state (R-SETUP-5, R-SETUP-6).
func workspaceView(w apitypes.Workspace, st store.WorkspaceSettings) apitypes.Workspace {
	cmd := st.SetupCommand
	approved := setupApproved(st)
	w.SetupCommand, w.SetupApproved = &cmd, &approved
	w.SetupCommandSHA256 = ""
	if cmd != "" {
		w.SetupCommandSHA256 = hashText(cmd)
	}
	w.SetupApproval = approvalState(st.SetupApproval)
	return w
}

func (s *workspaceAPI) getWorkspace(c echo.Context) error {
	w, err := s.refWorkspace(c)
	if err != nil {
		return err
	}
	st, err := s.o.Store.GetWorkspaceSettings(c.Request().Context(), w.Ref)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, workspaceView(w, st))
}

// putSetupCommand is R-SETUP-3/4: the exact UTF-8 text, at most 8192 bytes,
// no NUL; empty clears. Nothing runs it (R-SETUP-2).
func (s *workspaceAPI) putSetupCommand(c echo.Context) error {
	w, err := s.refWorkspace(c)
	if err != nil {
		return err
	}
	raw, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, maxJSONBody))
	if err != nil {
		return apierr.New(http.StatusRequestEntityTooLarge, "body_too_large", "the request body is over %d bytes", maxJSONBody)
	}
	// encoding/json turns invalid UTF-8 into U+FFFD: check the bytes first.
	if !utf8.Valid(raw) {
		return apierr.BadRequest("bad_command", "the body is not valid UTF-8; the setup command must be UTF-8 text")
	}
	c.Request().Body = io.NopCloser(strings.NewReader(string(raw)))
	var req apitypes.SetupCommandRequest
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	switch {
	case req.Command == nil:
		return apierr.BadRequest("bad_command", "command is required (an empty string clears it)")
	case len(*req.Command) > maxSetupCommand:
		return apierr.BadRequest("bad_command", "the setup command is %d bytes; at most %d are allowed", len(*req.Command), maxSetupCommand)
	case strings.ContainsRune(*req.Command, 0):
		return apierr.BadRequest("bad_command", "the setup command holds a NUL byte")
	}
	cmd := *req.Command
	st, err := s.o.Store.UpdateWorkspaceSettings(c.Request().Context(), w.Ref, func(st *store.WorkspaceSettings) (*apitypes.AuditEntry, error) {
		if st.SetupCommand == cmd {
			return nil, nil // the same text: the hash and any approval stand (R-SETUP-9)
		}
		st.SetupCommand = cmd
		e := s.workspaceAudit(c, apitypes.AuditWorkspaceSetupSet, w.Ref, map[string]string{"sha256": hashOrEmpty(cmd)})
		return &e, nil
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, workspaceView(w, st))
}

func hashOrEmpty(s string) string {
	if s == "" {
		return ""
	}
	return hashText(s)
}

// workspaceAudit is an audit row by the caller about a workspace.
func (s *workspaceAPI) workspaceAudit(c echo.Context, event, ref string, detail any) apitypes.AuditEntry {
	e := s.auditEntry(c, event, "")
	e.Target = apitypes.AuditTarget{WorkspaceRef: ref}
	if detail != nil {
		e.Detail = mustJSON(detail)
	}
	return e
}

// approval is what a person approves (R-AUTH-6): the route's workspace and
// the body's 64-hex sha256 of what they reviewed (400 otherwise,
// R-SETUP-12).
func (s *workspaceAPI) approval(c echo.Context) (apitypes.Workspace, string, error) {
	if err := refuseAgent(c); err != nil {
		return apitypes.Workspace{}, "", err
	}
	w, err := s.refWorkspace(c)
	if err != nil {
		return apitypes.Workspace{}, "", err
	}
	var req apitypes.ApproveRequest
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return apitypes.Workspace{}, "", err
	}
	if req.SHA256 == nil || !sha256RE.MatchString(*req.SHA256) {
		return apitypes.Workspace{}, "", apierr.BadRequest("bad_sha256", "sha256 must be the 64 lower-case hex digits of the hash you reviewed")
	}
	return w, *req.SHA256, nil
}

// approveSetup is R-SETUP-7: the reviewed hash must be the current text's
// (a concurrent edit, or any other mismatch, is 409, Q-04); the approval and
// its audit entry commit together. Approving again writes a new record
// (each is a separate review).
func (s *workspaceAPI) approveSetup(c echo.Context) error {
	w, sha, err := s.approval(c)
	if err != nil {
		return err
	}
	st, err := s.o.Store.UpdateWorkspaceSettings(c.Request().Context(), w.Ref, func(st *store.WorkspaceSettings) (*apitypes.AuditEntry, error) {
		if st.SetupCommand == "" {
			return nil, apierr.New(http.StatusConflict, "no_setup_command", "workspace %s has no setup command to approve", w.Ref)
		}
		if cur := hashText(st.SetupCommand); cur != sha {
			return nil, apierr.New(http.StatusConflict, "setup_changed", "the setup command is not the text you reviewed (it hashes to %s now); read it again with olivares agent workspace setup %s", cur, w.Ref)
		}
		now := s.o.Now().UTC()
		st.SetupApproval = &store.Approval{SHA256: sha, Actor: CallerOf(c).Actor().CredentialID, At: now}
		e := s.workspaceAudit(c, apitypes.AuditWorkspaceApproveSetup, w.Ref, map[string]string{"sha256": sha})
		return &e, nil
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, workspaceView(w, st))
}

// setupToRun is the setup command a worktree launch's agent runs before
// the tool under sandbox (R-SETUP-2): the stored text, when it is approved
// for exactly that text and the launch does not skip it (R-SETUP-11).
func setupToRun(st store.WorkspaceSettings, noSetup bool) string {
	if noSetup || !setupApproved(st) {
		return ""
	}
	return st.SetupCommand
}

// setupRefusal is the R-SETUP-8 refusal of a worktree launch, or "" when it
// may go on: no command, an approval of the current text, or no_setup
// (R-CRT-3, R-SETUP-11).
func setupRefusal(w apitypes.Workspace, st store.WorkspaceSettings, noSetup bool) string {
	if noSetup || st.SetupCommand == "" || setupApproved(st) {
		return ""
	}
	return "setup command " + quoteShort(st.SetupCommand) + " of workspace " + w.Ref + " is not approved; review it and run olivares agent workspace approve-setup " +
		w.Ref + " --sha256 " + hashText(st.SetupCommand) + " (or launch with no_setup to skip it once)"
}

// quoteShort quotes s for a message, cut at 200 bytes on a rune boundary.
func quoteShort(s string) string {
	if len(s) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// scanProjectConfig asks the workspace's node to scan it now (R-PCS-10: it
// reads the registered folder itself).
func (s *workspaceAPI) scanProjectConfig(c echo.Context, w apitypes.Workspace) (apitypes.ProjectConfig, error) {
	var pc apitypes.ProjectConfig
	err := s.call(c.Request().Context(), w.NodeID, wire.Header{Op: proto.OpProjectConfig},
		proto.ProjectConfigScan{WorkspaceRef: w.Ref, Tenant: w.Tenant}, &pc)
	return pc, err
}

func projectConfigView(pc apitypes.ProjectConfig, st store.WorkspaceSettings) apitypes.ProjectConfig {
	pc.Approval = approvalState(st.ProjectConfigApproval)
	pc.Approved = pc.SHA256 != "" && st.ProjectConfigApproval != nil && st.ProjectConfigApproval.SHA256 == pc.SHA256
	if pc.Files == nil {
		pc.Files = []apitypes.ProjectConfigFile{}
	}
	return pc
}

func (s *workspaceAPI) getProjectConfig(c echo.Context) error {
	w, err := s.refWorkspace(c)
	if err != nil {
		return err
	}
	pc, err := s.scanProjectConfig(c, w)
	if err != nil {
		return err
	}
	st, err := s.o.Store.GetWorkspaceSettings(c.Request().Context(), w.Ref)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, projectConfigView(pc, st))
}

// approveProjectConfig is R-PCS-11: the reviewed hash must be the current
// flagged part's (409 otherwise, Q-05); who, when and the hash are stored
// with the audit entry in one transaction.
func (s *workspaceAPI) approveProjectConfig(c echo.Context) error {
	w, sha, err := s.approval(c)
	if err != nil {
		return err
	}
	pc, err := s.scanProjectConfig(c, w)
	if err != nil {
		return err
	}
	switch {
	case pc.SHA256 == "":
		return apierr.New(http.StatusConflict, "nothing_flagged", "workspace %s carries no flagged agent configuration; there is nothing to approve", w.Ref)
	case pc.SHA256 != sha:
		return apierr.New(http.StatusConflict, "project_config_changed", "the flagged configuration of workspace %s is not what you reviewed (it hashes to %s now); read it again with olivares agent workspace project-config %s", w.Ref, pc.SHA256, w.Ref)
	}
	st, err := s.o.Store.UpdateWorkspaceSettings(c.Request().Context(), w.Ref, func(st *store.WorkspaceSettings) (*apitypes.AuditEntry, error) {
		st.ProjectConfigApproval = &store.Approval{SHA256: sha, Actor: CallerOf(c).Actor().CredentialID, At: s.o.Now().UTC()}
		e := s.workspaceAudit(c, apitypes.AuditWorkspaceApprovePCfg, w.Ref, map[string]string{"sha256": sha})
		return &e, nil
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, projectConfigView(pc, st))
}

// deleteRecord deletes a profile or workspace on its node, then in the
// index (R-LIFE-3). The node decides whether a run still needs it (409
// in_use) under the lock its starts take, so nothing starts with a
// half-deleted record. An index delete that fails after the node's is
// repaired by repeating the request: the node then answers not_found,
// which counts as done. A revoked node's records go from the index only:
// nothing can start there again.
func (s *workspaceAPI) deleteRecord(c echo.Context, op, node, ref string, del func(context.Context, apitypes.AuditEntry) error, e apitypes.AuditEntry) error {
	ctx := c.Request().Context()
	n, err := s.o.Store.GetNode(ctx, node)
	revoked := errors.Is(err, store.ErrNotFound) || (err == nil && !n.RevokedAt.IsZero())
	if err != nil && !revoked {
		return err
	}
	if !revoked {
		err := s.call(ctx, node, wire.Header{Op: op}, proto.RecordDelete{Ref: ref, Tenant: CallerOf(c).Tenant}, nil)
		var we *wire.Error
		if err != nil && !(errors.As(err, &we) && we.Status == http.StatusNotFound && we.Code == "not_found") {
			return err
		}
	}
	if err := del(ctx, e); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *workspaceAPI) deleteProfile(c echo.Context) error {
	p, err := s.refProfile(c)
	if err != nil {
		return err
	}
	if err := noBody(c); err != nil {
		return err
	}
	cl := CallerOf(c)
	e := apitypes.AuditEntry{At: s.o.Now().UTC(), Tenant: cl.Tenant, Actor: cl.Actor(), Event: apitypes.AuditProfileDeleted,
		Target: apitypes.AuditTarget{ProfileRef: p.Ref, NodeID: p.NodeID}, Detail: mustJSON(map[string]string{"tool": p.Tool})}
	return s.deleteRecord(c, proto.OpProfileDelete, p.NodeID, p.Ref, func(ctx context.Context, e apitypes.AuditEntry) error {
		return s.o.Store.DeleteProfile(ctx, p.Ref, e)
	}, e)
}

func (s *workspaceAPI) deleteWorkspace(c echo.Context) error {
	w, err := s.refWorkspace(c)
	if err != nil {
		return err
	}
	if err := noBody(c); err != nil {
		return err
	}
	cl := CallerOf(c)
	e := apitypes.AuditEntry{At: s.o.Now().UTC(), Tenant: cl.Tenant, Actor: cl.Actor(), Event: apitypes.AuditWorkspaceDeleted,
		Target: apitypes.AuditTarget{WorkspaceRef: w.Ref, NodeID: w.NodeID}}
	return s.deleteRecord(c, proto.OpWorkspaceDelete, w.NodeID, w.Ref, func(ctx context.Context, e apitypes.AuditEntry) error {
		return s.o.Store.DeleteWorkspace(ctx, w.Ref, e)
	}, e)
}

// Tools a profile may name: the contract's (R-DRV-1) and the optional ACP
// drivers.
var tools = []string{"claude", "codex", "grok", "gemini", "opencode"}

// createProfile registers a profile on its node and in the index, and
// audits it as actor (R-AUD-6).
func (s *workspaceAPI) createProfile(ctx context.Context, tenant string, req apitypes.ProfileCreate, actor apitypes.AuditActor) (apitypes.Profile, error) {
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
		if _, err := s.workspaceInTenant(ctx, tenant, w); err != nil {
			return apitypes.Profile{}, err
		}
	}
	plan, err := s.checkOnLimit(ctx, tenant, apitypes.Profile{Tool: req.Tool, Name: req.Name}, req.OnLimit)
	if err != nil {
		return apitypes.Profile{}, err
	}
	if req.APIKeyRef != "" {
		if _, err := s.secretInTenant(ctx, tenant, req.APIKeyRef); err != nil {
			return apitypes.Profile{}, err
		}
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
	// The coordinator keeps the key's ref (R-ACCT-7) and the plan (R-ONL-1).
	p.Tenant, p.NodeID, p.APIKeyRef = tenant, req.NodeID, req.APIKeyRef
	if len(plan) > 0 {
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
	for k, v := range map[string]string{"isolation": p.Isolation, "network": p.Network, "api_key_ref": p.APIKeyRef} {
		if v != "" {
			details[k] = v
		}
	}
	s.Audit(ctx, tenant, actor, apitypes.AuditProfileCreated, apitypes.AuditTarget{ProfileRef: p.Ref, NodeID: p.NodeID}, details)
	return p, nil
}

func (s *workspaceAPI) nameFree(ctx context.Context, tenant, kind, name string) error {
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

// created is POST /profiles and POST /workspaces: make what the body asks
// for as the caller, and answer it.
func created[Req, Out any](make func(ctx context.Context, tenant string, req Req, actor apitypes.AuditActor) (Out, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		var req Req
		if err := decodeStrict(c, maxJSONBody, &req); err != nil {
			return err
		}
		out, err := make(c.Request().Context(), CallerOf(c).Tenant, req, CallerOf(c).Actor())
		if err != nil {
			return err
		}
		return c.JSON(http.StatusCreated, out)
	}
}

func (s *workspaceAPI) listProfiles(c echo.Context) error {
	ps, err := s.o.Store.ListProfiles(c.Request().Context(), CallerOf(c).Tenant)
	return items(c, ps, err)
}

func (s *workspaceAPI) getProfile(c echo.Context) error {
	p, err := s.refProfile(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

// updateProfile is PATCH /profiles/{ref}: the policy applies from the next
// launch or resume on (R-MOVE-10).
func (s *workspaceAPI) updateProfile(c echo.Context) error {
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
			if _, err := s.workspaceInTenant(ctx, tenant, w); err != nil {
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
	if req.APIKeyRef != nil && *req.APIKeyRef != "" {
		if _, err := s.secretInTenant(ctx, tenant, *req.APIKeyRef); err != nil {
			return err
		}
	}
	// The node keeps the rest of the policy; the coordinator the plan
	// (R-ONL-1) and the API key's ref (R-ACCT-7).
	out, nodeReq := p, req
	nodeReq.OnLimit, nodeReq.APIKeyRef = nil, nil
	if (req.OnLimit == nil && req.APIKeyRef == nil) || len(nodeReq.Fields()) > 0 {
		out = apitypes.Profile{}
		if err := s.call(ctx, p.NodeID, wire.Header{Op: proto.OpProfileUpdate}, proto.ProfileUpdate{Ref: p.Ref, Tenant: tenant, ProfileUpdate: nodeReq}, &out); err != nil {
			return err
		}
	}
	out.OnLimit, out.OnLimitSetBy, out.APIKeyRef = p.OnLimit, p.OnLimitSetBy, p.APIKeyRef
	if req.APIKeyRef != nil {
		out.APIKeyRef = *req.APIKeyRef
	}
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
	if req.APIKeyRef != nil {
		detail["api_key_ref"] = *req.APIKeyRef
	}
	s.auditCaller(c, apitypes.AuditProfileUpdated, apitypes.AuditTarget{ProfileRef: p.Ref, NodeID: p.NodeID}, detail)
	return c.JSON(http.StatusOK, out)
}

// createWorkspace registers a directory of a node and audits it as actor.
func (s *workspaceAPI) createWorkspace(ctx context.Context, tenant string, req apitypes.WorkspaceCreate, actor apitypes.AuditActor) (apitypes.Workspace, error) {
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

func (s *workspaceAPI) listWorkspaces(c echo.Context) error {
	ws, err := s.o.Store.ListWorkspaces(c.Request().Context(), CallerOf(c).Tenant)
	return items(c, ws, err)
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
func (s *workspaceAPI) undoRecord(callErr error, node, op, ref, tenant string) {
	var we *wire.Error
	if callErr != nil && errors.As(callErr, &we) && we.Code != "node_call_failed" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
	defer cancel()
	err := s.o.Fleet.Call(ctx, node, wire.Header{Op: op}, proto.RecordDelete{Ref: ref, Tenant: tenant}, nil)
	if err != nil && !(errors.As(err, &we) && we.Status == http.StatusNotFound) {
		s.log.Error("a record the index does not list stays on its node: undoing its creation failed", "op", op, "ref", ref, logging.KeyNodeID, node, logging.Err(err))
	}
}
