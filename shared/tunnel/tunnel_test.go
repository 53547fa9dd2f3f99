package tunnel_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/tunnel"
	"github.com/olivares-dev/olivares/shared/tunnel/tunneltest"
	"github.com/olivares-dev/olivares/shared/wire"
)

// serveAttach answers one attach-like call: it reads the header, checks the
// caller half-closed, replies, sends frames and closes.
func serveAttach(ctx context.Context, s tunnel.Session, frames []string) error {
	st, err := s.AcceptStream(ctx)
	if err != nil {
		return fmt.Errorf("accept: %w", err)
	}
	defer st.Close()
	dl, _ := ctx.Deadline()
	st.SetDeadline(dl)
	var h wire.Header
	if err := wire.ReadMessage(st, &h); err != nil {
		return fmt.Errorf("read header: %w", err)
	}
	if h.Op != "attach" || h.RunRef != "run_1" || string(h.Params) != `{"from":2}` {
		return fmt.Errorf("header = %+v, want attach run_1 {\"from\":2}", h)
	}
	if err := wire.ReadMessage(st, &h); err != io.EOF {
		return fmt.Errorf("read after the caller's CloseWrite: got %v, want io.EOF", err)
	}
	if err := wire.Respond(st, map[string]int{"from": 2}, nil); err != nil {
		return fmt.Errorf("respond: %w", err)
	}
	for _, f := range frames {
		if err := wire.WriteFrame(st, []byte(f)); err != nil {
			return fmt.Errorf("write frame: %w", err)
		}
	}
	return nil
}

func TestCallBothWays(t *testing.T) {
	frames := []string{"seq 2", "seq 3", "", "seq 5"}
	for _, tr := range tunneltest.Transports {
		for _, opener := range []string{"agent", "coordinator"} {
			t.Run(tr+"/"+opener+" opens", func(t *testing.T) {
				ctx := testContext(t, 10*time.Second)
				agent, coord := tunneltest.Pair(t, tr)
				open, serve := agent, coord
				if opener == "coordinator" {
					open, serve = coord, agent
				}
				served := make(chan error, 1)
				go func() { served <- serveAttach(ctx, serve, frames) }()

				st, err := open.OpenStream(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				dl, _ := ctx.Deadline()
				st.SetDeadline(dl)
				h := wire.Header{Op: "attach", RunRef: "run_1", Params: json.RawMessage(`{"from":2}`)}
				if err := wire.WriteMessage(st, h); err != nil {
					t.Fatal(err)
				}
				if err := st.CloseWrite(); err != nil {
					t.Fatal(err)
				}
				var r wire.Reply
				if err := wire.ReadMessage(st, &r); err != nil {
					t.Fatalf("read reply after CloseWrite: %v", err)
				}
				if !r.OK || string(r.Result) != `{"from":2}` {
					t.Fatalf("reply = %+v, want ok with {\"from\":2}", r)
				}
				var got []string
				buf := make([]byte, 0, 64)
				for {
					p, err := wire.ReadFrame(st, buf)
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("frame %d: %v", len(got), err)
					}
					got = append(got, string(p))
				}
				if fmt.Sprint(got) != fmt.Sprint(frames) {
					t.Fatalf("frames = %q, want %q", got, frames)
				}
				if err := <-served; err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func TestErrorPassesThrough(t *testing.T) {
	for _, tr := range tunneltest.Transports {
		t.Run(tr, func(t *testing.T) {
			ctx := testContext(t, 10*time.Second)
			agent, coord := tunneltest.Pair(t, tr)
			go func() {
				st, err := agent.AcceptStream(ctx)
				if err != nil {
					return
				}
				defer st.Close()
				var h wire.Header
				wire.ReadMessage(st, &h)
				wire.Respond(st, nil, &wire.Error{Status: http.StatusNotFound, Code: "run_not_found", Message: "no run " + h.RunRef})
			}()
			st, err := coord.OpenStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			err = wire.Call(st, wire.Header{Op: "attach", RunRef: "run_9"}, nil, nil)
			var we *wire.Error
			if !errors.As(err, &we) || we.Status != http.StatusNotFound || we.Code != "run_not_found" || we.Message != "no run run_9" {
				t.Fatalf("got %v, want the agent's 404 run_not_found", err)
			}
		})
	}
}

func TestSessionState(t *testing.T) {
	for _, tr := range tunneltest.Transports {
		t.Run(tr, func(t *testing.T) {
			p := tunneltest.NewPKI(t)
			agent, coord := tunneltest.Connect(t, tr, tunneltest.Listen(t, tr, p.ServerTLS(), nil), p.ClientTLS())
			for _, c := range []struct {
				side string
				s    tunnel.Session
				peer tls.Certificate
			}{{"agent", agent, p.Server}, {"coordinator", coord, p.Client}} {
				if got := c.s.Transport(); got != tr {
					t.Errorf("%s: Transport() = %q, want %q", c.side, got, tr)
				}
				cs := c.s.ConnectionState()
				if cs.Version != tls.VersionTLS13 {
					t.Errorf("%s: TLS version %x, want TLS 1.3", c.side, cs.Version)
				}
				if cs.NegotiatedProtocol != tunnel.ALPNTunnel {
					t.Errorf("%s: ALPN %q, want %q", c.side, cs.NegotiatedProtocol, tunnel.ALPNTunnel)
				}
				if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, c.peer.Certificate[0]) {
					t.Errorf("%s: peer certificate missing or not the peer's leaf", c.side)
				}
				if a, ok := c.s.RemoteAddr().(interface{ String() string }); !ok || a.String() == "" {
					t.Errorf("%s: RemoteAddr() = %v", c.side, c.s.RemoteAddr())
				}
				if n := c.s.NumStreams(); n != 0 {
					t.Errorf("%s: NumStreams() = %d on a fresh session, want 0", c.side, n)
				}
			}
		})
	}
}

func TestRefusedAtHandshake(t *testing.T) {
	clients := []struct {
		name string
		conf func(p *tunneltest.PKI, t *testing.T) *tls.Config
	}{
		{"no certificate", func(p *tunneltest.PKI, t *testing.T) *tls.Config { return p.AnonymousClientTLS() }},
		{"certificate of another CA", func(p *tunneltest.PKI, t *testing.T) *tls.Config {
			c := p.AnonymousClientTLS()
			c.Certificates = []tls.Certificate{tunneltest.NewPKI(t).Client}
			return c
		}},
	}
	for _, tr := range tunneltest.Transports {
		for _, client := range clients {
			t.Run(tr+"/"+client.name, func(t *testing.T) {
				t.Parallel()
				ctx := testContext(t, 10*time.Second)
				p := tunneltest.NewPKI(t)
				failures := make(chan error, 8)
				l := tunneltest.Listen(t, tr, p.ServerTLS(), func(err error) {
					select {
					case failures <- err:
					default:
					}
				})
				accepted := make(chan tunnel.Session, 1)
				go func() {
					if s, err := l.Accept(ctx); err == nil {
						accepted <- s
					}
				}()

				sess, err := tunneltest.Dial(ctx, tr, l.Addr().String(), client.conf(p, t))
				switch {
				case err != nil:
					t.Logf("dial refused: %v", err)
				case tr == tunnel.TransportYamux:
					sess.Close()
					t.Fatal("DialYamux succeeded, want the server's refusal")
				default:
					// QUIC: our side of the handshake completed; the
					// server's verdict ends the session.
					select {
					case <-sess.Done():
					case <-ctx.Done():
						t.Fatal("the session of a refused client stayed up")
					}
					sess.Close()
				}
				select {
				case err := <-failures:
					t.Logf("OnHandshakeError: %v", err)
				case <-ctx.Done():
					t.Fatal("OnHandshakeError was not called")
				}
				select {
				case s := <-accepted:
					s.Close()
					t.Fatal("the listener accepted a refused client")
				default:
				}
			})
		}
	}
}

func TestEnrollmentByALPN(t *testing.T) {
	ctx := testContext(t, 10*time.Second)
	p := tunneltest.NewPKI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	type enrollRequest struct {
		Token string `json:"token"`
	}
	enrolled := make(chan string, 1)
	failures := make(chan error, 8)
	l := tunnel.ListenTCP(ln, tunnel.TCPListenerConfig{
		TLS:       p.ServerTLS(),
		EnrollTLS: &tls.Config{Certificates: []tls.Certificate{p.Server}},
		OnEnroll: func(c net.Conn) {
			defer c.Close()
			var req enrollRequest
			if err := wire.ReadMessage(c, &req); err != nil {
				return
			}
			wire.WriteMessage(c, req)
			enrolled <- req.Token
		},
		OnHandshakeError: func(err error) { failures <- err },
	})
	defer l.Close()

	conn, err := tunnel.DialEnroll(ctx, l.Addr().String(), p.AnonymousClientTLS())
	if err != nil {
		t.Fatalf("enrollment without a client certificate: %v", err)
	}
	defer conn.Close()
	if err := wire.WriteMessage(conn, enrollRequest{Token: "jt_1"}); err != nil {
		t.Fatal(err)
	}
	var echo enrollRequest
	if err := wire.ReadMessage(conn, &echo); err != nil || echo.Token != "jt_1" {
		t.Fatalf("enrollment echo = %+v, %v; want jt_1", echo, err)
	}
	if got := <-enrolled; got != "jt_1" {
		t.Fatalf("OnEnroll got token %q, want jt_1", got)
	}
	if got := conn.ConnectionState().NegotiatedProtocol; got != tunnel.ALPNEnroll {
		t.Fatalf("ALPN %q, want %q", got, tunnel.ALPNEnroll)
	}

	// The same client asking for the tunnel is refused.
	if s, err := tunnel.DialYamux(ctx, l.Addr().String(), p.AnonymousClientTLS()); err == nil {
		s.Close()
		t.Fatal("tunnel without a client certificate was accepted")
	}
	select {
	case err := <-failures:
		t.Logf("OnHandshakeError: %v", err)
	case <-ctx.Done():
		t.Fatal("OnHandshakeError was not called")
	}
}

func TestEnrollmentNotServed(t *testing.T) {
	ctx := testContext(t, 10*time.Second)
	p := tunneltest.NewPKI(t)
	failures := make(chan error, 8)
	l := tunneltest.Listen(t, tunnel.TransportYamux, p.ServerTLS(), func(err error) { failures <- err })
	if c, err := tunnel.DialEnroll(ctx, l.Addr().String(), p.AnonymousClientTLS()); err == nil {
		c.Close()
		t.Fatal("enrollment was served without EnrollTLS")
	}
	select {
	case err := <-failures:
		t.Logf("OnHandshakeError: %v", err)
	case <-ctx.Done():
		t.Fatal("OnHandshakeError was not called")
	}
}

func TestListenRequiresClientAuth(t *testing.T) {
	ctx := testContext(t, 10*time.Second)
	p := tunneltest.NewPKI(t)
	lax := p.ServerTLS()
	lax.ClientAuth = tls.VerifyClientCertIfGiven

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := tunnel.ListenTCP(ln, tunnel.TCPListenerConfig{TLS: lax})
	defer l.Close()
	if _, err := l.Accept(ctx); !errors.Is(err, tunnel.ErrNoClientAuth) {
		t.Fatalf("TCP Accept: got %v, want ErrNoClientAuth", err)
	}

	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if ql, err := tunnel.ListenQUIC(pc, lax, nil); !errors.Is(err, tunnel.ErrNoClientAuth) {
		if ql != nil {
			ql.Close()
		}
		t.Fatalf("ListenQUIC: got %v, want ErrNoClientAuth", err)
	}
}

func TestSlowClientDoesNotBlockAccept(t *testing.T) {
	ctx := testContext(t, 10*time.Second)
	p := tunneltest.NewPKI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	failures := make(chan error, 8)
	l := tunnel.ListenTCP(ln, tunnel.TCPListenerConfig{
		TLS:              p.ServerTLS(),
		HandshakeTimeout: 500 * time.Millisecond,
		OnHandshakeError: func(err error) { failures <- err },
	})
	defer l.Close()

	silent, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	go func() {
		if s, err := tunnel.DialYamux(ctx, l.Addr().String(), p.ClientTLS()); err == nil {
			<-ctx.Done()
			s.Close()
		}
	}()
	s, err := l.Accept(ctx)
	if err != nil {
		t.Fatalf("accept behind a silent client: %v", err)
	}
	s.Close()
	select {
	case err := <-failures:
		t.Logf("silent client: %v", err)
	case <-ctx.Done():
		t.Fatal("the silent client's handshake never timed out")
	}
}

func TestDialQUICWithoutListener(t *testing.T) {
	p := tunneltest.NewPKI(t)
	for _, peer := range []string{"closed port", "silent socket"} {
		t.Run(peer, func(t *testing.T) {
			t.Parallel()
			pc, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := pc.LocalAddr().String()
			if peer == "closed port" {
				pc.Close()
			} else {
				// Reads nothing: like UDP dropped on the way.
				defer pc.Close()
			}
			// "auto" falls back to yamux after 3 s (FallbackAfter).
			ctx := testContext(t, 3*time.Second)
			start := time.Now()
			s, err := tunnel.DialQUIC(ctx, addr, p.ClientTLS())
			if err == nil {
				s.Close()
				t.Fatal("DialQUIC succeeded with nobody listening")
			}
			t.Logf("failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
		})
	}
}

func TestDoneWhenPeerCloses(t *testing.T) {
	for _, tr := range tunneltest.Transports {
		for _, closer := range []string{"agent", "coordinator"} {
			t.Run(tr+"/"+closer+" closes", func(t *testing.T) {
				ctx := testContext(t, 10*time.Second)
				agent, coord := tunneltest.Pair(t, tr)
				closing, peer := agent, coord
				if closer == "coordinator" {
					closing, peer = coord, agent
				}
				if err := closing.Close(); err != nil {
					t.Fatal(err)
				}
				tunneltest.AwaitDone(t, closing)
				tunneltest.AwaitDone(t, peer)
				if st, err := peer.OpenStream(ctx); err == nil {
					st.Close()
					t.Fatal("OpenStream on a dead session succeeded")
				}
			})
		}
	}
}

func TestListenerCloseEndsSessions(t *testing.T) {
	for _, tr := range tunneltest.Transports {
		t.Run(tr, func(t *testing.T) {
			ctx := testContext(t, 10*time.Second)
			p := tunneltest.NewPKI(t)
			l := tunneltest.Listen(t, tr, p.ServerTLS(), nil)
			agent, coord := tunneltest.Connect(t, tr, l, p.ClientTLS())
			if err := l.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if _, err := l.Accept(ctx); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("Accept after Close: got %v, want net.ErrClosed", err)
			}
			tunneltest.AwaitDone(t, coord) // the session the listener accepted
			tunneltest.AwaitDone(t, agent) // and its peer
		})
	}
}

func TestThousandStreams(t *testing.T) {
	for _, tr := range tunneltest.Transports {
		t.Run(tr, func(t *testing.T) {
			ctx := testContext(t, 15*time.Second)
			agent, coord := tunneltest.Pair(t, tr)
			go tunneltest.ServeEcho(coord)
			open, err := tunneltest.EchoStreams(ctx, agent, 1000, 64)
			if err != nil {
				t.Fatal(err)
			}
			if open != 1000 {
				t.Errorf("NumStreams() = %d with 1000 streams open, want 1000", open)
			}
			// quic counts Close calls, which EchoStreams has all made; yamux
			// frees a stream on its receive loop just after the reader saw EOF.
			if n := agent.NumStreams(); tr == tunnel.TransportQUIC && n != 0 {
				t.Errorf("NumStreams() = %d after every stream closed, want 0", n)
			}
		})
	}
}

// Close releases our own blocked read at once on both transports, and the
// peer sees our side end.
func TestCloseReleasesReads(t *testing.T) {
	for _, tr := range tunneltest.Transports {
		t.Run(tr, func(t *testing.T) {
			ctx := testContext(t, 10*time.Second)
			agent, coord := tunneltest.Pair(t, tr)
			st, err := coord.OpenStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			peer, err := agent.AcceptStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			dl, _ := ctx.Deadline()
			peer.SetDeadline(dl)

			read := make(chan error, 1)
			go func() {
				_, err := st.Read(make([]byte, 1))
				read <- err
			}()
			st.Close()
			select {
			case err := <-read:
				if err == nil {
					t.Fatal("Read after Close returned data")
				}
			case <-ctx.Done():
				t.Fatal("Close did not release a blocked Read")
			}
			if got, err := io.ReadAll(peer); err != nil || string(got) != "x" {
				t.Fatalf("peer read %q, %v; want \"x\" then EOF", got, err)
			}
		})
	}
}
