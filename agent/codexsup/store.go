package codexsup

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Buckets (owned here).
var (
	bucketBindings = []byte("codexsup_bindings") // run ref → binding
	bucketLeases   = []byte("codexsup_leases")   // thread id → lease
)

// binding is a supervised run's tie to native threads.
type binding struct {
	RunRef string `json:"run_ref"`
	Tenant string `json:"tenant"`
	// Source is the thread the branch continues; it is only ever read.
	Source string `json:"source"`
	State  string `json:"state"` // apitypes.CodexBranchPending | Committed
	// Canonical and Fork exist from the first turn on; their lease tokens
	// let a later generation of the run write them.
	Canonical      string `json:"canonical,omitempty"`
	CanonicalToken uint64 `json:"canonical_token,omitempty"`
	Fork           string `json:"fork,omitempty"`
	ForkToken      uint64 `json:"fork_token,omitempty"`
	ForkArchived   bool   `json:"fork_archived,omitempty"`
	Model          string `json:"model,omitempty"`
	ModelProvider  string `json:"model_provider,omitempty"`
	LastError      string `json:"last_error,omitempty"`
	// History is the bounded visible history (R-CX-HIST-*), injected into
	// the canonical thread at the first turn.
	History   []apitypes.CodexMessage `json:"history"`
	CreatedAt time.Time               `json:"created_at"`
}

// view is the row's codex_binding.
func (b binding) view(host string) *apitypes.CodexBinding {
	return &apitypes.CodexBinding{SourceHost: host, SourceThreadID: b.Source, State: b.State,
		CanonicalThreadID: b.Canonical, Model: b.Model, ModelProvider: b.ModelProvider,
		ModelLocked: true, LastError: b.LastError}
}

// lease is the right to write one native thread. Token is the fencing
// token: every acquisition gets a new, larger one, and a write is allowed
// only to the holder whose token is current.
type lease struct {
	Holder string    `json:"holder"`
	Token  uint64    `json:"token"`
	At     time.Time `json:"at"`
}

// transientPrefix marks holders that are operations, not runs: their
// leases die with the agent process.
const transientPrefix = "archive:"

// Lease errors.
var (
	// ErrLeaseHeld: another holder has the thread's lease.
	ErrLeaseHeld = errors.New("codexsup: the thread's lease is held by another writer")
	// ErrLeaseLost: the holder's token is no longer the thread's.
	ErrLeaseLost = errors.New("codexsup: this writer no longer holds the thread's lease")
)

type store struct{ db *bbolt.DB }

func openStore(db *bbolt.DB) (*store, error) {
	err := db.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketBindings, bucketLeases} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		// Operations of the last agent process ended with it.
		c := tx.Bucket(bucketLeases).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var l lease
			if json.Unmarshal(v, &l) != nil || strings.HasPrefix(l.Holder, transientPrefix) {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &store{db: db}, nil
}

func put(tx *bbolt.Tx, bucket []byte, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Bucket(bucket).Put([]byte(key), b)
}

// binding returns the run's binding.
func (st *store) binding(runRef string) (binding, bool, error) {
	var b binding
	var ok bool
	err := st.db.View(func(tx *bbolt.Tx) error {
		raw := tx.Bucket(bucketBindings).Get([]byte(runRef))
		if raw == nil {
			return nil
		}
		ok = true
		return json.Unmarshal(raw, &b)
	})
	return b, ok, err
}

// bindings returns every binding.
func (st *store) bindings() ([]binding, error) {
	var out []binding
	err := st.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketBindings).ForEach(func(k, v []byte) error {
			var b binding
			if err := json.Unmarshal(v, &b); err != nil {
				return fmt.Errorf("codexsup: binding %s: %w", k, err)
			}
			out = append(out, b)
			return nil
		})
	})
	return out, err
}

// create stores a new pending binding, unless the source already has one
// (then that one is returned and ok is false).
func (st *store) create(b binding) (existing binding, ok bool, err error) {
	err = st.db.Update(func(tx *bbolt.Tx) error {
		bk := tx.Bucket(bucketBindings)
		found := false
		if err := bk.ForEach(func(k, v []byte) error {
			var o binding
			if json.Unmarshal(v, &o) == nil && o.Source == b.Source && !found {
				existing, found = o, true
			}
			return nil
		}); err != nil {
			return err
		}
		if found {
			return nil
		}
		if bk.Get([]byte(b.RunRef)) != nil {
			return fmt.Errorf("codexsup: run %s is already bound", b.RunRef)
		}
		ok = true
		return put(tx, bucketBindings, b.RunRef, b)
	})
	return existing, ok, err
}

func (st *store) remove(runRef string) error {
	return st.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketBindings).Delete([]byte(runRef)) })
}

// update applies fn to the run's binding in one transaction.
func (st *store) update(runRef string, fn func(*binding) error) error {
	return st.db.Update(func(tx *bbolt.Tx) error {
		raw := tx.Bucket(bucketBindings).Get([]byte(runRef))
		if raw == nil {
			return fmt.Errorf("codexsup: run %s has no binding", runRef)
		}
		var b binding
		if err := json.Unmarshal(raw, &b); err != nil {
			return err
		}
		if err := fn(&b); err != nil {
			return err
		}
		return put(tx, bucketBindings, runRef, b)
	})
}

// acquire gives holder the thread's lease with a new token. A lease of
// another holder is taken over only when takeover says that holder can no
// longer write (its run is not live); otherwise ErrLeaseHeld.
func (st *store) acquire(thread, holder string, takeover func(prev string) bool) (uint64, error) {
	var token uint64
	err := st.db.Update(func(tx *bbolt.Tx) error {
		bk := tx.Bucket(bucketLeases)
		if raw := bk.Get([]byte(thread)); raw != nil {
			var l lease
			if err := json.Unmarshal(raw, &l); err == nil && l.Holder != holder && (takeover == nil || !takeover(l.Holder)) {
				return fmt.Errorf("%w (%s)", ErrLeaseHeld, l.Holder)
			}
		}
		n, err := bk.NextSequence()
		if err != nil {
			return err
		}
		token = n
		return put(tx, bucketLeases, thread, lease{Holder: holder, Token: n, At: time.Now().UTC()})
	})
	return token, err
}

// check says whether holder's token is the thread's current one.
func (st *store) check(thread, holder string, token uint64) error {
	return st.db.View(func(tx *bbolt.Tx) error {
		raw := tx.Bucket(bucketLeases).Get([]byte(thread))
		var l lease
		if raw == nil || json.Unmarshal(raw, &l) != nil || l.Holder != holder || l.Token != token || token == 0 {
			return ErrLeaseLost
		}
		return nil
	})
}

// holder returns the thread's lease holder, "" when none.
func (st *store) holder(thread string) string {
	var l lease
	st.db.View(func(tx *bbolt.Tx) error {
		if raw := tx.Bucket(bucketLeases).Get([]byte(thread)); raw != nil {
			json.Unmarshal(raw, &l)
		}
		return nil
	})
	return l.Holder
}

// holders returns every leased thread's holder.
func (st *store) holders() map[string]string {
	out := map[string]string{}
	st.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketLeases).ForEach(func(k, v []byte) error {
			var l lease
			if json.Unmarshal(v, &l) == nil && l.Holder != "" {
				out[string(k)] = l.Holder
			}
			return nil
		})
	})
	return out
}

// release drops the lease if holder's token is still current.
func (st *store) release(thread, holder string, token uint64) error {
	return st.db.Update(func(tx *bbolt.Tx) error {
		bk := tx.Bucket(bucketLeases)
		raw := bk.Get([]byte(thread))
		var l lease
		if raw == nil || json.Unmarshal(raw, &l) != nil || l.Holder != holder || l.Token != token {
			return nil
		}
		return bk.Delete([]byte(thread))
	})
}
