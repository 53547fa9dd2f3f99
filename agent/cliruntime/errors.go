package cliruntime

import "errors"

// Errors of Launch and Resume. The supervisor maps them to its own API
// errors; none of them means the tool was started.
var (
	// ErrBadHome: LaunchSpec.Home is empty or not an absolute path.
	ErrBadHome = errors.New("cliruntime: the profile home must be an absolute path")

	// ErrBadWorkdir: LaunchSpec.Workdir is empty or not an absolute path.
	ErrBadWorkdir = errors.New("cliruntime: the working directory must be an absolute path")

	// ErrBadEnv: an entry of LaunchSpec.Env is not KEY=VALUE with a
	// non-empty KEY free of '=' and NUL, or a value holds a NUL.
	ErrBadEnv = errors.New("cliruntime: profile environment entries must be KEY=VALUE")

	// ErrReservedEnv: LaunchSpec.Env sets a variable the driver derives from
	// the profile home (HOME, the XDG directories, the tool's config home),
	// which would point the tool at another account's records.
	ErrReservedEnv = errors.New("cliruntime: the profile environment may not set a variable derived from the profile home")

	// ErrNoConversation: Resume was given no ConversationID (R-RES-1). There
	// is no silent fallback to a launch (R-RES-2).
	ErrNoConversation = errors.New("cliruntime: resume needs the stored conversation id")

	// ErrUnexpectedConversation: Launch was given a ConversationID; a launch
	// always starts a new conversation, so the caller meant Resume.
	ErrUnexpectedConversation = errors.New("cliruntime: launch starts a new conversation; use resume for a stored one")

	// ErrBadConversationID: the ConversationID cannot be one this tool issued
	// (Claude and Codex ids are UUIDs; it must never be read as a flag).
	ErrBadConversationID = errors.New("cliruntime: malformed conversation id")
)

// Errors of CheckInput and Session.Encode (R-IN-2). The API answers both with
// 400; ErrInputQueueFull and ErrHandshakeFailed with 409.
var (
	// ErrWrongInputField: the input uses a field this driver does not take
	// (claude takes line or message; codex and grok take text).
	ErrWrongInputField = errors.New("cliruntime: wrong input field for this driver")

	// ErrInvalidInput: the field is right but its value is not (no field or
	// more than one, empty text, a line that is not one JSON object or holds
	// a line break, a message that is not a JSON string or array).
	ErrInvalidInput = errors.New("cliruntime: invalid input")

	// ErrInputQueueFull: MaxQueuedInputs inputs already wait for the tool
	// (handshake not done, or a turn still running).
	ErrInputQueueFull = errors.New("cliruntime: too many inputs are waiting for the tool")

	// ErrHandshakeFailed: the tool refused the handshake (initialize, or the
	// thread or session it was asked for), so this process can take no
	// input. The supervisor reports the handshake's EventError or
	// EventConversationUnavailable and stops the process.
	ErrHandshakeFailed = errors.New("cliruntime: the tool refused the handshake; this process takes no input")
)

// MaxQueuedInputs bounds the inputs a Session holds back while the tool cannot
// take them yet.
const MaxQueuedInputs = 64
