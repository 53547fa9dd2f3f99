package postgres

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Schema migrations. Our own small runner rather than goose: the schema is
// one linear list of SQL files embedded in the binary, and what the runner
// must guarantee is short enough to read in one sitting: one migrator at a
// time across every coordinator starting against the database (a session
// advisory lock), each migration in its own transaction with its
// bookkeeping row, no migration applied twice, a changed migration refused,
// and a database newer than the binary refused. goose would bring
// database/sql, a driver shim for pgx and a locking mode to configure for
// the same four checks.
//
// Migrations are files migrations/NNNN_name.sql, numbered from 0001 without
// gaps. A released file never changes: a fix is a new file.

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLock is the pg_advisory_lock key every migrator takes: the first
// eight bytes of SHA-256("olivares schema migrations").
var migrationLock = func() int64 {
	sum := sha256.Sum256([]byte("olivares schema migrations"))
	var k int64
	for _, b := range sum[:8] {
		k = k<<8 | int64(b)
	}
	return k
}()

// migrationsTable records what was applied.
const migrationsTable = "olivares_schema_migrations"

// ErrSchemaNewer: the database was migrated by a newer coordinator.
var ErrSchemaNewer = errors.New("postgres: the database schema is newer than this coordinator")

// ErrMigrationChanged: an applied migration's text differs from the binary's.
var ErrMigrationChanged = errors.New("postgres: an applied schema migration was changed")

type migration struct {
	Version int
	Name    string
	SQL     string
	SHA256  string
}

var migrationName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)

// migrations returns the embedded migrations in order.
func migrations() ([]migration, error) {
	return loadMigrations(migrationFiles, "migrations")
}

func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("postgres: migration file %q is not named NNNN_name.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		text, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(text)
		out = append(out, migration{Version: v, Name: m[2], SQL: string(text), SHA256: hex.EncodeToString(sum[:])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("postgres: migration %04d_%s: want version %04d (versions start at 1 and have no gaps)", m.Version, m.Name, i+1)
		}
	}
	return out, nil
}

// Migrate brings the database's schema up to this binary's and returns the
// versions it applied (none when it was current). Coordinators starting at
// the same time wait for each other's lock: one applies, the others find
// nothing left to do.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	return migrate(ctx, pool, ms)
}

func migrate(ctx context.Context, pool *pgxpool.Pool, ms []migration) (applied []int, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: migrate: %w", err)
	}
	defer conn.Release()
	// A session lock, held across the migrations' own transactions.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return nil, fmt.Errorf("postgres: migrate: take the migration lock: %w", err)
	}
	defer func() {
		// The lock must not outlive this call on a pooled connection:
		// unlock, and if that fails drop the connection (which ends the
		// session and its locks).
		if _, uerr := conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", migrationLock); uerr != nil {
			conn.Conn().Close(context.Background())
		}
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+migrationsTable+` (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		sha256     text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("postgres: migrate: %w", err)
	}
	rows, err := conn.Query(ctx, "SELECT version, name, sha256 FROM "+migrationsTable+" ORDER BY version")
	if err != nil {
		return nil, fmt.Errorf("postgres: migrate: %w", err)
	}
	done, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (migration, error) {
		var m migration
		err := row.Scan(&m.Version, &m.Name, &m.SHA256)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: migrate: read %s: %w", migrationsTable, err)
	}
	for i, d := range done {
		if d.Version != i+1 {
			return nil, fmt.Errorf("postgres: migrate: %s lacks version %d (it has %d): the table was edited by hand", migrationsTable, i+1, d.Version)
		}
		if d.Version > len(ms) {
			return nil, fmt.Errorf("%w: it is at version %d (%s), this coordinator knows up to %d; run a coordinator at least as new as the one that migrated it", ErrSchemaNewer, d.Version, d.Name, len(ms))
		}
		if m := ms[d.Version-1]; m.SHA256 != d.SHA256 {
			return nil, fmt.Errorf("%w: version %04d_%s differs from the one applied (sha256 %s, applied %s)", ErrMigrationChanged, m.Version, m.Name, m.SHA256, d.SHA256)
		}
	}
	for _, m := range ms[len(done):] {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+migrationsTable+" (version, name, sha256) VALUES ($1, $2, $3)", m.Version, m.Name, m.SHA256)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("postgres: migration %04d_%s: %w", m.Version, m.Name, err)
		}
		applied = append(applied, m.Version)
	}
	return applied, nil
}
