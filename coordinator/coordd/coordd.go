// Package coordd wires the coordinator's subsystems: store, CA, enrollment,
// fleet (tunnel listeners), the public API and the local admin socket. The
// whole composition is visible in New and Start.
//
// coordd is the only opener of the coordinator's bbolt file (and, for a
// moment before a migration, `olivares-coordinator migrate`, which refuses
// while coordd holds it).
package coordd

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/coordinator/accesslog"
	"github.com/olivares-dev/olivares/coordinator/api"
	"github.com/olivares-dev/olivares/coordinator/console"
	"github.com/olivares-dev/olivares/coordinator/enroll"
	"github.com/olivares-dev/olivares/coordinator/fleet"
	"github.com/olivares-dev/olivares/coordinator/sso"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/store/bolt"
	"github.com/olivares-dev/olivares/coordinator/store/postgres"
	"github.com/olivares-dev/olivares/coordinator/vault"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/cmdline"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/tunnel"
	"github.com/olivares-dev/olivares/shared/webpush"
)

// Version is the coordinator's version: the release of the three binaries
// (cmdline.Version, set at build time).
var Version = cmdline.Version

// File names under the state dir.
const (
	StoreFile  = "coordinator.db"
	CADir      = "ca"
	AdminSock  = "admin.sock"
	serverCert = "server"
)

// Coordinator is one running coordinator.
type Coordinator struct {
	cfg Config
	log *slog.Logger
	// metrics is the registry /metrics serves (R-OBS-7): one per
	// coordinator, so that coordinators in one process (tests) keep
	// their own.
	metrics   *prometheus.Registry
	Store     store.Store
	Authority *certs.Authority
	Enroll    *enroll.Server
	Fleet     *fleet.Fleet
	API       *api.Server
	// Console is the HTTP listener's handler: the web console at /, its
	// sign-in routes, and the API behind them.
	Console *console.Console
	// certs are the serving certificates, swapped whole by Reload.
	certs certSet

	apiLn net.Listener
	// metricsLn serves /metrics apart from the API (nil: metrics off).
	metricsLn    net.Listener
	metricsToken string
	msrv         *http.Server
	// resetKey is the QUIC stateless reset key, kept in the state dir so
	// that a restarted coordinator resets its predecessor's connections.
	resetKey [32]byte
	tcpLn    net.Listener
	udp      net.PacketConn
	admin    net.Listener
	// relay is the replica link's listener (nil unless on PostgreSQL).
	relay tunnel.Listener
	// replicas is the store's replica bookkeeping (nil on bbolt).
	replicas  store.Replicas
	replicaID string
	srv       *http.Server
	cancel    context.CancelFunc
	ctx       context.Context
	mu        sync.Mutex
	wg        sync.WaitGroup
	errs      chan error
	// ready is read by /readyz handlers while Start and Close write it.
	ready atomic.Bool
	// requests counts the HTTP handlers (API and admin socket) that run, so
	// that Close closes the store only after the last one returned.
	requests requestGate
	// httpCtx is every HTTP request's base context: cancelled when the
	// drain's grace is over, so handlers still waiting on a node return.
	httpCtx    context.Context
	httpCancel context.CancelFunc
	closeOnce  sync.Once
	closeErr   error
}

// New opens the store and the CA (creating them on first start) and builds
// every subsystem. Nothing listens until Start. logger gets every line of
// the coordinator; when nil, a logger of cfg.Log on standard error.
func New(cfg Config, logger *slog.Logger) (*Coordinator, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = logging.New(os.Stderr, cfg.Log)
	}
	// A port another process holds is refused before anything is written
	// (issue 32 finding 12): a first start that cannot listen leaves no CA
	// or store behind. Start binds for good; this only asks early.
	for _, l := range []struct{ what, addr string }{{"api", cfg.API.Listen}, {"tunnel", cfg.Tunnel.Listen}} {
		if ln, err := net.Listen("tcp", l.addr); err != nil {
			return nil, listenErr(l.what, l.addr, err)
		} else {
			ln.Close()
		}
	}
	// So is a file the config names that is not there (the systemd unit
	// hands them over with LoadCredential=).
	for _, f := range []struct{ key, path string }{{"api.tls_cert", cfg.API.TLSCert}, {"api.tls_key", cfg.API.TLSKey},
		{"oidc.client_secret_file", cfg.OIDC.ClientSecretFile}, {"metrics.token_file", cfg.Metrics.TokenFile}} {
		if _, err := os.Stat(f.path); f.path != "" && err != nil {
			return nil, fmt.Errorf("config: %s: %w (under systemd, a file in /run/credentials needs the unit's LoadCredential= line)", f.key, err)
		}
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, err
	}
	a, caCreated, err := certs.InitAuthority(filepath.Join(cfg.StateDir, CADir), time.Now())
	if err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, log: logger, metrics: prometheus.NewRegistry(), Authority: a, errs: make(chan error, 8)}
	c.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := c.loadCerts(); err != nil {
		return nil, err
	}
	st, err := openStore(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	c.Store = st
	_, statErr := os.Stat(filepath.Join(cfg.StateDir, vault.KeyFile))
	v, err := vault.Open(cfg.StateDir)
	if err != nil {
		st.Close()
		return nil, err
	}
	var cluster *fleet.ClusterOptions
	if reps, ok := st.(store.Replicas); ok && cfg.Store.Driver == DriverPostgres {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := checkSharedKeys(ctx, reps, a, caCreated, v, errors.Is(statErr, os.ErrNotExist), cfg.StateDir)
		cancel()
		if err == nil {
			c.replicaID, err = replicaID(cfg)
		}
		if err != nil {
			st.Close()
			return nil, err
		}
		c.replicas = reps
		if err := c.issueReplicaCert(); err != nil {
			st.Close()
			return nil, err
		}
		cluster = &fleet.ClusterOptions{ID: c.replicaID, Registry: reps, Certificate: c.replicaCert,
			Heartbeat: cfg.Replica.Heartbeat.Duration, TTL: cfg.Replica.TTL.Duration, Version: Version}
	}
	c.httpCtx, c.httpCancel = context.WithCancel(context.Background())
	c.Enroll = &enroll.Server{Store: st, Authority: a, Validity: cfg.PKI.NodeCertValidity.Duration, Log: logger}
	c.Fleet = fleet.New(fleet.Options{Store: st, Authority: a, Enroll: c.Enroll, Heartbeat: cfg.Tunnel.Heartbeat.Duration, Log: logger, Metrics: c.metrics, Cluster: cluster})
	if c.resetKey, err = loadResetKey(filepath.Join(cfg.StateDir, ResetKeyFile)); err != nil {
		st.Close()
		return nil, err
	}
	vapid, err := loadVAPIDKey(filepath.Join(cfg.StateDir, VAPIDKeyFile))
	if err != nil {
		st.Close()
		return nil, err
	}
	if cfg.Metrics.TokenFile != "" {
		b, err := os.ReadFile(cfg.Metrics.TokenFile)
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("config: metrics.token_file: %w", err)
		}
		if c.metricsToken = strings.TrimSpace(string(b)); c.metricsToken == "" {
			st.Close()
			return nil, fmt.Errorf("config: metrics.token_file %s is empty", cfg.Metrics.TokenFile)
		}
	}
	out, err := cfg.outbound()
	if err != nil {
		st.Close()
		return nil, err
	}
	c.API = api.New(api.Options{Store: st, Fleet: c.Fleet, Version: Version, Ready: c.readyErr, Now: cfg.Now, Vault: v, VAPIDKey: vapid,
		Log: logger, Metrics: c.metrics, Outbound: out, PublicURL: cfg.API.PublicURL,
		Attach: api.AttachOptions{
			Buffer: cfg.API.AttachBuffer, WriteTimeout: cfg.API.SSEWriteTimeout.Duration,
			KeepAlive: cfg.API.SSEKeepAlive.Duration, PerPrincipal: cfg.API.MaxAttachesPerPrincipal,
		},
		ChangeStreams: api.ChangeStreamLimits{PerPrincipal: cfg.API.MaxChangeStreamsPerPrincipal, Total: cfg.API.MaxChangeStreams},
		Continue: api.ContinueOptions{Jitter: cfg.API.ContinueJitter.Duration, Backoff: cfg.API.ContinueBackoff.Duration,
			Poll: cfg.API.ContinuePoll.Duration}})
	co := console.Options{Store: st, API: c.API.Handler(), Now: cfg.Now, Failures: c.API.Failures()}
	if cfg.OIDC.Enabled() {
		if co.SSO, err = sso.New(cfg.OIDC, st, v, cfg.Now); err != nil {
			st.Close()
			return nil, err
		}
	}
	c.Console = console.New(co)
	return c, nil
}

// openStore opens the store the config names: the bbolt file in the state
// dir, or the PostgreSQL database (migrated to this binary's schema).
func openStore(ctx context.Context, cfg Config) (store.Store, error) {
	if cfg.Store.Driver != DriverPostgres {
		return bolt.Open(filepath.Join(cfg.StateDir, StoreFile))
	}
	return postgres.Open(ctx, postgres.Options{
		DSN:            cfg.Store.DSN,
		MaxConns:       cfg.Store.MaxConns,
		MinConns:       cfg.Store.MinConns,
		ConnectTimeout: cfg.Store.ConnectTimeout.Duration,
	})
}

// pingTimeout bounds the database check of /readyz.
const pingTimeout = 2 * time.Second

func (c *Coordinator) readyErr() error {
	if !c.ready.Load() {
		return errors.New("the coordinator is starting or stopping")
	}
	if err := c.Fleet.Registered(); err != nil {
		return fmt.Errorf("this coordinator replica (%s) has not renewed its registration in the database; check that PostgreSQL is reachable from this host", c.replicaID)
	}
	if p, ok := c.Store.(store.Pinger); ok {
		ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
		defer cancel()
		if err := p.Ping(ctx); err != nil {
			return fmt.Errorf("the coordinator's database does not answer (%v); check that PostgreSQL is running and reachable from this host", err)
		}
	}
	return nil
}

// Config returns the checked config.
func (c *Coordinator) Config() Config { return c.cfg }

// Start opens the listeners and serves until ctx ends or Close.
func (c *Coordinator) Start(ctx context.Context) error {
	ctx, c.cancel = context.WithCancel(ctx)
	var err error
	if c.tcpLn, c.udp, err = listenTunnel(c.cfg.Tunnel.Listen, !c.cfg.Tunnel.DisableQUIC); err != nil {
		c.cancel()
		return err
	}
	c.apiLn, err = net.Listen("tcp", c.cfg.API.Listen)
	if err != nil {
		c.closeListeners()
		c.cancel()
		return listenErr("api", c.cfg.API.Listen, err)
	}
	c.admin, err = localsockListen(filepath.Join(c.cfg.StateDir, AdminSock))
	if err != nil {
		c.closeListeners()
		c.cancel()
		return err
	}
	// A replica is registered before its tunnel listeners accept a node,
	// so that every tunnel it records is under a live registration.
	if err := c.startReplica(ctx); err != nil {
		c.closeListeners()
		c.cancel()
		return err
	}
	if c.cfg.Metrics.Listen != MetricsOff {
		if c.metricsLn, err = net.Listen("tcp", c.cfg.Metrics.Listen); err != nil {
			c.closeListeners()
			c.cancel()
			return listenErr("metrics", c.cfg.Metrics.Listen, err)
		}
	}

	tcp := tunnel.ListenTCP(c.tcpLn, tunnel.TCPListenerConfig{
		TLS:              c.Fleet.TLSConfig(c.certs.tunnelCert),
		EnrollTLS:        c.Fleet.EnrollTLSConfig(c.certs.tunnelCert),
		OnEnroll:         c.Enroll.HandleConn,
		OnHandshakeError: c.Fleet.HandshakeFailed,
		Logger:           logging.StdLogger(c.log.With(logging.KeyComponent, "yamux"), slog.LevelInfo),
		// An agent opens few streams at once (index pushes, one at a
		// time; heartbeats; reports): yamux's own default, not a slot per
		// QUIC stream, which cost 32 KiB per connected node (issue 34).
		AcceptBacklog: agentAcceptBacklog,
		// The fleet's watchdog ends a session silent for 3 heartbeats.
		NoKeepAlive: true,
	})
	c.serve(func() error { return c.Fleet.Serve(ctx, tcp) })
	// The continues at a limit's reset (docs/rules/usage.md): stopped with
	// the fleet, before the store closes.
	c.serve(func() error { c.API.RunContinuer(ctx); return nil })
	c.ctx = ctx
	if c.udp != nil {
		if err := c.serveQUIC(); err != nil {
			c.Close()
			return err
		}
	}

	// accesslog is outermost: a request refused while draining has its
	// id and access line too (R-OBS-3, R-OBS-4).
	front := accesslog.New(c.requests.wrap(c.Console), accesslog.Options{Log: c.log.With(logging.KeyComponent, "http"), Metrics: c.metrics})
	// R-API-13: a slow or idle client is cut off. No WriteTimeout: the
	// attach and change streams are answers that last; each of their
	// writes has its own deadline (api.sse_write_timeout) instead.
	srv := &http.Server{Handler: front, ReadHeaderTimeout: DefaultReadHeaderTimeout,
		ReadTimeout: c.cfg.API.ReadTimeout.Duration, IdleTimeout: c.cfg.API.IdleTimeout.Duration,
		BaseContext: func(net.Listener) context.Context { return c.httpCtx },
		// net/http's own lines (TLS handshake errors of scanners, ...).
		ErrorLog: logging.StdLogger(c.log.With(logging.KeyComponent, "http"), slog.LevelDebug)}
	if !c.cfg.API.Plain {
		// The certificate is looked up per handshake, so that Reload
		// (SIGHUP) applies to new connections and leaves live ones alone.
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.certs.apiCert}
	}
	c.srv = srv
	c.serve(func() error {
		var err error
		if c.cfg.API.Plain {
			err = srv.Serve(c.apiLn)
		} else {
			err = srv.ServeTLS(c.apiLn, "", "")
		}
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	})
	c.serve(func() error { return serveAdmin(c.httpCtx, c.admin, c) })
	if c.metricsLn != nil {
		c.msrv = &http.Server{Handler: api.MetricsHandler(c.gatherer(), c.metricsToken), ReadHeaderTimeout: DefaultReadHeaderTimeout,
			ReadTimeout: DefaultReadTimeout, IdleTimeout: DefaultIdleTimeout, WriteTimeout: time.Minute,
			ErrorLog: logging.StdLogger(c.log.With(logging.KeyComponent, "metrics"), slog.LevelDebug)}
		c.serve(func() error {
			if err := c.msrv.Serve(c.metricsLn); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	c.ready.Store(true)
	c.log.Info("coordinator started", "version", Version, "api", c.APIURL(), "tunnel", c.TunnelAddr(), "quic", c.udp != nil, "metrics", c.MetricsURL())
	return nil
}

func (c *Coordinator) serveQUIC() error {
	ql, err := tunnel.ListenQUIC(c.udp, c.Fleet.TLSConfig(c.certs.tunnelCert), c.Fleet.HandshakeFailed, tunnel.QUICListenOptions{StatelessResetKey: &c.resetKey})
	if err != nil {
		return err
	}
	c.serve(func() error { return c.Fleet.Serve(c.ctx, ql) })
	return nil
}

// ListenQUIC adds the QUIC listener on the tunnel port when the coordinator
// started without one (UDP was blocked, or disable_quic). Agents in "auto"
// mode find it at their next background retry.
func (c *Coordinator) ListenQUIC() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.udp != nil {
		return nil
	}
	pc, err := net.ListenPacket("udp", c.TunnelAddr())
	if err != nil {
		return fmt.Errorf("tunnel listen udp %s: %w", c.TunnelAddr(), err)
	}
	c.udp = pc
	return c.serveQUIC()
}

func (c *Coordinator) serve(fn func() error) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := fn(); err != nil {
			select {
			case c.errs <- err:
			default:
			}
		}
	}()
}

// Errors delivers a fatal serving error.
func (c *Coordinator) Errors() <-chan error { return c.errs }

func (c *Coordinator) closeListeners() {
	for _, l := range []net.Listener{c.apiLn, c.tcpLn, c.admin, c.metricsLn} {
		if l != nil {
			l.Close()
		}
	}
	c.mu.Lock()
	if c.udp != nil {
		c.udp.Close()
	}
	c.mu.Unlock()
	if c.relay != nil {
		c.relay.Close()
	}
}

// Crash stops as a kill -9 would, as far as peers can tell: the UDP socket
// is closed first, so no QUIC connection is told goodbye (no
// CONNECTION_CLOSE), and TCP connections just close. Tests use it to
// measure how fast agents notice a dead coordinator (issue 16).
func (c *Coordinator) Crash() error {
	c.mu.Lock()
	if c.udp != nil {
		c.udp.Close()
	}
	c.mu.Unlock()
	return c.Close()
}

// ShutdownGrace is how long Close lets HTTP requests in flight finish
// before it cancels them.
const ShutdownGrace = 5 * time.Second

// Close stops in the order that keeps every acknowledged write: /readyz
// turns unready; the HTTP listeners stop accepting and the requests in
// flight finish (attach streams end at once, anything still running after
// ShutdownGrace is cancelled, and a request arriving meanwhile is refused
// before it reads anything); then the tunnels close and the fleet's
// handlers return; only then is the store closed, so no handler ever meets
// a closed store. Close may be called more than once.
func (c *Coordinator) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Coordinator) close() error {
	c.ready.Store(false)
	// 1. HTTP: the public API and the admin socket.
	c.requests.drain()
	if c.srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
		if err := c.srv.Shutdown(sctx); err != nil {
			c.srv.Close()
		}
		cancel()
	}
	if c.admin != nil {
		c.admin.Close()
	}
	if c.msrv != nil {
		c.msrv.Close()
	}
	c.httpCancel()
	c.requests.wait()
	// 2. The fleet: listeners, live tunnels, and every stream handler.
	if c.cancel != nil {
		c.cancel()
	}
	// The tunnels are told goodbye before the listeners close: a QUIC
	// session's goodbye (CONNECTION_CLOSE) is a packet on the UDP socket,
	// and with the socket gone first the agents only noticed after three
	// missed heartbeats (issue 32 finding 2; Crash closes it first on
	// purpose).
	c.Fleet.Close()
	c.closeListeners()
	c.wg.Wait()
	c.API.Close() // the webhooks' deliveries
	// 3. The store, which nothing uses any more.
	return c.Store.Close()
}

// VAPIDKeyFile holds the coordinator's Web Push key (R-NOTIF-8): P-256,
// PKCS #8 PEM, 0600, made at the first start. Browsers subscribed with its
// public key; a new key orphans their subscriptions.
const VAPIDKeyFile = "vapid.pem"

func loadVAPIDKey(path string) (*ecdsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		k, err := webpush.NewVAPIDKey()
		if err != nil {
			return nil, err
		}
		pemKey, err := webpush.MarshalKey(k)
		if err != nil {
			return nil, err
		}
		return k, certs.WriteFileAtomic(path, pemKey, 0o600)
	}
	if err != nil {
		return nil, err
	}
	k, err := webpush.ParseKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (delete it and restart: a new key is made, and browsers must subscribe again)", path, err)
	}
	return k, nil
}

// ResetKeyFile holds the QUIC stateless reset key (32 random bytes, 0600).
const ResetKeyFile = "quic-reset.key"

// loadResetKey reads the key at path, creating it on first start.
func loadResetKey(path string) ([32]byte, error) {
	var k [32]byte
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if _, err := rand.Read(k[:]); err != nil {
			return k, err
		}
		return k, certs.WriteFileAtomic(path, k[:], 0o600)
	}
	if err != nil {
		return k, err
	}
	if len(b) != len(k) {
		return k, fmt.Errorf("%s: %d bytes, want %d (delete it and restart: a new key is made)", path, len(b), len(k))
	}
	copy(k[:], b)
	return k, nil
}

// MetricsURL is the URL of /metrics, "" when metrics are off.
func (c *Coordinator) MetricsURL() string {
	if c.metricsLn == nil {
		return ""
	}
	return "http://" + c.metricsLn.Addr().String() + "/metrics"
}

// APIURL is the base URL of the public API.
func (c *Coordinator) APIURL() string {
	scheme := "https"
	if c.cfg.API.Plain {
		scheme = "http"
	}
	if c.apiLn == nil {
		return scheme + "://" + c.cfg.API.Listen
	}
	return scheme + "://" + c.apiLn.Addr().String()
}

// TunnelAddr is the host:port agents dial.
func (c *Coordinator) TunnelAddr() string {
	if c.tcpLn == nil {
		return c.cfg.Tunnel.Listen
	}
	return c.tcpLn.Addr().String()
}

// CAFile is the PEM file of the CA bundle's current root.
func (c *Coordinator) CAFile() string { return filepath.Join(c.cfg.StateDir, CADir, "ca.pem") }

// listenErr is a listener's error with the way out when the port is taken
// (issue 32 finding 12): which setting names it, in dev mode and in serve's
// config.
func listenErr(what, addr string, err error) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s listen %s: %w", what, addr, err)
	}
	flag := map[string]string{"api": "--http", "tunnel": "--tunnel", "metrics": "--metrics"}[what]
	return fmt.Errorf("%s listen %s: another process holds the port (another coordinator, or dev mode?); stop it, or choose another port: %s in dev mode, [%s] listen in serve's config (port 0 picks a free one)", what, addr, flag, what)
}

// listenTunnel listens on TCP and, with quic, on UDP at the same port.
func listenTunnel(addr string, quic bool) (net.Listener, net.PacketConn, error) {
	for attempt := 0; ; attempt++ {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, nil, listenErr("tunnel", addr, err)
		}
		if !quic {
			return ln, nil, nil
		}
		host, _, _ := net.SplitHostPort(addr)
		port := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			return ln, pc, nil
		}
		ln.Close()
		_, p, _ := net.SplitHostPort(addr)
		if p != "0" || attempt >= 8 {
			return nil, nil, fmt.Errorf("tunnel listen udp %s: %w", addr, err)
		}
	}
}

// CreatePrincipal creates a principal with a role in tenant (creating the
// tenant when it does not exist) and returns its first bearer token. Tests
// and dev mode call it; the admin socket calls NewPrincipal, which creates
// a tenant only when asked to (R-LIFE-4).
func (c *Coordinator) CreatePrincipal(ctx context.Context, tenant, name, role, kind string) (string, store.Principal, error) {
	return c.NewPrincipal(ctx, tenant, name, role, kind, true)
}

// ErrNoTenant: the tenant a principal was asked for does not exist, and
// creating it was not asked for.
var ErrNoTenant = errors.New("no such tenant")

// NewPrincipal creates a principal with a role in tenant and returns its
// first bearer token. A tenant that does not exist is created only with
// newTenant, so that a typo in a tenant's name never makes a new one. The
// local operator is the audit actor.
func (c *Coordinator) NewPrincipal(ctx context.Context, tenant, name, role, kind string, newTenant bool) (string, store.Principal, error) {
	if !api.ValidTenant(tenant) {
		return "", store.Principal{}, apierr.BadRequest("bad_tenant", "tenant %q: use 1-63 lower-case letters, digits, '_' or '-'", tenant)
	}
	if err := c.ensureTenant(ctx, tenant, newTenant); err != nil {
		return "", store.Principal{}, err
	}
	tok, p, _, err := c.API.NewPrincipal(ctx, tenant, name, role, kind, api.OperatorActor)
	return tok, p, err
}

// ensureTenant checks that tenant exists, creating it when create is set.
func (c *Coordinator) ensureTenant(ctx context.Context, tenant string, create bool) error {
	_, err := c.Store.GetTenant(ctx, tenant)
	if err == nil || !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if !create {
		ts, err := c.Store.ListTenants(ctx)
		if err != nil {
			return err
		}
		ids := make([]string, 0, len(ts))
		for _, t := range ts {
			ids = append(ids, t.ID)
		}
		have := "this coordinator has no tenant yet"
		if len(ids) > 0 {
			have = "tenants: " + strings.Join(ids, ", ")
			if s := cmdline.Suggest(tenant, ids); s != "" {
				have += "; did you mean " + s + "?"
			}
		}
		return apierr.New(http.StatusNotFound, "tenant_not_found", "tenant %q does not exist (%s); check the spelling, or create it with --new-tenant (or olivares-coordinator tenant create %s)",
			tenant, have, tenant)
	}
	_, err = c.CreateTenant(ctx, tenant)
	return err
}

// CreateTenant creates a tenant; apierr 409 tenant_exists when it exists.
func (c *Coordinator) CreateTenant(ctx context.Context, id string) (store.Tenant, error) {
	if !api.ValidTenant(id) {
		return store.Tenant{}, apierr.BadRequest("bad_tenant", "tenant %q: use 1-63 lower-case letters, digits, '_' or '-'", id)
	}
	if _, err := c.Store.GetTenant(ctx, id); err == nil {
		return store.Tenant{}, apierr.New(http.StatusConflict, "tenant_exists", "tenant %q exists", id)
	}
	t := store.Tenant{ID: id, CreatedAt: time.Now().UTC()}
	if err := c.Store.PutTenant(ctx, t); err != nil {
		return store.Tenant{}, err
	}
	c.API.Audit(ctx, id, api.OperatorActor, apitypes.AuditTenantCreated, apitypes.AuditTarget{Tenant: id}, nil)
	return t, nil
}

// AddCredential gives an existing principal another bearer token. A
// session credential (a console or `olivares login` session) shares the
// person's marks; an API token keeps its own (R-PIN-6). The local
// operator's token serves every tenant of the principal (R-LIFE-9).
func (c *Coordinator) AddCredential(ctx context.Context, principalID, kind, label string) (string, store.Credential, error) {
	p, err := c.Store.GetPrincipal(ctx, principalID)
	if errors.Is(err, store.ErrNotFound) {
		return "", store.Credential{}, apierr.NotFound("principal", principalID)
	}
	if err != nil {
		return "", store.Credential{}, err
	}
	return c.API.NewCredential(ctx, p, store.Credential{Kind: kind, Label: label, Tenant: store.AllTenants}, api.OperatorActor)
}

// SigninLink mints a one-time console sign-in link for a person (the
// principal's id) and returns the URL to open: base (the API URL when "")
// + /signin#secret.
func (c *Coordinator) SigninLink(ctx context.Context, principalID string, ttl time.Duration, base string) (string, time.Time, error) {
	now := time.Now()
	if c.cfg.Now != nil {
		now = c.cfg.Now()
	}
	secret, exp, err := console.MintLink(ctx, c.Store, principalID, ttl, now)
	if err != nil {
		return "", time.Time{}, err
	}
	if base == "" {
		base = c.APIURL()
	}
	if p, err := c.Store.GetPrincipal(ctx, principalID); err == nil {
		for t := range p.Roles {
			c.API.Audit(ctx, t, api.OperatorActor, apitypes.AuditSigninLinkCreated, apitypes.AuditTarget{PrincipalID: principalID}, map[string]any{"expires_at": exp.UTC()})
		}
	}
	return console.LinkURL(strings.TrimSuffix(base, "/"), secret), exp, nil
}

// gatherer is what /metrics serves: the coordinator's registry, and the
// connected nodes' own series with a node label (R-OBS-8).
func (c *Coordinator) gatherer() prometheus.Gatherer {
	return prometheus.Gatherers{c.metrics, c.Fleet.NodeMetrics()}
}

// Metrics is the coordinator's metrics registry (tests read it).
func (c *Coordinator) Metrics() prometheus.Gatherer { return c.gatherer() }

// agentAcceptBacklog is the accept backlog of each agent's yamux session.
const agentAcceptBacklog = 256
