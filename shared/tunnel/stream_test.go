package tunnel_test

// Stream lifecycle and protocol selection, on tunneltest's PKI (made by the
// certs package, as in production).

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"github.com/quic-go/quic-go"

	"github.com/olivares-dev/olivares/shared/tunnel"
	"github.com/olivares-dev/olivares/shared/tunnel/tunneltest"
	"github.com/olivares-dev/olivares/shared/wire"
)

// uploadSizes cross every coalescing threshold (yamux's 16 KiB record,
// wire's 64 KiB) and the initial stream windows.
var uploadSizes = []int{0, 1, 64, 16 << 10, 16<<10 + 1, 64 << 10, 64<<10 + 1, 1 << 20, wire.MaxFrame}

// serveUpload answers "upload": it replies to the header, reads frames
// until the caller's CloseWrite, then sends one frame with the SHA-256 of
// everything it read and closes.
func serveUpload(ctx context.Context, s tunnel.Session) error {
	st, err := s.AcceptStream(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	dl, _ := ctx.Deadline()
	st.SetDeadline(dl)
	var h wire.Header
	if err := wire.ReadMessage(st, &h); err != nil {
		return err
	}
	if h.Op != "upload" {
		return wire.Respond(st, nil, errors.New("unknown op "+h.Op))
	}
	if err := wire.Respond(st, map[string]bool{"ready": true}, nil); err != nil {
		return err
	}
	sum := sha256.New()
	buf := make([]byte, 0, 64<<10)
	for {
		p, err := wire.ReadFrame(st, buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		sum.Write(p)
	}
	return wire.WriteFrame(st, sum.Sum(nil))
}

// TestUploadThenReply: the opener's CloseWrite comes after its frames; the
// peer reads them all, then EOF, then answers on the same stream.
func TestUploadThenReply(t *testing.T) {
	for _, tr := range tunneltest.Transports {
		for _, opener := range []string{"client", "server"} {
			t.Run(tr+"/"+opener+" opens", func(t *testing.T) {
				ctx := testContext(t, tunneltest.Timeout)
				client, server := tunneltest.Pair(t, tr)
				open, serve := client, server
				if opener == "server" {
					open, serve = server, client
				}
				served := make(chan error, 1)
				go func() { served <- serveUpload(ctx, serve) }()

				st, err := open.OpenStream(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				dl, _ := ctx.Deadline()
				st.SetDeadline(dl)
				var ready struct{ Ready bool }
				if err := wire.Call(st, wire.Header{Op: "upload"}, nil, &ready); err != nil || !ready.Ready {
					t.Fatalf("call: got %+v, %v; want ready", ready, err)
				}
				want := sha256.New()
				for i, n := range uploadSizes {
					p := make([]byte, n)
					for j := range p {
						p[j] = byte(i*7 + j)
					}
					want.Write(p)
					if err := wire.WriteFrame(st, p); err != nil {
						t.Fatalf("frame of %d bytes: %v", n, err)
					}
				}
				if err := st.CloseWrite(); err != nil {
					t.Fatal(err)
				}
				got, err := wire.ReadFrame(st, nil)
				if err != nil {
					t.Fatalf("reply after CloseWrite: %v", err)
				}
				if string(got) != string(want.Sum(nil)) {
					t.Fatalf("peer's digest %x, want %x", got, want.Sum(nil))
				}
				if _, err := wire.ReadFrame(st, nil); err != io.EOF {
					t.Fatalf("after the reply: got %v, want io.EOF", err)
				}
				if err := <-served; err != nil {
					t.Fatalf("peer: %v", err)
				}
			})
		}
	}
}

// TestCloseReleasesStreams: once both sides Close a stream, neither session
// counts it, whoever closes first and even with data left unread.
func TestCloseReleasesStreams(t *testing.T) {
	cases := []struct {
		name         string
		peerFirst    bool // the accepting side closes first
		leaveUnread  bool // the accepting side writes a frame nobody reads
		openerWrites int
	}{
		{name: "opener closes first", openerWrites: 1},
		{name: "peer closes first", peerFirst: true, openerWrites: 1},
		{name: "unread data", leaveUnread: true, openerWrites: 3},
	}
	for _, tr := range tunneltest.Transports {
		for _, c := range cases {
			t.Run(tr+"/"+c.name, func(t *testing.T) {
				ctx := testContext(t, tunneltest.Timeout)
				client, server := tunneltest.Pair(t, tr)
				opened, err := client.OpenStream(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for range c.openerWrites {
					if err := wire.WriteFrame(opened, []byte("hello")); err != nil {
						t.Fatal(err)
					}
				}
				accepted, err := server.AcceptStream(ctx)
				if err != nil {
					t.Fatal(err)
				}
				dl, _ := ctx.Deadline()
				accepted.SetDeadline(dl)
				if _, err := wire.ReadFrame(accepted, nil); err != nil {
					t.Fatal(err)
				}
				if c.leaveUnread {
					if err := wire.WriteFrame(accepted, make([]byte, 256<<10)); err != nil {
						t.Fatal(err)
					}
				}
				for _, s := range []tunnel.Session{client, server} {
					if got := s.NumStreams(); got != 1 {
						t.Fatalf("%s: NumStreams() = %d with one stream open, want 1", tr, got)
					}
				}
				first, second := opened, accepted
				if c.peerFirst {
					first, second = accepted, opened
				}
				if err := first.Close(); err != nil {
					t.Fatalf("first Close: %v", err)
				}
				if err := second.Close(); err != nil {
					t.Fatalf("second Close: %v", err)
				}
				tunneltest.AwaitStreams(t, client, 0)
				tunneltest.AwaitStreams(t, server, 0)
			})
		}
	}
}

// TestWithoutTunnelALPNIsClosed: a client that offers no ALPN, or someone
// else's, gets no session, though its certificate is good.
func TestWithoutTunnelALPNIsClosed(t *testing.T) {
	for _, tr := range tunneltest.Transports {
		for _, protos := range [][]string{nil, {"h2", "http/1.1"}} {
			if tr == tunnel.TransportQUIC && protos == nil {
				continue // QUIC requires ALPN; quic-go refuses to dial without
			}
			t.Run(tr+"/"+map[bool]string{true: "no ALPN", false: "other ALPN"}[protos == nil], func(t *testing.T) {
				ctx := testContext(t, tunneltest.Timeout)
				p := tunneltest.NewPKI(t)
				failures := make(chan error, 4)
				l := tunneltest.Listen(t, tr, p.ServerTLS(), func(err error) {
					select {
					case failures <- err:
					default:
					}
				})
				conf := p.ClientTLS()
				conf.NextProtos = protos
				switch tr {
				case tunnel.TransportYamux:
					d := tls.Dialer{Config: conf}
					c, err := d.DialContext(ctx, "tcp", l.Addr().String())
					if err == nil {
						defer c.Close()
						dl, _ := ctx.Deadline()
						c.SetDeadline(dl)
						_, err = c.Read(make([]byte, 1))
						var ne net.Error
						if errors.As(err, &ne) && ne.Timeout() {
							t.Fatalf("the server kept the connection open (read: %v)", err)
						}
					}
					t.Logf("refused: %v", err)
				case tunnel.TransportQUIC:
					c, err := quic.DialAddr(ctx, l.Addr().String(), conf, nil)
					if err == nil {
						c.CloseWithError(0, "")
						t.Fatal("QUIC handshake without the tunnel ALPN succeeded")
					}
					t.Logf("refused: %v", err)
				}
				select {
				case err := <-failures:
					t.Logf("OnHandshakeError: %v", err)
				case <-ctx.Done():
					t.Fatal("OnHandshakeError was not called")
				}
			})
		}
	}
}

// TestStuckStreamsDoNotStopOthers (R-TUN-6): streams whose reader has
// stopped, each filled to its window, leave the session's other streams
// working. On
// QUIC, unread bytes count against the connection's window too, so the
// connection window must hold several full stream windows (issue 16: two
// stuck attach streams used to stop a node's whole tunnel).
func TestStuckStreamsDoNotStopOthers(t *testing.T) {
	const stuck = 4
	for _, tr := range tunneltest.Transports {
		t.Run(tr, func(t *testing.T) {
			ctx := testContext(t, 6*tunneltest.Timeout)
			client, server := tunneltest.Pair(t, tr)
			accepted := make(chan tunnel.Stream, stuck+1)
			go func() {
				for {
					st, err := server.AcceptStream(ctx)
					if err != nil {
						return
					}
					accepted <- st
				}
			}()
			for range stuck {
				st, err := client.OpenStream(ctx)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				if _, err := st.Write([]byte{0}); err != nil {
					t.Fatal(err)
				}
				<-accepted // accepted and never read
				// Write until the stream's window is full; the Write then
				// blocks until the test ends.
				var n atomic.Int64
				go func() {
					chunk := make([]byte, 64<<10)
					for {
						if _, err := st.Write(chunk); err != nil {
							return
						}
						n.Add(int64(len(chunk)))
					}
				}()
				tunneltest.Await(t, "a stuck stream to take its initial window", func() bool {
					return n.Load() >= 4<<20
				})
			}
			// A fresh stream still carries a megabyte both ways.
			st, err := client.OpenStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			dl, _ := ctx.Deadline()
			st.SetDeadline(dl)
			payload := make([]byte, 1<<20)
			go func() {
				st.Write(payload)
				st.CloseWrite()
			}()
			peer := <-accepted
			defer peer.Close()
			peer.SetDeadline(dl)
			got, err := io.ReadAll(peer)
			if err != nil || len(got) != len(payload) {
				t.Fatalf("fresh stream: read %d bytes, %v; want %d", len(got), err, len(payload))
			}
		})
	}
}
