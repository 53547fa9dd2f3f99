// Package postgres is the scale-out implementation of store.Store on
// PostgreSQL (pgx v5): the records of the bbolt store, in tables that any
// number of coordinators can share.
//
// Every change that touches more than one record is one transaction, and
// the rows a read-modify-write depends on are locked for its duration
// (SELECT ... FOR UPDATE, or an advisory lock where the row may not exist
// yet), so coordinators sharing a database serialise where bbolt's single
// writer did: a join token is consumed once, a run keeps its highest rev, a
// tenant's audit entries form one chain. postgres never holds a transaction
// open across a call out of the process, except through the callbacks the
// caller hands to Enroll, UpdateNode, UpdateMarks, UpdateRunMeta and
// UpdateWorkspaceSettings, which must be quick.
//
// Records are kept as the JSON of their Go type (type json, whose bytes come
// back as written), beside the columns keys, ordering and filters need. Two
// differences from bbolt follow from PostgreSQL's types: times in those
// columns have microsecond resolution, so two runs created within the same
// microsecond are ordered by ref only (the records keep nanoseconds); and a
// key, name or filter value holding a NUL byte or invalid UTF-8, which a
// text column cannot hold, is refused on write and matches nothing on read.
package postgres

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/olivares-dev/olivares/coordinator/store"
)

// ChannelNodeRevoked is the LISTEN/NOTIFY channel on which UpdateNode
// announces, in the same transaction, a change of a node's revocation; the
// payload is the node id. It is only a wake-up: the nodes table stays the
// record, so a listener re-reads the node.
const ChannelNodeRevoked = "olivares_node_revoked"

// ChannelRunsChanged is the channel of AnnounceRuns. A payload is the
// announcing process's origin, then one "tenant ref" per line.
const ChannelRunsChanged = "olivares_runs_changed"

// Options configure Open.
type Options struct {
	// DSN is a PostgreSQL connection string, URL or key=value form. The
	// PG* environment variables and ~/.pgpass fill what it leaves out, as
	// with libpq, so the password need not be in a config file. Required.
	DSN string
	// MaxConns is the pool's size. When zero, 10.
	MaxConns int32
	// MinConns is how many connections the pool keeps open when idle.
	// When zero, none.
	MinConns int32
	// ConnectTimeout bounds each new connection. When zero, 10 seconds.
	ConnectTimeout time.Duration
}

// Defaults of Options.
const (
	DefaultMaxConns       = 10
	DefaultConnectTimeout = 10 * time.Second
)

// Store is a store.Store on a PostgreSQL database. It is safe for
// concurrent use, also by several processes on the same database.
type Store struct {
	pool   *pgxpool.Pool
	closed atomic.Bool
	// origin tells this process's announcements from other ones'.
	origin string
	// onAudit hears each committed audit entry's event (ObserveAudit).
	onAudit atomic.Pointer[func(string)]
}

var _ store.Store = (*Store)(nil)

// Open connects to the database, applies the schema migrations this binary
// carries (under a lock, see Migrate) and returns the store. Its errors
// name the server and database, never the password.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.DSN == "" {
		return nil, errors.New("postgres: empty DSN")
	}
	cfg, err := pgxpool.ParseConfig(o.DSN)
	if err != nil {
		// pgx's parse errors may quote the DSN, password and all.
		return nil, errors.New("postgres: the DSN does not parse; use postgres://user@host:port/db?sslmode=... or host=... dbname=... (see the PostgreSQL libpq docs)")
	}
	cfg.MaxConns = o.MaxConns
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	cfg.MinConns = o.MinConns
	if cfg.MinConns > cfg.MaxConns {
		return nil, fmt.Errorf("postgres: min_conns %d is more than max_conns %d", cfg.MinConns, cfg.MaxConns)
	}
	cfg.ConnConfig.ConnectTimeout = o.ConnectTimeout
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	where := fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect to %s: %w", where, err)
	}
	if _, err := Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w (database %s)", err, where)
	}
	return &Store{pool: pool, origin: rand.Text()}, nil
}

// Close closes the pool. It is safe to call more than once; every other
// method returns store.ErrClosed afterwards.
func (s *Store) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.pool.Close()
	}
	return nil
}

// Ping checks that the database answers (the coordinator's /readyz).
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return s.pool.Ping(ctx)
}

// Pool is the store's connection pool, for the coordinator's own
// extensions (LISTEN, replica bookkeeping) and for tests.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// tx runs fn in a READ COMMITTED transaction, committed when fn returns
// nil. fn's error is returned as it is.
func (s *Store) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	fnp := s.onAudit.Load()
	if fnp == nil {
		return closedErr(s, pgx.BeginFunc(ctx, s.pool, fn))
	}
	var events []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var noted []string
		auditNotes.Store(tx, &noted)
		defer auditNotes.Delete(tx)
		err := fn(tx)
		events = noted
		return err
	})
	if err == nil {
		for _, e := range events {
			(*fnp)(e)
		}
	}
	return closedErr(s, err)
}

// q is the pool for single statements, or ErrClosed.
func (s *Store) q() (*pgxpool.Pool, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	return s.pool, nil
}

// closedErr reports an error of a store closed meanwhile as ErrClosed.
func closedErr(s *Store, err error) error {
	if err != nil && s.closed.Load() && !errors.Is(err, store.ErrClosed) {
		return fmt.Errorf("%w (%v)", store.ErrClosed, err)
	}
	return err
}

// queryDoc runs a one-row, one-column query and decodes the json into v;
// store.ErrNotFound when there is no row.
func (s *Store) queryDoc(ctx context.Context, v any, sql string, args ...any) error {
	db, err := s.q()
	if err != nil {
		return err
	}
	return scanDoc(db.QueryRow(ctx, sql, args...), v)
}

type rowScanner interface{ Scan(dest ...any) error }

func scanDoc(row rowScanner, v any) error {
	var doc []byte
	if err := row.Scan(&doc); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		return err
	}
	return decode(doc, v)
}

func decode(doc []byte, v any) error {
	if err := json.Unmarshal(doc, v); err != nil {
		return fmt.Errorf("decode stored record: %w", err)
	}
	return nil
}

// encode returns the JSON of v as a json.RawMessage, which pgx sends
// verbatim.
func encode(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode record: %w", err)
	}
	return b, nil
}

// textOK reports whether every value can be held by a text column.
func textOK(vals ...string) bool {
	for _, v := range vals {
		if strings.IndexByte(v, 0) >= 0 || !utf8.ValidString(v) {
			return false
		}
	}
	return true
}

// checkText refuses values a text column cannot hold, naming the first.
func checkText(what string, vals ...string) error {
	for _, v := range vals {
		if !textOK(v) {
			return fmt.Errorf("%s: %q holds a NUL byte or invalid UTF-8, which the PostgreSQL store cannot keep", what, v)
		}
	}
	return nil
}

// uniqueViolation returns the constraint a unique violation names.
func uniqueViolation(err error) (string, bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return pe.ConstraintName, true
	}
	return "", false
}

func foreignKeyViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23503"
}

// lockKey hashes parts into an advisory-lock key. A collision only makes two
// unrelated writers wait for each other.
func lockKey(parts ...string) int64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return int64(h.Sum64())
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// PutTenant creates the tenant if it does not exist; an existing tenant is
// left as it is.
func (s *Store) PutTenant(ctx context.Context, t store.Tenant) error {
	if t.ID == "" {
		return errors.New("put tenant: empty id")
	}
	if err := checkText("put tenant", t.ID); err != nil {
		return err
	}
	doc, err := encode(t)
	if err != nil {
		return err
	}
	db, err := s.q()
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, "INSERT INTO tenants (id, doc) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING", t.ID, doc)
	return closedErr(s, err)
}

func (s *Store) GetTenant(ctx context.Context, id string) (store.Tenant, error) {
	var t store.Tenant
	if !textOK(id) {
		return t, fmt.Errorf("tenant %q: %w", id, store.ErrNotFound)
	}
	if err := s.queryDoc(ctx, &t, "SELECT doc FROM tenants WHERE id = $1", id); err != nil {
		return store.Tenant{}, fmt.Errorf("tenant %q: %w", id, closedErr(s, err))
	}
	return t, nil
}

// CreatePrincipal stores p and its first credential c, whose PrincipalID must
// be p.ID.
func (s *Store) CreatePrincipal(ctx context.Context, p store.Principal, c store.Credential) error {
	if p.ID == "" {
		return errors.New("create principal: empty id")
	}
	if c.Hash == "" {
		return fmt.Errorf("create principal %q: credential has an empty hash", p.ID)
	}
	if c.PrincipalID != p.ID {
		return fmt.Errorf("create principal %q: credential belongs to principal %q", p.ID, c.PrincipalID)
	}
	if err := checkText("create principal", p.ID, c.Hash); err != nil {
		return err
	}
	pdoc, err := encode(p)
	if err != nil {
		return err
	}
	cdoc, err := encode(c)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO principals (id, doc) VALUES ($1, $2)", p.ID, pdoc); err != nil {
			if _, ok := uniqueViolation(err); ok {
				return fmt.Errorf("principal %q: %w", p.ID, store.ErrExists)
			}
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO credentials (hash, principal_id, doc) VALUES ($1, $2, $3)", c.Hash, c.PrincipalID, cdoc); err != nil {
			if _, ok := uniqueViolation(err); ok {
				return fmt.Errorf("credential: %w", store.ErrExists)
			}
			return err
		}
		return nil
	})
}

func (s *Store) AddCredential(ctx context.Context, c store.Credential) error {
	if c.Hash == "" {
		return errors.New("add credential: empty hash")
	}
	if !textOK(c.PrincipalID) {
		return fmt.Errorf("principal %q: %w", c.PrincipalID, store.ErrNotFound)
	}
	if err := checkText("add credential", c.Hash); err != nil {
		return err
	}
	doc, err := encode(c)
	if err != nil {
		return err
	}
	if c.Parent != "" {
		return s.addDerived(ctx, c, doc)
	}
	db, err := s.q()
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, "INSERT INTO credentials (hash, principal_id, doc) VALUES ($1, $2, $3)", c.Hash, c.PrincipalID, doc)
	switch _, unique := uniqueViolation(err); {
	case unique:
		return fmt.Errorf("credential: %w", store.ErrExists)
	case foreignKeyViolation(err):
		return fmt.Errorf("principal %q: %w", c.PrincipalID, store.ErrNotFound)
	}
	return closedErr(s, err)
}

// addDerived inserts a derived credential while its principal's row is
// share-locked and its parent is there: RevokeCredential takes that row
// for update before it collects the descendants, so a credential derived
// during a revocation either is collected with it or finds its parent
// gone (ErrNotFound), never outlives it.
func (s *Store) addDerived(ctx context.Context, c store.Credential, doc []byte) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, "SELECT 1 FROM principals WHERE id = $1 FOR SHARE", c.PrincipalID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("principal %q: %w", c.PrincipalID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, "SELECT 1 FROM credentials WHERE hash = $1 AND principal_id = $2", c.Parent, c.PrincipalID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("parent credential: %w", store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO credentials (hash, principal_id, doc) VALUES ($1, $2, $3)", c.Hash, c.PrincipalID, doc); err != nil {
			if _, ok := uniqueViolation(err); ok {
				return fmt.Errorf("credential: %w", store.ErrExists)
			}
			return err
		}
		return nil
	})
}

func (s *Store) GetPrincipal(ctx context.Context, id string) (store.Principal, error) {
	var p store.Principal
	if !textOK(id) {
		return p, fmt.Errorf("principal %q: %w", id, store.ErrNotFound)
	}
	if err := s.queryDoc(ctx, &p, "SELECT doc FROM principals WHERE id = $1", id); err != nil {
		return store.Principal{}, fmt.Errorf("principal %q: %w", id, closedErr(s, err))
	}
	return p, nil
}

func (s *Store) PrincipalByCredential(ctx context.Context, hash string) (store.Principal, store.Credential, error) {
	var (
		p          store.Principal
		c          store.Credential
		pdoc, cdoc []byte
	)
	db, err := s.q()
	if err != nil {
		return p, c, err
	}
	// The hash stays out of the messages: it is a lookup key for a bearer
	// token and has no business in logs.
	if !textOK(hash) {
		return p, c, fmt.Errorf("credential: %w", store.ErrNotFound)
	}
	err = db.QueryRow(ctx, "SELECT c.doc, p.doc FROM credentials c JOIN principals p ON p.id = c.principal_id WHERE c.hash = $1", hash).Scan(&cdoc, &pdoc)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, c, fmt.Errorf("credential: %w", store.ErrNotFound)
	}
	if err != nil {
		return p, c, closedErr(s, err)
	}
	if err := decode(cdoc, &c); err != nil {
		return store.Principal{}, store.Credential{}, err
	}
	if err := decode(pdoc, &p); err != nil {
		return store.Principal{}, store.Credential{}, err
	}
	return p, c, nil
}

func (s *Store) CreateJoinToken(ctx context.Context, t store.JoinToken) error {
	if t.Hash == "" {
		return errors.New("create join token: empty hash")
	}
	if err := checkText("create join token", t.Hash, t.Tenant); err != nil {
		return err
	}
	doc, err := encode(t)
	if err != nil {
		return err
	}
	db, err := s.q()
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, "INSERT INTO join_tokens (hash, tenant, expires_at, used_at, doc) VALUES ($1, $2, $3, $4, $5)",
		t.Hash, t.Tenant, t.ExpiresAt, nullTime(t.UsedAt), doc)
	if _, ok := uniqueViolation(err); ok {
		return fmt.Errorf("join token: %w", store.ErrExists)
	}
	return closedErr(s, err)
}

// Enroll consumes the token under its row lock: a second Enroll of the same
// token, on this coordinator or another, waits for the first to commit and
// then finds it used. issue runs inside the transaction, so it must be
// quick and have no side effect that outlives a failed Enroll. A token with
// a zero ExpiresAt is always expired.
func (s *Store) Enroll(ctx context.Context, tokenHash string, now time.Time, issue func(store.JoinToken) (store.Node, error)) (store.Node, error) {
	var out store.Node
	if !textOK(tokenHash) {
		return out, fmt.Errorf("join token: %w", store.ErrNotFound)
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var jt store.JoinToken
		if err := scanDoc(tx.QueryRow(ctx, "SELECT doc FROM join_tokens WHERE hash = $1 FOR UPDATE", tokenHash), &jt); err != nil {
			return fmt.Errorf("join token: %w", err)
		}
		// Used before expired: "already used" is the more useful answer
		// for a token that is both.
		if !jt.UsedAt.IsZero() {
			return store.ErrTokenUsed
		}
		if now.After(jt.ExpiresAt) {
			return store.ErrTokenExpired
		}
		n, err := issue(jt)
		if err != nil {
			return fmt.Errorf("issue node for join token: %w", err)
		}
		if n.ID == "" {
			return errors.New("issue node for join token: empty node id")
		}
		if err := checkText("issue node for join token", n.ID, n.Tenant); err != nil {
			return err
		}
		ndoc, err := encode(n)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, "INSERT INTO nodes (id, tenant, revoked_at, doc) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING",
			n.ID, n.Tenant, nullTime(n.RevokedAt), ndoc)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("node %q: %w", n.ID, store.ErrExists)
		}
		jt.UsedAt = now
		jdoc, err := encode(jt)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE join_tokens SET used_at = $2, doc = $3 WHERE hash = $1", jt.Hash, now, jdoc); err != nil {
			return err
		}
		return decode(ndoc, &out)
	})
	if err != nil {
		return store.Node{}, err
	}
	return out, nil
}

func (s *Store) GetNode(ctx context.Context, id string) (store.Node, error) {
	var n store.Node
	if !textOK(id) {
		return n, fmt.Errorf("node %q: %w", id, store.ErrNotFound)
	}
	if err := s.queryDoc(ctx, &n, "SELECT doc FROM nodes WHERE id = $1", id); err != nil {
		return store.Node{}, fmt.Errorf("node %q: %w", id, closedErr(s, err))
	}
	return n, nil
}

// ListNodes lists by id in byte order.
func (s *Store) ListNodes(ctx context.Context, tenant string) ([]store.Node, error) {
	db, err := s.q()
	if err != nil {
		return nil, err
	}
	if !textOK(tenant) {
		return nil, nil
	}
	var rows pgx.Rows
	if tenant == "" {
		rows, err = db.Query(ctx, "SELECT doc FROM nodes ORDER BY id")
	} else {
		rows, err = db.Query(ctx, "SELECT doc FROM nodes WHERE tenant = $1 ORDER BY id", tenant)
	}
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", closedErr(s, err))
	}
	out, err := collectDocs[store.Node](rows)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// collectDocs decodes every row's single json column.
func collectDocs[T any](rows pgx.Rows) ([]T, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) {
		var v T
		err := scanDoc(row, &v)
		return v, err
	})
}

// UpdateNode runs fn under the node's row lock. fn may not change the id. A
// change of RevokedAt is announced on ChannelNodeRevoked when the
// transaction commits.
func (s *Store) UpdateNode(ctx context.Context, id string, fn func(*store.Node) error) (store.Node, error) {
	var out store.Node
	if !textOK(id) {
		return out, fmt.Errorf("node %q: %w", id, store.ErrNotFound)
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var n store.Node
		if err := scanDoc(tx.QueryRow(ctx, "SELECT doc FROM nodes WHERE id = $1 FOR UPDATE", id), &n); err != nil {
			return fmt.Errorf("node %q: %w", id, err)
		}
		revoked := n.RevokedAt
		if err := fn(&n); err != nil {
			return err
		}
		if n.ID != id {
			return fmt.Errorf("update node %q: the id may not change (got %q)", id, n.ID)
		}
		if err := checkText("update node", n.Tenant); err != nil {
			return err
		}
		doc, err := encode(n)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE nodes SET tenant = $2, revoked_at = $3, doc = $4 WHERE id = $1", id, n.Tenant, nullTime(n.RevokedAt), doc); err != nil {
			return err
		}
		if !revoked.Equal(n.RevokedAt) {
			if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", ChannelNodeRevoked, id); err != nil {
				return err
			}
		}
		return decode(doc, &out)
	})
	if err != nil {
		return store.Node{}, err
	}
	return out, nil
}

// revString is Rev for the numeric(20,0) column, which holds every uint64.
func revString(rev uint64) string { return strconv.FormatUint(rev, 10) }
