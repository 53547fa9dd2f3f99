package devmode

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// DieWithGoRun makes dev mode stop when the `go run` that started it goes
// away (R-DEV-1). `go run` builds the binary under a go-build temp dir and
// runs it as its child; killing `go run` does not kill that child, which
// would keep the ports, the bbolt lock and the vendor CLIs' processes. So
// a dev process whose executable lives in a go-build dir asks the kernel
// for SIGTERM when its parent dies (PR_SET_PDEATHSIG; SIGTERM stops dev
// mode cleanly, runs included), then checks that its parent is still the
// go command: one that died before the request was made would never send
// it. An installed binary is left alone: `olivares-coordinator dev &` from a
// shell keeps running after the shell, as it should.
func DieWithGoRun() error {
	exe, err := os.Executable()
	if err != nil || !underGoBuild(exe) {
		return nil
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0); e != 0 {
		return fmt.Errorf("dev: ask to stop with go run: %v", e)
	}
	if comm := parentComm(); comm != "go" {
		return fmt.Errorf("dev: started by go run, whose process is gone (parent is now %q); not starting", comm)
	}
	return nil
}

// parentComm is the command name of this process's parent now.
func parentComm() string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", os.Getppid()))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
