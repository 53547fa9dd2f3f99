package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Usage buckets (docs/rules/usage.md): usage holds the rows keyed
// tenant 0 at(unix nanos, big-endian) run_ref 0 seq, so a tenant's time
// range is one cursor walk; usage_ids maps run_ref 0 seq to that key (a
// repeated push stores a row once, R-USE-6); usage_latest holds each
// tenant 0 profile's newest row (R-USE-5).
var (
	bucketUsage       = []byte("usage")
	bucketUsageIDs    = []byte("usage_ids")
	bucketUsageLatest = []byte("usage_latest")
)

func init() { markBuckets = append(markBuckets, bucketUsage, bucketUsageIDs, bucketUsageLatest) }

func usageKey(tenant string, at time.Time, run string, seq uint64) []byte {
	k := make([]byte, 0, len(tenant)+len(run)+18)
	k = append(k, tenant...)
	k = append(k, 0)
	k = binary.BigEndian.AppendUint64(k, uint64(at.UnixNano()))
	k = append(k, run...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

func usageID(run string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(run), 0), seq)
}

// newer orders rows for usage_latest: At, then RunRef, then Seq.
func newer(a, b apitypes.UsageTurn) bool {
	if !a.At.Equal(b.At) {
		return a.At.After(b.At)
	}
	if a.RunRef != b.RunRef {
		return a.RunRef > b.RunRef
	}
	return a.Seq > b.Seq
}

func (s *Store) PutUsage(ctx context.Context, rows []apitypes.UsageTurn) error {
	if err := checkUsage(rows); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bbolt.Tx) error { return putUsageTx(tx, rows) })
}

func checkUsage(rows []apitypes.UsageTurn) error {
	for _, u := range rows {
		if u.RunRef == "" || u.Tenant == "" || u.Seq == 0 {
			return fmt.Errorf("put usage: row without run_ref, tenant or seq")
		}
	}
	return nil
}

// putUsageTx stores in tx each row not stored yet (PutUsage's rules).
func putUsageTx(tx *bbolt.Tx, rows []apitypes.UsageTurn) error {
	data, ids, latest := tx.Bucket(bucketUsage), tx.Bucket(bucketUsageIDs), tx.Bucket(bucketUsageLatest)
	for _, u := range rows {
		u.At = u.At.UTC()
		id := usageID(u.RunRef, u.Seq)
		if ids.Get(id) != nil {
			continue
		}
		key := usageKey(u.Tenant, u.At, u.RunRef, u.Seq)
		b, err := json.Marshal(u)
		if err != nil {
			return err
		}
		if err := data.Put(key, b); err != nil {
			return err
		}
		if err := ids.Put(id, key); err != nil {
			return err
		}
		lk := []byte(u.Tenant + "\x00" + u.ProfileRef)
		if old := latest.Get(lk); old != nil {
			var o apitypes.UsageTurn
			if json.Unmarshal(old, &o) == nil && !newer(u, o) {
				continue
			}
		}
		if err := latest.Put(lk, b); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) ListUsage(ctx context.Context, q store.UsageQuery) ([]apitypes.UsageTurn, error) {
	out := []apitypes.UsageTurn{}
	prefix := append([]byte(q.Tenant), 0)
	start := prefix
	if !q.From.IsZero() {
		start = binary.BigEndian.AppendUint64(bytes.Clone(prefix), uint64(q.From.UnixNano()))
	}
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketUsage).Cursor()
		for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var u apitypes.UsageTurn
			if err := json.Unmarshal(v, &u); err != nil {
				return fmt.Errorf("usage row: %w", err)
			}
			if !q.To.IsZero() && !u.At.Before(q.To) {
				break
			}
			if q.In(u.At) {
				out = append(out, u)
			}
		}
		return nil
	})
	return out, err
}

func (s *Store) LatestAccountUsage(ctx context.Context, tenant string) ([]apitypes.UsageTurn, error) {
	out := []apitypes.UsageTurn{}
	prefix := append([]byte(tenant), 0)
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketUsageLatest).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var u apitypes.UsageTurn
			if err := json.Unmarshal(v, &u); err != nil {
				return fmt.Errorf("usage row: %w", err)
			}
			out = append(out, u)
		}
		return nil
	})
	return out, err
}
