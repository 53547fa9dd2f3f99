// Package refusal is the shape of a domain refusal on the agent: a kind,
// one of the sentinel errors its package declares (compared with
// errors.Is), and a sentence a person can act on. A domain package says
// what went wrong and never with which HTTP status: agentd alone maps the
// kinds to wire statuses and codes (agentd/errors.go).
package refusal

import "fmt"

// Error is one refusal. Error() is the sentence; errors.Is(err, Kind)
// holds.
type Error struct {
	Kind error
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns the kind.
func (e *Error) Unwrap() error { return e.Kind }

// New returns a refusal of kind with a formatted sentence.
func New(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Wrap returns err (a refusal or any error) with more of a sentence after
// it; errors.Is still finds err's kind.
func Wrap(err error, format string, args ...any) error {
	return &wrapped{err: err, more: fmt.Sprintf(format, args...)}
}

type wrapped struct {
	err  error
	more string
}

func (w *wrapped) Error() string { return w.err.Error() + w.more }
func (w *wrapped) Unwrap() error { return w.err }
