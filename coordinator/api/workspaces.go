package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// maxSetupCommand is R-SETUP-3's bound on the setup command, in bytes.
const maxSetupCommand = 8192

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (s *Server) workspaceRoutes() []Route {
	return []Route{
		// R-AUTH-5: reading is run:read; the setup command and its approval
		// are workspace administration, and approvals refuse an agent
		// identity (R-AUTH-6).
		{http.MethodGet, Base + "/workspaces/:ref", auth.PermRunRead, s.getWorkspace},
		{http.MethodPut, Base + "/workspaces/:ref/setup-command", auth.PermWorkspaceAdmin, s.putSetupCommand},
		{http.MethodPost, Base + "/workspaces/:ref/setup-command/approve", auth.PermWorkspaceAdmin, s.approveSetup},
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

// workspaceInTenant loads a registered workspace; another tenant's is a
// 404 (R-TEN-3).
func (s *Server) workspaceInTenant(c echo.Context, ref string) (apitypes.Workspace, error) {
	w, err := s.o.Store.GetWorkspace(c.Request().Context(), ref)
	if errors.Is(err, store.ErrNotFound) || (err == nil && w.Tenant != CallerOf(c).Tenant) {
		return apitypes.Workspace{}, apierr.NotFound("workspace", ref)
	}
	return w, err
}

func (s *Server) getWorkspace(c echo.Context) error {
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

// refuseAgent is R-AUTH-6: the approval routes refuse an agent identity,
// whatever it holds.
func refuseAgent(c echo.Context) error {
	if CallerOf(c).Principal.Kind == store.KindAgent {
		return apierr.New(http.StatusForbidden, "agent_identity_refused", "an approval needs a person: agent identities may not approve, even with workspace administration")
	}
	return nil
}

// putSetupCommand is R-SETUP-3/4: the exact UTF-8 text, at most 8192 bytes,
// no NUL; empty clears. Nothing runs it (R-SETUP-2).
func (s *Server) putSetupCommand(c echo.Context) error {
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
func (s *Server) workspaceAudit(c echo.Context, event, ref string, detail any) apitypes.AuditEntry {
	e := s.auditEntry(c, event, "")
	e.Target = apitypes.AuditTarget{WorkspaceRef: ref}
	if detail != nil {
		e.Detail = mustJSON(detail)
	}
	return e
}

// readApproval decodes an approval body: a 64-hex sha256 (400 otherwise,
// R-SETUP-12).
func readApproval(c echo.Context) (string, error) {
	var req apitypes.ApproveRequest
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return "", err
	}
	if req.SHA256 == nil || !sha256RE.MatchString(*req.SHA256) {
		return "", apierr.BadRequest("bad_sha256", "sha256 must be the 64 lower-case hex digits of the hash you reviewed")
	}
	return *req.SHA256, nil
}

// approveSetup is R-SETUP-7: the reviewed hash must be the current text's
// (a concurrent edit, or any other mismatch, is 409, Q-04); the approval and
// its audit entry commit together. Approving again writes a new record
// (each is a separate review).
func (s *Server) approveSetup(c echo.Context) error {
	if err := refuseAgent(c); err != nil {
		return err
	}
	w, err := s.refWorkspace(c)
	if err != nil {
		return err
	}
	sha, err := readApproval(c)
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

// setupRefusal is the R-SETUP-8 refusal of a worktree launch, or "" when it
// may go on: no command, an approval of the current text, or no_setup
// (R-CRT-3, R-SETUP-11).
// setupToRun is the setup command a worktree launch's agent runs before
// the tool under sandbox (R-SETUP-2): the stored text, when it is approved
// for exactly that text and the launch does not skip it (R-SETUP-11).
func setupToRun(st store.WorkspaceSettings, noSetup bool) string {
	if noSetup || !setupApproved(st) {
		return ""
	}
	return st.SetupCommand
}

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

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with maps of strings and numbers
	}
	return b
}

// projectConfigRoutes are R-PCS-10/11's routes (R-AUTH-5: reading is
// run:read; approving is workspace administration by a person).
func (s *Server) projectConfigRoutes() []Route {
	return []Route{
		{http.MethodGet, Base + "/workspaces/:ref/project-config", auth.PermRunRead, s.getProjectConfig},
		{http.MethodPost, Base + "/workspaces/:ref/project-config/approve", auth.PermWorkspaceAdmin, s.approveProjectConfig},
	}
}

// scanProjectConfig asks the workspace's node to scan it now (R-PCS-10: it
// reads the registered folder itself).
func (s *Server) scanProjectConfig(c echo.Context, w apitypes.Workspace) (apitypes.ProjectConfig, error) {
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

func (s *Server) getProjectConfig(c echo.Context) error {
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
func (s *Server) approveProjectConfig(c echo.Context) error {
	if err := refuseAgent(c); err != nil {
		return err
	}
	w, err := s.refWorkspace(c)
	if err != nil {
		return err
	}
	sha, err := readApproval(c)
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

// gate is what a start of a run in workspace ref needs for its
// project-config check (R-PCS-12): the hash of the last approval.
func (s *Server) gate(ctx context.Context, workspaceRef string) (proto.Gate, error) {
	if workspaceRef == "" {
		return proto.Gate{}, nil
	}
	st, err := s.o.Store.GetWorkspaceSettings(ctx, workspaceRef)
	if errors.Is(err, store.ErrNotFound) {
		return proto.Gate{}, nil
	}
	if err != nil {
		return proto.Gate{}, err
	}
	if st.ProjectConfigApproval == nil {
		return proto.Gate{}, nil
	}
	return proto.Gate{ProjectConfigApproved: st.ProjectConfigApproval.SHA256}, nil
}
