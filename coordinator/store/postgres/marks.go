package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/auditchain"
)

// Lock order, the same in every transaction so that none waits in a
// circle: first the record's own row (runs, workspaces) or the owner's
// marks lock, then the tenant's audit head.

// defaultAuditLimit is the page size of an AuditQuery whose Limit is zero.
const defaultAuditLimit = 100

// lockRun locks the run's index row in mode and returns its tenant;
// ErrNotFound if it is not indexed (or, with tenant set, indexed under
// another tenant).
func lockRun(ctx context.Context, tx pgx.Tx, ref, tenant, mode string) (string, error) {
	if !textOK(ref) {
		return "", fmt.Errorf("run %q: %w", ref, store.ErrNotFound)
	}
	var got string
	err := tx.QueryRow(ctx, "SELECT tenant FROM runs WHERE run_ref = $1 FOR "+mode, ref).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && tenant != "" && got != tenant) {
		return "", fmt.Errorf("run %q: %w", ref, store.ErrNotFound)
	}
	return got, err
}

func getMeta(ctx context.Context, tx pgx.Tx, ref string) (store.RunMeta, error) {
	var m store.RunMeta
	err := scanDoc(tx.QueryRow(ctx, "SELECT doc FROM run_meta WHERE run_ref = $1", ref), &m)
	if errors.Is(err, store.ErrNotFound) {
		return store.RunMeta{}, nil
	}
	return m, err
}

// putMeta stores m and returns what a later read returns.
func putMeta(ctx context.Context, tx pgx.Tx, m store.RunMeta) (store.RunMeta, error) {
	doc, err := encode(m)
	if err != nil {
		return m, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO run_meta (run_ref, tenant, doc) VALUES ($1, $2, $3)
		ON CONFLICT (run_ref) DO UPDATE SET tenant = EXCLUDED.tenant, doc = EXCLUDED.doc`, m.RunRef, m.Tenant, doc); err != nil {
		return m, err
	}
	var out store.RunMeta
	return out, decode(doc, &out)
}

// UpdateMarks implements store.Marker. The owner's marks are serialised by
// an advisory lock (pin eviction reads all of them), and the run's row is
// share-locked so that a release or delete waits for the mark or finds it.
func (s *Store) UpdateMarks(ctx context.Context, key store.MarkKey, fn func(*store.Marks)) (store.Marks, error) {
	if key.Tenant == "" || key.Owner == "" || key.RunRef == "" {
		return store.Marks{}, fmt.Errorf("update marks: empty tenant, owner or run (%+v)", key)
	}
	if !textOK(key.Tenant, key.Owner, key.RunRef) {
		return store.Marks{}, fmt.Errorf("run %q: %w", key.RunRef, store.ErrNotFound)
	}
	var out store.Marks
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey("marks", key.Tenant, key.Owner)); err != nil {
			return err
		}
		if _, err := lockRun(ctx, tx, key.RunRef, key.Tenant, "KEY SHARE"); err != nil {
			return err
		}
		meta, err := getMeta(ctx, tx, key.RunRef)
		if err != nil {
			return err
		}
		if meta.ReleasedAt != nil {
			return fmt.Errorf("run %q: %w", key.RunRef, store.ErrReleased)
		}
		var old store.Marks
		err = scanDoc(tx.QueryRow(ctx, "SELECT doc FROM marks WHERE tenant = $1 AND owner = $2 AND run_ref = $3", key.Tenant, key.Owner, key.RunRef), &old)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		m := old
		m.RunRef = key.RunRef
		fn(&m)
		m.RunRef = key.RunRef
		if err := putMarks(ctx, tx, key, m); err != nil {
			return err
		}
		if m.PinnedAt != nil {
			if err := evictPins(ctx, tx, key); err != nil {
				return err
			}
		}
		out = m
		return nil
	})
	return out, err
}

// putMarks stores m, or removes the row when m marks nothing.
func putMarks(ctx context.Context, tx pgx.Tx, key store.MarkKey, m store.Marks) error {
	if m.Empty() {
		_, err := tx.Exec(ctx, "DELETE FROM marks WHERE tenant = $1 AND owner = $2 AND run_ref = $3", key.Tenant, key.Owner, key.RunRef)
		return err
	}
	doc, err := encode(m)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO marks (tenant, owner, run_ref, pinned_at, doc) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (tenant, owner, run_ref) DO UPDATE SET pinned_at = EXCLUDED.pinned_at, doc = EXCLUDED.doc`,
		key.Tenant, key.Owner, key.RunRef, m.PinnedAt, doc)
	return err
}

// evictPins drops the owner's oldest pins beyond MaxPins (R-PIN-3); the pin
// just written is never the one dropped.
func evictPins(ctx context.Context, tx pgx.Tx, key store.MarkKey) error {
	rows, err := tx.Query(ctx, `SELECT run_ref, doc FROM marks WHERE tenant = $1 AND owner = $2 AND pinned_at IS NOT NULL
		ORDER BY pinned_at, run_ref`, key.Tenant, key.Owner)
	if err != nil {
		return err
	}
	type pinned struct {
		ref string
		m   store.Marks
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (pinned, error) {
		var (
			p   pinned
			doc []byte
		)
		if err := row.Scan(&p.ref, &doc); err != nil {
			return p, err
		}
		return p, decode(doc, &p.m)
	})
	if err != nil {
		return err
	}
	excess := len(all) - store.MaxPins
	for _, p := range all {
		if excess <= 0 {
			break
		}
		if p.ref == key.RunRef {
			continue
		}
		excess--
		m := p.m
		m.PinnedAt = nil
		if err := putMarks(ctx, tx, store.MarkKey{Tenant: key.Tenant, Owner: key.Owner, RunRef: p.ref}, m); err != nil {
			return err
		}
	}
	return nil
}

// GetMarks implements store.Marker.
func (s *Store) GetMarks(ctx context.Context, tenant, owner string, refs []string) (map[string]store.Marks, error) {
	out := make(map[string]store.Marks, len(refs))
	db, err := s.q()
	if err != nil {
		return nil, err
	}
	if !textOK(tenant, owner) {
		return out, nil
	}
	rows, err := db.Query(ctx, "SELECT run_ref, doc FROM marks WHERE tenant = $1 AND owner = $2 AND run_ref = ANY($3)", tenant, owner, storable(refs))
	if err != nil {
		return nil, closedErr(s, err)
	}
	return out, collectKeyed(rows, out)
}

// storable drops the values no text column holds (they match nothing).
func storable(refs []string) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		if textOK(r) {
			out = append(out, r)
		}
	}
	return out
}

// collectKeyed decodes rows of (key, doc) into out.
func collectKeyed[T any](rows pgx.Rows, out map[string]T) error {
	defer rows.Close()
	for rows.Next() {
		var (
			k   string
			doc []byte
			v   T
		)
		if err := rows.Scan(&k, &doc); err != nil {
			return err
		}
		if err := decode(doc, &v); err != nil {
			return err
		}
		out[k] = v
	}
	return rows.Err()
}

// PinnedMarks implements store.Marker.
func (s *Store) PinnedMarks(ctx context.Context, tenant, owner string) ([]store.Marks, error) {
	db, err := s.q()
	if err != nil {
		return nil, err
	}
	if !textOK(tenant, owner) {
		return nil, nil
	}
	rows, err := db.Query(ctx, `SELECT doc FROM marks WHERE tenant = $1 AND owner = $2 AND pinned_at IS NOT NULL
		ORDER BY pinned_at, run_ref`, tenant, owner)
	if err != nil {
		return nil, closedErr(s, err)
	}
	return collectDocs[store.Marks](rows)
}

// GetRunMeta implements store.Marker.
func (s *Store) GetRunMeta(ctx context.Context, refs []string) (map[string]store.RunMeta, error) {
	out := make(map[string]store.RunMeta, len(refs))
	db, err := s.q()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, "SELECT run_ref, doc FROM run_meta WHERE run_ref = ANY($1)", storable(refs))
	if err != nil {
		return nil, closedErr(s, err)
	}
	return out, collectKeyed(rows, out)
}

// UpdateRunMeta implements store.Marker.
func (s *Store) UpdateRunMeta(ctx context.Context, ref string, fn func(*store.RunMeta) (*apitypes.AuditEntry, error)) (store.RunMeta, error) {
	var out store.RunMeta
	err := s.tx(ctx, func(tx pgx.Tx) error {
		tenant, err := lockRun(ctx, tx, ref, "", "UPDATE")
		if err != nil {
			return err
		}
		m, err := getMeta(ctx, tx, ref)
		if err != nil {
			return err
		}
		m.RunRef, m.Tenant = ref, tenant
		audit, err := fn(&m)
		if err != nil {
			return err
		}
		m.RunRef, m.Tenant = ref, tenant
		if audit != nil {
			if _, err := appendAuditTx(ctx, tx, *audit); err != nil {
				return err
			}
		}
		out, err = putMeta(ctx, tx, m)
		return err
	})
	return out, err
}

// ReleaseRun implements store.Marker.
func (s *Store) ReleaseRun(ctx context.Context, ref string, at time.Time) (store.RunMeta, error) {
	var out store.RunMeta
	err := s.tx(ctx, func(tx pgx.Tx) error {
		tenant, err := lockRun(ctx, tx, ref, "", "UPDATE")
		if err != nil {
			return err
		}
		m, err := getMeta(ctx, tx, ref)
		if err != nil {
			return err
		}
		m.RunRef, m.Tenant = ref, tenant
		if m.ReleasedAt == nil {
			t := at.UTC()
			m.ReleasedAt = &t
		}
		if _, err := tx.Exec(ctx, "DELETE FROM marks WHERE run_ref = $1", ref); err != nil {
			return err
		}
		out, err = putMeta(ctx, tx, m)
		return err
	})
	return out, err
}

// DeleteRun implements store.Marker.
func (s *Store) DeleteRun(ctx context.Context, ref string, audit apitypes.AuditEntry) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		tenant, err := lockRun(ctx, tx, ref, "", "UPDATE")
		if err != nil {
			return err
		}
		if audit.Tenant != tenant {
			return fmt.Errorf("delete run %q: audit entry of tenant %q for a run of another tenant", ref, audit.Tenant)
		}
		b := &pgx.Batch{}
		b.Queue("DELETE FROM marks WHERE run_ref = $1", ref)
		b.Queue("DELETE FROM run_meta WHERE run_ref = $1", ref)
		b.Queue("DELETE FROM runs WHERE run_ref = $1", ref)
		b.Queue("INSERT INTO run_tombstones (run_ref, deleted_at) VALUES ($1, $2) ON CONFLICT (run_ref) DO NOTHING", ref, audit.At.UTC())
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		_, err = appendAuditTx(ctx, tx, audit)
		return err
	})
}

// AppendAudit implements store.Marker.
func (s *Store) AppendAudit(ctx context.Context, e apitypes.AuditEntry) (apitypes.AuditEntry, error) {
	var out apitypes.AuditEntry
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = appendAuditTx(ctx, tx, e)
		return err
	})
	return out, err
}

func checkAudit(e apitypes.AuditEntry) error {
	if e.Tenant == "" || e.Event == "" {
		return fmt.Errorf("audit: empty tenant or event (%q, %q)", e.Tenant, e.Event)
	}
	return checkText("audit", e.Tenant, e.Event, e.Target.RunRef, e.Actor.CredentialID, e.Actor.PrincipalID)
}

// lockAuditHead locks the tenant's chain head for the rest of tx and
// returns the last entry (the zero entry before the first). Inserting the
// head row if it is missing and reading it locked is one statement: the
// upsert takes the row lock whichever way it goes, so a second appender,
// on any coordinator, waits here until the first commits and then reads
// the entry the first wrote.
func lockAuditHead(ctx context.Context, tx pgx.Tx, tenant string) (apitypes.AuditEntry, error) {
	var (
		head apitypes.AuditEntry
		doc  []byte
	)
	err := tx.QueryRow(ctx, `INSERT INTO audit_heads (tenant, seq) VALUES ($1, 0)
		ON CONFLICT (tenant) DO UPDATE SET seq = audit_heads.seq RETURNING doc`, tenant).Scan(&doc)
	if err != nil {
		return head, fmt.Errorf("audit: lock the chain head of tenant %q: %w", tenant, err)
	}
	if doc != nil {
		if err := decode(doc, &head); err != nil {
			return head, err
		}
	}
	return head, nil
}

// appendAuditTx seals e onto its tenant's chain inside tx.
func appendAuditTx(ctx context.Context, tx pgx.Tx, e apitypes.AuditEntry) (apitypes.AuditEntry, error) {
	if err := checkAudit(e); err != nil {
		return e, err
	}
	head, err := lockAuditHead(ctx, tx, e.Tenant)
	if err != nil {
		return e, err
	}
	noteAudit(tx, e.Event)
	return sealAfter(ctx, tx, head, e)
}

// auditNotes holds, per transaction of Store.tx, the events of the audit
// entries it appended, reported once it commits (store.AuditObserver).
var auditNotes sync.Map // pgx.Tx → *[]string

func noteAudit(tx pgx.Tx, event string) {
	if p, ok := auditNotes.Load(tx); ok {
		*p.(*[]string) = append(*p.(*[]string), event)
	}
}

// ObserveAudit implements store.AuditObserver.
func (s *Store) ObserveAudit(fn func(event string)) { s.onAudit.Store(&fn) }

// sealAfter seals e after head, which the caller holds locked, and writes
// the entry and the new head.
func sealAfter(ctx context.Context, tx pgx.Tx, head, e apitypes.AuditEntry) (apitypes.AuditEntry, error) {
	sealed, err := auditchain.Seal(head, e)
	if err != nil {
		return e, err
	}
	if sealed.Seq > math.MaxInt64 {
		return e, fmt.Errorf("audit: tenant %q's chain is full", e.Tenant)
	}
	doc, err := encode(sealed)
	if err != nil {
		return e, err
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO audit (tenant, seq, at, event, run_ref, credential_id, principal_id, doc)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		sealed.Tenant, int64(sealed.Seq), sealed.At, sealed.Event, sealed.Target.RunRef, sealed.Actor.CredentialID, sealed.Actor.PrincipalID, doc)
	b.Queue("UPDATE audit_heads SET seq = $2, doc = $3 WHERE tenant = $1", sealed.Tenant, int64(sealed.Seq), doc)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return e, fmt.Errorf("audit: append to tenant %q: %w", e.Tenant, err)
	}
	return sealed, nil
}

// ListAudit implements store.Marker. The cursor is the seq of the last entry
// of the page before.
func (s *Store) ListAudit(ctx context.Context, q store.AuditQuery) ([]apitypes.AuditEntry, string, error) {
	if q.Tenant == "" {
		return nil, "", errors.New("list audit: empty tenant")
	}
	limit := q.Limit
	if limit <= 0 {
		limit = defaultAuditLimit
	}
	var after uint64
	if q.Newest {
		after = math.MaxInt64 // the seq the newest-first page stays below
	}
	if q.Cursor != "" {
		n, err := strconv.ParseUint(q.Cursor, 10, 64)
		if err != nil {
			return nil, "", store.ErrBadCursor
		}
		after = n
	}
	db, err := s.q()
	if err != nil {
		return nil, "", err
	}
	out := []apitypes.AuditEntry{}
	if (!q.Newest && after >= math.MaxInt64) || !textOK(q.Tenant, q.Event, q.RunRef, q.Actor) {
		return out, "", nil
	}
	var where strings.Builder
	args := []any{q.Tenant, int64(min(after, math.MaxInt64))}
	order := "seq"
	if q.Newest {
		where.WriteString("tenant = $1 AND seq < $2")
		order = "seq DESC"
	} else {
		where.WriteString("tenant = $1 AND seq > $2")
	}
	add := func(cond string, v any) {
		args = append(args, v)
		fmt.Fprintf(&where, " AND "+cond, len(args))
	}
	if q.Event != "" {
		add("event = $%d", q.Event)
	}
	if q.RunRef != "" {
		add("run_ref = $%d", q.RunRef)
	}
	if q.Actor != "" {
		args = append(args, q.Actor)
		fmt.Fprintf(&where, " AND (credential_id = $%d OR principal_id = $%[1]d)", len(args))
	}
	if !q.Since.IsZero() {
		add("at >= $%d", q.Since)
	}
	if !q.Until.IsZero() {
		add("at < $%d", q.Until)
	}
	args = append(args, limit+1)
	rows, err := db.Query(ctx, fmt.Sprintf("SELECT doc FROM audit WHERE %s ORDER BY %s LIMIT $%d", where.String(), order, len(args)), args...)
	if err != nil {
		return nil, "", fmt.Errorf("list audit: %w", closedErr(s, err))
	}
	all, err := collectDocs[apitypes.AuditEntry](rows)
	if err != nil {
		return nil, "", fmt.Errorf("list audit: %w", err)
	}
	next := ""
	if len(all) > limit {
		all = all[:limit]
		next = strconv.FormatUint(all[limit-1].Seq, 10)
	}
	return append(out, all...), next, nil
}

// GetWorkspaceSettings implements store.Workspacer.
func (s *Store) GetWorkspaceSettings(ctx context.Context, ref string) (store.WorkspaceSettings, error) {
	var out store.WorkspaceSettings
	if !textOK(ref) {
		return out, fmt.Errorf("workspace %q: %w", ref, store.ErrNotFound)
	}
	db, err := s.q()
	if err != nil {
		return out, err
	}
	var (
		tenant string
		doc    []byte
	)
	err = db.QueryRow(ctx, "SELECT w.tenant, ws.doc FROM workspaces w LEFT JOIN workspace_settings ws ON ws.ref = w.ref WHERE w.ref = $1", ref).Scan(&tenant, &doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, fmt.Errorf("workspace %q: %w", ref, store.ErrNotFound)
	}
	if err != nil {
		return out, closedErr(s, err)
	}
	if doc != nil {
		if err := decode(doc, &out); err != nil {
			return store.WorkspaceSettings{}, err
		}
	}
	out.Ref, out.Tenant = ref, tenant
	return out, nil
}

// UpdateWorkspaceSettings implements store.Workspacer.
func (s *Store) UpdateWorkspaceSettings(ctx context.Context, ref string, fn func(*store.WorkspaceSettings) (*apitypes.AuditEntry, error)) (store.WorkspaceSettings, error) {
	var out store.WorkspaceSettings
	if !textOK(ref) {
		return out, fmt.Errorf("workspace %q: %w", ref, store.ErrNotFound)
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var tenant string
		err := tx.QueryRow(ctx, "SELECT tenant FROM workspaces WHERE ref = $1 FOR UPDATE", ref).Scan(&tenant)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("workspace %q: %w", ref, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		var ws store.WorkspaceSettings
		if err := scanDoc(tx.QueryRow(ctx, "SELECT doc FROM workspace_settings WHERE ref = $1", ref), &ws); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		ws.Ref, ws.Tenant = ref, tenant
		audit, err := fn(&ws)
		if err != nil {
			return err
		}
		ws.Ref, ws.Tenant = ref, tenant
		if audit != nil {
			if audit.Tenant != tenant {
				return fmt.Errorf("workspace %q: audit entry of tenant %q for a workspace of another tenant", ref, audit.Tenant)
			}
			if _, err := appendAuditTx(ctx, tx, *audit); err != nil {
				return err
			}
		}
		doc, err := encode(ws)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO workspace_settings (ref, doc) VALUES ($1, $2)
			ON CONFLICT (ref) DO UPDATE SET doc = EXCLUDED.doc`, ref, doc); err != nil {
			return err
		}
		return decode(doc, &out)
	})
	return out, err
}

// CreateSecret implements store.Vaulter.
func (s *Store) CreateSecret(ctx context.Context, sec store.Secret) error {
	return s.createNamed(ctx, secretsTable, sec.Ref, sec.Tenant, sec.Name, sec)
}

// GetSecret implements store.Vaulter.
func (s *Store) GetSecret(ctx context.Context, ref string) (store.Secret, error) {
	var out store.Secret
	if err := s.getNamed(ctx, secretsTable, ref, &out); err != nil {
		return store.Secret{}, err
	}
	return out, nil
}

// ListSecrets implements store.Vaulter.
func (s *Store) ListSecrets(ctx context.Context, tenant string) ([]store.Secret, error) {
	return listNamed[store.Secret](ctx, s, secretsTable, tenant)
}

// DeleteSecret implements store.Vaulter.
func (s *Store) DeleteSecret(ctx context.Context, ref string) error {
	db, err := s.q()
	if err != nil {
		return err
	}
	if !textOK(ref) {
		return fmt.Errorf("secret %q: %w", ref, store.ErrNotFound)
	}
	tag, err := db.Exec(ctx, "DELETE FROM secrets WHERE ref = $1", ref)
	if err != nil {
		return closedErr(s, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("secret %q: %w", ref, store.ErrNotFound)
	}
	return nil
}

// AppendAuditWindowed implements store.Vaulter. The window is checked under
// the tenant's audit head lock, so two coordinators serving the same
// reader at once append once.
func (s *Store) AppendAuditWindowed(ctx context.Context, e apitypes.AuditEntry, window time.Duration) (bool, error) {
	if err := checkAudit(e); err != nil {
		return false, err
	}
	appended := false
	err := s.tx(ctx, func(tx pgx.Tx) error {
		head, err := lockAuditHead(ctx, tx, e.Tenant)
		if err != nil {
			return err
		}
		var last time.Time
		err = tx.QueryRow(ctx, `SELECT last_at FROM audit_windows
			WHERE tenant = $1 AND event = $2 AND run_ref = $3 AND credential_id = $4`,
			e.Tenant, e.Event, e.Target.RunRef, e.Actor.CredentialID).Scan(&last)
		switch {
		case err == nil:
			if e.At.Sub(last) < window {
				return nil
			}
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		if _, err := sealAfter(ctx, tx, head, e); err != nil {
			return err
		}
		noteAudit(tx, e.Event)
		if _, err := tx.Exec(ctx, `INSERT INTO audit_windows (tenant, event, run_ref, credential_id, last_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (tenant, event, run_ref, credential_id) DO UPDATE SET last_at = EXCLUDED.last_at`,
			e.Tenant, e.Event, e.Target.RunRef, e.Actor.CredentialID, e.At.UTC()); err != nil {
			return err
		}
		appended = true
		return nil
	})
	return appended, err
}
