package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
)

// R-REP-1: two replicas on one database: the newest tunnel holds the node, a
// replica's release touches only its own hold, a replica that stops its
// heartbeat holds nothing live, and deregistering marks its holds lost.
func TestReplicaHolders(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	a, b := open(t, dsn), open(t, dsn)
	for _, r := range []struct {
		s  *Store
		id string
	}{{a, "ra"}, {b, "rb"}} {
		if err := r.s.RegisterReplica(ctx, store.Replica{ID: r.id, RelayAddr: "127.0.0.1:1" + r.id[1:]}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.NodeHolder(ctx, "n1", time.Minute); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("holder of an unknown node: got %v, want ErrNotFound", err)
	}
	since := time.Now()
	if err := a.HoldNode(ctx, store.Holder{NodeID: "n1", ReplicaID: "ra", Transport: "yamux", Since: since}); err != nil {
		t.Fatal(err)
	}
	if err := b.HoldNode(ctx, store.Holder{NodeID: "n1", ReplicaID: "rb", Transport: "quic", Since: since}); err != nil {
		t.Fatal(err)
	}
	// ra's tunnel drops after rb took the node: rb keeps it.
	if err := a.ReleaseNode(ctx, "n1", "ra"); err != nil {
		t.Fatal(err)
	}
	h, err := a.NodeHolder(ctx, "n1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if h.ReplicaID != "rb" || h.Transport != "quic" || !h.LostAt.IsZero() || !h.Live || h.RelayAddr != "127.0.0.1:1b" {
		t.Fatalf("holder = %+v, want rb over quic, live, not lost", h)
	}
	beat := time.Now().Add(time.Second).Truncate(time.Microsecond)
	if err := b.ReplicaHeartbeat(ctx, "rb", []store.Held{{NodeID: "n1", LastBeat: beat, RTT: 3 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	if h, _ = a.NodeHolder(ctx, "n1", time.Minute); !h.LastBeat.Equal(beat.UTC()) || h.RTT != 3*time.Millisecond {
		t.Fatalf("after a heartbeat: got beat %v rtt %v, want %v 3ms", h.LastBeat, h.RTT, beat.UTC())
	}
	// A ttl shorter than the heartbeat's age: rb is not live.
	if _, err := b.Pool().Exec(ctx, "UPDATE replicas SET heartbeat_at = now() - interval '1 hour' WHERE id = 'rb'"); err != nil {
		t.Fatal(err)
	}
	if h, _ = a.NodeHolder(ctx, "n1", time.Minute); h.Live {
		t.Fatalf("holder of a replica silent for an hour: got live, want not live")
	}
	rs, err := a.ListReplicas(ctx, time.Minute)
	if err != nil || len(rs) != 2 || !rs[0].Live || rs[1].Live {
		t.Fatalf("replicas = %+v, %v; want ra live, rb not", rs, err)
	}
	if err := b.DeregisterReplica(ctx, "rb"); err != nil {
		t.Fatal(err)
	}
	if h, _ = a.NodeHolder(ctx, "n1", time.Minute); h.LostAt.IsZero() || h.Live {
		t.Fatalf("after rb deregistered: holder = %+v, want lost", h)
	}
	if err := b.ReplicaHeartbeat(ctx, "rb", nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("heartbeat of a deregistered replica: got %v, want ErrNotFound", err)
	}
}

// The first value recorded under a name is the cluster's, from any
// replica, until one replaces it.
func TestClusterKey(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	a, b := open(t, dsn), open(t, dsn)
	steps := []struct {
		s        *Store
		proposed string
		want     string
	}{{a, "one", "one"}, {b, "two", "one"}}
	for i, st := range steps {
		if got, err := st.s.ClusterKey(ctx, "ca", st.proposed); err != nil || got != st.want {
			t.Fatalf("step %d: got %q, %v; want %q", i, got, err, st.want)
		}
	}
	if err := b.SetClusterKey(ctx, "ca", "three"); err != nil {
		t.Fatal(err)
	}
	if got, err := a.ClusterKey(ctx, "ca", "four"); err != nil || got != "three" {
		t.Fatalf("after SetClusterKey: got %q, %v; want three", got, err)
	}
}

// R-REP-3: a revocation committed through one pool reaches a watcher on another,
// and the watcher is told to re-check when it (re)connects.
func TestWatchRevocations(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	dsn := pgtest.NewDatabase(t)
	a, b := open(t, dsn), open(t, dsn)
	putNode(t, a, "n1")
	got := make(chan string, 8)
	done := make(chan error, 1)
	go func() { done <- b.WatchRevocations(ctx, func(id string) { got <- id }) }()
	if id := <-got; id != "" {
		t.Fatalf("first call: got %q, want the re-check call \"\"", id)
	}
	if _, err := a.UpdateNode(ctx, "n1", func(n *store.Node) error { n.RevokedAt = time.Now(); return nil }); err != nil {
		t.Fatal(err)
	}
	if id := <-got; id != "n1" {
		t.Fatalf("notification: got %q, want n1", id)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("WatchRevocations after cancel: got %v, want context.Canceled", err)
	}
}

// putNode enrolls node id in tenant t1 through a join token.
func putNode(t *testing.T, s *Store, id string) {
	t.Helper()
	ctx := t.Context()
	t0 := time.Now().UTC()
	jt := store.JoinToken{Hash: "h-" + id, NodeID: id, Tenant: "t1", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := s.CreateJoinToken(ctx, jt); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enroll(ctx, jt.Hash, t0, func(jt store.JoinToken) (store.Node, error) {
		return store.Node{ID: jt.NodeID, Tenant: jt.Tenant, EnrolledAt: t0}, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// R-CHG-5: runs announced through one store reach a watcher on another, in
// order, however many notifications they take; a store never hears its own.
func TestWatchRuns(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	dsn := pgtest.NewDatabase(t)
	a, b := open(t, dsn), open(t, dsn)
	gotA, gotB := make(chan []store.RunKey, 64), make(chan []store.RunKey, 64)
	done := make(chan error, 2)
	go func() { done <- a.WatchRuns(ctx, func(k []store.RunKey) { gotA <- k }) }()
	go func() { done <- b.WatchRuns(ctx, func(k []store.RunKey) { gotB <- k }) }()
	for _, got := range []chan []store.RunKey{gotA, gotB} {
		if k := <-got; k != nil {
			t.Fatalf("first call: got %v, want the (re)connect call with none", k)
		}
	}
	// 1,000 keys of ~40 bytes: more than one payload of 7,000 bytes.
	var sent []store.RunKey
	for i := range 1000 {
		sent = append(sent, store.RunKey{Tenant: "t1", Ref: fmt.Sprintf("run_%032d", i)})
	}
	if err := a.AnnounceRuns(ctx, sent); err != nil {
		t.Fatal(err)
	}
	var heard []store.RunKey
	for calls := 0; len(heard) < len(sent); calls++ {
		heard = append(heard, <-gotB...)
		if calls > len(sent) {
			t.Fatal("too many calls")
		}
	}
	if !slices.Equal(heard, sent) {
		t.Fatalf("b heard %d keys, not the %d sent in order", len(heard), len(sent))
	}
	// a heard none of its own: the first thing it hears is b's.
	if err := b.AnnounceRuns(ctx, []store.RunKey{{Tenant: "t2", Ref: "run_b"}}); err != nil {
		t.Fatal(err)
	}
	if k := <-gotA; !slices.Equal(k, []store.RunKey{{Tenant: "t2", Ref: "run_b"}}) {
		t.Fatalf("a heard %v first, want b's one key", k)
	}
	cancel()
	for range 2 {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("WatchRuns after cancel: got %v, want context.Canceled", err)
		}
	}
}
