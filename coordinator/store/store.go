// Package store is the coordinator's persistence: tenants, principals and
// their credentials, join tokens and the node registry.
//
// Two implementations: bolt (one bbolt file, the default) and postgres
// (shared by several coordinators); both must pass storetest.Run. A store never
// holds a secret in the clear: tokens are stored as their SHA-256 only.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
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
	Hash string `json:"hash"`
	// ID is the credential's public id (see PublicID).
	ID string `json:"id,omitempty"`
	// Kind is CredSession (the default when empty) or CredAPIToken.
	Kind        string    `json:"kind,omitempty"`
	PrincipalID string    `json:"principal_id"`
	Label       string    `json:"label,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	// ExpiresAt, when set, is when the credential stops authenticating
	// (a console session's). When zero it never expires.
	ExpiresAt time.Time `json:"expires_at,omitempty"`
	// Tenant is the one tenant the credential authenticates in (issue
	// 35): the tenant whose admin minted it, or the tenant of the
	// credential it was derived from. AllTenants marks a person's own
	// sign-in (a sign-in link, single sign-on, the local operator), which
	// serves every tenant of its principal. Empty is a credential stored
	// before credentials had a tenant: see Serves.
	Tenant string `json:"tenant,omitempty"`
	// Parent is the hash of the credential this one was derived from
	// (POST /v1/login, POST /v1/signin with a token), or empty. A derived
	// credential expires no later than its parent and is revoked with it,
	// transitively (RevokeCredential).
	Parent string `json:"parent,omitempty"`
}

// AllTenants is the Tenant of a credential that serves every tenant of
// its principal.
const AllTenants = "*"

// Expired reports whether c no longer authenticates at now.
func (c Credential) Expired(now time.Time) bool {
	return !c.ExpiresAt.IsZero() && !now.Before(c.ExpiresAt)
}

// Serves reports whether c authenticates its principal p in tenant (p
// must hold a role there too). A credential without a tenant, stored
// before credentials had one, keeps serving while p holds a role in one
// tenant only, which is then the only tenant it could have been minted
// in; once p holds several, it serves none, and its holder signs in
// again (R-LIFE-9).
func (c Credential) Serves(p Principal, tenant string) bool {
	switch c.Tenant {
	case AllTenants:
		return true
	case "":
		return len(p.Roles) == 1
	}
	return c.Tenant == tenant
}

// Derive returns child as a credential derived from c: of c's principal
// and tenant, recording c as its parent, and expiring no later than c
// (child's own ExpiresAt, when set and earlier, stays).
func (c Credential) Derive(child Credential) Credential {
	child.PrincipalID, child.Tenant, child.Parent = c.PrincipalID, c.Tenant, c.Hash
	if !c.ExpiresAt.IsZero() && (child.ExpiresAt.IsZero() || c.ExpiresAt.Before(child.ExpiresAt)) {
		child.ExpiresAt = c.ExpiresAt
	}
	return child
}

// Descendants returns the hashes of the credentials in cs derived from
// the one whose hash is root, directly or not (root itself excluded).
func Descendants(cs []Credential, root string) []string {
	children := map[string][]string{}
	for _, c := range cs {
		if c.Parent != "" {
			children[c.Parent] = append(children[c.Parent], c.Hash)
		}
	}
	var out []string
	seen := map[string]bool{root: true}
	queue := []string{root}
	for len(queue) > 0 {
		h := queue[0]
		queue = queue[1:]
		for _, k := range children[h] {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
				queue = append(queue, k)
			}
		}
	}
	return out
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
	// When c.Parent is set, the parent must still exist (ErrNotFound
	// otherwise), checked in the same transaction as the insert, so that
	// no credential outlives the revocation of its parent.
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

	// Run index (a read model agents push into, ARCHITECTURE "who owns
	// what"). PutRun stores r when no row has its RunRef, or replaces the
	// stored row when r.Rev is greater; it reports whether it wrote. A row
	// whose Tenant or NodeID differs from the stored one is refused with
	// ErrConflict (an agent can only update its own runs).
	PutRun(ctx context.Context, r apitypes.Run) (bool, error)
	// PutRuns is PutRun for a batch (an agent's push), in one transaction:
	// one commit, one fsync. Each row is kept or not as PutRun would; a
	// row PutRun would refuse (ErrConflict, a bad key) is skipped and its
	// error returned in refused by ref, and the others are written. The
	// usage rows given are stored in the same transaction as PutUsage
	// stores them (a push's rows and usage, one commit, issue 34). err is
	// a failure of the whole batch, which then wrote nothing.
	PutRuns(ctx context.Context, rs []apitypes.Run, usage ...apitypes.UsageTurn) (wrote int, refused map[string]error, err error)
	// GetRun returns the row; ErrNotFound if absent.
	GetRun(ctx context.Context, ref string) (apitypes.Run, error)
	// GetRuns returns the indexed rows of refs by ref, in one read; a ref
	// that is not indexed is missing from the map.
	GetRuns(ctx context.Context, refs []string) (map[string]apitypes.Run, error)
	// ListRuns returns one page of q.Tenant's runs, newest first (CreatedAt
	// descending, then RunRef descending), and the opaque cursor of the next
	// page ("" on the last one). See RunQuery for the modes.
	ListRuns(ctx context.Context, q RunQuery) ([]apitypes.Run, string, error)

	// Profiles and workspaces index: the agent owns the record, the
	// coordinator keeps what it needs to route and list. Names are unique
	// per tenant (ErrExists), refs globally (ErrExists).
	CreateProfile(ctx context.Context, p apitypes.Profile) error
	GetProfile(ctx context.Context, ref string) (apitypes.Profile, error)
	// UpdateProfile replaces the stored profile of p.Ref, whose tenant and
	// name may not change. ErrNotFound if absent.
	UpdateProfile(ctx context.Context, p apitypes.Profile) error
	// ListProfiles lists a tenant's profiles ordered by name.
	ListProfiles(ctx context.Context, tenant string) ([]apitypes.Profile, error)
	CreateWorkspace(ctx context.Context, w apitypes.Workspace) error
	GetWorkspace(ctx context.Context, ref string) (apitypes.Workspace, error)
	// ListWorkspaces lists a tenant's workspaces ordered by name.
	ListWorkspaces(ctx context.Context, tenant string) ([]apitypes.Workspace, error)

	Marker
	Workspacer
	Vaulter
	Signer
	Federator
	Lifecycler
	IdempotencyKeys
	Webhooker
	Usager
	Continuer

	Close() error
}

// Lifecycler lists, corrects and removes what people created: tenants,
// principals and their credentials, profiles, workspaces and nodes (issue
// 21). Each removal commits with its audit entry (R-AUD-1, R-AUD-6).
type Lifecycler interface {
	// ListTenants lists every tenant by id.
	ListTenants(ctx context.Context) ([]Tenant, error)
	// ListPrincipals lists the principals holding a role in tenant, by id.
	ListPrincipals(ctx context.Context, tenant string) ([]Principal, error)
	// ListCredentials lists a principal's credentials, oldest first (then
	// by public id). ErrNotFound if the principal does not exist.
	ListCredentials(ctx context.Context, principalID string) ([]Credential, error)
	// CredentialByID returns the credential whose PublicID is id.
	// ErrNotFound if none.
	CredentialByID(ctx context.Context, id string) (Credential, error)
	// RevokePrincipal removes the principal's role in tenant and deletes
	// the credentials issued for that tenant, or every credential of it
	// when it then holds no role anywhere; audit is appended in the same
	// transaction. It returns how many
	// credentials were deleted. ErrNotFound if the principal holds no role
	// in tenant.
	RevokePrincipal(ctx context.Context, id, tenant string, audit apitypes.AuditEntry) (int, error)
	// DeleteProfile removes the profile from the index and appends audit,
	// in one transaction. ErrNotFound if absent.
	DeleteProfile(ctx context.Context, ref string, audit apitypes.AuditEntry) error
	// DeleteWorkspace removes the workspace and its settings and appends
	// audit, in one transaction. ErrNotFound if absent.
	DeleteWorkspace(ctx context.Context, ref string, audit apitypes.AuditEntry) error
	// ForgetNode removes a revoked node and the profiles and workspaces
	// (with their settings) registered on it, and appends audit, in one
	// transaction; run rows stay. ErrNotFound if absent, ErrConflict when
	// the node is not revoked.
	ForgetNode(ctx context.Context, id string, audit apitypes.AuditEntry) (NodeRecords, error)
	// ReassignNode moves the profiles, workspaces and run rows of node
	// from to node to, both of one tenant, and appends audit, in one
	// transaction. ErrNotFound when either node is absent, ErrConflict
	// when their tenants differ.
	ReassignNode(ctx context.Context, from, to string, audit apitypes.AuditEntry) (NodeRecords, error)
}

// NodeRecords counts what ForgetNode removed or ReassignNode moved.
type NodeRecords struct {
	Profiles   int `json:"profiles"`
	Workspaces int `json:"workspaces"`
	Runs       int `json:"runs"`
}

// RunCount is how many runs of the index have a state and tool (driver).
type RunCount struct {
	State, Tool string
	Runs        int
}

// RunCounter counts the index's runs by state and tool, across tenants,
// for the metrics (R-OBS-7). Both stores implement it.
type RunCounter interface {
	CountRuns(ctx context.Context) ([]RunCount, error)
}

// AuditObserver is a store that reports each audit entry it appended, by
// event, once its transaction committed (the metrics, R-OBS-7). Both
// stores implement it; fn must not block.
type AuditObserver interface {
	ObserveAudit(fn func(event string))
}

// Pinger is a store whose database lives outside the process and can be
// unreachable (PostgreSQL). The coordinator's /readyz asks it.
type Pinger interface {
	Ping(ctx context.Context) error
}

// ErrConflict: the write contradicts the stored record (PutRun of another
// tenant's or node's run).
var ErrConflict = errors.New("store: conflicting record")

// ErrBadCursor: a ListRuns cursor this store did not issue.
var ErrBadCursor = errors.New("store: bad cursor")

// RunQuery selects a page of runs (R-LIST-1, R-LIST-5).
type RunQuery struct {
	Tenant string // required
	// Exact-match filters; "" matches everything (R-LIST-1, Q-09).
	State           string
	LiveRef         string
	ClaudeSessionID string
	NodeID          string
	ProfileRef      string // provider_profile_ref
	WorkspaceRef    string
	Driver          string
	// Attention filters on the run's derived attention at the instant Now
	// (R-ATTN-4): "" matches every run, "any" every run with a reason, a
	// reason only the runs with that one.
	Attention string
	Now       time.Time
	// Limit is the page size, 1..200 (the caller validates; 0 means 50).
	Limit int
	// Offset mode (Cursor == "" and !CursorMode): skip Offset matching rows.
	Offset int
	// CursorMode pages with an opaque cursor instead: Cursor "" is the first
	// page, then the returned next.
	CursorMode bool
	Cursor     string
}

// Matches applies q's exact-match filters to one row; "" matches any value
// (R-LIST-1, R-LIST-7).
func (q RunQuery) Matches(r apitypes.Run) bool {
	return (q.State == "" || r.State == q.State) &&
		(q.LiveRef == "" || r.LiveRef == q.LiveRef) &&
		(q.ClaudeSessionID == "" || r.ClaudeSessionID == q.ClaudeSessionID) &&
		(q.NodeID == "" || r.NodeID == q.NodeID) &&
		(q.ProfileRef == "" || r.ProviderProfileRef == q.ProfileRef) &&
		(q.WorkspaceRef == "" || r.WorkspaceRef == q.WorkspaceRef) &&
		(q.Driver == "" || r.Driver == q.Driver) &&
		apitypes.AttentionMatches(q.Attention, apitypes.AttentionOf(r, q.Now))
}
