package postgres

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
	"github.com/olivares-dev/olivares/coordinator/store/storetest"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// open opens a store on dsn, closed when t ends.
func open(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(t.Context(), Options{DSN: dsn, MaxConns: 4})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	var (
		mu   sync.Mutex
		dsns = map[store.Store]string{}
	)
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) store.Store {
			dsn := pgtest.NewDatabase(t)
			s := open(t, dsn)
			mu.Lock()
			dsns[s] = dsn
			mu.Unlock()
			return s
		},
		// A second coordinator: its own pool on the same database.
		Share: func(t *testing.T, s store.Store) store.Store {
			mu.Lock()
			dsn := dsns[s]
			mu.Unlock()
			return open(t, dsn)
		},
	})
}

// A revocation is announced on ChannelNodeRevoked when it commits, so
// another coordinator can cut the node's tunnel at once; other node updates
// and an aborted revocation announce nothing.
func TestRevocationNotify(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	s := open(t, dsn)
	listener, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(context.Background())
	if _, err := listener.Exec(ctx, "LISTEN "+ChannelNodeRevoked); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	jt := store.JoinToken{Hash: "h1", NodeID: "n1", Tenant: "t1", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := s.CreateJoinToken(ctx, jt); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enroll(ctx, "h1", t0, func(jt store.JoinToken) (store.Node, error) {
		return store.Node{ID: jt.NodeID, Tenant: jt.Tenant, EnrolledAt: t0}, nil
	}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		fn     func(*store.Node) error
		notify bool
	}{
		{func(n *store.Node) error { n.Hostname = "h"; return nil }, false},
		{func(n *store.Node) error { n.RevokedAt = t0; return errors.New("aborted") }, false},
		{func(n *store.Node) error { n.RevokedAt = t0; return nil }, true},
	}
	for i, st := range steps {
		s.UpdateNode(ctx, "n1", st.fn)
		if !st.notify {
			// A marker sent after the update arrives first if the
			// update sent nothing.
			if _, err := s.Pool().Exec(ctx, "SELECT pg_notify($1, 'marker')", ChannelNodeRevoked); err != nil {
				t.Fatal(err)
			}
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := listener.WaitForNotification(wctx)
		cancel()
		if err != nil {
			t.Fatalf("step %d: no notification: %v", i, err)
		}
		want := "marker"
		if st.notify {
			want = "n1"
		}
		if n.Payload != want {
			t.Fatalf("step %d: notification %q, want %q", i, n.Payload, want)
		}
	}
}

// Text columns cannot hold NUL bytes or invalid UTF-8: such keys are
// refused on write with a sentence, and match nothing on read, instead of
// failing the request with a database error.
func TestUnstorableText(t *testing.T) {
	ctx := t.Context()
	s := open(t, pgtest.NewDatabase(t))
	bad := []string{"a\x00b", "\xff\xfe"}
	t0 := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, v := range bad {
		if err := s.CreateProfile(ctx, apitypes.Profile{Ref: "p1", Tenant: "t1", Name: v, NodeID: "n1", CreatedAt: t0}); err == nil || !strings.Contains(err.Error(), "NUL byte or invalid UTF-8") {
			t.Errorf("CreateProfile(name %q): got %v, want a refusal that says why", v, err)
		}
		r := apitypes.Run{RunRef: "r1", Tenant: "t1", NodeID: "n1", ClaudeSessionID: v, CreatedAt: t0, Rev: 1}
		if _, err := s.PutRun(ctx, r); err == nil {
			t.Errorf("PutRun(claude_session_id %q): no error", v)
		}
		if _, err := s.GetRun(ctx, v); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetRun(%q): got %v, want ErrNotFound", v, err)
		}
		runs, next, err := s.ListRuns(ctx, store.RunQuery{Tenant: "t1", LiveRef: v})
		if err != nil || len(runs) != 0 || next != "" {
			t.Errorf("ListRuns(live_ref %q): got %d runs, %q, %v; want none", v, len(runs), next, err)
		}
		if _, _, err := s.PrincipalByCredential(ctx, v); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("PrincipalByCredential(%q): got %v, want ErrNotFound", v, err)
		}
		if es, _, err := s.ListAudit(ctx, store.AuditQuery{Tenant: "t1", RunRef: v}); err != nil || len(es) != 0 {
			t.Errorf("ListAudit(run %q): %v, %v", v, es, err)
		}
	}
	// Inside a record (a name, a label), anything JSON can carry is kept.
	p := apitypes.Profile{Ref: "p1", Tenant: "t1", Name: "ok", NodeID: "n1", Home: "/h\x00x", CreatedAt: t0}
	if err := s.CreateProfile(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetProfile(ctx, "p1"); err != nil || got.Home != p.Home {
		t.Fatalf("GetProfile: got %q, %v; want %q", got.Home, err, p.Home)
	}
}
