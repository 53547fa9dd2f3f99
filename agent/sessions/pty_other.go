//go:build !linux

package sessions

// NewPTYRunner fails with ErrPTYUnsupported off Linux; there the PTY runner is
// not registered and a launch that needs it is refused (R-TR-8).
func NewPTYRunner() (Runner, error) { return nil, ErrPTYUnsupported }
