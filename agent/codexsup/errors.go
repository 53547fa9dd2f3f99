package codexsup

import "errors"

// The refusals of Codex supervision; agentd maps them to wire statuses.
var (
	// ErrAppServerError: the app-server refused a request.
	ErrAppServerError = errors.New("codexsup: the app-server refused a request")
	// ErrAppServerUnavailable: the app-server is unavailable.
	ErrAppServerUnavailable = errors.New("codexsup: the app-server is unavailable")
	// ErrBadCursor: the cursor is not one this host issued.
	ErrBadCursor = errors.New("codexsup: the cursor is not one this host issued")
	// ErrBadLimit: the limit is out of range.
	ErrBadLimit = errors.New("codexsup: the limit is out of range")
	// ErrBadThreadId: not a Codex thread id.
	ErrBadThreadId = errors.New("codexsup: not a Codex thread id")
	// ErrConfirmationRequired: archive needs confirmNoOtherRunner.
	ErrConfirmationRequired = errors.New("codexsup: archive needs confirmNoOtherRunner")
	// ErrBranchPending: a pending branch holds the thread.
	ErrBranchPending = errors.New("codexsup: a pending branch holds the thread")
	// ErrBranchRace: the thread got a branch meanwhile.
	ErrBranchRace = errors.New("codexsup: the thread got a branch meanwhile")
	// ErrCodexSupervisionUnavailable: codex supervision is unavailable on this node.
	ErrCodexSupervisionUnavailable = errors.New("codexsup: codex supervision is unavailable on this node")
	// ErrDescendantsUnknown: the thread's descendants are unknown.
	ErrDescendantsUnknown = errors.New("codexsup: the thread's descendants are unknown")
	// ErrOwnerActive: a live run owns the thread.
	ErrOwnerActive = errors.New("codexsup: a live run owns the thread")
	// ErrThreadActive: the thread is active.
	ErrThreadActive = errors.New("codexsup: the thread is active")
	// ErrThreadArchived: the thread is archived.
	ErrThreadArchived = errors.New("codexsup: the thread is archived")
	// ErrThreadError: the thread is in an error state.
	ErrThreadError = errors.New("codexsup: the thread is in an error state")
	// ErrThreadLeased: the thread is leased.
	ErrThreadLeased = errors.New("codexsup: the thread is leased")
	// ErrAppServerTimeout: the app-server did not answer in time.
	ErrAppServerTimeout = errors.New("codexsup: the app-server did not answer in time")
	// ErrNotFound: not a Codex supervision run.
	ErrNotFound = errors.New("codexsup: not a Codex supervision run")
	// ErrThreadNotFound: no such thread.
	ErrThreadNotFound = errors.New("codexsup: no such thread")
	// ErrNotReady: the run runtime is not open yet.
	ErrNotReady = errors.New("codexsup: the run runtime is not open yet")
)
