package postgres

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
)

func pool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// appliedVersions reads the bookkeeping table.
func appliedVersions(t *testing.T, p *pgxpool.Pool) []int {
	t.Helper()
	rows, err := p.Query(t.Context(), "SELECT version FROM "+migrationsTable+" ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for rows.Next() {
		var v int
		rows.Scan(&v)
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func allVersions(t *testing.T) []int {
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, m := range ms {
		out = append(out, m.Version)
	}
	return out
}

// A second start applies nothing, and reopening keeps the data.
func TestMigrateSecondStart(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	p := pool(t, dsn)
	got, err := Migrate(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if want := allVersions(t); !slices.Equal(got, want) {
		t.Fatalf("first Migrate applied %v, want %v", got, want)
	}
	got, err = Migrate(t.Context(), p)
	if err != nil || len(got) != 0 {
		t.Fatalf("second Migrate: applied %v, %v; want none", got, err)
	}
	s := open(t, dsn) // Open migrates too: nothing left
	if v := appliedVersions(t, p); !slices.Equal(v, allVersions(t)) {
		t.Fatalf("recorded versions %v", v)
	}
	s.Close()
}

// R-CFG-5: coordinators starting at once against an empty database migrate once:
// one applies every version, the others wait on the lock and apply none.
func TestMigrateConcurrentStarts(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	const n = 4
	var (
		wg      sync.WaitGroup
		applied [n][]int
		errs    [n]error
		start   = make(chan struct{})
	)
	for i := range n {
		p := pool(t, dsn)
		wg.Go(func() {
			<-start
			applied[i], errs[i] = Migrate(context.Background(), p)
		})
	}
	close(start)
	wg.Wait()
	migrators := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Migrate #%d: %v", i, errs[i])
		}
		switch {
		case len(applied[i]) == 0:
		case slices.Equal(applied[i], allVersions(t)):
			migrators++
		default:
			t.Errorf("Migrate #%d applied %v: part of the list", i, applied[i])
		}
	}
	if migrators != 1 {
		t.Fatalf("%d starts applied the migrations, want 1", migrators)
	}
	if v := appliedVersions(t, pool(t, dsn)); !slices.Equal(v, allVersions(t)) {
		t.Fatalf("recorded versions %v, want %v", v, allVersions(t))
	}
}

// R-CFG-5: a database migrated by a newer coordinator, or whose applied migration
// differs from the binary's, is refused before anything is touched.
func TestMigrateRefuses(t *testing.T) {
	ctx := t.Context()
	v1 := fstest.MapFS{"m/0001_one.sql": {Data: []byte("CREATE TABLE one (x int);")}}
	v2 := fstest.MapFS{
		"m/0001_one.sql": {Data: []byte("CREATE TABLE one (x int);")},
		"m/0002_two.sql": {Data: []byte("CREATE TABLE two (x int);")},
	}
	changed := fstest.MapFS{"m/0001_one.sql": {Data: []byte("CREATE TABLE one (x bigint);")}}
	load := func(fs fstest.MapFS) []migration {
		ms, err := loadMigrations(fs, "m")
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	p := pool(t, pgtest.NewDatabase(t))
	if got, err := migrate(ctx, p, load(v2)); err != nil || !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("migrate v2: %v, %v", got, err)
	}
	if _, err := migrate(ctx, p, load(v1)); !errors.Is(err, ErrSchemaNewer) {
		t.Fatalf("an older binary: got %v, want %v", err, ErrSchemaNewer)
	}
	if _, err := migrate(ctx, p, load(changed)); !errors.Is(err, ErrMigrationChanged) {
		t.Fatalf("a changed migration: got %v, want %v", err, ErrMigrationChanged)
	}

	// A failing migration leaves nothing of itself behind.
	bad := fstest.MapFS{
		"m/0001_one.sql": v2["m/0001_one.sql"], "m/0002_two.sql": v2["m/0002_two.sql"],
		"m/0003_bad.sql": {Data: []byte("CREATE TABLE three (x int); SELECT no_such_function();")},
	}
	if _, err := migrate(ctx, p, load(bad)); err == nil {
		t.Fatal("a failing migration succeeded")
	}
	var exists bool
	p.QueryRow(ctx, "SELECT to_regclass('three') IS NOT NULL").Scan(&exists)
	if exists || !slices.Equal(appliedVersions(t, p), []int{1, 2}) {
		t.Fatalf("after a failed migration: table three exists %v, versions %v", exists, appliedVersions(t, p))
	}

	for name, fs := range map[string]fstest.MapFS{
		"gap":      {"m/0001_a.sql": {}, "m/0003_c.sql": {}},
		"bad name": {"m/1_a.sql": {}},
	} {
		if _, err := loadMigrations(fs, "m"); err == nil {
			t.Errorf("loadMigrations(%s): no error", name)
		}
	}
}
