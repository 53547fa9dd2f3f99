package transcript

import (
	"fmt"
)

// Error is an error a caller can turn into an API error body (R-API-4): a
// stable snake_case code and a sentence a person can act on.
// errors.Is matches two *Error values with the same Code, so a caller can
// test a returned error against the sentinels below.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Request errors: what the caller asked for is not valid or does not exist.
var (
	// ErrInvalidParameter is a messages query parameter outside R-MSG-16;
	// the returned error's message names the parameter.
	ErrInvalidParameter = &Error{"invalid_parameter", "invalid parameter"}
	// ErrUnknownMessage is an id read beyond the session's messages (R-MSG-11).
	ErrUnknownMessage = &Error{"unknown_message", "no such message"}
	// ErrUnknownAgent is a sub-agent the session never started (R-AGT-3).
	ErrUnknownAgent = &Error{"unknown_agent", "no such sub-agent"}
	// ErrUnsupportedTool is a run of a tool other than Claude Code and Codex
	// (R-ACT-8, R-MSG-11), or a Codex child transcript read (R-AGT-4).
	ErrUnsupportedTool = &Error{"unsupported_tool", "unsupported tool"}
)

// Record errors: the native record exists but may not be read.
var (
	// ErrTranscriptUnsafe is a transcript that breaks the home and link
	// rules: outside the profile home, reached through a symlink, a
	// hard link, or not a regular file. Nothing of it is read.
	ErrTranscriptUnsafe = &Error{"transcript_unsafe", "the transcript breaks the home and link rules"}
	// ErrInvalidSource is a Source the agent should never build: an empty
	// home, or a conversation id that is not a UUID.
	ErrInvalidSource = &Error{"invalid_source", "invalid transcript source"}
)

// errf returns a copy of sentinel with its own message.
func errf(sentinel *Error, format string, args ...any) *Error {
	return &Error{Code: sentinel.Code, Message: fmt.Sprintf(format, args...)}
}
