package pgtest

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// The shared cluster serves a fresh database per test, as an unprivileged
// user, and a dropped database is gone.
func TestSharedDatabases(t *testing.T) {
	c := Shared(t)
	ctx := t.Context()
	var names [2]string
	for i := range names {
		conn, err := pgx.Connect(ctx, c.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var super bool
		if err := conn.QueryRow(ctx, "SELECT current_database(), current_setting('is_superuser') = 'on'").Scan(&names[i], &super); err != nil {
			t.Fatal(err)
		}
		if !super {
			t.Errorf("user %s is not the cluster's superuser", c.User)
		}
	}
	if names[0] == names[1] {
		t.Fatalf("two tests share database %s", names[0])
	}
	// The server never runs as root (initdb refuses it).
	st, err := os.Stat("/proc/" + strconv.Itoa(c.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid == 0 {
		t.Errorf("postgres runs as uid 0")
	}
}

// A database given back is reused empty: nothing a test wrote, created or
// left connected survives into the next test's.
func TestDatabaseReuse(t *testing.T) {
	c := Shared(t)
	ctx := t.Context()
	var first string
	t.Run("writer", func(t *testing.T) {
		first = c.NewDatabase(t)
		conn, err := pgx.Connect(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		// Left open on purpose: the cleanup ends the session.
		if _, err := conn.Exec(ctx, "CREATE TABLE left_behind (x int); INSERT INTO left_behind VALUES (1)"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("reader", func(t *testing.T) {
		dsn := c.NewDatabase(t)
		if dsn != first {
			t.Fatalf("got database %s, want the given-back %s reused", dsn, first)
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&n); err != nil || n != 0 {
			t.Fatalf("tables in the reused database: %d, %v; want none", n, err)
		}
	})
}

// Stop ends the server (by its pid) and removes its directory; a second
// Stop is harmless.
func TestStartStop(t *testing.T) {
	if _, err := BinDir(); err != nil {
		Shared(t) // skips or fails with the install hint
	}
	c, err := Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pid, dir := c.Pid(), c.dir
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("postgres pid %d still runs after Stop", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s left behind: %v", dir, err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if _, err := pgx.Connect(context.Background(), c.DSN("postgres")); err == nil {
		t.Errorf("connected to a stopped cluster")
	}
}
