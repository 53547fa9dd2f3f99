package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/olivares-dev/olivares/coordinator/store"
)

// idemPrune is how many expired records one claim drops at most.
const idemPrune = 64

// ClaimIdempotencyKey implements store.IdempotencyKeys: one statement that
// inserts the claim, or replaces a stored record only when it has expired,
// and says which row is there now.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, rec store.IdempotencyRecord) (store.IdempotencyRecord, bool, error) {
	if err := checkText("idempotency key", rec.Scope, rec.Key); err != nil {
		return store.IdempotencyRecord{}, false, err
	}
	doc, err := encode(rec)
	if err != nil {
		return store.IdempotencyRecord{}, false, err
	}
	var out store.IdempotencyRecord
	claimed := false
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM idempotency_keys WHERE (scope, key) IN (
			SELECT scope, key FROM idempotency_keys WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2)`,
			rec.CreatedAt, idemPrune); err != nil {
			return err
		}
		var stored []byte
		err := tx.QueryRow(ctx, `INSERT INTO idempotency_keys (scope, key, expires_at, doc) VALUES ($1, $2, $3, $4)
			ON CONFLICT (scope, key) DO UPDATE SET expires_at = EXCLUDED.expires_at, doc = EXCLUDED.doc
				WHERE idempotency_keys.expires_at <= $5
			RETURNING doc`, rec.Scope, rec.Key, rec.ExpiresAt, doc, rec.CreatedAt).Scan(&stored)
		switch {
		case err == nil:
			claimed = true
			return decode(stored, &out)
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		// The row was there and alive: the conflict updated nothing.
		return scanDoc(tx.QueryRow(ctx, "SELECT doc FROM idempotency_keys WHERE scope = $1 AND key = $2", rec.Scope, rec.Key), &out)
	})
	if err != nil {
		return store.IdempotencyRecord{}, false, fmt.Errorf("claim idempotency key: %w", err)
	}
	return out, claimed, nil
}

// PutIdempotencyRecord implements store.IdempotencyKeys.
func (s *Store) PutIdempotencyRecord(ctx context.Context, rec store.IdempotencyRecord) error {
	if err := checkText("idempotency key", rec.Scope, rec.Key); err != nil {
		return err
	}
	doc, err := encode(rec)
	if err != nil {
		return err
	}
	db, err := s.q()
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, `INSERT INTO idempotency_keys (scope, key, expires_at, doc) VALUES ($1, $2, $3, $4)
		ON CONFLICT (scope, key) DO UPDATE SET expires_at = EXCLUDED.expires_at, doc = EXCLUDED.doc`,
		rec.Scope, rec.Key, rec.ExpiresAt, doc)
	return closedErr(s, err)
}

// DeleteIdempotencyKey implements store.IdempotencyKeys.
func (s *Store) DeleteIdempotencyKey(ctx context.Context, scope, key string) error {
	if !textOK(scope, key) {
		return nil
	}
	db, err := s.q()
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, "DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2", scope, key)
	return closedErr(s, err)
}
