package sessions

import (
	"context"
	"io"
	"syscall"
	"time"
)

// DefaultGrace is the time Stop waits between SIGTERM and SIGKILL when it is
// given a zero grace (R-STOP-3: agent config stop_grace defaults to 10 s).
const DefaultGrace = 10 * time.Second

// Spec describes one child to start.
type Spec struct {
	// Path is the program. An absolute or slash-containing path is used as it
	// is (a relative one is taken relative to Dir, as os/exec does). A bare
	// name is looked up in the PATH found in Env, never in the agent's PATH.
	Path string
	// Args are the arguments after the program name (argv[1:]).
	Args []string
	// Env is the complete environment of the child, built from scratch by the
	// caller. When nil the child gets an empty environment; the agent's own
	// environment is never inherited.
	Env []string
	// Dir is the working directory. When empty the child starts in the agent's
	// working directory.
	Dir string
}

// Exit is the exit of a child as observed from wait() (R-EXIT-1).
//
// Exactly one of Code and Signal is set when the exit was observed. When a
// signal ended the process, Code is nil and Signal carries its name, e.g.
// "SIGKILL"; 128+n is never synthesized (R-EXIT-3). When the process was lost
// (wait failed), both are absent.
type Exit struct {
	Code   *int      `json:"exit_code"`
	Signal string    `json:"signal,omitempty"`
	At     time.Time `json:"at"`
}

// Runner starts children on one transport (R-TR-1).
type Runner interface {
	// Name is "proc" or "pty"; the output stream tag follows it (R-TR-9).
	Name() string
	// Start starts the child described by s. ctx bounds only the start: once
	// Start has returned, cancelling ctx does not touch the child; end it
	// with Process.Stop. On error nothing is left behind: no child, no
	// descriptor.
	Start(ctx context.Context, s Spec) (Process, error)
}

// Process is a started child, the leader of its own process group.
type Process interface {
	// Pid is the child's pid, which is also its process-group id.
	Pid() int
	// Stdin is a pipe (proc) or the PTY master (pty). Closing a PTY's Stdin
	// releases the writer only: a terminal has no half-close, so the child
	// sees no EOF.
	Stdin() io.WriteCloser
	// Stdout is a pipe (proc, stream "stdout") or the PTY master (pty,
	// stream "pty"). Read it until EOF; it also implements io.Closer.
	Stdout() io.Reader
	// Stderr is always a separate pipe, never the terminal (R-TR-5). Read it
	// until EOF; it also implements io.Closer.
	Stderr() io.Reader
	// Signal sends sig to the whole process group. Once the leader has been
	// reaped it returns os.ErrProcessDone and signals nothing.
	Signal(sig syscall.Signal) error
	// Stop sends SIGTERM to the group, waits up to grace (0 means
	// DefaultGrace, a negative grace means none) for the leader to exit, then
	// sends SIGKILL to the group (R-STOP-1, R-STOP-3). If the leader exits
	// within the grace while other members of its group live on, they get the
	// rest of the grace and then SIGKILL. Stop returns the observed exit
	// (R-STOP-2). On a child that has already exited it signals nothing and
	// returns that exit (R-STOP-4). Safe to call concurrently.
	Stop(grace time.Duration) Exit
	// Wait blocks until the leader has exited and been reaped. It is safe
	// from many goroutines; all get the same Exit.
	Wait() Exit
	// Done is closed once the exit has been observed.
	Done() <-chan struct{}
}
