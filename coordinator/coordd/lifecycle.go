package coordd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"github.com/olivares-dev/olivares/shared/logging"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/shared/apierr"
)

// requestGate counts the HTTP handlers that run, refuses new ones once the
// coordinator drains, and ends attach streams when it does: a stream lives
// as long as its run, so waiting for it would only delay the shutdown, and
// the client reconnects at its last seq + 1 anyway.
type requestGate struct {
	mu       sync.Mutex
	closed   bool
	wg       sync.WaitGroup
	draining chan struct{}
	// inflight counts the handlers running now (tests watch it).
	inflight atomic.Int64
}

func (g *requestGate) ch() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.draining == nil {
		g.draining = make(chan struct{})
	}
	return g.draining
}

// wrap counts h's requests.
func (g *requestGate) wrap(h http.Handler) http.Handler {
	draining := g.ch()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			// Refused before it reads anything: the store may be closing.
			w.Header().Set("Connection", "close")
			apierr.Write(w, apierr.New(http.StatusServiceUnavailable, "shutting_down",
				"the coordinator is shutting down; retry in a moment"))
			return
		}
		g.wg.Add(1)
		g.inflight.Add(1)
		g.mu.Unlock()
		defer g.wg.Done()
		defer g.inflight.Add(-1)
		if isStream(r) {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			go func() {
				select {
				case <-draining:
					cancel()
				case <-ctx.Done():
				}
			}()
			r = r.WithContext(ctx)
		}
		h.ServeHTTP(w, r)
	})
}

// isStream reports whether r asks for an event stream (attach).
func isStream(r *http.Request) bool {
	return strings.HasSuffix(r.URL.Path, "/attach") || strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// drain refuses every request from now on and ends the streams.
func (g *requestGate) drain() {
	ch := g.ch()
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.closed = true
		close(ch)
	}
}

// wait returns when the last counted handler has.
func (g *requestGate) wait() { g.wg.Wait() }

// certSet holds the coordinator's serving certificates: the public API's
// and the tunnel listener's. Each handshake reads the current one, so a
// Reload applies to new connections and never touches live ones.
type certSet struct {
	api    atomic.Pointer[tls.Certificate]
	tunnel atomic.Pointer[tls.Certificate]
	// replica is the replica link's certificate (PostgreSQL only).
	replica atomic.Pointer[tls.Certificate]
}

func (s *certSet) apiCert(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.api.Load(), nil }

func (s *certSet) tunnelCert(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.tunnel.Load(), nil
}

// loadCerts issues the tunnel's certificate from the CA and loads the
// public API's (its files, or the tunnel's when none are configured).
func (c *Coordinator) loadCerts() error {
	tc, err := c.Authority.IssueServer(c.cfg.Tunnel.Hosts, time.Now(), certs.ServerValidity)
	if err != nil {
		return err
	}
	ac := tc
	if c.cfg.API.TLSCert != "" {
		if ac, err = loadKeyPair(c.cfg.API.TLSCert, c.cfg.API.TLSKey); err != nil {
			return err
		}
	}
	c.certs.tunnel.Store(&tc)
	c.certs.api.Store(&ac)
	return nil
}

// Reload re-reads what an operator may replace under a running
// coordinator (SIGHUP): the public API's certificate files, the CA (so a
// root promoted with olivares-coordinator ca promote signs from now on,
// and a rotated bundle is trusted) and the tunnel's server certificate,
// issued again from it. New connections get the new certificates; live
// tunnels, attach streams and requests are not touched. When the API's
// files do not load, nothing changes.
func (c *Coordinator) Reload() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ac *tls.Certificate
	if c.cfg.API.TLSCert != "" {
		kp, err := loadKeyPair(c.cfg.API.TLSCert, c.cfg.API.TLSKey)
		if err != nil {
			return fmt.Errorf("reload: %w", err)
		}
		ac = &kp
	}
	if err := c.Authority.Reload(filepath.Join(c.cfg.StateDir, CADir)); err != nil {
		return fmt.Errorf("reload: the CA: %w", err)
	}
	tc, err := c.Authority.IssueServer(c.cfg.Tunnel.Hosts, time.Now(), certs.ServerValidity)
	if err != nil {
		return fmt.Errorf("reload: the tunnel certificate: %w", err)
	}
	if ac == nil {
		ac = &tc
	}
	c.certs.tunnel.Store(&tc)
	c.certs.api.Store(ac)
	if err := c.issueReplicaCert(); err != nil {
		c.log.Warn("reload: the replica certificate was not renewed; the previous one stays", logging.Err(err))
	}
	c.log.Info("reloaded the CA and the serving certificates", "signer_pin", certs.Pin(c.Authority.Roots()[0]))
	return nil
}

func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	kp, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return kp, fmt.Errorf("api tls (api.tls_cert %s, api.tls_key %s): %w", certFile, keyFile, err)
	}
	if kp.Leaf == nil && len(kp.Certificate) > 0 {
		kp.Leaf, _ = x509.ParseCertificate(kp.Certificate[0])
	}
	return kp, nil
}

// ServingCerts returns the leaf certificates the API and the tunnel
// listener present to new connections.
func (c *Coordinator) ServingCerts() (api, tunnel *x509.Certificate) {
	return leafOf(c.certs.api.Load()), leafOf(c.certs.tunnel.Load())
}

func leafOf(c *tls.Certificate) *x509.Certificate {
	if c == nil {
		return nil
	}
	if c.Leaf != nil {
		return c.Leaf
	}
	if len(c.Certificate) == 0 {
		return nil
	}
	l, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil
	}
	return l
}
