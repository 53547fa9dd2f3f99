//go:build unix

package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sweepTick is how often Stop checks, after the leader has exited, whether
// other members of its group still live (R-STOP-1: the group, not only the
// leader, is stopped).
const sweepTick = 20 * time.Millisecond

// startChild starts s with the child's ends of its three streams. The caller
// keeps ownership of stdio and closes the child's ends after startChild
// returns, whatever the outcome.
func startChild(ctx context.Context, s Spec, stdio [3]*os.File, attr *syscall.SysProcAttr) (*exec.Cmd, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sessions: start %q: %w", s.Path, err)
	}
	path, err := resolvePath(s)
	if err != nil {
		return nil, err
	}
	env := s.Env
	if env == nil {
		// os/exec gives a nil Env the agent's own environment; the child
		// must never inherit it.
		env = []string{}
	}
	// Not exec.CommandContext: ctx must not kill the child (see the package
	// doc); the supervisor ends it with Stop.
	cmd := &exec.Cmd{
		Path: path,
		Args: append([]string{s.Path}, s.Args...),
		Env:  env,
		Dir:  s.Dir,
		// *os.File values are handed to the child as they are: os/exec starts
		// no copying goroutine, so Wait returns at exit and never closes or
		// races with the parent's read ends.
		Stdin:       stdio[0],
		Stdout:      stdio[1],
		Stderr:      stdio[2],
		SysProcAttr: attr,
	}
	dieWithAgent(attr)
	unlock := lockForkThread()
	err = cmd.Start()
	unlock()
	if err != nil {
		return nil, fmt.Errorf("sessions: start %q: %w", s.Path, err)
	}
	return cmd, nil
}

// resolvePath looks a bare program name up in the PATH of s.Env, never in the
// agent's PATH. Empty and relative PATH entries are skipped.
func resolvePath(s Spec) (string, error) {
	if s.Path == "" {
		return "", ErrNoPath
	}
	if strings.Contains(s.Path, "/") {
		return s.Path, nil
	}
	for _, dir := range filepath.SplitList(lastEnv(s.Env, "PATH")) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, s.Path)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %q", ErrNotFound, s.Path)
}

// lastEnv returns the value of key in env; the last entry wins, as in os/exec.
func lastEnv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			_ = f.Close()
		}
	}
}

// process is a started child and the leader of process group pid.
type process struct {
	pid    int
	stdin  *writer
	stdout *reader
	stderr *reader

	done chan struct{}
	exit Exit // written once by the reaper before done is closed
}

// newProcess takes ownership of the parent's ends of the streams and starts
// the reaper, the goroutine that owns cmd.Wait and ends when the child exits.
func newProcess(cmd *exec.Cmd, stdin, stdout, stderr *os.File, stdoutPTY bool) *process {
	p := &process{
		pid:    cmd.Process.Pid,
		stdin:  &writer{f: stdin},
		stdout: &reader{f: stdout, pty: stdoutPTY},
		stderr: &reader{f: stderr},
		done:   make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait() // the observed status is in cmd.ProcessState (R-EXIT-1)
		p.exit = exitOf(cmd.ProcessState, time.Now())
		// Nothing can read the child's stdin any more. The read ends stay
		// open: the caller drains them to EOF.
		_ = p.stdin.Close()
		close(p.done)
	}()
	return p
}

func (p *process) Pid() int              { return p.pid }
func (p *process) Stdin() io.WriteCloser { return p.stdin }
func (p *process) Stdout() io.Reader     { return p.stdout }
func (p *process) Stderr() io.Reader     { return p.stderr }
func (p *process) Done() <-chan struct{} { return p.done }
func (p *process) Wait() Exit            { <-p.done; return p.exit }
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
func (p *process) killGroup(s syscall.Signal) error { return syscall.Kill(-p.pid, s) }

func (p *process) Signal(sig syscall.Signal) error {
	if p.exited() {
		// The group id is no longer pinned by our unreaped leader.
		return os.ErrProcessDone
	}
	if err := p.killGroup(sig); err != nil {
		return fmt.Errorf("sessions: signal process group %d: %w", p.pid, err)
	}
	return nil
}

func (p *process) Stop(grace time.Duration) Exit {
	if p.exited() {
		return p.exit // R-STOP-4: not live, nothing signalled
	}
	if grace == 0 {
		grace = DefaultGrace
	}
	deadline := time.NewTimer(grace) // negative: fires at once
	defer deadline.Stop()
	_ = p.killGroup(syscall.SIGTERM) // R-STOP-1; ESRCH means it is already gone
	select {
	case <-p.done:
		p.sweep(deadline.C)
	case <-deadline.C:
		_ = p.killGroup(syscall.SIGKILL) // R-STOP-1
		<-p.done
	}
	return p.exit // R-STOP-2
}

// sweep gives members of the group that outlive the leader (a wrapper's CLI,
// a background job) the rest of the grace, then SIGKILLs the group.
func (p *process) sweep(deadline <-chan time.Time) {
	if !groupAlive(p.pid) {
		return
	}
	tick := time.NewTicker(sweepTick)
	defer tick.Stop()
	for {
		select {
		case <-deadline:
			_ = p.killGroup(syscall.SIGKILL)
			return
		case <-tick.C:
			if !groupAlive(p.pid) {
				return
			}
		}
	}
}

// exitOf turns what wait() observed into an Exit. A nil state (wait failed,
// the process was lost) gives neither a code nor a signal (R-EXIT-3).
func exitOf(ps *os.ProcessState, at time.Time) Exit {
	e := Exit{At: at}
	if ps == nil {
		return e
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok {
		if c := ps.ExitCode(); c >= 0 {
			e.Code = &c
		}
		return e
	}
	switch {
	case ws.Exited():
		c := ws.ExitStatus()
		e.Code = &c
	case ws.Signaled():
		// R-EXIT-3: the signal's name, and no 128+n code.
		e.Signal = signalName(ws.Signal())
	}
	return e
}

func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return fmt.Sprintf("SIG%d", int(s))
}

// reader is the parent's read end of a child stream. It releases its
// descriptor at EOF, so a caller that drains it leaks nothing.
type reader struct {
	f         *os.File
	pty       bool
	eof       atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

func (r *reader) Read(b []byte) (int, error) {
	if r.eof.Load() {
		return 0, io.EOF
	}
	n, err := r.f.Read(b)
	if r.pty && errors.Is(err, syscall.EIO) {
		// Linux reports a PTY master whose slave side has been closed by
		// every holder as EIO, after the buffered output has been read.
		err = io.EOF
	}
	if err == io.EOF {
		r.eof.Store(true)
		_ = r.Close()
	}
	return n, err
}

// SyscallConn gives the descriptor itself (a holder sizes the pipe,
// agent/holder).
func (r *reader) SyscallConn() (syscall.RawConn, error) { return r.f.SyscallConn() }

// Close releases the read end early, for a caller that abandons the stream.
func (r *reader) Close() error {
	r.closeOnce.Do(func() { r.closeErr = r.f.Close() })
	return r.closeErr
}

// writer is the parent's end of the child's stdin; Close is idempotent because
// both the caller and the reaper close it.
type writer struct {
	f         *os.File
	closeOnce sync.Once
	closeErr  error
}

func (w *writer) Write(b []byte) (int, error) { return w.f.Write(b) }

// SyscallConn gives the descriptor itself (a holder passes it to its
// agent, agent/holder).
func (w *writer) SyscallConn() (syscall.RawConn, error) { return w.f.SyscallConn() }

func (w *writer) Close() error {
	w.closeOnce.Do(func() { w.closeErr = w.f.Close() })
	return w.closeErr
}
