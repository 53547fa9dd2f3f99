// Package store is the coordinator's persistence: tenants, principals and
// their credentials, join tokens and the node registry.
//
// The interface is kept narrow so that a PostgreSQL implementation can follow
// the bbolt one; every implementation must pass storetest.Run. A store never
// holds a secret in the clear: tokens are stored as their SHA-256 only.
package store

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors. Implementations return these (possibly wrapped) so that
// callers can map them with errors.Is.
var (
	// ErrNotFound: no record with that key.
	ErrNotFound = errors.New("store: not found")
	// ErrExists: a record with that key already exists.
	ErrExists = errors.New("store: already exists")
	// ErrTokenUsed: the join token was already consumed.
	ErrTokenUsed = errors.New("store: join token already used")
	// ErrTokenExpired: the join token is past its expiry.
	ErrTokenExpired = errors.New("store: join token expired")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
)

// Principal kinds (R-AUTH-6, Q-03).
const (
	KindHuman = "human"
	KindAgent = "agent"
)

// Roles (R-AUTH-7).
const (
	RoleViewer   = "viewer"
	RoleOperator = "operator"
	RoleAdmin    = "admin"
)

// Tenant is an isolation boundary (R-TEN-2).
type Tenant struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
}

// Principal is a person or an automation identity. A person may hold several
// credentials (console, `olivares login`); an API token is its own principal.
type Principal struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Kind string `json:"kind"` // KindHuman or KindAgent
	// Roles maps tenant id → role name.
	Roles     map[string]string `json:"roles"`
	CreatedAt time.Time         `json:"created_at"`
}

// Credential is one bearer token of a principal, stored as its hash.
type Credential struct {
	// Hash is the lowercase hex SHA-256 of the bearer token; the primary key.
	Hash        string    `json:"hash"`
	PrincipalID string    `json:"principal_id"`
	Label       string    `json:"label,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

// JoinToken is a single-use enrollment token, stored as its hash.
type JoinToken struct {
	Hash      string            `json:"hash"`
	NodeID    string            `json:"node_id"` // the identity the node will get
	Tenant    string            `json:"tenant"`
	Labels    map[string]string `json:"labels,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at"`
	UsedAt    time.Time         `json:"used_at,omitempty"`
}

// Node is the persistent part of the node registry. Link state (transport,
// connected since, last heartbeat) lives in memory in the fleet package.
type Node struct {
	ID         string            `json:"id"`
	Tenant     string            `json:"tenant"`
	Labels     map[string]string `json:"labels,omitempty"`
	Hostname   string            `json:"hostname,omitempty"`
	EnrolledAt time.Time         `json:"enrolled_at"`
	// CertSerial is the serial (hex) of the newest certificate issued.
	CertSerial   string    `json:"cert_serial"`
	CertNotAfter time.Time `json:"cert_not_after"`
	// RevokedAt is zero unless the node was revoked.
	RevokedAt    time.Time `json:"revoked_at,omitempty"`
	AgentVersion string    `json:"agent_version,omitempty"`
	// Capabilities as last reported by the agent (opaque JSON object).
	Capabilities []byte `json:"capabilities,omitempty"`
}

// Store is the coordinator store. Every method is safe for concurrent use.
type Store interface {
	// PutTenant creates the tenant if it does not exist (idempotent).
	PutTenant(ctx context.Context, t Tenant) error
	GetTenant(ctx context.Context, id string) (Tenant, error)

	// CreatePrincipal stores p with its first credential in one transaction.
	// ErrExists if p.ID or c.Hash is taken.
	CreatePrincipal(ctx context.Context, p Principal, c Credential) error
	// AddCredential adds another credential to an existing principal.
	AddCredential(ctx context.Context, c Credential) error
	GetPrincipal(ctx context.Context, id string) (Principal, error)
	// PrincipalByCredential resolves a token hash.
	PrincipalByCredential(ctx context.Context, hash string) (Principal, Credential, error)

	// CreateJoinToken stores a new join token. ErrExists on a hash collision.
	CreateJoinToken(ctx context.Context, t JoinToken) error
	// Enroll consumes the join token with the given hash and stores the node
	// that issue builds from it, all in one transaction: if the token is
	// unknown (ErrNotFound), used (ErrTokenUsed) or expired at now
	// (ErrTokenExpired), or issue fails, nothing is written. ErrExists if a
	// node with that id is already enrolled.
	Enroll(ctx context.Context, tokenHash string, now time.Time, issue func(JoinToken) (Node, error)) (Node, error)

	GetNode(ctx context.Context, id string) (Node, error)
	// ListNodes lists a tenant's nodes ordered by id; tenant "" lists all.
	ListNodes(ctx context.Context, tenant string) ([]Node, error)
	// UpdateNode applies fn to the stored node and saves the result in one
	// transaction; fn's error aborts it. ErrNotFound if absent.
	UpdateNode(ctx context.Context, id string, fn func(*Node) error) (Node, error)

	Close() error
}
