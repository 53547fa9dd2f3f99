// Package bolt is the single-file implementation of store.Store on bbolt, the
// coordinator's default store.
//
// Every change that touches more than one record happens in one bbolt write
// transaction, so a crash never leaves half of it behind. bolt never calls out
// of the process while it holds the write lock, except through the issue and
// fn callbacks the caller hands to Enroll and UpdateNode.
package bolt

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Buckets. Values are the JSON of the store record types; keys are ids, or
// the token hash for credentials and join tokens, or the ref for runs,
// profiles and workspaces.
//
// The by-tenant buckets are secondary indexes, written in the same
// transaction as the record they point at. Their keys start with
// tenantPrefix, so a listing reads only its own tenant's range (R-TEN-2):
//   - runs_by_tenant: prefix, runTime(CreatedAt), run ref → empty. Listed
//     backwards, which is newest first and ref descending on a tie.
//   - profile_names, workspace_names: prefix, name → ref. Listed forwards,
//     which is by name; a taken key is a taken name.
var (
	bucketTenants        = []byte("tenants")
	bucketPrincipals     = []byte("principals")
	bucketCreds          = []byte("credentials")
	bucketJoinTokens     = []byte("join_tokens")
	bucketNodes          = []byte("nodes")
	bucketRuns           = []byte("runs")
	bucketRunsByTenant   = []byte("runs_by_tenant")
	bucketProfiles       = []byte("profiles")
	bucketProfileNames   = []byte("profile_names")
	bucketWorkspaces     = []byte("workspaces")
	bucketWorkspaceNames = []byte("workspace_names")

	allBuckets = [][]byte{
		bucketTenants, bucketPrincipals, bucketCreds, bucketJoinTokens, bucketNodes,
		bucketRuns, bucketRunsByTenant, bucketProfiles, bucketProfileNames, bucketWorkspaces, bucketWorkspaceNames,
	}
)

// defaultRunLimit is the page size of a RunQuery whose Limit is zero.
const defaultRunLimit = 50

// lockTimeout is how long Open waits for the file lock before it gives up.
// bbolt waits forever when its Timeout is zero; a second coordinator should
// fail fast and say why instead.
const lockTimeout = 1 * time.Second

// Store is a store.Store backed by one bbolt file. It is safe for concurrent
// use; bbolt serialises the writers.
type Store struct {
	db *bbolt.DB
	// pushes group the index writes of concurrent PutRuns into one
	// transaction (PutRuns).
	pushes runBatcher
}

var _ store.Store = (*Store)(nil)

// Open opens or creates (mode 0600) the store file at path. If another
// process holds the file, Open fails after one second with an error that
// says so (and wraps bbolt's errors.ErrTimeout).
func Open(path string) (*Store, error) {
	return open(path, lockTimeout)
}

func open(path string, timeout time.Duration) (*Store, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: timeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open %s: another process holds it (is the coordinator already running?): %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range append(allBuckets, markBuckets...) {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// SetNoSync turns fsync off (true) or back on. It is for bulk loads in
// tests and benchmarks: while it is off, a crash may lose or corrupt what
// was written.
func (s *Store) SetNoSync(noSync bool) { s.db.NoSync = noSync }

// Close closes the file. It is safe to call more than once; every other
// method returns store.ErrClosed afterwards.
func (s *Store) Close() error {
	auditObservers.Delete(s.db)
	return s.db.Close()
}

// PutTenant creates the tenant if it does not exist; an existing tenant is
// left as it is.
func (s *Store) PutTenant(ctx context.Context, t store.Tenant) error {
	if t.ID == "" {
		return errors.New("put tenant: empty id")
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketTenants)
		if b.Get([]byte(t.ID)) != nil {
			return nil
		}
		return put(b, t.ID, t)
	})
}

func (s *Store) GetTenant(ctx context.Context, id string) (store.Tenant, error) {
	var t store.Tenant
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return get(tx.Bucket(bucketTenants), id, &t)
	})
	if err != nil {
		return store.Tenant{}, fmt.Errorf("tenant %q: %w", id, err)
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
	return s.update(ctx, func(tx *bbolt.Tx) error {
		principals, creds := tx.Bucket(bucketPrincipals), tx.Bucket(bucketCreds)
		if principals.Get([]byte(p.ID)) != nil {
			return fmt.Errorf("principal %q: %w", p.ID, store.ErrExists)
		}
		if creds.Get([]byte(c.Hash)) != nil {
			return fmt.Errorf("credential: %w", store.ErrExists)
		}
		if err := put(principals, p.ID, p); err != nil {
			return err
		}
		return put(creds, c.Hash, c)
	})
}

func (s *Store) AddCredential(ctx context.Context, c store.Credential) error {
	if c.Hash == "" {
		return errors.New("add credential: empty hash")
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketPrincipals).Get([]byte(c.PrincipalID)) == nil {
			return fmt.Errorf("principal %q: %w", c.PrincipalID, store.ErrNotFound)
		}
		creds := tx.Bucket(bucketCreds)
		if creds.Get([]byte(c.Hash)) != nil {
			return fmt.Errorf("credential: %w", store.ErrExists)
		}
		if c.Parent != "" && creds.Get([]byte(c.Parent)) == nil {
			return fmt.Errorf("parent credential: %w", store.ErrNotFound)
		}
		return put(creds, c.Hash, c)
	})
}

func (s *Store) GetPrincipal(ctx context.Context, id string) (store.Principal, error) {
	var p store.Principal
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return get(tx.Bucket(bucketPrincipals), id, &p)
	})
	if err != nil {
		return store.Principal{}, fmt.Errorf("principal %q: %w", id, err)
	}
	return p, nil
}

func (s *Store) PrincipalByCredential(ctx context.Context, hash string) (store.Principal, store.Credential, error) {
	var (
		p store.Principal
		c store.Credential
	)
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		// The hash stays out of the message: it is a lookup key for a
		// bearer token and has no business in logs.
		if err := get(tx.Bucket(bucketCreds), hash, &c); err != nil {
			return fmt.Errorf("credential: %w", err)
		}
		if err := get(tx.Bucket(bucketPrincipals), c.PrincipalID, &p); err != nil {
			return fmt.Errorf("principal %q of credential: %w", c.PrincipalID, err)
		}
		return nil
	})
	if err != nil {
		return store.Principal{}, store.Credential{}, err
	}
	return p, c, nil
}

func (s *Store) CreateJoinToken(ctx context.Context, t store.JoinToken) error {
	if t.Hash == "" {
		return errors.New("create join token: empty hash")
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketJoinTokens)
		if b.Get([]byte(t.Hash)) != nil {
			return fmt.Errorf("join token: %w", store.ErrExists)
		}
		return put(b, t.Hash, t)
	})
}

// Enroll runs issue inside the write transaction, so issue must be quick, must
// not call the store (that would deadlock) and must have no side effect that
// outlives a failed Enroll. A token with a zero ExpiresAt is always expired.
func (s *Store) Enroll(ctx context.Context, tokenHash string, now time.Time, issue func(store.JoinToken) (store.Node, error)) (store.Node, error) {
	var out store.Node
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		tokens, nodes := tx.Bucket(bucketJoinTokens), tx.Bucket(bucketNodes)
		var jt store.JoinToken
		if err := get(tokens, tokenHash, &jt); err != nil {
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
		if nodes.Get([]byte(n.ID)) != nil {
			return fmt.Errorf("node %q: %w", n.ID, store.ErrExists)
		}
		jt.UsedAt = now
		if err := put(tokens, jt.Hash, jt); err != nil {
			return err
		}
		return putAndReload(nodes, n.ID, n, &out)
	})
	if err != nil {
		return store.Node{}, err
	}
	return out, nil
}

func (s *Store) GetNode(ctx context.Context, id string) (store.Node, error) {
	var n store.Node
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return get(tx.Bucket(bucketNodes), id, &n)
	})
	if err != nil {
		return store.Node{}, fmt.Errorf("node %q: %w", id, err)
	}
	return n, nil
}

// ListNodes scans every node: the registry is small (one record per machine)
// and a tenant index would be one more thing to keep consistent.
func (s *Store) ListNodes(ctx context.Context, tenant string) ([]store.Node, error) {
	var out []store.Node
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		// Keys are ids and bbolt iterates in byte order: ordered by id.
		return tx.Bucket(bucketNodes).ForEach(func(k, v []byte) error {
			var n store.Node
			if err := json.Unmarshal(v, &n); err != nil {
				return fmt.Errorf("decode node %q: %w", k, err)
			}
			if tenant == "" || n.Tenant == tenant {
				out = append(out, n)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// UpdateNode runs fn inside the write transaction, with the same rules as
// Enroll's issue. fn may not change the node's id.
func (s *Store) UpdateNode(ctx context.Context, id string, fn func(*store.Node) error) (store.Node, error) {
	var out store.Node
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketNodes)
		var n store.Node
		if err := get(b, id, &n); err != nil {
			return fmt.Errorf("node %q: %w", id, err)
		}
		if err := fn(&n); err != nil {
			return err
		}
		if n.ID != id {
			return fmt.Errorf("update node %q: the id may not change (got %q)", id, n.ID)
		}
		return putAndReload(b, id, n, &out)
	})
	if err != nil {
		return store.Node{}, err
	}
	return out, nil
}

// PutRun keeps, per ref, the row with the highest Rev, so pushes that arrive
// out of order leave the index on the last state the agent reported
// (R-STATE-7). An equal Rev is a duplicate push and is not written.
func (s *Store) PutRun(ctx context.Context, r apitypes.Run) (bool, error) {
	if err := checkRun(r); err != nil {
		return false, err
	}
	wrote := false
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		var err error
		wrote, err = putRunTx(tx, r)
		return err
	})
	if err != nil {
		return false, err
	}
	return wrote, nil
}

// PutRuns implements store.Store: one bbolt transaction (one fsync) for
// the batch.
func (s *Store) PutRuns(ctx context.Context, rs []apitypes.Run, usage ...apitypes.UsageTurn) (int, map[string]error, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	if err := checkUsage(usage); err != nil {
		return 0, nil, err
	}
	return s.pushes.put(s, rs, usage)
}

// runBatcher is the group commit of PutRuns: a call that finds no commit
// in flight commits its rows at once; calls that arrive while one is in
// flight wait and are committed together by the next one, one fsync for
// all of them. An idle store adds no delay; a thousand nodes pushing at
// once pay one fsync per batch, not one each (issue 34).
type runBatcher struct {
	mu      sync.Mutex
	pending []*runPut
	leading bool
	commits int // transactions committed, for the tests
}

// runPut is one PutRuns call: its rows, and what it learns.
type runPut struct {
	rows    []apitypes.Run
	usage   []apitypes.UsageTurn
	wrote   int
	refused map[string]error
	err     error
	done    chan struct{}
}

func (b *runBatcher) put(s *Store, rs []apitypes.Run, usage []apitypes.UsageTurn) (int, map[string]error, error) {
	p := &runPut{rows: rs, usage: usage, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, p)
	if b.leading {
		b.mu.Unlock()
		<-p.done
		return p.wrote, p.refused, p.err
	}
	b.leading = true
	for len(b.pending) > 0 {
		batch := b.pending
		b.pending = nil
		b.mu.Unlock()
		s.commitRuns(batch)
		b.mu.Lock()
		b.commits++
	}
	b.leading = false
	b.mu.Unlock()
	return p.wrote, p.refused, p.err
}

// commitRuns writes every call's rows, then its usage rows, in one
// transaction. A row refused (checkRun, an older rev) is that call's; an
// error of the transaction is every call's, and none of their rows is
// stored.
func (s *Store) commitRuns(batch []*runPut) {
	err := closedErr(s.db.Update(func(tx *bbolt.Tx) error {
		for _, p := range batch {
			p.wrote, p.refused = 0, map[string]error{}
			for _, r := range p.rows {
				if err := checkRun(r); err != nil {
					p.refused[r.RunRef] = err
					continue
				}
				w, err := putRunTx(tx, r)
				if errors.Is(err, store.ErrConflict) {
					p.refused[r.RunRef] = err
					continue
				}
				if err != nil {
					return err
				}
				if w {
					p.wrote++
				}
			}
			if err := putUsageTx(tx, p.usage); err != nil {
				return err
			}
		}
		return nil
	}))
	for _, p := range batch {
		if err != nil {
			p.wrote, p.refused, p.err = 0, nil, err
		}
		close(p.done)
	}
}

func checkRun(r apitypes.Run) error {
	if r.RunRef == "" {
		return errors.New("put run: empty run_ref")
	}
	if r.Tenant == "" {
		return fmt.Errorf("put run %q: empty tenant", r.RunRef)
	}
	return nil
}

// putRunTx keeps r in tx when its rev is newer (PutRun's rules).
func putRunTx(tx *bbolt.Tx, r apitypes.Run) (bool, error) {
	runs, index := tx.Bucket(bucketRuns), tx.Bucket(bucketRunsByTenant)
	if tx.Bucket(bucketTombstones).Get([]byte(r.RunRef)) != nil {
		// A late push of a deleted run (R-DEL-1): it stays deleted.
		return false, nil
	}
	key := runIndexKey(r.Tenant, r.CreatedAt, r.RunRef)
	var old apitypes.Run
	switch err := get(runs, r.RunRef, &old); {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return false, fmt.Errorf("run %q: %w", r.RunRef, err)
	default:
		// Checked before Rev: a foreign push is refused even when it
		// would lose anyway, so the caller learns of it. The message
		// does not name the owner, which belongs to the other side.
		if old.Tenant != r.Tenant || old.NodeID != r.NodeID {
			return false, fmt.Errorf("run %q belongs to another tenant or node: %w", r.RunRef, store.ErrConflict)
		}
		if r.Rev <= old.Rev {
			return false, nil
		}
		// CreatedAt is fixed for a ref, but a row that moved must not
		// be listed twice.
		if oldKey := runIndexKey(old.Tenant, old.CreatedAt, old.RunRef); !bytes.Equal(oldKey, key) {
			if err := index.Delete(oldKey); err != nil {
				return false, err
			}
		}
	}
	if err := put(runs, r.RunRef, r); err != nil {
		return false, err
	}
	if err := index.Put(key, []byte{}); err != nil {
		return false, err
	}
	return true, nil
}

func (s *Store) GetRun(ctx context.Context, ref string) (apitypes.Run, error) {
	var r apitypes.Run
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return get(tx.Bucket(bucketRuns), ref, &r)
	})
	if err != nil {
		return apitypes.Run{}, fmt.Errorf("run %q: %w", ref, err)
	}
	return r, nil
}

// GetRuns implements store.Store.
func (s *Store) GetRuns(ctx context.Context, refs []string) (map[string]apitypes.Run, error) {
	out := make(map[string]apitypes.Run, len(refs))
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketRuns)
		for _, ref := range refs {
			var r apitypes.Run
			switch err := get(b, ref, &r); {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				return fmt.Errorf("run %q: %w", ref, err)
			default:
				out[ref] = r
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListRuns walks q.Tenant's range of the index from the newest row down.
// Filters are applied to the decoded rows, so a filter or an offset costs a
// read of every row it passes over; pages themselves never touch another
// tenant's keys (R-LIST-6, R-TEN-2).
//
// A cursor is the index position of the last row returned, so the next page
// starts strictly below it: rows added above it (newer) are not shown and
// rows added below it are, and no row is seen twice (R-LIST-5). A Cursor
// without CursorMode is still a cursor. Offset and a cursor together, a
// negative Limit or Offset and an empty Tenant are errors.
func (s *Store) ListRuns(ctx context.Context, q store.RunQuery) ([]apitypes.Run, string, error) {
	if q.Tenant == "" {
		return nil, "", errors.New("list runs: empty tenant")
	}
	if q.Limit < 0 || q.Offset < 0 {
		return nil, "", fmt.Errorf("list runs: negative limit (%d) or offset (%d)", q.Limit, q.Offset)
	}
	cursorMode := q.CursorMode || q.Cursor != ""
	if cursorMode && q.Offset != 0 {
		return nil, "", errors.New("list runs: offset and cursor are exclusive")
	}
	limit := q.Limit
	if limit == 0 {
		limit = defaultRunLimit
	}
	prefix := tenantPrefix(q.Tenant)
	// below is the exclusive upper bound of the walk; nil starts at the
	// newest row of the tenant.
	var below []byte
	if q.Cursor != "" {
		pos, err := decodeCursor(q.Cursor)
		if err != nil {
			return nil, "", fmt.Errorf("list runs: %w", err)
		}
		below = append(append([]byte(nil), prefix...), pos...)
	}

	out := []apitypes.Run{}
	next := ""
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		runs := tx.Bucket(bucketRuns)
		c := tx.Bucket(bucketRunsByTenant).Cursor()
		skip := q.Offset
		var last []byte // index key of the last row in out
		for k := lastBelow(c, prefix, below); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
			if len(k) <= len(prefix)+runTimeLen {
				return fmt.Errorf("run index: malformed key %x", k)
			}
			ref := string(k[len(prefix)+runTimeLen:])
			var r apitypes.Run
			if err := get(runs, ref, &r); err != nil {
				return fmt.Errorf("run %q of the tenant index: %w", ref, err)
			}
			if r.Tenant != q.Tenant {
				return fmt.Errorf("run %q of the tenant index: stored under another tenant", ref)
			}
			if !q.Matches(r) {
				continue
			}
			if skip > 0 {
				skip--
				continue
			}
			if len(out) == limit {
				// Look-ahead found one more row: there is a next page. A
				// page that ends exactly at the last row gets no cursor.
				if cursorMode {
					next = encodeCursor(last[len(prefix):])
				}
				return nil
			}
			out = append(out, r)
			last = append(last[:0], k...)
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list runs: %w", err)
	}
	return out, next, nil
}

// lastBelow positions c on the greatest key below bound, or on the greatest
// key of prefix's range when bound is nil, and returns it (nil if there is
// none; the caller checks the prefix).
func lastBelow(c *bbolt.Cursor, prefix, bound []byte) []byte {
	if bound == nil {
		bound = prefixEnd(prefix)
	}
	if bound == nil {
		k, _ := c.Last()
		return k
	}
	if k, _ := c.Seek(bound); k == nil {
		k, _ = c.Last()
		return k
	}
	k, _ := c.Prev()
	return k
}

// prefixEnd returns the smallest key greater than every key that starts with
// prefix, or nil if there is none (prefix is all 0xff).
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// tenantPrefix starts every key of a by-tenant index: the tenant's length,
// then its bytes. The length keeps tenant "t" from owning tenant "t1"'s keys.
func tenantPrefix(tenant string) []byte {
	k := make([]byte, 4, 4+len(tenant))
	binary.BigEndian.PutUint32(k, uint32(len(tenant)))
	return append(k, tenant...)
}

// runTimeLen is the length of runTime's encoding.
const runTimeLen = 12

// runTime encodes ts so that byte order is time order over the whole range
// of time.Time, the zero time and times before 1970 included (UnixNano would
// overflow): Unix seconds with the sign bit flipped, then the nanoseconds.
func runTime(ts time.Time) []byte {
	b := make([]byte, runTimeLen)
	binary.BigEndian.PutUint64(b, uint64(ts.Unix())^(1<<63))
	binary.BigEndian.PutUint32(b[8:], uint32(ts.Nanosecond()))
	return b
}

func runIndexKey(tenant string, createdAt time.Time, ref string) []byte {
	k := tenantPrefix(tenant)
	k = append(k, runTime(createdAt)...)
	return append(k, ref...)
}

// cursorVersion is the first byte of every cursor, so that a later format
// can tell old cursors apart.
const cursorVersion = 1

// encodeCursor makes the opaque cursor of an index position (runTime and
// ref, without the tenant prefix: the query names the tenant).
func encodeCursor(pos []byte) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{cursorVersion}, pos...))
}

func decodeCursor(cursor string) ([]byte, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return nil, store.ErrBadCursor
	}
	if len(raw) <= 1+runTimeLen || raw[0] != cursorVersion {
		return nil, store.ErrBadCursor
	}
	if nanos := binary.BigEndian.Uint32(raw[1+8:]); nanos >= uint32(time.Second) {
		return nil, store.ErrBadCursor
	}
	return raw[1:], nil
}

// CreateProfile stores p; its Ref, Tenant and Name may not be empty.
func (s *Store) CreateProfile(ctx context.Context, p apitypes.Profile) error {
	if err := checkNamed("profile", p.Ref, p.Tenant, p.Name); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		return createNamed(tx.Bucket(bucketProfiles), tx.Bucket(bucketProfileNames), "profile", p.Ref, p.Tenant, p.Name, p)
	})
}

// UpdateProfile implements store.Store.
func (s *Store) UpdateProfile(ctx context.Context, p apitypes.Profile) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketProfiles)
		var old apitypes.Profile
		if err := get(b, p.Ref, &old); err != nil {
			return fmt.Errorf("profile %q: %w", p.Ref, err)
		}
		if old.Tenant != p.Tenant || old.Name != p.Name {
			return fmt.Errorf("update profile %q: tenant or name changed: %w", p.Ref, store.ErrConflict)
		}
		return put(b, p.Ref, p)
	})
}

func (s *Store) GetProfile(ctx context.Context, ref string) (apitypes.Profile, error) {
	var p apitypes.Profile
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return get(tx.Bucket(bucketProfiles), ref, &p)
	})
	if err != nil {
		return apitypes.Profile{}, fmt.Errorf("profile %q: %w", ref, err)
	}
	return p, nil
}

// ListProfiles orders by name in byte order. An empty tenant is an error.
func (s *Store) ListProfiles(ctx context.Context, tenant string) ([]apitypes.Profile, error) {
	return listNamed[apitypes.Profile](ctx, s, bucketProfiles, bucketProfileNames, "profiles", tenant)
}

// CreateWorkspace stores w; its Ref, Tenant and Name may not be empty.
func (s *Store) CreateWorkspace(ctx context.Context, w apitypes.Workspace) error {
	if err := checkNamed("workspace", w.Ref, w.Tenant, w.Name); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		return createNamed(tx.Bucket(bucketWorkspaces), tx.Bucket(bucketWorkspaceNames), "workspace", w.Ref, w.Tenant, w.Name, w)
	})
}

func (s *Store) GetWorkspace(ctx context.Context, ref string) (apitypes.Workspace, error) {
	var w apitypes.Workspace
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return get(tx.Bucket(bucketWorkspaces), ref, &w)
	})
	if err != nil {
		return apitypes.Workspace{}, fmt.Errorf("workspace %q: %w", ref, err)
	}
	return w, nil
}

// ListWorkspaces orders by name in byte order. An empty tenant is an error.
func (s *Store) ListWorkspaces(ctx context.Context, tenant string) ([]apitypes.Workspace, error) {
	return listNamed[apitypes.Workspace](ctx, s, bucketWorkspaces, bucketWorkspaceNames, "workspaces", tenant)
}

func checkNamed(kind, ref, tenant, name string) error {
	switch {
	case ref == "":
		return fmt.Errorf("create %s: empty ref", kind)
	case tenant == "":
		return fmt.Errorf("create %s %q: empty tenant", kind, ref)
	case name == "":
		return fmt.Errorf("create %s %q: empty name", kind, ref)
	}
	return nil
}

// createNamed stores v under ref in records and claims its name in names,
// the tenant's name index. Refs are unique across tenants, names within one.
func createNamed(records, names *bbolt.Bucket, kind, ref, tenant, name string, v any) error {
	if records.Get([]byte(ref)) != nil {
		return fmt.Errorf("%s %q: %w", kind, ref, store.ErrExists)
	}
	nameKey := append(tenantPrefix(tenant), name...)
	if names.Get(nameKey) != nil {
		return fmt.Errorf("%s name %q: %w", kind, name, store.ErrExists)
	}
	if err := put(records, ref, v); err != nil {
		return err
	}
	return names.Put(nameKey, []byte(ref))
}

// listNamed returns the records of tenant's range of the names index, in
// name order.
func listNamed[T any](ctx context.Context, s *Store, records, names []byte, what, tenant string) ([]T, error) {
	if tenant == "" {
		return nil, fmt.Errorf("list %s: empty tenant", what)
	}
	prefix := tenantPrefix(tenant)
	out := []T{}
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(records)
		c := tx.Bucket(names).Cursor()
		for k, ref := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, ref = c.Next() {
			var v T
			if err := get(b, string(ref), &v); err != nil {
				return fmt.Errorf("%q of the name index: %w", ref, err)
			}
			out = append(out, v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	return out, nil
}

// update and view run fn in a bbolt transaction and report a closed database
// as store.ErrClosed. bbolt has no cancellation; ctx is checked only before
// the transaction starts.
func (s *Store) update(ctx context.Context, fn func(*bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return closedErr(s.db.Update(fn))
}

func (s *Store) view(ctx context.Context, fn func(*bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return closedErr(s.db.View(fn))
}

func closedErr(err error) error {
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return store.ErrClosed
	}
	return err
}

// get decodes the value at key into v, or returns store.ErrNotFound. Decoding
// copies, so the caller never holds memory that belongs to the transaction.
func get(b *bbolt.Bucket, key string, v any) error {
	data := b.Get([]byte(key))
	if data == nil {
		return store.ErrNotFound
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %q: %w", key, err)
	}
	return nil
}

func put(b *bbolt.Bucket, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %q: %w", key, err)
	}
	return b.Put([]byte(key), data)
}

// putAndReload stores v and decodes what was stored into out, so that the
// caller gets exactly what a later Get returns and shares no map or slice with
// the record it passed in.
func putAndReload(b *bbolt.Bucket, key string, v, out any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %q: %w", key, err)
	}
	if err := b.Put([]byte(key), data); err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// CountRuns implements store.RunCounter. It reads every row of the index
// (each decoded for its state and driver only), so the metrics reuse a
// count for a while.
func (s *Store) CountRuns(ctx context.Context) ([]store.RunCount, error) {
	type key struct{ state, tool string }
	n := map[key]int{}
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketRuns).ForEach(func(_, v []byte) error {
			var r struct {
				State  string `json:"state"`
				Driver string `json:"driver"`
			}
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			n[key{r.State, r.Driver}]++
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	out := make([]store.RunCount, 0, len(n))
	for k, c := range n {
		out = append(out, store.RunCount{State: k.state, Tool: k.tool, Runs: c})
	}
	slices.SortFunc(out, func(a, b store.RunCount) int {
		return cmp.Or(strings.Compare(a.State, b.State), strings.Compare(a.Tool, b.Tool))
	})
	return out, nil
}
