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
	// ActorOperator is whoever opened the coordinator's admin socket
	// (STATE/admin.sock, 0600): token create, principal create.
	ActorOperator = "operator"
	// ActorNode is a node acting on its own (enrolling with a join token).
	ActorNode = "node"
	// ActorAnonymous is a request whose credential authenticated nothing
	// (auth.failures, R-SIGNIN-5).
	ActorAnonymous = "anonymous"
)

// Audit events (docs/rules/taint-audit.md, R-AUD-*).
const (
	AuditRunRenamed            = "sessions.run.renamed"
	AuditRunArchived           = "sessions.run.archived"
	AuditRunUnarchived         = "sessions.run.unarchived"
	AuditRunDeleted            = "sessions.run.deleted"
	AuditRunRequestAnswered    = "sessions.run.request.answered"
	AuditRunHandoffPreview     = "sessions.run.handoff_preview"
	AuditRunMessages           = "sessions.run.messages"
	AuditRunMessagesText       = "sessions.run.messages.text"
	AuditRunActivity           = "sessions.run.activity"
	AuditRunActivityAgent      = "sessions.run.activity.agent"
	AuditWorkspaceApproveSetup = "sessions.workspace.approve-setup"
	AuditWorkspaceSetupSet     = "sessions.workspace.setup_command_set"
	AuditWorkspaceApprovePCfg  = "sessions.workspace.approve-project-config"
	AuditWorkspaceFileRead     = "sessions.workspace.file_read"

	// Security actions (issue 21, R-AUD-6): who created, changed, used or
	// removed what grants access. Detail holds refs, kinds and field
	// names, never a name, a path's content or a secret value.
	AuditNodeTokenCreated  = "fleet.join_token.created"
	AuditNodeEnrolled      = "fleet.node.enrolled"
	AuditNodeRevoked       = "fleet.node.revoked"
	AuditNodeForgotten     = "fleet.node.forgotten"
	AuditNodeReassigned    = "fleet.node.reassigned"
	AuditTenantCreated     = "auth.tenant.created"
	AuditPrincipalCreated  = "auth.principal.created"
	AuditPrincipalRevoked  = "auth.principal.revoked"
	AuditCredentialCreated = "auth.credential.created"
	AuditCredentialRevoked = "auth.credential.revoked"
	AuditSignedIn          = "auth.signed_in"
	AuditSignedOut         = "auth.signed_out"
	// AuditAuthFailures sums up one source's failed authentication in
	// one window (R-SIGNIN-5).
	AuditAuthFailures      = "auth.failures"
	AuditSigninLinkCreated = "auth.signin_link.created"
	AuditSecretAdded       = "sessions.secret.added"
	AuditSecretDeleted     = "sessions.secret.deleted"
	AuditWebhookCreated    = "sessions.webhook.created"
	AuditWebhookDeleted    = "sessions.webhook.deleted"
	AuditWebhookTested     = "sessions.webhook.tested"
	AuditPushSubscribed    = "sessions.push.subscribed"
	AuditPushUnsubscribed  = "sessions.push.unsubscribed"
	AuditProfileCreated    = "sessions.profile.created"
	AuditProfileUpdated    = "sessions.profile.updated"
	AuditProfileDeleted    = "sessions.profile.deleted"
	// A profile's account sign-in (R-ACCT-1, R-ACCT-3, R-ACCT-4).
	AuditProfileSigninStarted   = "sessions.profile.signin_started"
	AuditProfileSigninCode      = "sessions.profile.signin_code_sent"
	AuditProfileSigninCancelled = "sessions.profile.signin_cancelled"
	AuditProfileSigninFinished  = "sessions.profile.signin_finished"
	AuditWorkspaceCreated       = "sessions.workspace.created"
	AuditWorkspaceDeleted       = "sessions.workspace.deleted"
	AuditRunStarted             = "sessions.run.started"
	AuditRunResumed             = "sessions.run.resumed"
	AuditRunStopped             = "sessions.run.stopped"
	AuditRunGranted             = "sessions.run.granted"
	// Continue at a limit's reset (docs/rules/usage.md, R-CONT-*).
	AuditRunContinueScheduled = "sessions.run.continue_scheduled"
	AuditRunContinued         = "sessions.run.continued"
	AuditRunContinueCancelled = "sessions.run.continue_cancelled"
	// A step of a profile's on_limit plan (R-ONL-6).
	AuditRunOnLimit = "sessions.run.on_limit"
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
	ProfileRef   string `json:"profile_ref,omitempty"`
	NodeID       string `json:"node_id,omitempty"`
	PrincipalID  string `json:"principal_id,omitempty"`
	CredentialID string `json:"credential_id,omitempty"`
	SecretRef    string `json:"secret_ref,omitempty"`
	WebhookID    string `json:"webhook_id,omitempty"`
	Tenant       string `json:"tenant,omitempty"`
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
