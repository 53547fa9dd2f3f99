package handoff

import (
	"fmt"
)

// Error is a refusal a person can act on: a stable snake_case code and a sentence (R-API-4). errors.Is matches
// an *Error against the sentinels below by Code.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Is reports whether target is an *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

func refuse(kind *Error, format string, args ...any) *Error {
	return &Error{Code: kind.Code, Msg: fmt.Sprintf(format, args...)}
}

func sentinel(code, msg string) *Error {
	return &Error{Code: code, Msg: msg}
}

// Refusals of the source (R-HOF-1, R-HOF-15, Q-23): 422.
var (
	// ErrUnsupportedTool: the session's tool has no handoff reader (Grok,
	// R-HOF-1), or the tool name is unknown.
	ErrUnsupportedTool = sentinel("handoff_unsupported_tool",
		"handoff reads Claude Code, Codex, Gemini CLI and OpenCode sessions only")
	// ErrConversationTooLarge: the conversation is larger than
	// MaxConversationBytes (R-HOF-15).
	ErrConversationTooLarge = sentinel("conversation_too_large",
		"the conversation is larger than 256 MiB")
	// ErrRecordTooLarge: one record of the conversation is larger than
	// MaxRecordBytes (R-HOF-15).
	ErrRecordTooLarge = sentinel("conversation_record_too_large",
		"the conversation holds a record larger than 32 MiB")
	// ErrNotRegularFile: the conversation file, or a folder on its way from
	// the profile home, is a symbolic link, a second name of a file (hard
	// link) or a special file (Q-23, as R-MOVE-12).
	ErrNotRegularFile = sentinel("conversation_not_regular_file",
		"the conversation is a symbolic link, a hard link or a special file")
)

// The conversation cannot be had.
var (
	// ErrConversationUnavailable: the profile home holds no stored
	// conversation with that id (the tool has not written it yet, or it was
	// removed), or OpenCode does not know the session.
	ErrConversationUnavailable = sentinel("conversation_unavailable",
		"the session's stored conversation was not found in its profile home")
	// ErrExportFailed: `opencode export` failed or printed something that is
	// not an export.
	ErrExportFailed = sentinel("opencode_export_failed",
		"opencode export failed")
	// ErrExportTimeout: `opencode export` did not finish before the deadline.
	ErrExportTimeout = sentinel("opencode_export_timeout",
		"opencode export did not finish in time")
)

// Caller errors.
var (
	// ErrBadSource: the Source cannot name a conversation safely (relative
	// home, malformed id, no opencode binary).
	ErrBadSource = sentinel("bad_handoff_source",
		"the handoff source is malformed")
)
