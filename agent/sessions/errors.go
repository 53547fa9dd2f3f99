package sessions

import "errors"

// Errors returned by Runner.Start and the constructors.
var (
	// ErrPTYUnsupported is returned by NewPTYRunner on hosts other than Linux
	// (R-TR-8: there the PTY runner is not registered).
	ErrPTYUnsupported = errors.New("sessions: the PTY runner is available on Linux only")

	// ErrUnsupportedOS is returned by Start on hosts without Unix process
	// groups, where a child could not be stopped as a group (R-STOP-3).
	ErrUnsupportedOS = errors.New("sessions: process-group runners need a Unix host")

	// ErrNoPath is returned by Start when Spec.Path is empty.
	ErrNoPath = errors.New("sessions: Spec.Path is empty")

	// ErrNotFound is returned by Start when a bare Spec.Path is not found in
	// the PATH of Spec.Env.
	ErrNotFound = errors.New("sessions: executable not found in Spec.Env PATH")
)
