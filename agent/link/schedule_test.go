package link

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/olivares-dev/olivares/agent/identity"
	"github.com/olivares-dev/olivares/agent/state"
	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/shared/tunnel"
)

// testIdentity enrolls a node identity from a fresh CA.
func testIdentity(t *testing.T) *identity.Identity {
	t.Helper()
	dir := t.TempDir()
	ca, _, err := certs.InitAuthority(filepath.Join(t.TempDir(), "ca"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, _ := certs.NewKey()
	csr, _ := certs.NewCSR(key)
	c, err := ca.SignNode(csr, "node-1", time.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	db, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	id, err := identity.Save(db, dir, identity.Record{NodeID: "node-1", Tenant: "default", Coordinator: "127.0.0.1:1", EnrolledAt: time.Now()},
		key, certs.EncodeCertPEM(c.Raw), ca.BundlePEM())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// session stands in for a dialed tunnel: these tests run on synctest's
// fake clock, where no real socket may block, and only look at when a dial
// succeeds.
type session struct{ transport string }

func (s session) OpenStream(context.Context) (tunnel.Stream, error)   { return nil, errors.New("none") }
func (s session) AcceptStream(context.Context) (tunnel.Stream, error) { return nil, errors.New("none") }
func (s session) Transport() string                                   { return s.transport }
func (s session) ConnectionState() tls.ConnectionState                { return tls.ConnectionState{} }
func (s session) RemoteAddr() net.Addr                                { return nil }
func (s session) Done() <-chan struct{}                               { return nil }
func (s session) NumStreams() int                                     { return 0 }
func (s session) Close() error                                        { return nil }

// With UDP blocked (QUIC's handshake never hears back), auto is on yamux
// within 3 s of starting to dial (R-TUN-2), on the fake clock: the QUIC
// attempt is cut at FallbackAfter and yamux is dialed at once.
func TestAutoFallbackWithin3s(t *testing.T) {
	id := testIdentity(t)
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Identity: id, Addr: "coordinator:7444", Transport: TransportAuto,
			DialQUIC: func(ctx context.Context, _ string, _ *tls.Config) (tunnel.Session, error) {
				<-ctx.Done() // no answer over UDP
				return nil, ctx.Err()
			},
			DialYamux: func(context.Context, string, *tls.Config) (tunnel.Session, error) {
				return session{tunnel.TransportYamux}, nil
			},
		})
		start := time.Now()
		s, err := l.dial(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if s.Transport() != tunnel.TransportYamux || took > 3*time.Second {
			t.Fatalf("got %s after %v, want yamux within 3s", s.Transport(), took)
		}
		t.Logf("fallback to yamux after %v", took)
	})
}

// A coordinator restart (down for 2 s) brings the agent back within 10 s
// whatever the jitter draws (R-TUN-4): the reconnect schedule run 200 times
// on the fake clock, from the moment the tunnel dropped to the first dial
// that finds the coordinator up.
func TestReconnectAfterRestartWithin10s(t *testing.T) {
	id := testIdentity(t)
	const down = 2 * time.Second
	var worst time.Duration
	for range 200 {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			start := time.Now()
			var back time.Duration
			dial := func(context.Context, string, *tls.Config) (tunnel.Session, error) {
				if time.Since(start) < down {
					return nil, errors.New("connection refused")
				}
				back = time.Since(start)
				cancel() // up again: the schedule is what was measured
				return nil, errors.New("stop")
			}
			l := New(Options{Identity: id, Addr: "coordinator:7444", Transport: tunnel.TransportYamux, DialQUIC: dial, DialYamux: dial})
			l.Run(ctx)
			if back == 0 || back > 10*time.Second {
				t.Fatalf("reconnected after %v, want within 10s of the drop", back)
			}
			worst = max(worst, back)
		})
	}
	t.Logf("worst reconnect over 200 restarts of %v: %v", down, worst)
}

// R-REP-6: with several replicas configured, a dial moves from a dead one to the
// next at once (no backoff between them: the fake clock does not move),
// and the next dial starts with the replica that worked.
func TestDialMovesToTheNextReplica(t *testing.T) {
	id := testIdentity(t)
	synctest.Test(t, func(t *testing.T) {
		var dialed []string
		alive := map[string]bool{"b:7444": true}
		l := New(Options{Identity: id, Addrs: []string{"a:7444", "b:7444", "c:7444"}, Transport: tunnel.TransportYamux,
			DialYamux: func(_ context.Context, addr string, _ *tls.Config) (tunnel.Session, error) {
				dialed = append(dialed, addr)
				if !alive[addr] {
					return nil, errors.New("connection refused")
				}
				return session{tunnel.TransportYamux}, nil
			},
		})
		start := time.Now()
		if _, err := l.dial(t.Context()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 0 {
			t.Fatalf("moving past a dead replica took %v, want no wait", took)
		}
		if got, want := l.Status().Coordinator, "b:7444"; got != want {
			t.Fatalf("status coordinator = %q, want %q", got, want)
		}
		// b dies, c comes up: b is tried first (it worked last), then c.
		alive = map[string]bool{"c:7444": true}
		if _, err := l.dial(t.Context()); err != nil {
			t.Fatal(err)
		}
		want := []string{"a:7444", "b:7444", "b:7444", "c:7444"}
		if len(dialed) != len(want) {
			t.Fatalf("dialed %v, want %v", dialed, want)
		}
		for i := range want {
			if dialed[i] != want[i] {
				t.Fatalf("dialed %v, want %v", dialed, want)
			}
		}
		// None alive: one error naming each replica.
		alive = nil
		_, err := l.dial(t.Context())
		for _, a := range []string{"a:7444", "b:7444", "c:7444"} {
			if err == nil || !strings.Contains(err.Error(), a) {
				t.Fatalf("all replicas down: got %v, want an error naming %s", err, a)
			}
		}
	})
}
