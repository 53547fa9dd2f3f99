package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// OpenReadOnly opens the store file at path for reading only, as
// olivares-coordinator migrate does: a second reader is fine, but a running
// coordinator (which holds the file for writing) makes it fail after one
// second with an error that says so.
func OpenReadOnly(path string) (*Store, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: lockTimeout, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w (is the coordinator still running? stop it first)", path, err)
	}
	return &Store{db: db}, nil
}

var _ store.Exporter = (*Store)(nil)

// exportBuckets maps each record kind to its bucket.
var exportBuckets = map[string][]byte{
	store.RecTenants:           bucketTenants,
	store.RecPrincipals:        bucketPrincipals,
	store.RecCredentials:       bucketCreds,
	store.RecSigninLinks:       bucketSigninLinks,
	store.RecJoinTokens:        bucketJoinTokens,
	store.RecNodes:             bucketNodes,
	store.RecProfiles:          bucketProfiles,
	store.RecWorkspaces:        bucketWorkspaces,
	store.RecWorkspaceSettings: bucketWorkspaceSettings,
	store.RecSecrets:           bucketSecrets,
	store.RecRuns:              bucketRuns,
	store.RecRunTombstones:     bucketTombstones,
	store.RecRunMeta:           bucketRunMeta,
	store.RecMarks:             bucketMarks,
	store.RecAudit:             bucketAudit,
	store.RecAuditWindows:      bucketAuditWindows,
	store.RecUsage:             bucketUsage,
}

// Counts implements store.Counter: the number of keys in each kind's bucket.
func (s *Store) Counts(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		for kind, name := range exportBuckets {
			b := tx.Bucket(name)
			if b == nil {
				continue
			}
			out[kind] = b.Stats().KeyN
		}
		return nil
	})
	return out, err
}

// Export implements store.Exporter. It reads in one read transaction, so
// the records of a kind are a consistent snapshot.
func (s *Store) Export(ctx context.Context, kind string, fn func(store.Record) error) error {
	name, ok := exportBuckets[kind]
	if !ok {
		return fmt.Errorf("export: unknown record kind %q", kind)
	}
	return s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(name)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			val, err := decodeRecord(kind, k, v)
			if err != nil {
				return fmt.Errorf("export %s: key %x: %w", kind, k, err)
			}
			return fn(store.Record{Kind: kind, Value: val})
		})
	})
}

func decodeAs[T any](v []byte) (any, error) {
	var out T
	if err := json.Unmarshal(v, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// decodeRecord turns one bucket entry into the kind's record type.
func decodeRecord(kind string, k, v []byte) (any, error) {
	switch kind {
	case store.RecTenants:
		return decodeAs[store.Tenant](v)
	case store.RecPrincipals:
		return decodeAs[store.Principal](v)
	case store.RecCredentials:
		return decodeAs[store.Credential](v)
	case store.RecSigninLinks:
		return decodeAs[store.SigninLink](v)
	case store.RecJoinTokens:
		return decodeAs[store.JoinToken](v)
	case store.RecNodes:
		return decodeAs[store.Node](v)
	case store.RecProfiles:
		return decodeAs[apitypes.Profile](v)
	case store.RecWorkspaces:
		return decodeAs[apitypes.Workspace](v)
	case store.RecWorkspaceSettings:
		return decodeAs[store.WorkspaceSettings](v)
	case store.RecSecrets:
		return decodeAs[store.Secret](v)
	case store.RecRuns:
		return decodeAs[apitypes.Run](v)
	case store.RecRunMeta:
		return decodeAs[store.RunMeta](v)
	case store.RecAudit:
		return decodeAs[apitypes.AuditEntry](v)
	case store.RecUsage:
		return decodeAs[apitypes.UsageTurn](v)
	case store.RecRunTombstones:
		var at time.Time
		if err := json.Unmarshal(v, &at); err != nil {
			return nil, err
		}
		return store.Tombstone{RunRef: string(k), DeletedAt: at}, nil
	case store.RecMarks:
		// tenantPrefix, lp(owner), ref → Marks.
		tenant, rest, ok := cutLP(k)
		if !ok {
			return nil, fmt.Errorf("malformed marks key")
		}
		owner, ref, ok := cutLP(rest)
		if !ok {
			return nil, fmt.Errorf("malformed marks key")
		}
		var m store.Marks
		if err := json.Unmarshal(v, &m); err != nil {
			return nil, err
		}
		return store.MarkRecord{Key: store.MarkKey{Tenant: tenant, Owner: owner, RunRef: string(ref)}, Marks: m}, nil
	case store.RecAuditWindows:
		// tenantPrefix, lp(event), lp(run), credential → time.
		tenant, rest, ok1 := cutLP(k)
		event, rest, ok2 := cutLP(rest)
		run, cred, ok3 := cutLP(rest)
		if !ok1 || !ok2 || !ok3 {
			return nil, fmt.Errorf("malformed audit window key")
		}
		var at time.Time
		if err := at.UnmarshalBinary(v); err != nil {
			return nil, err
		}
		return store.AuditWindow{Tenant: tenant, Event: event, RunRef: run, CredentialID: string(cred), LastAt: at}, nil
	}
	return nil, fmt.Errorf("unknown record kind %q", kind)
}
