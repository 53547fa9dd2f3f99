package sessions

import (
	"context"
	"fmt"
	"os"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Initial terminal size; a child that needs another asks for it itself.
const (
	ptyRows = 24
	ptyCols = 80
)

type ptyRunner struct{}

// NewPTYRunner returns the runner for interactive forms (R-TR-5): stdin and
// stdout on a local PTY in raw mode (no echo, no line discipline, no output
// translation, no signal characters; start state 80x24), stderr on a separate
// pipe. The child is the session leader, so its pgid is its pid and the PTY is
// its controlling terminal (R-STOP-3). The output stream is tagged "pty"
// (R-TR-9). Never use it for Claude Code's --print form (R-TR-3).
//
// It fails, wrapping ErrPTYUnsupported, when the host cannot open a PTY (no
// devpts), so the composition root does not register it (R-TR-8).
func NewPTYRunner() (Runner, error) {
	m, t, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPTYUnsupported, err)
	}
	closeFiles(m, t)
	return ptyRunner{}, nil
}

func (ptyRunner) Name() string { return "pty" }

func (ptyRunner) Start(ctx context.Context, s Spec) (Process, error) {
	master, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("sessions: start %q: open pty: %w", s.Path, err)
	}
	// The parent's copy of the slave always goes: while we hold it, reads on
	// the master never reach EOF.
	defer closeFiles(tty)
	if err := control(tty, setupTerminal); err != nil {
		closeFiles(master)
		return nil, fmt.Errorf("sessions: start %q: raw pty: %w", s.Path, err)
	}
	// A second descriptor on the master for stdin, so that the caller closing
	// Stdin cannot close the stream it is reading.
	var in *os.File
	if err := control(master, func(fd int) error {
		nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return err
		}
		in = os.NewFile(uintptr(nfd), master.Name())
		return nil
	}); err != nil {
		closeFiles(master)
		return nil, fmt.Errorf("sessions: start %q: dup pty: %w", s.Path, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeFiles(master, in)
		return nil, fmt.Errorf("sessions: start %q: pipe: %w", s.Path, err)
	}
	// Ctty is the child's descriptor 0, the slave.
	attr := &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	cmd, err := startChild(ctx, s, [3]*os.File{tty, tty, errW}, attr)
	closeFiles(errW)
	if err != nil {
		closeFiles(master, in, errR)
		return nil, err
	}
	return newProcess(cmd, in, master, errR, true), nil
}

// setupTerminal puts the terminal in raw mode, as cfmakeraw(3) does, and sets
// the initial size.
func setupTerminal(fd int) error {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return err
	}
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, t); err != nil {
		return err
	}
	return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: ptyRows, Col: ptyCols})
}

// control runs fn on f's descriptor without taking f out of the poller (as
// f.Fd() would, by switching it to blocking mode).
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
