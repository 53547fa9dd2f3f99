package coordd

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/coordinator/outbound"
	"github.com/olivares-dev/olivares/coordinator/sso"
	"github.com/olivares-dev/olivares/coordinator/store/postgres"
	"github.com/olivares-dev/olivares/shared/config"
	"github.com/olivares-dev/olivares/shared/logging"
)

// Config is the coordinator's TOML file. Defaults, then the file, then flags
// (Load does the first two; commands apply flags, then CheckAndSetDefaults).
type Config struct {
	// StateDir holds the store, the CA and the admin socket. Required.
	StateDir string `toml:"state_dir"`
	// Now is the API's clock (marks, names, audit rows); nil means
	// time.Now. Not in the file: tests set it.
	Now func() time.Time `toml:"-"`
	API struct {
		// Listen is the public API address. Default 127.0.0.1:7443.
		Listen string `toml:"listen"`
		// TLSCert and TLSKey are PEM files for the public API. When both are
		// empty, serve mode issues a certificate from its own CA for the
		// tunnel hosts.
		TLSCert string `toml:"tls_cert"`
		TLSKey  string `toml:"tls_key"`
		// Plain serves plain HTTP. Only allowed on a loopback address (dev).
		Plain bool `toml:"plain_http"`
		// PublicURL is the address people and receivers reach the API at
		// (https://olivares.example.com), when it is not the one a request
		// came in by: behind a TLS-terminating proxy. Links the coordinator
		// hands out (a webhook's action URLs) start with it. When empty,
		// the scheme and host of the request that made the webhook.
		PublicURL string `toml:"public_url"`
		// AttachBuffer is the bytes one attach viewer may have waiting
		// between its tunnel stream and its connection; a viewer past it
		// is dropped (its stream ends without end; it reconnects). When
		// zero, 16 MiB (what a tunnel stream window held before); never
		// below 8 MiB (two of the largest frames).
		AttachBuffer int `toml:"attach_buffer"`
		// SSEWriteTimeout bounds each write to an attach client; a client
		// that takes no bytes for this long is dropped. When zero, 10s.
		SSEWriteTimeout config.Duration `toml:"sse_write_timeout"`
		// SSEKeepAlive is how long an idle attach stream waits before a
		// ":" comment line. When zero, 15s.
		SSEKeepAlive config.Duration `toml:"sse_keepalive"`
		// MaxAttachesPerPrincipal caps the attach streams one principal
		// has open (429 too_many_attaches past it). When zero, 128.
		MaxAttachesPerPrincipal int `toml:"max_attaches_per_principal"`
		// MaxChangeStreamsPerPrincipal caps the change streams (GET
		// /v1/m/sessions/events) one principal has open, and
		// MaxChangeStreams all of them (429 too_many_change_streams past
		// either). When zero, 32 and 4096.
		MaxChangeStreamsPerPrincipal int `toml:"max_change_streams_per_principal"`
		MaxChangeStreams             int `toml:"max_change_streams"`
		// ReadTimeout bounds the reading of one request, headers and body;
		// a client that sends slower is cut off. The streams (attach,
		// events) are answers, which it does not bound. When zero, 30s.
		ReadTimeout config.Duration `toml:"read_timeout"`
		// IdleTimeout closes a kept-alive connection that sends no next
		// request for this long. When zero, 30s.
		IdleTimeout config.Duration `toml:"idle_timeout"`
		// ContinueJitter is the most a continue at a limit's reset is put
		// after the reset, at random (docs/rules/usage.md). When zero, 60s;
		// negative, none.
		ContinueJitter config.Duration `toml:"continue_jitter"`
		// ContinueBackoff is the first wait when a continue meets the
		// limit again without a later reset, doubling up to an hour. When
		// zero, 1m.
		ContinueBackoff config.Duration `toml:"continue_backoff"`
		// ContinuePoll is how often the schedules are scanned besides
		// their own timers. When zero, 5s.
		ContinuePoll config.Duration `toml:"continue_poll"`
	} `toml:"api"`
	Metrics struct {
		// Listen is the address of the Prometheus /metrics listener, plain
		// HTTP and unauthenticated, apart from the API. Default
		// 127.0.0.1:7445 (loopback: only this host scrapes). "off" serves
		// no metrics. A non-loopback address needs TokenFile.
		Listen string `toml:"listen"`
		// TokenFile, when set, holds a bearer token every scrape must
		// send (Authorization: Bearer ...). When empty, none is asked.
		TokenFile string `toml:"token_file"`
	} `toml:"metrics"`
	Tunnel struct {
		// Listen is the tunnel address: TCP (yamux, enrollment) and UDP (QUIC)
		// on the same port. Default 127.0.0.1:7444.
		Listen string `toml:"listen"`
		// DisableQUIC leaves the UDP listener out (agents use yamux).
		DisableQUIC bool `toml:"disable_quic"`
		// Hosts are the names and IPs in the coordinator's server
		// certificate. Default: the host of Listen, plus localhost and
		// 127.0.0.1.
		Hosts []string `toml:"hosts"`
		// Heartbeat agents are told to use. Default 5s.
		Heartbeat config.Duration `toml:"heartbeat"`
	} `toml:"tunnel"`
	PKI struct {
		// NodeCertValidity is the lifetime of node certificates. Default 7 days.
		NodeCertValidity config.Duration `toml:"node_cert_validity"`
	} `toml:"pki"`
	// Outbound is where the coordinator may send the requests a tenant
	// names the address of: webhook deliveries and Web Push.
	Outbound struct {
		// Allow lists the private destinations the operator means tenants
		// to reach: CIDR prefixes ("10.20.0.0/16") or host names
		// ("hooks.corp.example", whose every address is then taken). When
		// empty, every loopback, private, link-local (cloud metadata),
		// unique-local, unspecified and other special address is refused,
		// at creation and at each send.
		Allow []string `toml:"allow"`
		// CAFile is a PEM file of roots trusted for https deliveries
		// besides the system's: a receiver or push service behind a
		// private CA. When empty, the system's alone.
		CAFile string `toml:"ca_file"`
	} `toml:"outbound"`
	Store StoreConfig `toml:"store"`
	// Replica: this coordinator as one of several sharing the PostgreSQL
	// store (issue 24). Only with store.driver "postgres".
	Replica ReplicaConfig `toml:"replica"`
	// OIDC is single sign-on with the organisation's OpenID Connect
	// provider, for the console and olivares login --sso. Off when the
	// table is absent.
	OIDC sso.Config `toml:"oidc"`
	// Log sets the level and format of the coordinator's log (standard
	// error). When empty, info and json; dev mode's default format is
	// text (R-OBS-1).
	Log logging.Config `toml:"log"`
}

// Store drivers.
const (
	DriverBolt     = "bbolt"
	DriverPostgres = "postgres"
)

// StoreConfig is the [store] table: where the coordinator keeps its
// records.
type StoreConfig struct {
	// Driver is "bbolt" (one file, STATE_DIR/coordinator.db, nothing to set
	// up) or "postgres" (a database several coordinators can share). When
	// empty, "bbolt".
	Driver string `toml:"driver"`
	// DSN is the PostgreSQL connection string, URL
	// (postgres://user@host:5432/olivares?sslmode=verify-full) or
	// key=value form. Required with driver "postgres", refused with "bbolt".
	// The PG* environment variables and ~/.pgpass (PGPASSFILE) fill what it
	// leaves out, so the password need not be in this file.
	DSN string `toml:"dsn"`
	// MaxConns is the size of the connection pool. When zero, 10.
	MaxConns int32 `toml:"max_conns"`
	// MinConns is how many connections stay open while idle. When zero,
	// none.
	MinConns int32 `toml:"min_conns"`
	// ConnectTimeout bounds each new database connection. When zero, 10s.
	ConnectTimeout config.Duration `toml:"connect_timeout"`
}

// CheckAndSetDefaults validates the [store] table and fills its defaults.
func (s *StoreConfig) CheckAndSetDefaults() error {
	if s.Driver == "" {
		s.Driver = DriverBolt
	}
	switch s.Driver {
	case DriverBolt:
		if s.DSN != "" || s.MaxConns != 0 || s.MinConns != 0 || s.ConnectTimeout.Duration != 0 {
			return errors.New(`config: store.dsn, max_conns, min_conns and connect_timeout are for driver "postgres"; driver "bbolt" keeps STATE_DIR/coordinator.db`)
		}
		return nil
	case DriverPostgres:
	default:
		return fmt.Errorf(`config: store.driver %q: use "bbolt" or "postgres"`, s.Driver)
	}
	if s.DSN == "" {
		return errors.New(`config: store.dsn is required with driver "postgres" (for example postgres://olivares@db.example:5432/olivares?sslmode=verify-full)`)
	}
	if s.MaxConns < 0 || s.MinConns < 0 || s.ConnectTimeout.Duration < 0 {
		return errors.New("config: store.max_conns, min_conns and connect_timeout may not be negative")
	}
	if s.MaxConns == 0 {
		s.MaxConns = postgres.DefaultMaxConns
	}
	if s.MinConns > s.MaxConns {
		return fmt.Errorf("config: store.min_conns (%d) is more than store.max_conns (%d)", s.MinConns, s.MaxConns)
	}
	if s.ConnectTimeout.Duration == 0 {
		s.ConnectTimeout.Duration = postgres.DefaultConnectTimeout
	}
	return nil
}

// The API server's bounds on slow and idle clients (issue 35): what a
// client that trickles its request, or holds a connection it does not use,
// may keep.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultIdleTimeout       = 30 * time.Second
)

// DefaultMetricsListen is where serve answers /metrics by default.
const DefaultMetricsListen = "127.0.0.1:7445"

// MetricsOff as metrics.listen serves no metrics.
const MetricsOff = "off"

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	var c Config
	c.API.Listen = "127.0.0.1:7443"
	c.Tunnel.Listen = "127.0.0.1:7444"
	c.Metrics.Listen = DefaultMetricsListen
	c.API.ReadTimeout.Duration, c.API.IdleTimeout.Duration = DefaultReadTimeout, DefaultIdleTimeout
	c.Tunnel.Heartbeat.Duration = 5 * time.Second
	c.PKI.NodeCertValidity.Duration = certs.DefaultNodeValidity
	return c
}

// Load returns DefaultConfig merged with the file at path ("" = none).
func Load(path string) (Config, error) { return config.Load(path, DefaultConfig()) }

// CheckAndSetDefaults validates c and fills derived defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.StateDir == "" {
		return errors.New("config: state_dir is required")
	}
	abs, err := filepath.Abs(c.StateDir)
	if err != nil {
		return fmt.Errorf("config: state_dir: %w", err)
	}
	c.StateDir = abs
	if err := c.Log.CheckAndSetDefaults(logging.FormatJSON); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(c.API.Listen); err != nil {
		return fmt.Errorf("config: api.listen %q: %w", c.API.Listen, err)
	}
	host, _, err := net.SplitHostPort(c.Tunnel.Listen)
	if err != nil {
		return fmt.Errorf("config: tunnel.listen %q: %w", c.Tunnel.Listen, err)
	}
	if (c.API.TLSCert == "") != (c.API.TLSKey == "") {
		return errors.New("config: api.tls_cert and api.tls_key go together")
	}
	if c.API.Plain && !IsLoopback(c.API.Listen) {
		return fmt.Errorf("config: api.plain_http is refused on %s: plain HTTP is only served on a loopback address; configure TLS (api.tls_cert, api.tls_key) or leave them empty to use the coordinator's CA", c.API.Listen)
	}
	if c.API.AttachBuffer < 0 || c.API.MaxAttachesPerPrincipal < 0 || c.API.SSEWriteTimeout.Duration < 0 || c.API.SSEKeepAlive.Duration < 0 {
		return errors.New("config: api.attach_buffer, api.max_attaches_per_principal, api.sse_write_timeout and api.sse_keepalive must not be negative (zero takes the default)")
	}
	if c.API.MaxChangeStreamsPerPrincipal < 0 || c.API.MaxChangeStreams < 0 || c.API.ReadTimeout.Duration < 0 || c.API.IdleTimeout.Duration < 0 {
		return errors.New("config: api.max_change_streams_per_principal, api.max_change_streams, api.read_timeout and api.idle_timeout must not be negative (zero takes the default)")
	}
	if c.API.ReadTimeout.Duration == 0 {
		c.API.ReadTimeout.Duration = DefaultReadTimeout
	}
	if c.API.IdleTimeout.Duration == 0 {
		c.API.IdleTimeout.Duration = DefaultIdleTimeout
	}
	switch {
	case c.Metrics.Listen == "":
		c.Metrics.Listen = DefaultMetricsListen
	case c.Metrics.Listen == MetricsOff:
	default:
		if _, _, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			return fmt.Errorf("config: metrics.listen %q: %w (or \"off\")", c.Metrics.Listen, err)
		}
		if !IsLoopback(c.Metrics.Listen) && c.Metrics.TokenFile == "" {
			return fmt.Errorf("config: metrics.listen %s is not a loopback address: set metrics.token_file so that scrapes must authenticate, or listen on 127.0.0.1", c.Metrics.Listen)
		}
	}
	if _, err := c.outbound(); err != nil {
		return err
	}
	if c.API.PublicURL != "" {
		u, err := url.Parse(c.API.PublicURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("config: api.public_url %q is not a URL like https://olivares.example.com (a scheme and a host, no path)", c.API.PublicURL)
		}
		c.API.PublicURL = u.Scheme + "://" + u.Host
	}
	if c.Tunnel.Heartbeat.Duration <= 0 {
		return errors.New("config: tunnel.heartbeat must be positive")
	}
	if c.PKI.NodeCertValidity.Duration < time.Second {
		return errors.New("config: pki.node_cert_validity must be at least 1s")
	}
	if err := c.Store.CheckAndSetDefaults(); err != nil {
		return err
	}
	if err := c.Replica.CheckAndSetDefaults(c.Store.Driver); err != nil {
		return err
	}
	if err := c.OIDC.CheckAndSetDefaults(); err != nil {
		return err
	}
	// R-SSO-8: the callback address comes from the config, never from a
	// request's Host header, except on a plain loopback listener (dev).
	if c.OIDC.Enabled() && c.OIDC.RedirectURL == "" && !c.API.Plain {
		return fmt.Errorf("config: oidc.redirect_url is required: give the console's callback as it is registered at the provider, such as https://olivares.example.com%s (only a plain-HTTP coordinator on loopback takes it from the address the browser used)", sso.CallbackPath)
	}
	if len(c.Tunnel.Hosts) == 0 {
		c.Tunnel.Hosts = []string{"localhost", "127.0.0.1"}
		if host != "" && host != "0.0.0.0" && host != "::" && host != "localhost" && host != "127.0.0.1" {
			c.Tunnel.Hosts = append(c.Tunnel.Hosts, host)
		}
	}
	return nil
}

// IsLoopback reports whether addr (host:port) binds only loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// DefaultReplicaListen is the replica link's default address.
const DefaultReplicaListen = "127.0.0.1:7446"

// ReplicaConfig is the [replica] table: how this coordinator meets the
// other coordinators sharing its PostgreSQL database. Every coordinator on
// PostgreSQL is a replica (it registers itself, records the tunnels it
// holds and forwards calls for the others'), also when it is alone.
type ReplicaConfig struct {
	// ID names this replica among those sharing the database (1-128
	// letters, digits, '.', '_', '-'). When empty, the id kept in
	// STATE_DIR/replica-id, made on first start.
	ID string `toml:"id"`
	// Listen is the replica link's host:port (mutual TLS with replica
	// certificates from the CA; other replicas forward calls here). When
	// empty, 127.0.0.1:7446: enough for replicas on one host only.
	Listen string `toml:"listen"`
	// Advertise is the host:port other replicas dial. When empty, the
	// address Listen bound, which must then name a host (not 0.0.0.0).
	Advertise string `toml:"advertise"`
	// Heartbeat is how often the replica renews its row. When zero, 1s.
	Heartbeat config.Duration `toml:"heartbeat"`
	// TTL: a replica silent for longer holds no tunnel (calls for its nodes
	// are node_unreachable until they reconnect to another). When zero, 5s.
	TTL config.Duration `toml:"ttl"`
}

// CheckAndSetDefaults checks the table against the store's driver.
func (r *ReplicaConfig) CheckAndSetDefaults(driver string) error {
	if driver != DriverPostgres {
		if *r != (ReplicaConfig{}) {
			return errors.New(`config: [replica] is for store.driver "postgres": coordinators share nothing on "bbolt"`)
		}
		return nil
	}
	if r.ID != "" && !validReplicaID(r.ID) {
		return fmt.Errorf("config: replica.id %q: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", r.ID)
	}
	if r.Listen == "" {
		r.Listen = DefaultReplicaListen
	}
	if _, _, err := net.SplitHostPort(r.Listen); err != nil {
		return fmt.Errorf("config: replica.listen %q: %w", r.Listen, err)
	}
	if r.Advertise != "" {
		host, port, err := net.SplitHostPort(r.Advertise)
		if err != nil || host == "" || port == "0" || net.ParseIP(host).IsUnspecified() {
			return fmt.Errorf("config: replica.advertise %q: give the host:port other replicas dial", r.Advertise)
		}
	}
	if r.Heartbeat.Duration < 0 || r.TTL.Duration < 0 {
		return errors.New("config: replica.heartbeat and replica.ttl may not be negative (zero takes the default)")
	}
	if r.Heartbeat.Duration == 0 {
		r.Heartbeat.Duration = time.Second
	}
	if r.TTL.Duration == 0 {
		r.TTL.Duration = 5 * time.Second
	}
	if r.TTL.Duration < 2*r.Heartbeat.Duration {
		return fmt.Errorf("config: replica.ttl (%v) must be at least twice replica.heartbeat (%v)", r.TTL.Duration, r.Heartbeat.Duration)
	}
	return nil
}

func validReplicaID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// outbound is the guard of the requests a tenant names the address of
// (R-NOTIF-9): the allowlist, and the system's roots plus ca_file's.
func (c *Config) outbound() (*outbound.Guard, error) {
	o := outbound.Options{Allow: c.Outbound.Allow}
	if c.Outbound.CAFile != "" {
		pem, err := os.ReadFile(c.Outbound.CAFile)
		if err != nil {
			return nil, fmt.Errorf("config: outbound.ca_file: %w", err)
		}
		if o.RootCAs, err = x509.SystemCertPool(); err != nil {
			o.RootCAs = x509.NewCertPool()
		}
		if !o.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("config: outbound.ca_file %s holds no PEM certificate", c.Outbound.CAFile)
		}
	}
	g, err := outbound.New(o)
	if err != nil {
		return nil, fmt.Errorf("config: outbound.allow: %w", err)
	}
	return g, nil
}
