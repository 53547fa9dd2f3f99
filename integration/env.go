// Package integration runs real daemons on loopback: a coordinator with its
// store (the bbolt file, or PostgreSQL with Options.Postgres), CA and tunnel
// listeners, and N agents enrolled through the real join-token flow, each
// with its own state dir and socket. Tests wait with Await* helpers that
// have deadlines; nothing sleeps.
package integration

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/agentd"
	agentenroll "github.com/olivares-dev/olivares/agent/enroll"
	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/coordinator/fleet"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration/contract"
	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/sse"
)

// Tenant is the env's default tenant.
const Tenant = "default"

// Options shape an Env.
type Options struct {
	// DisableQUIC starts the coordinator without its UDP listener.
	DisableQUIC bool
	// NodeCertValidity: when zero, the default (7 days).
	NodeCertValidity time.Duration
	// Heartbeat: when zero, 500ms (tests want fast detection).
	Heartbeat time.Duration
	// Now is the API's clock; when nil, time.Now (R-SNZ-5 tests move it).
	Now func() time.Time
	// Postgres is the DSN of a PostgreSQL database (pgtest.NewDatabase)
	// for the coordinator's store; when empty, the bbolt file in its state
	// dir.
	Postgres string
	// Configure, when set, changes the coordinator's config before it
	// starts (an [oidc] table, TLS files, attach limits, a metrics token).
	Configure func(*coordd.Config)
	// Unchecked sends the harness's API traffic without the check against
	// openapi.yaml: for the benchmarks only, where the check would be timed
	// with what they measure.
	Unchecked bool
}

// Env is one coordinator and its agents.
type Env struct {
	t    testing.TB
	Dir  string
	opts Options

	mu     sync.Mutex
	Coord  *coordd.Coordinator
	cancel context.CancelFunc
	cfg    coordd.Config
	// AdminToken is an admin of Tenant.
	AdminToken string
	agents     []*Agent
	procs      []*AgentProc
	replicas   []*Replica
	principals int

	// http carries every API request of the harness, and checkEvent (when
	// not nil) sees every SSE event an attach reads: see HTTPClient.
	http       *http.Client
	checkEvent func(*http.Request, sse.Event) error
	// checked is CheckedURL's proxy, once asked for.
	checked string

	// logs holds every daemon line (Logs).
	logs *logCapture
}

// NewEnv starts a coordinator on 127.0.0.1 with plain HTTP for the API.
func NewEnv(t testing.TB, o ...Options) *Env {
	t.Helper()
	var opts Options
	if len(o) > 0 {
		opts = o[0]
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = 500 * time.Millisecond
	}
	dir := shortTempDir(t)
	e := &Env{t: t, Dir: dir, opts: opts, logs: &logCapture{t: t}}
	// The one place where the harness's API traffic goes out: every
	// request and answer, and each SSE event as an attach reads it, is
	// checked against openapi.yaml (integration/contract), except for the
	// benchmarks, whose timings the check would be part of.
	var rt http.RoundTripper = http.DefaultTransport.(*http.Transport).Clone()
	if !opts.Unchecked {
		rt = contract.Transport(t, rt)
		e.checkEvent = contract.EventCheck(t)
	}
	e.http = &http.Client{Transport: rt}
	cfg := coordd.DefaultConfig()
	cfg.StateDir = filepath.Join(dir, "coord")
	cfg.API.Plain = true
	cfg.Tunnel.DisableQUIC = opts.DisableQUIC
	cfg.Tunnel.Heartbeat.Duration = opts.Heartbeat
	cfg.Now = opts.Now
	if opts.Postgres != "" {
		cfg.Store.Driver, cfg.Store.DSN = coordd.DriverPostgres, opts.Postgres
		cfg.Replica.ID = "replica-a"
		cfg.Replica.Heartbeat.Duration, cfg.Replica.TTL.Duration = ReplicaHeartbeat, ReplicaTTL
	}
	if opts.NodeCertValidity != 0 {
		cfg.PKI.NodeCertValidity.Duration = opts.NodeCertValidity
	}
	// The harness's webhook and push receivers listen on loopback, which
	// the coordinator refuses unless its operator allows it (R-NOTIF-9).
	cfg.Outbound.Allow = []string{"127.0.0.1/32", "::1/128"}
	if opts.Configure != nil {
		opts.Configure(&cfg)
	}
	// Another test may take a port between freePort and the listen: pick
	// again then.
	var err error
	for range 5 {
		cfg.API.Listen, cfg.Tunnel.Listen, cfg.Metrics.Listen = freePort(t), freePort(t), freePort(t)
		if opts.Postgres != "" {
			cfg.Replica.Listen = freePort(t)
		}
		e.cfg = cfg
		if err = e.tryStart(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := e.Coord.CreatePrincipal(context.Background(), Tenant, "admin", store.RoleAdmin, store.KindHuman)
	if err != nil {
		t.Fatal(err)
	}
	e.AdminToken = tok
	e.NoteSecret(tok)
	t.Cleanup(e.close)
	return e
}

// freePort returns a loopback address whose port is free on TCP and UDP and
// lies below Linux's ephemeral range (32768-60999): a restarted coordinator
// must get its ports back, and an outgoing connection elsewhere in the test
// run could otherwise be holding an ephemeral one.
func freePort(t testing.TB) string {
	t.Helper()
	for range 200 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+mrand.IntN(12000))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		pc, err := net.ListenPacket("udp", addr)
		ln.Close()
		if err != nil {
			continue
		}
		pc.Close()
		return addr
	}
	t.Fatal("no free port below the ephemeral range")
	return ""
}

// shortTempDir keeps unix socket paths under the 108-byte limit.
func shortTempDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "olv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func (e *Env) startCoordinator() {
	e.t.Helper()
	if err := e.tryStart(); err != nil {
		e.t.Fatal(err)
	}
}

func (e *Env) tryStart() error {
	c, err := coordd.New(e.cfg, e.logs.logger())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Start(ctx); err != nil {
		cancel()
		c.Close()
		return err
	}
	// Later restarts reuse the same ports.
	e.cfg.API.Listen = strings.TrimPrefix(strings.TrimPrefix(c.APIURL(), "http://"), "https://")
	e.cfg.Tunnel.Listen = c.TunnelAddr()
	if a := c.RelayAddr(); a != "" {
		e.cfg.Replica.Listen = a
	}
	e.mu.Lock()
	e.Coord, e.cancel = c, cancel
	e.mu.Unlock()
	return nil
}

// RestartCoordinator stops the coordinator and starts it again on the same
// state dir and ports.
func (e *Env) RestartCoordinator() {
	e.t.Helper()
	e.mu.Lock()
	c, cancel := e.Coord, e.cancel
	e.mu.Unlock()
	cancel()
	if err := c.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.startCoordinator()
}

// CrashCoordinator stops the coordinator as kill -9 would look to its
// agents (no QUIC goodbye) and starts it again on the same state dir and
// ports.
func (e *Env) CrashCoordinator() {
	e.t.Helper()
	e.mu.Lock()
	c, cancel := e.Coord, e.cancel
	e.mu.Unlock()
	if err := c.Crash(); err != nil {
		e.t.Fatal(err)
	}
	cancel()
	e.startCoordinator()
}

func (e *Env) close() {
	for _, a := range e.agents {
		a.Stop()
	}
	for _, r := range e.replicas {
		r.stop()
	}
	e.http.CloseIdleConnections()
	e.mu.Lock()
	c, cancel := e.Coord, e.cancel
	e.mu.Unlock()
	cancel()
	c.Close()
}

// Fleet returns the current coordinator's fleet.
func (e *Env) Fleet() *fleet.Fleet {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.Coord.Fleet
}

// MetricsURL is the coordinator's /metrics URL on its metrics listener.
func (e *Env) MetricsURL() string { return e.Coord.MetricsURL() }

// APIURL is the API base URL.
func (e *Env) APIURL() string { return e.Coord.APIURL() }

// CheckedURL is the API behind a proxy that checks every exchange against
// openapi.yaml (issue 17), for clients the test runs as a process of their
// own (the olivares binary); one proxy per env, across coordinator
// restarts (same address).
func (e *Env) CheckedURL() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.checked == "" {
		e.checked = contract.Proxy(e.t, e.Coord.APIURL())
	}
	return e.checked
}

// TunnelAddr is what agents dial.
func (e *Env) TunnelAddr() string { return e.Coord.TunnelAddr() }

// Principal creates a principal and returns its token.
func (e *Env) Principal(tenant, role, kind string) string {
	e.t.Helper()
	// Names are unique in a tenant (R-LIFE-4): each gets its own.
	e.mu.Lock()
	e.principals++
	name := fmt.Sprintf("p-%s-%d", role, e.principals)
	e.mu.Unlock()
	tok, _, err := e.Coord.CreatePrincipal(context.Background(), tenant, name, role, kind)
	if err != nil {
		e.t.Fatal(err)
	}
	e.NoteSecret(tok)
	return tok
}

// PrincipalNamed creates a principal with a name and returns its id and
// first (session) token.
func (e *Env) PrincipalNamed(tenant, name, role, kind string) (id, token string) {
	e.t.Helper()
	tok, p, err := e.Coord.CreatePrincipal(context.Background(), tenant, name, role, kind)
	if err != nil {
		e.t.Fatal(err)
	}
	e.NoteSecret(tok)
	return p.ID, tok
}

// Credential gives principal id another token of kind (store.CredSession
// or store.CredAPIToken) and returns it.
func (e *Env) Credential(id, kind string) string {
	e.t.Helper()
	tok, _, err := e.Coord.AddCredential(context.Background(), id, kind, "test")
	if err != nil {
		e.t.Fatal(err)
	}
	e.NoteSecret(tok)
	return tok
}

// AgentOptions shape one agent.
type AgentOptions struct {
	// Transport: when empty, "auto".
	Transport string
	// Container: as ProcOptions.Container.
	Container bool
	// Tenant: when empty, Tenant.
	Tenant string
	// QUICRetry: when zero, 30s.
	QUICRetry time.Duration
	// Coordinators, when set, are the tunnel addresses the agent dials (a
	// list of replicas); it enrolls through the env's coordinator either way.
	Coordinators []string
}

// Agent is one running agent.
type Agent struct {
	env    *Env
	ID     string
	Dir    string
	Daemon *agentd.Agent
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// StartAgent enrolls a new node through the real flow (join token over the
// TLS enrollment protocol, pin checked) and runs its agent.
func (e *Env) StartAgent(o ...AgentOptions) *Agent {
	e.t.Helper()
	var opts AgentOptions
	if len(o) > 0 {
		opts = o[0]
	}
	if opts.Tenant == "" {
		opts.Tenant = Tenant
	}
	ctx := context.Background()
	iss, err := e.Coord.Enroll.CreateToken(ctx, opts.Tenant, map[string]string{"test": "true"}, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	e.NoteSecret(iss.Token)
	dir := filepath.Join(e.Dir, fmt.Sprintf("a%d", len(e.agents)))
	if _, err := agentenroll.Enroll(ctx, agentenroll.Options{Coordinator: e.TunnelAddr(), Token: iss.Token, CAPin: iss.CAPin, StateDir: dir}); err != nil {
		e.t.Fatal(err)
	}
	cfg := agentd.DefaultConfig()
	cfg.StateDir = dir
	cfg.Transport = opts.Transport
	cfg.Coordinator = opts.Coordinators
	cfg.Path = os.Getenv("PATH")
	if !opts.Container {
		cfg.Isolation.Container = agentd.ContainerOff
	}
	if opts.QUICRetry != 0 {
		cfg.Tunnel.QUICRetry.Duration = opts.QUICRetry
	}
	d, err := agentd.New(cfg, e.logs.logger())
	if err != nil {
		e.t.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	a := &Agent{env: e, ID: d.NodeID(), Dir: dir, Daemon: d, cancel: cancel, done: make(chan error, 1)}
	go func() { a.done <- d.Run(actx) }()
	e.agents = append(e.agents, a)
	return a
}

// Stop stops the agent and waits for it.
func (a *Agent) Stop() {
	a.once.Do(func() {
		a.cancel()
		<-a.done
	})
}

// Await polls cond until it holds or d passes.
func Await(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		<-tick.C
	}
}

// AwaitConnected waits until the coordinator has a live tunnel from a.
func (a *Agent) AwaitConnected(d time.Duration) fleet.Link {
	a.env.t.Helper()
	var l fleet.Link
	Await(a.env.t, d, "node "+a.ID+" to connect", func() bool {
		l = a.env.Fleet().Link(a.ID)
		return l.Connected && a.Daemon.Link().State == "connected"
	})
	return l
}

// AwaitTransport waits until a is connected over transport.
func (a *Agent) AwaitTransport(transport string, d time.Duration) {
	a.env.t.Helper()
	Await(a.env.t, d, "node "+a.ID+" over "+transport, func() bool {
		l := a.env.Fleet().Link(a.ID)
		return l.Connected && l.Transport == transport
	})
}

// AwaitDisconnected waits until the coordinator has no live tunnel from a.
func (a *Agent) AwaitDisconnected(d time.Duration) {
	a.env.t.Helper()
	Await(a.env.t, d, "node "+a.ID+" to disconnect", func() bool { return !a.env.Fleet().Link(a.ID).Connected })
}

// Response is an API answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// ErrorCode returns the R-API-4 error code of the body, if any.
func (r Response) ErrorCode() string {
	var b struct {
		Error struct{ Code string } `json:"error"`
	}
	json.Unmarshal(r.Body, &b)
	return b.Error.Code
}

// HTTPClient is the one *http.Client every API request of the harness goes
// through: Client.Call and Must, Env.Do, attach streams, and the
// benchmarks' calls. It has no timeout: calls and streams are bounded by
// their tests' deadlines.
func (e *Env) HTTPClient() *http.Client { return e.http }

// API is the API client of the env for token in tenant ("" sends no
// header), over HTTPClient.
func (e *Env) API(token, tenant string) *apiclient.Client {
	return apiclient.New(apiclient.Config{URL: e.APIURL(), Token: token, Tenant: tenant,
		HTTPClient: e.http, CheckEvent: e.checkEvent})
}

// call sends one request through c and fails the test when no answer
// comes.
func (e *Env) call(c *apiclient.Client, method, path string, body any, hdr http.Header) Response {
	e.t.Helper()
	r, err := c.Do(context.Background(), method, path, body, hdr)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return Response{Status: r.Status, Header: r.Header, Body: r.Body}
}

// Do calls the API. token "" sends no Authorization; tenant "" no tenant header.
func (e *Env) Do(method, path, token, tenant string) Response {
	e.t.Helper()
	return e.call(e.API(token, tenant), method, path, nil, nil)
}

// RestartCoordinatorWith stops the coordinator, runs fn on its state dir
// while it is down (a CA rotation, say), and starts it again.
func (e *Env) RestartCoordinatorWith(fn func(stateDir string)) {
	e.t.Helper()
	e.mu.Lock()
	c, cancel := e.Coord, e.cancel
	e.mu.Unlock()
	cancel()
	if err := c.Close(); err != nil {
		e.t.Fatal(err)
	}
	fn(e.cfg.StateDir)
	e.startCoordinator()
}

// RestartOnPostgres stops the coordinator, runs fn with the path of its
// bbolt file while it is down (olivares-coordinator migrate, say), and
// starts it again on the PostgreSQL database dsn with the same state dir
// (CA, vault key) and ports.
func (e *Env) RestartOnPostgres(dsn string, fn func(boltFile string)) {
	e.t.Helper()
	e.mu.Lock()
	c, cancel := e.Coord, e.cancel
	e.mu.Unlock()
	cancel()
	if err := c.Close(); err != nil {
		e.t.Fatal(err)
	}
	fn(filepath.Join(e.cfg.StateDir, coordd.StoreFile))
	e.cfg.Store.Driver, e.cfg.Store.DSN = coordd.DriverPostgres, dsn
	e.startCoordinator()
}

// TrustPool returns the CA bundle the agent trusts now.
func (a *Agent) TrustPool() *x509.CertPool { return a.Daemon.TrustPool() }

// ProfileHome returns a new, empty directory for a profile's home under the
// env's own directory, which is removed only after every agent and holder of
// the env has ended: a tool still writing into a home under t.TempDir()
// (removed before them) fails the test's cleanup.
func (e *Env) ProfileHome() string {
	e.t.Helper()
	d, err := os.MkdirTemp(e.Dir, "home-")
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}
