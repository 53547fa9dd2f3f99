package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/auditchain"
)

// Buckets of marks, session metas and the audit ledger.
//   - marks: tenantPrefix, lp(owner), ref → store.Marks.
//   - marks_by_run: lp(ref), tenantPrefix, owner → empty: every owner with
//     a mark on a run, so a release or a delete finds them all.
//   - pins: tenantPrefix, lp(owner), runTime(pinned_at), ref → empty: an
//     owner's pins, oldest first (R-PIN-3's eviction, R-LIST-3's extras).
//   - run_meta: ref → store.RunMeta.
//   - run_tombstones: ref → deletion time. A deleted run's late push from
//     its agent must not bring the row back.
//   - audit: tenantPrefix, seq (8 bytes) → apitypes.AuditEntry.
//   - audit_heads: tenant → the tenant's last entry, the one the next seals
//     onto.
var (
	bucketMarks      = []byte("marks")
	bucketMarksByRun = []byte("marks_by_run")
	bucketPins       = []byte("pins")
	bucketRunMeta    = []byte("run_meta")
	bucketTombstones = []byte("run_tombstones")
	bucketAudit      = []byte("audit")
	bucketAuditHeads = []byte("audit_heads")

	markBuckets = [][]byte{bucketMarks, bucketMarksByRun, bucketPins, bucketRunMeta, bucketTombstones, bucketAudit, bucketAuditHeads}
)

// defaultAuditLimit is the page size of an AuditQuery whose Limit is zero.
const defaultAuditLimit = 100

// lp is a length-prefixed string: no value can own another's key range.
func lp(s string) []byte {
	b := make([]byte, 4, 4+len(s))
	binary.BigEndian.PutUint32(b, uint32(len(s)))
	return append(b, s...)
}

// cutLP splits a length-prefixed string off the front of b.
func cutLP(b []byte) (string, []byte, bool) {
	if len(b) < 4 {
		return "", nil, false
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(len(b)-4) < uint64(n) {
		return "", nil, false
	}
	return string(b[4 : 4+n]), b[4+n:], true
}

func ownerPrefix(tenant, owner string) []byte {
	return append(tenantPrefix(tenant), lp(owner)...)
}

func markKey(k store.MarkKey) []byte {
	return append(ownerPrefix(k.Tenant, k.Owner), k.RunRef...)
}

func markByRunKey(k store.MarkKey) []byte {
	return append(append(lp(k.RunRef), tenantPrefix(k.Tenant)...), k.Owner...)
}

func pinKey(k store.MarkKey, at time.Time) []byte {
	return append(append(ownerPrefix(k.Tenant, k.Owner), runTime(at)...), k.RunRef...)
}

// indexedRun loads a run of the index, checking its tenant.
func indexedRun(tx *bbolt.Tx, tenant, ref string) (apitypes.Run, error) {
	var r apitypes.Run
	if err := get(tx.Bucket(bucketRuns), ref, &r); err != nil {
		return r, fmt.Errorf("run %q: %w", ref, err)
	}
	if tenant != "" && r.Tenant != tenant {
		return r, fmt.Errorf("run %q: %w", ref, store.ErrNotFound)
	}
	return r, nil
}

func released(tx *bbolt.Tx, ref string) (bool, error) {
	var m store.RunMeta
	switch err := get(tx.Bucket(bucketRunMeta), ref, &m); {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return m.ReleasedAt != nil, nil
}

// UpdateMarks implements store.Marker.
func (s *Store) UpdateMarks(ctx context.Context, key store.MarkKey, fn func(*store.Marks)) (store.Marks, error) {
	if key.Tenant == "" || key.Owner == "" || key.RunRef == "" {
		return store.Marks{}, fmt.Errorf("update marks: empty tenant, owner or run (%+v)", key)
	}
	var out store.Marks
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		if _, err := indexedRun(tx, key.Tenant, key.RunRef); err != nil {
			return err
		}
		if rel, err := released(tx, key.RunRef); err != nil {
			return err
		} else if rel {
			return fmt.Errorf("run %q: %w", key.RunRef, store.ErrReleased)
		}
		marks, byRun, pins := tx.Bucket(bucketMarks), tx.Bucket(bucketMarksByRun), tx.Bucket(bucketPins)
		var old store.Marks
		if err := get(marks, string(markKey(key)), &old); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		m := old
		m.RunRef = key.RunRef
		fn(&m)
		m.RunRef = key.RunRef
		if err := putMarks(marks, byRun, key, m); err != nil {
			return err
		}
		if old.PinnedAt != nil && (m.PinnedAt == nil || !old.PinnedAt.Equal(*m.PinnedAt)) {
			if err := pins.Delete(pinKey(key, *old.PinnedAt)); err != nil {
				return err
			}
		}
		if m.PinnedAt != nil {
			if err := pins.Put(pinKey(key, *m.PinnedAt), []byte{}); err != nil {
				return err
			}
			if err := evictPins(tx, key); err != nil {
				return err
			}
		}
		out = m
		return nil
	})
	return out, err
}

// putMarks stores m, or removes the record when m marks nothing.
func putMarks(marks, byRun *bbolt.Bucket, key store.MarkKey, m store.Marks) error {
	if m.Empty() {
		if err := marks.Delete(markKey(key)); err != nil {
			return err
		}
		return byRun.Delete(markByRunKey(key))
	}
	if err := put(marks, string(markKey(key)), m); err != nil {
		return err
	}
	return byRun.Put(markByRunKey(key), []byte{})
}

// evictPins drops the owner's oldest pins beyond MaxPins (R-PIN-3); the pin
// just written is never the one dropped.
func evictPins(tx *bbolt.Tx, key store.MarkKey) error {
	marks, byRun, pins := tx.Bucket(bucketMarks), tx.Bucket(bucketMarksByRun), tx.Bucket(bucketPins)
	prefix := ownerPrefix(key.Tenant, key.Owner)
	var all [][]byte
	c := pins.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		all = append(all, append([]byte(nil), k...))
	}
	// The pin just written is skipped but still counted: when it is not
	// the newest (the clock went back, or another coordinator's clock is
	// behind), the oldest others go until MaxPins are left.
	excess := len(all) - store.MaxPins
	for _, k := range all {
		if excess <= 0 {
			break
		}
		ref := string(k[len(prefix)+runTimeLen:])
		if ref == key.RunRef {
			continue
		}
		excess--
		other := store.MarkKey{Tenant: key.Tenant, Owner: key.Owner, RunRef: ref}
		var m store.Marks
		if err := get(marks, string(markKey(other)), &m); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		m.PinnedAt = nil
		if err := putMarks(marks, byRun, other, m); err != nil {
			return err
		}
		if err := pins.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// GetMarks implements store.Marker.
func (s *Store) GetMarks(ctx context.Context, tenant, owner string, refs []string) (map[string]store.Marks, error) {
	out := make(map[string]store.Marks, len(refs))
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketMarks)
		for _, ref := range refs {
			var m store.Marks
			switch err := get(b, string(markKey(store.MarkKey{Tenant: tenant, Owner: owner, RunRef: ref})), &m); {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				return err
			default:
				out[ref] = m
			}
		}
		return nil
	})
	return out, err
}

// PinnedMarks implements store.Marker.
func (s *Store) PinnedMarks(ctx context.Context, tenant, owner string) ([]store.Marks, error) {
	var out []store.Marks
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		marks := tx.Bucket(bucketMarks)
		prefix := ownerPrefix(tenant, owner)
		c := tx.Bucket(bucketPins).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if len(k) <= len(prefix)+runTimeLen {
				return fmt.Errorf("pins: malformed key %x", k)
			}
			ref := string(k[len(prefix)+runTimeLen:])
			var m store.Marks
			if err := get(marks, string(markKey(store.MarkKey{Tenant: tenant, Owner: owner, RunRef: ref})), &m); err != nil {
				return fmt.Errorf("pin of run %q: %w", ref, err)
			}
			out = append(out, m)
		}
		return nil
	})
	return out, err
}

// GetRunMeta implements store.Marker.
func (s *Store) GetRunMeta(ctx context.Context, refs []string) (map[string]store.RunMeta, error) {
	out := make(map[string]store.RunMeta, len(refs))
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketRunMeta)
		for _, ref := range refs {
			var m store.RunMeta
			switch err := get(b, ref, &m); {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				return err
			default:
				out[ref] = m
			}
		}
		return nil
	})
	return out, err
}

// UpdateRunMeta implements store.Marker.
func (s *Store) UpdateRunMeta(ctx context.Context, ref string, fn func(*store.RunMeta) (*apitypes.AuditEntry, error)) (store.RunMeta, error) {
	var out store.RunMeta
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		r, err := indexedRun(tx, "", ref)
		if err != nil {
			return err
		}
		b := tx.Bucket(bucketRunMeta)
		var m store.RunMeta
		if err := get(b, ref, &m); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		m.RunRef, m.Tenant = ref, r.Tenant
		audit, err := fn(&m)
		if err != nil {
			return err
		}
		m.RunRef, m.Tenant = ref, r.Tenant
		if audit != nil {
			if _, err := appendAuditTx(tx, *audit); err != nil {
				return err
			}
		}
		out = m
		return putAndReload(b, ref, m, &out)
	})
	return out, err
}

// ReleaseRun implements store.Marker.
func (s *Store) ReleaseRun(ctx context.Context, ref string, at time.Time) (store.RunMeta, error) {
	var out store.RunMeta
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		r, err := indexedRun(tx, "", ref)
		if err != nil {
			return err
		}
		b := tx.Bucket(bucketRunMeta)
		var m store.RunMeta
		if err := get(b, ref, &m); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		m.RunRef, m.Tenant = ref, r.Tenant
		if m.ReleasedAt == nil {
			t := at.UTC()
			m.ReleasedAt = &t
		}
		if err := removeMarks(tx, ref); err != nil {
			return err
		}
		return putAndReload(b, ref, m, &out)
	})
	return out, err
}

// removeMarks deletes every owner's marks on ref.
func removeMarks(tx *bbolt.Tx, ref string) error {
	marks, byRun, pins := tx.Bucket(bucketMarks), tx.Bucket(bucketMarksByRun), tx.Bucket(bucketPins)
	prefix := lp(ref)
	var keys [][]byte
	c := byRun.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		tenant, rest, ok := cutLP(k[len(prefix):])
		if !ok {
			return fmt.Errorf("marks_by_run: malformed key %x", k)
		}
		key := store.MarkKey{Tenant: tenant, Owner: string(rest), RunRef: ref}
		var m store.Marks
		if err := get(marks, string(markKey(key)), &m); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if m.PinnedAt != nil {
			if err := pins.Delete(pinKey(key, *m.PinnedAt)); err != nil {
				return err
			}
		}
		if err := marks.Delete(markKey(key)); err != nil {
			return err
		}
		if err := byRun.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// DeleteRun implements store.Marker.
func (s *Store) DeleteRun(ctx context.Context, ref string, audit apitypes.AuditEntry) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		r, err := indexedRun(tx, "", ref)
		if err != nil {
			return err
		}
		if audit.Tenant != r.Tenant {
			return fmt.Errorf("delete run %q: audit entry of tenant %q for a run of another tenant", ref, audit.Tenant)
		}
		if err := removeMarks(tx, ref); err != nil {
			return err
		}
		if err := tx.Bucket(bucketRunsByTenant).Delete(runIndexKey(r.Tenant, r.CreatedAt, ref)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketRuns).Delete([]byte(ref)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketRunMeta).Delete([]byte(ref)); err != nil {
			return err
		}
		if err := put(tx.Bucket(bucketTombstones), ref, audit.At.UTC()); err != nil {
			return err
		}
		_, err = appendAuditTx(tx, audit)
		return err
	})
}

// AppendAudit implements store.Marker.
func (s *Store) AppendAudit(ctx context.Context, e apitypes.AuditEntry) (apitypes.AuditEntry, error) {
	var out apitypes.AuditEntry
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		var err error
		out, err = appendAuditTx(tx, e)
		return err
	})
	return out, err
}

// appendAuditTx seals e onto its tenant's chain inside tx.
func appendAuditTx(tx *bbolt.Tx, e apitypes.AuditEntry) (apitypes.AuditEntry, error) {
	if fn, ok := auditObservers.Load(tx.DB()); ok {
		event := e.Event
		tx.OnCommit(func() { fn.(func(string))(event) })
	}
	if e.Tenant == "" || e.Event == "" {
		return e, fmt.Errorf("audit: empty tenant or event (%q, %q)", e.Tenant, e.Event)
	}
	heads := tx.Bucket(bucketAuditHeads)
	var head apitypes.AuditEntry
	if err := get(heads, e.Tenant, &head); err != nil && !errors.Is(err, store.ErrNotFound) {
		return e, err
	}
	sealed, err := auditchain.Seal(head, e)
	if err != nil {
		return e, err
	}
	key := binary.BigEndian.AppendUint64(tenantPrefix(e.Tenant), sealed.Seq)
	if err := put(tx.Bucket(bucketAudit), string(key), sealed); err != nil {
		return e, err
	}
	if err := put(heads, e.Tenant, sealed); err != nil {
		return e, err
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
	if q.Cursor != "" {
		n, err := strconv.ParseUint(q.Cursor, 10, 64)
		if err != nil {
			return nil, "", store.ErrBadCursor
		}
		after = n
	}
	prefix := tenantPrefix(q.Tenant)
	out := []apitypes.AuditEntry{}
	next := ""
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketAudit).Cursor()
		start := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), after+1)
		first, step := c.Seek, c.Next
		if q.Newest {
			// From the entry below the cursor (or the tenant's last) back.
			first = func(start []byte) ([]byte, []byte) {
				end := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), after)
				if q.Cursor == "" {
					end = binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), math.MaxUint64)
				}
				k, _ := c.Seek(end)
				if k == nil {
					return c.Last()
				}
				return c.Prev()
			}
			step = c.Prev
		}
		for k, v := first(start); k != nil && bytes.HasPrefix(k, prefix); k, v = step() {
			var e apitypes.AuditEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("decode audit entry %x: %w", k, err)
			}
			if !auditMatches(q, e) {
				continue
			}
			if len(out) == limit {
				next = strconv.FormatUint(out[len(out)-1].Seq, 10)
				return nil
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list audit: %w", err)
	}
	return out, next, nil
}

func auditMatches(q store.AuditQuery, e apitypes.AuditEntry) bool {
	return (q.Event == "" || e.Event == q.Event) &&
		(q.RunRef == "" || e.Target.RunRef == q.RunRef) &&
		(q.Actor == "" || e.Actor.CredentialID == q.Actor || e.Actor.PrincipalID == q.Actor) &&
		(q.Since.IsZero() || !e.At.Before(q.Since)) &&
		(q.Until.IsZero() || e.At.Before(q.Until))
}

// bucketWorkspaceSettings: workspace ref → store.WorkspaceSettings.
var bucketWorkspaceSettings = []byte("workspace_settings")

func init() { markBuckets = append(markBuckets, bucketWorkspaceSettings) }

// GetWorkspaceSettings implements store.Workspacer.
func (s *Store) GetWorkspaceSettings(ctx context.Context, ref string) (store.WorkspaceSettings, error) {
	var out store.WorkspaceSettings
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var w apitypes.Workspace
		if err := get(tx.Bucket(bucketWorkspaces), ref, &w); err != nil {
			return fmt.Errorf("workspace %q: %w", ref, err)
		}
		if err := get(tx.Bucket(bucketWorkspaceSettings), ref, &out); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		out.Ref, out.Tenant = ref, w.Tenant
		return nil
	})
	return out, err
}

// UpdateWorkspaceSettings implements store.Workspacer.
func (s *Store) UpdateWorkspaceSettings(ctx context.Context, ref string, fn func(*store.WorkspaceSettings) (*apitypes.AuditEntry, error)) (store.WorkspaceSettings, error) {
	var out store.WorkspaceSettings
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		var w apitypes.Workspace
		if err := get(tx.Bucket(bucketWorkspaces), ref, &w); err != nil {
			return fmt.Errorf("workspace %q: %w", ref, err)
		}
		b := tx.Bucket(bucketWorkspaceSettings)
		var ws store.WorkspaceSettings
		if err := get(b, ref, &ws); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		ws.Ref, ws.Tenant = ref, w.Tenant
		audit, err := fn(&ws)
		if err != nil {
			return err
		}
		ws.Ref, ws.Tenant = ref, w.Tenant
		if audit != nil {
			if audit.Tenant != w.Tenant {
				return fmt.Errorf("workspace %q: audit entry of tenant %q for a workspace of another tenant", ref, audit.Tenant)
			}
			if _, err := appendAuditTx(tx, *audit); err != nil {
				return err
			}
		}
		return putAndReload(b, ref, ws, &out)
	})
	return out, err
}

// Buckets of the vault and the audit windows.
//   - secrets: ref → store.Secret; secret_names: tenantPrefix, name → ref.
//   - audit_windows: tenantPrefix, lp(event), lp(run), credential → the
//     time of the last entry (R-MSG-17).
var (
	bucketSecrets      = []byte("secrets")
	bucketSecretNames  = []byte("secret_names")
	bucketAuditWindows = []byte("audit_windows")
)

func init() {
	markBuckets = append(markBuckets, bucketSecrets, bucketSecretNames, bucketAuditWindows)
}

// CreateSecret implements store.Vaulter.
func (s *Store) CreateSecret(ctx context.Context, sec store.Secret) error {
	if err := checkNamed("secret", sec.Ref, sec.Tenant, sec.Name); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		return createNamed(tx.Bucket(bucketSecrets), tx.Bucket(bucketSecretNames), "secret", sec.Ref, sec.Tenant, sec.Name, sec)
	})
}

// GetSecret implements store.Vaulter.
func (s *Store) GetSecret(ctx context.Context, ref string) (store.Secret, error) {
	var out store.Secret
	err := s.view(ctx, func(tx *bbolt.Tx) error { return get(tx.Bucket(bucketSecrets), ref, &out) })
	if err != nil {
		return store.Secret{}, fmt.Errorf("secret %q: %w", ref, err)
	}
	return out, nil
}

// ListSecrets implements store.Vaulter.
func (s *Store) ListSecrets(ctx context.Context, tenant string) ([]store.Secret, error) {
	return listNamed[store.Secret](ctx, s, bucketSecrets, bucketSecretNames, "secrets", tenant)
}

// DeleteSecret implements store.Vaulter.
func (s *Store) DeleteSecret(ctx context.Context, ref string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketSecrets)
		var sec store.Secret
		if err := get(b, ref, &sec); err != nil {
			return fmt.Errorf("secret %q: %w", ref, err)
		}
		if err := tx.Bucket(bucketSecretNames).Delete(append(tenantPrefix(sec.Tenant), sec.Name...)); err != nil {
			return err
		}
		return b.Delete([]byte(ref))
	})
}

// AppendAuditWindowed implements store.Vaulter.
func (s *Store) AppendAuditWindowed(ctx context.Context, e apitypes.AuditEntry, window time.Duration) (bool, error) {
	appended := false
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketAuditWindows)
		key := append(append(append(tenantPrefix(e.Tenant), lp(e.Event)...), lp(e.Target.RunRef)...), e.Actor.CredentialID...)
		if v := b.Get(key); v != nil {
			var last time.Time
			if err := last.UnmarshalBinary(v); err != nil {
				return fmt.Errorf("audit window: %w", err)
			}
			if e.At.Sub(last) < window {
				return nil
			}
		}
		if _, err := appendAuditTx(tx, e); err != nil {
			return err
		}
		at, _ := e.At.UTC().MarshalBinary()
		appended = true
		return b.Put(key, at)
	})
	return appended, err
}

// auditObservers maps a store's *bbolt.DB to its ObserveAudit function:
// appendAuditTx has only the transaction.
var auditObservers sync.Map

// ObserveAudit implements store.AuditObserver.
func (s *Store) ObserveAudit(fn func(event string)) { auditObservers.Store(s.db, fn) }
