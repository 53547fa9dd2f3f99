// Package link keeps the agent's tunnel to the coordinator up: it dials
// (QUIC, yamux, or auto: QUIC then yamux within 3 s, QUIC retried in the
// background), says hello, heartbeats, renews the node certificate at
// half-life, serves the coordinator's call streams, and reconnects with
// exponential backoff and full jitter (30 s cap).
//
// link owns every goroutine it starts; they all end when Run returns.
package link

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/olivares-dev/olivares/agent/identity"
	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/tunnel"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Transport choices of the agent config.
const (
	TransportAuto = "auto"
)

// Backoff bounds (issue 2).
const (
	BackoffBase = 250 * time.Millisecond
	BackoffCap  = 30 * time.Second
	// FallbackAfter bounds the QUIC attempt of "auto" before yamux.
	FallbackAfter = 2500 * time.Millisecond
	// DefaultQUICRetry is how often "auto" on yamux tries QUIC again.
	DefaultQUICRetry = 30 * time.Second
	// stableAfter: a session that lived this long resets the backoff.
	stableAfter = 10 * time.Second
)

// Handler serves one coordinator-opened stream whose header was read. It
// must reply (wire.Respond) and owns nothing else: the stream is closed
// when it returns.
type Handler func(ctx context.Context, h wire.Header, s tunnel.Stream)

// Options configure a Link.
type Options struct {
	Identity *identity.Identity
	// Addr is the coordinator's tunnel host:port: one coordinator, or a
	// load balancer or DNS name in front of several replicas (each dial
	// tries every address the name resolves to).
	Addr string
	// Addrs, when set, lists several coordinator replicas: each dial
	// starts with the one that worked last and moves on to the next at
	// once when it fails; the backoff waits only after every one failed.
	// Addr is then ignored.
	Addrs []string
	// Transport is "auto", "quic" or "yamux". When empty, "auto".
	Transport string
	// QUICRetry: when zero, DefaultQUICRetry.
	QUICRetry time.Duration
	// Hello builds the hello (capabilities) for each new session.
	Hello func(ctx context.Context) proto.Hello
	// Handlers by op.
	Handlers map[string]Handler
	// OnSession, when set, runs in its own goroutine for each session once
	// the hello was answered, with a ctx that ends with the session; open
	// opens agent→coordinator streams on it (the run index push).
	OnSession func(ctx context.Context, open func(context.Context) (tunnel.Stream, error))
	// Log gets the link's lines, and yamux's. When nil, they are dropped.
	Log *slog.Logger
	// DialQUIC and DialYamux dial the coordinator; when nil,
	// tunnel.DialQUIC and tunnel.DialYamux. Tests replace them to run the
	// dial and reconnect schedule on a fake clock (testing/synctest).
	DialQUIC, DialYamux func(ctx context.Context, addr string, conf *tls.Config) (tunnel.Session, error)
}

// StateRevoked is the link's state once the coordinator said this node was
// revoked: it stops dialing for good (a revoked node never comes back;
// restarting the agent dials once more and says so again) (R-LIFE-8).
const StateRevoked = "revoked"

// revokedHint is what a revoked agent says, once.
const revokedHint = "this agent will not connect again. Enroll this host again with a new join token (olivares-coordinator token create, then olivares-agent enroll --state-dir NEW_DIR ...)"

// ErrRevoked: the coordinator refused this node because it was revoked
// (or forgotten).
var ErrRevoked = errors.New("link: this node was revoked by the coordinator")

// Status is the link as `olivares-agent status` shows it.
type Status struct {
	State         string        `json:"state"` // connecting | connected | backoff | revoked | stopped
	Coordinator   string        `json:"coordinator"`
	Transport     string        `json:"transport,omitempty"`
	Configured    string        `json:"transport_config"`
	Since         time.Time     `json:"since"`
	LastHeartbeat time.Time     `json:"last_heartbeat,omitempty"`
	RTT           time.Duration `json:"rtt_ns,omitempty"`
	Connects      int           `json:"connects"`
	LastError     string        `json:"last_error,omitempty"`
	CertNotAfter  time.Time     `json:"cert_not_after"`
	NextRenewal   time.Time     `json:"next_renewal"`
}

// Link is the tunnel client.
type Link struct {
	o Options

	mu sync.Mutex
	st Status
	// cur indexes o.Addrs: the address dialed first (the last that worked).
	cur int
}

// New returns a Link; call Run.
func New(o Options) *Link {
	if o.Transport == "" {
		o.Transport = TransportAuto
	}
	if o.QUICRetry == 0 {
		o.QUICRetry = DefaultQUICRetry
	}
	o.Log = logging.OrDiscard(o.Log).With(logging.KeyComponent, "link")
	if o.DialQUIC == nil {
		o.DialQUIC = tunnel.DialQUIC
	}
	if o.DialYamux == nil {
		ylog := logging.StdLogger(o.Log.With(logging.KeyComponent, "yamux"), slog.LevelInfo)
		o.DialYamux = func(ctx context.Context, addr string, conf *tls.Config) (tunnel.Session, error) {
			return tunnel.DialYamuxLogged(ctx, addr, conf, ylog)
		}
	}
	if len(o.Addrs) == 0 {
		o.Addrs = []string{o.Addr}
	}
	l := &Link{o: o}
	l.st = Status{State: "connecting", Coordinator: o.Addrs[0], Configured: o.Transport, Since: time.Now().UTC()}
	return l
}

// Status returns a snapshot.
func (l *Link) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.st
	s.CertNotAfter = l.o.Identity.Leaf().NotAfter.UTC()
	return s
}

func (l *Link) update(fn func(*Status)) {
	l.mu.Lock()
	fn(&l.st)
	l.mu.Unlock()
}

// Run keeps the link up until ctx ends.
func (l *Link) Run(ctx context.Context) error {
	attempt := 0
	// down is when the link was last lost (or Run started): no wait is
	// longer than the time already spent without a tunnel, so that a
	// coordinator back after a restart of D is found within about 2D,
	// whatever the jitter drew before (R-TUN-4).
	down := time.Now()
	wait := func() time.Duration { return min(backoff(attempt), max(time.Since(down), BackoffBase)) }
	var next tunnel.Session
	for ctx.Err() == nil {
		sess := next
		next = nil
		if sess == nil {
			l.update(func(s *Status) { s.State = "connecting" })
			var err error
			sess, err = l.dial(ctx)
			if err != nil {
				d := wait()
				attempt++
				l.o.Log.Warn("connect failed", "coordinator", strings.Join(l.o.Addrs, ", "), logging.Err(err), "retry_in", d.Round(time.Millisecond).String())
				l.update(func(s *Status) { s.State, s.LastError, s.Transport = "backoff", err.Error(), "" })
				select {
				case <-ctx.Done():
				case <-time.After(d):
				}
				continue
			}
		}
		start := time.Now()
		var err error
		next, err = l.session(ctx, sess)
		sess.Close()
		if errors.Is(err, ErrRevoked) {
			// R-LIFE-8: say it once and stop dialing; retrying would only
			// be refused again.
			l.o.Log.Error(revokedHint, logging.Err(err))
			never := false
			l.update(func(s *Status) {
				never = s.Connects == 0
				s.State, s.Transport, s.LastError, s.Since = StateRevoked, "", err.Error(), time.Now().UTC()
			})
			if never {
				// Started again after its revocation (issue 32 finding 13):
				// nothing here will ever connect, so the agent ends, non-zero,
				// with the sentence. One revoked while it ran stays up to
				// show it in olivares-agent status.
				return fmt.Errorf("%w; %s", err, revokedHint)
			}
			<-ctx.Done()
			return nil
		}
		if err != nil {
			l.update(func(s *Status) { s.LastError = err.Error() })
		}
		if time.Since(start) > stableAfter || next != nil {
			// A session that held: start the schedule again from here. One
			// that dropped at once (a refused hello) keeps its schedule,
			// so that it is not retried ever faster.
			attempt = 0
			down = time.Now()
		}
		if next == nil && ctx.Err() == nil {
			// Even the first retry after a lost session waits a little, so
			// a coordinator restart is not hammered.
			d := wait()
			attempt++
			l.update(func(s *Status) { s.State, s.Transport = "backoff", "" })
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
	}
	l.update(func(s *Status) { s.State, s.Transport = "stopped", "" })
	return nil
}

// backoff is exponential with full jitter, capped (issue 2).
func backoff(attempt int) time.Duration {
	max := BackoffBase << min(attempt, 10)
	if max > BackoffCap || max <= 0 {
		max = BackoffCap
	}
	return time.Duration(rand.Int64N(int64(max)) + 1)
}

// dial tries each configured address once, starting with the one that
// worked last, and keeps the first session it gets.
func (l *Link) dial(ctx context.Context) (tunnel.Session, error) {
	n := len(l.o.Addrs)
	var errs []error
	for i := range n {
		j := (l.cur + i) % n
		sess, err := l.dialAddr(ctx, l.o.Addrs[j])
		if err == nil {
			l.cur = j
			addr := l.o.Addrs[j]
			l.update(func(s *Status) { s.Coordinator = addr })
			return sess, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if n == 1 {
			return nil, err
		}
		errs = append(errs, fmt.Errorf("%s: %w", l.o.Addrs[j], err))
	}
	return nil, errors.Join(errs...)
}

// addr is the address of the current (or last) session.
func (l *Link) addr() string { return l.o.Addrs[l.cur] }

func (l *Link) dialAddr(ctx context.Context, addr string) (tunnel.Session, error) {
	tc := l.o.Identity.TLSConfig()
	switch l.o.Transport {
	case tunnel.TransportQUIC:
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return l.o.DialQUIC(dctx, addr, tc)
	case tunnel.TransportYamux:
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return l.o.DialYamux(dctx, addr, tc)
	}
	qctx, cancel := context.WithTimeout(ctx, FallbackAfter)
	sess, qerr := l.o.DialQUIC(qctx, addr, tc)
	cancel()
	if qerr == nil {
		return sess, nil
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sess, err := l.o.DialYamux(dctx, addr, tc)
	if err != nil {
		return nil, fmt.Errorf("quic: %v; yamux: %w", qerr, err)
	}
	return sess, nil
}

// session runs one tunnel session until it dies. It returns a QUIC session
// to switch to when auto mode found QUIC again.
func (l *Link) session(ctx context.Context, sess tunnel.Session) (tunnel.Session, error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		sess.Close()
		wg.Wait()
	}()

	ctl, err := sess.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	hello := proto.Hello{}
	if l.o.Hello != nil {
		hello = l.o.Hello(ctx)
	}
	ctl.SetDeadline(time.Now().Add(15 * time.Second))
	var hr proto.HelloReply
	if err := wire.Call(ctl, wire.Header{Op: proto.OpHello}, hello, &hr); err != nil {
		var we *wire.Error
		if errors.As(err, &we) && we.Code == proto.CodeNodeRevoked {
			return nil, fmt.Errorf("%w: %s", ErrRevoked, we.Message)
		}
		return nil, fmt.Errorf("hello: %w", err)
	}
	ctl.SetDeadline(time.Time{})
	if hr.HeartbeatInterval <= 0 {
		hr.HeartbeatInterval = 5 * time.Second
	}
	now := time.Now().UTC()
	l.update(func(s *Status) {
		s.State, s.Transport, s.Since, s.LastHeartbeat, s.LastError = "connected", sess.Transport(), now, now, ""
		s.RTT = 0 // measured afresh on this session
		s.Connects++
	})
	l.o.Log.Info("connected", "coordinator", l.addr(), "transport", sess.Transport())

	// Heartbeats: send one per interval; the coordinator echoes it. No echo
	// and no byte of any stream for 3 intervals ends the session (a
	// watchdog judges it, so a read is never cut in the middle of a frame).
	var lastEcho atomic.Int64
	lastEcho.Store(time.Now().UnixNano())
	wg.Add(3)
	go func() {
		defer wg.Done()
		t := time.NewTicker(hr.HeartbeatInterval / 2)
		defer t.Stop()
		for {
			select {
			case <-sess.Done():
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				last := time.Unix(0, lastEcho.Load())
				if r := tunnel.LastReceived(sess); r.After(last) {
					last = r
				}
				if now.Sub(last) > 3*hr.HeartbeatInterval {
					l.o.Log.Warn("coordinator silent for 3 heartbeats; reconnecting", "silent_for", now.Sub(last).Round(time.Millisecond).String())
					sess.Close()
					return
				}
			}
		}
	}()
	go func() {
		defer wg.Done()
		defer sess.Close()
		t := time.NewTicker(hr.HeartbeatInterval)
		defer t.Stop()
		var seq uint64
		for {
			seq++
			b, _ := json.Marshal(proto.Heartbeat{Seq: seq, Sent: time.Now(), RTT: l.Status().RTT})
			if err := wire.WriteFrame(ctl, b); err != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	go func() {
		defer wg.Done()
		defer sess.Close()
		buf := make([]byte, 0, 256)
		for {
			p, err := wire.ReadFrame(ctl, buf)
			if err != nil {
				return
			}
			lastEcho.Store(time.Now().UnixNano())
			var hb proto.Heartbeat
			if json.Unmarshal(p, &hb) == nil {
				now := time.Now()
				l.update(func(s *Status) { s.LastHeartbeat, s.RTT = now.UTC(), now.Sub(hb.Sent) })
			}
		}
	}()

	// Calls from the coordinator.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			s, err := sess.AcceptStream(ctx)
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.serve(ctx, s)
			}()
		}
	}()

	if l.o.OnSession != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.o.OnSession(ctx, sess.OpenStream)
		}()
	}

	// Renewal at half-life ±10 %.
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.renewLoop(ctx, sess)
	}()

	var upgrade <-chan tunnel.Session
	if l.o.Transport == TransportAuto && sess.Transport() == tunnel.TransportYamux {
		ch := make(chan tunnel.Session, 1)
		upgrade = ch
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.retryQUIC(ctx, ch)
		}()
	}
	select {
	case <-ctx.Done():
		return nil, nil
	case <-sess.Done():
		return nil, errors.New("tunnel closed")
	case q := <-upgrade:
		l.o.Log.Info("QUIC reachable again; switching from yamux")
		return q, nil
	}
}

func (l *Link) retryQUIC(ctx context.Context, ch chan<- tunnel.Session) {
	// The replica this session reached: QUIC is retried there, not on
	// another one.
	addr := l.addr()
	t := time.NewTicker(l.o.QUICRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		qctx, cancel := context.WithTimeout(ctx, FallbackAfter)
		q, err := l.o.DialQUIC(qctx, addr, l.o.Identity.TLSConfig())
		cancel()
		if err == nil {
			select {
			case ch <- q:
			default:
				q.Close()
			}
			return
		}
	}
}

func (l *Link) serve(ctx context.Context, s tunnel.Stream) {
	defer s.Close()
	s.SetDeadline(time.Now().Add(30 * time.Second))
	var h wire.Header
	if err := wire.ReadMessage(s, &h); err != nil {
		return
	}
	s.SetDeadline(time.Time{})
	if h.RequestID != "" {
		// The API request that made this call: the agent's lines about it
		// carry its id (R-OBS-2).
		ctx = logging.WithRequestID(ctx, h.RequestID)
	}
	fn := l.o.Handlers[h.Op]
	if fn == nil {
		wire.Respond(s, nil, &wire.Error{Status: http.StatusNotFound, Code: "unknown_op", Message: fmt.Sprintf("this agent has no op %q; is it older than the coordinator?", h.Op)})
		return
	}
	start := time.Now()
	fn(ctx, h, s)
	// One line per call, at debug: never per frame (R-OBS-6).
	l.o.Log.DebugContext(ctx, "call served", logging.KeyOp, h.Op, logging.KeyRunRef, h.RunRef, logging.Duration(time.Since(start)))
}

func (l *Link) renewLoop(ctx context.Context, sess tunnel.Session) {
	for {
		at := certs.RenewAt(l.o.Identity.Leaf(), (rand.Float64()*2-1)*0.1)
		l.update(func(s *Status) { s.NextRenewal = at.UTC() })
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(at)):
		}
		if err := l.renew(ctx, sess); err != nil {
			l.o.Log.Warn("certificate renewal failed", logging.Err(err))
			// Retry after a tenth of what is left, at least a second.
			left := time.Until(l.o.Identity.Leaf().NotAfter) / 10
			select {
			case <-ctx.Done():
				return
			case <-time.After(max(left, time.Second)):
			}
			continue
		}
		l.o.Log.Info("certificate renewed", "not_after", l.o.Identity.Leaf().NotAfter.UTC().Format(time.RFC3339))
	}
}

// renew makes a new key here, sends only its CSR, installs the result.
func (l *Link) renew(ctx context.Context, sess tunnel.Session) error {
	key, err := certs.NewKey()
	if err != nil {
		return err
	}
	csr, err := certs.NewCSR(key)
	if err != nil {
		return err
	}
	s, err := sess.OpenStream(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	s.SetDeadline(time.Now().Add(30 * time.Second))
	var resp proto.RenewResponse
	if err := wire.Call(s, wire.Header{Op: proto.OpRenew}, proto.RenewRequest{CSR: csr}, &resp); err != nil {
		return err
	}
	return l.o.Identity.Renew(key, resp.CertPEM, resp.BundlePEM)
}
