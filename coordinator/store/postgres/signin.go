package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/olivares-dev/olivares/coordinator/store"
)

// CreateSigninLink implements store.Signer.
func (s *Store) CreateSigninLink(ctx context.Context, l store.SigninLink) error {
	if l.Hash == "" {
		return errors.New("create sign-in link: empty hash")
	}
	if !textOK(l.PrincipalID) {
		return fmt.Errorf("principal %q: %w", l.PrincipalID, store.ErrNotFound)
	}
	if err := checkText("create sign-in link", l.Hash); err != nil {
		return err
	}
	doc, err := encode(l)
	if err != nil {
		return err
	}
	db, err := s.q()
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, "INSERT INTO signin_links (hash, principal_id, expires_at, used_at, doc) VALUES ($1, $2, $3, $4, $5)",
		l.Hash, l.PrincipalID, l.ExpiresAt, nullTime(l.UsedAt), doc)
	switch _, unique := uniqueViolation(err); {
	case unique:
		return fmt.Errorf("sign-in link: %w", store.ErrExists)
	case foreignKeyViolation(err):
		return fmt.Errorf("principal %q: %w", l.PrincipalID, store.ErrNotFound)
	}
	return closedErr(s, err)
}

// RedeemSigninLink implements store.Signer. The link is consumed under its
// row lock, so two coordinators redeeming the same link at once sign in
// once.
func (s *Store) RedeemSigninLink(ctx context.Context, hash string, now time.Time, cred store.Credential) (store.Principal, store.Credential, error) {
	if cred.Hash == "" {
		return store.Principal{}, store.Credential{}, errors.New("redeem sign-in link: credential has an empty hash")
	}
	if err := checkText("redeem sign-in link", cred.Hash); err != nil {
		return store.Principal{}, store.Credential{}, err
	}
	if !textOK(hash) {
		return store.Principal{}, store.Credential{}, fmt.Errorf("sign-in link: %w", store.ErrNotFound)
	}
	var p store.Principal
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var l store.SigninLink
		if err := scanDoc(tx.QueryRow(ctx, "SELECT doc FROM signin_links WHERE hash = $1 FOR UPDATE", hash), &l); err != nil {
			return fmt.Errorf("sign-in link: %w", err)
		}
		// Used before expired, as for join tokens.
		if !l.UsedAt.IsZero() {
			return store.ErrTokenUsed
		}
		if !now.Before(l.ExpiresAt) {
			return store.ErrTokenExpired
		}
		if err := scanDoc(tx.QueryRow(ctx, "SELECT doc FROM principals WHERE id = $1", l.PrincipalID), &p); err != nil {
			return fmt.Errorf("principal %q of sign-in link: %w", l.PrincipalID, err)
		}
		l.UsedAt = now
		ldoc, err := encode(l)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE signin_links SET used_at = $2, doc = $3 WHERE hash = $1", l.Hash, now, ldoc); err != nil {
			return err
		}
		cred.PrincipalID = l.PrincipalID
		cdoc, err := encode(cred)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, "INSERT INTO credentials (hash, principal_id, doc) VALUES ($1, $2, $3) ON CONFLICT (hash) DO NOTHING", cred.Hash, cred.PrincipalID, cdoc)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("credential: %w", store.ErrExists)
		}
		return nil
	})
	if err != nil {
		return store.Principal{}, store.Credential{}, err
	}
	cred.PrincipalID = p.ID
	return p, cred, nil
}

// RevokeCredential implements store.Signer. Every coordinator resolves a
// token from the table on each request, so the revocation holds everywhere
// once this commits. A derived credential is of its parent's principal:
// that principal's row, locked for update, orders the revocation against
// a derivation in flight (addDerived).
func (s *Store) RevokeCredential(ctx context.Context, hash string) (int, error) {
	if !textOK(hash) {
		return 0, fmt.Errorf("credential: %w", store.ErrNotFound)
	}
	n := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var pid string
		err := tx.QueryRow(ctx, "SELECT principal_id FROM credentials WHERE hash = $1", hash).Scan(&pid)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("credential: %w", store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		var one int
		if err := tx.QueryRow(ctx, "SELECT 1 FROM principals WHERE id = $1 FOR UPDATE", pid).Scan(&one); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT doc FROM credentials WHERE principal_id = $1", pid)
		if err != nil {
			return err
		}
		cs, err := collectDocs[store.Credential](rows)
		if err != nil {
			return err
		}
		gone := store.Descendants(cs, hash)
		tag, err := tx.Exec(ctx, "DELETE FROM credentials WHERE hash = ANY($1)", append(gone, hash))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("credential: %w", store.ErrNotFound)
		}
		n = int(tag.RowsAffected()) - 1
		return nil
	})
	return n, err
}
