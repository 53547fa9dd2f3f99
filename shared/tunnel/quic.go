package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// quicHandshakeIdleTimeout: a dial that hears nothing for 2 s fails, so
// "auto" falls back to yamux within 3 s when UDP is blocked. quic-go also
// aborts a handshake that has not completed after twice this.
const quicHandshakeIdleTimeout = 2 * time.Second

// QUIC flow-control windows. Bytes a stream's reader has not read yet
// count against its stream's window and against the connection's: a
// connection window of only a stream window or two let two viewers that
// stopped reading stop every stream of a node's tunnel, heartbeats
// included (issue 16). The connection window therefore holds
// quicStuckStreams full stream windows from the start (no auto-tuning to
// wait for), as yamux, which has stream windows only, always did. It is
// a margin, not the cure: readers must drain their streams (the
// coordinator's attach relay reads each one at once into a bounded queue).
// Memory is spent only on bytes that actually wait.
const (
	quicStreamWindow     = 8 << 20
	quicMaxStreamWindow  = 16 << 20
	quicStuckStreams     = 8
	quicConnectionWindow = quicStuckStreams * quicMaxStreamWindow
)

// quicConfig is tuned for bulk output: windows far above quic-go's 512 KiB
// start, 15 s keepalive, 45 s idle timeout, MaxIncomingStream streams.
func quicConfig() *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:           quicHandshakeIdleTimeout,
		MaxIdleTimeout:                 QUICIdleTimeout,
		KeepAlivePeriod:                KeepAlive,
		MaxIncomingStreams:             MaxIncomingStream,
		MaxIncomingUniStreams:          -1, // every call is a bidirectional stream
		InitialStreamReceiveWindow:     quicStreamWindow,
		MaxStreamReceiveWindow:         quicMaxStreamWindow,
		InitialConnectionReceiveWindow: quicConnectionWindow,
		MaxConnectionReceiveWindow:     quicConnectionWindow,
	}
}

// QUICListenOptions are ListenQUIC's optional settings.
type QUICListenOptions struct {
	// StatelessResetKey lets the listener answer a packet of a connection
	// it does not know — one of the process that had the port before a
	// crash or kill -9 — with a stateless reset, so the peer drops that
	// connection at its next packet (a heartbeat, at most one interval
	// away) and redials, instead of waiting out its timeouts. The key must
	// be the same across restarts (the coordinator keeps it in its state
	// dir) and secret. When nil, no resets are sent.
	StatelessResetKey *[32]byte
}

// ListenQUIC serves tunnel sessions over QUIC on pc. tlsConf must set
// ClientAuth to tls.RequireAndVerifyClientCert (ErrNoClientAuth otherwise);
// its NextProtos becomes ALPNTunnel. onHandshakeError, when set, hears every
// connection attempt that ends before Accept returns it: TLS refusals (no
// certificate, a foreign CA, VerifyConnection), ALPN mismatches, handshake
// timeouts. It is called from quic-go's goroutines, possibly after Close.
//
// Close ends every session accepted from the listener; pc stays the
// caller's to close.
func ListenQUIC(pc net.PacketConn, tlsConf *tls.Config, onHandshakeError func(error), opts ...QUICListenOptions) (Listener, error) {
	tc, err := tunnelServerTLS(tlsConf)
	if err != nil {
		return nil, err
	}
	l := &quicListener{onHandshakeError: onHandshakeError}
	l.tr = &quic.Transport{Conn: pc, ConnContext: l.connContext}
	for _, o := range opts {
		if o.StatelessResetKey != nil {
			k := quic.StatelessResetKey(*o.StatelessResetKey)
			l.tr.StatelessResetKey = &k
		}
	}
	l.ln, err = l.tr.Listen(tc, quicConfig())
	if err != nil {
		return nil, fmt.Errorf("tunnel: quic listen on %s: %w", pc.LocalAddr(), err)
	}
	return l, nil
}

type quicListener struct {
	tr               *quic.Transport
	ln               *quic.Listener
	onHandshakeError func(error)

	mu     sync.Mutex
	closed bool
	live   map[*quicSession]struct{} // accepted and not yet dead
}

// handshakeWatch rides in a server connection's context until Accept
// returns the connection.
type handshakeWatch struct{ accepted atomic.Bool }

type handshakeWatchKey struct{}

// connContext is called by quic-go for every incoming connection attempt;
// its context ends when the attempt or the connection does, with the reason
// as cause. quic-go reports failed handshakes nowhere else (except qlog,
// which would trace every packet).
func (l *quicListener) connContext(ctx context.Context, ci *quic.ClientInfo) (context.Context, error) {
	if l.onHandshakeError == nil {
		return ctx, nil
	}
	w := &handshakeWatch{}
	remote := ci.RemoteAddr
	context.AfterFunc(ctx, func() {
		if !w.accepted.Load() {
			l.onHandshakeError(fmt.Errorf("tunnel: quic handshake with %s: %w", remote, context.Cause(ctx)))
		}
	})
	return context.WithValue(ctx, handshakeWatchKey{}, w), nil
}

func (l *quicListener) Accept(ctx context.Context) (Session, error) {
	c, err := l.ln.Accept(ctx)
	if err != nil {
		return nil, err
	}
	if w, ok := c.Context().Value(handshakeWatchKey{}).(*handshakeWatch); ok {
		w.accepted.Store(true)
	}
	s := &quicSession{c: c}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		s.Close()
		return nil, fmt.Errorf("tunnel: quic listener %s: %w", l.ln.Addr(), net.ErrClosed)
	}
	if l.live == nil {
		l.live = make(map[*quicSession]struct{})
	}
	l.live[s] = struct{}{}
	context.AfterFunc(c.Context(), func() {
		l.mu.Lock()
		delete(l.live, s)
		l.mu.Unlock()
	})
	return s, nil
}

func (l *quicListener) Addr() net.Addr { return l.ln.Addr() }

// Close stops accepting and closes every accepted session with a
// CONNECTION_CLOSE, so agents notice at once: closing the quic.Transport
// alone would drop them silently and leave them to the idle timeout.
func (l *quicListener) Close() error {
	l.mu.Lock()
	l.closed = true
	live := make([]*quicSession, 0, len(l.live))
	for s := range l.live {
		live = append(live, s)
	}
	l.mu.Unlock()
	err := l.ln.Close()
	for _, s := range live {
		s.Close()
	}
	l.tr.Close()
	return err
}

// DialQUIC dials a tunnel session over QUIC (ALPNTunnel, TLS 1.3).
//
// It returns once our side of the handshake is done. The server judges our
// certificate just after that (TLS 1.3), and quic-go has no public way to
// wait for its verdict: a refused client sees the session end (Done) right
// after DialQUIC returns, rather than an error from it.
func DialQUIC(ctx context.Context, addr string, tlsConf *tls.Config) (Session, error) {
	tc := withALPN(tlsConf, ALPNTunnel)
	if tc.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			tc.ServerName = host
		}
	}
	c, err := quic.DialAddr(ctx, addr, tc, quicConfig())
	if err != nil {
		return nil, fmt.Errorf("tunnel: quic dial %s: %w", addr, err)
	}
	return &quicSession{c: c}, nil
}

type quicSession struct {
	c *quic.Conn
	// streams counts streams opened or accepted and not yet Closed by us:
	// quic-go has no such count.
	streams atomic.Int64

	// recv is what LastReceived last saw: the packet count and when it
	// was first seen to have moved.
	recvMu      sync.Mutex
	recvPackets uint64
	recvAt      time.Time
}

// LastReceived is when the connection was last seen to have received a
// packet: quic-go counts packets but keeps no time, so the time is that of
// the first call that saw the count move (a watchdog polls it).
func (s *quicSession) LastReceived() time.Time {
	n := s.c.ConnectionStats().PacketsReceived
	s.recvMu.Lock()
	defer s.recvMu.Unlock()
	if n != s.recvPackets {
		s.recvPackets, s.recvAt = n, time.Now()
	}
	return s.recvAt
}

func (s *quicSession) wrap(st *quic.Stream) Stream {
	s.streams.Add(1)
	return &quicStream{st: st, sess: s}
}

// OpenStream opens a stream, waiting while the peer's stream limit is
// reached. The peer's AcceptStream returns it once we first write to it.
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
		return nil // already closed, by the peer or by us
	}
	return err
}

// quicStream closes on both sides: Close ends our write direction (FIN)
// and CancelRead sends STOP_SENDING, so the peer's writes fail at once and
// quic-go can free the stream. CloseWrite is the FIN alone.
type quicStream struct {
	st   *quic.Stream
	sess *quicSession
	once sync.Once
}

func (s *quicStream) Read(p []byte) (int, error)    { return s.st.Read(p) }
func (s *quicStream) Write(p []byte) (int, error)   { return s.st.Write(p) }
func (s *quicStream) SetDeadline(t time.Time) error { return s.st.SetDeadline(t) }
func (s *quicStream) CloseWrite() error             { return s.st.Close() }

func (s *quicStream) Close() error {
	// Close fails only when our send side was already cancelled (the peer
	// sent STOP_SENDING first): the stream is closed either way.
	s.st.Close()
	s.st.CancelRead(0)
	s.once.Do(func() { s.sess.streams.Add(-1) })
	return nil
}
