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
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/olivares-dev/olivares/agent/sessions"
	"golang.org/x/sys/unix"
)

// Files in a run's holder directory (0700, made by the agent).
const (
	SpecFile   = "spec.json"   // the launch, read and removed by the holder
	SocketFile = "holder.sock" // the holder's socket, 0600
	SpoolFile  = "spool"       // output kept while no agent is connected
	LogFile    = "holder.log"  // the holder's own standard error
)

// DefaultSpoolCap bounds the output a holder keeps that no agent has
// committed yet (spool file and memory together). At the cap it stops
// reading the child's output: backpressure, never loss.
const DefaultSpoolCap = 64 << 20

// readSize is one read of the child's output, the ring's frame size.
const readSize = 64 << 10

// smallRead: a read of at most this many bytes is copied into a record of
// its own size, rather than keeping a whole read buffer until it is
// acknowledged.
const smallRead = 16 << 10

// drainTimeout bounds how long, after the child exited, the holder waits
// for EOF on its streams (a grandchild may keep them open).
const drainTimeout = 2 * time.Second

// helloTimeout bounds an agent's hello.
const helloTimeout = 10 * time.Second

// spec is what the agent asks a holder to start.
type spec struct {
	Path     string   `json:"path"`
	Args     []string `json:"args"`
	Env      []string `json:"env"`
	Dir      string   `json:"dir"`
	PTY      bool     `json:"pty"`
	SpoolCap int64    `json:"spool_cap,omitempty"`
	Version  string   `json:"version,omitempty"`
}

// Main is `olivares-agent hold --dir DIR`: the holder of one run's child.
// It reads DIR/spec.json, starts the child, answers "ok PID" (or "error:
// ...") on standard output, which it then closes, and serves DIR/holder.sock
// until the child has exited and an agent has committed everything it
// wrote. It returns the process's exit status.
func Main(args []string) int {
	dir := ""
	for i, a := range args {
		switch {
		case a == "-h" || a == "--help" || a == "-help":
			// R-CLI-3: help runs nothing.
			fmt.Fprintln(os.Stdout, "olivares-agent hold --dir DIR: a run's holder, started by the agent itself (it keeps the run's process across agent restarts); not for use by hand")
			return 0
		case a == "--dir" && i+1 < len(args):
			dir = args[i+1]
		}
	}
	if dir == "" {
		fmt.Fprintln(os.Stderr, "olivares-agent hold: --dir DIR is required (the agent starts holders itself)")
		return 2
	}
	// One OS thread: the holder's goroutines hand each other bytes on
	// the thread that read them, with no wake-up of another thread.
	runtime.GOMAXPROCS(1)
	h, err := start(dir)
	if err != nil {
		fmt.Fprintf(os.Stdout, "error: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stdout, "ok %d\n", h.proc.Pid())
	// Nothing else goes to the agent's pipe; later lines go to the log.
	os.Stdout.Close()
	h.serve()
	return 0
}

// holder is the serving side.
type holder struct {
	dir  string
	sp   spec
	proc sessions.Process
	ln   *net.UnixListener

	mu    sync.Mutex
	room  *sync.Cond // readers waiting below the cap; serve waiting for the end
	conn  net.Conn   // the connected agent, nil while none
	next  uint64     // next record number
	acked [classes]uint64
	// Records not acknowledged yet: the older ones in the spool file (while
	// no agent was connected, or when it went), the newer ones in mem (sent
	// to the connected agent).
	mem        [][]byte
	spool      *os.File
	spoolBytes int64
	spoolLast  [classes]uint64 // last record number of each class in the spool
	unacked    int64
	exitN      uint64 // the exit record's number, once written

	in       chan []byte     // input for the child's stdin; nil closes it
	stdinRaw syscall.RawConn // the child's stdin descriptor, nil when it cannot be passed
	inClosed bool            // the child's stdin was closed (guarded by mu)
}

func start(dir string) (*holder, error) {
	raw, err := os.ReadFile(filepath.Join(dir, SpecFile))
	if err != nil {
		return nil, err
	}
	// The spec holds the child's environment (grants): gone once read.
	os.Remove(filepath.Join(dir, SpecFile))
	var sp spec
	if err := json.Unmarshal(raw, &sp); err != nil {
		return nil, fmt.Errorf("%s: %w", SpecFile, err)
	}
	if sp.SpoolCap <= 0 {
		sp.SpoolCap = DefaultSpoolCap
	}
	spool, err := os.OpenFile(filepath.Join(dir, SpoolFile), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, SocketFile)
	os.Remove(sock)
	old := syscall.Umask(0o177) // the socket is born 0600
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		spool.Close()
		return nil, err
	}
	ln.SetUnlinkOnClose(true)
	var rn sessions.Runner = sessions.NewProcRunner()
	if sp.PTY {
		if rn, err = sessions.NewPTYRunner(); err != nil {
			ln.Close()
			spool.Close()
			return nil, err
		}
	}
	// The child dies with its holder (sessions' Pdeathsig): a holder that
	// is gone means a lost process, never an orphan writing nowhere.
	proc, err := rn.Start(context.Background(), sessions.Spec{Path: sp.Path, Args: sp.Args, Env: sp.Env, Dir: sp.Dir})
	if err != nil {
		ln.Close()
		spool.Close()
		return nil, err
	}
	h := &holder{dir: dir, sp: sp, proc: proc, ln: ln, next: 1, spool: spool, in: make(chan []byte, 64)}
	h.room = sync.NewCond(&h.mu)
	if sc, ok := proc.Stdin().(interface {
		SyscallConn() (syscall.RawConn, error)
	}); ok {
		h.stdinRaw, _ = sc.SyscallConn()
	}
	return h, nil
}

// serve runs the holder until its child's end is acknowledged.
func (h *holder) serve() {
	go h.acceptLoop()
	go h.writeStdin()
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); h.read(h.proc.Stdout(), classStdout) }()
	go func() { defer readers.Done(); h.read(h.proc.Stderr(), classStderr) }()
	exit := h.proc.Wait()
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainTimeout):
		for _, rd := range []io.Reader{h.proc.Stdout(), h.proc.Stderr()} {
			if c, ok := rd.(io.Closer); ok {
				c.Close()
			}
		}
		<-drained
	}
	b, _ := json.Marshal(exit)
	h.mu.Lock()
	h.exitN = h.record(kindExit, classCtl, b)
	for h.acked[classCtl] < h.exitN {
		h.room.Wait()
	}
	conn := h.conn
	h.mu.Unlock()
	h.ln.Close()
	if conn != nil {
		conn.Close()
	}
	h.spool.Close()
	os.Remove(filepath.Join(h.dir, SpoolFile))
}

// pipeSize is what the holder asks of the child's output pipes (Linux's
// default cap for an unprivileged process, /proc/sys/fs/pipe-max-size): a
// child that writes fast fills the pipe in fewer, fuller reads, so fewer
// records and wake-ups per byte on the way to the agent.
const pipeSize = 1 << 20

// sockBuf is the send buffer asked for the agent's socket.
const sockBuf = 4 << 20

// read copies one of the child's streams into records.
func (h *holder) read(rd io.Reader, class byte) {
	if sc, ok := rd.(interface {
		SyscallConn() (syscall.RawConn, error)
	}); ok && !h.sp.PTY {
		if rc, err := sc.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize) })
		}
	}
	// Each read lands in a record's own buffer, after its header: a
	// read of more than smallRead bytes is sent and kept as it is (no
	// copy); a smaller one is copied into a record of its size and the
	// buffer read into again.
	var msg []byte
	for {
		if msg == nil {
			msg = make([]byte, 5+recordHeader+readSize)
		}
		n, err := rd.Read(msg[5+recordHeader:])
		if n > 0 {
			var rec []byte
			if n > smallRead {
				rec, msg = msg[:5+recordHeader+n], nil
			} else {
				rec = append([]byte(nil), msg[:5+recordHeader+n]...)
			}
			frameRecord(rec, kindData, class)
			h.mu.Lock()
			h.recordMsg(kindData, rec)
			h.mu.Unlock()
		}
		if err != nil {
			// No record: the exit record, written once both streams
			// ended, ends them for the agent.
			return
		}
	}
}

// record appends one record, to the connected agent or to the spool, and
// returns its number. At the cap it waits (the child's pipe fills: it is
// slowed, never dropped). The caller holds mu.
func (h *holder) record(kind, class byte, data []byte) uint64 {
	msg := encodeRecord(0, kind, class, data)
	return h.recordMsg(kind, msg)
}

// recordMsg is record of a message whose frame and record headers are
// filled in but for the record's number, which it takes here. The caller
// holds mu.
func (h *holder) recordMsg(kind byte, msg []byte) uint64 {
	for kind == kindData && h.unacked >= h.sp.SpoolCap {
		h.room.Wait()
	}
	n := h.next
	h.next++
	binary.BigEndian.PutUint64(msg[5:13], n)
	h.unacked += int64(len(msg))
	if h.conn != nil {
		h.mem = append(h.mem, msg)
		if _, err := h.conn.Write(msg); err != nil {
			h.detachLocked(h.conn, err)
		}
		return n
	}
	h.spoolLocked(msg)
	return n
}

// spoolLocked appends a record to the spool file. The spool is not fsync'd:
// it serves an agent that restarts while this holder lives, and nothing
// survives the holder (docs/agent-runtime.md).
func (h *holder) spoolLocked(msg []byte) {
	if _, err := h.spool.WriteAt(msg, h.spoolBytes); err != nil {
		// A full disk: keep the record in memory rather than lose it.
		fmt.Fprintf(os.Stderr, "holder: spool write: %v\n", err)
		h.mem = append(h.mem, msg)
		return
	}
	h.spoolBytes += int64(len(msg))
	n, _, class, _, _ := decodeRecord(msg[5:])
	h.spoolLast[class] = n
}

// detachLocked forgets conn (if it is still the connected one): the records
// it has not acknowledged go to the spool, after the older ones.
func (h *holder) detachLocked(conn net.Conn, why error) {
	if h.conn != conn {
		return
	}
	fmt.Fprintf(os.Stderr, "holder: agent detached (%v); %d records kept\n", why, len(h.mem))
	conn.Close()
	h.conn = nil
	mem := h.mem
	h.mem = nil
	for _, msg := range mem {
		h.spoolLocked(msg)
	}
}

func (h *holder) ackedRecord(msg []byte) bool {
	n, _, class, _, _ := decodeRecord(msg[5:])
	return n <= h.acked[class]
}

// trimLocked drops what the agent acknowledged: the spool once every
// record in it is, and mem's acknowledged records.
func (h *holder) trimLocked() {
	if h.spoolBytes > 0 {
		all := true
		for c := range h.spoolLast {
			all = all && h.spoolLast[c] <= h.acked[c]
		}
		if all {
			h.spool.Truncate(0)
			h.unacked -= h.spoolBytes
			h.spoolBytes, h.spoolLast = 0, [classes]uint64{}
		}
	}
	// Each stream is acknowledged on its own: keep the others' records.
	kept := h.mem[:0]
	for _, msg := range h.mem {
		if h.ackedRecord(msg) {
			h.unacked -= int64(len(msg))
		} else {
			kept = append(kept, msg)
		}
	}
	clear(h.mem[len(kept):])
	h.mem = kept
	h.room.Broadcast()
}

func (h *holder) acceptLoop() {
	for {
		c, err := h.ln.AcceptUnix()
		if err != nil {
			return
		}
		go h.attach(c)
	}
}

// attach serves one agent: hellos, then the records it has not committed
// (the spool's, then mem's), then the live records and its messages.
func (h *holder) attach(c *net.UnixConn) {
	c.SetDeadline(time.Now().Add(helloTimeout))
	if err := writeHello(c, hello{Protocol: Protocol, Pid: h.proc.Pid(), PTY: h.sp.PTY, Version: h.sp.Version, StdinFD: h.stdinRaw != nil}); err != nil {
		c.Close()
		return
	}
	ah, err := readHello(c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "holder: refused an agent: %v\n", err)
		c.Close()
		return
	}
	h.mu.Lock()
	if ah.StdinFD && h.stdinRaw != nil {
		err = h.passStdin(c)
	}
	h.mu.Unlock()
	if err != nil {
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	// Room for several records in the socket, so that this holder goes
	// on reading while the agent takes the previous ones (the kernel caps
	// it at net.core.wmem_max).
	c.SetWriteBuffer(sockBuf)
	h.mu.Lock()
	if h.conn != nil {
		h.detachLocked(h.conn, errors.New("another agent attached"))
	}
	for i, a := range ah.After {
		h.acked[i] = max(h.acked[i], a)
	}
	h.trimLocked()
	err = h.replayLocked(c)
	if err == nil {
		for _, msg := range h.mem {
			if !h.ackedRecord(msg) {
				if _, err = c.Write(msg); err != nil {
					break
				}
			}
		}
	}
	if err != nil {
		h.mu.Unlock()
		c.Close()
		return
	}
	h.conn = c
	fmt.Fprintf(os.Stderr, "holder: agent %s attached after %v\n", ah.Version, ah.After)
	h.mu.Unlock()
	err = h.control(c)
	h.mu.Lock()
	h.detachLocked(c, err)
	h.mu.Unlock()
}

// passStdin sends the child's stdin descriptor to the agent (mStdinFD):
// the agent writes input into the child's pipe itself, with no hop
// through this process. This holder keeps its own copy open, so that the
// child's stdin outlives the agent; it closes it at mCloseIn. The caller
// holds mu.
func (h *holder) passStdin(c *net.UnixConn) error {
	msg := []byte{mStdinFD, 0, 0, 0, 0}
	if h.inClosed {
		_, _, err := c.WriteMsgUnix(msg, nil, nil)
		return err
	}
	sent := false
	var err error
	h.stdinRaw.Control(func(fd uintptr) {
		sent = true
		_, _, err = c.WriteMsgUnix(msg, syscall.UnixRights(int(fd)), nil)
	})
	if !sent {
		// The child is gone and its stdin closed with it.
		_, _, err = c.WriteMsgUnix(msg, nil, nil)
	}
	return err
}

// replayLocked sends the spool's records the agent has not committed.
func (h *holder) replayLocked(w io.Writer) error {
	if h.spoolBytes == 0 {
		return nil
	}
	r := bufio.NewReaderSize(io.NewSectionReader(h.spool, 0, h.spoolBytes), readSize+64)
	var buf []byte
	for {
		typ, p, b, err := readMsg(r, buf)
		buf = b
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		n, _, class, _, err := decodeRecord(p)
		if err != nil || typ != mRecord {
			return fmt.Errorf("holder: corrupt spool: %v", err)
		}
		if n <= h.acked[class] {
			continue
		}
		if err := writeMsg(w, mRecord, p); err != nil {
			return err
		}
	}
}

// control handles one agent's messages until it goes.
func (h *holder) control(c net.Conn) error {
	r := bufio.NewReader(c)
	var buf []byte
	for {
		typ, p, b, err := readMsg(r, buf)
		buf = b
		if err != nil {
			return err
		}
		switch typ {
		case mAck:
			if len(p) == 9 && p[0] < classes {
				h.mu.Lock()
				h.acked[p[0]] = max(h.acked[p[0]], binary.BigEndian.Uint64(p[1:]))
				h.trimLocked()
				h.mu.Unlock()
			}
		case mInput:
			h.in <- append([]byte(nil), p...)
		case mCloseIn:
			h.in <- nil
		case mSignal:
			if len(p) == 1 {
				h.proc.Signal(syscall.Signal(p[0]))
			}
		case mStop:
			if len(p) == 8 {
				go h.proc.Stop(time.Duration(int64(binary.BigEndian.Uint64(p))))
			}
		}
	}
}

// writeStdin writes the agent's input to the child, and tells the
// connected agent how much was written (its flow control).
func (h *holder) writeStdin() {
	w := h.proc.Stdin()
	gone := false
	for b := range h.in {
		if b == nil {
			h.mu.Lock()
			h.inClosed = true
			h.mu.Unlock()
			w.Close()
			gone = true
			continue
		}
		n := 0
		if !gone {
			var err error
			if n, err = w.Write(b); err != nil {
				gone = true
			}
		}
		var ack [4]byte
		if !gone {
			binary.BigEndian.PutUint32(ack[:], uint32(max(n, 1)))
		}
		h.mu.Lock()
		if h.conn != nil {
			if err := writeMsg(h.conn, mInAck, ack[:]); err != nil {
				h.detachLocked(h.conn, err)
			}
		}
		h.mu.Unlock()
	}
}

var errNoHolder = errors.New("holder: no holder answers")
