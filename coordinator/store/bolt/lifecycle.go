package bolt

import (
	"context"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The lifecycle part of the store (store.Lifecycler). Principals,
// credentials and nodes are few (one per person, login or machine), so
// these scan their buckets instead of keeping more indexes in step.

// ListTenants implements store.Lifecycler.
func (s *Store) ListTenants(ctx context.Context) ([]store.Tenant, error) {
	var out []store.Tenant
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketTenants).ForEach(func(k, v []byte) error {
			var t store.Tenant
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("decode tenant %q: %w", k, err)
			}
			out = append(out, t)
			return nil
		})
	})
	return out, err
}

// ListPrincipals implements store.Lifecycler.
func (s *Store) ListPrincipals(ctx context.Context, tenant string) ([]store.Principal, error) {
	var out []store.Principal
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketPrincipals).ForEach(func(k, v []byte) error {
			var p store.Principal
			if err := json.Unmarshal(v, &p); err != nil {
				return fmt.Errorf("decode principal %q: %w", k, err)
			}
			if _, ok := p.Roles[tenant]; ok {
				out = append(out, p)
			}
			return nil
		})
	})
	return out, err
}

// ListCredentials implements store.Lifecycler.
func (s *Store) ListCredentials(ctx context.Context, principalID string) ([]store.Credential, error) {
	var out []store.Credential
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketPrincipals).Get([]byte(principalID)) == nil {
			return fmt.Errorf("principal %q: %w", principalID, store.ErrNotFound)
		}
		var err error
		out, err = credentialsOf(tx, principalID)
		return err
	})
	return out, err
}

func credentialsOf(tx *bbolt.Tx, principalID string) ([]store.Credential, error) {
	var out []store.Credential
	err := tx.Bucket(bucketCreds).ForEach(func(k, v []byte) error {
		var c store.Credential
		if err := json.Unmarshal(v, &c); err != nil {
			return fmt.Errorf("decode credential: %w", err)
		}
		if c.PrincipalID == principalID {
			out = append(out, c)
		}
		return nil
	})
	store.SortCredentials(out)
	return out, err
}

// CredentialByID implements store.Lifecycler.
func (s *Store) CredentialByID(ctx context.Context, id string) (store.Credential, error) {
	var out store.Credential
	found := false
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketCreds).ForEach(func(k, v []byte) error {
			var c store.Credential
			if err := json.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("decode credential: %w", err)
			}
			if !found && c.PublicID() == id {
				out, found = c, true
			}
			return nil
		})
	})
	if err != nil {
		return store.Credential{}, err
	}
	if !found {
		return store.Credential{}, fmt.Errorf("credential %q: %w", id, store.ErrNotFound)
	}
	return out, nil
}

// RevokePrincipal implements store.Lifecycler.
func (s *Store) RevokePrincipal(ctx context.Context, id, tenant string, audit apitypes.AuditEntry) (int, error) {
	n := 0
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketPrincipals)
		var p store.Principal
		if err := get(b, id, &p); err != nil {
			return fmt.Errorf("principal %q: %w", id, err)
		}
		if _, ok := p.Roles[tenant]; !ok {
			return fmt.Errorf("principal %q in tenant %q: %w", id, tenant, store.ErrNotFound)
		}
		if audit.Tenant != tenant {
			return fmt.Errorf("revoke principal %q: audit entry of tenant %q for tenant %q", id, audit.Tenant, tenant)
		}
		delete(p.Roles, tenant)
		creds, err := credentialsOf(tx, id)
		if err != nil {
			return err
		}
		for _, c := range creds {
			if len(p.Roles) == 0 || c.Tenant == tenant {
				if err := tx.Bucket(bucketCreds).Delete([]byte(c.Hash)); err != nil {
					return err
				}
				n++
			}
		}
		if err := put(b, id, p); err != nil {
			return err
		}
		_, err = appendAuditTx(tx, audit)
		return err
	})
	return n, err
}

// DeleteProfile implements store.Lifecycler.
func (s *Store) DeleteProfile(ctx context.Context, ref string, audit apitypes.AuditEntry) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		var p apitypes.Profile
		if err := get(tx.Bucket(bucketProfiles), ref, &p); err != nil {
			return fmt.Errorf("profile %q: %w", ref, err)
		}
		if audit.Tenant != p.Tenant {
			return fmt.Errorf("delete profile %q: audit entry of another tenant", ref)
		}
		if err := deleteNamed(tx.Bucket(bucketProfiles), tx.Bucket(bucketProfileNames), ref, p.Tenant, p.Name); err != nil {
			return err
		}
		_, err := appendAuditTx(tx, audit)
		return err
	})
}

// DeleteWorkspace implements store.Lifecycler.
func (s *Store) DeleteWorkspace(ctx context.Context, ref string, audit apitypes.AuditEntry) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		var w apitypes.Workspace
		if err := get(tx.Bucket(bucketWorkspaces), ref, &w); err != nil {
			return fmt.Errorf("workspace %q: %w", ref, err)
		}
		if audit.Tenant != w.Tenant {
			return fmt.Errorf("delete workspace %q: audit entry of another tenant", ref)
		}
		if err := deleteWorkspaceTx(tx, w); err != nil {
			return err
		}
		_, err := appendAuditTx(tx, audit)
		return err
	})
}

func deleteWorkspaceTx(tx *bbolt.Tx, w apitypes.Workspace) error {
	if err := deleteNamed(tx.Bucket(bucketWorkspaces), tx.Bucket(bucketWorkspaceNames), w.Ref, w.Tenant, w.Name); err != nil {
		return err
	}
	return tx.Bucket(bucketWorkspaceSettings).Delete([]byte(w.Ref))
}

func deleteNamed(records, names *bbolt.Bucket, ref, tenant, name string) error {
	if err := records.Delete([]byte(ref)); err != nil {
		return err
	}
	return names.Delete(append(tenantPrefix(tenant), name...))
}

// nodeRecords returns the profiles and workspaces registered on node.
func nodeRecords(tx *bbolt.Tx, node string) ([]apitypes.Profile, []apitypes.Workspace, error) {
	var ps []apitypes.Profile
	var ws []apitypes.Workspace
	err := tx.Bucket(bucketProfiles).ForEach(func(k, v []byte) error {
		var p apitypes.Profile
		if err := json.Unmarshal(v, &p); err != nil {
			return fmt.Errorf("decode profile %q: %w", k, err)
		}
		if p.NodeID == node {
			ps = append(ps, p)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	err = tx.Bucket(bucketWorkspaces).ForEach(func(k, v []byte) error {
		var w apitypes.Workspace
		if err := json.Unmarshal(v, &w); err != nil {
			return fmt.Errorf("decode workspace %q: %w", k, err)
		}
		if w.NodeID == node {
			ws = append(ws, w)
		}
		return nil
	})
	return ps, ws, err
}

// ForgetNode implements store.Lifecycler.
func (s *Store) ForgetNode(ctx context.Context, id string, audit apitypes.AuditEntry) (store.NodeRecords, error) {
	var out store.NodeRecords
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		var n store.Node
		if err := get(tx.Bucket(bucketNodes), id, &n); err != nil {
			return fmt.Errorf("node %q: %w", id, err)
		}
		if n.RevokedAt.IsZero() {
			return fmt.Errorf("node %q is not revoked: %w", id, store.ErrConflict)
		}
		if audit.Tenant != n.Tenant {
			return fmt.Errorf("forget node %q: audit entry of another tenant", id)
		}
		ps, ws, err := nodeRecords(tx, id)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if err := deleteNamed(tx.Bucket(bucketProfiles), tx.Bucket(bucketProfileNames), p.Ref, p.Tenant, p.Name); err != nil {
				return err
			}
		}
		for _, w := range ws {
			if err := deleteWorkspaceTx(tx, w); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketNodes).Delete([]byte(id)); err != nil {
			return err
		}
		out = store.NodeRecords{Profiles: len(ps), Workspaces: len(ws)}
		_, err = appendAuditTx(tx, audit)
		return err
	})
	return out, err
}

// ReassignNode implements store.Lifecycler.
func (s *Store) ReassignNode(ctx context.Context, from, to string, audit apitypes.AuditEntry) (store.NodeRecords, error) {
	var out store.NodeRecords
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		var nf, nt store.Node
		if err := get(tx.Bucket(bucketNodes), from, &nf); err != nil {
			return fmt.Errorf("node %q: %w", from, err)
		}
		if err := get(tx.Bucket(bucketNodes), to, &nt); err != nil {
			return fmt.Errorf("node %q: %w", to, err)
		}
		if nf.Tenant != nt.Tenant || audit.Tenant != nf.Tenant {
			return fmt.Errorf("reassign node %q to %q: another tenant: %w", from, to, store.ErrConflict)
		}
		ps, ws, err := nodeRecords(tx, from)
		if err != nil {
			return err
		}
		for _, p := range ps {
			p.NodeID = to
			if err := put(tx.Bucket(bucketProfiles), p.Ref, p); err != nil {
				return err
			}
		}
		for _, w := range ws {
			w.NodeID = to
			if err := put(tx.Bucket(bucketWorkspaces), w.Ref, w); err != nil {
				return err
			}
		}
		runs := tx.Bucket(bucketRuns)
		var moved []apitypes.Run
		err = runs.ForEach(func(k, v []byte) error {
			var r apitypes.Run
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("decode run %q: %w", k, err)
			}
			if r.NodeID == from {
				r.NodeID = to
				moved = append(moved, r)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range moved {
			if err := put(runs, r.RunRef, r); err != nil {
				return err
			}
		}
		out = store.NodeRecords{Profiles: len(ps), Workspaces: len(ws), Runs: len(moved)}
		_, err = appendAuditTx(tx, audit)
		return err
	})
	return out, err
}
