package apitypes

import (
	"encoding/json"
	"time"
)

// Run states (R-STATE-3). The state is derived, never stored as a free field
// (R-STATE-1): agents compute it from process facts and the lifecycle ledger
// and the index only caches the last derivation.
const (
	StateReleased        = "released"
	StatePendingApproval = "pending_approval"
	StateStarting        = "starting"
	StateRunning         = "running"
	StateIdle            = "idle"
	StateFailed          = "failed"
	StateStopped         = "stopped"
)

// States lists the enum in precedence order (R-STATE-3).
var States = []string{StateReleased, StatePendingApproval, StateStarting, StateRunning, StateIdle, StateFailed, StateStopped}

// Live reports whether state is a live one (R-STATE-5).
func Live(state string) bool {
	return state == StateStarting || state == StateRunning || state == StateIdle
}

// Failure reasons (the run's reason field when state is failed).
const (
	ReasonProcessLost      = "process_lost"     // R-STATE-6
	ReasonSpawnFailed      = "spawn_failed"     // the child could not be started
	ReasonHandshakeFailed  = "handshake_failed" // the tool refused the protocol handshake
	ReasonExitNonZero      = "exit_nonzero"     // a non-zero exit not caused by an operator stop
	ReasonSignal           = "signal"           // an unrequested signal ended it
	ReasonConversationGone = "conversation_unavailable"
	ReasonSetupFailed      = "setup_failed" // the setup command failed or timed out (R-SETUP-2)
)

// Isolation values (POST /runs).
const (
	IsolationNative    = "native"
	IsolationContainer = "container"
	IsolationSandbox   = "sandbox"
)

// Limit is R-LIM-1's field.
type Limit struct {
	Kind       string     `json:"kind"` // usage | rate
	ResetsAt   *time.Time `json:"resets_at,omitempty"`
	AccountRef string     `json:"account_ref"`
	// SeenAt is when a turn last ended on this limit: a continue at the
	// reset tells by it that the limit was met again (R-CONT-5).
	SeenAt *time.Time `json:"seen_at,omitempty"`
}

// Run is the run object (docs/rules/runs.md). Every route that answers
// "run" answers this, exactly as GET /runs/{ref} does (R-API-6).
type Run struct {
	RunRef string `json:"run_ref"`
	Tenant string `json:"tenant"`
	NodeID string `json:"node_id"`
	// NodeReachable is present, and false, only while the node has no live
	// tunnel: State is then the last one the agent reported (R-STATE-7).
	NodeReachable *bool `json:"node_reachable,omitempty"`
	// IndexedAt is when the coordinator stored this row, as the node's
	// agent pushed it (the index's one writer, issue 24): the row is the
	// node's state as of then. Ring bounds move with output between pushes.
	IndexedAt *time.Time `json:"indexed_at,omitempty"`

	State string `json:"state"`
	// ExitCode is the observed exit code of the last generation, null until
	// one is observed and when a signal ended it (R-EXIT-1..4). There is no
	// success field (R-GET-1, R-EXIT-2).
	ExitCode *int   `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	Reason   string `json:"reason,omitempty"`

	Driver             string `json:"driver"`
	Generation         uint32 `json:"generation"`
	PID                int    `json:"pid,omitempty"`
	Isolation          string `json:"isolation"`
	ProviderProfileRef string `json:"provider_profile_ref"`
	WorkspaceRef       string `json:"workspace_ref,omitempty"`
	WorkspacePath      string `json:"workspace_path,omitempty"`
	WorktreeBranch     string `json:"worktree_branch,omitempty"`
	TemplateRef        string `json:"template_ref,omitempty"`
	ConversationID     string `json:"conversation_id,omitempty"`
	// ClaudeSessionID is the legacy name of a Claude run's conversation id.
	ClaudeSessionID string `json:"claude_session_id,omitempty"`
	// LiveRef names the live-process row (run_ref.generation) while live.
	LiveRef   string `json:"live_ref,omitempty"`
	Name      string `json:"name,omitempty"`
	HandoffOf string `json:"handoff_of,omitempty"`
	Limit     *Limit `json:"limit,omitempty"`
	// Taint is the grant kinds the run was ever given (R-CRED-1, R-CRED-5).
	Taint []string `json:"taint,omitempty"`
	// PendingRequests counts the tool's requests waiting for a person
	// (R-REQ-3).
	PendingRequests int `json:"pending_requests"`
	// LastError is the tool's last failure the driver observed, cleared
	// by the next turn that ends well (R-LERR-1).
	LastError *LastError `json:"last_error,omitempty"`
	// StalledSince is set while the running turn has written nothing for
	// its profile's stall_after: when the node found it so (R-ATTN-6).
	StalledSince *time.Time `json:"stalled_since,omitempty"`
	// LastMessage previews the last turn's assistant text for the list
	// (R-LIST-8): one line, at most 200 runes; absent before a turn that
	// told it (Claude Code and Codex tell it).
	LastMessage string `json:"last_message,omitempty"`
	// Attention is why the run waits for a person, derived per answer from
	// the fields above (R-ATTN-1); null when it needs nothing. The index
	// never stores it.
	Attention *string `json:"attention"`
	// CodexBinding is set on a Codex supervision run (R-CX-CONT-*); while
	// it is model-locked the run refuses deletion (R-CX-LOCK-1).
	CodexBinding *CodexBinding `json:"codex_binding,omitempty"`
	// Usage sums the run's recorded turns (R-USE-4); absent before its
	// first turn that reported usage.
	Usage *UsageTotals `json:"usage,omitempty"`
	// ScheduledContinueAt is when the coordinator will continue the run
	// after its limit resets (R-CONT-1); absent when nothing is scheduled.
	ScheduledContinueAt *time.Time `json:"scheduled_continue_at,omitempty"`
	// OnLimit is what the profile's on_limit plan (or a person running
	// one of its steps) did when the run stopped on a limit, oldest first
	// (R-ONL-6); absent when nothing.
	OnLimit []OnLimitEntry `json:"on_limit,omitempty"`

	// Per-caller marks (R-GET-3); filled by the coordinator per request.
	Pinned       bool       `json:"pinned"`
	PinnedAt     *time.Time `json:"pinned_at,omitempty"`
	SnoozedUntil *time.Time `json:"snoozed_until,omitempty"`
	Done         bool       `json:"done"`
	ArchivedAt   *time.Time `json:"archived_at,omitempty"`

	// Ring is the retained output seq range (first, last); zero when empty.
	RingFirst uint64 `json:"ring_first_seq,omitempty"`
	RingLast  uint64 `json:"ring_last_seq,omitempty"`

	CreatedAt time.Time  `json:"created_at"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// Rev increases with every change the agent makes to the row, so the
	// index keeps the newest one whatever order pushes arrive in.
	Rev uint64 `json:"rev"`
}

// RunList is GET /runs.
type RunList struct {
	Items []Run  `json:"items"`
	Next  string `json:"next,omitempty"`
}

// LaunchRequest is POST /runs (R-CRT-*, Q-08).
type LaunchRequest struct {
	WorkspaceRef       string `json:"workspace_ref,omitempty"`
	ProviderProfileRef string `json:"provider_profile_ref"`
	Worktree           *bool  `json:"worktree,omitempty"`
	WorktreeFrom       string `json:"worktree_from,omitempty"`
	NoSetup            bool   `json:"no_setup,omitempty"`
	TemplateRef        string `json:"template_ref,omitempty"`
	Isolation          string `json:"isolation,omitempty"`
	Name               string `json:"name,omitempty"`
	// Grants are credentials handed to the tool (R-GRANT-1); the run is
	// tainted by their kinds for good (R-CRED-1, R-HW-6).
	Grants []Grant `json:"grants,omitempty"`
}

// Grant kinds (R-GRANT-1, R-CRED-5): the taint categories.
const (
	GrantVaultSecret          = "vault_secret"
	GrantRepositoryCredential = "repository_credential"
	GrantManagedCredential    = "managed_credential"
	GrantPackageRegistryToken = "package_registry_token"
)

// GrantKinds lists the kinds.
var GrantKinds = []string{GrantVaultSecret, GrantRepositoryCredential, GrantManagedCredential, GrantPackageRegistryToken}

// Grant hands one vault secret to the tool: as the environment variable
// Env, or, with AsFile, as a 0600 file whose path is in Env. The value
// never appears in the run's row, ledger or output metadata.
type Grant struct {
	Kind      string `json:"kind"`
	SecretRef string `json:"secret_ref"`
	Env       string `json:"env"`
	AsFile    bool   `json:"as_file,omitempty"`
}

// Secret is a vault secret as the API shows it: never its value.
type Secret struct {
	Ref       string    `json:"ref"`
	Tenant    string    `json:"tenant"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// SecretCreate is POST /vault/secrets.
type SecretCreate struct {
	Name  string  `json:"name"`
	Value *string `json:"value"`
}

// SecretList is GET /vault/secrets.
type SecretList struct {
	Items []Secret `json:"items"`
}

// InputRequest is POST /runs/{ref}/input (R-IN-2): exactly one field.
type InputRequest struct {
	Line    json.RawMessage `json:"line,omitempty"`
	Message json.RawMessage `json:"message,omitempty"`
	Text    *string         `json:"text,omitempty"`
}

// InputFrame is the data of an output event of stream "input" (R-ATT-11):
// one input the node accepted, as text, and who sent it. By is their
// principal id and Name their name when they sent it; both are empty when
// Olivares sent it (a scheduled continue, a hand-off's first message).
// Text is cut so that the frame fits the ring's 64 KiB; Clipped says so.
type InputFrame struct {
	By      string `json:"by,omitempty"`
	Name    string `json:"name,omitempty"`
	Text    string `json:"text"`
	Clipped bool   `json:"clipped,omitempty"`
}

// ContinueRequest is POST /runs/{ref}/continue-at-reset (R-CONT-1).
type ContinueRequest struct {
	// Message is sent once the conversation is back; when absent,
	// "continue".
	Message *string `json:"message,omitempty"`
}

// Accepted answers input and interrupt (202).
type Accepted struct {
	Accepted bool `json:"accepted"`
	// Noop: an interrupt found no turn to cancel (R-INT-2).
	Noop bool `json:"noop,omitempty"`
}

// Event is one lifecycle ledger row (GET /runs/{ref}/events, R-EVT-*).
type Event struct {
	Seq        uint64          `json:"seq"`
	At         time.Time       `json:"at"`
	Kind       string          `json:"kind"`
	Generation uint32          `json:"generation"`
	PID        int             `json:"pid,omitempty"`
	ExitCode   *int            `json:"exit_code,omitempty"`
	Signal     string          `json:"signal,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Detail     json.RawMessage `json:"detail,omitempty"`
}

// EventList is GET /runs/{ref}/events.
type EventList struct {
	Items []Event `json:"items"`
	Next  string  `json:"next,omitempty"`
}

// SSE event names of GET /runs/{ref}/attach (R-ATT-4).
const (
	SSEOutput         = "output"
	SSELag            = "lag"
	SSEEnd            = "end"
	SSENotice         = "notice"
	SSEOlivaresNotice = "olivares_notice"
	// SSERequest and SSERequestSettled carry a RunRequest when the tool
	// asks and when its request is settled or expires (R-REQ-4).
	SSERequest        = "request"
	SSERequestSettled = "request_settled"
)

// Output is an output event's data (R-ATT-4).
type Output struct {
	Seq        uint64    `json:"seq"`
	Generation uint32    `json:"generation"`
	Stream     string    `json:"stream"` // stdout | stderr | pty
	At         time.Time `json:"at"`
	Data       string    `json:"data"`
	Encoding   string    `json:"encoding"` // utf8 | base64
}

// Lag is a lag event's data (R-RC-5).
type Lag struct {
	RequestedFrom uint64 `json:"requested_from"`
	ResumedFrom   uint64 `json:"resumed_from"`
}

// Notice is a notice event's data: the run is not live (R-ATT-6).
type Notice struct {
	Kind  string `json:"kind"` // not_live
	State string `json:"state"`
}

// End is an end event's data: the generation exited and all its frames
// were delivered (R-RC-9). Between agent and coordinator, an End with
// Reason slow_viewer also says the agent dropped the viewer; the
// coordinator never passes that on as end: it closes the SSE stream, so the
// client reconnects at last+1 (issue 16).
type End struct {
	Generation uint32 `json:"generation"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	Signal     string `json:"signal,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// Profile is a provider profile: one account/config home of one tool on one
// node. Env values stay on the agent; only their names are shown.
type Profile struct {
	Ref       string    `json:"ref"`
	Tenant    string    `json:"tenant"`
	NodeID    string    `json:"node_id"`
	Tool      string    `json:"tool"`
	Name      string    `json:"name"`
	Home      string    `json:"home"`
	EnvKeys   []string  `json:"env_keys,omitempty"`
	CreatedAt time.Time `json:"created_at"`

	// Policy: what the profile accepts (R-MOVE-3, Q-53).
	Active                 bool     `json:"active"`
	LaunchRequiresApproval bool     `json:"launch_requires_approval,omitempty"`
	AllowedWorkspaces      []string `json:"allowed_workspaces,omitempty"`
	// EngineHooks (Claude Code): runs carry the engine's hooks and are
	// launched with --setting-sources "" (R-PCS-15).
	EngineHooks bool `json:"engine_hooks,omitempty"`
	// DeniedTools (with EngineHooks): tool names the engine's hook refuses
	// ("*" refuses every tool).
	DeniedTools []string `json:"denied_tools,omitempty"`
	// Approvals is what happens to a tool's request that no rule decides:
	// "ask" (a person answers), "deny" or "allow" (R-REQ-10).
	Approvals     string         `json:"approvals"`
	ApprovalRules []ApprovalRule `json:"approval_rules,omitempty"`
	// AskTimeout is how long a request waits for a person before it is
	// denied, as a duration ("10m") (R-REQ-12).
	AskTimeout string `json:"ask_timeout"`
	// StallAfter is how long a running turn may write nothing before the
	// run gets attention stalled, as a duration ("10m0s") (R-ATTN-6).
	StallAfter string `json:"stall_after,omitempty"`
	// ResumeAfterLoss: a run of the profile whose process was lost (a
	// host reboot) is resumed on its conversation when the agent starts
	// (issue 30).
	ResumeAfterLoss bool `json:"resume_after_loss,omitempty"`
	// Isolation is what the profile's runs get unless a launch asks for
	// stricter ("" is native); Network is an isolated run's network,
	// "host" ("" too) or "none" (R-TR-7).
	Isolation string `json:"isolation,omitempty"`
	Network   string `json:"network,omitempty"`
	// OnLimit is the plan tried when a run of the profile stops on a usage
	// limit (R-ONL-1); empty is none. The coordinator keeps it, not the
	// node; OnLimitSetBy is who set it, whom its steps are audited as.
	OnLimit      []string    `json:"on_limit,omitempty"`
	OnLimitSetBy *AuditActor `json:"on_limit_set_by,omitempty"`
	// APIKeyRef is the vault secret every launch of the profile hands its
	// tool as the tool's key variable (APIKeyEnv), the alternative to a
	// sign-in (R-ACCT-7). The coordinator keeps it, not the node.
	APIKeyRef string `json:"api_key_ref,omitempty"`
}

// APIKeyEnv is the variable each tool reads its API key from (R-ACCT-7).
var APIKeyEnv = map[string]string{"claude": "ANTHROPIC_API_KEY", "codex": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY",
	"grok": "XAI_API_KEY", "opencode": "ANTHROPIC_API_KEY"}

// Approval policies of a profile (R-REQ-10).
const (
	ApprovalsAsk   = "ask"
	ApprovalsDeny  = "deny"
	ApprovalsAllow = "allow"
)

// ApprovalRule is one rule of a profile's approval policy (R-REQ-11):
// when the request's tool (or kind) and the pattern on its command or
// paths match, Action (allow, deny or ask) settles it. Empty Tool, Kind
// and Pattern match every request.
type ApprovalRule struct {
	Tool    string `json:"tool,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Pattern string `json:"pattern,omitempty"`
	Action  string `json:"action"`
}

// ProfileCreate is POST /profiles.
type ProfileCreate struct {
	NodeID                 string            `json:"node_id"`
	Tool                   string            `json:"tool"`
	Name                   string            `json:"name"`
	Home                   string            `json:"home,omitempty"`
	Env                    map[string]string `json:"env,omitempty"`
	Active                 *bool             `json:"active,omitempty"`
	LaunchRequiresApproval bool              `json:"launch_requires_approval,omitempty"`
	AllowedWorkspaces      []string          `json:"allowed_workspaces,omitempty"`
	EngineHooks            bool              `json:"engine_hooks,omitempty"`
	DeniedTools            []string          `json:"denied_tools,omitempty"`
	// Approvals defaults to "ask" and AskTimeout to "10m" (R-REQ-10).
	Approvals     string         `json:"approvals,omitempty"`
	ApprovalRules []ApprovalRule `json:"approval_rules,omitempty"`
	AskTimeout    string         `json:"ask_timeout,omitempty"`
	StallAfter    string         `json:"stall_after,omitempty"`
	// ResumeAfterLoss: as on Profile (off by default).
	ResumeAfterLoss bool `json:"resume_after_loss,omitempty"`
	// Isolation and Network: as on Profile (R-TR-7).
	Isolation string `json:"isolation,omitempty"`
	Network   string `json:"network,omitempty"`
	// OnLimit: as on Profile (R-ONL-1).
	OnLimit []string `json:"on_limit,omitempty"`
	// APIKeyRef: as on Profile (R-ACCT-7).
	APIKeyRef string `json:"api_key_ref,omitempty"`
}

// ProfileUpdate is PATCH /profiles/{ref}: the fields given change.
type ProfileUpdate struct {
	Active                 *bool     `json:"active,omitempty"`
	LaunchRequiresApproval *bool     `json:"launch_requires_approval,omitempty"`
	AllowedWorkspaces      *[]string `json:"allowed_workspaces,omitempty"`
	EngineHooks            *bool     `json:"engine_hooks,omitempty"`
	DeniedTools            *[]string `json:"denied_tools,omitempty"`
	// The approval policy of the tool's requests (R-REQ-10..12).
	Approvals       *string         `json:"approvals,omitempty"`
	ApprovalRules   *[]ApprovalRule `json:"approval_rules,omitempty"`
	AskTimeout      *string         `json:"ask_timeout,omitempty"`
	StallAfter      *string         `json:"stall_after,omitempty"`
	ResumeAfterLoss *bool           `json:"resume_after_loss,omitempty"`
	// Isolation and Network apply to the next launch (R-TR-7).
	Isolation *string `json:"isolation,omitempty"`
	Network   *string `json:"network,omitempty"`
	// Env sets these variables (added or replaced); the values go to the
	// node and stay there (R-PROF-2). UnsetEnv removes variables by name.
	// A name may not be in both.
	Env      map[string]string `json:"env,omitempty"`
	UnsetEnv []string          `json:"unset_env,omitempty"`
	// Home moves the profile to another home directory on the node
	// (created 0700 when missing). Files stay where they are.
	Home *string `json:"home,omitempty"`
	// OnLimit replaces the on_limit plan; [] removes it (R-ONL-1).
	OnLimit *[]string `json:"on_limit,omitempty"`
	// APIKeyRef sets the profile's API key, a vault secret's ref; ""
	// removes it (R-ACCT-7).
	APIKeyRef *string `json:"api_key_ref,omitempty"`
}

// Fields lists the fields u changes, for the audit entry (names only,
// never values, R-AUD-3).
func (u ProfileUpdate) Fields() []string {
	var f []string
	add := func(set bool, name string) {
		if set {
			f = append(f, name)
		}
	}
	add(u.Active != nil, "active")
	add(u.LaunchRequiresApproval != nil, "launch_requires_approval")
	add(u.AllowedWorkspaces != nil, "allowed_workspaces")
	add(u.EngineHooks != nil, "engine_hooks")
	add(u.DeniedTools != nil, "denied_tools")
	add(u.Approvals != nil, "approvals")
	add(u.ApprovalRules != nil, "approval_rules")
	add(u.AskTimeout != nil, "ask_timeout")
	add(u.StallAfter != nil, "stall_after")
	add(u.ResumeAfterLoss != nil, "resume_after_loss")
	add(u.Isolation != nil, "isolation")
	add(u.Network != nil, "network")
	add(len(u.Env) > 0, "env")
	add(len(u.UnsetEnv) > 0, "unset_env")
	add(u.Home != nil, "home")
	add(u.OnLimit != nil, "on_limit")
	add(u.APIKeyRef != nil, "api_key_ref")
	return f
}

// ProfileList is GET /profiles.
type ProfileList struct {
	Items []Profile `json:"items"`
}

// Workspace DLP postures: whether the workspace's file contents may be read
// through the API (diff/file, R-DIFF-5).
const (
	DLPAllow = "allow"
	DLPDeny  = "deny"
)

// DefaultMaxReadBytes is a workspace's max_read_bytes when unset.
const DefaultMaxReadBytes = 1 << 20

// Workspace is a registered directory on a node, with its file rules.
type Workspace struct {
	Ref    string `json:"ref"`
	Tenant string `json:"tenant"`
	NodeID string `json:"node_id"`
	Name   string `json:"name"`
	Path   string `json:"path"`
	// ReadOnly: no run may write the folder; a worktree launch is refused
	// (R-WT-3).
	ReadOnly bool `json:"read_only"`
	// AllowedSubpaths, when set, are the only sub-paths (relative, slash
	// separated) whose files the API shows (R-DIFF-5); empty allows all.
	AllowedSubpaths []string `json:"allowed_subpaths,omitempty"`
	// MaxReadBytes caps a file read through the API (R-DIFF-7).
	MaxReadBytes int64 `json:"max_read_bytes"`
	// DLP is DLPAllow or DLPDeny (R-DIFF-5).
	DLP       string    `json:"dlp"`
	CreatedAt time.Time `json:"created_at"`

	// The setup command and its approval (R-SETUP-5), filled by GET
	// /workspaces/{ref} and the setup routes.
	SetupCommand       *string        `json:"setup_command,omitempty"`
	SetupCommandSHA256 string         `json:"setup_command_sha256,omitempty"`
	SetupApproved      *bool          `json:"setup_approved,omitempty"`
	SetupApproval      *ApprovalState `json:"setup_approval,omitempty"`
}

// ApprovalState is a person's last approval of a text: the hash they
// reviewed, who and when (R-SETUP-5, R-PCS-10).
type ApprovalState struct {
	SHA256 string    `json:"sha256"`
	Actor  string    `json:"actor"`
	At     time.Time `json:"at"`
}

// WorkspaceCreate is POST /workspaces.
type WorkspaceCreate struct {
	NodeID          string   `json:"node_id"`
	Path            string   `json:"path"`
	Name            string   `json:"name"`
	ReadOnly        bool     `json:"read_only,omitempty"`
	AllowedSubpaths []string `json:"allowed_subpaths,omitempty"`
	MaxReadBytes    int64    `json:"max_read_bytes,omitempty"`
	DLP             string   `json:"dlp,omitempty"`
}

// ProjectConfig is GET /workspaces/{ref}/project-config (R-PCS-10): the
// flagged keys of the repository-carried agent configuration per file,
// with their values (a password in a URL masked, R-PCS-25), the sha256 of
// exactly the flagged part, and whether the last approval covers it.
type ProjectConfig struct {
	WorkspaceRef string              `json:"workspace_ref"`
	Files        []ProjectConfigFile `json:"files"`
	// SHA256 is absent when nothing is flagged (R-PCS-9).
	SHA256   string         `json:"sha256,omitempty"`
	Approved bool           `json:"approved"`
	Approval *ApprovalState `json:"approval,omitempty"`
}

// ProjectConfigFile is one flagged file.
type ProjectConfigFile struct {
	Path string `json:"path"`
	// Tools are the tools that read the file (R-PCS-19).
	Tools []string `json:"tools"`
	// Unreadable is the stable code of why the file could not be read in
	// its format (too_large, too_deep, symlink, invalid_toml, ...), flagged
	// whole (R-PCS-5); empty when it was read. Detail says where, for a
	// person.
	Unreadable string             `json:"unreadable,omitempty"`
	Detail     string             `json:"detail,omitempty"`
	Keys       []ProjectConfigKey `json:"keys,omitempty"`
}

// ProjectConfigKey is one flagged key and its value.
type ProjectConfigKey struct {
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value"`
}

// SetupCommandRequest is PUT /workspaces/{ref}/setup-command (R-SETUP-3).
type SetupCommandRequest struct {
	Command *string `json:"command"`
}

// ApproveRequest is the body of both approval routes: the hash the person
// reviewed (R-SETUP-7, R-PCS-11).
type ApproveRequest struct {
	SHA256 *string `json:"sha256"`
}

// WorkspaceList is GET /workspaces.
type WorkspaceList struct {
	Items []Workspace `json:"items"`
}

// Per-caller marks (R-PIN-*, R-SNZ-*, R-DONE-*).

// PinState answers POST and DELETE /runs/{ref}/pin (R-PIN-1, R-PIN-8).
type PinState struct {
	RunRef   string     `json:"run_ref"`
	Pinned   bool       `json:"pinned"`
	PinnedAt *time.Time `json:"pinned_at"`
}

// MarkState answers the snooze and done routes (R-SNZ-1, R-DONE-1).
type MarkState struct {
	RunRef       string     `json:"run_ref"`
	SnoozedUntil *time.Time `json:"snoozed_until,omitempty"`
	Done         bool       `json:"done"`
}

// Diff is GET /runs/{ref}/diff (R-DIFF-1, R-DIFF-2): the paths the
// worktree's branch changed since it left the workspace's commit; base is
// their merge base and head the branch tip, both full commit ids.
type Diff struct {
	Branch    string      `json:"branch"`
	Base      string      `json:"base"`
	Head      string      `json:"head"`
	Files     []DiffEntry `json:"files"`
	Truncated bool        `json:"truncated"`
	// Uncommitted is how many paths have changes in the run's worktree
	// folder that are not committed on its branch (R-DIFF-9): the diff
	// shows committed objects only. Absent when the folder is gone.
	Uncommitted *int `json:"uncommitted,omitempty"`
}

// DiffEntry is one changed path (R-DIFF-8: status added, modified,
// deleted, renamed or type_changed).
type DiffEntry struct {
	Path    string `json:"path"`
	Status  string `json:"status"`
	OldPath string `json:"old_path,omitempty"`
}

// FileDiff is GET /runs/{ref}/diff/file (R-DIFF-3, R-DIFF-7, R-DIFF-8).
type FileDiff struct {
	Path              string `json:"path"`
	Original          string `json:"original"`
	Modified          string `json:"modified"`
	OriginalTruncated bool   `json:"original_truncated"`
	ModifiedTruncated bool   `json:"modified_truncated"`
	Binary            bool   `json:"binary,omitempty"`
}

// UncommittedDiff is GET /runs/{ref}/diff/uncommitted (R-DIFF-10): what
// the run's folder (its worktree, or the workspace it works in) holds that
// its HEAD commit does not, as git diff prints it. Patch is empty and
// TooLarge true when it is longer than PatchLimit bytes.
type UncommittedDiff struct {
	Head       string      `json:"head"`
	Files      []DiffEntry `json:"files"`
	Truncated  bool        `json:"truncated"`
	Patch      string      `json:"patch"`
	TooLarge   bool        `json:"too_large"`
	PatchLimit int64       `json:"patch_limit"`
}

// HandoffPreview is GET /runs/{ref}/handoff (R-HOP-1, R-HOF-20).
type HandoffPreview struct {
	Summary         string `json:"summary"`
	SourceDriver    string `json:"source_driver"`
	Turns           int    `json:"turns"`
	TranscriptBytes int64  `json:"transcript_bytes"`
}

// HandoffRequest is POST /runs/{ref}/handoff (R-HOF-8, R-HOF-20).
type HandoffRequest struct {
	ProviderProfileRef string  `json:"provider_profile_ref"`
	Summary            *string `json:"summary,omitempty"`
	Name               string  `json:"name,omitempty"`
}

// HandoffResponse is the new run with how its first turn went (R-HOF-12):
// summary_state delivered, not_delivered, unknown or waits_for_approval,
// and first_turn unless delivered (R-HOF-13).
type HandoffResponse struct {
	Run
	SummaryState string `json:"summary_state"`
	FirstTurn    string `json:"first_turn,omitempty"`
}

// MoveRequest is POST /runs/{ref}/move (R-MOVE-*).
type MoveRequest struct {
	ProviderProfileRef string `json:"provider_profile_ref"`
}

// SnoozeRequest is POST /runs/{ref}/snooze (R-SNZ-2).
type SnoozeRequest struct {
	Until *string `json:"until"`
}

// NameRequest is PUT /runs/{ref}/name (R-NAME-*). Name is a pointer so a
// missing field is told from an empty one (R-NAME-3).
type NameRequest struct {
	Name *string `json:"name"`
}
