package tunnel

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"
)

// yamuxConfig: 16 MiB stream windows, a ping every 15 s when keepAlive,
// an accept backlog of backlog streams (when zero, as deep as QUIC's
// stream limit).
func yamuxConfig(logger *log.Logger, backlog int, keepAlive bool) *yamux.Config {
	c := yamux.DefaultConfig()
	c.AcceptBacklog = cmp.Or(backlog, MaxIncomingStream)
	c.EnableKeepAlive = keepAlive
	c.KeepAliveInterval = KeepAlive
	// Also how long a keepalive ping waits for its answer: a dead peer is
	// found within KeepAlive+30 s = 45 s, QUIC's idle timeout.
	c.ConnectionWriteTimeout = QUICIdleTimeout - KeepAlive
	c.MaxStreamWindowSize = YamuxWindow
	// A SYN the peer does not answer in 30 s means the peer is stuck:
	// yamux then ends the session and the agent reconnects.
	c.StreamOpenTimeout = 30 * time.Second
	// No close timeout: yamux would reset a half-closed stream after it,
	// and a call that CloseWrites its header may read its reply for hours
	// (attach). A stream is freed once both sides have closed it.
	c.StreamCloseTimeout = 0
	if logger != nil {
		c.LogOutput, c.Logger = nil, logger
	} else {
		c.LogOutput = io.Discard
	}
	return c
}

// DialYamux dials a tunnel session over yamux on TLS 1.3/TCP (ALPNTunnel).
//
// With TLS 1.3 the server judges our certificate only after our side of the
// handshake is done, so DialYamux waits for one yamux ping round trip:
// a refused client gets the server's alert from DialYamux, not from its
// first stream.
func DialYamux(ctx context.Context, addr string, tlsConf *tls.Config) (Session, error) {
	return DialYamuxLogged(ctx, addr, tlsConf, nil)
}

// DialYamuxLogged is DialYamux with yamux's own log lines written to
// logger (nil drops them).
func DialYamuxLogged(ctx context.Context, addr string, tlsConf *tls.Config, logger *log.Logger) (Session, error) {
	conn, err := dialTLS(ctx, addr, tlsConf, ALPNTunnel)
	if err != nil {
		return nil, err
	}
	s, err := newYamuxSession(conn, false, logger, 0, true)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if err := s.confirm(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("tunnel: yamux session with %s: %w", addr, err)
	}
	return s, nil
}

func newYamuxSession(tc *tls.Conn, server bool, logger *log.Logger, backlog int, keepAlive bool) (*yamuxSession, error) {
	conn := &yamuxConn{Conn: tc}
	var (
		mux *yamux.Session
		err error
	)
	if server {
		mux, err = yamux.Server(conn, yamuxConfig(logger, backlog, keepAlive))
	} else {
		mux, err = yamux.Client(conn, yamuxConfig(logger, backlog, keepAlive))
	}
	if err != nil {
		return nil, fmt.Errorf("tunnel: yamux: %w", err)
	}
	return &yamuxSession{mux: mux, conn: conn, tls: tc.ConnectionState()}, nil
}

type yamuxSession struct {
	mux  *yamux.Session
	conn *yamuxConn
	tls  tls.ConnectionState
	// onClose, when set (by the listener, before the session is handed
	// out), runs once at the first Close.
	onClose   func()
	closeOnce sync.Once
}

// LastReceived is when the connection last received bytes, of any stream.
func (s *yamuxSession) LastReceived() time.Time {
	if n := s.conn.last.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// confirm waits for a ping answer, or says why the session ended before it.
func (s *yamuxSession) confirm(ctx context.Context) error {
	done := make(chan error, 1)
	go func() {
		_, err := s.mux.Ping()
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			if rerr := s.conn.readErr(); rerr != nil {
				return rerr
			}
		}
		return err
	case <-ctx.Done():
		// The caller closes the session, which ends the ping.
		return ctx.Err()
	}
}

func (s *yamuxSession) OpenStream(ctx context.Context) (Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ctx.Done() == nil {
		st, err := s.mux.OpenStream()
		if err != nil {
			return nil, err
		}
		return &yamuxStream{st: st}, nil
	}
	// yamux's OpenStream takes no context: it blocks while AcceptBacklog
	// SYNs are unanswered (at most StreamOpenTimeout).
	type opened struct {
		st  *yamux.Stream
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		st, err := s.mux.OpenStream()
		ch <- opened{st, err}
	}()
	select {
	case o := <-ch:
		if o.err != nil {
			return nil, o.err
		}
		return &yamuxStream{st: o.st}, nil
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.st != nil {
				o.st.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

func (s *yamuxSession) AcceptStream(ctx context.Context) (Stream, error) {
	st, err := s.mux.AcceptStreamWithContext(ctx)
	if err != nil {
		return nil, err
	}
	return &yamuxStream{st: st}, nil
}

func (s *yamuxSession) Transport() string                    { return TransportYamux }
func (s *yamuxSession) ConnectionState() tls.ConnectionState { return s.tls }
func (s *yamuxSession) RemoteAddr() net.Addr                 { return s.conn.RemoteAddr() }
func (s *yamuxSession) Done() <-chan struct{}                { return s.mux.CloseChan() }

// NumStreams counts streams not yet closed by both sides.
func (s *yamuxSession) NumStreams() int { return s.mux.NumStreams() }
func (s *yamuxSession) Close() error {
	err := s.mux.Close()
	if s.onClose != nil {
		s.closeOnce.Do(s.onClose)
	}
	return err
}

// yamuxStream maps the tunnel's stream contract onto yamux, which has
// half-close but no STOP_SENDING:
//
//   - CloseWrite is yamux's Close: a FIN; we may still read the reply.
//   - Close is the same FIN plus a read deadline in the past, which releases
//     our own pending and future reads at once. The peer is not told to stop
//     writing (QUIC's CancelRead would): it sees EOF on its reads, and what
//     it still writes is buffered up to the window and dropped when it
//     closes too. A handler that streams frames must therefore watch its
//     read side for EOF, which it needs on QUIC as well to notice a peer
//     that went away. yamux frees the stream once both sides have closed.
type yamuxStream struct{ st *yamux.Stream }

func (s *yamuxStream) Read(p []byte) (int, error)    { return s.st.Read(p) }
func (s *yamuxStream) Write(p []byte) (int, error)   { return s.st.Write(p) }
func (s *yamuxStream) SetDeadline(t time.Time) error { return s.st.SetDeadline(t) }
func (s *yamuxStream) CloseWrite() error             { return s.st.Close() }

func (s *yamuxStream) Close() error {
	err := s.st.Close()
	s.st.SetReadDeadline(time.Now())
	return err
}

// yamux frame layout (github.com/hashicorp/yamux spec.md): version, type,
// flags (2), stream id (4), length (4).
const (
	yamuxHeaderSize = 12
	yamuxTypeData   = 0
	// yamuxCoalesceMax: a body up to one TLS record is sent with its header.
	yamuxCoalesceMax = 16 << 10
)

// coalescePool holds the buffers a held header and its body are sent from.
var coalescePool = sync.Pool{New: func() any { b := make([]byte, 0, yamuxHeaderSize+yamuxCoalesceMax); return &b }}

// yamuxConn is the TLS connection under a yamux session.
//
// yamux writes a data frame's 12-byte header and its body in two Writes; on
// TLS that is two records and two syscalls for every small message. Only
// yamux's send loop writes, one frame at a time, so yamuxConn holds a data
// header and sends it with the body that follows when the body fits in one
// record. Headers without a body (window updates, pings, FIN) go at once.
//
// It also remembers the first read error: the TLS alert of a server that
// refused our certificate, which yamux itself only reports as "session
// shutdown".
type yamuxConn struct {
	net.Conn
	// held is a data header waiting for its body (send loop only): no
	// buffer of its own per connection, an idle node's costs nothing.
	held    [yamuxHeaderSize]byte
	holding bool
	rerr    atomic.Pointer[error]
	// last is when bytes last arrived, of any stream (unix nanos).
	last atomic.Int64
}

func (c *yamuxConn) Write(p []byte) (int, error) {
	if c.holding {
		c.holding = false
		if len(p) <= yamuxCoalesceMax {
			b := coalescePool.Get().(*[]byte)
			_, err := c.Conn.Write(append(append((*b)[:0], c.held[:]...), p...))
			coalescePool.Put(b)
			if err != nil {
				return 0, err
			}
			return len(p), nil
		}
		if _, err := c.Conn.Write(c.held[:]); err != nil {
			return 0, err
		}
		return c.Conn.Write(p)
	}
	if len(p) == yamuxHeaderSize && p[1] == yamuxTypeData && binary.BigEndian.Uint32(p[8:]) > 0 {
		copy(c.held[:], p)
		c.holding = true
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *yamuxConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.last.Store(time.Now().UnixNano())
	}
	if err != nil {
		c.rerr.CompareAndSwap(nil, &err)
	}
	return n, err
}

func (c *yamuxConn) readErr() error {
	if p := c.rerr.Load(); p != nil {
		return *p
	}
	return nil
}
