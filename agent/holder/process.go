package holder

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/olivares-dev/olivares/agent/sessions"
)

// Input flow control: the agent keeps at most this much input on its way
// to the holder's writer, as a pipe would (a child that stops reading
// blocks the agent's stdin writer, never the holder's other messages).
const (
	inputWindow   = 1 << 20
	inputMessages = 32
)

// pipeBuf is PIPE_BUF on Linux: a pipe write of at most this many bytes is
// atomic.
const pipeBuf = 4096

// Launcher starts holders: Exe with Args, then --dir DIR (olivares-agent
// hold --dir DIR in the agent).
type Launcher struct {
	Exe  string
	Args []string
	// Env is the holder's own environment (the child's is the Spec's).
	Env []string
	// Version is the agent's build, told to the holder and back at adoption.
	Version string
	// SpoolCap is the holder's cap on uncommitted output; 0 means
	// DefaultSpoolCap.
	SpoolCap int64
}

// Start starts a holder in dir (created 0700) that starts s; pty selects
// the PTY transport. The holder is in its own session and is not tied to the
// agent's life: the agent may die and a new one adopt it (Adopt). On error
// nothing is left behind.
func (l Launcher) Start(ctx context.Context, dir string, s sessions.Spec, pty bool) (*Process, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(spec{Path: s.Path, Args: s.Args, Env: s.Env, Dir: s.Dir, PTY: pty, SpoolCap: l.SpoolCap, Version: l.Version})
	if err := os.WriteFile(filepath.Join(dir, SpecFile), raw, 0o600); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(dir, LogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(l.Exe, append(append([]string(nil), l.Args...), "--dir", dir)...)
	cmd.Env = l.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Stderr = logf
	// Its own session, and no Pdeathsig: the holder outlives the agent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("holder: start %s: %w", l.Exe, err)
	}
	// The agent reaps its own holders; one that outlives the agent is
	// reaped by whoever inherits it.
	go cmd.Wait()
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(l)
	}()
	var answer string
	select {
	case answer = <-line:
	case <-ctx.Done():
		cmd.Process.Kill()
		return nil, fmt.Errorf("sessions: start %q: %w", s.Path, ctx.Err())
	}
	if msg, ok := strings.CutPrefix(answer, "error: "); ok {
		return nil, fmt.Errorf("sessions: start %q: %s", s.Path, msg)
	}
	if _, err := strconv.Atoi(strings.TrimPrefix(answer, "ok ")); err != nil || !strings.HasPrefix(answer, "ok ") {
		cmd.Process.Kill()
		return nil, fmt.Errorf("holder: start %q: the holder answered %q (see %s)", s.Path, answer, filepath.Join(dir, LogFile))
	}
	p, _, err := Adopt(dir, [classes]uint64{}, l.Version)
	if err != nil {
		cmd.Process.Kill()
		return nil, err
	}
	return p, nil
}

// Info is what a holder said in its hello.
type Info struct {
	Pid int
	PTY bool
	// Version is the agent build that started the holder.
	Version string
}

// Marks are, per output stream (stdout or PTY, stderr), the last record an
// agent has committed; Adopt resends only what follows.
type Marks = [classes]uint64

// Adopt connects to the holder in dir. after says what the agent has
// already committed. A holder speaking another protocol is ErrProtocol and
// is left running; no holder is an error wrapping os.ErrNotExist or
// syscall.ECONNREFUSED.
func Adopt(dir string, after Marks, version string) (*Process, Info, error) {
	c, err := net.DialTimeout("unix", filepath.Join(dir, SocketFile), helloTimeout)
	if err != nil {
		return nil, Info{}, fmt.Errorf("%w: %w", errNoHolder, err)
	}
	c.SetDeadline(time.Now().Add(helloTimeout))
	hh, err := readHello(c)
	if err != nil {
		c.Close()
		return nil, Info{Pid: hh.Pid, Version: hh.Version}, err
	}
	if err := writeHello(c, hello{Protocol: Protocol, After: after, Version: version, StdinFD: hh.StdinFD}); err != nil {
		c.Close()
		return nil, Info{}, err
	}
	var in *os.File
	if hh.StdinFD {
		if in, err = recvStdin(c.(*net.UnixConn)); err != nil {
			c.Close()
			return nil, Info{}, err
		}
	}
	c.SetDeadline(time.Time{})
	p := &Process{conn: c, pid: hh.Pid, done: make(chan struct{}), marks: after, in: in, free: make(chan []byte, freeBuffers)}
	p.stdout = newReader(p, classStdout)
	p.stderr = newReader(p, classStderr)
	p.stdin = &stdin{p: p}
	p.room = sync.NewCond(&p.mu)
	go p.dispatch()
	return p, Info{Pid: hh.Pid, PTY: hh.PTY, Version: hh.Version}, nil
}

// recvStdin reads mStdinFD: the child's stdin descriptor, or nil when the
// holder had none to give (the input then goes through mInput).
func recvStdin(c *net.UnixConn) (*os.File, error) {
	var b [5]byte
	oob := make([]byte, syscall.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(b[:], oob)
	if err != nil {
		return nil, err
	}
	if n != len(b) || b[0] != mStdinFD {
		return nil, fmt.Errorf("%w: no stdin message after the hello", ErrProtocol)
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) == 0 {
		return nil, nil
	}
	fds, err := syscall.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return nil, nil
	}
	syscall.CloseOnExec(fds[0])
	return os.NewFile(uintptr(fds[0]), "stdin"), nil
}

// NoHolder reports whether err says nothing listens in the holder's
// directory (the holder is gone).
func NoHolder(err error) bool { return errors.Is(err, errNoHolder) }

// Process is a child started by a holder, seen through the holder's
// socket. It implements sessions.Process; Stdout and Stderr also tell, for
// each read, the record it completed (Mark), for the caller to commit with
// the bytes and acknowledge (Ack).
type Process struct {
	conn   net.Conn
	pid    int
	stdout *reader
	stderr *reader
	stdin  *stdin
	// in is the child's stdin itself, passed by the holder (mStdinFD):
	// input is written into the child's pipe with no hop through the
	// holder. nil: input goes through mInput.
	in *os.File

	wmu sync.Mutex // conn writes

	mu       sync.Mutex
	room     *sync.Cond // input flow control
	inBytes  int        // input sent, not yet written by the holder
	inSizes  []int      // the sizes of those messages, oldest first
	inGone   bool
	detached bool
	marks    Marks

	done     chan struct{}
	exit     Exit
	exitN    uint64
	doneOnce sync.Once

	// free holds message buffers whose data the streams have read whole,
	// for dispatch to read the next messages into: a flood reuses a few
	// buffers instead of allocating one per record.
	free chan []byte
}

// freeBuffers bounds the buffers kept for reuse: both streams' queues, and
// the one each reader holds.
const freeBuffers = 2*16 + 2

// Exit is sessions.Exit.
type Exit = sessions.Exit

var _ sessions.Process = (*Process)(nil)

func (p *Process) Pid() int              { return p.pid }
func (p *Process) Stdin() io.WriteCloser { return p.stdin }
func (p *Process) Stdout() io.Reader     { return p.stdout }
func (p *Process) Stderr() io.Reader     { return p.stderr }
func (p *Process) Done() <-chan struct{} { return p.done }
func (p *Process) Wait() Exit            { <-p.done; return p.exit }
func (p *Process) send(typ byte, b []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return writeMsg(p.conn, typ, b)
}

func (p *Process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// HolderPid is the holder's pid, as the kernel tells it for the socket's
// peer (0 when unknown).
func (p *Process) HolderPid() int { return peerPid(p.conn) }

// Signal asks the holder to signal the child's group.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.exited() {
		return os.ErrProcessDone
	}
	if err := p.send(mSignal, []byte{byte(sig)}); err != nil {
		return fmt.Errorf("holder: signal process group %d: %w", p.pid, err)
	}
	return nil
}

// Stop asks the holder to stop the child (sessions.Process.Stop, done by
// the holder) and returns the exit it observed.
func (p *Process) Stop(grace time.Duration) Exit {
	if p.exited() {
		return p.exit
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(grace))
	p.send(mStop, b[:])
	return p.Wait()
}

// Ack tells the holder that the records up to each mark are committed, so
// that it forgets them. Acknowledging the exit (AckExit) lets it end.
func (p *Process) Ack(m Marks) {
	for c := byte(0); c < classCtl; c++ {
		if m[c] == 0 {
			continue
		}
		var b [9]byte
		b[0] = c
		binary.BigEndian.PutUint64(b[1:], m[c])
		p.send(mAck, b[:])
	}
}

// AckExit tells the holder that the child's exit is recorded: the holder
// removes its socket and spool and ends.
func (p *Process) AckExit() {
	p.mu.Lock()
	n := p.exitN
	p.mu.Unlock()
	if n == 0 {
		return
	}
	var b [9]byte
	b[0] = classCtl
	binary.BigEndian.PutUint64(b[1:], n)
	p.send(mAck, b[:])
}

// Detach leaves the holder and its child running (the agent is going
// away); Wait then returns an Exit with neither code nor signal.
func (p *Process) Detach() {
	p.mu.Lock()
	p.detached = true
	p.mu.Unlock()
	p.conn.Close()
	if p.in != nil {
		p.in.Close()
	}
}

// dispatch reads the holder's messages: records go to their stream's
// reader in order, the exit ends the process.
func (p *Process) dispatch() {
	r := bufio.NewReaderSize(p.conn, readSize+64)
	var buf []byte // the buffer the next message is read into
	for {
		// A record's data is handed to its stream in its message's
		// buffer, with no copy; the stream gives the buffer back (free)
		// once its bytes are read.
		if buf == nil {
			select {
			case buf = <-p.free:
			default:
				buf = make([]byte, 0, readSize+64)
			}
		}
		typ, pl, b, err := readMsg(r, buf)
		if err != nil {
			break
		}
		buf = b
		switch typ {
		case mInAck:
			p.mu.Lock()
			if len(pl) == 4 {
				if n := binary.BigEndian.Uint32(pl); n == 0 {
					p.inGone = true
				}
			}
			// One ack per input message, in order.
			if len(p.inSizes) > 0 {
				p.inBytes -= p.inSizes[0]
				p.inSizes = p.inSizes[1:]
			}
			p.room.Broadcast()
			p.mu.Unlock()
		case mRecord:
			n, kind, class, data, err := decodeRecord(pl)
			if err != nil {
				break
			}
			switch kind {
			case kindData:
				rd := p.stdout
				if class == classStderr {
					rd = p.stderr
				}
				rd.put(chunk{n: n, b: data, buf: buf})
				buf = nil // the stream's now
			case kindExit:
				// The holder writes the exit once both streams ended.
				p.stdout.eof()
				p.stderr.eof()
				var e Exit
				json.Unmarshal(data, &e)
				p.mu.Lock()
				p.exitN = n
				p.mu.Unlock()
				p.finish(e)
			}
		}
	}
	// The holder went (or Detach): whatever it had not sent is not ours
	// any more. Without an exit record the process is lost (R-EXIT-3).
	p.stdout.eof()
	p.stderr.eof()
	p.finish(Exit{At: time.Now()})
	p.mu.Lock()
	p.inGone = true
	p.room.Broadcast()
	p.mu.Unlock()
}

func (p *Process) finish(e Exit) {
	p.doneOnce.Do(func() {
		p.exit = e
		close(p.done)
		if p.in != nil {
			p.in.Close()
		}
	})
}

// chunk is one record's data, b, in its message's buffer.
type chunk struct {
	n   uint64
	b   []byte
	buf []byte
}

// reader is one output stream of a held process.
type reader struct {
	p     *Process
	class byte
	ch    chan chunk
	once  sync.Once
	cur   chunk
	off   int
	mark  uint64
	close sync.Once
	quit  chan struct{}
}

func newReader(p *Process, class byte) *reader {
	return &reader{p: p, class: class, ch: make(chan chunk, 16), quit: make(chan struct{})}
}

func (r *reader) put(c chunk) {
	select {
	case r.ch <- c:
	case <-r.quit: // the caller abandoned the stream
	}
}

func (r *reader) eof() { r.once.Do(func() { close(r.ch) }) }

// Read returns the bytes of at most one record.
func (r *reader) Read(b []byte) (int, error) {
	if r.off == len(r.cur.b) {
		c, ok := <-r.ch
		if !ok {
			return 0, io.EOF
		}
		r.cur, r.off = c, 0
	}
	n := copy(b, r.cur.b[r.off:])
	r.off += n
	if r.off == len(r.cur.b) {
		r.mark = r.cur.n
		select {
		case r.p.free <- r.cur.buf[:0]:
		default:
		}
		r.cur, r.off = chunk{n: r.cur.n}, 0
	}
	return n, nil
}

// Mark is the number of the last record whose bytes Read has wholly
// returned: commit it with those bytes, and Ack it once committed.
func (r *reader) Mark() uint64 { return r.mark }

// Close abandons the stream.
func (r *reader) Close() error {
	r.close.Do(func() { close(r.quit) })
	return nil
}

// stdin writes to the child's stdin through the holder.
type stdin struct{ p *Process }

// Write writes b into the child's pipe itself when the holder passed it and
// b is at most PIPE_BUF (one write the kernel makes whole or not at all, so
// an agent killed mid-write leaves no half line); a larger b goes through
// the holder, which writes a message only once it has all of it. A direct
// write waits until the holder has written what went through it, so input
// keeps its order.
func (w *stdin) Write(b []byte) (int, error) {
	p := w.p
	if p.in != nil && len(b) <= pipeBuf {
		p.mu.Lock()
		for !p.inGone && len(p.inSizes) > 0 {
			p.room.Wait()
		}
		gone := p.inGone
		p.mu.Unlock()
		if gone {
			return 0, os.ErrClosed
		}
		return p.in.Write(b)
	}
	written := 0
	for len(b) > 0 {
		n := min(len(b), maxMessage-64)
		p.mu.Lock()
		for !p.inGone && (len(p.inSizes) >= inputMessages || (len(p.inSizes) > 0 && p.inBytes+n > inputWindow)) {
			p.room.Wait()
		}
		if p.inGone {
			p.mu.Unlock()
			return written, os.ErrClosed
		}
		p.inSizes = append(p.inSizes, n)
		p.inBytes += n
		p.mu.Unlock()
		if err := p.send(mInput, b[:n]); err != nil {
			return written, err
		}
		written += n
		b = b[n:]
	}
	return written, nil
}

func (w *stdin) Close() error {
	if w.p.in != nil {
		w.p.in.Close()
	}
	if w.p.exited() {
		return nil
	}
	return w.p.send(mCloseIn, nil)
}
