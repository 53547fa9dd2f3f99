//go:build linux

package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// deadline bounds every wait in these tests; nothing sleeps in the test logic.
const deadline = 5 * time.Second

var testEnv = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}

func ptyRunnerT(t *testing.T) Runner {
	t.Helper()
	r, err := NewPTYRunner()
	if err != nil {
		t.Skipf("no PTY on this host: %v", err)
	}
	return r
}

// startSh starts /bin/sh -c script and stops the group (SIGKILL, no grace)
// when the test ends.
func startSh(t *testing.T, r Runner, script string) Process {
	t.Helper()
	p, err := r.Start(context.Background(), Spec{Path: "/bin/sh", Args: []string{"-c", script}, Env: testEnv})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { p.Stop(-1) })
	return p
}

// readAllAsync drains r to EOF in a goroutine.
func readAllAsync(r io.Reader) <-chan []byte {
	ch := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		ch <- b
	}()
	return ch
}

func recv(t *testing.T, what string, ch <-chan []byte) []byte {
	t.Helper()
	select {
	case b := <-ch:
		return b
	case <-time.After(deadline):
		t.Fatalf("%s: no EOF within %v", what, deadline)
		return nil
	}
}

func waitExit(t *testing.T, p Process) Exit {
	t.Helper()
	select {
	case <-p.Done():
		return p.Wait()
	case <-time.After(deadline):
		t.Fatalf("pid %d: no exit within %v", p.Pid(), deadline)
		return Exit{}
	}
}

// readLine reads one line byte by byte, so nothing after it is consumed.
func readLine(t *testing.T, r io.Reader) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		var b []byte
		one := make([]byte, 1)
		for {
			n, err := r.Read(one)
			if n == 1 {
				if one[0] == '\n' {
					break
				}
				b = append(b, one[0])
			}
			if err != nil {
				break
			}
		}
		ch <- string(b)
	}()
	select {
	case s := <-ch:
		return s
	case <-time.After(deadline):
		t.Fatalf("no line within %v", deadline)
		return ""
	}
}

func readN(t *testing.T, r io.Reader, n int) []byte {
	t.Helper()
	ch := make(chan []byte, 1)
	go func() {
		b := make([]byte, n)
		k, _ := io.ReadFull(r, b)
		ch <- b[:k]
	}()
	return recv(t, "readN", ch)
}

func exitString(e Exit) string {
	if e.Code != nil {
		return fmt.Sprintf("code %d signal %q", *e.Code, e.Signal)
	}
	return fmt.Sprintf("code nil signal %q", e.Signal)
}

// dead reports whether pid no longer runs. A killed orphan is reparented to
// init, which on some hosts never reaps it, so a zombie counts as dead.
func dead(pid int) bool {
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	state, _, ok := parseStat(b)
	return ok && state == 'Z'
}

func awaitDead(t *testing.T, pid int) {
	t.Helper()
	end := time.Now().Add(deadline)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !dead(pid) {
		if time.Now().After(end) {
			t.Fatalf("pid %d still alive after %v", pid, deadline)
		}
		<-tick.C
	}
}

func TestExitObserved(t *testing.T) {
	t.Parallel()
	code := func(c int) *int { return &c }
	tests := []struct {
		name     string
		script   string
		wantCode *int
		wantSig  string
		wantJSON string
	}{
		{"exit0", "exit 0", code(0), "", `"exit_code":0`},
		{"exit1", "exit 1", code(1), "", `"exit_code":1`},
		// A child that exits 143 by itself is a code, not a signal (R-EXIT-1).
		{"exit143", "exit 143", code(143), "", `"exit_code":143`},
		// R-EXIT-3: a signal death has a null code and the signal's name.
		{"sigkill", "kill -KILL $$", nil, "SIGKILL", `"exit_code":null,"signal":"SIGKILL"`},
		{"sigterm", "kill -TERM $$", nil, "SIGTERM", `"exit_code":null,"signal":"SIGTERM"`},
	}
	runners := []Runner{NewProcRunner()}
	if r, err := NewPTYRunner(); err == nil {
		runners = append(runners, r)
	}
	for _, r := range runners {
		for _, tt := range tests {
			t.Run(r.Name()+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				p := startSh(t, r, tt.script)
				out, errs := readAllAsync(p.Stdout()), readAllAsync(p.Stderr())
				e := waitExit(t, p)
				recv(t, "stdout", out)
				recv(t, "stderr", errs)
				if (e.Code == nil) != (tt.wantCode == nil) || (e.Code != nil && *e.Code != *tt.wantCode) || e.Signal != tt.wantSig {
					t.Fatalf("got %s, want code %v signal %q", exitString(e), tt.wantCode, tt.wantSig)
				}
				if e.At.IsZero() {
					t.Errorf("got zero At, want the time of the exit")
				}
				b, err := json.Marshal(e)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Contains(b, []byte(tt.wantJSON)) {
					t.Errorf("got JSON %s, want it to contain %s", b, tt.wantJSON)
				}
			})
		}
	}
}

func TestSignalReachesGroup(t *testing.T) {
	t.Parallel()
	p := startSh(t, NewProcRunner(), "echo ready; exec sleep 1000")
	if got := readLine(t, p.Stdout()); got != "ready" {
		t.Fatalf("got %q, want ready", got)
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	if e := waitExit(t, p); e.Code != nil || e.Signal != "SIGKILL" {
		t.Fatalf("got %s, want signal SIGKILL", exitString(e))
	}
	if err := p.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("Signal after exit: got %v, want os.ErrProcessDone", err)
	}
}

// R-TR-2: stdout and stderr stay separate streams, byte for byte.
func TestStreamsKeptApart(t *testing.T) {
	t.Parallel()
	script := `i=0
while [ $i -lt 300 ]; do
  printf 'out%d\n' $i
  printf 'err%d\n' $i >&2
  i=$((i+1))
done
printf 'o\001\377\000end' 
printf 'e\002\376\000end' >&2`
	var wantOut, wantErr bytes.Buffer
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&wantOut, "out%d\n", i)
		fmt.Fprintf(&wantErr, "err%d\n", i)
	}
	wantOut.WriteString("o\x01\xff\x00end")
	wantErr.WriteString("e\x02\xfe\x00end")

	p := startSh(t, NewProcRunner(), script)
	out, errs := readAllAsync(p.Stdout()), readAllAsync(p.Stderr())
	if got := recv(t, "stdout", out); !bytes.Equal(got, wantOut.Bytes()) {
		t.Errorf("stdout: got %d bytes %q..., want %d bytes", len(got), got[:min(len(got), 40)], wantOut.Len())
	}
	if got := recv(t, "stderr", errs); !bytes.Equal(got, wantErr.Bytes()) {
		t.Errorf("stderr: got %d bytes %q..., want %d bytes", len(got), got[:min(len(got), 40)], wantErr.Len())
	}
	if e := waitExit(t, p); e.Code == nil || *e.Code != 0 {
		t.Errorf("got %s, want code 0", exitString(e))
	}
}

// Output written just before exit is still there for a reader that starts
// after the exit: the runner does not close the read ends.
func TestReadToEOFAfterExit(t *testing.T) {
	t.Parallel()
	const n = 2000
	for _, r := range []Runner{NewProcRunner(), ptyRunnerT(t)} {
		t.Run(r.Name(), func(t *testing.T) {
			t.Parallel()
			p := startSh(t, r, fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x; printf E >&2", n))
			waitExit(t, p)
			want := strings.Repeat("x", n)
			if got := recv(t, "stdout", readAllAsync(p.Stdout())); string(got) != want {
				t.Errorf("stdout: got %d bytes, want %d", len(got), n)
			}
			if got := recv(t, "stderr", readAllAsync(p.Stderr())); string(got) != "E" {
				t.Errorf("stderr: got %q, want %q", got, "E")
			}
		})
	}
}

// R-STOP-1/3: a child that ignores SIGTERM is SIGKILLed once the grace is over.
func TestStopKillsAfterGrace(t *testing.T) {
	t.Parallel()
	const grace = 300 * time.Millisecond
	p := startSh(t, NewProcRunner(), "trap '' TERM; echo ready; exec sleep 1000")
	if got := readLine(t, p.Stdout()); got != "ready" {
		t.Fatalf("got %q, want ready", got)
	}
	begin := time.Now()
	e := p.Stop(grace)
	if took := time.Since(begin); took < grace {
		t.Errorf("Stop returned after %v, want at least the grace %v", took, grace)
	}
	if e.Code != nil || e.Signal != "SIGKILL" {
		t.Fatalf("got %s, want signal SIGKILL", exitString(e))
	}
	if w := p.Wait(); w.Signal != e.Signal || !w.At.Equal(e.At) {
		t.Errorf("Wait after Stop: got %s, want the same exit", exitString(w))
	}
}

// A child that honours SIGTERM is not made to wait out the grace.
func TestStopHonoursTerm(t *testing.T) {
	t.Parallel()
	const grace = 30 * time.Second
	p := startSh(t, NewProcRunner(), "echo ready; exec sleep 1000")
	readLine(t, p.Stdout())
	begin := time.Now()
	e := p.Stop(grace)
	if took := time.Since(begin); took >= grace {
		t.Errorf("Stop took %v, want the SIGTERM exit before the grace", took)
	}
	if e.Code != nil || e.Signal != "SIGTERM" {
		t.Fatalf("got %s, want signal SIGTERM", exitString(e))
	}
}

// R-STOP-3: signalling the group reaches grandchildren.
func TestStopKillsGrandchildren(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		script   string
		wantSig  string
		minTaken time.Duration
	}{
		// Both die of SIGTERM.
		{"term", `sleep 1000 & echo $!; wait`, "SIGTERM", 0},
		// Both ignore SIGTERM (ignored dispositions survive exec): SIGKILL.
		{"ignored", `trap '' TERM; sleep 1000 & echo $!; wait`, "SIGKILL", 300 * time.Millisecond},
		// The leader dies of SIGTERM, the grandchild ignores it: the grandchild
		// gets the rest of the grace, then SIGKILL.
		{"straggler", `sh -c 'trap "" TERM; echo $$; exec sleep 1000' & wait`, "SIGTERM", 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := startSh(t, NewProcRunner(), tt.script)
			gc, err := strconv.Atoi(readLine(t, p.Stdout()))
			if err != nil {
				t.Fatalf("grandchild pid: %v", err)
			}
			if dead(gc) {
				t.Fatalf("grandchild %d dead before Stop", gc)
			}
			begin := time.Now()
			e := p.Stop(300 * time.Millisecond)
			if took := time.Since(begin); took < tt.minTaken {
				t.Errorf("Stop returned after %v, want at least %v", took, tt.minTaken)
			}
			if e.Code != nil || e.Signal != tt.wantSig {
				t.Errorf("got %s, want signal %s", exitString(e), tt.wantSig)
			}
			awaitDead(t, gc)
			// The grandchild held stdout; with it gone, stdout reaches EOF.
			recv(t, "stdout", readAllAsync(p.Stdout()))
		})
	}
}

// R-STOP-4: Stop on a child that has exited signals nothing and returns the
// observed exit.
func TestStopAfterExit(t *testing.T) {
	t.Parallel()
	p := startSh(t, NewProcRunner(), "exit 5")
	e := waitExit(t, p)
	s := p.Stop(time.Hour)
	if s.Code == nil || *s.Code != 5 || !s.At.Equal(e.At) {
		t.Fatalf("got %s at %v, want code 5 at %v", exitString(s), s.At, e.At)
	}
}

func TestEnvIsExactlySpecEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"given", []string{"A=1", "B=two words", "PATH=/nowhere"}, "A=1\nB=two words\nPATH=/nowhere\n"},
		// nil is empty, never the agent's environment.
		{"nil", nil, ""},
	}
	for _, r := range []Runner{NewProcRunner(), ptyRunnerT(t)} {
		for _, tt := range tests {
			t.Run(r.Name()+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				p, err := r.Start(context.Background(), Spec{Path: "/usr/bin/env", Env: tt.env, Dir: "/"})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { p.Stop(-1) })
				out := readAllAsync(p.Stdout())
				recv(t, "stderr", readAllAsync(p.Stderr()))
				if got := string(recv(t, "stdout", out)); got != tt.want {
					t.Errorf("got env %q, want %q", got, tt.want)
				}
				waitExit(t, p)
			})
		}
	}
}

// A bare name is looked up in Spec.Env's PATH, not the agent's.
func TestBareNameUsesSpecPath(t *testing.T) {
	t.Parallel()
	r := NewProcRunner()
	p, err := r.Start(context.Background(), Spec{Path: "echo", Args: []string{"hi"}, Env: []string{"PATH=/nowhere:/bin"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if got := string(recv(t, "stdout", readAllAsync(p.Stdout()))); got != "hi\n" {
		t.Errorf("got %q, want %q", got, "hi\n")
	}
	waitExit(t, p)
	if _, err := r.Start(context.Background(), Spec{Path: "echo", Env: []string{"HOME=/"}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("no PATH in Spec.Env: got %v, want ErrNotFound", err)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// Not parallel: it counts this process's descriptors.
func TestStartFailureLeavesNothing(t *testing.T) {
	runners := []Runner{NewProcRunner()}
	if r, err := NewPTYRunner(); err == nil {
		runners = append(runners, r)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, r := range runners {
		before := openFDs(t)
		_, err := r.Start(context.Background(), Spec{Path: "/nonexistent/olivares-cli", Env: testEnv})
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "/nonexistent/olivares-cli") {
			t.Errorf("%s: missing binary: got %v, want a not-exist error naming the path", r.Name(), err)
		}
		if _, err := r.Start(context.Background(), Spec{}); !errors.Is(err, ErrNoPath) {
			t.Errorf("%s: empty path: got %v, want ErrNoPath", r.Name(), err)
		}
		if _, err := r.Start(canceled, Spec{Path: "/bin/true"}); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: canceled ctx: got %v, want context.Canceled", r.Name(), err)
		}
		if after := openFDs(t); after > before {
			t.Errorf("%s: open descriptors: got %d after failed starts, want at most %d", r.Name(), after, before)
		}
	}
}

// Cancelling Start's context does not kill the child; only Stop does.
func TestContextCancelDoesNotKill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := NewProcRunner().Start(ctx, Spec{Path: "/bin/sh", Args: []string{"-c", "read x; echo got $x"}, Env: testEnv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(-1) })
	cancel()
	if _, err := io.WriteString(p.Stdin(), "hi\n"); err != nil {
		t.Fatalf("write stdin: %v", err)
	}
	if got := readLine(t, p.Stdout()); got != "got hi" {
		t.Fatalf("got %q, want %q", got, "got hi")
	}
	if e := waitExit(t, p); e.Code == nil || *e.Code != 0 {
		t.Fatalf("got %s, want code 0", exitString(e))
	}
}

// R-TR-3: Claude Code's --print form needs a stdin that is not a terminal.
func TestProcStdinIsNotTerminal(t *testing.T) {
	t.Parallel()
	p := startSh(t, NewProcRunner(), `for fd in 0 1 2; do if [ -t $fd ]; then echo tty; else echo pipe; fi; done`)
	if got := string(recv(t, "stdout", readAllAsync(p.Stdout()))); got != "pipe\npipe\npipe\n" {
		t.Errorf("got %q, want three pipes", got)
	}
}

// R-TR-5: stdin and stdout on a terminal, stderr still a separate pipe.
func TestPTYTerminal(t *testing.T) {
	t.Parallel()
	p := startSh(t, ptyRunnerT(t), `[ -t 0 ] && echo in-tty; [ -t 1 ] && echo out-tty; [ -t 2 ] || echo err-not-tty; stty size; echo oops >&2`)
	out, errs := readAllAsync(p.Stdout()), readAllAsync(p.Stderr())
	// Raw mode: no \n -> \r\n translation.
	if got, want := string(recv(t, "pty", out)), "in-tty\nout-tty\nerr-not-tty\n24 80\n"; got != want {
		t.Errorf("pty: got %q, want %q", got, want)
	}
	if got := string(recv(t, "stderr", errs)); got != "oops\n" {
		t.Errorf("stderr: got %q, want %q", got, "oops\n")
	}
	if e := waitExit(t, p); e.Code == nil || *e.Code != 0 {
		t.Errorf("got %s, want code 0", exitString(e))
	}
}

// Raw mode: no echo, no line discipline, no output translation. Closing a
// PTY's Stdin does not close the stream being read.
func TestPTYRaw(t *testing.T) {
	t.Parallel()
	p, err := ptyRunnerT(t).Start(context.Background(), Spec{Path: "/bin/cat", Env: testEnv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(-1) })
	if _, err := io.WriteString(p.Stdin(), "a\n"); err != nil {
		t.Fatal(err)
	}
	got := readN(t, p.Stdout(), 2)
	if err := p.Stdin().Close(); err != nil {
		t.Fatalf("close stdin: %v", err)
	}
	e := p.Stop(deadline)
	got = append(got, recv(t, "pty", readAllAsync(p.Stdout()))...)
	if string(got) != "a\n" {
		t.Errorf("got %q, want exactly %q", got, "a\n")
	}
	if e.Code != nil || e.Signal != "SIGTERM" {
		t.Errorf("got %s, want signal SIGTERM", exitString(e))
	}
}

func TestConcurrentWaits(t *testing.T) {
	t.Parallel()
	p := startSh(t, NewProcRunner(), "read x; exit 7")
	const n = 32
	exits := make([]Exit, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			exits[i] = p.Wait()
		}()
	}
	if err := p.Stdin().Close(); err != nil {
		t.Fatal(err)
	}
	waitExit(t, p)
	wg.Wait()
	for i, e := range exits {
		if e.Code == nil || *e.Code != 7 || !e.At.Equal(exits[0].At) {
			t.Fatalf("Wait %d: got %s at %v, want code 7 at %v", i, exitString(e), e.At, exits[0].At)
		}
	}
}

// 50 concurrent short children are all reaped: none is left a zombie of ours.
func TestManyChildrenReaped(t *testing.T) {
	t.Parallel()
	const n = 50
	r := NewProcRunner()
	pids := make([]int, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := r.Start(context.Background(), Spec{Path: "/bin/sh", Args: []string{"-c", "echo $$; echo e >&2; exit 3"}, Env: testEnv})
			if err != nil {
				errs <- err
				return
			}
			pids[i] = p.Pid()
			out, serr := readAllAsync(p.Stdout()), readAllAsync(p.Stderr())
			var got, gotErr []byte
			select {
			case got = <-out:
			case <-time.After(deadline):
			}
			select {
			case gotErr = <-serr:
			case <-time.After(deadline):
			}
			var e Exit
			select {
			case <-p.Done():
				e = p.Wait()
			case <-time.After(deadline):
				p.Stop(-1)
				errs <- fmt.Errorf("pid %d: no exit within %v", p.Pid(), deadline)
				return
			}
			if string(got) != strconv.Itoa(p.Pid())+"\n" || string(gotErr) != "e\n" || e.Code == nil || *e.Code != 3 {
				errs <- fmt.Errorf("pid %d: got stdout %q stderr %q %s, want its pid, e, code 3", p.Pid(), got, gotErr, exitString(e))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	me := os.Getpid()
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue // gone
		}
		state, _, _ := parseStat(b)
		f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
		if ppid, _ := strconv.Atoi(string(f[1])); ppid == me && state == 'Z' {
			t.Errorf("pid %d is a zombie of this process", pid)
		}
	}
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		state byte
		pgrp  int
		ok    bool
	}{
		{"123 (sleep) S 1 120 120 0", 'S', 120, true},
		{"123 (a (b) c) Z 1 99 99", 'Z', 99, true},
		{"123 (x", 0, 0, false},
		{"123 (x) S 1", 0, 0, false},
	}
	for _, tt := range tests {
		state, pgrp, ok := parseStat([]byte(tt.in))
		if state != tt.state || pgrp != tt.pgrp || ok != tt.ok {
			t.Errorf("parseStat(%q): got %q %d %v, want %q %d %v", tt.in, state, pgrp, ok, tt.state, tt.pgrp, tt.ok)
		}
	}
}
