package bolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"time"

	"go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/coordinator/store"
)

// Idempotency keys: idem holds the records under lp(scope)+key; idem_exp
// orders them by expiry (8 bytes of unix nanos, then the idem key) so that
// each claim drops a few expired ones, oldest first.
var (
	bucketIdem    = []byte("idem")
	bucketIdemExp = []byte("idem_exp")
)

func init() { markBuckets = append(markBuckets, bucketIdem, bucketIdemExp) }

// idemPrune is how many expired records one claim drops at most.
const idemPrune = 64

func idemKey(scope, key string) []byte { return append(lp(scope), key...) }

func expKey(at time.Time, k []byte) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(k)), uint64(at.UnixNano()))
	return append(b, k...)
}

func (s *Store) ClaimIdempotencyKey(ctx context.Context, rec store.IdempotencyRecord) (store.IdempotencyRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.IdempotencyRecord{}, false, err
	}
	var out store.IdempotencyRecord
	claimed := false
	err := s.db.Update(func(tx *bbolt.Tx) error {
		idem, exp := tx.Bucket(bucketIdem), tx.Bucket(bucketIdemExp)
		// Drop a few expired records.
		pruned := 0
		c := exp.Cursor()
		for ek, _ := c.First(); ek != nil; ek, _ = c.First() {
			if len(ek) < 8 || int64(binary.BigEndian.Uint64(ek)) > rec.CreatedAt.UnixNano() {
				break
			}
			if err := idem.Delete(ek[8:]); err != nil {
				return err
			}
			if err := exp.Delete(ek); err != nil {
				return err
			}
			if pruned++; pruned == idemPrune {
				break
			}
		}
		k := idemKey(rec.Scope, rec.Key)
		if v := idem.Get(k); v != nil {
			if err := json.Unmarshal(v, &out); err != nil {
				return err
			}
			if out.ExpiresAt.After(rec.CreatedAt) {
				return nil
			}
		}
		claimed, out = true, rec
		return putIdem(idem, exp, rec)
	})
	return out, claimed, err
}

// putIdem writes rec over the record of its key, keeping the expiry index
// true.
func putIdem(idem, exp *bbolt.Bucket, rec store.IdempotencyRecord) error {
	k := idemKey(rec.Scope, rec.Key)
	if v := idem.Get(k); v != nil {
		var prev store.IdempotencyRecord
		if json.Unmarshal(v, &prev) == nil {
			if err := exp.Delete(expKey(prev.ExpiresAt, k)); err != nil {
				return err
			}
		}
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := idem.Put(k, data); err != nil {
		return err
	}
	return exp.Put(expKey(rec.ExpiresAt, k), nil)
}

func (s *Store) PutIdempotencyRecord(ctx context.Context, rec store.IdempotencyRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		return putIdem(tx.Bucket(bucketIdem), tx.Bucket(bucketIdemExp), rec)
	})
}

func (s *Store) DeleteIdempotencyKey(ctx context.Context, scope, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		idem, exp := tx.Bucket(bucketIdem), tx.Bucket(bucketIdemExp)
		k := idemKey(scope, key)
		v := idem.Get(k)
		if v == nil {
			return nil
		}
		var prev store.IdempotencyRecord
		if json.Unmarshal(v, &prev) == nil {
			if err := exp.Delete(expKey(prev.ExpiresAt, k)); err != nil {
				return err
			}
		}
		return idem.Delete(k)
	})
}
