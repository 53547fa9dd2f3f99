package sessions

import (
	"runtime"
	"syscall"
)

// dieWithAgent makes the kernel SIGKILL the child when the agent dies: the
// children die with the agent in this version (issue 3, R-STATE-6), even on
// kill -9, so a restarted agent never finds an orphan writing into a run it
// has recorded lost. Pdeathsig fires when the thread that forked exits, so
// the fork happens on a locked thread that the Go runtime never retires
// while the agent lives (see lockForkThread).
func dieWithAgent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// lockForkThread pins the calling goroutine to its thread for the fork and
// returns the unlock. A thread a goroutine unlocks is kept by the runtime,
// so the child's parent thread outlives the fork.
func lockForkThread() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}
