package registry

import "errors"

// Lookups.
var (
	// ErrNotFound: no profile or workspace with that ref in the caller's
	// tenant (another tenant's is the same answer).
	ErrNotFound = errors.New("registry: not found")
	// ErrExists: a profile or workspace with that ref is stored already.
	ErrExists = errors.New("registry: exists")
)

// Malformed requests: nothing was written.
var (
	// ErrBadRequest: the ref or the tenant is malformed.
	ErrBadRequest = errors.New("registry: malformed ref or tenant")
	// ErrUnknownTool: the profile names a tool this agent has no driver for.
	ErrUnknownTool = errors.New("registry: unknown tool")
	// ErrBadName: the name is not 1-64 letters, digits, '.', '_' or '-'.
	ErrBadName = errors.New("registry: bad name")
	// ErrBadPolicy: the profile's policy contradicts itself or its tool.
	ErrBadPolicy = errors.New("registry: bad policy")
	// ErrHomeRequired: no home was given and the agent has no profiles
	// directory to make one in.
	ErrHomeRequired = errors.New("registry: home required")
	// ErrBadHome: the home is not an absolute path.
	ErrBadHome = errors.New("registry: bad home")
	// ErrBadEnv: an environment name is malformed, or the driver refuses the
	// profile's environment (a reserved variable, a NUL byte).
	ErrBadEnv = errors.New("registry: bad environment")
	// ErrBadDLP: the DLP posture is neither allow nor deny.
	ErrBadDLP = errors.New("registry: bad dlp")
	// ErrBadMaxReadBytes: max_read_bytes is negative.
	ErrBadMaxReadBytes = errors.New("registry: bad max_read_bytes")
	// ErrBadSubpath: an allowed sub-path is not a clean relative path.
	ErrBadSubpath = errors.New("registry: bad sub-path")
	// ErrBadPath: the workspace path is not absolute.
	ErrBadPath = errors.New("registry: bad path")
)

// The node refuses what the request names.
var (
	// ErrHomeUnusable: the profile home cannot be created on the node.
	ErrHomeUnusable = errors.New("registry: home unusable")
	// ErrNotADirectory: the workspace path is not a directory on the node.
	ErrNotADirectory = errors.New("registry: not a directory")
	// ErrWorkspaceUnreadable: the workspace directory cannot be scanned.
	ErrWorkspaceUnreadable = errors.New("registry: workspace unreadable")
)

// Policy refusals of a launch, resume or move target (R-MOVE-3, Q-53).
var (
	// ErrProfileInactive: the profile takes no new process.
	ErrProfileInactive = errors.New("registry: profile inactive")
	// ErrWorkspaceNotAllowed: the profile does not take runs there.
	ErrWorkspaceNotAllowed = errors.New("registry: workspace not allowed")
	// ErrHomeNotOwned: the home is not the profile's own directory
	// (R-MOVE-11c): missing, another user's, or shared with a profile.
	ErrHomeNotOwned = errors.New("registry: home not owned")
)
