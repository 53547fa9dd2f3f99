package claudesup

import (
	"errors"
	"syscall"
)

// processExists: signal 0 reaches it, or it is another user's.
func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
