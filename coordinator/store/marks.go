package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Credential kinds. A person's interactive credentials (the console, each
// `olivares login`) share the person's marks; an API token is its own owner
// (R-PIN-6, R-SNZ-4).
const (
	CredSession  = "session"
	CredAPIToken = "api_token"
)

// ID is the credential's public id: the one audit rows and mark owners
// name. Records written before credentials had ids get one derived from the
// hash (a hash of a hash: it reveals nothing of the token).
func (c Credential) PublicID() string {
	if c.ID != "" {
		return c.ID
	}
	sum := sha256.Sum256([]byte("olivares credential id:" + c.Hash))
	return "cred_" + hex.EncodeToString(sum[:8])
}

// SortCredentials orders cs oldest first, then by public id
// (ListCredentials' order).
func SortCredentials(cs []Credential) {
	slices.SortFunc(cs, func(a, b Credential) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.PublicID(), b.PublicID())
	})
}

// MarkOwner is whose per-caller marks a credential reads and writes: the
// person for session credentials, the token itself for an API token.
func MarkOwner(p Principal, c Credential) string {
	if c.Kind == CredAPIToken {
		return "tok:" + c.PublicID()
	}
	return "prn:" + p.ID
}

// AuditActor is the actor of an audit row for a credential (R-AUD-3).
func AuditActor(p Principal, c Credential) apitypes.AuditActor {
	kind := p.Kind
	if c.Kind == CredAPIToken {
		kind = apitypes.ActorToken
	}
	return apitypes.AuditActor{CredentialID: c.PublicID(), PrincipalID: p.ID, Kind: kind}
}

// MaxPins is how many runs one owner keeps pinned; pinning one more drops
// the oldest pin (R-PIN-3).
const MaxPins = 20

// ErrReleased: the run was released (cleanup succeeded), so it takes no
// more marks (R-PIN-7, R-SNZ-6, R-DONE-4).
var ErrReleased = errors.New("store: run released")

// MarkKey names one owner's marks on one run (R-TEN-5).
type MarkKey struct {
	Tenant, Owner, RunRef string
}

// Marks are one owner's marks on one run. The zero value is "no marks".
type Marks struct {
	RunRef       string     `json:"run_ref"`
	PinnedAt     *time.Time `json:"pinned_at,omitempty"`
	SnoozedUntil *time.Time `json:"snoozed_until,omitempty"`
	Done         bool       `json:"done,omitempty"`
}

// Empty reports whether m marks nothing.
func (m Marks) Empty() bool { return m.PinnedAt == nil && m.SnoozedUntil == nil && !m.Done }

// RunMeta is what belongs to the session itself rather than to its process:
// its name (R-NAME-4), its archive mark (R-ARC-3) and when it was released.
// The coordinator owns it; agents never push it.
type RunMeta struct {
	RunRef     string     `json:"run_ref"`
	Tenant     string     `json:"tenant"`
	Name       string     `json:"name,omitempty"`
	ArchivedAt *time.Time `json:"archived_at,omitempty"`
	ReleasedAt *time.Time `json:"released_at,omitempty"`
	// Grants are the credentials the run was launched with, for its
	// resumes (R-GRANT-2); values stay in the vault.
	Grants []GrantRef `json:"grants,omitempty"`
	// Continue is the run's scheduled continue at a limit's reset
	// (continue.go, R-CONT-*); nil when none.
	Continue *ContinueSchedule `json:"continue,omitempty"`
	// OnLimit is what the on_limit plan did (R-ONL-6), the last
	// MaxOnLimitEntries; OnLimitSeen is the limit (its seen_at) the plan
	// last started for, so that it starts once per limit (R-ONL-2).
	OnLimit     []apitypes.OnLimitEntry `json:"on_limit,omitempty"`
	OnLimitSeen *time.Time              `json:"on_limit_seen,omitempty"`
}

// MaxOnLimitEntries bounds a run's on_limit history; older lines go.
const MaxOnLimitEntries = 50

// AuditQuery selects a page of a tenant's audit ledger, oldest first, or
// newest first when Newest is set.
type AuditQuery struct {
	Tenant string // required
	// Newest pages from the newest entry back (R-AUD-7).
	Newest bool
	// Filters; "" or zero matches everything.
	Event  string
	RunRef string
	// Actor matches the credential id or the principal id.
	Actor string
	// Since keeps entries at or after it; Until those strictly before it.
	Since time.Time
	Until time.Time
	// Limit is the page size (0 means 100).
	Limit int
	// Cursor continues after the previous page (its next).
	Cursor string
}

// Marker is the per-caller and per-session part of the store. It is part of
// Store; it is a separate interface only to keep store.go readable.
type Marker interface {
	// UpdateMarks applies fn to key's marks on a run of key.Tenant and
	// stores the result in one transaction. ErrNotFound if the run is not
	// in the tenant's index, ErrReleased once it was released. When fn
	// leaves the marks pinned and the owner then holds more than MaxPins
	// pins, the oldest other pins are dropped (R-PIN-3).
	UpdateMarks(ctx context.Context, key MarkKey, fn func(*Marks)) (Marks, error)
	// GetMarks returns owner's marks on refs (absent: none).
	GetMarks(ctx context.Context, tenant, owner string, refs []string) (map[string]Marks, error)
	// PinnedMarks returns owner's pinned marks, oldest pin first.
	PinnedMarks(ctx context.Context, tenant, owner string) ([]Marks, error)

	// GetRunMeta returns the metas of refs (absent: none).
	GetRunMeta(ctx context.Context, refs []string) (map[string]RunMeta, error)
	// UpdateRunMeta applies fn to the meta of an indexed run and stores it
	// in one transaction together with the audit entry fn returns, if any
	// (R-AUD-1). fn's error aborts it. ErrNotFound if the run is not
	// indexed.
	UpdateRunMeta(ctx context.Context, ref string, fn func(*RunMeta) (*apitypes.AuditEntry, error)) (RunMeta, error)
	// ReleaseRun records the release (once) and removes every owner's
	// marks on the run, in one transaction (R-CLN-7).
	ReleaseRun(ctx context.Context, ref string, at time.Time) (RunMeta, error)
	// DeleteRun removes the run's index row, meta and every mark on it and
	// appends audit, all in one transaction (R-DEL-3, R-DEL-4).
	// ErrNotFound if the run is not indexed.
	DeleteRun(ctx context.Context, ref string, audit apitypes.AuditEntry) error

	// AppendAudit seals e onto its tenant's chain (shared/auditchain) and
	// returns the stored entry.
	AppendAudit(ctx context.Context, e apitypes.AuditEntry) (apitypes.AuditEntry, error)
	// ListAudit returns a page of the ledger and the cursor of the next
	// page ("" on the last one).
	ListAudit(ctx context.Context, q AuditQuery) ([]apitypes.AuditEntry, string, error)
}

// Approval is a person's approval of exactly one text, by its hash
// (R-SETUP-5, R-PCS-11).
type Approval struct {
	SHA256 string    `json:"sha256"`
	Actor  string    `json:"actor"` // the credential's public id
	At     time.Time `json:"at"`
}

// WorkspaceSettings is what the coordinator keeps of a workspace beyond its
// registration: the setup command (R-SETUP-1: in the engine's store, out of
// reach of repository files) and the last approvals, each committed with its
// audit entry (R-AUD-1). Approvals stay as evidence after the text changes;
// they apply only while their hash is the current one (R-SETUP-6, R-SETUP-9).
type WorkspaceSettings struct {
	Ref           string    `json:"ref"`
	Tenant        string    `json:"tenant"`
	SetupCommand  string    `json:"setup_command,omitempty"`
	SetupApproval *Approval `json:"setup_approval,omitempty"`
	// ProjectConfigApproval is the last approval of the flagged part of the
	// repository's agent configuration (R-PCS-11).
	ProjectConfigApproval *Approval `json:"project_config_approval,omitempty"`
}

// Workspacer is the workspace-settings part of Store.
type Workspacer interface {
	// GetWorkspaceSettings returns the settings of a registered workspace
	// (the zero settings when none were written). ErrNotFound if the
	// workspace is not registered.
	GetWorkspaceSettings(ctx context.Context, ref string) (WorkspaceSettings, error)
	// UpdateWorkspaceSettings applies fn and stores the result together
	// with the audit entry fn returns, if any, in one transaction
	// (R-AUD-1). fn's error aborts both. ErrNotFound if the workspace is
	// not registered.
	UpdateWorkspaceSettings(ctx context.Context, ref string, fn func(*WorkspaceSettings) (*apitypes.AuditEntry, error)) (WorkspaceSettings, error)
}

// Secret is a sealed vault value (coordinator/vault). The store never sees
// the plain text.
type Secret struct {
	Ref       string    `json:"ref"`
	Tenant    string    `json:"tenant"`
	Name      string    `json:"name"`
	Sealed    []byte    `json:"sealed"`
	CreatedAt time.Time `json:"created_at"`
}

// GrantRef is one credential a run was launched with (R-GRANT-1), without its
// value: the coordinator resolves it again for a resume.
type GrantRef struct {
	Kind      string `json:"kind"`
	SecretRef string `json:"secret_ref"`
	Env       string `json:"env"`
	AsFile    bool   `json:"as_file,omitempty"`
}

// Vaulter is the secrets and windowed-audit part of Store.
type Vaulter interface {
	// CreateSecret stores s; names are unique per tenant (ErrExists).
	CreateSecret(ctx context.Context, s Secret) error
	GetSecret(ctx context.Context, ref string) (Secret, error)
	// ListSecrets lists a tenant's secrets by name.
	ListSecrets(ctx context.Context, tenant string) ([]Secret, error)
	// DeleteSecret removes a secret. ErrNotFound if absent.
	DeleteSecret(ctx context.Context, ref string) error

	// AppendAuditWindowed appends e unless an entry of the same event, run
	// and actor credential was appended less than window before e.At
	// (R-MSG-17: once per reader, run and window). It reports whether it
	// appended; the check and the append are one transaction.
	AppendAuditWindowed(ctx context.Context, e apitypes.AuditEntry, window time.Duration) (bool, error)
}
