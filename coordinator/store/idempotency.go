package store

import (
	"context"
	"time"
)

// IdempotencyRecord is the first answer to a POST sent with an
// Idempotency-Key header (R-CRT-7): a retry with the same key from the same
// credential gets it back instead of a second launch.
// Records live until ExpiresAt (24 h after the first request).
type IdempotencyRecord struct {
	// Scope says whose and which request: tenant, credential and route.
	// Scope and Key together are the record's key.
	Scope string `json:"scope"`
	Key   string `json:"key"`
	// BodyHash is the hex SHA-256 of the request body: the same key with
	// another body is refused.
	BodyHash string `json:"body_hash"`
	// RunRef is the run the request creates, chosen before the request is
	// sent to its node, so that a retry can find it after a crash.
	RunRef string `json:"run_ref"`
	// Status is the HTTP status answered; 0 while the request is in
	// flight (a claim).
	Status int `json:"status"`
	// Body is the response body answered.
	Body      []byte    `json:"body,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// IdempotencyKeys is the Idempotency-Key part of Store. It is small on
// purpose: one atomic claim, one replace, one delete. A PostgreSQL
// implementation is a table keyed by (scope, key) with an INSERT ... ON
// CONFLICT DO UPDATE ... WHERE expires_at <= $now RETURNING for the claim.
type IdempotencyKeys interface {
	// ClaimIdempotencyKey stores rec when no record of (rec.Scope, rec.Key)
	// exists, or the existing one has expired (its ExpiresAt is not after
	// rec.CreatedAt), and returns (rec, true). Otherwise it changes nothing
	// and returns the stored record and false. Two concurrent claims of one
	// key: exactly one is true. Expired records may be dropped at any time.
	ClaimIdempotencyKey(ctx context.Context, rec IdempotencyRecord) (IdempotencyRecord, bool, error)
	// PutIdempotencyRecord replaces the record of (rec.Scope, rec.Key):
	// the answer of a claim, or a takeover of an abandoned one.
	PutIdempotencyRecord(ctx context.Context, rec IdempotencyRecord) error
	// DeleteIdempotencyKey removes the record, if any (a claim whose
	// request was refused, so that a retry runs again).
	DeleteIdempotencyKey(ctx context.Context, scope, key string) error
}
