package apitypes

import "time"

// Principal is one person or automation identity as an administrator of a
// tenant sees it (GET /v1/principals): its role in that tenant only, never
// its other tenants.
type Principal struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Kind      string    `json:"kind"` // human | agent
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
	// Credentials are its bearer tokens, by public id (never the token
	// or its hash). Only GET /v1/principals/{id} fills them.
	Credentials []Credential `json:"credentials,omitempty"`
}

// PrincipalList is GET /v1/principals.
type PrincipalList struct {
	Items []Principal `json:"items"`
}

// PrincipalCreate is POST /v1/principals: a principal with a role in the
// caller's tenant. Names are unique within a tenant.
type PrincipalCreate struct {
	Name string `json:"name"`
	Role string `json:"role"` // viewer | operator | admin
	Kind string `json:"kind"` // human (default) | agent
}

// PrincipalCreated is POST /v1/principals' answer: the principal and its
// first token, shown once.
type PrincipalCreated struct {
	Principal    Principal `json:"principal"`
	CredentialID string    `json:"credential_id"`
	Token        string    `json:"token"`
}

// PrincipalRevoked is POST /v1/principals/{id}/revoke's answer.
type PrincipalRevoked struct {
	ID string `json:"id"`
	// Tenant is the tenant its role was removed from.
	Tenant string `json:"tenant"`
	// CredentialsRevoked counts the tokens deleted with it: all of them
	// when it holds a role in no other tenant, none otherwise.
	CredentialsRevoked int `json:"credentials_revoked"`
}

// Credential kinds (R-AUTH-9).
const (
	CredentialSession  = "session"
	CredentialAPIToken = "api_token"
)

// Credential is one bearer token of a principal, by its public id.
type Credential struct {
	ID          string     `json:"id"`
	PrincipalID string     `json:"principal_id"`
	Kind        string     `json:"kind"` // session | api_token
	Label       string     `json:"label,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	// Tenant is the one tenant the credential authenticates in, or "*"
	// for a person's own sign-in, which serves all their tenants; absent
	// on a credential stored before credentials had a tenant (R-LIFE-9).
	Tenant string `json:"tenant,omitempty"`
	// ParentID is the credential this one was derived from (POST
	// /v1/login, POST /v1/signin with a token): it expires no later and is
	// revoked with it.
	ParentID string `json:"parent_id,omitempty"`
	// Current marks the credential the request itself presented.
	Current bool `json:"current,omitempty"`
	// DerivedRevoked, on a revocation's answer, counts the credentials
	// derived from this one that were revoked with it.
	DerivedRevoked *int `json:"derived_revoked,omitempty"`
}

// CredentialList is GET /v1/credentials.
type CredentialList struct {
	Items []Credential `json:"items"`
}

// CredentialCreate is POST /v1/principals/{id}/credentials.
type CredentialCreate struct {
	Kind  string `json:"kind,omitempty"` // session (default) | api_token
	Label string `json:"label,omitempty"`
}

// CredentialCreated carries a new token, shown once.
type CredentialCreated struct {
	Credential Credential `json:"credential"`
	Token      string     `json:"token"`
}

// LoginRequest is POST /v1/login: the CLI trades the token it was given
// for a credential of its own, which `olivares logout` can revoke without
// touching the token that was pasted.
type LoginRequest struct {
	// Label names where the credential lives ("olivares login on HOST").
	Label string `json:"label,omitempty"`
}
