//go:build !linux

package devmode

// DieWithGoRun is Linux-only (PR_SET_PDEATHSIG); elsewhere it does nothing.
func DieWithGoRun() error { return nil }
