// Package fleet is the coordinator's side of the node tunnels: it accepts
// sessions, checks every handshake against the registry (revocation), keeps
// the live link of each node with its heartbeat, and opens call streams to
// agents.
//
// fleet never trusts a node's word for who it is: identity comes from the
// verified client certificate, and the registry record behind it.
package fleet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/coordinator/enroll"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/tunnel"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Defaults.
const (
	// DefaultHeartbeat is the interval the coordinator asks agents to use.
	DefaultHeartbeat = 5 * time.Second
	// PresenceGrace keeps a node online for this long after its tunnel
	// drops, so a reconnect does not flap in the console (issue 2).
	PresenceGrace = 10 * time.Second
	// helloTimeout bounds how long a new session may stay silent.
	helloTimeout = 10 * time.Second
)

// ErrUnreachable: the node has no live tunnel.
var ErrUnreachable = errors.New("fleet: node unreachable")

// Fleet tracks node links. Create with New.
type Fleet struct {
	store     store.Store
	authority *certs.Authority
	enroll    *enroll.Server
	heartbeat time.Duration
	log       *slog.Logger
	metrics   *metrics

	// reconnects and handshakeFailures are Stats' copies of the counters.
	reconnects        atomic.Int64
	handshakeFailures atomic.Int64

	mu      sync.Mutex
	links   map[string]*link     // node id → current link
	lost    map[string]time.Time // node id → when its last link dropped
	revoked map[string]bool      // revoked in this process: refuse at once

	// handlers counts the goroutines that serve sessions and their streams
	// (they use the store); Close waits for them. closed refuses sessions
	// accepted after Close.
	handlers sync.WaitGroup
	closed   bool

	// watchOnce starts the one watchdog of every link (watch), at the
	// first; stop ends it with the fleet.
	watchOnce sync.Once
	stop      chan struct{}

	// cluster is the replica side when several coordinators share the
	// database (nil when this is the only one).
	cluster *cluster
	// obs hears of index writes and link changes (the change stream).
	obs atomic.Pointer[Observer]
}

// Observer hears of what the fleet changes in what the API shows: the run
// rows an agent pushed that the index took, and the node links that came
// up or went down. Its methods must not block.
type Observer interface {
	RunsIndexed(ctx context.Context, runs []apitypes.Run)
	LinkChanged(nodeID string, connected bool)
	// SigninsEnded hears of the sign-in attempts a node reported ended
	// and answers the ids the node may forget (R-ACCT-10).
	SigninsEnded(ctx context.Context, nodeID string, as []apitypes.SigninAttempt) []string
}

// Observe sets the fleet's observer (one; a later call replaces it).
func (f *Fleet) Observe(o Observer) { f.obs.Store(&o) }

func (f *Fleet) observer() Observer {
	if p := f.obs.Load(); p != nil {
		return *p
	}
	return nil
}

// Options configure a Fleet.
type Options struct {
	Store     store.Store
	Authority *certs.Authority
	Enroll    *enroll.Server
	// Heartbeat interval agents are told to use. When zero, DefaultHeartbeat.
	Heartbeat time.Duration
	// Log gets the fleet's lines (connections, refusals; tunnel calls at
	// debug). When nil, discarded.
	Log *slog.Logger
	// Metrics registers the fleet's metrics (R-OBS-7). When nil, they are
	// kept but not exported.
	Metrics prometheus.Registerer
	// Cluster, when set, makes this fleet one replica of several sharing
	// the store (issue 24): it records the tunnels it holds, forwards calls
	// for nodes another replica holds, and cuts nodes revoked anywhere.
	Cluster *ClusterOptions
}

// New returns a Fleet.
func New(o Options) *Fleet {
	f := &Fleet{
		store: o.Store, authority: o.Authority, enroll: o.Enroll,
		heartbeat: o.Heartbeat, log: logging.OrDiscard(o.Log).With(logging.KeyComponent, "fleet"),
		links: map[string]*link{}, lost: map[string]time.Time{}, revoked: map[string]bool{},
		stop: make(chan struct{}),
	}
	if f.heartbeat == 0 {
		f.heartbeat = DefaultHeartbeat
	}
	f.metrics = newMetrics(f, o.Metrics)
	if o.Cluster != nil {
		f.cluster = newCluster(f, *o.Cluster)
	}
	return f
}

type link struct {
	nodeID   string
	sess     tunnel.Session
	since    time.Time
	lastBeat atomic.Int64 // unix nanos
	rtt      atomic.Int64 // nanos: the round trip the agent last reported
	hostname string
	cert     *x509.Certificate // the certificate this session presented
	gone     chan struct{}     // closed once the link is unregistered
}

// GetCertificate returns the server certificate for a handshake: the
// coordinator's current one, so that a reload applies to new connections.
type GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)

// verifyTimeout bounds the registry lookup of one handshake.
const verifyTimeout = 5 * time.Second

// TLSConfig returns the tunnel's server TLS config: TLS 1.3, a client
// certificate required and verified against the CA bundle (current and next
// root), and the registry checked on every handshake.
func (f *Fleet) TLSConfig(cert GetCertificate) *tls.Config {
	base := &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: cert,
		ClientAuth:     tls.RequireAndVerifyClientCert,
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: cert,
		ClientAuth:     tls.RequireAndVerifyClientCert,
		ClientCAs:      f.authority.Pool(),
		// The pool is taken per handshake so that a CA rotation applies
		// without a restart, and the registry lookup runs under the
		// handshake's context (the listener's, with its timeout).
		GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			c := base.Clone()
			c.ClientCAs = f.authority.Pool()
			ctx := hi.Context()
			c.VerifyConnection = func(cs tls.ConnectionState) error { return f.verifyConnection(ctx, cs) }
			return c, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error { return f.verifyConnection(context.Background(), cs) },
	}
}

// EnrollTLSConfig is served to enrollment ClientHellos: no client
// certificate, the server chain carries the CA so the node can check its pin.
func (f *Fleet) EnrollTLSConfig(cert GetCertificate) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: cert}
}

// verifyConnection checks every tunnel handshake against the registry. ctx
// is the handshake's: a handshake abandoned by its listener stops waiting
// on the store. A registry that cannot answer fails the handshake (the
// agent retries). A revoked or forgotten node's handshake completes (its
// chain is still ours) only so that handle can tell it why it is refused:
// its session serves nothing but that refusal (R-NODE-2, R-LIFE-8).
func (f *Fleet) verifyConnection(ctx context.Context, cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errNoClientCert
	}
	id, err := certs.NodeID(cs.PeerCertificates[0])
	if err != nil {
		return err
	}
	if _, err := f.refusal(ctx, id); err != nil {
		return fmt.Errorf("fleet: node %s: %w: %w", id, errRegistry, err)
	}
	return nil
}

// refusal says why node id may not connect ("" when it may): it was
// revoked, or forgotten. err is a registry that could not answer.
func (f *Fleet) refusal(ctx context.Context, id string) (string, error) {
	f.mu.Lock()
	rev := f.revoked[id]
	f.mu.Unlock()
	if rev {
		return fmt.Sprintf("node %s was revoked", id), nil
	}
	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	n, err := f.store.GetNode(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Sprintf("node %s is not registered (it was revoked and forgotten)", id), nil
	case err != nil:
		return "", err
	case !n.RevokedAt.IsZero():
		return fmt.Sprintf("node %s was revoked at %s", id, n.RevokedAt.UTC().Format(time.RFC3339)), nil
	}
	return "", nil
}

// refuse answers the first stream of a refused node's session with
// node_revoked and closes the session: nothing else is read or served.
func (f *Fleet) refuse(ctx context.Context, sess tunnel.Session, id, why string) {
	f.handshakeFailed(reasonRevoked, errors.New("fleet: "+why))
	ctx, cancel := context.WithTimeout(ctx, helloTimeout)
	defer cancel()
	s, err := sess.AcceptStream(ctx)
	if err != nil {
		return
	}
	defer s.Close()
	s.SetDeadline(time.Now().Add(helloTimeout))
	var h wire.Header
	if err := wire.ReadMessage(s, &h); err != nil {
		return
	}
	wire.Respond(s, nil, &wire.Error{Status: http.StatusForbidden, Code: proto.CodeNodeRevoked,
		Message: why + "; it cannot connect again. Enroll the host again with a new join token"})
	// Closing at once could drop the answer (QUIC's CONNECTION_CLOSE
	// overtakes stream data): wait until the agent has read it and closed
	// its side, or the deadline.
	io.Copy(io.Discard, s)
}

// HandshakeFailed counts a failed tunnel handshake (listeners call it).
func (f *Fleet) HandshakeFailed(err error) { f.handshakeFailed(handshakeReason(err), err) }

func (f *Fleet) handshakeFailed(reason string, err error) {
	f.handshakeFailures.Add(1)
	f.metrics.handshakeFailures.WithLabelValues(reason).Inc()
	f.log.Warn("handshake refused", "reason", reason, logging.Err(err))
}

// Serve accepts sessions from l until ctx ends or l fails.
func (f *Fleet) Serve(ctx context.Context, l tunnel.Listener) error {
	for {
		sess, err := l.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if !f.track() {
			sess.Close()
			continue
		}
		go func() {
			defer f.handlers.Done()
			f.handle(ctx, sess)
		}()
	}
}

// track counts one more handler goroutine, unless the fleet is closed.
func (f *Fleet) track() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.handlers.Add(1)
	return true
}

// Close cuts every live tunnel and returns when the goroutines serving
// them have: after it, the fleet touches the store no more. Sessions
// accepted later are closed at once. The listeners are the caller's to
// close (before, so that no new session arrives).
func (f *Fleet) Close() {
	f.mu.Lock()
	if !f.closed {
		close(f.stop)
	}
	f.closed = true
	links := make([]*link, 0, len(f.links))
	for _, l := range f.links {
		links = append(links, l)
	}
	f.mu.Unlock()
	for _, l := range links {
		l.sess.Close()
	}
	f.handlers.Wait()
}

func nodeOf(sess tunnel.Session) (string, *x509.Certificate, error) {
	cs := sess.ConnectionState()
	if len(cs.PeerCertificates) == 0 {
		return "", nil, errors.New("no peer certificate")
	}
	id, err := certs.NodeID(cs.PeerCertificates[0])
	return id, cs.PeerCertificates[0], err
}

func (f *Fleet) handle(ctx context.Context, sess tunnel.Session) {
	defer sess.Close()
	id, cert, err := nodeOf(sess)
	if err != nil {
		f.handshakeFailed(reasonNoNodeID, err)
		return
	}
	switch why, err := f.refusal(ctx, id); {
	case err != nil:
		f.log.Error("registry check failed", logging.KeyNodeID, id, logging.Err(err))
		return
	case why != "":
		f.refuse(ctx, sess, id, why)
		return
	}
	l := &link{nodeID: id, sess: sess, cert: cert, gone: make(chan struct{})}
	helloDone := make(chan struct{})
	go func() {
		select {
		case <-helloDone:
		case <-sess.Done():
		case <-time.After(helloTimeout):
			f.log.Warn("node sent no hello in time", logging.KeyNodeID, id, "timeout", helloTimeout)
			sess.Close()
		}
	}()
	defer f.unregister(l)
	for {
		s, err := sess.AcceptStream(ctx)
		if err != nil {
			return
		}
		if !f.track() {
			s.Close()
			return
		}
		go func() {
			defer f.handlers.Done()
			f.serveStream(ctx, l, s, helloDone)
		}()
	}
}

func (f *Fleet) serveStream(ctx context.Context, l *link, s tunnel.Stream, helloDone chan struct{}) {
	defer s.Close()
	s.SetDeadline(time.Now().Add(30 * time.Second))
	var h wire.Header
	if err := wire.ReadMessage(s, &h); err != nil {
		return
	}
	switch h.Op {
	case proto.OpHello:
		f.control(ctx, l, s, h, helloDone)
	case proto.OpRenew:
		var req proto.RenewRequest
		if err := json.Unmarshal(h.Params, &req); err != nil {
			wire.Respond(s, nil, &wire.Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "renew: bad params"})
			return
		}
		resp, err := f.enroll.Renew(ctx, l.nodeID, req.CSR)
		if err != nil {
			wire.Respond(s, nil, err)
			return
		}
		f.log.Info("node renewed its certificate", logging.KeyNodeID, l.nodeID)
		wire.Respond(s, resp, nil)
	case proto.OpRunsPush:
		var req proto.RunsPush
		if err := json.Unmarshal(h.Params, &req); err != nil {
			wire.Respond(s, nil, &wire.Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "runs.push: bad params"})
			return
		}
		err := f.indexRuns(ctx, l.nodeID, req.Runs, req.Usage)
		var reply proto.RunsPushReply
		if o := f.observer(); err == nil && o != nil && len(req.Signins) > 0 {
			reply.SigninsTaken = o.SigninsEnded(ctx, l.nodeID, req.Signins)
		}
		if err != nil {
			wire.Respond(s, nil, err)
			return
		}
		wire.Respond(s, reply, nil)
	default:
		wire.Respond(s, nil, &wire.Error{Status: http.StatusNotFound, Code: "unknown_op", Message: fmt.Sprintf("coordinator has no op %q", h.Op)})
	}
}

// indexRuns stores run rows and usage rows an agent pushed, in one
// transaction: the push is the index's one writer (issue 24), and one
// commit is one fsync on the path of the call that waits for it (issue
// 34). The node and tenant come from the verified tunnel identity and the
// registry, never from the row: an agent can only index its own runs in
// its own tenant.
func (f *Fleet) indexRuns(ctx context.Context, nodeID string, runs []apitypes.Run, usage []apitypes.UsageTurn) error {
	n, err := f.store.GetNode(ctx, nodeID)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	refs := make([]string, 0, len(runs)+len(usage))
	pushed := make(map[string]bool, len(runs))
	for i := range runs {
		runs[i].NodeID, runs[i].Tenant, runs[i].NodeReachable, runs[i].IndexedAt = nodeID, n.Tenant, nil, &now
		refs = append(refs, runs[i].RunRef)
		pushed[runs[i].RunRef] = true
	}
	for _, u := range usage {
		refs = append(refs, u.RunRef)
	}
	// What the index held before: a row is news to the change stream when
	// it is newer than that (R-CHG-2), and a usage row is this node's to
	// report when its run is.
	var before map[string]apitypes.Run
	o := f.observer()
	if o != nil || len(usage) > 0 {
		if before, err = f.store.GetRuns(ctx, refs); err != nil {
			return err
		}
	}
	_, refused, err := f.store.PutRuns(ctx, runs, f.usageOf(n, usage, before, pushed)...)
	if err != nil {
		return err
	}
	for ref, err := range refused {
		f.log.Warn("index write refused", logging.KeyNodeID, nodeID, logging.KeyRunRef, ref, logging.Err(err))
	}
	if o != nil {
		var wrote []apitypes.Run
		for _, r := range runs {
			old, had := before[r.RunRef]
			if _, no := refused[r.RunRef]; !no && (!had || old.Rev < r.Rev) {
				wrote = append(wrote, r)
			}
		}
		if len(wrote) > 0 {
			o.RunsIndexed(ctx, wrote)
		}
	}
	return nil
}

// control runs the hello exchange and then echoes heartbeats until the
// stream or the session ends, or the agent goes silent for 3 intervals.
func (f *Fleet) control(ctx context.Context, l *link, s tunnel.Stream, h wire.Header, helloDone chan struct{}) {
	var hello proto.Hello
	if err := json.Unmarshal(h.Params, &hello); err != nil {
		wire.Respond(s, nil, &wire.Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "hello: bad params"})
		return
	}
	caps, _ := json.Marshal(hello.Capabilities)
	_, err := f.store.UpdateNode(ctx, l.nodeID, func(n *store.Node) error {
		if !n.RevokedAt.IsZero() {
			return errRevoked
		}
		n.Hostname = hello.Hostname
		n.AgentVersion = hello.AgentVersion
		n.Capabilities = caps
		// The registry shows the certificate in use, not merely the newest
		// one signed (a renewal can be cut off before the node installs it).
		n.CertSerial = l.cert.SerialNumber.Text(16)
		n.CertNotAfter = l.cert.NotAfter.UTC()
		return nil
	})
	if errors.Is(err, errRevoked) {
		wire.Respond(s, nil, &wire.Error{Status: http.StatusForbidden, Code: proto.CodeNodeRevoked, Message: "this node was revoked"})
		l.sess.Close()
		return
	}
	if err != nil {
		wire.Respond(s, nil, &wire.Error{Status: http.StatusForbidden, Code: "node_refused", Message: err.Error()})
		l.sess.Close()
		return
	}
	l.hostname = hello.Hostname
	if !f.register(l) {
		wire.Respond(s, nil, &wire.Error{Status: http.StatusForbidden, Code: proto.CodeNodeRevoked, Message: "this node was revoked"})
		l.sess.Close()
		return
	}
	if f.cluster != nil {
		// Recorded before the hello is answered: once the agent is
		// connected, every replica can find it.
		f.cluster.hold(ctx, l)
	}
	close(helloDone)
	if err := wire.Respond(s, proto.HelloReply{NodeID: l.nodeID, HeartbeatInterval: f.heartbeat}, nil); err != nil {
		l.sess.Close()
		return
	}
	// A node silent for 3 heartbeats ends the session: the agent will
	// reconnect. Silent means no heartbeat and no byte of any stream (a
	// busy tunnel can hold a heartbeat behind its output); the watchdog
	// judges it, so a read is never cut in the middle of a frame.
	f.watchOnce.Do(func() { go f.watch() })
	s.SetDeadline(time.Time{}) // the call's 30 s header deadline
	buf := make([]byte, 0, 256)
	for {
		p, err := wire.ReadFrame(s, buf)
		if err != nil {
			// A broken control stream ends the session.
			l.sess.Close()
			return
		}
		l.lastBeat.Store(time.Now().UnixNano())
		var hb proto.Heartbeat
		if json.Unmarshal(p, &hb) == nil && hb.RTT > 0 {
			l.rtt.Store(int64(hb.RTT))
		}
		if err := wire.WriteFrame(s, p); err != nil {
			l.sess.Close()
			return
		}
	}
}

var errRevoked = errors.New("node is revoked")

// watch closes the session of every node silent for 3 heartbeats (no
// heartbeat and, where the transport says, no byte received), looking
// every half heartbeat, until the fleet is closed: one goroutine and one
// timer for the fleet, not one per node (issue 34).
func (f *Fleet) watch() {
	t := time.NewTicker(f.heartbeat / 2)
	defer t.Stop()
	var links []*link
	for {
		select {
		case <-f.stop:
			return
		case now := <-t.C:
			f.mu.Lock()
			links = links[:0]
			for _, l := range f.links {
				links = append(links, l)
			}
			f.mu.Unlock()
			for _, l := range links {
				last := time.Unix(0, l.lastBeat.Load())
				if r := tunnel.LastReceived(l.sess); r.After(last) {
					last = r
				}
				if now.Sub(last) > 3*f.heartbeat {
					f.log.Warn("node silent for 3 heartbeats; closing its tunnel", logging.KeyNodeID, l.nodeID, "silent_for", now.Sub(last).Round(time.Millisecond).String())
					l.sess.Close()
				}
			}
		}
	}
}

// register makes l the node's current link; an older link is closed.
func (f *Fleet) register(l *link) bool {
	f.mu.Lock()
	if f.revoked[l.nodeID] {
		f.mu.Unlock()
		return false
	}
	old := f.links[l.nodeID]
	_, seen := f.lost[l.nodeID]
	if old != nil || seen {
		f.reconnects.Add(1)
		f.metrics.reconnects.Inc()
	}
	now := time.Now()
	l.since = now
	l.lastBeat.Store(now.UnixNano())
	f.links[l.nodeID] = l
	delete(f.lost, l.nodeID)
	f.mu.Unlock()
	if old != nil {
		old.sess.Close()
	}
	f.log.Info("node connected", logging.KeyNodeID, l.nodeID, "transport", l.sess.Transport(), "hostname", l.hostname)
	if o := f.observer(); o != nil {
		o.LinkChanged(l.nodeID, true)
	}
	return true
}

func (f *Fleet) unregister(l *link) {
	if l.gone != nil {
		defer close(l.gone)
	}
	f.mu.Lock()
	current := f.links[l.nodeID] == l
	if current {
		delete(f.links, l.nodeID)
		f.lost[l.nodeID] = time.Now()
		f.log.Info("node disconnected", logging.KeyNodeID, l.nodeID)
	}
	f.mu.Unlock()
	if current && f.cluster != nil {
		f.cluster.release(l)
	}
	if o := f.observer(); current && o != nil {
		o.LinkChanged(l.nodeID, false)
	}
}

// Revoke marks the node revoked in the store and cuts its live tunnel at
// once; every later handshake of that node is refused.
func (f *Fleet) Revoke(ctx context.Context, nodeID string) (store.Node, error) {
	f.mu.Lock()
	f.revoked[nodeID] = true
	l := f.links[nodeID]
	f.mu.Unlock()
	n, err := f.store.UpdateNode(ctx, nodeID, func(n *store.Node) error {
		if n.RevokedAt.IsZero() {
			n.RevokedAt = time.Now().UTC()
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			f.mu.Lock()
			delete(f.revoked, nodeID)
			f.mu.Unlock()
		}
		return store.Node{}, err
	}
	if l != nil {
		l.sess.Close()
	}
	return n, nil
}

// Link is the live state of a node's tunnel.
type Link struct {
	// Connected: a tunnel is up right now.
	Connected bool
	// Online: connected, or dropped less than PresenceGrace ago.
	Online         bool
	Transport      string
	ConnectedSince time.Time
	LastHeartbeat  time.Time
	// RTT is the heartbeat round trip the agent last measured; zero until
	// it reported one on this tunnel.
	RTT         time.Duration
	OpenStreams int
	// Replica is the id of the coordinator replica holding the tunnel,
	// when coordinators share a database.
	Replica string
}

// Link returns the live state of a node.
func (f *Fleet) Link(nodeID string) Link {
	f.mu.Lock()
	if l := f.links[nodeID]; l != nil {
		defer f.mu.Unlock()
		return Link{
			Connected: true, Online: true, Transport: l.sess.Transport(),
			ConnectedSince: l.since.UTC(), LastHeartbeat: time.Unix(0, l.lastBeat.Load()).UTC(),
			RTT: time.Duration(l.rtt.Load()), OpenStreams: l.sess.NumStreams(), Replica: f.Replica(),
		}
	}
	at, lost := f.lost[nodeID]
	f.mu.Unlock()
	if f.cluster != nil {
		if rl, ok := f.cluster.remoteLink(nodeID); ok && (rl.Connected || !lost) {
			return rl
		}
	}
	if lost && time.Since(at) < PresenceGrace {
		return Link{Online: true}
	}
	return Link{}
}

// Connected lists node ids with a live tunnel, sorted.
func (f *Fleet) Connected() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]string, 0, len(f.links))
	for id := range f.links {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Stats are the fleet's counters, as the admin socket and tests read them.
type Stats struct {
	NodesConnected    int
	Reconnects        int64
	OpenStreams       int
	HandshakeFailures int64
}

// Stats returns current counters.
func (f *Fleet) Stats() Stats {
	f.mu.Lock()
	st := Stats{NodesConnected: len(f.links)}
	for _, l := range f.links {
		st.OpenStreams += l.sess.NumStreams()
	}
	f.mu.Unlock()
	st.Reconnects = f.reconnects.Load()
	st.HandshakeFailures = f.handshakeFailures.Load()
	return st
}

// Open opens a call stream to the node: header sent, reply read. On success
// the caller owns the stream (frames may follow) and must Close it. The
// call is counted by op and result, with the time to its reply (R-OBS-7);
// the header carries the API request's id, when ctx has one.
//
// A node whose tunnel another replica holds is reached through it: the
// stream returned then runs over the replica link, and carries the same
// reply and frames (issue 24).
func (f *Fleet) Open(ctx context.Context, nodeID string, h wire.Header, params any, result any) (tunnel.Stream, error) {
	if h.RequestID == "" {
		h.RequestID = logging.RequestID(ctx)
	}
	start := time.Now()
	s, err := f.open(ctx, nodeID, h, params, result)
	res := callResult(err)
	f.metrics.calls.WithLabelValues(h.Op, res).Observe(time.Since(start).Seconds())
	lvl := slog.LevelDebug
	if res == resultFailed {
		lvl = slog.LevelWarn
	}
	if f.log.Enabled(ctx, lvl) {
		f.log.Log(ctx, lvl, "tunnel call", logging.KeyOp, h.Op, logging.KeyNodeID, nodeID, logging.KeyRunRef, h.RunRef,
			"result", res, logging.Duration(time.Since(start)), logging.Err(err))
	}
	return s, err
}

func (f *Fleet) open(ctx context.Context, nodeID string, h wire.Header, params any, result any) (tunnel.Stream, error) {
	f.mu.Lock()
	l := f.links[nodeID]
	f.mu.Unlock()
	if l == nil {
		if f.cluster != nil {
			return f.cluster.forward(ctx, nodeID, h, params, result)
		}
		return nil, unreachable(nodeID)
	}
	return f.call(ctx, nodeID, l.sess.OpenStream, nil, h, params, result)
}

// call opens a stream with open, writes prelude's bytes (a forward header)
// when set, then makes the call: header sent, reply read.
func (f *Fleet) call(ctx context.Context, nodeID string, open func(context.Context) (tunnel.Stream, error), prelude func(tunnel.Stream) error,
	h wire.Header, params any, result any) (tunnel.Stream, error) {
	s, err := open(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &wire.Error{Status: http.StatusServiceUnavailable, Code: codeUnreachable, Message: fmt.Sprintf("node %s: cannot open a stream: %v", nodeID, err)}
	}
	if dl, ok := ctx.Deadline(); ok {
		s.SetDeadline(dl)
	}
	// A cancelled ctx (the caller went away, the coordinator drains) ends
	// the call at once: the deadline in the past wakes the blocked read.
	stop := context.AfterFunc(ctx, func() { s.SetDeadline(time.Unix(1, 0)) })
	if prelude != nil {
		err = prelude(s)
	}
	if err == nil {
		err = wire.Call(s, h, params, result)
	}
	if !stop() || err != nil {
		s.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var we *wire.Error
		if errors.As(err, &we) {
			return nil, we
		}
		return nil, &wire.Error{Status: http.StatusBadGateway, Code: codeCallFailed, Message: fmt.Sprintf("node %s: %s: %v", nodeID, h.Op, err)}
	}
	s.SetDeadline(time.Time{})
	return s, nil
}

// Call is Open for calls without frames: the stream is closed on return.
func (f *Fleet) Call(ctx context.Context, nodeID string, h wire.Header, params any, result any) error {
	s, err := f.Open(ctx, nodeID, h, params, result)
	if err != nil {
		return err
	}
	return s.Close()
}

// Disconnect closes the node's live tunnel, if any (shutdown), and
// returns once the fleet no longer counts it connected (or after 10 s),
// so that what follows sees the node's next connection, not this one. The
// agent will reconnect.
func (f *Fleet) Disconnect(nodeID string) {
	f.mu.Lock()
	l := f.links[nodeID]
	f.mu.Unlock()
	if l == nil {
		return
	}
	l.sess.Close()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-l.gone:
	case <-t.C:
	}
}
