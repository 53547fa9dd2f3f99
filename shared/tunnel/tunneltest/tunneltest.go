// Package tunneltest builds throwaway PKIs and connected tunnel sessions on
// 127.0.0.1 for tests and benchmarks.
//
// It is for _test.go files only: it fails the test on any error, and
// nothing it makes is meant to outlive the test (t.Cleanup closes it all).
package tunneltest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/shared/tunnel"
)

// Transports lists both transports, for table tests.
var Transports = []string{tunnel.TransportYamux, tunnel.TransportQUIC}

// Timeout bounds every wait in this package: dials, accepts, Await*.
const Timeout = 10 * time.Second

// Hosts are the names on the server certificate.
var Hosts = []string{"127.0.0.1", "localhost"}

// PKI is a fresh CA with one server certificate and one node certificate.
type PKI struct {
	CA *certs.Authority
	// Pool holds the CA root: RootCAs for clients, ClientCAs for servers.
	Pool *x509.CertPool
	// Server is valid for Hosts, with the chain leaf then CA.
	Server tls.Certificate
	// Client is a node certificate for NodeID.
	Client tls.Certificate
	NodeID string
}

// NewPKI makes a CA in a temporary directory and issues a server
// certificate and a node certificate ("node-1") from it.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	now := time.Now()
	ca, _, err := certs.InitAuthority(t.TempDir(), now)
	if err != nil {
		t.Fatalf("tunneltest: CA: %v", err)
	}
	srv, err := ca.IssueServer(Hosts, now, time.Hour)
	if err != nil {
		t.Fatalf("tunneltest: server certificate: %v", err)
	}
	p := &PKI{CA: ca, Pool: ca.Pool(), Server: srv, NodeID: "node-1"}
	p.Client = p.NodeCert(t, p.NodeID)
	return p
}

// NodeCert issues a node certificate for id the way enrollment does: a new
// key, a CSR, SignNode. Leaf is set.
func (p *PKI) NodeCert(t testing.TB, id string) tls.Certificate {
	t.Helper()
	key, err := certs.NewKey()
	if err != nil {
		t.Fatalf("tunneltest: node key: %v", err)
	}
	csr, err := certs.NewCSR(key)
	if err != nil {
		t.Fatalf("tunneltest: CSR: %v", err)
	}
	leaf, err := p.CA.SignNode(csr, id, time.Now(), time.Hour)
	if err != nil {
		t.Fatalf("tunneltest: sign node %q: %v", id, err)
	}
	return tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}
}

// ServerTLS is the tunnel server config: the server certificate, client
// certificates required and verified against the CA, TLS 1.3.
func (p *PKI) ServerTLS() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.Server},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    p.Pool,
		MinVersion:   tls.VersionTLS13,
	}
}

// ClientTLS is a node's config: it trusts the CA and presents Client.
func (p *PKI) ClientTLS() *tls.Config {
	c := p.AnonymousClientTLS()
	c.Certificates = []tls.Certificate{p.Client}
	return c
}

// AnonymousClientTLS trusts the CA and presents no certificate, as an
// enrolling node or a stranger would.
func (p *PKI) AnonymousClientTLS() *tls.Config {
	return &tls.Config{RootCAs: p.Pool, MinVersion: tls.VersionTLS13}
}

// Listen serves transport on 127.0.0.1:0 with serverTLS. onHandshakeError
// may be nil; on QUIC it may be called after the test ended, so it must not
// block or call t. The listener (and its socket) is closed at cleanup. For
// enrollment on TCP, call tunnel.ListenTCP directly.
func Listen(t testing.TB, transport string, serverTLS *tls.Config, onHandshakeError func(error)) tunnel.Listener {
	t.Helper()
	var l tunnel.Listener
	switch transport {
	case tunnel.TransportYamux:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("tunneltest: %v", err)
		}
		l = tunnel.ListenTCP(ln, tunnel.TCPListenerConfig{TLS: serverTLS, OnHandshakeError: onHandshakeError})
	case tunnel.TransportQUIC:
		pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatalf("tunneltest: %v", err)
		}
		// Registered first, so it runs after the listener's Close.
		t.Cleanup(func() { pc.Close() })
		l, err = tunnel.ListenQUIC(pc, serverTLS, onHandshakeError)
		if err != nil {
			t.Fatalf("tunneltest: %v", err)
		}
	default:
		t.Fatalf("tunneltest: unknown transport %q", transport)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// Dial dials transport at addr with DialYamux or DialQUIC.
func Dial(ctx context.Context, transport, addr string, conf *tls.Config) (tunnel.Session, error) {
	switch transport {
	case tunnel.TransportYamux:
		return tunnel.DialYamux(ctx, addr, conf)
	case tunnel.TransportQUIC:
		return tunnel.DialQUIC(ctx, addr, conf)
	}
	return nil, fmt.Errorf("tunneltest: unknown transport %q", transport)
}

// Connect dials l with conf and returns both ends once the
// listener has accepted the session. Both are closed at cleanup.
func Connect(t testing.TB, transport string, l tunnel.Listener, conf *tls.Config) (client, server tunnel.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	type accepted struct {
		s   tunnel.Session
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		s, err := l.Accept(ctx)
		ch <- accepted{s, err}
	}()
	addr := l.Addr().String()
	client, err := Dial(ctx, transport, addr, conf)
	if err != nil {
		cancel()
		if a := <-ch; a.s != nil {
			a.s.Close()
		}
		t.Fatalf("tunneltest: dial %s %s: %v", transport, addr, err)
	}
	t.Cleanup(func() { client.Close() })
	a := <-ch
	if a.err != nil {
		t.Fatalf("tunneltest: accept %s: %v", transport, a.err)
	}
	t.Cleanup(func() { a.s.Close() })
	return client, a.s
}

// Pair returns both ends of a fresh tunnel session over transport
// (tunnel.TransportYamux or tunnel.TransportQUIC) on 127.0.0.1, with its own
// PKI. Everything is closed at cleanup.
func Pair(t testing.TB, transport string) (client, server tunnel.Session) {
	t.Helper()
	p := NewPKI(t)
	return Connect(t, transport, Listen(t, transport, p.ServerTLS(), nil), p.ClientTLS())
}

// Await polls cond until it holds, failing the test with what after
// Timeout. It is for state that has no event to wait on (stream counts).
func Await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("tunneltest: timed out after %v waiting for %s", Timeout, what)
		}
		<-tick.C
	}
}

// AwaitStreams waits until s counts want open streams.
func AwaitStreams(t testing.TB, s tunnel.Session, want int) {
	t.Helper()
	Await(t, fmt.Sprintf("%s session to count %d streams", s.Transport(), want), func() bool {
		return s.NumStreams() == want
	})
}

// AwaitDone waits until s is dead.
func AwaitDone(t testing.TB, s tunnel.Session) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(Timeout):
		t.Fatalf("tunneltest: %s session still alive after %v", s.Transport(), Timeout)
	}
}
