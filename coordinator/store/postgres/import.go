package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

var _ store.Importer = (*Store)(nil)

// countTables maps each record kind to its table.
var countTables = map[string]string{
	store.RecTenants: "tenants", store.RecPrincipals: "principals", store.RecCredentials: "credentials",
	store.RecSigninLinks: "signin_links",
	store.RecJoinTokens:  "join_tokens", store.RecNodes: "nodes", store.RecProfiles: "profiles",
	store.RecWorkspaces: "workspaces", store.RecWorkspaceSettings: "workspace_settings", store.RecSecrets: "secrets",
	store.RecRuns: "runs", store.RecRunTombstones: "run_tombstones", store.RecRunMeta: "run_meta",
	store.RecMarks: "marks", store.RecAudit: "audit", store.RecAuditWindows: "audit_windows",
	store.RecUsage: "usage_turns",
}

// Counts implements store.Counter.
func (s *Store) Counts(ctx context.Context) (map[string]int, error) {
	db, err := s.q()
	if err != nil {
		return nil, err
	}
	kinds := store.RecordKinds
	sel := make([]string, len(kinds))
	for i, k := range kinds {
		sel[i] = "(SELECT count(*) FROM " + countTables[k] + ")"
	}
	vals := make([]int64, len(kinds))
	dest := make([]any, len(kinds))
	for i := range vals {
		dest[i] = &vals[i]
	}
	if err := db.QueryRow(ctx, "SELECT "+strings.Join(sel, ", ")).Scan(dest...); err != nil {
		return nil, fmt.Errorf("count records: %w", closedErr(s, err))
	}
	out := make(map[string]int, len(kinds))
	for i, k := range kinds {
		out[k] = int(vals[i])
	}
	return out, nil
}

// upsert returns the statement that writes a record of one kind unless it
// is stored as it is (the record's JSON compared as text: the same value
// encodes to the same bytes), and its arguments.
func upsertRecord(r store.Record) (string, []any, error) {
	doc := func(v any) (json.RawMessage, error) { return encode(v) }
	// unless: write only a changed record.
	const unless = " WHERE t.doc::text IS DISTINCT FROM EXCLUDED.doc::text"
	switch v := r.Value.(type) {
	case store.Tenant:
		d, err := doc(v)
		return `INSERT INTO tenants AS t (id, doc) VALUES ($1, $2)
			ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc` + unless, []any{v.ID, d}, err
	case store.Principal:
		d, err := doc(v)
		return `INSERT INTO principals AS t (id, doc) VALUES ($1, $2)
			ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc` + unless, []any{v.ID, d}, err
	case store.Credential:
		d, err := doc(v)
		return `INSERT INTO credentials AS t (hash, principal_id, doc) VALUES ($1, $2, $3)
			ON CONFLICT (hash) DO UPDATE SET principal_id = EXCLUDED.principal_id, doc = EXCLUDED.doc` + unless,
			[]any{v.Hash, v.PrincipalID, d}, err
	case store.SigninLink:
		d, err := doc(v)
		return `INSERT INTO signin_links AS t (hash, principal_id, expires_at, used_at, doc) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (hash) DO UPDATE SET principal_id = EXCLUDED.principal_id, expires_at = EXCLUDED.expires_at,
			used_at = EXCLUDED.used_at, doc = EXCLUDED.doc` + unless,
			[]any{v.Hash, v.PrincipalID, v.ExpiresAt, nullTime(v.UsedAt), d}, err
	case store.JoinToken:
		d, err := doc(v)
		return `INSERT INTO join_tokens AS t (hash, tenant, expires_at, used_at, doc) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (hash) DO UPDATE SET tenant = EXCLUDED.tenant, expires_at = EXCLUDED.expires_at,
			used_at = EXCLUDED.used_at, doc = EXCLUDED.doc` + unless,
			[]any{v.Hash, v.Tenant, v.ExpiresAt, nullTime(v.UsedAt), d}, err
	case store.Node:
		d, err := doc(v)
		return `INSERT INTO nodes AS t (id, tenant, revoked_at, doc) VALUES ($1, $2, $3, $4)
			ON CONFLICT (id) DO UPDATE SET tenant = EXCLUDED.tenant, revoked_at = EXCLUDED.revoked_at, doc = EXCLUDED.doc` + unless,
			[]any{v.ID, v.Tenant, nullTime(v.RevokedAt), d}, err
	case apitypes.Profile:
		return upsertNamed("profiles", v.Ref, v.Tenant, v.Name, v)
	case apitypes.Workspace:
		return upsertNamed("workspaces", v.Ref, v.Tenant, v.Name, v)
	case store.Secret:
		return upsertNamed("secrets", v.Ref, v.Tenant, v.Name, v)
	case store.WorkspaceSettings:
		d, err := doc(v)
		return `INSERT INTO workspace_settings AS t (ref, doc) VALUES ($1, $2)
			ON CONFLICT (ref) DO UPDATE SET doc = EXCLUDED.doc` + unless, []any{v.Ref, d}, err
	case apitypes.Run:
		d, err := doc(v)
		return `INSERT INTO runs AS t (run_ref, tenant, node_id, rev, created_at, state, live_ref, claude_session_id, doc)
			VALUES ($1, $2, $3, $4::numeric, $5, $6, $7, $8, $9)
			ON CONFLICT (run_ref) DO UPDATE SET tenant = EXCLUDED.tenant, node_id = EXCLUDED.node_id, rev = EXCLUDED.rev,
			created_at = EXCLUDED.created_at, state = EXCLUDED.state, live_ref = EXCLUDED.live_ref,
			claude_session_id = EXCLUDED.claude_session_id, doc = EXCLUDED.doc` + unless,
			[]any{v.RunRef, v.Tenant, v.NodeID, revString(v.Rev), v.CreatedAt, v.State, v.LiveRef, v.ClaudeSessionID, d}, err
	case store.Tombstone:
		return `INSERT INTO run_tombstones AS t (run_ref, deleted_at) VALUES ($1, $2)
			ON CONFLICT (run_ref) DO UPDATE SET deleted_at = EXCLUDED.deleted_at
			WHERE t.deleted_at IS DISTINCT FROM EXCLUDED.deleted_at`, []any{v.RunRef, v.DeletedAt}, nil
	case store.RunMeta:
		d, err := doc(v)
		return `INSERT INTO run_meta AS t (run_ref, tenant, doc) VALUES ($1, $2, $3)
			ON CONFLICT (run_ref) DO UPDATE SET tenant = EXCLUDED.tenant, doc = EXCLUDED.doc` + unless,
			[]any{v.RunRef, v.Tenant, d}, err
	case store.MarkRecord:
		d, err := doc(v.Marks)
		return `INSERT INTO marks AS t (tenant, owner, run_ref, pinned_at, doc) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (tenant, owner, run_ref) DO UPDATE SET pinned_at = EXCLUDED.pinned_at, doc = EXCLUDED.doc` + unless,
			[]any{v.Key.Tenant, v.Key.Owner, v.Key.RunRef, v.Marks.PinnedAt, d}, err
	case apitypes.UsageTurn:
		// A row is stored once (R-USE-6): a second copy writes nothing.
		d, err := doc(v)
		return `INSERT INTO usage_turns (run_ref, seq, tenant, profile_ref, at, doc) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (run_ref, seq) DO NOTHING`, []any{v.RunRef, int64(v.Seq), v.Tenant, v.ProfileRef, v.At.UTC(), d}, err
	case store.AuditWindow:
		return `INSERT INTO audit_windows AS t (tenant, event, run_ref, credential_id, last_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (tenant, event, run_ref, credential_id) DO UPDATE SET last_at = EXCLUDED.last_at
			WHERE t.last_at IS DISTINCT FROM EXCLUDED.last_at`,
			[]any{v.Tenant, v.Event, v.RunRef, v.CredentialID, v.LastAt.UTC()}, nil
	}
	return "", nil, fmt.Errorf("import: record of kind %q holds a %T", r.Kind, r.Value)
}

func upsertNamed(table, ref, tenant, name string, v any) (string, []any, error) {
	d, err := encode(v)
	return `INSERT INTO ` + table + ` AS t (ref, tenant, name, doc) VALUES ($1, $2, $3, $4)
		ON CONFLICT (ref) DO UPDATE SET tenant = EXCLUDED.tenant, name = EXCLUDED.name, doc = EXCLUDED.doc
		WHERE t.doc::text IS DISTINCT FROM EXCLUDED.doc::text`, []any{ref, tenant, name, d}, err
}

// Import implements store.Importer, in one transaction.
func (s *Store) Import(ctx context.Context, recs []store.Record) (int, error) {
	written := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		var audit []apitypes.AuditEntry
		for _, r := range recs {
			if e, ok := r.Value.(apitypes.AuditEntry); ok {
				audit = append(audit, e)
				continue
			}
			sql, args, err := upsertRecord(r)
			if err != nil {
				return err
			}
			for _, a := range args {
				if s, ok := a.(string); ok && !textOK(s) {
					return checkText("import "+r.Kind, s)
				}
			}
			b.Queue(sql, args...).Exec(func(tag pgconn.CommandTag) error {
				written += int(tag.RowsAffected())
				return nil
			})
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("import: %w", err)
		}
		n, err := importAudit(ctx, tx, audit)
		written += n
		return err
	})
	return written, err
}

// importAudit inserts sealed entries as they are. An entry whose (tenant,
// seq) is taken must be the same entry (same hash); the chain heads then
// move to the last entry of each tenant.
func importAudit(ctx context.Context, tx pgx.Tx, es []apitypes.AuditEntry) (int, error) {
	if len(es) == 0 {
		return 0, nil
	}
	written := 0
	b := &pgx.Batch{}
	tenants := map[string]bool{}
	for _, e := range es {
		if err := checkAudit(e); err != nil {
			return 0, fmt.Errorf("import: %w", err)
		}
		if e.Seq == 0 || e.Seq > math.MaxInt64 || e.Hash == "" {
			return 0, fmt.Errorf("import: audit entry of tenant %q with seq %d and hash %q is not sealed", e.Tenant, e.Seq, e.Hash)
		}
		doc, err := encode(e)
		if err != nil {
			return 0, err
		}
		tenants[e.Tenant] = true
		b.Queue(`INSERT INTO audit (tenant, seq, at, event, run_ref, credential_id, principal_id, doc)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (tenant, seq) DO NOTHING`,
			e.Tenant, int64(e.Seq), e.At, e.Event, e.Target.RunRef, e.Actor.CredentialID, e.Actor.PrincipalID, doc).
			Exec(func(tag pgconn.CommandTag) error {
				written += int(tag.RowsAffected())
				return nil
			})
		b.Queue("SELECT doc->>'hash' FROM audit WHERE tenant = $1 AND seq = $2", e.Tenant, int64(e.Seq)).
			QueryRow(func(row pgx.Row) error {
				var h string
				if err := row.Scan(&h); err != nil {
					return err
				}
				if h != e.Hash {
					return fmt.Errorf("%w: tenant %q holds another entry at seq %d (hash %s, the source's %s); migrate into an empty database",
						store.ErrDiverged, e.Tenant, e.Seq, h, e.Hash)
				}
				return nil
			})
	}
	for tenant := range tenants {
		b.Queue(`INSERT INTO audit_heads AS h (tenant, seq, doc)
			SELECT tenant, seq, doc FROM audit WHERE tenant = $1 ORDER BY seq DESC LIMIT 1
			ON CONFLICT (tenant) DO UPDATE SET seq = EXCLUDED.seq, doc = EXCLUDED.doc WHERE h.seq <> EXCLUDED.seq`, tenant)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("import audit: %w", err)
	}
	return written, nil
}
