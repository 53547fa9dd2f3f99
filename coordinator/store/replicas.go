package store

import (
	"context"
	"time"
)

// Replica is one coordinator process registered in a shared database
// (issue 24). Its times are the database's clock.
type Replica struct {
	ID string `json:"id"`
	// RelayAddr is the host:port other replicas dial to forward calls to
	// the nodes whose tunnels this replica holds.
	RelayAddr   string    `json:"relay_addr"`
	Version     string    `json:"version,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	// Live: the heartbeat is younger than the ttl the reader asked with.
	Live bool `json:"live"`
}

// Holder says which replica holds (or last held) a node's tunnel.
type Holder struct {
	NodeID    string
	ReplicaID string
	// RelayAddr is the holding replica's.
	RelayAddr string
	Transport string
	Since     time.Time
	LastBeat  time.Time
	RTT       time.Duration
	// LostAt is when the tunnel dropped; zero while it is up.
	LostAt time.Time
	// Live: the holding replica's heartbeat is younger than the ttl the
	// reader asked with. A holder that is not live holds nothing.
	Live bool
	// LostAgo is how long ago (the database's clock) the tunnel dropped,
	// when LostAt is set.
	LostAgo time.Duration
}

// Held is what a replica reports each heartbeat about a tunnel it holds.
type Held struct {
	NodeID   string
	LastBeat time.Time
	RTT      time.Duration
}

// Replicas is the bookkeeping of coordinators that share one database:
// only a store several processes can open implements it (PostgreSQL).
// bbolt, which one process opens, has no replicas.
type Replicas interface {
	// RegisterReplica inserts or refreshes r (heartbeat now) and forgets
	// the holds a previous process of the same id left behind.
	RegisterReplica(ctx context.Context, r Replica) error
	// ReplicaHeartbeat renews id's heartbeat and the last beat and round
	// trip of the tunnels it holds, in one transaction. ErrNotFound when
	// id is not registered (another process deregistered it).
	ReplicaHeartbeat(ctx context.Context, id string, held []Held) error
	// DeregisterReplica removes id and marks the tunnels it held lost.
	DeregisterReplica(ctx context.Context, id string) error
	// ListReplicas lists the registered replicas by id; Live is judged
	// against ttl.
	ListReplicas(ctx context.Context, ttl time.Duration) ([]Replica, error)
	// HoldNode records that h.ReplicaID now holds h.NodeID's tunnel (the
	// newest connection wins).
	HoldNode(ctx context.Context, h Holder) error
	// ReleaseNode marks node's tunnel lost, if replica still holds it.
	ReleaseNode(ctx context.Context, nodeID, replicaID string) error
	// NodeHolder returns the holder of node's tunnel with its replica's
	// address; ErrNotFound when no replica ever recorded one.
	NodeHolder(ctx context.Context, nodeID string, ttl time.Duration) (Holder, error)
	// ListHolders returns every holder row.
	ListHolders(ctx context.Context, ttl time.Duration) ([]Holder, error)
	// ClusterKey returns the value recorded under name, recording
	// proposed first when none is (the first replica's wins a race).
	ClusterKey(ctx context.Context, name, proposed string) (string, error)
	// SetClusterKey replaces the value recorded under name.
	SetClusterKey(ctx context.Context, name, value string) error
	// WatchRevocations calls fn with the id of each node whose revocation
	// changed, from any process, until ctx ends; each time its listening
	// connection is (re)established it calls fn with "" so that the
	// caller re-checks what it may have missed. It returns ctx's error.
	WatchRevocations(ctx context.Context, fn func(nodeID string)) error
	// AnnounceRuns tells the other replicas that the index took newer
	// rows of these runs here, changed their meta or removed them (R-CHG-5).
	// It is only a wake-up: a listener reads each run again.
	AnnounceRuns(ctx context.Context, runs []RunKey) error
	// WatchRuns calls fn with the runs another process announced, until
	// ctx ends; never with this process's own. Each time its listening
	// connection is (re)established it calls fn with none: what was
	// announced while it was down is missed. It returns ctx's error.
	WatchRuns(ctx context.Context, fn func([]RunKey)) error
}

// RunKey names a run in its tenant.
type RunKey struct{ Tenant, Ref string }
