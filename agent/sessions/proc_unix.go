//go:build unix

package sessions

import (
	"context"
	"fmt"
	"os"
	"syscall"
)

type procRunner struct{}

// NewProcRunner returns the runner the composition root wires for the stdio
// protocols (R-TR-2): stdin, stdout and stderr are three pipes and stay
// separate streams. stdin is never a terminal, which Claude Code's --print
// form depends on (R-TR-3). The child leads its own process group (Setpgid,
// R-STOP-3).
func NewProcRunner() Runner { return procRunner{} }

func (procRunner) Name() string { return "proc" }

func (procRunner) Start(ctx context.Context, s Spec) (Process, error) {
	var fs [6]*os.File // inR, inW, outR, outW, errR, errW
	for i := 0; i < 3; i++ {
		r, w, err := os.Pipe() // O_CLOEXEC: no other child inherits these
		if err != nil {
			closeFiles(fs[:]...)
			return nil, fmt.Errorf("sessions: start %q: pipe: %w", s.Path, err)
		}
		fs[2*i], fs[2*i+1] = r, w
	}
	inR, inW, outR, outW, errR, errW := fs[0], fs[1], fs[2], fs[3], fs[4], fs[5]
	cmd, err := startChild(ctx, s, [3]*os.File{inR, outW, errW}, &syscall.SysProcAttr{Setpgid: true})
	// The child holds its own copies; keeping ours would delay EOF forever.
	closeFiles(inR, outW, errW)
	if err != nil {
		closeFiles(inW, outR, errR)
		return nil, err
	}
	return newProcess(cmd, inW, outR, errR, false), nil
}
