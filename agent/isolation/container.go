package isolation

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/olivares-dev/olivares/agent/sessions"
)

// ContainerPrefix begins the name of every container the container runner
// makes: olivares-run-<run ref>-<random>.
const ContainerPrefix = "olivares-run-"

// containerLabel marks an agent's containers with the runner's directory
// (in the agent's state directory), so that an agent removes only its own
// leftovers.
const containerLabel = "olivares.root"

// Container is the podman runner of isolation=container. It needs no
// image: each container starts from an empty, read-only root directory
// with the same mounts as the sandbox (the host's system directories
// read-only, the run's writable ones), so the host's CLIs run unchanged
// and offline.
type Container struct {
	engine, sh string
	// runtime is the OCI runtime podman is told to use ("" its default):
	// the first one whose contained probe ran.
	runtime string
	// dir is the runner's directory; root, in it, the containers' root.
	dir, root string
	// nofile is the agent's own RLIMIT_NOFILE (soft:hard), nprocHard its
	// RLIMIT_NPROC hard limit: podman's defaults ask for more, which
	// fails without CAP_SYS_RESOURCE.
	nofile    string
	nprocHard uint64
	// ready is closed once detection has ended; err is why the runner
	// does not work here, nil when it does.
	ready chan struct{}
	err   error
}

// StartContainer begins detecting the container runner in the background
// (an agent's start does not wait for podman); Err waits for the outcome.
// dir is the runner's own directory in the agent's state directory.
func StartContainer(ctx context.Context, dir string) *Container {
	c := &Container{dir: filepath.Clean(dir), ready: make(chan struct{})}
	c.root = filepath.Join(c.dir, "root")
	go func() {
		defer close(c.ready)
		c.err = c.detect(ctx)
	}()
	return c
}

// ContainerOff is a runner that does not run: detection skipped, every
// Err is why.
func ContainerOff(why string) *Container {
	c := &Container{ready: make(chan struct{}), err: errors.New(why)}
	close(c.ready)
	return c
}

// DetectContainer is StartContainer, waited for: the runner, or why it
// does not work here.
func DetectContainer(ctx context.Context, dir string) (*Container, error) {
	c := StartContainer(ctx, dir)
	if err := c.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// Err waits for detection and says why container is not available, in
// words for the node's capabilities; nil when it is.
func (c *Container) Err() error {
	<-c.ready
	return c.err
}

// detect finds podman and an OCI runtime it runs a contained `true` with
// here (its default, then runc), and removes the containers a previous
// agent on the runner's directory left behind with nobody attached.
func (c *Container) detect(ctx context.Context) error {
	engine, err := exec.LookPath("podman")
	if err != nil {
		if d, err := exec.LookPath("docker"); err == nil {
			return fmt.Errorf("found %s, but the container runner needs podman (docker cannot start a container from the host's directories without an image); install podman", d)
		}
		return errors.New("neither podman nor docker is installed; install podman (and runc)")
	}
	c.engine = engine
	if c.sh, err = exec.LookPath("sh"); err != nil {
		return errors.New("sh is not installed")
	}
	if strings.ContainsAny(c.dir, ",=") {
		return fmt.Errorf("the agent's state directory %s has a comma or an equals sign, which podman's mount syntax cannot take", c.dir)
	}
	if err := os.MkdirAll(c.root, 0o755); err != nil {
		return fmt.Errorf("cannot create the containers' root %s: %v", c.root, err)
	}
	var nofile, nproc syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile); err != nil {
		return err
	}
	if err := syscall.Getrlimit(6 /* RLIMIT_NPROC */, &nproc); err != nil {
		return err
	}
	c.nofile, c.nprocHard = fmt.Sprintf("%d:%d", nofile.Cur, nofile.Max), nproc.Max
	trueBin, err := exec.LookPath("true")
	if err != nil {
		return errors.New("true is not installed")
	}
	probe, err := os.MkdirTemp(c.dir, "probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(probe)
	runtimes := []string{""}
	if _, err := exec.LookPath("runc"); err == nil {
		runtimes = append(runtimes, "runc")
	}
	var why []string
	for _, rt := range runtimes {
		c.runtime = rt
		err := c.probe(ctx, trueBin, probe)
		if err == nil {
			c.removeLeftovers(ctx)
			return nil
		}
		name := "its default runtime"
		if rt != "" {
			name = rt
		}
		why = append(why, "with "+name+": "+err.Error())
	}
	if len(runtimes) == 1 {
		why = append(why, "runc, which runs where crun does not (cgroup v1 hybrid hosts), is not installed")
	}
	return fmt.Errorf("podman runs no container here (%s)", strings.Join(why, "; "))
}

// probe runs one contained true.
func (c *Container) probe(ctx context.Context, trueBin, dir string) error {
	spec, cleanup, err := c.wrap(sessions.Spec{Path: trueBin, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}},
		Boundary{Writable: []string{dir}, Network: NetworkNone, Name: "probe"})
	if err != nil {
		return err
	}
	defer cleanup()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, spec.Path, spec.Args...)
	cmd.Env, cmd.Dir = spec.Env, spec.Dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return errors.New(firstLine(out, err))
	}
	return nil
}

// podman is the engine's command line with the runtime chosen, and no
// event log (its writes cost a start about a sixth here; the agent's
// ledger records the run).
func (c *Container) podman(args ...string) []string {
	args = append([]string{"--events-backend=none"}, args...)
	if c.runtime != "" {
		args = append([]string{"--runtime", c.runtime}, args...)
	}
	return args
}

// Wrap rewrites s into `podman run … --rootfs <root> program args`: the
// boundary's mounts on the empty read-only root, a private /tmp, pid,
// IPC and UTS namespaces, the process limit as a pids cgroup and an
// rlimit, the network of the boundary, and s's environment passed by name
// (the values reach podman in its environment, never on its command
// line). The child's stdio are the launch's own pipes, handed into the
// container (a terminal is podman's, -t); signals to podman reach the tool
// through podman's proxy and the container's init. cleanup removes the
// container if it outlived podman (a SIGKILL after the grace).
func (c *Container) Wrap(s sessions.Spec, b Boundary) (sessions.Spec, func(), error) {
	if err := c.Err(); err != nil {
		return sessions.Spec{}, nil, fmt.Errorf("isolation \"container\" does not work on this node: %w", err)
	}
	return c.wrap(s, b)
}

func (c *Container) wrap(s sessions.Spec, b Boundary) (sessions.Spec, func(), error) {
	max := b.MaxProcs
	if max <= 0 {
		max = DefaultMaxProcs
	}
	network := "host"
	switch b.Network {
	case "", NetworkHost:
	case NetworkNone:
		network = "none"
	default:
		return sessions.Spec{}, nil, fmt.Errorf("network %q: use host or none", b.Network)
	}
	nproc := uint64(max)
	if nproc > c.nprocHard {
		nproc = c.nprocHard
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	name := ContainerPrefix + containerName(b.Name) + "-" + hex.EncodeToString(rnd[:])
	args := c.podman("run", "--rm", "--init", "--read-only", "--name", name, "--label", containerLabel+"="+c.dir,
		"--network="+network, "--pids-limit", strconv.Itoa(max),
		"--ulimit", "nofile="+c.nofile, "--ulimit", fmt.Sprintf("nproc=%d:%d", nproc, nproc),
		"--user", fmt.Sprintf("%d:%d", os.Geteuid(), os.Getegid()),
		"--log-driver", "none", "--tmpfs", "/tmp:rw,exec,nosuid,nodev,mode=1777", "--unsetenv-all")
	if os.Geteuid() != 0 {
		// Rootless podman: the agent's uid inside is the agent's outside.
		args = append(args, "--userns=keep-id")
	}
	if b.terminal {
		args = append(args, "-i", "-t")
	} else {
		// The tool's stdio are the agent's own pipes, passed in as fds 3-5
		// (podman's attach would relay each byte through conmon).
		args = append(args, "--preserve-fds", "3")
	}
	for _, kv := range s.Env {
		if k, _, ok := strings.Cut(kv, "="); ok && k != "" {
			args = append(args, "--env", k)
		}
	}
	for _, m := range mounts(s, b) {
		if strings.ContainsAny(m.src, ",=") {
			return sessions.Spec{}, nil, fmt.Errorf("container: %s has a comma or an equals sign, which podman's mount syntax cannot take", m.src)
		}
		switch m.kind {
		case mountSymlink:
			// The root is the runner's own: the link is made there once.
			l := filepath.Join(c.root, m.dst)
			if _, err := os.Lstat(l); err != nil {
				if err := os.Symlink(m.src, l); err != nil && !os.IsExist(err) {
					return sessions.Spec{}, nil, fmt.Errorf("container: %v", err)
				}
			}
		case mountRO:
			args = append(args, "--mount", "type=bind,src="+m.src+",dst="+m.dst+",ro=true")
		case mountRW:
			args = append(args, "--mount", "type=bind,src="+m.src+",dst="+m.dst)
		}
	}
	if s.Dir != "" {
		args = append(args, "--workdir", s.Dir)
	}
	args = append(args, "--rootfs", c.root)
	if !b.terminal {
		args = append(args, c.sh, "-c", `exec "$0" "$@" <&3 >&4 2>&5 3<&- 4>&- 5>&-`)
	}
	args = append(append(args, s.Path), s.Args...)
	out := sessions.Spec{Path: c.engine, Args: args, Env: s.Env, Dir: s.Dir}
	if !b.terminal {
		// sh dups the pipes to fds 3-5 and becomes podman.
		out.Path, out.Args = c.sh, append([]string{"-c", `exec 3<&0 4>&1 5>&2 && exec "$0" "$@"`, c.engine}, args...)
	}
	return out, func() { c.remove(name) }, nil
}

// remove removes a container by name, stopping it at once if it runs; a
// container already gone is no error.
func (c *Container) remove(names ...string) {
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.engine, c.podman(append([]string{"rm", "--force", "--time", "0", "--ignore"}, names...)...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Run()
}

// removeLeftovers removes the containers of this runner's directory that
// no live podman client is attached to: a SIGKILL of podman (or of the
// agent) leaves its container running. A held run's podman lives on with
// its holder, and its container is kept.
func (c *Container) removeLeftovers(ctx context.Context) {
	cmd := exec.CommandContext(ctx, c.engine, c.podman("ps", "--all", "--filter", "label="+containerLabel+"="+c.dir, "--format", "{{.Names}}")...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		return
	}
	attached := map[string]bool{}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if _, rest, ok := bytes.Cut(b, []byte("\x00--name\x00"+ContainerPrefix)); ok {
			n, _, _ := bytes.Cut(rest, []byte{0})
			attached[ContainerPrefix+string(n)] = true
		}
	}
	var gone []string
	for _, n := range strings.Fields(string(out)) {
		if strings.HasPrefix(n, ContainerPrefix) && !attached[n] {
			gone = append(gone, n)
		}
	}
	c.remove(gone...)
}

// containerName is s with what a container name cannot hold replaced.
func containerName(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_' || ch == '.') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "run"
	}
	return string(b)
}

// Runner wraps inner so that each child it starts runs in a container
// inside b. A pty inner runner's children get a terminal of podman's
// (-t), which podman relays to the inner runner's.
func (c *Container) Runner(inner sessions.Runner, b Boundary) sessions.Runner {
	return runner{w: c, inner: inner, b: b}
}
