package bolt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/coordinator/store"
)

// bucketSigninLinks: link hash → store.SigninLink.
var bucketSigninLinks = []byte("signin_links")

func init() { markBuckets = append(markBuckets, bucketSigninLinks) }

// CreateSigninLink implements store.Signer.
func (s *Store) CreateSigninLink(ctx context.Context, l store.SigninLink) error {
	if l.Hash == "" {
		return errors.New("create sign-in link: empty hash")
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketPrincipals).Get([]byte(l.PrincipalID)) == nil {
			return fmt.Errorf("principal %q: %w", l.PrincipalID, store.ErrNotFound)
		}
		b := tx.Bucket(bucketSigninLinks)
		if b.Get([]byte(l.Hash)) != nil {
			return fmt.Errorf("sign-in link: %w", store.ErrExists)
		}
		return put(b, l.Hash, l)
	})
}

// RedeemSigninLink implements store.Signer.
func (s *Store) RedeemSigninLink(ctx context.Context, hash string, now time.Time, cred store.Credential) (store.Principal, store.Credential, error) {
	if cred.Hash == "" {
		return store.Principal{}, store.Credential{}, errors.New("redeem sign-in link: credential has an empty hash")
	}
	var p store.Principal
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		links, creds := tx.Bucket(bucketSigninLinks), tx.Bucket(bucketCreds)
		var l store.SigninLink
		if err := get(links, hash, &l); err != nil {
			return fmt.Errorf("sign-in link: %w", err)
		}
		// Used before expired, as for join tokens.
		if !l.UsedAt.IsZero() {
			return store.ErrTokenUsed
		}
		if !now.Before(l.ExpiresAt) {
			return store.ErrTokenExpired
		}
		if err := get(tx.Bucket(bucketPrincipals), l.PrincipalID, &p); err != nil {
			return fmt.Errorf("principal %q of sign-in link: %w", l.PrincipalID, err)
		}
		if creds.Get([]byte(cred.Hash)) != nil {
			return fmt.Errorf("credential: %w", store.ErrExists)
		}
		l.UsedAt = now
		if err := put(links, l.Hash, l); err != nil {
			return err
		}
		cred.PrincipalID = l.PrincipalID
		return put(creds, cred.Hash, cred)
	})
	if err != nil {
		return store.Principal{}, store.Credential{}, err
	}
	cred.PrincipalID = p.ID
	return p, cred, nil
}

// RevokeCredential implements store.Signer. A derived credential is of
// its parent's principal, so the cascade looks at that principal's only.
func (s *Store) RevokeCredential(ctx context.Context, hash string) (int, error) {
	n := 0
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketCreds)
		var c store.Credential
		if err := get(b, hash, &c); err != nil {
			return fmt.Errorf("credential: %w", err)
		}
		cs, err := credentialsOf(tx, c.PrincipalID)
		if err != nil {
			return err
		}
		gone := store.Descendants(cs, hash)
		for _, h := range append(gone, hash) {
			if err := b.Delete([]byte(h)); err != nil {
				return err
			}
		}
		n = len(gone)
		return nil
	})
	return n, err
}
