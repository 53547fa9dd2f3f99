package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
)

// yamuxConfig: 16 MiB stream windows, 15 s keepalive, a deep accept backlog.
func yamuxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.AcceptBacklog = 4096
	c.EnableKeepAlive = true
	c.KeepAliveInterval = KeepAlive
	c.ConnectionWriteTimeout = 30 * time.Second
	c.MaxStreamWindowSize = YamuxWindow
	c.StreamOpenTimeout = 30 * time.Second
	c.StreamCloseTimeout = 5 * time.Minute
	c.LogOutput = io.Discard
	return c
}

// TCPListenerConfig configures ListenTCP.
type TCPListenerConfig struct {
	// TLS is the tunnel's server config. It must require and verify client
	// certificates; its NextProtos is set to ALPNTunnel.
	TLS *tls.Config
	// EnrollTLS is served to ClientHellos that offer ALPNEnroll (no client
	// certificate). When nil, enrollment is refused at the handshake.
	EnrollTLS *tls.Config
	// OnEnroll gets each handshaken enrollment connection in its own
	// goroutine; it owns and closes conn.
	OnEnroll func(conn net.Conn)
	// OnHandshakeError hears every failed handshake. Optional.
	OnHandshakeError func(error)
	// HandshakeTimeout: when zero, 10 s.
	HandshakeTimeout time.Duration
}

// ListenTCP serves yamux tunnel sessions and enrollment on ln, told apart by
// ALPN. Handshakes run in their own goroutines: a slow client never blocks
// Accept.
func ListenTCP(ln net.Listener, cfg TCPListenerConfig) Listener {
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	tunnelConf := withALPN(cfg.TLS, ALPNTunnel)
	var enrollConf *tls.Config
	if cfg.EnrollTLS != nil {
		enrollConf = withALPN(cfg.EnrollTLS, ALPNEnroll)
		enrollConf.ClientAuth = tls.NoClientCert
	}
	pick := &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			for _, p := range hi.SupportedProtos {
				if p == ALPNEnroll {
					if enrollConf == nil {
						return nil, errors.New("tunnel: enrollment is not served here")
					}
					return enrollConf, nil
				}
			}
			if tunnelConf.GetConfigForClient != nil {
				c, err := tunnelConf.GetConfigForClient(hi)
				if err != nil || c == nil {
					return c, err
				}
				return withALPN(c, ALPNTunnel), nil
			}
			return tunnelConf, nil
		},
	}
	l := &tcpListener{ln: ln, cfg: cfg, pick: pick, sessions: make(chan Session, 64), done: make(chan struct{})}
	go l.loop()
	return l
}

type tcpListener struct {
	ln       net.Listener
	cfg      TCPListenerConfig
	pick     *tls.Config
	sessions chan Session
	done     chan struct{}
	once     sync.Once
	err      error
}

func (l *tcpListener) loop() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.err = err
			l.Close()
			return
		}
		go l.handshake(c)
	}
}

func (l *tcpListener) handshake(c net.Conn) {
	tc := tls.Server(c, l.pick)
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.HandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		if l.cfg.OnHandshakeError != nil {
			l.cfg.OnHandshakeError(err)
		}
		c.Close()
		return
	}
	switch tc.ConnectionState().NegotiatedProtocol {
	case ALPNEnroll:
		if l.cfg.OnEnroll == nil {
			c.Close()
			return
		}
		l.cfg.OnEnroll(tc)
		return
	case ALPNTunnel:
	default:
		c.Close()
		return
	}
	ys, err := yamux.Server(tc, yamuxConfig())
	if err != nil {
		c.Close()
		return
	}
	s := &yamuxSession{s: ys, tls: tc.ConnectionState()}
	select {
	case l.sessions <- s:
	case <-l.done:
		ys.Close()
	}
}

func (l *tcpListener) Accept(ctx context.Context) (Session, error) {
	select {
	case s := <-l.sessions:
		return s, nil
	case <-l.done:
		if l.err != nil {
			return nil, l.err
		}
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *tcpListener) Addr() net.Addr { return l.ln.Addr() }

func (l *tcpListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.ln.Close()
}

func dialTLS(ctx context.Context, addr string, tlsConf *tls.Config, proto string) (*tls.Conn, error) {
	tc := withALPN(tlsConf, proto)
	d := &tls.Dialer{NetDialer: &net.Dialer{KeepAlive: KeepAlive}, Config: tc}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	conn := c.(*tls.Conn)
	if got := conn.ConnectionState().NegotiatedProtocol; got != proto {
		conn.Close()
		return nil, fmt.Errorf("tunnel: %s did not negotiate %s", addr, proto)
	}
	return conn, nil
}

// DialYamux dials a tunnel session over yamux on TLS/TCP.
func DialYamux(ctx context.Context, addr string, tlsConf *tls.Config) (Session, error) {
	conn, err := dialTLS(ctx, addr, tlsConf, ALPNTunnel)
	if err != nil {
		return nil, err
	}
	ys, err := yamux.Client(conn, yamuxConfig())
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &yamuxSession{s: ys, tls: conn.ConnectionState()}, nil
}

// DialEnroll dials the enrollment protocol. tlsConf must check the server
// (enrollment pins the CA).
func DialEnroll(ctx context.Context, addr string, tlsConf *tls.Config) (*tls.Conn, error) {
	return dialTLS(ctx, addr, tlsConf, ALPNEnroll)
}

type yamuxSession struct {
	s   *yamux.Session
	tls tls.ConnectionState
}

func (s *yamuxSession) OpenStream(ctx context.Context) (Stream, error) {
	st, err := s.s.OpenStream()
	if err != nil {
		return nil, err
	}
	return &yamuxStream{st}, nil
}

func (s *yamuxSession) AcceptStream(ctx context.Context) (Stream, error) {
	type res struct {
		st  *yamux.Stream
		err error
	}
	if ctx.Done() == nil {
		st, err := s.s.AcceptStream()
		if err != nil {
			return nil, err
		}
		return &yamuxStream{st}, nil
	}
	ch := make(chan res, 1)
	go func() {
		st, err := s.s.AcceptStream()
		ch <- res{st, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		return &yamuxStream{r.st}, nil
	case <-ctx.Done():
		// The pending accept ends with the session; a stream it takes
		// after this is closed.
		go func() {
			if r := <-ch; r.st != nil {
				r.st.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

func (s *yamuxSession) Transport() string                    { return TransportYamux }
func (s *yamuxSession) ConnectionState() tls.ConnectionState { return s.tls }
func (s *yamuxSession) RemoteAddr() net.Addr                 { return s.s.RemoteAddr() }
func (s *yamuxSession) Done() <-chan struct{}                { return s.s.CloseChan() }
func (s *yamuxSession) NumStreams() int                      { return s.s.NumStreams() }
func (s *yamuxSession) Close() error                         { return s.s.Close() }

// yamuxStream: yamux's Close is a half-close (FIN); the stream is released
// once both sides closed. Close also unblocks our own pending reads.
type yamuxStream struct{ *yamux.Stream }

func (s *yamuxStream) CloseWrite() error { return s.Stream.Close() }

func (s *yamuxStream) Close() error {
	err := s.Stream.Close()
	s.Stream.SetReadDeadline(time.Now())
	return err
}
