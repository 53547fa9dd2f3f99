package postgres

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// defaultRunLimit is the page size of a RunQuery whose Limit is zero.
const defaultRunLimit = 50

// PutRun keeps, per ref, the row with the highest Rev, so pushes that arrive
// out of order, from any coordinator, leave the index on the last state the
// agent reported (R-STATE-7). An equal Rev is a duplicate push and is not
// written. The row is locked while it is compared, and a deleted run's
// tombstone is checked under the same lock, so a push racing a delete
// cannot bring the run back.
func (s *Store) PutRun(ctx context.Context, r apitypes.Run) (bool, error) {
	if err := checkRun(r); err != nil {
		return false, err
	}
	doc, err := encode(r)
	if err != nil {
		return false, err
	}
	wrote := false
	err = s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		wrote, err = putRunTx(ctx, tx, r, doc)
		return err
	})
	if err != nil {
		return false, err
	}
	return wrote, nil
}

// PutRuns implements store.Store: one transaction for the batch and its
// usage rows.
func (s *Store) PutRuns(ctx context.Context, rs []apitypes.Run, usage ...apitypes.UsageTurn) (int, map[string]error, error) {
	if err := checkUsage(usage); err != nil {
		return 0, nil, err
	}
	refused := map[string]error{}
	docs := make([]json.RawMessage, len(rs))
	for i, r := range rs {
		if err := checkRun(r); err != nil {
			refused[r.RunRef] = err
			continue
		}
		doc, err := encode(r)
		if err != nil {
			refused[r.RunRef] = err
			continue
		}
		docs[i] = doc
	}
	wrote := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		wrote = 0
		for i, r := range rs {
			if docs[i] == nil {
				continue
			}
			w, err := putRunTx(ctx, tx, r, docs[i])
			if errors.Is(err, store.ErrConflict) {
				// Refused before any statement failed: the transaction
				// goes on with the other rows.
				refused[r.RunRef] = err
				continue
			}
			if err != nil {
				return err
			}
			if w {
				wrote++
			}
		}
		return putUsageTx(ctx, tx, usage)
	})
	if err != nil {
		return 0, nil, err
	}
	return wrote, refused, nil
}

func checkRun(r apitypes.Run) error {
	if r.RunRef == "" {
		return errors.New("put run: empty run_ref")
	}
	if r.Tenant == "" {
		return fmt.Errorf("put run %q: empty tenant", r.RunRef)
	}
	return checkText("put run", r.RunRef, r.Tenant, r.NodeID, r.State, r.LiveRef, r.ClaudeSessionID)
}

// putRunTx keeps r in tx when its rev is newer (PutRun's rules).
func putRunTx(ctx context.Context, tx pgx.Tx, r apitypes.Run, doc json.RawMessage) (bool, error) {
	// Two pushes of a new ref may both find no row; the loser of the
	// insert then finds the winner's row and compares revs.
	for range 3 {
		var tenant, node, revText string
		err := tx.QueryRow(ctx, "SELECT tenant, node_id, rev::text FROM runs WHERE run_ref = $1 FOR NO KEY UPDATE", r.RunRef).Scan(&tenant, &node, &revText)
		switch {
		case err == nil:
			rev, err := strconv.ParseUint(revText, 10, 64)
			if err != nil {
				return false, fmt.Errorf("run %q: stored rev %q: %w", r.RunRef, revText, err)
			}
			// Checked before Rev: a foreign push is refused even when it
			// would lose anyway, so the caller learns of it. The message
			// does not name the owner, which belongs to the other side.
			if tenant != r.Tenant || node != r.NodeID {
				return false, fmt.Errorf("run %q belongs to another tenant or node: %w", r.RunRef, store.ErrConflict)
			}
			if r.Rev <= rev {
				return false, nil
			}
			_, err = tx.Exec(ctx, `UPDATE runs SET rev = $2::numeric, created_at = $3, state = $4, live_ref = $5,
				claude_session_id = $6, doc = $7 WHERE run_ref = $1`,
				r.RunRef, revString(r.Rev), r.CreatedAt, r.State, r.LiveRef, r.ClaudeSessionID, doc)
			return err == nil, err
		case !errors.Is(err, pgx.ErrNoRows):
			return false, err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO runs (run_ref, tenant, node_id, rev, created_at, state, live_ref, claude_session_id, doc)
			SELECT $1, $2, $3, $4::numeric, $5, $6, $7, $8, $9
			WHERE NOT EXISTS (SELECT 1 FROM run_tombstones WHERE run_ref = $1)
			ON CONFLICT (run_ref) DO NOTHING`,
			r.RunRef, r.Tenant, r.NodeID, revString(r.Rev), r.CreatedAt, r.State, r.LiveRef, r.ClaudeSessionID, doc)
		if err != nil {
			return false, err
		}
		if tag.RowsAffected() == 1 {
			return true, nil
		}
		var dead bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM run_tombstones WHERE run_ref = $1)", r.RunRef).Scan(&dead); err != nil {
			return false, err
		}
		if dead {
			// A late push of a deleted run (R-DEL-1): it stays deleted.
			return false, nil
		}
	}
	return false, fmt.Errorf("put run %q: the row kept changing under concurrent pushes", r.RunRef)
}

func (s *Store) GetRun(ctx context.Context, ref string) (apitypes.Run, error) {
	var r apitypes.Run
	if !textOK(ref) {
		return r, fmt.Errorf("run %q: %w", ref, store.ErrNotFound)
	}
	if err := s.queryDoc(ctx, &r, "SELECT doc FROM runs WHERE run_ref = $1", ref); err != nil {
		return apitypes.Run{}, fmt.Errorf("run %q: %w", ref, closedErr(s, err))
	}
	return r, nil
}

// GetRuns implements store.Store.
func (s *Store) GetRuns(ctx context.Context, refs []string) (map[string]apitypes.Run, error) {
	out := make(map[string]apitypes.Run, len(refs))
	db, err := s.q()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, "SELECT run_ref, doc FROM runs WHERE run_ref = ANY($1)", storable(refs))
	if err != nil {
		return nil, closedErr(s, err)
	}
	return out, collectKeyed(rows, out)
}

// ListRuns reads one page of q.Tenant's rows from the runs_list index (or
// runs_state with a state filter), newest first. A cursor is the position
// (created_at, run_ref) of the last row returned, so the next page starts
// strictly below it: rows added above it are not shown, rows added below it
// are, and no row is seen twice (R-LIST-5). A Cursor without CursorMode is
// still a cursor. Offset and a cursor together, a negative Limit or Offset
// and an empty Tenant are errors.
// attentionSQL is apitypes.AttentionOf over a runs row (R-ATTN-2, the same
// precedence); %[1]d is the parameter that holds the instant now.
const attentionSQL = `CASE
	WHEN COALESCE((doc->>'pending_requests')::bigint, 0) > 0 AND state <> 'released' THEN 'needs_decision'
	WHEN state = 'pending_approval' THEN 'needs_approval'
	WHEN json_typeof(doc->'limit') = 'object' AND state <> 'released'
		AND (doc->'limit'->>'resets_at' IS NULL OR (doc->'limit'->>'resets_at')::timestamptz > $%[1]d::timestamptz) THEN 'limited'
	WHEN state = 'failed' OR (json_typeof(doc->'last_error') = 'object' AND state IN ('idle', 'stopped')) THEN 'failed'
	WHEN state = 'running' AND doc->>'stalled_since' IS NOT NULL THEN 'stalled'
	WHEN state = 'idle' THEN 'needs_input'
END`

func (s *Store) ListRuns(ctx context.Context, q store.RunQuery) ([]apitypes.Run, string, error) {
	if q.Tenant == "" {
		return nil, "", errors.New("list runs: empty tenant")
	}
	if q.Limit < 0 || q.Offset < 0 {
		return nil, "", fmt.Errorf("list runs: negative limit (%d) or offset (%d)", q.Limit, q.Offset)
	}
	cursorMode := q.CursorMode || q.Cursor != ""
	if cursorMode && q.Offset != 0 {
		return nil, "", errors.New("list runs: offset and cursor are exclusive")
	}
	limit := q.Limit
	if limit == 0 {
		limit = defaultRunLimit
	}
	var (
		below    time.Time
		belowRef string
	)
	if q.Cursor != "" {
		var err error
		if below, belowRef, err = decodeCursor(q.Cursor); err != nil {
			return nil, "", fmt.Errorf("list runs: %w", err)
		}
	}
	db, err := s.q()
	if err != nil {
		return nil, "", err
	}
	out := []apitypes.Run{}
	if !textOK(q.Tenant, q.State, q.LiveRef, q.ClaudeSessionID, q.NodeID, q.ProfileRef, q.WorkspaceRef, q.Driver) {
		return out, "", nil // no row can hold such a value
	}

	var where strings.Builder
	args := []any{q.Tenant}
	where.WriteString("tenant = $1")
	eq := func(col, v string) {
		if v != "" {
			args = append(args, v)
			fmt.Fprintf(&where, " AND %s = $%d", col, len(args))
		}
	}
	eq("state", q.State)
	eq("live_ref", q.LiveRef)
	eq("claude_session_id", q.ClaudeSessionID)
	eq("node_id", q.NodeID)
	// The filters without a column of their own read the row's document.
	eq("doc->>'provider_profile_ref'", q.ProfileRef)
	eq("doc->>'workspace_ref'", q.WorkspaceRef)
	eq("doc->>'driver'", q.Driver)
	if q.Attention != "" {
		// R-ATTN-2's derivation, in SQL over the row's document, at q.Now.
		args = append(args, q.Now.UTC())
		expr := fmt.Sprintf(attentionSQL, len(args))
		if q.Attention == apitypes.AttentionAny {
			fmt.Fprintf(&where, " AND (%s) IS NOT NULL", expr)
		} else {
			args = append(args, q.Attention)
			fmt.Fprintf(&where, " AND (%s) = $%d", expr, len(args))
		}
	}
	if q.Cursor != "" {
		args = append(args, below, belowRef)
		fmt.Fprintf(&where, " AND (created_at, run_ref) < ($%d, $%d)", len(args)-1, len(args))
	}
	// Cursor mode reads one row more than the page: it tells whether
	// there is a next page, so a page that ends at the last row has none.
	fetch := limit
	if cursorMode {
		fetch++
	}
	args = append(args, fetch, q.Offset)
	sql := fmt.Sprintf("SELECT doc, created_at FROM runs WHERE %s ORDER BY created_at DESC, run_ref DESC LIMIT $%d OFFSET $%d",
		where.String(), len(args)-1, len(args))
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list runs: %w", closedErr(s, err))
	}
	defer rows.Close()
	var last time.Time
	for rows.Next() {
		if len(out) == limit {
			next := encodeCursor(last, out[len(out)-1].RunRef)
			rows.Close()
			return out, next, nil
		}
		var (
			doc []byte
			r   apitypes.Run
		)
		if err := rows.Scan(&doc, &last); err != nil {
			return nil, "", fmt.Errorf("list runs: %w", err)
		}
		if err := decode(doc, &r); err != nil {
			return nil, "", fmt.Errorf("list runs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list runs: %w", closedErr(s, err))
	}
	return out, "", nil
}

// cursorVersion is the first byte of every cursor, so that a later format
// can tell old cursors apart.
const cursorVersion = 1

// encodeCursor makes the opaque cursor of an index position: the version,
// created_at as Unix microseconds (the column's resolution), and the ref.
// The tenant is not in it: the query names the tenant.
func encodeCursor(createdAt time.Time, ref string) string {
	b := make([]byte, 9, 9+len(ref))
	b[0] = cursorVersion
	binary.BigEndian.PutUint64(b[1:], uint64(createdAt.UnixMicro()))
	return base64.RawURLEncoding.EncodeToString(append(b, ref...))
}

func decodeCursor(cursor string) (time.Time, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(raw) <= 9 || raw[0] != cursorVersion {
		return time.Time{}, "", store.ErrBadCursor
	}
	ref := string(raw[9:])
	if !textOK(ref) {
		return time.Time{}, "", store.ErrBadCursor
	}
	return time.UnixMicro(int64(binary.BigEndian.Uint64(raw[1:9]))).UTC(), ref, nil
}

// namedTable is a table of records that have a global ref and a name unique
// in their tenant: profiles, workspaces, secrets.
type namedTable struct {
	table, kind    string
	nameConstraint string
}

var (
	profilesTable   = namedTable{"profiles", "profile", "profiles_name"}
	workspacesTable = namedTable{"workspaces", "workspace", "workspaces_name"}
	secretsTable    = namedTable{"secrets", "secret", "secrets_name"}
)

func checkNamed(kind, ref, tenant, name string) error {
	switch {
	case ref == "":
		return fmt.Errorf("create %s: empty ref", kind)
	case tenant == "":
		return fmt.Errorf("create %s %q: empty tenant", kind, ref)
	case name == "":
		return fmt.Errorf("create %s %q: empty name", kind, ref)
	}
	return checkText("create "+kind, ref, tenant, name)
}

func (s *Store) createNamed(ctx context.Context, t namedTable, ref, tenant, name string, v any) error {
	if err := checkNamed(t.kind, ref, tenant, name); err != nil {
		return err
	}
	doc, err := encode(v)
	if err != nil {
		return err
	}
	db, err := s.q()
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, "INSERT INTO "+t.table+" (ref, tenant, name, doc) VALUES ($1, $2, $3, $4)", ref, tenant, name, doc)
	if c, ok := uniqueViolation(err); ok {
		if c == t.nameConstraint {
			return fmt.Errorf("%s name %q: %w", t.kind, name, store.ErrExists)
		}
		return fmt.Errorf("%s %q: %w", t.kind, ref, store.ErrExists)
	}
	return closedErr(s, err)
}

func (s *Store) getNamed(ctx context.Context, t namedTable, ref string, v any) error {
	if !textOK(ref) {
		return fmt.Errorf("%s %q: %w", t.kind, ref, store.ErrNotFound)
	}
	if err := s.queryDoc(ctx, v, "SELECT doc FROM "+t.table+" WHERE ref = $1", ref); err != nil {
		return fmt.Errorf("%s %q: %w", t.kind, ref, closedErr(s, err))
	}
	return nil
}

// listNamed lists a tenant's records by name in byte order. An empty
// tenant is an error.
func listNamed[T any](ctx context.Context, s *Store, t namedTable, tenant string) ([]T, error) {
	if tenant == "" {
		return nil, fmt.Errorf("list %ss: empty tenant", t.kind)
	}
	db, err := s.q()
	if err != nil {
		return nil, err
	}
	if !textOK(tenant) {
		return []T{}, nil
	}
	rows, err := db.Query(ctx, "SELECT doc FROM "+t.table+" WHERE tenant = $1 ORDER BY name", tenant)
	if err != nil {
		return nil, fmt.Errorf("list %ss: %w", t.kind, closedErr(s, err))
	}
	out, err := collectDocs[T](rows)
	if err != nil {
		return nil, fmt.Errorf("list %ss: %w", t.kind, err)
	}
	return out, nil
}

// CreateProfile stores p; its Ref, Tenant and Name may not be empty.
func (s *Store) CreateProfile(ctx context.Context, p apitypes.Profile) error {
	return s.createNamed(ctx, profilesTable, p.Ref, p.Tenant, p.Name, p)
}

func (s *Store) GetProfile(ctx context.Context, ref string) (apitypes.Profile, error) {
	var p apitypes.Profile
	if err := s.getNamed(ctx, profilesTable, ref, &p); err != nil {
		return apitypes.Profile{}, err
	}
	return p, nil
}

// UpdateProfile implements store.Store.
func (s *Store) UpdateProfile(ctx context.Context, p apitypes.Profile) error {
	if !textOK(p.Ref, p.Tenant, p.Name) {
		return fmt.Errorf("profile %q: %w", p.Ref, store.ErrNotFound)
	}
	doc, err := encode(p)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		var tenant, name string
		err := tx.QueryRow(ctx, "SELECT tenant, name FROM profiles WHERE ref = $1 FOR UPDATE", p.Ref).Scan(&tenant, &name)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("profile %q: %w", p.Ref, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if tenant != p.Tenant || name != p.Name {
			return fmt.Errorf("update profile %q: tenant or name changed: %w", p.Ref, store.ErrConflict)
		}
		_, err = tx.Exec(ctx, "UPDATE profiles SET doc = $2 WHERE ref = $1", p.Ref, doc)
		return err
	})
}

// ListProfiles orders by name in byte order. An empty tenant is an error.
func (s *Store) ListProfiles(ctx context.Context, tenant string) ([]apitypes.Profile, error) {
	return listNamed[apitypes.Profile](ctx, s, profilesTable, tenant)
}

// CreateWorkspace stores w; its Ref, Tenant and Name may not be empty.
func (s *Store) CreateWorkspace(ctx context.Context, w apitypes.Workspace) error {
	return s.createNamed(ctx, workspacesTable, w.Ref, w.Tenant, w.Name, w)
}

func (s *Store) GetWorkspace(ctx context.Context, ref string) (apitypes.Workspace, error) {
	var w apitypes.Workspace
	if err := s.getNamed(ctx, workspacesTable, ref, &w); err != nil {
		return apitypes.Workspace{}, err
	}
	return w, nil
}

// ListWorkspaces orders by name in byte order. An empty tenant is an error.
func (s *Store) ListWorkspaces(ctx context.Context, tenant string) ([]apitypes.Workspace, error) {
	return listNamed[apitypes.Workspace](ctx, s, workspacesTable, tenant)
}

// CountRuns implements store.RunCounter: one GROUP BY over the index.
func (s *Store) CountRuns(ctx context.Context) ([]store.RunCount, error) {
	db, err := s.q()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT state, coalesce(doc->>'driver', ''), count(*) FROM runs GROUP BY 1, 2 ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	defer rows.Close()
	var out []store.RunCount
	for rows.Next() {
		var c store.RunCount
		if err := rows.Scan(&c.State, &c.Tool, &c.Runs); err != nil {
			return nil, fmt.Errorf("count runs: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
