package store

import (
	"context"
	"errors"
	"time"
)

// Record kinds of a transfer between stores (olivares-coordinator migrate),
// in the order an import needs them: a record refers only to kinds before
// its own.
const (
	RecTenants           = "tenants"
	RecPrincipals        = "principals"
	RecCredentials       = "credentials"
	RecSigninLinks       = "signin_links"
	RecJoinTokens        = "join_tokens"
	RecNodes             = "nodes"
	RecProfiles          = "profiles"
	RecWorkspaces        = "workspaces"
	RecWorkspaceSettings = "workspace_settings"
	RecSecrets           = "secrets"
	RecRuns              = "runs"
	RecRunTombstones     = "run_tombstones"
	RecRunMeta           = "run_meta"
	RecMarks             = "marks"
	RecAudit             = "audit"
	RecAuditWindows      = "audit_windows"
	// RecUsage are the per-turn usage rows (docs/rules/usage.md).
	RecUsage = "usage_turns"
)

// RecordKinds lists every kind, in import order.
var RecordKinds = []string{
	RecTenants, RecPrincipals, RecCredentials, RecSigninLinks, RecJoinTokens, RecNodes,
	RecProfiles, RecWorkspaces, RecWorkspaceSettings, RecSecrets,
	RecRuns, RecRunTombstones, RecRunMeta, RecMarks, RecAudit, RecAuditWindows, RecUsage,
}

// Record is one record in transit. Value's type follows Kind: Tenant,
// Principal, Credential, SigninLink, JoinToken, Node, apitypes.Profile,
// apitypes.Workspace, WorkspaceSettings, Secret, apitypes.Run, Tombstone,
// RunMeta, MarkRecord, apitypes.AuditEntry (sealed: seq, prev and hash as
// stored), AuditWindow or apitypes.UsageTurn.
type Record struct {
	Kind  string
	Value any
}

// Tombstone marks a deleted run, so that a late push does not bring it back.
type Tombstone struct {
	RunRef    string    `json:"run_ref"`
	DeletedAt time.Time `json:"deleted_at"`
}

// MarkRecord is one owner's marks on one run.
type MarkRecord struct {
	Key   MarkKey `json:"key"`
	Marks Marks   `json:"marks"`
}

// AuditWindow is when the last windowed audit entry of an event, run and
// reader was appended (R-MSG-17).
type AuditWindow struct {
	Tenant       string    `json:"tenant"`
	Event        string    `json:"event"`
	RunRef       string    `json:"run_ref"`
	CredentialID string    `json:"credential_id"`
	LastAt       time.Time `json:"last_at"`
}

// Exporter is a store that can list every record it holds.
type Exporter interface {
	// Export calls fn with every record of kind, in key order; fn's error
	// stops it and is returned.
	Export(ctx context.Context, kind string, fn func(Record) error) error
	Counter
}

// Counter counts a store's records per kind (the keys of RecordKinds).
type Counter interface {
	Counts(ctx context.Context) (map[string]int, error)
}

// Importer is a store that takes records another store exported, as they
// are: audit entries keep their seq, prev and hash, so the chain still
// verifies and a head hash written down before still names its entry.
type Importer interface {
	// Import writes recs in one transaction and returns how many it
	// changed. A record stored as it is is left alone and one that differs
	// is replaced, so an import can be repeated; an audit entry whose seq is
	// taken by a different entry is refused with ErrDiverged, since a chain
	// is never rewritten.
	Import(ctx context.Context, recs []Record) (int, error)
	Counter
}

// ErrDiverged: the target of an import holds an audit chain that is not the
// source's.
var ErrDiverged = errors.New("store: the target's audit chain differs from the source's")
