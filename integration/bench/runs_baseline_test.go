package bench

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/tunnel/tunneltest"
)

// The baselines of TestRunsReport, measured in the same run: raw TLS 1.3
// over loopback in-process, and OpenSSH to a throwaway sshd on 127.0.0.1.

// tlsBase is an in-process TLS server on 127.0.0.1 and one client
// connection for bulk reads and one for echoes.
type tlsBase struct {
	src, echo *tls.Conn
	echoR     *bufio.Reader
	buf       []byte
}

// newTLSBase starts the server: a connection whose first byte is 's'
// answers each 8-byte request N with N bytes in floodPiece writes (the
// peer's flood pieces); one whose first byte is 'e' echoes lines.
func newTLSBase(t *testing.T) *tlsBase {
	t.Helper()
	p := tunneltest.NewPKI(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", p.ServerTLS())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveTLSBase(c)
		}
	}()
	dial := func(mode byte) *tls.Conn {
		c, err := tls.Dial("tcp", ln.Addr().String(), p.ClientTLS())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(callDeadline))
		if _, err := c.Write([]byte{mode}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	b := &tlsBase{src: dial('s'), echo: dial('e'), buf: make([]byte, 64<<10)}
	b.echoR = bufio.NewReader(b.echo)
	return b
}

func serveTLSBase(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(callDeadline))
	var mode [1]byte
	if _, err := io.ReadFull(c, mode[:]); err != nil {
		return
	}
	switch mode[0] {
	case 's':
		piece := bytes.Repeat([]byte("x"), floodPiece)
		var req [8]byte
		for {
			if _, err := io.ReadFull(c, req[:]); err != nil {
				return
			}
			n := int(binary.BigEndian.Uint64(req[:]))
			for n > 0 {
				k := min(n, floodPiece)
				if _, err := c.Write(piece[:k]); err != nil {
					return
				}
				n -= k
			}
		}
	case 'e':
		r := bufio.NewReader(c)
		for {
			l, err := r.ReadSlice('\n')
			if err != nil {
				return
			}
			if _, err := c.Write(l); err != nil {
				return
			}
		}
	}
}

// pull asks for n bytes and reads them; it returns 10^6 bytes per second.
func (b *tlsBase) pull(n int) (float64, error) {
	start := time.Now()
	var req [8]byte
	binary.BigEndian.PutUint64(req[:], uint64(n))
	if _, err := b.src.Write(req[:]); err != nil {
		return 0, err
	}
	if err := readN(b.src, b.buf, n); err != nil {
		return 0, err
	}
	return float64(n) / 1e6 / time.Since(start).Seconds(), nil
}

func (b *tlsBase) roundTrip(i int) (time.Duration, error) {
	return echoTrip(b.echo, b.echoR, i)
}

// readN reads exactly n bytes from r through buf.
func readN(r io.Reader, buf []byte, n int) error {
	for got := 0; got < n; {
		k, err := r.Read(buf[:min(len(buf), n-got)])
		got += k
		if err != nil {
			return fmt.Errorf("after %d of %d bytes: %w", got, n, err)
		}
	}
	return nil
}

// echoTrip writes "ping i\n" and reads the line back.
func echoTrip(w io.Writer, r *bufio.Reader, i int) (time.Duration, error) {
	msg := "ping " + strconv.Itoa(i) + "\n"
	start := time.Now()
	if _, err := io.WriteString(w, msg); err != nil {
		return 0, err
	}
	l, err := r.ReadString('\n')
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if l != msg {
		return 0, fmt.Errorf("echo %q, want %q", l, msg)
	}
	return d, nil
}

// sshBase is a throwaway sshd on 127.0.0.1 (its own host key, one
// authorized key, all in a temp dir, run as the current user) and the ssh
// client arguments that reach it, plus two open sessions: one serving
// byte counts (`head -c N /dev/zero` per line read) and one running cat.
type sshBase struct {
	args   []string // ssh options and destination, without the command
	src    *sshSession
	echo   *sshSession
	buf    []byte
	handsh time.Duration // median `ssh true`, for the one-shot figure
}

type sshSession struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// newSSHBase returns nil and the reason when there is no sshd to run;
// scripts/bench installs openssh-server when it can.
func newSSHBase(t *testing.T) (*sshBase, string) {
	t.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/sshd"); serr != nil {
			return nil, "sshd not installed (scripts/bench installs openssh-server when root or sudo can)"
		}
		sshd = "/usr/sbin/sshd"
	}
	for _, tool := range []string{"ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, tool + " not installed"
		}
	}
	u, err := user.Current()
	if err != nil {
		return nil, "current user: " + err.Error()
	}
	dir, err := os.MkdirTemp("", "olv-sshd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, k := range []string{"host_key", "id"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, k)).CombinedOutput(); err != nil {
			return nil, fmt.Sprintf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(dir, "id.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cfg := filepath.Join(dir, "sshd_config")
	conf := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
AuthorizedKeysFile %s
PidFile %s
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowUsers %s
LogLevel ERROR
`, port, filepath.Join(dir, "host_key"), filepath.Join(dir, "authorized_keys"), filepath.Join(dir, "sshd.pid"), u.Username)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sshd, "-t", "-f", cfg).CombinedOutput(); err != nil {
		return nil, fmt.Sprintf("sshd -t: %v: %s", err, strings.TrimSpace(string(out)))
	}
	var log syncLog
	cmd := exec.Command(sshd, "-D", "-e", "-f", cfg)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		return nil, "start sshd: " + err.Error()
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	b := &sshBase{buf: make([]byte, 64<<10), args: []string{
		"-F", "/dev/null", "-p", strconv.Itoa(port), "-i", filepath.Join(dir, "id"),
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-T", u.Username + "@127.0.0.1"}}
	// sshd listens a moment after it starts: try a login until it works.
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := exec.Command("ssh", append(b.args, "true")...).CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Sprintf("ssh to the throwaway sshd: %v: %s; sshd: %s", err, out, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	var hs []float64
	for range 5 {
		start := time.Now()
		if out, err := exec.Command("ssh", append(b.args, "true")...).CombinedOutput(); err != nil {
			return nil, fmt.Sprintf("ssh true: %v: %s", err, out)
		}
		hs = append(hs, float64(time.Since(start)))
	}
	b.handsh = time.Duration(median(hs))
	b.src = b.session(t, `while read n; do head -c "$n" /dev/zero; done`)
	b.echo = b.session(t, "cat")
	return b, ""
}

func (b *sshBase) session(t *testing.T, remote string) *sshSession {
	t.Helper()
	cmd := exec.Command("ssh", append(b.args, remote)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	return &sshSession{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10)}
}

// pull asks the open session for n bytes: 10^6 bytes per second.
func (b *sshBase) pull(n int) (float64, error) {
	start := time.Now()
	if _, err := fmt.Fprintf(b.src.in, "%d\n", n); err != nil {
		return 0, err
	}
	if err := readN(b.src.out, b.buf, n); err != nil {
		return 0, err
	}
	return float64(n) / 1e6 / time.Since(start).Seconds(), nil
}

// oneShot runs `ssh ... head -c n /dev/zero`, connection set-up and all.
func (b *sshBase) oneShot(n int) (float64, error) {
	start := time.Now()
	cmd := exec.Command("ssh", append(b.args, fmt.Sprintf("head -c %d /dev/zero", n))...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	got, err := io.CopyBuffer(io.Discard, out, b.buf)
	if werr := cmd.Wait(); err == nil {
		err = werr
	}
	if err == nil && got != int64(n) {
		err = fmt.Errorf("got %d bytes, want %d", got, n)
	}
	if err != nil {
		return 0, err
	}
	return float64(n) / 1e6 / time.Since(start).Seconds(), nil
}

func (b *sshBase) roundTrip(i int) (time.Duration, error) {
	return echoTrip(b.echo.in, b.echo.out, i)
}

// syncLog collects sshd's stderr for a failure message.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 64<<10 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
