package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// quicConfig is tuned for bulk output: large windows, 15 s keepalive, 45 s
// idle timeout, many incoming streams, and a short handshake timeout so that
// "auto" falls back to yamux within 3 s when UDP is blocked.
func quicConfig() *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:           2 * time.Second,
		MaxIdleTimeout:                 QUICIdleTimeout,
		KeepAlivePeriod:                KeepAlive,
		MaxIncomingStreams:             MaxIncomingStream,
		InitialStreamReceiveWindow:     8 << 20,
		MaxStreamReceiveWindow:         16 << 20,
		InitialConnectionReceiveWindow: 16 << 20,
		MaxConnectionReceiveWindow:     64 << 20,
	}
}

func withALPN(c *tls.Config, proto string) *tls.Config {
	c = c.Clone()
	c.NextProtos = []string{proto}
	if c.MinVersion < tls.VersionTLS13 {
		c.MinVersion = tls.VersionTLS13
	}
	return c
}

// ListenQUIC serves tunnel sessions over QUIC on pc. tlsConf decides who may
// connect (it must require and verify client certificates). onHandshakeError,
// when set, hears every refusal of tlsConf's VerifyConnection; refusals the
// TLS stack makes before it (no or foreign certificate) are not surfaced by
// quic-go except through qlog, so they are not counted on QUIC.
func ListenQUIC(pc net.PacketConn, tlsConf *tls.Config, onHandshakeError func(error)) (Listener, error) {
	count := func(c *tls.Config) *tls.Config {
		c = withALPN(c, ALPNTunnel)
		if v := c.VerifyConnection; v != nil && onHandshakeError != nil {
			c.VerifyConnection = func(cs tls.ConnectionState) error {
				err := v(cs)
				if err != nil {
					onHandshakeError(err)
				}
				return err
			}
		}
		return c
	}
	tc := count(tlsConf)
	if inner := tlsConf.GetConfigForClient; inner != nil {
		tc.GetConfigForClient = func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := inner(hi)
			if err != nil || c == nil {
				return c, err
			}
			return count(c), nil
		}
	}
	tr := &quic.Transport{Conn: pc}
	ql, err := tr.Listen(tc, quicConfig())
	if err != nil {
		return nil, err
	}
	return &quicListener{tr: tr, l: ql}, nil
}

type quicListener struct {
	tr *quic.Transport
	l  *quic.Listener
}

func (l *quicListener) Accept(ctx context.Context) (Session, error) {
	c, err := l.l.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return newQUICSession(c), nil
}

func (l *quicListener) Addr() net.Addr { return l.l.Addr() }

func (l *quicListener) Close() error {
	err := l.l.Close()
	l.tr.Close()
	return err
}

// DialQUIC dials a tunnel session over QUIC.
func DialQUIC(ctx context.Context, addr string, tlsConf *tls.Config) (Session, error) {
	tc := withALPN(tlsConf, ALPNTunnel)
	if tc.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err == nil {
			tc.ServerName = host
		}
	}
	c, err := quic.DialAddr(ctx, addr, tc, quicConfig())
	if err != nil {
		return nil, err
	}
	return newQUICSession(c), nil
}

type quicSession struct {
	c       *quic.Conn
	streams atomic.Int64
}

func newQUICSession(c *quic.Conn) *quicSession { return &quicSession{c: c} }

func (s *quicSession) wrap(st *quic.Stream) Stream {
	s.streams.Add(1)
	return &quicStream{Stream: st, sess: s}
}

func (s *quicSession) OpenStream(ctx context.Context) (Stream, error) {
	st, err := s.c.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	return s.wrap(st), nil
}

func (s *quicSession) AcceptStream(ctx context.Context) (Stream, error) {
	st, err := s.c.AcceptStream(ctx)
	if err != nil {
		return nil, err
	}
	return s.wrap(st), nil
}

func (s *quicSession) Transport() string { return TransportQUIC }
func (s *quicSession) ConnectionState() tls.ConnectionState {
	return s.c.ConnectionState().TLS
}
func (s *quicSession) RemoteAddr() net.Addr  { return s.c.RemoteAddr() }
func (s *quicSession) Done() <-chan struct{} { return s.c.Context().Done() }
func (s *quicSession) NumStreams() int       { return int(s.streams.Load()) }
func (s *quicSession) Close() error {
	err := s.c.CloseWithError(0, "closed")
	var ae *quic.ApplicationError
	if errors.As(err, &ae) {
		return nil
	}
	return err
}

// quicStream closes on both sides: Close ends our write direction and
// CancelRead releases the receive side (quic-go keeps it otherwise).
type quicStream struct {
	*quic.Stream
	sess *quicSession
	once sync.Once
}

func (s *quicStream) CloseWrite() error { return s.Stream.Close() }

func (s *quicStream) Close() error {
	// Close fails only when our send side was already cancelled (the peer
	// released its side first with STOP_SENDING): the stream is closed
	// either way, so there is nothing to report.
	s.Stream.Close()
	s.Stream.CancelRead(0)
	s.once.Do(func() { s.sess.streams.Add(-1) })
	return nil
}
