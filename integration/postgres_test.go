package integration

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
)

// cutProxy forwards TCP connections to a PostgreSQL server until Cut,
// which closes its listener and every connection (the database host gone
// from the network), and again after Restore on the same port.
type cutProxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{t: t, addr: ln.Addr().String(), target: target}
	p.serve(ln)
	t.Cleanup(p.Cut)
	return p
}

func (p *cutProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

// Cut closes the listener and every forwarded connection.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Restore listens again on the same address.
func (p *cutProxy) Restore() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serve(ln)
}

// R-CFG-5: /readyz says not ready (503 not_ready, naming the database) while the
// coordinator's PostgreSQL is unreachable, and ready again once it is back;
// /healthz, which is about the process, stays 200 throughout.
func TestReadyzFollowsDatabase(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	dsn := c.NewDatabase(t)
	proxy := newCutProxy(t, net.JoinHostPort(c.Host, strconv.Itoa(c.Port)))
	dsn = strings.Replace(dsn, net.JoinHostPort(c.Host, strconv.Itoa(c.Port)), proxy.addr, 1)
	env := NewEnv(t, Options{Postgres: dsn})

	ready := func(want int) func() bool {
		return func() bool { return env.Do(http.MethodGet, "/readyz", "", "").Status == want }
	}
	Await(t, 10*time.Second, "readyz 200 with the database up", ready(http.StatusOK))

	proxy.Cut()
	Await(t, 20*time.Second, "readyz 503 with the database unreachable", ready(http.StatusServiceUnavailable))
	r := env.Do(http.MethodGet, "/readyz", "", "")
	if code := r.ErrorCode(); code != "not_ready" || !strings.Contains(string(r.Body), "database") {
		t.Fatalf("readyz while the database is down: %d %s, want not_ready naming the database", r.Status, r.Body)
	}
	if h := env.Do(http.MethodGet, "/healthz", "", ""); h.Status != http.StatusOK {
		t.Fatalf("healthz while the database is down: %d, want 200", h.Status)
	}

	proxy.Restore()
	Await(t, 20*time.Second, "readyz 200 once the database is back", ready(http.StatusOK))
	// The store works again through the API.
	c2 := env.Client(env.AdminToken)
	c2.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs", nil, nil)
}
