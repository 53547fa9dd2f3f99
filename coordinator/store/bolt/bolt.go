// Package bolt is the single-file implementation of store.Store on bbolt, the
// coordinator's default store.
//
// Every change that touches more than one record happens in one bbolt write
// transaction, so a crash never leaves half of it behind. bolt never calls out
// of the process while it holds the write lock, except through the issue and
// fn callbacks the caller hands to Enroll and UpdateNode.
package bolt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/olivares-dev/olivares/coordinator/store"
)

// Buckets. Values are the JSON of the store record types; keys are ids, or
// the token hash for credentials and join tokens.
var (
	bucketTenants    = []byte("tenants")
	bucketPrincipals = []byte("principals")
	bucketCreds      = []byte("credentials")
	bucketJoinTokens = []byte("join_tokens")
	bucketNodes      = []byte("nodes")

	allBuckets = [][]byte{bucketTenants, bucketPrincipals, bucketCreds, bucketJoinTokens, bucketNodes}
)

// lockTimeout is how long Open waits for the file lock before it gives up.
// bbolt waits forever when its Timeout is zero; a second coordinator should
// fail fast and say why instead.
const lockTimeout = 1 * time.Second

// Store is a store.Store backed by one bbolt file. It is safe for concurrent
// use; bbolt serialises the writers.
type Store struct {
	db *bbolt.DB
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
		for _, name := range allBuckets {
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

// Close closes the file. It is safe to call more than once; every other
// method returns store.ErrClosed afterwards.
func (s *Store) Close() error {
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
