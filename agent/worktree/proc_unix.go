//go:build unix

package worktree

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// canWrite asks the kernel whether this process may write in folder p
// (permissions, ACLs, a read-only mount).
func canWrite(p string) bool { return unix.Access(p, unix.W_OK) == nil }

// setProcessGroup runs git in its own process group and kills the whole
// group when the call's context ends, so no helper git spawned outlives it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
