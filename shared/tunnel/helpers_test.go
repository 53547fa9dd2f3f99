package tunnel_test

// Test helpers of the tunnel package: a throwaway PKI made with crypto/x509
// (the tunnel's tests do not depend on how the certs package makes
// production certificates), listeners on 127.0.0.1 and an echo peer.

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/tunnel"
)

var transports = []string{tunnel.TransportYamux, tunnel.TransportQUIC}

// testPKI is a CA with one server and one client certificate.
type testPKI struct {
	pool   *x509.CertPool
	server tls.Certificate // 127.0.0.1, ::1, localhost; CN coordinator-test
	client tls.Certificate // CN node-test
	ca     *x509.Certificate
	caKey  crypto.Signer
}

func newPKI(t testing.TB) *testPKI {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "tunnel test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{pool: x509.NewCertPool(), ca: ca, caKey: key}
	p.pool.AddCert(ca)
	p.server = p.issue(t, "coordinator-test", true)
	p.client = p.issue(t, "node-test", false)
	return p
}

func (p *testPKI) issue(t testing.TB, cn string, server bool) tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, key.Public(), p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func (p *testPKI) serverTLS() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{p.server},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    p.pool,
	}
}

func (p *testPKI) clientTLS() *tls.Config {
	c := p.anonymousTLS()
	c.Certificates = []tls.Certificate{p.client}
	return c
}

// anonymousTLS trusts the CA and presents no certificate.
func (p *testPKI) anonymousTLS() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: p.pool}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// listen serves transport on 127.0.0.1:0; cleanup closes it.
func listen(t testing.TB, transport string, serverTLS *tls.Config, onHandshakeError func(error)) tunnel.Listener {
	t.Helper()
	var l tunnel.Listener
	switch transport {
	case tunnel.TransportYamux:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l = tunnel.ListenTCP(ln, tunnel.TCPListenerConfig{TLS: serverTLS, OnHandshakeError: onHandshakeError})
	case tunnel.TransportQUIC:
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() }) // after l.Close: cleanups run last first
		l, err = tunnel.ListenQUIC(pc, serverTLS, onHandshakeError)
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown transport %q", transport)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func dial(ctx context.Context, transport, addr string, clientTLS *tls.Config) (tunnel.Session, error) {
	if transport == tunnel.TransportQUIC {
		return tunnel.DialQUIC(ctx, addr, clientTLS)
	}
	return tunnel.DialYamux(ctx, addr, clientTLS)
}

// pair returns both ends of one live tunnel: the agent dialed, the
// coordinator accepted. Cleanup closes both.
func pair(t testing.TB, transport string) (agent, coordinator tunnel.Session) {
	t.Helper()
	p := newPKI(t)
	l := listen(t, transport, p.serverTLS(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accepted := make(chan tunnel.Session, 1)
	go func() {
		s, _ := l.Accept(ctx)
		accepted <- s
	}()
	agent, err := dial(ctx, transport, l.Addr().String(), p.clientTLS())
	if err != nil {
		t.Fatalf("dial %s: %v", transport, err)
	}
	t.Cleanup(func() { agent.Close() })
	coordinator = <-accepted
	if coordinator == nil {
		t.Fatalf("accept %s: %v", transport, ctx.Err())
	}
	t.Cleanup(func() { coordinator.Close() })
	return agent, coordinator
}

// serveEcho writes back what each accepted stream sends until it
// half-closes, then closes the stream; it returns when s dies.
func serveEcho(s tunnel.Session) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		st, err := s.AcceptStream(context.Background())
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer st.Close()
			st.SetDeadline(time.Now().Add(time.Minute))
			io.Copy(st, st)
		}()
	}
}

// echoStreams opens n streams at once and, once all are open, echoes size
// bytes on each through a serveEcho peer. It returns s.NumStreams() while
// all n were open, and the first error.
func echoStreams(ctx context.Context, s tunnel.Session, n, size int) (open int, err error) {
	deadline, _ := ctx.Deadline()
	var (
		opened, done sync.WaitGroup
		start        = make(chan struct{})
		once         sync.Once
	)
	fail := func(e error) { once.Do(func() { err = e }) }
	opened.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			want := bytes.Repeat([]byte{byte(i)}, size)
			st, err := s.OpenStream(ctx)
			if err != nil {
				opened.Done()
				fail(fmt.Errorf("stream %d: open: %w", i, err))
				return
			}
			defer st.Close()
			st.SetDeadline(deadline)
			_, err = st.Write(want) // QUIC shows the peer a stream once it carries data
			opened.Done()
			if err != nil {
				fail(fmt.Errorf("stream %d: write: %w", i, err))
				return
			}
			<-start
			if err := st.CloseWrite(); err != nil {
				fail(fmt.Errorf("stream %d: close write: %w", i, err))
				return
			}
			got, err := io.ReadAll(st)
			if err != nil {
				fail(fmt.Errorf("stream %d: read: %w", i, err))
				return
			}
			if !bytes.Equal(got, want) {
				fail(fmt.Errorf("stream %d: got %d bytes back, want the %d sent", i, len(got), size))
			}
		}()
	}
	opened.Wait()
	open = s.NumStreams()
	close(start)
	done.Wait()
	return open, err
}
