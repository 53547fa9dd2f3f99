//go:build !unix

package worktree

import "os/exec"

// setProcessGroup: without Unix process groups, the context kills git itself.
func setProcessGroup(cmd *exec.Cmd) {}

// canWrite: without access(2), the mode bits checked by the caller decide.
func canWrite(string) bool { return true }
