package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/olivares-dev/olivares/coordinator/store"
)

// SignInExternal implements store.Federator. Two coordinators signing in
// the same new person at once both try to link them; the primary key lets
// one win, and the other's transaction fails and writes nothing.
func (s *Store) SignInExternal(ctx context.Context, id store.External, newID, name string, roles map[string]string, now time.Time, cred store.Credential) (store.Principal, bool, error) {
	switch {
	case id.Issuer == "" || id.Subject == "":
		return store.Principal{}, false, errors.New("sign in external: empty issuer or subject")
	case cred.Hash == "":
		return store.Principal{}, false, errors.New("sign in external: credential has an empty hash")
	case newID == "":
		return store.Principal{}, false, errors.New("sign in external: empty principal id")
	}
	if err := checkText("sign in external", id.Issuer, id.Subject, newID, name, cred.Hash); err != nil {
		return store.Principal{}, false, err
	}
	var (
		p       store.Principal
		created bool
	)
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var pid string
		err := tx.QueryRow(ctx, "SELECT principal_id FROM external_identities WHERE issuer = $1 AND subject = $2 FOR UPDATE", id.Issuer, id.Subject).Scan(&pid)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			p = store.Principal{ID: newID, Kind: store.KindHuman, CreatedAt: now.UTC()}
			created = true
		case err != nil:
			return err
		default:
			if err := scanDoc(tx.QueryRow(ctx, "SELECT doc FROM principals WHERE id = $1 FOR UPDATE", pid), &p); err != nil {
				return fmt.Errorf("principal %q of %s: %w", pid, id.Issuer, err)
			}
		}
		p.Name = name
		p.Roles = maps.Clone(roles)
		if p.Roles == nil {
			p.Roles = map[string]string{}
		}
		for t := range p.Roles {
			if err := checkText("sign in external", t); err != nil {
				return err
			}
			tdoc, err := encode(store.Tenant{ID: t, CreatedAt: now.UTC()})
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "INSERT INTO tenants (id, doc) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING", t, tdoc); err != nil {
				return err
			}
		}
		pdoc, err := encode(p)
		if err != nil {
			return err
		}
		if created {
			if _, err := tx.Exec(ctx, "INSERT INTO principals (id, doc) VALUES ($1, $2)", p.ID, pdoc); err != nil {
				if _, ok := uniqueViolation(err); ok {
					return fmt.Errorf("principal %q: %w", p.ID, store.ErrExists)
				}
				return err
			}
			if _, err := tx.Exec(ctx, "INSERT INTO external_identities (issuer, subject, principal_id) VALUES ($1, $2, $3)", id.Issuer, id.Subject, p.ID); err != nil {
				return err
			}
		} else if _, err := tx.Exec(ctx, "UPDATE principals SET doc = $2 WHERE id = $1", p.ID, pdoc); err != nil {
			return err
		}
		cred.PrincipalID = p.ID
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
		return store.Principal{}, false, err
	}
	return p, created, nil
}
