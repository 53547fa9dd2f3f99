package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Principals is GET /v1/principals: the tenant's principals (admin).
func (c *Client) Principals(ctx context.Context) (apitypes.PrincipalList, error) {
	var l apitypes.PrincipalList
	return l, c.get(ctx, "/v1/principals", nil, &l)
}

// Principal is GET /v1/principals/{id}, with its credentials.
func (c *Client) Principal(ctx context.Context, id string) (apitypes.Principal, error) {
	var p apitypes.Principal
	return p, c.get(ctx, "/v1/principals/"+esc(id), nil, &p)
}

// CreatePrincipal is POST /v1/principals: a principal with a role in the
// tenant and its first token, shown once.
func (c *Client) CreatePrincipal(ctx context.Context, req apitypes.PrincipalCreate) (apitypes.PrincipalCreated, error) {
	var out apitypes.PrincipalCreated
	return out, c.call(ctx, http.MethodPost, "/v1/principals", req, &out)
}

// RevokePrincipal is POST /v1/principals/{id}/revoke: its role in the
// tenant goes, and its tokens with it when it has no other tenant.
func (c *Client) RevokePrincipal(ctx context.Context, id string) (apitypes.PrincipalRevoked, error) {
	var out apitypes.PrincipalRevoked
	return out, c.call(ctx, http.MethodPost, "/v1/principals/"+esc(id)+"/revoke", nil, &out)
}

// CreateCredential is POST /v1/principals/{id}/credentials: another token
// of the principal, shown once.
func (c *Client) CreateCredential(ctx context.Context, principalID string, req apitypes.CredentialCreate) (apitypes.CredentialCreated, error) {
	var out apitypes.CredentialCreated
	return out, c.call(ctx, http.MethodPost, "/v1/principals/"+esc(principalID)+"/credentials", req, &out)
}

// Credentials is GET /v1/credentials: the credentials of the tenant's
// principals, or of one (principalID != "").
func (c *Client) Credentials(ctx context.Context, principalID string) (apitypes.CredentialList, error) {
	var l apitypes.CredentialList
	q := url.Values{}
	setStr(q, "principal", principalID)
	return l, c.get(ctx, "/v1/credentials", q, &l)
}

// RevokeCredential is POST /v1/credentials/{id}/revoke: the token stops
// working at once.
func (c *Client) RevokeCredential(ctx context.Context, id string) (apitypes.Credential, error) {
	var out apitypes.Credential
	return out, c.call(ctx, http.MethodPost, "/v1/credentials/"+esc(id)+"/revoke", nil, &out)
}

// Login is POST /v1/login: a new credential of the caller's principal and
// kind, for the CLI to keep.
func (c *Client) Login(ctx context.Context, label string) (apitypes.CredentialCreated, error) {
	var out apitypes.CredentialCreated
	return out, c.call(ctx, http.MethodPost, "/v1/login", apitypes.LoginRequest{Label: label}, &out)
}

// Logout is POST /v1/logout: the credential the client presents is
// revoked.
func (c *Client) Logout(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "/v1/logout", nil, nil)
}

// ForgetNode is DELETE /v1/nodes/{id}: a revoked node leaves the registry,
// with its profiles and workspaces.
func (c *Client) ForgetNode(ctx context.Context, id string) (apitypes.NodeForgotten, error) {
	var out apitypes.NodeForgotten
	return out, c.call(ctx, http.MethodDelete, "/v1/nodes/"+esc(id), nil, &out)
}

// DeleteProfile is DELETE /profiles/{ref} (409 while a run needs it).
func (c *Client) DeleteProfile(ctx context.Context, ref string) error {
	return c.call(ctx, http.MethodDelete, Base+"/profiles/"+esc(ref), nil, nil)
}

// DeleteWorkspace is DELETE /workspaces/{ref} (409 while a run needs it).
func (c *Client) DeleteWorkspace(ctx context.Context, ref string) error {
	return c.call(ctx, http.MethodDelete, Base+"/workspaces/"+esc(ref), nil, nil)
}
