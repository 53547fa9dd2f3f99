package bolt

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/coordinator/store"
)

// bucketExternal: issuer NUL subject → principal id.
var bucketExternal = []byte("external_identities")

func init() { markBuckets = append(markBuckets, bucketExternal) }

func externalKey(id store.External) []byte { return []byte(id.Issuer + "\x00" + id.Subject) }

// SignInExternal implements store.Federator.
func (s *Store) SignInExternal(ctx context.Context, id store.External, newID, name string, roles map[string]string, now time.Time, cred store.Credential) (store.Principal, bool, error) {
	switch {
	case id.Issuer == "" || id.Subject == "":
		return store.Principal{}, false, errors.New("sign in external: empty issuer or subject")
	case cred.Hash == "":
		return store.Principal{}, false, errors.New("sign in external: credential has an empty hash")
	case newID == "":
		return store.Principal{}, false, errors.New("sign in external: empty principal id")
	}
	var (
		p       store.Principal
		created bool
	)
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		ext, principals, creds, tenants := tx.Bucket(bucketExternal), tx.Bucket(bucketPrincipals), tx.Bucket(bucketCreds), tx.Bucket(bucketTenants)
		if creds.Get([]byte(cred.Hash)) != nil {
			return fmt.Errorf("credential: %w", store.ErrExists)
		}
		if pid := ext.Get(externalKey(id)); pid != nil {
			if err := get(principals, string(pid), &p); err != nil {
				return fmt.Errorf("principal %q of %s: %w", pid, id.Issuer, err)
			}
		} else {
			if principals.Get([]byte(newID)) != nil {
				return fmt.Errorf("principal %q: %w", newID, store.ErrExists)
			}
			p = store.Principal{ID: newID, Kind: store.KindHuman, CreatedAt: now.UTC()}
			created = true
			if err := ext.Put(externalKey(id), []byte(newID)); err != nil {
				return err
			}
		}
		p.Name = name
		p.Roles = maps.Clone(roles)
		if p.Roles == nil {
			p.Roles = map[string]string{}
		}
		for t := range p.Roles {
			if tenants.Get([]byte(t)) == nil {
				if err := put(tenants, t, store.Tenant{ID: t, CreatedAt: now.UTC()}); err != nil {
					return err
				}
			}
		}
		if err := put(principals, p.ID, p); err != nil {
			return err
		}
		cred.PrincipalID = p.ID
		return put(creds, cred.Hash, cred)
	})
	if err != nil {
		return store.Principal{}, false, err
	}
	return p, created, nil
}
