// Package isolation turns the launch of a run's child into a contained one
// (R-TR-7, docs/isolation.md). It does not spawn anything itself: a runner
// wraps the sessions.Runner that spawns (proc, pty, or whatever owns the
// child) and rewrites each sessions.Spec into the one that really runs,
// `bwrap … -- program args`, so every isolating runner keeps one
// containment contract whatever starts the process.
//
// The contract, from inside an isolated run: the run's working directory
// (its worktree, workspace or profile home) and its profile home are
// writable; the host's system directories and the directories of the
// child's PATH are visible read-only; the agent's state directory, other
// runs' directories, other profiles' homes and the rest of $HOME are not
// visible; /tmp is private; the run sees only its own processes; a
// process-count limit holds; the network is the host's or none.
package isolation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/olivares-dev/olivares/agent/sessions"
)

// Network values of a profile (R-TR-7).
const (
	NetworkHost = "host"
	NetworkNone = "none"
)

// DefaultMaxProcs is the process-count limit of a run when its boundary
// sets none: far above what a vendor CLI and its tools use (threads
// count), far below what exhausts a node.
const DefaultMaxProcs = 1024

// Boundary is what one run may reach.
type Boundary struct {
	// Writable directories (or files, such as a socket): the run's working
	// directory and its profile home first.
	Writable []string
	// ReadOnly directories beyond the system ones and the PATH's.
	ReadOnly []string
	// Network is NetworkHost or NetworkNone ("" is host).
	Network string
	// MaxProcs is the process-count limit; 0 is DefaultMaxProcs.
	MaxProcs int
	// Name names what the runner makes for the run (the run's ref): the
	// container runner's containers are olivares-run-<Name>-<random>.
	Name string
	// terminal: the inner runner gives the child a terminal (pty).
	terminal bool
}

// systemDirs are visible read-only in every sandbox, when the host has
// them: the programs and libraries the vendor CLIs run with, and /etc for
// name resolution and certificates. /var, /run, /home, /root, /srv and
// /tmp are not.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix"}

// passSignals are the signals the sandbox's outer processes ignore, so that
// a signal to the run's process group reaches the tool alone and the exit
// observed is the tool's (bubblewrap forwards none).
const passSignals = "TERM,INT,HUP,QUIT"

// Sandbox is the bubblewrap runner of isolation=sandbox.
type Sandbox struct {
	bwrap, env, sh, prlimit string
	// cgroup is the directory runs' pid cgroups are made in; "" when the
	// limit is an rlimit in a user namespace (an unprivileged agent).
	cgroup string
	// v2: cgroup is on the unified hierarchy.
	v2 bool
}

// DetectSandbox finds bubblewrap and the process limit this node can hold,
// and runs one contained `true` to prove they work. The error says why
// sandbox is not available, in words for the node's capabilities.
func DetectSandbox(ctx context.Context) (*Sandbox, error) {
	sb := &Sandbox{}
	for _, t := range []struct {
		p    *string
		name string
	}{{&sb.bwrap, "bwrap"}, {&sb.env, "env"}, {&sb.sh, "sh"}, {&sb.prlimit, "prlimit"}} {
		p, err := exec.LookPath(t.name)
		if err != nil {
			if t.name == "bwrap" {
				return nil, errors.New("bubblewrap (bwrap) is not installed; install the bubblewrap package")
			}
			return nil, fmt.Errorf("%s is not installed", t.name)
		}
		*t.p = p
	}
	if os.Geteuid() == 0 {
		// Root is exempt from RLIMIT_NPROC: the limit needs a pids cgroup.
		if err := sb.findCgroup(); err != nil {
			return nil, fmt.Errorf("the agent runs as root and cannot hold a process limit: %v", err)
		}
	}
	dir, err := os.MkdirTemp("", "olivares-sandbox-probe-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	trueBin, err := exec.LookPath("true")
	if err != nil {
		return nil, errors.New("true is not installed")
	}
	spec, cleanup, err := sb.Wrap(sessions.Spec{Path: trueBin, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}}, Boundary{Writable: []string{dir}, Network: NetworkNone})
	if err != nil {
		return nil, err
	}
	defer cleanup()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, spec.Path, spec.Args...)
	cmd.Env, cmd.Dir = spec.Env, spec.Dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("a contained probe (bwrap … true) failed: %s", firstLine(out, err))
	}
	return sb, nil
}

// findCgroup finds a pids cgroup hierarchy the agent can make groups in.
func (sb *Sandbox) findCgroup() error {
	if st, err := os.Stat("/sys/fs/cgroup/pids"); err == nil && st.IsDir() {
		sb.cgroup = "/sys/fs/cgroup/pids/olivares"
	} else if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(" "+string(b)+" ", " pids") {
		sb.cgroup, sb.v2 = "/sys/fs/cgroup/olivares", true
	} else {
		return errors.New("no pids cgroup controller is mounted")
	}
	if err := os.MkdirAll(sb.cgroup, 0o755); err != nil {
		return fmt.Errorf("cannot create %s: %v", sb.cgroup, err)
	}
	// The cgroups of runs whose agent was killed stay behind, empty: remove
	// those older than a minute (a new one is joined at once; the kernel
	// refuses to remove one that holds a process).
	if es, err := os.ReadDir(sb.cgroup); err == nil {
		for _, e := range es {
			if fi, err := e.Info(); err == nil && e.IsDir() && strings.HasPrefix(e.Name(), "run-") && time.Since(fi.ModTime()) > time.Minute {
				os.Remove(filepath.Join(sb.cgroup, e.Name()))
			}
		}
	}
	if sb.v2 {
		for _, d := range []string{filepath.Dir(sb.cgroup), sb.cgroup} {
			if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+pids"), 0); err != nil {
				return fmt.Errorf("cannot enable the pids controller in %s: %v", d, err)
			}
		}
	}
	return nil
}

// Wrap rewrites s into the contained launch of the same program: bwrap
// with the boundary's mounts, and around it the process limit. cleanup
// removes what Wrap made (a run's cgroup); call it once the child ended.
func (sb *Sandbox) Wrap(s sessions.Spec, b Boundary) (sessions.Spec, func(), error) {
	max := b.MaxProcs
	if max <= 0 {
		max = DefaultMaxProcs
	}
	args := []string{"--ignore-signal=" + passSignals, sb.bwrap,
		"--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"}
	switch b.Network {
	case "", NetworkHost:
	case NetworkNone:
		args = append(args, "--unshare-net")
	default:
		return sessions.Spec{}, nil, fmt.Errorf("network %q: use host or none", b.Network)
	}
	if sb.cgroup == "" {
		// RLIMIT_NPROC counts per user and user namespace: in a namespace
		// of its own the run's processes are the only ones counted.
		args = append(args, "--unshare-user")
	}
	for _, m := range mounts(s, b) {
		switch m.kind {
		case mountSymlink:
			args = append(args, "--symlink", m.src, m.dst)
		case mountRO:
			args = append(args, "--ro-bind", m.src, m.dst)
		case mountRW:
			args = append(args, "--bind", m.src, m.dst)
		}
	}
	if s.Dir != "" {
		args = append(args, "--chdir", s.Dir)
	}
	args = append(args, "--")
	if sb.cgroup == "" {
		args = append(args, sb.prlimit, "--nproc="+strconv.Itoa(max), "--")
	}
	args = append(args, sb.env, "--default-signal="+passSignals, s.Path)
	args = append(args, s.Args...)
	out := sessions.Spec{Path: sb.env, Args: args, Env: s.Env, Dir: s.Dir}
	if sb.cgroup == "" {
		return out, func() {}, nil
	}
	cg, err := sb.newCgroup(max)
	if err != nil {
		return sessions.Spec{}, nil, err
	}
	// The shell joins the cgroup and becomes env, then bwrap: every process
	// of the run is born inside it.
	out.Path = sb.sh
	out.Args = append([]string{"-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(cg, "cgroup.procs"), sb.env}, args...)
	return out, func() { removeCgroup(cg) }, nil
}

// removeCgroup removes a run's cgroup once its last process is released:
// the kernel refuses (EBUSY) while an exited one is still counted.
func removeCgroup(cg string) {
	for i := 0; os.Remove(cg) != nil && i < 50; i++ {
		if _, err := os.Stat(cg); err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newCgroup makes a run's pids cgroup with its limit.
func (sb *Sandbox) newCgroup(max int) (string, error) {
	var b [8]byte
	rand.Read(b[:])
	cg := filepath.Join(sb.cgroup, "run-"+hex.EncodeToString(b[:]))
	if err := os.Mkdir(cg, 0o755); err != nil {
		return "", fmt.Errorf("sandbox: make the run's cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cg, "pids.max"), []byte(strconv.Itoa(max)), 0); err != nil {
		os.Remove(cg)
		return "", fmt.Errorf("sandbox: set the run's process limit: %w", err)
	}
	return cg, nil
}

// mountKind is how a path of the host appears inside a boundary.
type mountKind int

const (
	mountRO      mountKind = iota // bound read-only
	mountRW                       // bound writable
	mountSymlink                  // a link to src (a merged-/usr host's /bin)
)

// mount is one entry of a run's view of the filesystem, the same for every
// isolating runner: dst shows the host's src (or links to it).
type mount struct {
	kind     mountKind
	src, dst string
}

// mounts is everything a child launched with s inside b sees of the host,
// in order: the system directories and the PATH's read-only, the
// boundary's read-only ones, then its writable ones (a later mount
// covers an earlier one, and replaces one of the same path: a run in its
// profile home). Paths that do not exist are left out.
func mounts(s sessions.Spec, b Boundary) []mount {
	var out []mount
	bind := func(k mountKind, p string) {
		if p = filepath.Clean(p); filepath.IsAbs(p) && p != "/" {
			if _, err := os.Stat(p); err == nil {
				out = slices.DeleteFunc(out, func(m mount) bool { return m.dst == p })
				out = append(out, mount{kind: k, src: p, dst: p})
			}
		}
	}
	for _, d := range systemDirs {
		if fi, err := os.Lstat(d); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			// A merged-/usr host: /bin is a link to usr/bin.
			if t, err := os.Readlink(d); err == nil {
				out = append(out, mount{kind: mountSymlink, src: t, dst: d})
			}
			continue
		}
		bind(mountRO, d)
	}
	for _, d := range pathDirs(s.Env) {
		bind(mountRO, d)
	}
	for _, d := range b.ReadOnly {
		bind(mountRO, d)
	}
	for _, d := range b.Writable {
		bind(mountRW, d)
	}
	return out
}

// pathDirs are the directories of the PATH in env, each with the package
// tree its programs link into: npm's node_modules/.bin links into its
// parent, so the parent is what must be visible.
func pathDirs(env []string) []string {
	var out []string
	for i := len(env) - 1; i >= 0; i-- {
		v, ok := strings.CutPrefix(env[i], "PATH=")
		if !ok {
			continue
		}
		for _, d := range filepath.SplitList(v) {
			if !filepath.IsAbs(d) {
				continue
			}
			if filepath.Base(d) == ".bin" {
				d = filepath.Dir(d)
			}
			out = append(out, d)
		}
		break
	}
	return out
}

func firstLine(out []byte, err error) string {
	if l, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n"); l != "" {
		return l
	}
	return err.Error()
}

// Runner wraps inner so that each child it starts runs inside b.
func (sb *Sandbox) Runner(inner sessions.Runner, b Boundary) sessions.Runner {
	return runner{w: sb, inner: inner, b: b}
}

// wrapper is an isolating runner's rewrite of a launch.
type wrapper interface {
	Wrap(s sessions.Spec, b Boundary) (sessions.Spec, func(), error)
}

type runner struct {
	w     wrapper
	inner sessions.Runner
	b     Boundary
}

// Name is the inner runner's: the output stream tag follows it (R-TR-9).
func (r runner) Name() string { return r.inner.Name() }

// Wrap is the contained launch of s, for a spawner other than the inner
// runner (the agent's holder); cleanup releases what the boundary made
// once the child has gone.
func (r runner) Wrap(s sessions.Spec) (sessions.Spec, func(), error) {
	b := r.b
	b.terminal = r.inner.Name() == "pty"
	return r.w.Wrap(s, b)
}

func (r runner) Start(ctx context.Context, s sessions.Spec) (sessions.Process, error) {
	ws, cleanup, err := r.Wrap(s)
	if err != nil {
		return nil, err
	}
	p, err := r.inner.Start(ctx, ws)
	if err != nil {
		cleanup()
		return nil, err
	}
	go func() {
		<-p.Done()
		cleanup()
	}()
	return p, nil
}

// GitWorktree is what a run in a linked git worktree (R-WT-1) needs of its
// repository for git to work inside the boundary: the repository's git
// directory read-only, so that no hook or config can be planted there and
// later run outside, and writable only where commits go: objects, refs,
// logs and the worktree's own administrative directory. dir that is not a
// linked worktree needs nothing.
func GitWorktree(dir string) (readOnly, writable []string) {
	b, err := os.ReadFile(filepath.Join(dir, ".git"))
	if err != nil {
		return nil, nil
	}
	admin, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return nil, nil
	}
	if !filepath.IsAbs(admin) {
		admin = filepath.Join(dir, admin)
	}
	common := filepath.Join(admin, "..", "..")
	if c, err := os.ReadFile(filepath.Join(admin, "commondir")); err == nil {
		if common = strings.TrimSpace(string(c)); !filepath.IsAbs(common) {
			common = filepath.Join(admin, common)
		}
	}
	common = filepath.Clean(common)
	return []string{common}, []string{filepath.Join(common, "objects"), filepath.Join(common, "refs"),
		filepath.Join(common, "logs"), filepath.Clean(admin)}
}
