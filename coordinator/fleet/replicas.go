package fleet

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/olivares-dev/olivares/shared/logging"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/tunnel"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Replica defaults.
const (
	// DefaultReplicaHeartbeat is how often a replica renews its row and
	// refreshes its view of who holds which node.
	DefaultReplicaHeartbeat = time.Second
	// DefaultReplicaTTL: a replica whose heartbeat is older holds nothing;
	// calls for its nodes are node_unreachable until they reconnect.
	DefaultReplicaTTL = 5 * time.Second
	// storeOpTimeout bounds each bookkeeping write of a replica.
	storeOpTimeout = 3 * time.Second
)

// ClusterOptions make a Fleet one of several coordinator replicas that
// share a database (issue 24).
type ClusterOptions struct {
	// ID names this replica; unique among the replicas of the database.
	ID string
	// RelayAddr is the host:port other replicas dial to reach this one.
	RelayAddr string
	// Registry is the shared database's replica bookkeeping.
	Registry store.Replicas
	// Certificate returns this replica's certificate (certs.IssueReplica),
	// shown to peers as server and as client.
	Certificate func() *tls.Certificate
	// Heartbeat: when zero, DefaultReplicaHeartbeat.
	Heartbeat time.Duration
	// TTL: when zero, DefaultReplicaTTL.
	TTL time.Duration
	// Version is recorded in the replica's row.
	Version string
}

// cluster is a Fleet's replica side. Its zero value is never used: Fleet
// has a nil *cluster when it is the only coordinator.
type cluster struct {
	o ClusterOptions
	f *Fleet

	// lastBeat is when the last heartbeat was written (unix nanos): a
	// replica that could not write one within the TTL is not registered
	// as far as its peers can tell, and says so on /readyz.
	lastBeat atomic.Int64

	mu      sync.Mutex
	peers   map[string]*peer // replica id → link to it
	holders map[string]store.Holder
	// seenAt is when holders was read.
	seenAt time.Time

	notices  atomic.Int64 // revocation notifications handled
	forwards atomic.Int64 // calls forwarded to another replica
}

type peer struct {
	mu   sync.Mutex
	addr string
	sess tunnel.Session
}

// ErrNotRegistered: the replica has not (or no longer) registered itself.
var ErrNotRegistered = errors.New("fleet: this replica is not registered in the database")

// Replica returns this replica's id, "" when the fleet is not a replica.
func (f *Fleet) Replica() string {
	if f.cluster == nil {
		return ""
	}
	return f.cluster.o.ID
}

// Registered reports nil once the replica's row is in the database with a
// heartbeat younger than the TTL; a fleet that is not a replica is always
// registered.
func (f *Fleet) Registered() error {
	c := f.cluster
	if c == nil {
		return nil
	}
	at := c.lastBeat.Load()
	if at == 0 || time.Since(time.Unix(0, at)) > c.o.TTL {
		return ErrNotRegistered
	}
	return nil
}

// ReplicaStats are the replica's counters.
type ReplicaStats struct {
	// RevocationNotices counts revocation notifications handled.
	RevocationNotices int64
	// Forwards counts calls forwarded to another replica.
	Forwards int64
}

// ReplicaStats returns the replica's counters.
func (f *Fleet) ReplicaStats() ReplicaStats {
	if f.cluster == nil {
		return ReplicaStats{}
	}
	return ReplicaStats{RevocationNotices: f.cluster.notices.Load(), Forwards: f.cluster.forwards.Load()}
}

func newCluster(f *Fleet, o ClusterOptions) *cluster {
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultReplicaHeartbeat
	}
	if o.TTL == 0 {
		o.TTL = DefaultReplicaTTL
	}
	return &cluster{o: o, f: f, peers: map[string]*peer{}, holders: map[string]store.Holder{}}
}

// SetRelayAddr sets the address other replicas dial, once the replica
// link listens (before RegisterReplica).
func (f *Fleet) SetRelayAddr(addr string) {
	if f.cluster != nil {
		f.cluster.o.RelayAddr = addr
	}
}

// RegisterReplica records this replica in the database (and forgets the
// holds a previous process of the same id left). Call it before the
// tunnel listeners serve, then RunReplica.
func (f *Fleet) RegisterReplica(ctx context.Context) error {
	if f.cluster == nil {
		return nil
	}
	return f.cluster.register(ctx)
}

// RunReplica renews the replica's heartbeat, keeps its view of the
// holders fresh and cuts the tunnels of nodes revoked through any replica,
// until ctx ends; then it deregisters (its tunnels are closing) and closes
// its links to peers. It returns at once when the fleet is not a replica.
func (f *Fleet) RunReplica(ctx context.Context) {
	c := f.cluster
	if c == nil {
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.o.Registry.WatchRevocations(ctx, c.revoked)
	}()
	t := time.NewTicker(c.o.Heartbeat)
	defer t.Stop()
	for {
		c.refresh(ctx)
		select {
		case <-ctx.Done():
			wg.Wait()
			c.lastBeat.Store(0)
			dctx, cancel := context.WithTimeout(context.Background(), storeOpTimeout)
			if err := c.o.Registry.DeregisterReplica(dctx, c.o.ID); err != nil {
				f.log.Warn("replica deregister failed", logging.KeyReplica, c.o.ID, logging.Err(err))
			}
			cancel()
			c.closePeers()
			return
		case <-t.C:
		}
		if err := c.beat(ctx); errors.Is(err, store.ErrNotFound) {
			// Someone deregistered us (a peer judged us dead): register
			// again, which also records our tunnels again.
			c.register(ctx)
		}
	}
}

func (c *cluster) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, storeOpTimeout)
	defer cancel()
	err := c.o.Registry.RegisterReplica(ctx, store.Replica{ID: c.o.ID, RelayAddr: c.o.RelayAddr, Version: c.o.Version})
	if err != nil {
		c.f.log.Warn("replica register failed", logging.KeyReplica, c.o.ID, logging.Err(err))
		return fmt.Errorf("register replica %s: %w", c.o.ID, err)
	}
	// The tunnels this process holds now (a re-registration after a long
	// database outage finds some).
	c.f.mu.Lock()
	links := make([]*link, 0, len(c.f.links))
	for _, l := range c.f.links {
		links = append(links, l)
	}
	c.f.mu.Unlock()
	for _, l := range links {
		c.hold(ctx, l)
	}
	c.lastBeat.Store(time.Now().UnixNano())
	c.f.log.Info("replica registered", logging.KeyReplica, c.o.ID, "relay", c.o.RelayAddr)
	return nil
}

func (c *cluster) beat(ctx context.Context) error {
	c.f.mu.Lock()
	held := make([]store.Held, 0, len(c.f.links))
	for id, l := range c.f.links {
		held = append(held, store.Held{NodeID: id, LastBeat: time.Unix(0, l.lastBeat.Load()), RTT: time.Duration(l.rtt.Load())})
	}
	c.f.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, storeOpTimeout)
	defer cancel()
	if err := c.o.Registry.ReplicaHeartbeat(ctx, c.o.ID, held); err != nil {
		if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
			c.f.log.Warn("replica heartbeat failed", logging.KeyReplica, c.o.ID, logging.Err(err))
		}
		return err
	}
	c.lastBeat.Store(time.Now().UnixNano())
	return nil
}

// refresh reads who holds which node, for Link (the nodes list and the
// runs' node_reachable): at most one heartbeat old.
func (c *cluster) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, storeOpTimeout)
	defer cancel()
	hs, err := c.o.Registry.ListHolders(ctx, c.o.TTL)
	if err != nil {
		return
	}
	m := make(map[string]store.Holder, len(hs))
	for _, h := range hs {
		m[h.NodeID] = h
	}
	c.mu.Lock()
	c.holders, c.seenAt = m, time.Now()
	c.mu.Unlock()
}

// hold records that this replica holds l's node (the newest tunnel wins).
func (c *cluster) hold(ctx context.Context, l *link) {
	ctx, cancel := context.WithTimeout(ctx, storeOpTimeout)
	defer cancel()
	err := c.o.Registry.HoldNode(ctx, store.Holder{NodeID: l.nodeID, ReplicaID: c.o.ID, Transport: l.sess.Transport(), Since: l.since})
	if err != nil {
		c.f.log.Warn("recording the tunnel holder failed", logging.KeyReplica, c.o.ID, logging.KeyNodeID, l.nodeID, logging.Err(err))
		return
	}
	c.mu.Lock()
	c.holders[l.nodeID] = store.Holder{NodeID: l.nodeID, ReplicaID: c.o.ID, Transport: l.sess.Transport(), Since: l.since, LastBeat: l.since, Live: true}
	c.mu.Unlock()
}

// release marks l's node lost, unless another replica took it since.
func (c *cluster) release(l *link) {
	ctx, cancel := context.WithTimeout(context.Background(), storeOpTimeout)
	defer cancel()
	if err := c.o.Registry.ReleaseNode(ctx, l.nodeID, c.o.ID); err != nil {
		c.f.log.Warn("releasing the tunnel holder failed", logging.KeyReplica, c.o.ID, logging.KeyNodeID, l.nodeID, logging.Err(err))
	}
	c.mu.Lock()
	if h, ok := c.holders[l.nodeID]; ok && h.ReplicaID == c.o.ID {
		h.LostAt, h.LostAgo = time.Now(), 0
		c.holders[l.nodeID] = h
	}
	c.mu.Unlock()
}

// revoked handles a revocation notification: the node is re-read (the
// database is the record) and its local tunnel cut when it is revoked or
// gone. "" re-checks every local tunnel (the listener (re)connected and
// may have missed notifications).
func (c *cluster) revoked(nodeID string) {
	c.notices.Add(1)
	ids := []string{nodeID}
	if nodeID == "" {
		ids = c.f.Connected()
	}
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), verifyTimeout)
		n, err := c.f.store.GetNode(ctx, id)
		cancel()
		gone := errors.Is(err, store.ErrNotFound)
		if err != nil && !gone {
			c.f.log.Warn("re-reading a node after a revocation notice failed", logging.KeyReplica, c.o.ID, logging.KeyNodeID, id, logging.Err(err))
			continue
		}
		if !gone && n.RevokedAt.IsZero() {
			continue
		}
		c.f.mu.Lock()
		if !gone {
			c.f.revoked[id] = true
		}
		l := c.f.links[id]
		c.f.mu.Unlock()
		if l != nil {
			c.f.log.Info("node revoked by another replica; cutting its tunnel", logging.KeyNodeID, id)
			l.sess.Close()
		}
	}
}

// remoteLink is the live state of a node whose tunnel another replica
// holds, as the last refresh saw it.
func (c *cluster) remoteLink(nodeID string) (Link, bool) {
	c.mu.Lock()
	h, ok := c.holders[nodeID]
	seen := c.seenAt
	c.mu.Unlock()
	if !ok || h.ReplicaID == c.o.ID && h.LostAt.IsZero() {
		// Our own hold without a local link: the tunnel is gone.
		return Link{}, false
	}
	if h.Live && h.LostAt.IsZero() {
		return Link{Connected: true, Online: true, Transport: h.Transport, ConnectedSince: h.Since,
			LastHeartbeat: h.LastBeat, RTT: h.RTT, Replica: h.ReplicaID}, true
	}
	if !h.LostAt.IsZero() && h.LostAgo+time.Since(seen) < PresenceGrace {
		return Link{Online: true}, true
	}
	return Link{}, false
}

// forward opens the call on the replica that holds nodeID's tunnel. It
// looks the holder up in the database each time (a node moves between
// replicas when its agent reconnects), and once more when the replica it
// reached no longer holds the node.
func (c *cluster) forward(ctx context.Context, nodeID string, h wire.Header, params, result any) (tunnel.Stream, error) {
	for attempt := 0; ; attempt++ {
		holder, err := c.o.Registry.NodeHolder(ctx, nodeID, c.o.TTL)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, unreachable(nodeID)
		case err != nil:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &wire.Error{Status: http.StatusServiceUnavailable, Code: "node_unreachable",
				Message: fmt.Sprintf("node %s: cannot tell which coordinator replica holds its tunnel (%v); retry shortly", nodeID, err)}
		case !holder.Live || !holder.LostAt.IsZero() || holder.ReplicaID == c.o.ID:
			return nil, unreachable(nodeID)
		}
		sess, err := c.peer(ctx, holder.ReplicaID, holder.RelayAddr)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &wire.Error{Status: http.StatusServiceUnavailable, Code: "node_unreachable",
				Message: fmt.Sprintf("node %s: its tunnel is held by coordinator replica %s, which this replica cannot reach (%v); the node reconnects to a live replica within its backoff", nodeID, holder.ReplicaID, err)}
		}
		c.forwards.Add(1)
		s, err := c.f.call(ctx, nodeID, sess.OpenStream, func(s tunnel.Stream) error {
			b, _ := json.Marshal(proto.ReplicaForward{NodeID: nodeID})
			return wire.WriteMessage(s, wire.Header{Op: proto.OpReplicaForward, Params: b})
		}, h, params, result)
		var we *wire.Error
		if errors.As(err, &we) && we.Code == proto.CodeNodeNotHeld {
			if attempt == 0 {
				continue
			}
			// The node is between replicas: to the caller, unreachable
			// for now.
			return nil, unreachable(nodeID)
		}
		return s, err
	}
}

func unreachable(nodeID string) error {
	return &wire.Error{Status: http.StatusServiceUnavailable, Code: "node_unreachable", Message: fmt.Sprintf("node %s has no live tunnel to the coordinator; check olivares-agent status on it", nodeID)}
}

// peer returns the live link to replica id, dialing it when there is none.
func (c *cluster) peer(ctx context.Context, id, addr string) (tunnel.Session, error) {
	c.mu.Lock()
	p := c.peers[id]
	if p == nil {
		p = &peer{}
		c.peers[id] = p
	}
	c.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess != nil {
		select {
		case <-p.sess.Done():
			p.sess = nil
		default:
			if p.addr == addr {
				return p.sess, nil
			}
			// The replica came back on another address.
			p.sess.Close()
			p.sess = nil
		}
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sess, err := tunnel.DialYamux(dctx, addr, c.clientTLS(id))
	if err != nil {
		return nil, err
	}
	p.sess, p.addr = sess, addr
	return sess, nil
}

func (c *cluster) closePeers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.peers {
		p.mu.Lock()
		if p.sess != nil {
			p.sess.Close()
		}
		p.mu.Unlock()
	}
}

// clientTLS is the config this replica dials replica want with: its own
// replica certificate, and the peer's chain checked against the CA bundle
// and its replica id against the one the database named (there is no host
// name to check: replicas are found by id).
func (c *cluster) clientTLS(want string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return c.o.Certificate(), nil
		},
		InsecureSkipVerify: true, // replaced by VerifyConnection below
		VerifyConnection: func(cs tls.ConnectionState) error {
			raw := make([][]byte, len(cs.PeerCertificates))
			for i, pc := range cs.PeerCertificates {
				raw[i] = pc.Raw
			}
			id, err := certs.VerifyReplica(raw, c.f.authority.Pool(), time.Now())
			if err != nil {
				return err
			}
			if id != want {
				return fmt.Errorf("fleet: the replica at this address is %s, not %s", id, want)
			}
			return nil
		},
	}
}

// RelayTLSConfig is the replica link's server config: this replica's
// certificate, and a client certificate required, verified against the CA
// bundle and carrying a replica identity (a node certificate is refused).
func (f *Fleet) RelayTLSConfig() *tls.Config {
	c := f.cluster
	base := &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.o.Certificate(), nil },
		ClientAuth:     tls.RequireAndVerifyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("fleet: no client certificate")
			}
			_, err := certs.ReplicaID(cs.PeerCertificates[0])
			return err
		},
	}
	conf := base.Clone()
	conf.ClientCAs = f.authority.Pool()
	conf.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cc := base.Clone()
		cc.ClientCAs = f.authority.Pool()
		return cc, nil
	}
	return conf
}

// ServeRelay accepts other replicas' links from l until ctx ends or l
// fails, and serves their forwarded calls.
func (f *Fleet) ServeRelay(ctx context.Context, l tunnel.Listener) error {
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
			f.servePeer(ctx, sess)
		}()
	}
}

func (f *Fleet) servePeer(ctx context.Context, sess tunnel.Session) {
	defer sess.Close()
	go func() {
		select {
		case <-ctx.Done():
			sess.Close()
		case <-sess.Done():
		}
	}()
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
			f.serveForward(ctx, s)
		}()
	}
}

// serveForward splices a forwarded call onto a stream of the node's
// tunnel: the call's header, its reply and every frame either way pass
// through unread.
func (f *Fleet) serveForward(ctx context.Context, s tunnel.Stream) {
	defer s.Close()
	s.SetDeadline(time.Now().Add(30 * time.Second))
	var h wire.Header
	if err := wire.ReadMessage(s, &h); err != nil {
		return
	}
	var fw proto.ReplicaForward
	if h.Op != proto.OpReplicaForward || json.Unmarshal(h.Params, &fw) != nil {
		wire.Respond(s, nil, &wire.Error{Status: http.StatusNotFound, Code: "unknown_op", Message: fmt.Sprintf("the replica link has no op %q", h.Op)})
		return
	}
	f.mu.Lock()
	l := f.links[fw.NodeID]
	f.mu.Unlock()
	if l == nil {
		wire.Respond(s, nil, &wire.Error{Status: http.StatusServiceUnavailable, Code: proto.CodeNodeNotHeld,
			Message: fmt.Sprintf("coordinator replica %s does not hold the tunnel of node %s", f.Replica(), fw.NodeID)})
		return
	}
	ns, err := l.sess.OpenStream(ctx)
	if err != nil {
		wire.Respond(s, nil, &wire.Error{Status: http.StatusServiceUnavailable, Code: "node_unreachable", Message: fmt.Sprintf("node %s: cannot open a stream: %v", fw.NodeID, err)})
		return
	}
	defer ns.Close()
	// The asker's deadline governs the call; the splice has none of its
	// own (an attach lasts hours).
	s.SetDeadline(time.Time{})
	splice(s, ns)
}

// splice copies a to b and b to a until both directions ended; an error
// either way (not a clean end) closes both, so neither copy outlives the
// other side.
func splice(a, b tunnel.Stream) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(b, a)
	}()
	pipe(a, b)
	<-done
}

// pipe copies src to dst; a clean end of src half-closes dst, anything
// else closes both.
func pipe(dst, src tunnel.Stream) {
	buf := make([]byte, 64<<10)
	_, err := io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, buf)
	if err == nil {
		dst.CloseWrite()
		return
	}
	dst.Close()
	src.Close()
}
