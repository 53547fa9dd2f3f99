package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/olivares-dev/olivares/coordinator/store"
)

var _ store.Replicas = (*Store)(nil)

// secs is d in seconds, for make_interval.
func secs(d time.Duration) float64 { return d.Seconds() }

// RegisterReplica implements store.Replicas.
func (s *Store) RegisterReplica(ctx context.Context, r store.Replica) error {
	if err := checkText("register replica", r.ID, r.RelayAddr, r.Version); err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO replicas (id, relay_addr, version, started_at, heartbeat_at)
			VALUES ($1, $2, $3, now(), now())
			ON CONFLICT (id) DO UPDATE SET relay_addr = $2, version = $3, started_at = now(), heartbeat_at = now()`,
			r.ID, r.RelayAddr, r.Version); err != nil {
			return err
		}
		// A process of the same id that died left its holds: its tunnels
		// died with it.
		_, err := tx.Exec(ctx, "UPDATE node_holders SET lost_at = now() WHERE replica_id = $1 AND lost_at IS NULL", r.ID)
		return err
	})
}

// ReplicaHeartbeat implements store.Replicas: one transaction, one
// statement for all held tunnels.
func (s *Store) ReplicaHeartbeat(ctx context.Context, id string, held []store.Held) error {
	nodes := make([]string, len(held))
	beats := make([]time.Time, len(held))
	rtts := make([]int64, len(held))
	for i, h := range held {
		nodes[i], beats[i], rtts[i] = h.NodeID, h.LastBeat.UTC(), int64(h.RTT)
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "UPDATE replicas SET heartbeat_at = now() WHERE id = $1", id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("replica %q: %w", id, store.ErrNotFound)
		}
		if len(held) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `UPDATE node_holders h SET last_beat = u.beat, rtt_ns = u.rtt
			FROM unnest($2::text[], $3::timestamptz[], $4::bigint[]) AS u(node, beat, rtt)
			WHERE h.node_id = u.node AND h.replica_id = $1`, id, nodes, beats, rtts)
		return err
	})
}

// DeregisterReplica implements store.Replicas.
func (s *Store) DeregisterReplica(ctx context.Context, id string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "UPDATE node_holders SET lost_at = now() WHERE replica_id = $1 AND lost_at IS NULL", id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "DELETE FROM replicas WHERE id = $1", id)
		return err
	})
}

// ListReplicas implements store.Replicas.
func (s *Store) ListReplicas(ctx context.Context, ttl time.Duration) ([]store.Replica, error) {
	db, err := s.q()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT id, relay_addr, version, started_at, heartbeat_at,
		now() - heartbeat_at < make_interval(secs => $1) FROM replicas ORDER BY id`, secs(ttl))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Replica, error) {
		var r store.Replica
		err := row.Scan(&r.ID, &r.RelayAddr, &r.Version, &r.StartedAt, &r.HeartbeatAt, &r.Live)
		r.StartedAt, r.HeartbeatAt = r.StartedAt.UTC(), r.HeartbeatAt.UTC()
		return r, err
	})
}

// HoldNode implements store.Replicas.
func (s *Store) HoldNode(ctx context.Context, h store.Holder) error {
	if err := checkText("hold node", h.NodeID, h.ReplicaID, h.Transport); err != nil {
		return err
	}
	db, err := s.q()
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, `INSERT INTO node_holders (node_id, replica_id, transport, since, last_beat, rtt_ns, lost_at)
		VALUES ($1, $2, $3, $4, $4, 0, NULL)
		ON CONFLICT (node_id) DO UPDATE SET replica_id = $2, transport = $3, since = $4, last_beat = $4, rtt_ns = 0, lost_at = NULL`,
		h.NodeID, h.ReplicaID, h.Transport, h.Since.UTC())
	return closedErr(s, err)
}

// ReleaseNode implements store.Replicas.
func (s *Store) ReleaseNode(ctx context.Context, nodeID, replicaID string) error {
	db, err := s.q()
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, "UPDATE node_holders SET lost_at = now() WHERE node_id = $1 AND replica_id = $2 AND lost_at IS NULL", nodeID, replicaID)
	return closedErr(s, err)
}

const holderColumns = `h.node_id, h.replica_id, coalesce(r.relay_addr, ''), h.transport, h.since, h.last_beat, h.rtt_ns, h.lost_at,
	coalesce(now() - r.heartbeat_at < make_interval(secs => $1), false),
	coalesce(extract(epoch FROM now() - h.lost_at), 0)::float8`

func scanHolder(row rowScanner) (store.Holder, error) {
	var (
		h       store.Holder
		rtt     int64
		lost    *time.Time
		lostAgo float64
	)
	if err := row.Scan(&h.NodeID, &h.ReplicaID, &h.RelayAddr, &h.Transport, &h.Since, &h.LastBeat, &rtt, &lost, &h.Live, &lostAgo); err != nil {
		return store.Holder{}, err
	}
	h.Since, h.LastBeat, h.RTT = h.Since.UTC(), h.LastBeat.UTC(), time.Duration(rtt)
	if lost != nil {
		h.LostAt, h.LostAgo = lost.UTC(), time.Duration(lostAgo*float64(time.Second))
	}
	return h, nil
}

// NodeHolder implements store.Replicas.
func (s *Store) NodeHolder(ctx context.Context, nodeID string, ttl time.Duration) (store.Holder, error) {
	db, err := s.q()
	if err != nil {
		return store.Holder{}, err
	}
	h, err := scanHolder(db.QueryRow(ctx, "SELECT "+holderColumns+
		" FROM node_holders h LEFT JOIN replicas r ON r.id = h.replica_id WHERE h.node_id = $2", secs(ttl), nodeID))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Holder{}, fmt.Errorf("node %q: %w", nodeID, store.ErrNotFound)
	}
	return h, closedErr(s, err)
}

// ListHolders implements store.Replicas.
func (s *Store) ListHolders(ctx context.Context, ttl time.Duration) ([]store.Holder, error) {
	db, err := s.q()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, "SELECT "+holderColumns+
		" FROM node_holders h LEFT JOIN replicas r ON r.id = h.replica_id ORDER BY h.node_id", secs(ttl))
	if err != nil {
		return nil, closedErr(s, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Holder, error) { return scanHolder(row) })
}

// ClusterKey implements store.Replicas.
func (s *Store) ClusterKey(ctx context.Context, name, proposed string) (string, error) {
	db, err := s.q()
	if err != nil {
		return "", err
	}
	var got string
	err = db.QueryRow(ctx, `WITH ins AS (
			INSERT INTO cluster_keys (name, fingerprint) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING fingerprint)
		SELECT fingerprint FROM ins UNION ALL SELECT fingerprint FROM cluster_keys WHERE name = $1 LIMIT 1`,
		name, proposed).Scan(&got)
	return got, closedErr(s, err)
}

// SetClusterKey implements store.Replicas.
func (s *Store) SetClusterKey(ctx context.Context, name, value string) error {
	db, err := s.q()
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, `INSERT INTO cluster_keys (name, fingerprint) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET fingerprint = $2, set_at = now()`, name, value)
	return closedErr(s, err)
}

// WatchRevocations implements store.Replicas: a connection of its own
// LISTENs on ChannelNodeRevoked; when it breaks, it is opened again after a
// short pause, and fn("") tells the caller to re-check.
func (s *Store) WatchRevocations(ctx context.Context, fn func(nodeID string)) error {
	return s.watch(ctx, ChannelNodeRevoked, fn)
}

// announceMax keeps a payload under PostgreSQL's 8000 bytes.
const announceMax = 7000

// AnnounceRuns implements store.Replicas: one notification per 7,000 bytes
// of keys.
func (s *Store) AnnounceRuns(ctx context.Context, runs []store.RunKey) error {
	db, err := s.q()
	if err != nil {
		return err
	}
	var b strings.Builder
	flush := func() error {
		if b.Len() == 0 {
			return nil
		}
		_, err := db.Exec(ctx, "SELECT pg_notify($1, $2)", ChannelRunsChanged, s.origin+b.String())
		b.Reset()
		return closedErr(s, err)
	}
	for _, r := range runs {
		if b.Len()+len(r.Tenant)+len(r.Ref)+2 > announceMax {
			if err := flush(); err != nil {
				return err
			}
		}
		b.WriteString("\n" + r.Tenant + " " + r.Ref)
	}
	return flush()
}

// WatchRuns implements store.Replicas.
func (s *Store) WatchRuns(ctx context.Context, fn func([]store.RunKey)) error {
	return s.watch(ctx, ChannelRunsChanged, func(payload string) {
		if payload == "" {
			fn(nil) // (re)connected: what was announced meanwhile is missed
			return
		}
		origin, rest, _ := strings.Cut(payload, "\n")
		if origin == s.origin || rest == "" {
			return // ours
		}
		var keys []store.RunKey
		for _, l := range strings.Split(rest, "\n") {
			if tenant, ref, ok := strings.Cut(l, " "); ok {
				keys = append(keys, store.RunKey{Tenant: tenant, Ref: ref})
			}
		}
		fn(keys)
	})
}

// watch LISTENs on channel with a connection of its own and calls fn with
// each payload; when the connection breaks, it is opened again after a
// short pause, and fn("") tells the caller to re-check.
func (s *Store) watch(ctx context.Context, channel string, fn func(string)) error {
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listen(ctx, channel, fn)
		if ctx.Err() != nil {
			break
		}
		_ = err
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
	return ctx.Err()
}

func (s *Store) listen(ctx context.Context, channel string, fn func(string)) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A LISTENing connection is not handed back to the pool.
	pc := conn.Hijack()
	defer pc.Close(context.Background())
	if _, err := pc.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	fn("")
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Payload)
	}
}
