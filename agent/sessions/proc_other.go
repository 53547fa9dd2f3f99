//go:build !unix

package sessions

import "context"

type unsupportedRunner struct{}

// NewProcRunner returns a runner whose Start fails with ErrUnsupportedOS: the
// host has no process groups to stop a child with (R-STOP-3).
func NewProcRunner() Runner { return unsupportedRunner{} }

func (unsupportedRunner) Name() string { return "proc" }

func (unsupportedRunner) Start(context.Context, Spec) (Process, error) {
	return nil, ErrUnsupportedOS
}
