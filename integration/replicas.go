package integration

import (
	"context"
	"fmt"
	"github.com/olivares-dev/olivares/shared/logging"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/coordinator/fleet"
	"github.com/olivares-dev/olivares/coordinator/vault"
	"github.com/olivares-dev/olivares/shared/apiclient"
)

// Replica timings of the env's coordinators: fast, so that tests see a
// replica's view of the others within a fraction of a second.
const (
	ReplicaHeartbeat = 200 * time.Millisecond
	ReplicaTTL       = 2 * time.Second
)

// Replica is another coordinator on the env's PostgreSQL database (issue
// 24), with its own state dir and ports, and the CA and vault key of the
// env's coordinator, copied as an operator distributes them. The env's own
// coordinator is replica "replica-a".
type Replica struct {
	env *Env
	ID  string
	Dir string
	cfg coordd.Config

	mu     sync.Mutex
	coord  *coordd.Coordinator // in process
	cancel context.CancelFunc
	proc   *replicaProc // or a process of the real binary
	config string
}

// replicaProc is a replica's olivares-coordinator process.
type replicaProc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error // holds Wait's result once it exited (put back by readers)
}

// StartReplica starts a replica in this process. The env must be on
// PostgreSQL (Options.Postgres).
func (e *Env) StartReplica() *Replica {
	e.t.Helper()
	r := e.newReplica()
	if err := r.tryStart(); err != nil {
		e.t.Fatal(err)
	}
	return r
}

// StartReplicaProcess starts a replica from the real olivares-coordinator
// binary, so that a test can kill -9 it (Kill).
func (e *Env) StartReplicaProcess() *Replica {
	e.t.Helper()
	t, ok := e.t.(*testing.T)
	if !ok {
		e.t.Fatal("StartReplicaProcess needs a *testing.T")
	}
	r := e.newReplica()
	r.config = filepath.Join(r.Dir, "coordinator.toml")
	toml := fmt.Sprintf(`state_dir = %q
[api]
listen = %q
plain_http = true
[metrics]
listen = "off"
[tunnel]
listen = %q
disable_quic = %v
heartbeat = %q
[store]
driver = "postgres"
dsn = %q
[replica]
id = %q
listen = %q
heartbeat = %q
ttl = %q
`, r.cfg.StateDir, r.cfg.API.Listen, r.cfg.Tunnel.Listen, r.cfg.Tunnel.DisableQUIC, r.cfg.Tunnel.Heartbeat.Duration,
		r.cfg.Store.DSN, r.ID, r.cfg.Replica.Listen, r.cfg.Replica.Heartbeat.Duration, r.cfg.Replica.TTL.Duration)
	if err := os.WriteFile(r.config, []byte(toml), 0o600); err != nil {
		e.t.Fatal(err)
	}
	r.startProcess(t)
	return r
}

func (e *Env) newReplica() *Replica {
	e.t.Helper()
	if e.opts.Postgres == "" {
		e.t.Fatal("replicas share a PostgreSQL database: set Options.Postgres")
	}
	e.mu.Lock()
	n := len(e.replicas)
	e.mu.Unlock()
	id := fmt.Sprintf("replica-%c", 'b'+n)
	dir := filepath.Join(e.Dir, id)
	// The operator's step: the CA and the vault key are the first
	// replica's files.
	if err := copyPrivateDir(filepath.Join(e.cfg.StateDir, coordd.CADir), filepath.Join(dir, coordd.CADir)); err != nil {
		e.t.Fatal(err)
	}
	if err := copyPrivate(filepath.Join(e.cfg.StateDir, vault.KeyFile), filepath.Join(dir, vault.KeyFile)); err != nil {
		e.t.Fatal(err)
	}
	cfg := e.cfg
	cfg.StateDir = dir
	cfg.Replica.ID = id
	cfg.API.Listen, cfg.Tunnel.Listen, cfg.Metrics.Listen, cfg.Replica.Listen = freePort(e.t), freePort(e.t), "off", freePort(e.t)
	r := &Replica{env: e, ID: id, Dir: dir, cfg: cfg}
	e.mu.Lock()
	e.replicas = append(e.replicas, r)
	e.mu.Unlock()
	return r
}

func (r *Replica) tryStart() error {
	c, err := coordd.New(r.cfg, r.env.logs.logger().With(logging.KeyReplica, r.ID))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Start(ctx); err != nil {
		cancel()
		c.Close()
		return err
	}
	r.mu.Lock()
	r.coord, r.cancel = c, cancel
	r.mu.Unlock()
	return nil
}

func (r *Replica) startProcess(t *testing.T) {
	t.Helper()
	bin := filepath.Join(Binaries(t), "olivares-coordinator")
	cmd := exec.Command(bin, "serve", "--config", r.config)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + r.Dir}
	p := &replicaProc{cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
	// Ready once /readyz says so: the replica is registered.
	cl := apiclient.New(apiclient.Config{URL: r.APIURL(), HTTPClient: r.env.http})
	Await(t, 60*time.Second, r.ID+" ready", func() bool {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s exited: %v\n%s", r.ID, err, p.out)
		default:
		}
		resp, err := cl.Do(context.Background(), "GET", "/readyz", nil, nil)
		return err == nil && resp.Status == 200
	})
}

// Coord is the replica's coordinator when it runs in this process.
func (r *Replica) Coord() *coordd.Coordinator {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.coord
}

// Fleet is the in-process replica's fleet.
func (r *Replica) Fleet() *fleet.Fleet { return r.Coord().Fleet }

// APIURL is the replica's API base URL.
func (r *Replica) APIURL() string { return "http://" + r.cfg.API.Listen }

// TunnelAddr is what agents dial to reach this replica.
func (r *Replica) TunnelAddr() string { return r.cfg.Tunnel.Listen }

// API is a client of this replica's API, over the env's HTTP client.
func (r *Replica) API(token, tenant string) *apiclient.Client {
	return apiclient.New(apiclient.Config{URL: r.APIURL(), Token: token, Tenant: tenant,
		HTTPClient: r.env.http, CheckEvent: r.env.checkEvent})
}

// Kill ends the replica's process with SIGKILL: nothing of it runs after,
// no goodbye reaches its peers, its agents or the database.
func (r *Replica) Kill() {
	r.env.t.Helper()
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if p == nil {
		r.env.t.Fatal("Kill needs a replica process (StartReplicaProcess)")
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	err := <-p.done
	p.done <- err
}

// Restart starts the replica again on the same state dir and ports: a
// process after Kill or Stop, or in this process after Stop.
func (r *Replica) Restart() {
	r.env.t.Helper()
	r.stop()
	if r.config != "" {
		r.startProcess(r.env.t.(*testing.T))
		return
	}
	if err := r.tryStart(); err != nil {
		r.env.t.Fatal(err)
	}
}

// Stop stops the replica cleanly (it deregisters).
func (r *Replica) Stop() { r.stop() }

func (r *Replica) stop() {
	r.mu.Lock()
	c, cancel, p := r.coord, r.cancel, r.proc
	r.coord, r.cancel, r.proc = nil, nil, nil
	r.mu.Unlock()
	if c != nil {
		cancel()
		c.Close()
	}
	if p != nil {
		select {
		case err := <-p.done:
			p.done <- err
		default:
			p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-p.done:
				p.done <- err
			case <-time.After(15 * time.Second):
				p.cmd.Process.Kill()
				err := <-p.done
				p.done <- err
			}
		}
	}
}

// Output is what the replica's process printed.
func (r *Replica) Output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return ""
	}
	return r.proc.out.String()
}

func copyPrivateDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		return copyPrivate(p, to)
	})
}

func copyPrivate(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	return certs.WriteFileAtomic(dst, b, 0o600)
}
