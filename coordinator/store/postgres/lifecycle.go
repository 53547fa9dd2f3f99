package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The lifecycle part of the store (store.Lifecycler). Every removal and
// move commits with its audit entry, under the row locks of what it
// changes.

// ListTenants implements store.Lifecycler.
func (s *Store) ListTenants(ctx context.Context) ([]store.Tenant, error) {
	db, err := s.q()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, "SELECT doc FROM tenants ORDER BY id")
	if err != nil {
		return nil, closedErr(s, err)
	}
	return collectDocs[store.Tenant](rows)
}

// ListPrincipals implements store.Lifecycler.
func (s *Store) ListPrincipals(ctx context.Context, tenant string) ([]store.Principal, error) {
	if !textOK(tenant) {
		return nil, nil
	}
	db, err := s.q()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, "SELECT doc FROM principals WHERE (doc->'roles'->>$1) IS NOT NULL ORDER BY id", tenant)
	if err != nil {
		return nil, closedErr(s, err)
	}
	return collectDocs[store.Principal](rows)
}

// ListCredentials implements store.Lifecycler.
func (s *Store) ListCredentials(ctx context.Context, principalID string) ([]store.Credential, error) {
	if !textOK(principalID) {
		return nil, fmt.Errorf("principal %q: %w", principalID, store.ErrNotFound)
	}
	var out []store.Credential
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var one int
		if err := tx.QueryRow(ctx, "SELECT 1 FROM principals WHERE id = $1", principalID).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("principal %q: %w", principalID, store.ErrNotFound)
			}
			return err
		}
		rows, err := tx.Query(ctx, "SELECT doc FROM credentials WHERE principal_id = $1", principalID)
		if err != nil {
			return err
		}
		out, err = collectDocs[store.Credential](rows)
		return err
	})
	store.SortCredentials(out)
	return out, err
}

// CredentialByID implements store.Lifecycler. Credentials written before
// they had ids have one derived from their hash, which no column holds:
// the scan compares PublicID.
func (s *Store) CredentialByID(ctx context.Context, id string) (store.Credential, error) {
	db, err := s.q()
	if err != nil {
		return store.Credential{}, err
	}
	if !textOK(id) {
		return store.Credential{}, fmt.Errorf("credential %q: %w", id, store.ErrNotFound)
	}
	var c store.Credential
	err = scanDoc(db.QueryRow(ctx, "SELECT doc FROM credentials WHERE doc->>'id' = $1", id), &c)
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return store.Credential{}, closedErr(s, err)
	}
	rows, err := db.Query(ctx, "SELECT doc FROM credentials WHERE coalesce(doc->>'id', '') = ''")
	if err != nil {
		return store.Credential{}, closedErr(s, err)
	}
	all, err := collectDocs[store.Credential](rows)
	if err != nil {
		return store.Credential{}, err
	}
	for _, c := range all {
		if c.PublicID() == id {
			return c, nil
		}
	}
	return store.Credential{}, fmt.Errorf("credential %q: %w", id, store.ErrNotFound)
}

// RevokePrincipal implements store.Lifecycler.
func (s *Store) RevokePrincipal(ctx context.Context, id, tenant string, audit apitypes.AuditEntry) (int, error) {
	if !textOK(id, tenant) {
		return 0, fmt.Errorf("principal %q: %w", id, store.ErrNotFound)
	}
	if audit.Tenant != tenant {
		return 0, fmt.Errorf("revoke principal %q: audit entry of tenant %q for tenant %q", id, audit.Tenant, tenant)
	}
	n := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var p store.Principal
		if err := scanDoc(tx.QueryRow(ctx, "SELECT doc FROM principals WHERE id = $1 FOR UPDATE", id), &p); err != nil {
			return fmt.Errorf("principal %q: %w", id, err)
		}
		if _, ok := p.Roles[tenant]; !ok {
			return fmt.Errorf("principal %q in tenant %q: %w", id, tenant, store.ErrNotFound)
		}
		delete(p.Roles, tenant)
		// With no role left every credential goes; otherwise those
		// issued for this tenant (and so derived from one), which would
		// come back to life with a role here again.
		tag, err := tx.Exec(ctx, `DELETE FROM credentials WHERE principal_id = $1 AND ($2 OR doc->>'tenant' = $3)`, id, len(p.Roles) == 0, tenant)
		if err != nil {
			return err
		}
		n = int(tag.RowsAffected())
		doc, err := encode(p)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE principals SET doc = $2 WHERE id = $1", id, doc); err != nil {
			return err
		}
		_, err = appendAuditTx(ctx, tx, audit)
		return err
	})
	return n, err
}

// deleteNamedRow removes one profile or workspace row of audit's tenant.
func (s *Store) deleteNamedRow(ctx context.Context, table, what, ref string, audit apitypes.AuditEntry) error {
	if !textOK(ref) {
		return fmt.Errorf("%s %q: %w", what, ref, store.ErrNotFound)
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		var tenant string
		err := tx.QueryRow(ctx, "SELECT tenant FROM "+table+" WHERE ref = $1 FOR UPDATE", ref).Scan(&tenant)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%s %q: %w", what, ref, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if tenant != audit.Tenant {
			return fmt.Errorf("delete %s %q: audit entry of another tenant", what, ref)
		}
		// workspace_settings rows go with their workspace (ON DELETE CASCADE).
		if _, err := tx.Exec(ctx, "DELETE FROM "+table+" WHERE ref = $1", ref); err != nil {
			return err
		}
		_, err = appendAuditTx(ctx, tx, audit)
		return err
	})
}

// DeleteProfile implements store.Lifecycler.
func (s *Store) DeleteProfile(ctx context.Context, ref string, audit apitypes.AuditEntry) error {
	return s.deleteNamedRow(ctx, "profiles", "profile", ref, audit)
}

// DeleteWorkspace implements store.Lifecycler.
func (s *Store) DeleteWorkspace(ctx context.Context, ref string, audit apitypes.AuditEntry) error {
	return s.deleteNamedRow(ctx, "workspaces", "workspace", ref, audit)
}

// lockNode locks a node row for the rest of tx.
func lockNode(ctx context.Context, tx pgx.Tx, id string) (store.Node, error) {
	var n store.Node
	if !textOK(id) {
		return n, fmt.Errorf("node %q: %w", id, store.ErrNotFound)
	}
	if err := scanDoc(tx.QueryRow(ctx, "SELECT doc FROM nodes WHERE id = $1 FOR UPDATE", id), &n); err != nil {
		return n, fmt.Errorf("node %q: %w", id, err)
	}
	return n, nil
}

// ForgetNode implements store.Lifecycler.
func (s *Store) ForgetNode(ctx context.Context, id string, audit apitypes.AuditEntry) (store.NodeRecords, error) {
	var out store.NodeRecords
	err := s.tx(ctx, func(tx pgx.Tx) error {
		n, err := lockNode(ctx, tx, id)
		if err != nil {
			return err
		}
		if n.RevokedAt.IsZero() {
			return fmt.Errorf("node %q is not revoked: %w", id, store.ErrConflict)
		}
		if audit.Tenant != n.Tenant {
			return fmt.Errorf("forget node %q: audit entry of another tenant", id)
		}
		tp, err := tx.Exec(ctx, "DELETE FROM profiles WHERE doc->>'node_id' = $1", id)
		if err != nil {
			return err
		}
		tw, err := tx.Exec(ctx, "DELETE FROM workspaces WHERE doc->>'node_id' = $1", id)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM nodes WHERE id = $1", id); err != nil {
			return err
		}
		out = store.NodeRecords{Profiles: int(tp.RowsAffected()), Workspaces: int(tw.RowsAffected())}
		_, err = appendAuditTx(ctx, tx, audit)
		return err
	})
	return out, err
}

// ReassignNode implements store.Lifecycler.
func (s *Store) ReassignNode(ctx context.Context, from, to string, audit apitypes.AuditEntry) (store.NodeRecords, error) {
	var out store.NodeRecords
	err := s.tx(ctx, func(tx pgx.Tx) error {
		nf, err := lockNode(ctx, tx, from)
		if err != nil {
			return err
		}
		nt, err := lockNode(ctx, tx, to)
		if err != nil {
			return err
		}
		if nf.Tenant != nt.Tenant || audit.Tenant != nf.Tenant {
			return fmt.Errorf("reassign node %q to %q: another tenant: %w", from, to, store.ErrConflict)
		}
		move := func(table, key string, set func(doc []byte) ([]byte, error), extra string) (int, error) {
			rows, err := tx.Query(ctx, "SELECT "+key+", doc FROM "+table+" WHERE "+extra+" FOR UPDATE", from)
			if err != nil {
				return 0, err
			}
			type row struct {
				key string
				doc []byte
			}
			var rs []row
			for rows.Next() {
				var r row
				if err := rows.Scan(&r.key, &r.doc); err != nil {
					rows.Close()
					return 0, err
				}
				rs = append(rs, r)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return 0, err
			}
			for _, r := range rs {
				doc, err := set(r.doc)
				if err != nil {
					return 0, err
				}
				q := "UPDATE " + table + " SET doc = $2 WHERE " + key + " = $1"
				if table == "runs" {
					q = "UPDATE runs SET doc = $2, node_id = $3 WHERE run_ref = $1"
					if _, err := tx.Exec(ctx, q, r.key, doc, to); err != nil {
						return 0, err
					}
					continue
				}
				if _, err := tx.Exec(ctx, q, r.key, doc); err != nil {
					return 0, err
				}
			}
			return len(rs), nil
		}
		var np, nw, nr int
		if np, err = move("profiles", "ref", setNode[apitypes.Profile](to, func(p *apitypes.Profile, n string) { p.NodeID = n }), "doc->>'node_id' = $1"); err != nil {
			return err
		}
		if nw, err = move("workspaces", "ref", setNode[apitypes.Workspace](to, func(w *apitypes.Workspace, n string) { w.NodeID = n }), "doc->>'node_id' = $1"); err != nil {
			return err
		}
		if nr, err = move("runs", "run_ref", setNode[apitypes.Run](to, func(r *apitypes.Run, n string) { r.NodeID = n }), "node_id = $1"); err != nil {
			return err
		}
		out = store.NodeRecords{Profiles: np, Workspaces: nw, Runs: nr}
		_, err = appendAuditTx(ctx, tx, audit)
		return err
	})
	return out, err
}

// setNode returns a rewrite of a stored record's JSON with its node set.
func setNode[T any](node string, set func(*T, string)) func([]byte) ([]byte, error) {
	return func(doc []byte) ([]byte, error) {
		var v T
		if err := decode(doc, &v); err != nil {
			return nil, err
		}
		set(&v, node)
		return encode(v)
	}
}
