package storetest

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
)

// idemCases are the conformance cases of store.IdempotencyKeys.
var idemCases = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Idempotency/ClaimOnce", testIdemClaimOnce},
	{"Idempotency/Complete", testIdemComplete},
	{"Idempotency/Expired", testIdemExpired},
	{"Idempotency/Delete", testIdemDelete},
	{"Idempotency/Scopes", testIdemScopes},
	{"Idempotency/ClaimConcurrent", testIdemClaimConcurrent},
}

func init() { markCases = append(markCases, idemCases...) }

func idemRec(scope, key string, at time.Time) store.IdempotencyRecord {
	return store.IdempotencyRecord{Scope: scope, Key: key, BodyHash: "h1", RunRef: "run_" + key,
		CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour)}
}

func testIdemClaimOnce(t *testing.T, s store.Store) {
	ctx := context.Background()
	rec := idemRec("t1 cred POST /runs", "k1", t0)
	got, ok, err := s.ClaimIdempotencyKey(ctx, rec)
	if err != nil || !ok || !reflect.DeepEqual(got, rec) {
		t.Fatalf("first claim: got %+v %v %v, want the record, true", got, ok, err)
	}
	again := rec
	again.BodyHash, again.RunRef, again.CreatedAt = "h2", "run_other", t0.Add(time.Hour)
	got, ok, err = s.ClaimIdempotencyKey(ctx, again)
	if err != nil || ok || !reflect.DeepEqual(got, rec) {
		t.Fatalf("second claim: got %+v %v %v, want the first record, false", got, ok, err)
	}
}

func testIdemComplete(t *testing.T, s store.Store) {
	ctx := context.Background()
	rec := idemRec("t1 cred POST /runs", "k1", t0)
	if _, ok, err := s.ClaimIdempotencyKey(ctx, rec); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	rec.Status, rec.Body = 201, []byte(`{"run_ref":"run_k1"}`)
	if err := s.PutIdempotencyRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	later := idemRec(rec.Scope, rec.Key, t0.Add(23*time.Hour))
	got, ok, err := s.ClaimIdempotencyKey(ctx, later)
	if err != nil || ok || !reflect.DeepEqual(got, rec) {
		t.Fatalf("claim after the answer: got %+v %v %v, want %+v, false", got, ok, err, rec)
	}
}

func testIdemExpired(t *testing.T, s store.Store) {
	ctx := context.Background()
	rec := idemRec("t1 cred POST /runs", "k1", t0)
	rec.Status = 201
	if _, ok, err := s.ClaimIdempotencyKey(ctx, rec); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	// Other keys expire too; a claim may drop them.
	for _, k := range []string{"a", "b", "c"} {
		if _, ok, err := s.ClaimIdempotencyKey(ctx, idemRec("t1 cred POST /runs", k, t0)); err != nil || !ok {
			t.Fatalf("claim %s: %v %v", k, ok, err)
		}
	}
	next := idemRec(rec.Scope, rec.Key, rec.ExpiresAt)
	got, ok, err := s.ClaimIdempotencyKey(ctx, next)
	if err != nil || !ok || !reflect.DeepEqual(got, next) {
		t.Fatalf("claim at expiry: got %+v %v %v, want a new claim", got, ok, err)
	}
	if _, ok, err := s.ClaimIdempotencyKey(ctx, idemRec(rec.Scope, rec.Key, rec.ExpiresAt.Add(time.Minute))); err != nil || ok {
		t.Fatalf("the new claim did not hold: %v %v", ok, err)
	}
	if _, ok, err := s.ClaimIdempotencyKey(ctx, idemRec(rec.Scope, "a", rec.ExpiresAt)); err != nil || !ok {
		t.Fatalf("another expired key: %v %v, want it claimable", ok, err)
	}
}

func testIdemDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	rec := idemRec("t1 cred POST /runs", "k1", t0)
	if err := s.DeleteIdempotencyKey(ctx, rec.Scope, rec.Key); err != nil {
		t.Fatalf("delete of nothing: %v", err)
	}
	if _, ok, err := s.ClaimIdempotencyKey(ctx, rec); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if err := s.DeleteIdempotencyKey(ctx, rec.Scope, rec.Key); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.ClaimIdempotencyKey(ctx, rec); err != nil || !ok {
		t.Fatalf("claim after delete: %v %v, want true", ok, err)
	}
}

func testIdemScopes(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, scope := range []string{"t1 credA POST /runs", "t1 credB POST /runs", "t2 credA POST /runs", "t1 credA POST /runs/run_1/handoff"} {
		if _, ok, err := s.ClaimIdempotencyKey(ctx, idemRec(scope, "same-key", t0)); err != nil || !ok {
			t.Fatalf("scope %q: %v %v, want its own claim", scope, ok, err)
		}
	}
}

func testIdemClaimConcurrent(t *testing.T, s store.Store) {
	ctx := context.Background()
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := idemRec("t1 cred POST /runs", "k1", t0)
			rec.RunRef = "run_" + string(rune('a'+i))
			if _, ok, err := s.ClaimIdempotencyKey(ctx, rec); err != nil {
				t.Error(err)
			} else if ok {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Fatalf("concurrent claims won: got %d, want 1", n)
	}
}
