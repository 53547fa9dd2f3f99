package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"sync"
	"time"
)

// TCPListenerConfig configures ListenTCP.
type TCPListenerConfig struct {
	// TLS is the tunnel's server config. It must set ClientAuth to
	// tls.RequireAndVerifyClientCert (also on the configs its
	// GetConfigForClient returns); its NextProtos is set to ALPNTunnel and
	// its MinVersion raised to TLS 1.3. Identity checks (VerifyConnection)
	// are the caller's.
	TLS *tls.Config
	// EnrollTLS is served to ClientHellos that offer ALPNEnroll, without a
	// client certificate. When nil, enrollment is refused at the handshake.
	EnrollTLS *tls.Config
	// OnEnroll gets each handshaken enrollment connection in its own
	// goroutine; it owns and closes conn. When nil, enrollment connections
	// are closed after the handshake.
	OnEnroll func(conn net.Conn)
	// OnHandshakeError hears every failed handshake (for metrics), from the
	// handshake's goroutine. Optional.
	OnHandshakeError func(error)
	// HandshakeTimeout bounds each TLS handshake. When zero, 10 s.
	HandshakeTimeout time.Duration
	// Logger gets yamux's own log lines. When nil, they are dropped.
	Logger *log.Logger
	// AcceptBacklog is how many streams a session may have opened and
	// not yet accepted; one more is reset (yamux's). Each session holds
	// that many slots (8 bytes each). When zero, MaxIncomingStream.
	AcceptBacklog int
	// NoKeepAlive turns yamux's own pings off on the sessions: for a
	// caller that watches each session's liveness itself (the fleet's
	// heartbeat watchdog). Each session then spares a goroutine and a
	// ping round trip every KeepAlive.
	NoKeepAlive bool
}

// CheckAndSetDefaults validates c and fills its zero values.
func (c *TCPListenerConfig) CheckAndSetDefaults() error {
	if c.TLS == nil {
		return errors.New("tunnel: TCPListenerConfig.TLS is required")
	}
	if c.TLS.ClientAuth != tls.RequireAndVerifyClientCert {
		return fmt.Errorf("TCPListenerConfig.TLS: %w", ErrNoClientAuth)
	}
	if c.HandshakeTimeout < 0 {
		return fmt.Errorf("tunnel: TCPListenerConfig.HandshakeTimeout is negative (%v)", c.HandshakeTimeout)
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	return nil
}

// errNoProtocol: a ClientHello offered neither of our ALPN protocols.
var errNoProtocol = fmt.Errorf("tunnel: client offered neither %s nor %s", ALPNTunnel, ALPNEnroll)

// ListenTCP serves yamux tunnel sessions and enrollment on ln, told apart by
// ALPN. Each handshake runs in its own goroutine under HandshakeTimeout, so
// a slow client never blocks Accept.
//
// A config that fails CheckAndSetDefaults yields a listener whose Accept
// returns that error: the serve loop reports it at once.
//
// Close closes ln and every session accepted from the listener (as on
// QUIC, where the sessions share the socket). Enrollment connections are
// OnEnroll's and stay open.
func ListenTCP(ln net.Listener, cfg TCPListenerConfig) Listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &tcpListener{
		ln:       ln,
		cfg:      cfg,
		ctx:      ctx,
		cancel:   cancel,
		sessions: make(chan *yamuxSession),
		done:     make(chan struct{}),
		live:     make(map[*yamuxSession]struct{}),
	}
	if err := l.cfg.CheckAndSetDefaults(); err != nil {
		l.fail(err)
		return l
	}
	tunnelConf, err := tunnelServerTLS(cfg.TLS)
	if err != nil {
		l.fail(err)
		return l
	}
	var enrollConf *tls.Config
	if cfg.EnrollTLS != nil {
		enrollConf = withALPN(cfg.EnrollTLS, ALPNEnroll)
		enrollConf.ClientAuth = tls.NoClientCert
	}
	l.pick = &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			offeredEnroll := false
			for _, p := range hi.SupportedProtos {
				switch {
				case p == ALPNTunnel:
					if tunnelConf.GetConfigForClient != nil {
						// crypto/tls does not call the picked config's own
						// GetConfigForClient; nil means "use the config".
						if c, err := tunnelConf.GetConfigForClient(hi); err != nil || c != nil {
							return c, err
						}
					}
					return tunnelConf, nil
				case p == ALPNEnroll:
					if enrollConf != nil {
						return enrollConf, nil
					}
					offeredEnroll = true
				}
			}
			if offeredEnroll {
				return nil, errors.New("tunnel: enrollment is not served here")
			}
			return nil, errNoProtocol
		},
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

type tcpListener struct {
	ln     net.Listener
	cfg    TCPListenerConfig
	pick   *tls.Config
	ctx    context.Context // ends in-flight handshakes on Close
	cancel context.CancelFunc

	sessions chan *yamuxSession
	done     chan struct{} // closed by fail
	wg       sync.WaitGroup

	mu   sync.Mutex
	err  error                      // why done was closed
	live map[*yamuxSession]struct{} // accepted and not yet dead
}

// fail stops the listener with err (the first one sticks).
func (l *tcpListener) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	l.err = err
	close(l.done)
}

func (l *tcpListener) acceptLoop() {
	defer l.wg.Done()
	var delay time.Duration
	for {
		c, err := l.ln.Accept()
		if err != nil {
			// Out of file descriptors and the like pass; back off as
			// net/http does instead of spinning or giving up.
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() && !errors.Is(err, net.ErrClosed) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(delay):
					continue
				case <-l.ctx.Done():
				}
			}
			l.fail(fmt.Errorf("tunnel: accept on %s: %w", l.ln.Addr(), err))
			return
		}
		delay = 0
		l.wg.Add(1)
		go l.handshake(c)
	}
}

func (l *tcpListener) handshake(c net.Conn) {
	defer l.wg.Done()
	tc := tls.Server(c, l.pick)
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.HandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		c.Close()
		if l.cfg.OnHandshakeError != nil {
			l.cfg.OnHandshakeError(fmt.Errorf("tunnel: tls handshake with %s: %w", c.RemoteAddr(), err))
		}
		return
	}
	if tc.ConnectionState().NegotiatedProtocol == ALPNEnroll {
		if l.cfg.OnEnroll == nil {
			tc.Close()
			return
		}
		go l.cfg.OnEnroll(tc)
		return
	}
	s, err := newYamuxSession(tc, true, l.cfg.Logger, l.cfg.AcceptBacklog, !l.cfg.NoKeepAlive)
	if err != nil {
		tc.Close()
		return
	}
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		s.Close()
		return
	}
	// A session leaves live when it is closed (its holder closes it once
	// it ended), and one that died without that is pruned here: no
	// goroutine per session waits for its end (issue 34).
	for o := range l.live {
		select {
		case <-o.Done():
			delete(l.live, o)
		default:
		}
	}
	l.live[s] = struct{}{}
	s.onClose = func() {
		l.mu.Lock()
		delete(l.live, s)
		l.mu.Unlock()
	}
	l.mu.Unlock()
	select {
	case l.sessions <- s:
	case <-l.done:
		s.Close()
	}
}

func (l *tcpListener) Accept(ctx context.Context) (Session, error) {
	select {
	case s := <-l.sessions:
		return s, nil
	case <-l.done:
		l.mu.Lock()
		defer l.mu.Unlock()
		return nil, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *tcpListener) Addr() net.Addr { return l.ln.Addr() }

// Close stops accepting, ends handshakes in flight and every session
// accepted from l, and waits for l's goroutines.
func (l *tcpListener) Close() error {
	l.fail(fmt.Errorf("tunnel: listener %s: %w", l.ln.Addr(), net.ErrClosed))
	l.cancel()
	err := l.ln.Close()
	l.mu.Lock()
	live := make([]*yamuxSession, 0, len(l.live))
	for s := range l.live {
		live = append(live, s)
	}
	l.mu.Unlock()
	for _, s := range live {
		s.Close()
	}
	l.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// dialTLS dials addr and completes a TLS 1.3 handshake that negotiates proto.
func dialTLS(ctx context.Context, addr string, tlsConf *tls.Config, proto string) (*tls.Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{KeepAlive: KeepAlive}, Config: withALPN(tlsConf, proto)}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	conn := c.(*tls.Conn)
	if got := conn.ConnectionState().NegotiatedProtocol; got != proto {
		conn.Close()
		return nil, fmt.Errorf("tunnel: %s negotiated %q, want %q", addr, got, proto)
	}
	return conn, nil
}

// DialEnroll dials the enrollment protocol (ALPNEnroll, TLS 1.3). tlsConf
// must check the server: enrollment pins the CA.
func DialEnroll(ctx context.Context, addr string, tlsConf *tls.Config) (*tls.Conn, error) {
	return dialTLS(ctx, addr, tlsConf, ALPNEnroll)
}
