package bench

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/olivares-dev/olivares/shared/tunnel/tunneltest"
)

// The physical baselines of issue 18, measured in the same run as the
// product: what the disk and a minimal Go program can do with the same
// bytes.

// durableBatch is the baselines' fdatasync period: the ring's batch cap
// under load (ring.DefaultFlushBytes).
const durableBatch = 1 << 20

// durableAppend appends n bytes in floodPiece writes to a new file with an
// fdatasync per durableBatch: 10^6 bytes per second.
func durableAppend(dir string, n int) (float64, error) {
	f, err := os.OpenFile(filepath.Join(dir, "append"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	piece := make([]byte, floodPiece)
	start := time.Now()
	since := 0
	for done := 0; done < n; done += len(piece) {
		if _, err := f.Write(piece); err != nil {
			return 0, err
		}
		if since += len(piece); since >= durableBatch {
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				return 0, err
			}
			since = 0
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return 0, err
	}
	return float64(n) / 1e6 / time.Since(start).Seconds(), nil
}

// fsyncLatency samples a 4 KiB append and its fdatasync, k times.
func fsyncLatency(dir string, k int) ([]time.Duration, error) {
	f, err := os.OpenFile(filepath.Join(dir, "fsync"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 4<<10)
	out := make([]time.Duration, 0, k)
	for range k {
		start := time.Now()
		if _, err := f.Write(b); err != nil {
			return nil, err
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

// selfCPU is this process's user+system CPU so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// tlsPair is a TLS connection on 127.0.0.1: w writes, r reads.
func tlsPair(t *testing.T) (w, r *tls.Conn) {
	t.Helper()
	p := tunneltest.NewPKI(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", p.ServerTLS())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			// The server's half of the handshake, while Dial waits for it.
			err = c.(*tls.Conn).Handshake()
		}
		if err != nil {
			acc <- nil
			return
		}
		acc <- c
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), p.ClientTLS())
	if err != nil {
		t.Fatal(err)
	}
	s := <-acc
	if s == nil {
		t.Fatal("accept failed")
	}
	sc := s.(*tls.Conn)
	t.Cleanup(func() { c.Close(); sc.Close() })
	return sc, c
}

// minimalPipeline is the smallest Go program that does what the agent's
// output path must: read a pipe a child writes n bytes to, append what it
// read to a file with an fdatasync per durableBatch, and write it to a TLS
// socket a reader drains. It returns 10^6 bytes per second and the CPU
// this process spent (reader included).
func minimalPipeline(t *testing.T, dir string, n int) (float64, time.Duration, error) {
	w, r := tlsPair(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, 0, err
	}
	defer pr.Close()
	f, err := os.OpenFile(filepath.Join(dir, "pipeline"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	drained := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		drained <- readN(r, buf, n)
	}()
	cpu0, start := selfCPU(), time.Now()
	go func() { // the child: a writer of floodPiece chunks
		piece := make([]byte, floodPiece)
		for done := 0; done < n; done += len(piece) {
			if _, err := pw.Write(piece); err != nil {
				break
			}
		}
		pw.Close()
	}()
	buf := make([]byte, 64<<10)
	since := 0
	for {
		k, err := pr.Read(buf)
		if k > 0 {
			if _, err := f.Write(buf[:k]); err != nil {
				return 0, 0, err
			}
			if since += k; since >= durableBatch {
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					return 0, 0, err
				}
				since = 0
			}
			if _, err := w.Write(buf[:k]); err != nil {
				return 0, 0, err
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if err := <-drained; err != nil {
		return 0, 0, err
	}
	d := time.Since(start)
	return float64(n) / 1e6 / d.Seconds(), selfCPU() - cpu0, nil
}

// relayCopy is the coordinator's baseline: io.Copy between two TLS
// sockets, n bytes from a writer through the relay to a reader. It returns
// the CPU this process spent on the three of them.
func relayCopy(t *testing.T, n int) (time.Duration, error) {
	inW, inR := tlsPair(t)
	outW, outR := tlsPair(t)
	drained := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		drained <- readN(outR, buf, n)
	}()
	cpu0 := selfCPU()
	go func() {
		piece := make([]byte, floodPiece)
		for done := 0; done < n; done += len(piece) {
			if _, err := inW.Write(piece); err != nil {
				return
			}
		}
	}()
	if _, err := io.CopyN(outW, inR, int64(n)); err != nil {
		return 0, err
	}
	if err := <-drained; err != nil {
		return 0, err
	}
	return selfCPU() - cpu0, nil
}

// perfTop runs fn under `perf record` of pid and returns the top five
// symbols of its CPU profile (self time), or why there is none.
func perfTop(dir string, pid int, fn func() error) (string, error) {
	perf, err := exec.LookPath("perf")
	if err != nil {
		return "", fn() // no profile, still the measurement
	}
	if keep := os.Getenv("OLIVARES_BENCH_PERF"); keep != "" {
		dir = keep // kept for perf report's call graphs
	}
	data := filepath.Join(dir, fmt.Sprintf("perf-%d.data", pid))
	cmd := exec.Command(perf, "record", "-q", "--no-inherit", "-F", "499", "-g", "-p", strconv.Itoa(pid), "-o", data)
	if err := cmd.Start(); err != nil {
		return "perf record: " + err.Error(), fn()
	}
	ferr := fn()
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	out, err := exec.Command(perf, "report", "-q", "-i", data, "--stdio", "--no-children", "--sort", "symbol", "-g", "none").Output()
	if err != nil {
		return "perf report: " + err.Error(), ferr
	}
	var top []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		top = append(top, "    "+l)
		if len(top) == 5 {
			break
		}
	}
	return strings.Join(top, "\n"), ferr
}

// pprofTop runs fn under a Go CPU profile of this process (perf cannot
// name the symbols of a test binary) and returns its top five functions by
// self time, or why there are none.
func pprofTop(dir, name string, fn func() error) (string, error) {
	if keep := os.Getenv("OLIVARES_BENCH_PERF"); keep != "" {
		dir = keep
	}
	data := filepath.Join(dir, name+".pprof")
	f, err := os.Create(data)
	if err != nil {
		return "pprof: " + err.Error(), fn()
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return "pprof: " + err.Error(), fn()
	}
	ferr := fn()
	pprof.StopCPUProfile()
	f.Close()
	out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=5", data).Output()
	if err != nil {
		return "go tool pprof: " + err.Error(), ferr
	}
	// The rows follow the header line that starts with "flat".
	_, rows, _ := strings.Cut(string(out), " flat%")
	var top []string
	for _, l := range strings.Split(rows, "\n")[1:] {
		if l = strings.TrimSpace(l); l != "" {
			top = append(top, "    "+l)
		}
	}
	return strings.Join(top, "\n"), ferr
}
