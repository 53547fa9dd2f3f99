// Package tunnel carries the agent↔coordinator link over two transports with
// one framing: QUIC (quic-go) and yamux over TLS/TCP.
//
// The agent always dials; either side may open streams. Both transports are
// mutual TLS 1.3. tunnel never decides who a peer is: the caller's tls.Config
// (VerifyConnection) does, so revocation is checked on every handshake.
package tunnel

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"time"
)

// Transport names, as they appear in config and in the node registry.
const (
	TransportQUIC  = "quic"
	TransportYamux = "yamux"
)

// ALPN protocol ids. The TCP listener serves the tunnel and enrollment on one
// port and tells them apart by ALPN: enrollment is the only protocol that is
// accepted without a client certificate.
const (
	ALPNTunnel = "olivares-tunnel/1"
	ALPNEnroll = "olivares-enroll/1"
)

// Tuning shared by both transports (issue 2: keepalive 15 s, QUIC idle 45 s,
// ≥1000 incoming streams, yamux window ≥ 8 MiB).
const (
	KeepAlive         = 15 * time.Second
	QUICIdleTimeout   = 45 * time.Second
	MaxIncomingStream = 4096
	YamuxWindow       = 16 << 20
)

// Stream is one call: a request header, a reply header, then frames.
//
// A stream's reader must drain it promptly or Close it: on QUIC the bytes
// it leaves unread hold the connection's flow-control window, which every
// stream of the session shares (quic.go).
type Stream interface {
	io.Reader
	io.Writer
	// CloseWrite ends our direction (FIN); the peer still reads what was sent.
	CloseWrite() error
	// Close ends both directions (QUIC: Close plus CancelRead).
	Close() error
	SetDeadline(t time.Time) error
}

// Session is one live tunnel.
type Session interface {
	OpenStream(ctx context.Context) (Stream, error)
	AcceptStream(ctx context.Context) (Stream, error)
	// Transport returns TransportQUIC or TransportYamux.
	Transport() string
	// ConnectionState is the TLS state of the handshake (peer certificates).
	ConnectionState() tls.ConnectionState
	RemoteAddr() net.Addr
	// Done is closed once the session is dead, whoever ended it.
	Done() <-chan struct{}
	// NumStreams counts the streams open now.
	NumStreams() int
	Close() error
}

// LastReceived is when s's connection last received bytes of any stream
// (QUIC: a packet, as first seen by a call), or the zero time when the
// transport does not say. Every stream shares one connection, and over yamux
// one TCP byte stream, so a heartbeat can queue behind megabytes of output on
// a busy tunnel: bytes arriving show the peer is alive all the same, and a
// heartbeat watchdog counts them as a beat.
func LastReceived(s Session) time.Time {
	if r, ok := s.(interface{ LastReceived() time.Time }); ok {
		return r.LastReceived()
	}
	return time.Time{}
}

// Listener accepts tunnel sessions.
type Listener interface {
	Accept(ctx context.Context) (Session, error)
	Addr() net.Addr
	Close() error
}
