package holder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/sessions"
)

// The test binary is also the holder: Launcher starts it with this
// variable set, as the agent starts olivares-agent hold.
const mainEnv = "OLIVARES_HOLDER_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		os.Exit(Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func launcher(spoolCap int64) Launcher {
	return Launcher{Exe: os.Args[0], Env: []string{mainEnv + "=1"}, Version: "test", SpoolCap: spoolCap}
}

var shEnv = []string{"PATH=/usr/bin:/bin"}

func startSh(t *testing.T, l Launcher, script string, pty bool) (*Process, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "h")
	p, err := l.Start(context.Background(), dir, sessions.Spec{Path: "sh", Args: []string{"-c", script}, Env: shEnv}, pty)
	if err != nil {
		t.Fatal(err)
	}
	hp := p.HolderPid()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, LogFile))
			t.Logf("holder log:\n%s", b)
		}
		// Nothing outlives a test: a holder still serving dir is killed,
		// and its child dies with it. (Never a bare pid: it may be reused.)
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(hp) + "/cmdline"); err == nil && bytes.Contains(b, []byte(dir)) {
			syscall.Kill(hp, syscall.SIGKILL)
		}
	})
	return p, dir
}

// await polls cond until it holds or the deadline passes.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z'
}

func readAll(t *testing.T, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func code(t *testing.T, e Exit) int {
	t.Helper()
	if e.Code == nil {
		t.Fatalf("exit has no code: %+v", e)
	}
	return *e.Code
}

// Issue 30: while an agent is connected the holder passes input and output
// through; the exit is observed (R-EXIT-1); once it is acknowledged the
// holder removes its socket and ends, and its child is gone.
func TestPassThrough(t *testing.T) {
	for _, pty := range []bool{false, true} {
		t.Run(fmt.Sprintf("pty=%v", pty), func(t *testing.T) {
			p, dir := startSh(t, launcher(0), `read l; echo "got $l"; echo err >&2; exit 3`, pty)
			hp := p.HolderPid()
			if hp == 0 || hp == p.Pid() {
				t.Fatalf("holder pid %d, child %d", hp, p.Pid())
			}
			if _, err := p.Stdin().Write([]byte("hello\n")); err != nil {
				t.Fatal(err)
			}
			errs := make(chan []byte, 1)
			go func() { b, _ := io.ReadAll(p.Stderr()); errs <- b }()
			out := readAll(t, p.Stdout())
			if !bytes.Contains(out, []byte("got hello")) {
				t.Fatalf("stdout %q", out)
			}
			if b := <-errs; string(b) != "err\n" {
				t.Fatalf("stderr %q", b)
			}
			if c := code(t, p.Wait()); c != 3 {
				t.Fatalf("exit code %d, want 3", c)
			}
			p.AckExit()
			await(t, "the holder to end", func() bool { return !alive(hp) })
			if _, err := os.Stat(filepath.Join(dir, SocketFile)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("socket left behind: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, SpoolFile)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("spool left behind: %v", err)
			}
		})
	}
}

// Issue 30: the agent writes input into the child's pipe itself (the
// holder passed its descriptor); a line over PIPE_BUF goes through the
// holder and keeps its place between two short ones. The child's stdin
// outlives the agent that had it: a second agent's input reaches the same
// child, and closing it is an EOF for the child.
func TestStdinPassedToTheAgent(t *testing.T) {
	p, dir := startSh(t, launcher(0), `while read l; do echo "len ${#l}"; done; echo eof`, false)
	if p.in == nil {
		t.Fatal("the holder did not pass the child's stdin")
	}
	long := strings.Repeat("y", 3*pipeBuf)
	for _, line := range []string{"a", long, "bb"} {
		if _, err := p.Stdin().Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	p.Detach()
	p2, _, err := Adopt(dir, Marks{}, "test2")
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p2.Stderr())
	p2.Stdin().Write([]byte("ccc\n"))
	p2.Stdin().Close()
	out := readAll(t, p2.Stdout())
	if want := fmt.Sprintf("len 1\nlen %d\nlen 2\nlen 3\neof\n", len(long)); string(out) != want {
		t.Fatalf("stdout %q, want %q: input out of order or lost across agents", out, want)
	}
	p2.AckExit()
}

// Issue 30: the socket is 0600 in a 0700 directory, and the spec (the
// child's environment) is gone once the holder read it.
func TestSocketMode0600(t *testing.T) {
	p, dir := startSh(t, launcher(0), `read l`, false)
	fi, err := os.Stat(filepath.Join(dir, SocketFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a 0600 socket", fi.Mode())
	}
	di, _ := os.Stat(dir)
	if di.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", di.Mode())
	}
	if _, err := os.Stat(filepath.Join(dir, SpecFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("spec left behind: %v", err)
	}
	p.Stdin().Close()
	p.Wait()
}

// Issue 30: while no agent is connected the child keeps writing into the
// spool; its exit then is recorded too, and an agent that adopts the holder
// gets every byte and the observed exit code.
func TestSpoolWhileDetached(t *testing.T) {
	p, dir := startSh(t, launcher(0), `read go; i=0; while [ $i -lt 3000 ]; do echo line$i; i=$((i+1)); done; exit 7`, false)
	child := p.Pid()
	p.Detach()
	// Input from an agent that went, then a new connection to say go.
	p2, info, err := Adopt(dir, Marks{}, "test2")
	if err != nil {
		t.Fatal(err)
	}
	if info.Pid != child || info.Version != "test" {
		t.Fatalf("hello %+v, want pid %d version test", info, child)
	}
	p2.Stdin().Write([]byte("go\n"))
	p2.Detach()
	await(t, "the child to exit while detached", func() bool { return !alive(child) })
	if fi, err := os.Stat(filepath.Join(dir, SpoolFile)); err != nil || fi.Size() == 0 {
		t.Fatalf("spool: %v %v", fi, err)
	}
	p3, _, err := Adopt(dir, Marks{}, "test3")
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p3.Stderr())
	out := readAll(t, p3.Stdout())
	var want strings.Builder
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&want, "line%d\n", i)
	}
	if string(out) != want.String() {
		t.Fatalf("got %d bytes, want %d; the output differs", len(out), want.Len())
	}
	if c := code(t, p3.Wait()); c != 7 {
		t.Fatalf("exit code %d, want 7 (observed while no agent was there)", c)
	}
	p3.AckExit()
}

// Issue 30, the kill -9 guarantee through a holder: an agent that goes
// after committing part of the output and comes back with its marks gets
// the rest, with no gap and no duplicate, although the child went on
// writing meanwhile.
func TestReadoptNoGapNoDuplicate(t *testing.T) {
	p, dir := startSh(t, launcher(0), `i=0; while [ $i -lt 20000 ]; do echo $i; i=$((i+1)); done`, false)
	var got []byte
	buf := make([]byte, readSize)
	for bytes.Count(got, []byte("\n")) < 200 {
		n, err := p.Stdout().Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	// Committed: what the reads returned up to the last whole record.
	mark := p.stdout.Mark()
	p.Ack(Marks{mark})
	p.Detach() // uncommitted bytes in flight die with this connection
	p2, _, err := Adopt(dir, Marks{mark}, "test2")
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p2.Stderr())
	got = append(got, readAll(t, p2.Stdout())...)
	var want bytes.Buffer
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("got %d bytes, want %d: a gap or a duplicate", len(got), want.Len())
	}
	if c := code(t, p2.Wait()); c != 0 {
		t.Fatalf("exit %d", c)
	}
	p2.AckExit()
}

// Issue 30: at the spool's cap the holder stops reading (the child blocks
// on its full pipe): backpressure, and nothing is dropped.
func TestSpoolCapBackpressure(t *testing.T) {
	const capBytes = 64 << 10
	// More than the child's output pipe holds (the holder sizes it to
	// 1 MiB), so the child must wait for the holder to read.
	const total = 4 << 20
	p, dir := startSh(t, launcher(capBytes), `head -c 4194304 /dev/zero; exit 0`, false)
	child := p.Pid()
	p.Detach()
	spool := filepath.Join(dir, SpoolFile)
	size := func() int64 {
		fi, err := os.Stat(spool)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	await(t, "the spool to reach its cap", func() bool { return size() >= capBytes })
	if s := size(); s > capBytes+readSize+64 {
		t.Fatalf("spool %d bytes, beyond the cap %d and one read", s, capBytes)
	}
	if !alive(child) {
		t.Fatal("the child finished: its output was not held back")
	}
	p2, _, err := Adopt(dir, Marks{}, "test2")
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p2.Stderr())
	// An agent that commits as it reads: acknowledge each record.
	var n int
	buf := make([]byte, readSize)
	rd := p2.Stdout().(*reader)
	for {
		k, err := rd.Read(buf)
		n += k
		if bytes.IndexFunc(buf[:k], func(r rune) bool { return r != 0 }) >= 0 {
			t.Fatal("a byte changed")
		}
		p2.Ack(Marks{rd.Mark()})
		if err != nil {
			break
		}
	}
	if n != total {
		t.Fatalf("read %d bytes, want %d: something was dropped", n, total)
	}
	if c := code(t, p2.Wait()); c != 0 {
		t.Fatalf("exit %d", c)
	}
	p2.AckExit()
}

// Issue 30: a holder whose protocol the agent does not know is refused and
// left running; a holder refuses an agent's unknown protocol the same way.
func TestUnknownProtocolRefused(t *testing.T) {
	p, dir := startSh(t, launcher(0), `read l; echo "got $l"`, false)
	// An agent from the future.
	c, err := net.Dial("unix", filepath.Join(dir, SocketFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readHello(c); err != nil {
		t.Fatal(err)
	}
	writeHello(c, hello{Protocol: Protocol + 1})
	if _, _, _, err := readMsg(c, nil); err == nil {
		t.Fatal("the holder answered an agent of an unknown protocol")
	}
	c.Close()
	// The holder still serves this agent.
	p.Stdin().Write([]byte("x\n"))
	if out := readAll(t, p.Stdout()); string(out) != "got x\n" {
		t.Fatalf("stdout %q", out)
	}
	p.Wait()
	p.AckExit()

	// A holder from the future.
	dir2 := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir2, SocketFile))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			writeHello(c, hello{Protocol: Protocol + 1, Pid: 42})
		}
	}()
	if _, _, err := Adopt(dir2, Marks{}, "test"); !errors.Is(err, ErrProtocol) {
		t.Fatalf("adopt: %v, want ErrProtocol", err)
	}
}

// Issue 30: process_lost now means the holder is gone: its child dies with
// it (no orphan), and Wait observes neither code nor signal (R-EXIT-3).
func TestHolderKilledIsLost(t *testing.T) {
	p, dir := startSh(t, launcher(0), `read l`, false)
	hp, child := p.HolderPid(), p.Pid()
	syscall.Kill(hp, syscall.SIGKILL)
	e := p.Wait()
	if e.Code != nil || e.Signal != "" {
		t.Fatalf("exit %+v, want lost", e)
	}
	await(t, "the child to die with its holder", func() bool { return !alive(child) })
	if _, _, err := Adopt(dir, Marks{}, "test"); !NoHolder(err) {
		t.Fatalf("adopt of a dead holder: %v", err)
	}
}

// Issue 30, R-STOP-1..2: Stop through the holder signals the group and
// returns the observed exit; Signal after the exit signals nothing.
func TestStopThroughHolder(t *testing.T) {
	p, _ := startSh(t, launcher(0), `trap 'exit 143' TERM; echo ready; while :; do sleep 0.05; done`, false)
	buf := make([]byte, 64)
	if n, _ := p.Stdout().Read(buf); string(buf[:n]) != "ready\n" {
		t.Fatalf("stdout %q", buf[:n])
	}
	go io.Copy(io.Discard, p.Stdout())
	go io.Copy(io.Discard, p.Stderr())
	hp := p.HolderPid()
	e := p.Stop(5 * time.Second)
	if c := code(t, e); c != 143 {
		t.Fatalf("exit %+v", e)
	}
	if err := p.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("signal after exit: %v", err)
	}
	p.AckExit()
	await(t, "the holder to end", func() bool { return !alive(hp) })
}

// A start that fails leaves nothing running and says why.
func TestStartFailure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "h")
	_, err := launcher(0).Start(context.Background(), dir, sessions.Spec{Path: "no-such-program-here", Env: shEnv}, false)
	if err == nil || !strings.Contains(err.Error(), "not found") {
		b, _ := os.ReadFile(filepath.Join(dir, LogFile))
		t.Fatalf("start: %v\nholder log:\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(dir, SocketFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left: %v", err)
	}
}

// R-CLI-3: `olivares-agent hold --help` runs nothing and exits 0; without
// --dir it is a usage error.
// Main runs in a process of its own, as the agent's `hold` does: its
// help and usage lines go to that process's output, not the test's.
func TestHoldHelp(t *testing.T) {
	run := func(args ...string) (int, string) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = []string{mainEnv + "=1"}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}
	if c, out := run("--help"); c != 0 || !strings.Contains(out, "hold --dir DIR") {
		t.Fatalf("hold --help: exit %d, %q", c, out)
	}
	if c, out := run(); c != 2 || !strings.Contains(out, "--dir DIR is required") {
		t.Fatalf("hold without --dir: exit %d, %q, want 2", c, out)
	}
}
