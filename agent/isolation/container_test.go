package isolation_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/isolation"
	"github.com/olivares-dev/olivares/agent/sessions"
)

// containers lists the containers the runner of dir made.
func containers(t *testing.T, dir string) []string {
	t.Helper()
	out, err := exec.Command("podman", "--runtime", "runc", "ps", "--all", "--filter", "label=olivares.root="+dir, "--format", "{{.Names}}").Output()
	if err != nil {
		t.Fatalf("podman ps: %v", err)
	}
	return strings.Fields(string(out))
}

// awaitRunning polls until a container of the runner of dir is running,
// or fails after d.
func awaitRunning(t *testing.T, dir string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := exec.Command("podman", "--runtime", "runc", "ps", "--filter", "label=olivares.root="+dir, "--filter", "status=running", "--format", "{{.Names}}").Output()
		if err == nil && len(strings.Fields(string(out))) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no running container after %v (%v)", d, err)
		}
		<-tick.C
	}
}

// awaitRunningNamed polls until a container whose name starts with
// prefix is running, or fails after d.
func awaitRunningNamed(t *testing.T, prefix string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := exec.Command("podman", "--runtime", "runc", "ps", "--filter", "status=running", "--format", "{{.Names}}").Output()
		for _, name := range strings.Fields(string(out)) {
			if strings.HasPrefix(name, prefix) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no running container %s* after %v (%v)", prefix, d, err)
		}
		<-tick.C
	}
}

// awaitNoContainer polls (podman has no event to wait on here) until the
// runner of dir has no container left, or fails after d.
func awaitNoContainer(t *testing.T, dir string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for names := containers(t, dir); len(names) > 0; names = containers(t, dir) {
		if time.Now().After(deadline) {
			t.Fatalf("containers %v still there after %v", names, d)
		}
		<-tick.C
	}
}

// TestContainerKillLeavesNoContainer (R-TR-6, R-STOP-1): a tool that ignores SIGTERM is
// killed after the grace; the SIGKILL ends podman, not the
// container, so the runner removes the container by name, and an agent
// starting on the runner's directory removes one that a killed agent left
// with nobody attached (docs/isolation.md).
func TestContainerKillLeavesNoContainer(t *testing.T) {
	dir := t.TempDir()
	c, err := isolation.DetectContainer(context.Background(), dir)
	if err != nil {
		t.Fatalf("container unavailable: %v", err)
	}
	n := newNode(t)
	b := n.boundary(isolation.NetworkNone, 0)
	b.Name = "run_kill"
	const script = `trap '' TERM; echo ready; exec sleep 600`
	sp := sessions.Spec{Path: "sh", Args: []string{"-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: n.work}

	// Through the runner: Stop's SIGKILL, then the container goes.
	p, err := c.Runner(sessions.NewProcRunner(), b).Start(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stderr())
	if l, err := bufio.NewReader(p.Stdout()).ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("no ready line: %q %v", l, err)
	}
	// Podman says the container runs (its conmon has left podman's
	// process group by then): a stop this early in a container's start
	// is a separate case (a SIGTERM that reached conmon too was seen to
	// end the run with exit 0 under load; docs/isolation.md).
	awaitRunning(t, dir, time.Minute)
	if e := p.Stop(500 * time.Millisecond); e.Signal != "SIGKILL" {
		code := "none"
		if e.Code != nil {
			code = fmt.Sprint(*e.Code)
		}
		t.Fatalf("a tool ignoring SIGTERM stopped with signal %q code %s, want SIGKILL after the grace", e.Signal, code)
	}
	awaitNoContainer(t, dir, time.Minute)

	// A podman killed with nobody to clean up after it (a killed agent):
	// the next agent's detection removes its container.
	ws, _, err := c.Wrap(sp, b)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ws.Path, ws.Args...)
	cmd.Env, cmd.Dir = ws.Env, ws.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("no ready line: %q %v", l, err)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
	if names := containers(t, dir); len(names) != 1 || !strings.HasPrefix(names[0], isolation.ContainerPrefix+"run_kill-") {
		t.Fatalf("after podman's SIGKILL the containers are %v, want the run's one left running", names)
	}
	if _, err := isolation.DetectContainer(context.Background(), filepath.Clean(dir)); err != nil {
		t.Fatal(err)
	}
	if names := containers(t, dir); len(names) != 0 {
		t.Fatalf("an agent starting on %s left %v running", dir, names)
	}
}

// TestContainerPTY (R-TR-5, R-TR-6): a form on a PTY under container gets
// a terminal of podman's (-t), relayed to the agent's PTY: the tool sees a
// tty, reads a line typed on it, and its exit code comes back.
func TestContainerPTY(t *testing.T) {
	c := container(t)
	n := newNode(t)
	pty, err := sessions.NewPTYRunner()
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Runner(pty, n.boundary(isolation.NetworkNone, 0)).Start(context.Background(), sessions.Spec{Path: "bash",
		Args: []string{"-c", "tty; read x; echo got-$x; exit 5"}, Env: []string{"PATH=/usr/bin:/bin", "TERM=xterm"}, Dir: n.work})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stderr())
	r := bufio.NewReader(p.Stdout())
	if l, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(l, "/dev/pts/") {
		t.Fatalf("the tool's stdin is %q %v, want a terminal", l, err)
	}
	if _, err := p.Stdin().Write([]byte("hello\r")); err != nil {
		t.Fatal(err)
	}
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("no echo of the typed line: %v", err)
		}
		if strings.HasPrefix(l, "got-hello") {
			break
		}
	}
	go io.Copy(io.Discard, r)
	if e := p.Wait(); e.Code == nil || *e.Code != 5 {
		t.Fatalf("exit %+v, want 5", e)
	}
}
