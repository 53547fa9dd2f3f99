// Package pgtest runs a throwaway PostgreSQL cluster for tests: initdb in a
// temporary directory, the postgres server on a free loopback port as an
// unprivileged user, an empty database of its own for each test (new, or one
// an earlier test gave back, emptied), and the server stopped by its pid when
// the test binary ends.
//
// pgtest never touches a cluster it did not start, and it never installs
// anything: scripts/postgres does that. A package that uses Shared calls Main
// from its TestMain, so that the cluster is started at most once per test
// binary and stopped at its end.
package pgtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireEnv names the variable that makes a missing PostgreSQL a test
// failure instead of a skip. scripts/test sets it after scripts/postgres has
// installed the server, so the PostgreSQL half of the suite never goes
// missing silently.
const RequireEnv = "OLIVARES_REQUIRE_POSTGRES"

// installHint is what a person reads when the server is missing.
const installHint = "install it with: bash scripts/postgres (Debian's postgresql package)"

// startTimeout bounds initdb plus the server's start; a loaded 2-core CI
// machine needs more than a laptop.
const startTimeout = 2 * time.Minute

// ErrNotInstalled: no initdb and postgres binaries were found.
var ErrNotInstalled = errors.New("pgtest: PostgreSQL is not installed (no initdb and postgres on PATH or in /usr/lib/postgresql/*/bin)")

// Cluster is one running server of pgtest's.
type Cluster struct {
	// Host and Port are where the server listens (127.0.0.1 only).
	Host string
	Port int
	// User is the superuser (trust authentication on loopback).
	User string

	dir  string // removed by Stop
	cmd  *exec.Cmd
	done chan struct{} // closed when the server process has exited
	log  *tail

	mu      sync.Mutex
	admin   *pgx.Conn // to the "postgres" database, for CREATE DATABASE
	stopped bool
	nextDB  atomic.Int64
	free    []string // emptied databases that earlier tests gave back
}

// BinDir returns the directory that holds initdb and postgres: the one of
// initdb on PATH, else the newest /usr/lib/postgresql/N/bin (Debian keeps
// them off PATH).
func BinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if fileExists(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if fileExists(filepath.Join(d, "initdb")) && fileExists(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrNotInstalled
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// runAs is the unprivileged identity the server runs as: the caller itself,
// or, for root (which initdb refuses), the postgres system user.
type runAs struct {
	cred *syscall.Credential // nil: the caller
	name string
}

func unprivileged() (runAs, error) {
	if os.Geteuid() != 0 {
		u, _ := user.Current()
		name := "the current user"
		if u != nil {
			name = u.Username
		}
		return runAs{name: name}, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return runAs{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, name: name}, nil
	}
	return runAs{}, errors.New("pgtest: running as root and neither a postgres nor a nobody user exists to run the server as (initdb refuses root)")
}

// Start initialises a cluster in a new temporary directory and starts its
// server on a free loopback port. The server runs with fsync off: it is for
// tests and demos, and is thrown away by Stop. If the test binary dies
// without calling Stop, the server gets SIGQUIT from the kernel
// (parent-death signal) and exits too.
func Start(ctx context.Context) (*Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	as, err := unprivileged()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(tempParent(as), "olv-pg-")
	if err != nil {
		return nil, err
	}
	if as.cred != nil {
		if err := os.Chown(dir, int(as.cred.Uid), int(as.cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: as.cred}
	initdb.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb as %s: %w\n%s", as.name, err, out)
	}
	// Another process may take the port between the probe and the bind:
	// then the server exits at once and another port is tried.
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		c, err := startServer(ctx, bin, dir, data, port, as)
		if err == nil {
			return c, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// tempParent is where the cluster's directory goes: the usual temporary
// directory, unless the server runs as another user who could not reach it
// (a TMPDIR under root's home), then /tmp.
func tempParent(as runAs) string {
	dir := os.TempDir()
	if as.cred == nil {
		return dir
	}
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil || st.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return dir
		}
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// readyLine is what the server logs once it accepts connections
// (lc_messages=C keeps it in English).
const readyLine = "database system is ready to accept connections"

func startServer(ctx context.Context, bin, dir, data string, port int, as runAs) (*Cluster, error) {
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "lc_messages=C", "-c", "logging_collector=off",
		"-c", "log_min_messages=warning", "-c", "log_min_error_statement=panic")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: as.cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Host: "127.0.0.1", Port: port, User: "postgres", dir: dir, cmd: cmd, done: make(chan struct{}), log: &tail{}}
	ready := make(chan struct{})
	started := make(chan error, 1)
	// The parent-death signal fires when the thread that started the
	// child exits, so that thread is kept for the child's whole life.
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(c.done)
			return
		}
		started <- nil
		var once sync.Once
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			c.log.add(line)
			if strings.Contains(line, readyLine) {
				once.Do(func() { close(ready) })
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("pgtest: start postgres: %w", err)
	}
	select {
	case <-ready:
	case <-c.done:
		return nil, fmt.Errorf("pgtest: postgres on port %d exited during start:\n%s", port, c.log.String())
	case <-ctx.Done():
		c.kill()
		return nil, fmt.Errorf("pgtest: postgres on port %d not ready: %w\n%s", port, ctx.Err(), c.log.String())
	}
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		c.kill()
		return nil, fmt.Errorf("pgtest: connect: %w", err)
	}
	c.admin = admin
	return c, nil
}

// DSN returns the URL of database db on the cluster.
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", c.User, c.Host, c.Port, db)
}

// Pid is the server's process id.
func (c *Cluster) Pid() int { return c.cmd.Process.Pid }

// CreateDatabase creates a new, empty database and returns its name.
func (c *Cluster) CreateDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), c.nextDB.Add(1))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return "", errors.New("pgtest: the cluster is stopped")
	}
	if _, err := c.admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	return name, nil
}

// DropDatabase drops a database CreateDatabase made, closing its sessions.
func (c *Cluster) DropDatabase(ctx context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	_, err := c.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// NewDatabase gives t an empty database of its own and returns its DSN.
// Creating a database copies a template (a quarter of a second on a loaded
// CI machine), so one that an earlier test gave back is emptied and reused
// instead: its sessions are ended and its public schema dropped and made
// again, which leaves nothing of the earlier test. The database goes back
// when t ends.
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	c.mu.Lock()
	var name string
	if n := len(c.free); n > 0 {
		name, c.free = c.free[n-1], c.free[:n-1]
	}
	c.mu.Unlock()
	if name == "" {
		var err error
		if name, err = c.CreateDatabase(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.empty(ctx, name); err != nil {
			t.Logf("pgtest: database %s is dropped, not reused: %v", name, err)
			if err := c.DropDatabase(ctx, name); err != nil {
				t.Errorf("pgtest: drop database %s: %v", name, err)
			}
			return
		}
		c.mu.Lock()
		c.free = append(c.free, name)
		c.mu.Unlock()
	})
	return c.DSN(name)
}

// empty ends every session of database name and drops everything in it.
func (c *Cluster) empty(ctx context.Context, name string) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return errors.New("the cluster is stopped")
	}
	_, err := c.admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, c.DSN(name))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "DROP SCHEMA public CASCADE; CREATE SCHEMA public")
	return err
}

// Stop shuts the server down (fast shutdown: SIGINT to its pid), waits for
// it and removes its directory. It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	if c.admin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c.admin.Close(ctx)
		cancel()
	}
	c.mu.Unlock()
	c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.kill()
	}
	return os.RemoveAll(c.dir)
}

// kill ends the server at once (SIGKILL to its pid) and waits for it. The
// directory stays: Start may try another port in it.
func (c *Cluster) kill() {
	c.cmd.Process.Kill()
	<-c.done
}

// Log returns the server's last log lines.
func (c *Cluster) Log() string { return c.log.String() }

// tail keeps the last lines of the server's log for error messages.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (l *tail) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
	if len(l.lines) > 200 {
		l.lines = l.lines[len(l.lines)-200:]
	}
}

func (l *tail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// The cluster shared by the tests of one binary.
var shared struct {
	once    sync.Once
	cluster *Cluster
	err     error
}

// Shared returns the test binary's cluster, starting it on first use. When
// PostgreSQL is not installed the test is skipped with the install hint, or
// fails when RequireEnv is set (as under scripts/test). The package's
// TestMain must call Main, which stops it.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	shared.once.Do(func() {
		shared.cluster, shared.err = Start(context.Background())
	})
	switch {
	case errors.Is(shared.err, ErrNotInstalled) && os.Getenv(RequireEnv) != "1":
		t.Skipf("%v; %s (under scripts/test a missing PostgreSQL is a failure)", shared.err, installHint)
	case errors.Is(shared.err, ErrNotInstalled):
		t.Fatalf("%v; %s", shared.err, installHint)
	case shared.err != nil:
		t.Fatal(shared.err)
	}
	return shared.cluster
}

// NewDatabase is Shared(t).NewDatabase(t): the DSN of a fresh database on
// the shared cluster.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return Shared(t).NewDatabase(t)
}

// Main runs the tests and stops the shared cluster if a test started it.
// Use it as TestMain's body: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if shared.cluster != nil {
		if err := shared.cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: stop:", err)
		}
	}
	return code
}
