//go:build !unix

package worktree

import "os/exec"

// setProcessGroup: without Unix process groups, the context kills git itself.
func setProcessGroup(cmd *exec.Cmd) {}
