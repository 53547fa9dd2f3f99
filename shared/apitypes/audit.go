package apitypes

import (
	"encoding/json"
	"time"
)

// Audit actor kinds (R-AUD-3): a person, an automation identity, or an API
// token acting as its own owner.
const (
	ActorHuman = "human"
	ActorAgent = "agent"
	ActorToken = "token"
)

// Audit events (docs/rules/taint-audit.md, R-AUD-*).
const (
	AuditRunRenamed            = "sessions.run.renamed"
	AuditRunArchived           = "sessions.run.archived"
	AuditRunUnarchived         = "sessions.run.unarchived"
	AuditRunDeleted            = "sessions.run.deleted"
	AuditRunHandoffPreview     = "sessions.run.handoff_preview"
	AuditRunMessages           = "sessions.run.messages"
	AuditRunMessagesText       = "sessions.run.messages.text"
	AuditRunActivity           = "sessions.run.activity"
	AuditRunActivityAgent      = "sessions.run.activity.agent"
	AuditWorkspaceApproveSetup = "sessions.workspace.approve-setup"
	AuditWorkspaceSetupSet     = "sessions.workspace.setup_command_set"
	AuditWorkspaceApprovePCfg  = "sessions.workspace.approve-project-config"
	AuditWorkspaceFileRead     = "sessions.workspace.file_read"
)

// AuditActor is who did it: the credential, never a name (R-AUD-3).
type AuditActor struct {
	CredentialID string `json:"credential_id"`
	PrincipalID  string `json:"principal_id,omitempty"`
	Kind         string `json:"kind"` // ActorHuman | ActorAgent | ActorToken
}

// AuditTarget is what it was done to.
type AuditTarget struct {
	RunRef       string `json:"run_ref,omitempty"`
	WorkspaceRef string `json:"workspace_ref,omitempty"`
}

// AuditEntry is one row of a tenant's audit ledger. The ledger is
// append-only and tamper-evident: Prev is the Hash of the tenant's entry
// before it ("" for the first), and Hash covers every other field (see
// shared/auditchain). It never holds names, message text, summaries or
// secret values (R-AUD-3).
type AuditEntry struct {
	Seq    uint64          `json:"seq"`
	At     time.Time       `json:"at"`
	Tenant string          `json:"tenant"`
	Actor  AuditActor      `json:"actor"`
	Event  string          `json:"event"`
	Target AuditTarget     `json:"target"`
	Detail json.RawMessage `json:"detail,omitempty"`
	Prev   string          `json:"prev"`
	Hash   string          `json:"hash"`
}

// AuditList is GET /v1/audit.
type AuditList struct {
	Items []AuditEntry `json:"items"`
	Next  string       `json:"next,omitempty"`
}
