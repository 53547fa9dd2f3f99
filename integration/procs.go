package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	agentenroll "github.com/olivares-dev/olivares/agent/enroll"
	"github.com/olivares-dev/olivares/coordinator/fleet"
	"github.com/olivares-dev/olivares/integration/peers/peerbin"
)

// The binaries (olivares-coordinator, olivares, olivares-agent), built once
// per test binary into one directory (the fakecli peer is peerbin's), with
// -race when RaceDaemons says so. A package whose tests use them calls
// RemoveBinaries from its TestMain.
var (
	// RaceDaemons builds the binaries with -race, so that the suite's race
	// detector covers the daemons it runs as processes too: the default
	// when the test binary has it. The journeys and the console's tests
	// turn it off in their TestMain before any test: their daemons under
	// -race made them about 1.4× as long (the suite's 15 minutes), and the
	// same daemons' code runs under -race in its own packages' tests and
	// in this package's (tunnel, replicas, stops), and the coordinator of
	// every env runs in the -race test binary itself.
	RaceDaemons = raceBuild

	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

func goBin() string {
	//lint:ignore SA1019 the toolchain that built this test binary builds the daemons it runs, on the same machine
	if g := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(g) {
		return g
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Binaries returns the directory holding the built binaries.
func Binaries(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "olv-bin-")
		if buildErr != nil {
			return
		}
		for _, b := range []struct{ out, pkg string }{
			{binDir + "/", "./coordinator/cmd/olivares-coordinator"},
			{binDir + "/", "./coordinator/cmd/olivares"},
			{binDir + "/", "./agent/cmd/olivares-agent"},
		} {
			args := []string{"build"}
			if RaceDaemons {
				args = append(args, "-race")
			}
			cmd := exec.Command(goBin(), append(args, "-o", b.out, b.pkg)...)
			cmd.Dir = repoRoot()
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatalf("build: %v", buildErr)
	}
	return binDir
}

// AgentBinary builds olivares-agent again with version as its version
// (cmdline.Version, which agentd.Version takes), into a directory of its own, and returns its path: a
// newer build to upgrade an agent onto (SetBinary).
func AgentBinary(t testing.TB, version string) string {
	t.Helper()
	Binaries(t)
	dir := filepath.Join(binDir, "v-"+version)
	out := filepath.Join(dir, "olivares-agent")
	if fileExists(out) {
		return out
	}
	args := []string{"build"}
	if RaceDaemons {
		args = append(args, "-race")
	}
	args = append(args, "-ldflags", "-X github.com/olivares-dev/olivares/shared/cmdline.Version="+version, "-o", out, "./agent/cmd/olivares-agent")
	cmd := exec.Command(goBin(), args...)
	cmd.Dir = repoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build olivares-agent %s: %v\n%s", version, err, b)
	}
	return out
}

// PeerPath is a PATH whose claude, codex and grok are the fakecli peer.
func PeerPath(t testing.TB) string {
	return peerbin.Dir(t) + ":/usr/local/bin:/usr/bin:/bin"
}

// RemoveBinaries removes what Binaries and PeerPath built.
func RemoveBinaries() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	peerbin.Remove()
}

// ProcOptions shape an agent that runs as its own process.
type ProcOptions struct {
	// Transport: when empty, "auto".
	Transport string
	// Container runs the agent with its container runner on (podman is
	// probed at start, as in production). Off by default: the probe costs
	// about a second of podman per agent start, which the tests that do
	// not launch containers need not pay.
	Container bool
	// Path is the children's PATH; when empty, PeerPath.
	Path string
	// StopGrace: when zero, 10 s.
	StopGrace time.Duration
	// RingMaxBytes and RingMaxFrames: when zero, the defaults.
	RingMaxBytes, RingMaxFrames int64
	// ViewerQueue: when zero, the default.
	ViewerQueue int
	// NoWorktreeDir leaves worktree_dir unset (worktree launches are 503,
	// R-WT-4); otherwise worktrees go under the agent's state dir.
	NoWorktreeDir bool
	// Config is more TOML, appended after the [runs] table (a
	// [codex_supervision] table, say).
	Config string
	// Coordinators, when set, are the replicas' tunnel addresses the agent
	// dials (`coordinator = [...]`); it enrolls through the env's
	// coordinator either way.
	Coordinators []string
	// AgentPATH is the agent process's own PATH (where it finds bwrap and
	// git); when empty, /usr/local/bin:/usr/bin:/bin.
	AgentPATH string
}

// AgentProc is an olivares-agent process enrolled in the env.
type AgentProc struct {
	env        *Env
	t          testing.TB
	ID         string
	Dir        string
	config     string // the agent binary
	configFile string
	path       string // the process's PATH

	mu      sync.Mutex
	cmd     *exec.Cmd
	out     *syncBuffer
	done    chan error
	started time.Time // when this process was started
}

// StartAgentProcess enrolls a node through the real join-token flow and
// runs the real olivares-agent binary on it.
func (e *Env) StartAgentProcess(o ProcOptions) *AgentProc {
	e.t.Helper()
	bin := Binaries(e.t)
	ctx := context.Background()
	iss, err := e.Coord.Enroll.CreateToken(ctx, Tenant, map[string]string{"test": "true"}, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	e.NoteSecret(iss.Token)
	e.mu.Lock()
	dir := filepath.Join(e.Dir, fmt.Sprintf("p%d", len(e.procs)))
	e.mu.Unlock()
	if _, err := agentenroll.Enroll(ctx, agentenroll.Options{Coordinator: e.TunnelAddr(), Token: iss.Token, CAPin: iss.CAPin, StateDir: dir}); err != nil {
		e.t.Fatal(err)
	}
	if o.Path == "" {
		o.Path = PeerPath(e.t)
	}
	if o.Transport == "" {
		o.Transport = "auto"
	}
	var b strings.Builder
	coord := fmt.Sprintf("%q", e.TunnelAddr())
	if len(o.Coordinators) > 0 {
		qs := make([]string, len(o.Coordinators))
		for i, a := range o.Coordinators {
			qs[i] = fmt.Sprintf("%q", a)
		}
		coord = "[" + strings.Join(qs, ", ") + "]"
	}
	fmt.Fprintf(&b, "state_dir = %q\ncoordinator = %s\ntransport = %q\npath = %q\n", dir, coord, o.Transport, o.Path)
	if !o.NoWorktreeDir {
		wt := filepath.Join(dir, "worktrees")
		if err := os.MkdirAll(wt, 0o700); err != nil {
			e.t.Fatal(err)
		}
		fmt.Fprintf(&b, "worktree_dir = %q\n", wt)
	}
	if !o.Container {
		b.WriteString("[isolation]\ncontainer = \"off\"\n")
	}
	b.WriteString("[runs]\n")
	if o.StopGrace != 0 {
		fmt.Fprintf(&b, "stop_grace = %q\n", o.StopGrace.String())
	}
	if o.RingMaxBytes != 0 {
		fmt.Fprintf(&b, "ring_max_bytes = %d\n", o.RingMaxBytes)
	}
	if o.RingMaxFrames != 0 {
		fmt.Fprintf(&b, "ring_max_frames = %d\n", o.RingMaxFrames)
	}
	if o.ViewerQueue != 0 {
		fmt.Fprintf(&b, "viewer_queue = %d\n", o.ViewerQueue)
	}
	b.WriteString(o.Config)
	cfg := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o600); err != nil {
		e.t.Fatal(err)
	}
	a := &AgentProc{env: e, t: e.t, ID: iss.NodeID, Dir: dir, config: filepath.Join(bin, "olivares-agent"), path: o.AgentPATH}
	if a.path == "" {
		a.path = "/usr/local/bin:/usr/bin:/bin"
	}
	a.configFile = cfg
	e.mu.Lock()
	e.procs = append(e.procs, a)
	e.mu.Unlock()
	a.Start()
	// Holders outlive their agent (issue 30): none outlives the test. The
	// agent goes first (cleanups run last-registered first), so that it
	// starts nothing while its holders are ended.
	e.t.Cleanup(a.KillHolders)
	e.t.Cleanup(a.Kill)
	return a
}

// Holders returns the pids of the run holders (olivares-agent hold) of
// this agent's state dir: the processes that keep its runs' children
// alive across agent restarts (issue 30).
func (a *AgentProc) Holders() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	dir := []byte("\x00--dir\x00" + filepath.Join(a.Dir, "holders") + "/")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte("\x00hold\x00")) && bytes.Contains(b, dir) && !zombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || len(b) < i+3 || b[i+2] == 'Z' || b[i+2] == 'X'
}

// Alive reports whether pid is a live process (not a zombie).
func Alive(pid int) bool { return !zombie(pid) }

// KillHolders sends SIGKILL to this agent's holders and every process
// in their sessions or under them, again until none is left: a tool still
// writing into its home while the test's cleanup removes that home fails
// the test. Sessions catch what a tool forked in the moment between a
// look at /proc and the kill of its parent (the orphan is reparented out
// of the tree but stays in the holder's session, or in the PTY child's).
func (a *AgentProc) KillHolders() {
	sids := map[int]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for roots := a.Holders(); time.Now().Before(deadline); roots = nil {
		procs := readProcs()
		for _, pid := range descendants(procs, roots) {
			if s := procs[pid].sid; s != procs[os.Getpid()].sid {
				sids[s] = true
			}
		}
		var live []int
		for pid, p := range procs {
			if sids[p.sid] && !p.zombie {
				live = append(live, pid)
			}
		}
		if len(live) == 0 {
			return
		}
		for _, pid := range live {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// procStat is what /proc/PID/stat says of one process.
type procStat struct {
	ppid, sid int
	zombie    bool
}

// readProcs reads every process's parent, session and state from /proc.
func readProcs() map[int]procStat {
	out := map[int]procStat{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := bytes.LastIndexByte(b, ')'); err == nil && i > 0 && len(b) > i+4 {
			var state string
			var ppid, pgrp, sid int
			if _, err := fmt.Sscan(string(b[i+2:]), &state, &ppid, &pgrp, &sid); err == nil {
				out[pid] = procStat{ppid: ppid, sid: sid, zombie: state == "Z" || state == "X"}
			}
		}
	}
	return out
}

// descendants returns roots and every process whose parent chain leads to
// one of them.
func descendants(procs map[int]procStat, roots []int) []int {
	in := map[int]bool{}
	for _, r := range roots {
		in[r] = true
	}
	for changed := true; changed; {
		changed = false
		for pid, p := range procs {
			if !in[pid] && in[p.ppid] {
				in[pid], changed = true, true
			}
		}
	}
	out := make([]int, 0, len(in))
	for pid := range in {
		out = append(out, pid)
	}
	return out
}

// SetBinary makes the next Start run bin (an upgrade, AgentBinary).
func (a *AgentProc) SetBinary(bin string) {
	a.mu.Lock()
	a.config = bin
	a.mu.Unlock()
}

// Start runs the agent process (again).
func (a *AgentProc) Start() {
	a.t.Helper()
	a.mu.Lock()
	bin := a.config
	a.mu.Unlock()
	cmd := exec.Command(bin, "run", "--config", a.configFile)
	cmd.Env = []string{"PATH=" + a.path, "HOME=" + a.Dir}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	a.mu.Lock()
	a.cmd, a.out, a.done, a.started = cmd, out, done, time.Now()
	a.mu.Unlock()
}

// Pid is the agent process's pid.
func (a *AgentProc) Pid() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cmd.Process.Pid
}

// Output is what the agent process printed.
func (a *AgentProc) Output() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.out.String()
}

// Exited reports whether the agent process has ended, and its Wait error.
func (a *AgentProc) Exited() (bool, error) {
	a.mu.Lock()
	done := a.done
	a.mu.Unlock()
	select {
	case err := <-done:
		done <- err
		return true, err
	default:
		return false, nil
	}
}

// Kill sends SIGKILL to the agent process (only the pid this env started)
// and waits for it; the children it started directly die with it
// (Pdeathsig), those under a holder live on (issue 30).
func (a *AgentProc) Kill() {
	a.mu.Lock()
	cmd, done := a.cmd, a.done
	a.mu.Unlock()
	if cmd == nil {
		return
	}
	// Exited already (a test ended it with SIGTERM, say)? done says so
	// without a race on cmd.ProcessState, which Wait writes.
	select {
	case err := <-done:
		done <- err
		a.checkRaces()
		return
	default:
	}
	cmd.Process.Signal(syscall.SIGKILL)
	err := <-done
	done <- err
	a.checkRaces()
}

// Terminate sends SIGTERM to the agent process (a graceful stop, as
// systemctl stop) and waits for it to exit.
func (a *AgentProc) Terminate() {
	a.mu.Lock()
	cmd, done := a.cmd, a.done
	a.mu.Unlock()
	cmd.Process.Signal(syscall.SIGTERM)
	err := <-done
	done <- err
	a.checkRaces()
}

// RaceReport is how a -race binary starts its report of a data race.
const RaceReport = "WARNING: DATA RACE"

// checkRaces fails the test when the agent process reported a data race:
// the report goes to its stderr, which the test would otherwise not read.
func (a *AgentProc) checkRaces() {
	if out := a.Output(); strings.Contains(out, RaceReport) {
		a.t.Errorf("olivares-agent %s reported a data race:\n%s", a.ID, out)
	}
}

// AwaitConnected waits until the coordinator has a live tunnel from a.
//
// It waits for a tunnel the current process dialed: after a Kill and a
// Start, the coordinator may still hold the killed process's QUIC session
// until its heartbeats time out.
func (a *AgentProc) AwaitConnected(d time.Duration) fleet.Link {
	a.t.Helper()
	a.mu.Lock()
	started := a.started
	a.mu.Unlock()
	var l fleet.Link
	Await(a.t, d, "node "+a.ID+" to connect\n"+a.Output(), func() bool {
		l = a.env.Fleet().Link(a.ID)
		return l.Connected && !l.ConnectedSince.Before(started)
	})
	return l
}

// syncBuffer collects a process's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// AwaitDisconnectedFrom waits until the coordinator has no live tunnel
// from a.
func (a *AgentProc) AwaitDisconnectedFrom(e *Env, d time.Duration) {
	a.t.Helper()
	Await(a.t, d, "node "+a.ID+" to disconnect", func() bool { return !e.Fleet().Link(a.ID).Connected })
}
