//go:build unix

package worktree

import (
	"os/exec"
	"syscall"
)

// setProcessGroup runs git in its own process group and kills the whole
// group when the call's context ends, so no helper git spawned outlives it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
