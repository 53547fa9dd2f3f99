package apiclient

import (
	"context"
	"net/http"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// CreateProfile is POST /profiles: a provider profile on a node.
func (c *Client) CreateProfile(ctx context.Context, req apitypes.ProfileCreate) (apitypes.Profile, error) {
	var p apitypes.Profile
	return p, c.call(ctx, http.MethodPost, Base+"/profiles", req, &p)
}

// Profiles is GET /profiles.
func (c *Client) Profiles(ctx context.Context) (apitypes.ProfileList, error) {
	var l apitypes.ProfileList
	return l, c.get(ctx, Base+"/profiles", nil, &l)
}

// Profile is GET /profiles/{ref}.
func (c *Client) Profile(ctx context.Context, ref string) (apitypes.Profile, error) {
	var p apitypes.Profile
	return p, c.get(ctx, Base+"/profiles/"+esc(ref), nil, &p)
}

// UpdateProfile is PATCH /profiles/{ref}: the policy fields set in req
// change, from the next launch or resume on.
func (c *Client) UpdateProfile(ctx context.Context, ref string, req apitypes.ProfileUpdate) (apitypes.Profile, error) {
	var p apitypes.Profile
	return p, c.call(ctx, http.MethodPatch, Base+"/profiles/"+esc(ref), req, &p)
}

// CreateWorkspace is POST /workspaces: a directory of a node.
func (c *Client) CreateWorkspace(ctx context.Context, req apitypes.WorkspaceCreate) (apitypes.Workspace, error) {
	var w apitypes.Workspace
	return w, c.call(ctx, http.MethodPost, Base+"/workspaces", req, &w)
}

// Workspaces is GET /workspaces.
func (c *Client) Workspaces(ctx context.Context) (apitypes.WorkspaceList, error) {
	var l apitypes.WorkspaceList
	return l, c.get(ctx, Base+"/workspaces", nil, &l)
}

// Workspace is GET /workspaces/{ref}.
func (c *Client) Workspace(ctx context.Context, ref string) (apitypes.Workspace, error) {
	var w apitypes.Workspace
	return w, c.get(ctx, Base+"/workspaces/"+esc(ref), nil, &w)
}

// SetSetupCommand is PUT /workspaces/{ref}/setup-command: the exact text
// of the workspace's setup command ("" clears it).
func (c *Client) SetSetupCommand(ctx context.Context, ref, command string) (apitypes.Workspace, error) {
	var w apitypes.Workspace
	return w, c.call(ctx, http.MethodPut, Base+"/workspaces/"+esc(ref)+"/setup-command", apitypes.SetupCommandRequest{Command: &command}, &w)
}

// ApproveSetup is POST /workspaces/{ref}/setup-command/approve with the
// sha256 of the text the person reviewed.
func (c *Client) ApproveSetup(ctx context.Context, ref, sha256 string) (apitypes.Workspace, error) {
	var w apitypes.Workspace
	return w, c.call(ctx, http.MethodPost, Base+"/workspaces/"+esc(ref)+"/setup-command/approve", apitypes.ApproveRequest{SHA256: &sha256}, &w)
}

// ProjectConfig is GET /workspaces/{ref}/project-config: the agent
// configuration the repository carries, flagged per file.
func (c *Client) ProjectConfig(ctx context.Context, ref string) (apitypes.ProjectConfig, error) {
	var pc apitypes.ProjectConfig
	return pc, c.get(ctx, Base+"/workspaces/"+esc(ref)+"/project-config", nil, &pc)
}

// ApproveProjectConfig is POST /workspaces/{ref}/project-config/approve
// with the sha256 the person reviewed.
func (c *Client) ApproveProjectConfig(ctx context.Context, ref, sha256 string) (apitypes.ProjectConfig, error) {
	var pc apitypes.ProjectConfig
	return pc, c.call(ctx, http.MethodPost, Base+"/workspaces/"+esc(ref)+"/project-config/approve", apitypes.ApproveRequest{SHA256: &sha256}, &pc)
}

// CreateSecret is POST /vault/secrets.
func (c *Client) CreateSecret(ctx context.Context, name, value string) (apitypes.Secret, error) {
	var s apitypes.Secret
	return s, c.call(ctx, http.MethodPost, Base+"/vault/secrets", apitypes.SecretCreate{Name: name, Value: &value}, &s)
}

// Secrets is GET /vault/secrets: names and refs, never values.
func (c *Client) Secrets(ctx context.Context) (apitypes.SecretList, error) {
	var l apitypes.SecretList
	return l, c.get(ctx, Base+"/vault/secrets", nil, &l)
}

// DeleteSecret is DELETE /vault/secrets/{ref}.
func (c *Client) DeleteSecret(ctx context.Context, ref string) error {
	return c.call(ctx, http.MethodDelete, Base+"/vault/secrets/"+esc(ref), nil, nil)
}

// StartSignin is POST /profiles/{ref}/signin: the tool's own sign-in on
// the profile's node (R-ACCT-1).
func (c *Client) StartSignin(ctx context.Context, ref string) (apitypes.SigninAttempt, error) {
	var a apitypes.SigninAttempt
	return a, c.call(ctx, http.MethodPost, Base+"/profiles/"+esc(ref)+"/signin", nil, &a)
}

// Signin is GET /profiles/{ref}/signin/{id}.
func (c *Client) Signin(ctx context.Context, ref, id string) (apitypes.SigninAttempt, error) {
	var a apitypes.SigninAttempt
	return a, c.get(ctx, Base+"/profiles/"+esc(ref)+"/signin/"+esc(id), nil, &a)
}

// SigninCode is POST /profiles/{ref}/signin/{id}/code: the pasted code.
func (c *Client) SigninCode(ctx context.Context, ref, id, code string) (apitypes.SigninAttempt, error) {
	var a apitypes.SigninAttempt
	return a, c.call(ctx, http.MethodPost, Base+"/profiles/"+esc(ref)+"/signin/"+esc(id)+"/code", apitypes.SigninCode{Code: code}, &a)
}

// CancelSignin is DELETE /profiles/{ref}/signin/{id}.
func (c *Client) CancelSignin(ctx context.Context, ref, id string) (apitypes.SigninAttempt, error) {
	var a apitypes.SigninAttempt
	return a, c.call(ctx, http.MethodDelete, Base+"/profiles/"+esc(ref)+"/signin/"+esc(id), nil, &a)
}

// ProfileAccount is GET /profiles/{ref}/account (R-ACCT-9).
func (c *Client) ProfileAccount(ctx context.Context, ref string) (apitypes.ProfileAccount, error) {
	var a apitypes.ProfileAccount
	return a, c.get(ctx, Base+"/profiles/"+esc(ref)+"/account", nil, &a)
}
