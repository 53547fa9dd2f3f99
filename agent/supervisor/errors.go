package supervisor

import "errors"

// These are the supervisor's refusals. Each is returned wrapped in a
// refusal.Error whose sentence says what to do; errors.Is finds the kind.
// agentd maps them to wire statuses (R-API-3's order is kept here: lookup,
// validation, tool support, state, capacity).

// Lookup.
var (
	// ErrRunNotFound: no run with that ref on this node.
	ErrRunNotFound = errors.New("supervisor: run not found")
	// ErrRunExists: a run with that ref exists already.
	ErrRunExists = errors.New("supervisor: run exists")
)

// Validation: the request is malformed; nothing was written.
var (
	// ErrBadRequest: the run ref or the tenant is malformed.
	ErrBadRequest = errors.New("supervisor: malformed run ref or tenant")
	// ErrBadIsolation: the isolation is not native, container or sandbox.
	ErrBadIsolation = errors.New("supervisor: bad isolation")
	// ErrBadGrant: a grant is malformed or clashes with the profile.
	ErrBadGrant = errors.New("supervisor: bad grant")
	// ErrBadProfile: the driver refuses the profile's command line.
	ErrBadProfile = errors.New("supervisor: bad profile")
	// ErrBadHookInput: the hook's input is not a PreToolUse event.
	ErrBadHookInput = errors.New("supervisor: bad hook input")
	// ErrHookInputTooLarge: the hook's input is over its bound.
	ErrHookInputTooLarge = errors.New("supervisor: hook input too large")
)

// Tool support: this node cannot run what was asked.
var (
	// ErrUnknownTool: no driver for the profile's tool.
	ErrUnknownTool = errors.New("supervisor: unknown tool")
	// ErrBadWorkdir: the run directory is not an absolute directory.
	ErrBadWorkdir = errors.New("supervisor: bad run directory")
	// ErrIsolationUnsupported: sandbox without a working bubblewrap, or
	// container without a runner (R-TR-7).
	ErrIsolationUnsupported = errors.New("supervisor: isolation unsupported")
	// ErrTransportUnsupported: the launch form's runner is missing
	// (R-TR-8).
	ErrTransportUnsupported = errors.New("supervisor: transport unsupported")
	// ErrToolNotFound: the tool's program is not on the child's PATH.
	ErrToolNotFound = errors.New("supervisor: tool not found")
	// ErrWorktreeNeedsWorkspace: a worktree launch without a workspace.
	ErrWorktreeNeedsWorkspace = errors.New("supervisor: worktree needs a workspace")
	// ErrGrantFilesUnsupported: a grant as_file on an agent without a
	// grants directory.
	ErrGrantFilesUnsupported = errors.New("supervisor: grant files unsupported")
	// ErrMoveUnsupported: only Claude Code runs move (R-MOVE-12, Q-27).
	ErrMoveUnsupported = errors.New("supervisor: move unsupported")
)

// Requests (R-REQ-2): the answer to a tool's request.
var (
	// ErrRequestNotFound: the run has no request with that id.
	ErrRequestNotFound = errors.New("supervisor: request not found")
	// ErrBadAnswer: the decision, option or text does not fit the
	// request.
	ErrBadAnswer = errors.New("supervisor: bad answer")
	// ErrRequestSettled: someone (or a rule, or the timeout) answered
	// first; the sentence names who.
	ErrRequestSettled = errors.New("supervisor: request settled")
	// ErrRequestExpired: the process that asked is gone, or the tool no
	// longer waits on the request.
	ErrRequestExpired = errors.New("supervisor: request expired")
)

// State and guards: the run is not in a state that allows it.
var (
	// ErrNotLive: the run has no live process.
	ErrNotLive = errors.New("supervisor: not live")
	// ErrRunLive: the run is live; stop it first.
	ErrRunLive = errors.New("supervisor: run live")
	// ErrReleased: the run was released and takes no new generation
	// (R-RES-6).
	ErrReleased = errors.New("supervisor: released")
	// ErrNotReleased: delete needs a released run (R-DEL-2).
	ErrNotReleased = errors.New("supervisor: not released")
	// ErrPendingApproval: the run waits for a person's approval.
	ErrPendingApproval = errors.New("supervisor: pending approval")
	// ErrNotPending: approve of a run that waits for nothing.
	ErrNotPending = errors.New("supervisor: not pending")
	// ErrProfileGone: the run's profile is no longer registered.
	ErrProfileGone = errors.New("supervisor: profile gone")
	// ErrIsolationBelowProfile: a native launch of a profile that isolates
	// its runs (R-TR-7).
	ErrIsolationBelowProfile = errors.New("supervisor: isolation below the profile's")
	// ErrConversationUnavailable: the stored conversation cannot be
	// resumed; nothing new was started in its place (R-RES-2).
	ErrConversationUnavailable = errors.New("supervisor: conversation unavailable")
	// ErrSetupNotApproved: the coordinator's verdict on the workspace's
	// setup command (R-SETUP-8).
	ErrSetupNotApproved = errors.New("supervisor: setup not approved")
	// ErrProjectConfig: the repository carries agent config the tool would
	// honour and nobody approved (R-PCS-12).
	ErrProjectConfig = errors.New("supervisor: project config not approved")
	// ErrRunNotStopped: a move of a run that is not stopped or failed.
	ErrRunNotStopped = errors.New("supervisor: run not stopped")
	// ErrProfileOtherTool: a move to a profile of another tool.
	ErrProfileOtherTool = errors.New("supervisor: profile of another tool")
	// ErrConversationBound: the conversation is another run's under the
	// target profile.
	ErrConversationBound = errors.New("supervisor: conversation bound")
	// ErrWorkspaceGone: the run's workspace is no longer registered.
	ErrWorkspaceGone = errors.New("supervisor: workspace gone")
	// ErrNotClaude: the engine's hook was called for a run of another tool.
	ErrNotClaude = errors.New("supervisor: not a Claude Code run")
	// ErrOtherSession: the hook names another session than the run's.
	ErrOtherSession = errors.New("supervisor: other session")
)

// Capacity.
var (
	// ErrInputQueueFull: the bytes waiting for the child's stdin (or for
	// the tool to take a turn) reached their bound; retry when the running
	// turn ends.
	ErrInputQueueFull = errors.New("supervisor: input queue full")
	// ErrWorkspaceUnreadable: the workspace cannot be scanned for the
	// repository-config gate.
	ErrWorkspaceUnreadable = errors.New("supervisor: workspace unreadable")
)
