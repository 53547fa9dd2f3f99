package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// PutUsage implements store.Usager: one INSERT ... ON CONFLICT DO NOTHING
// per row, in one transaction (R-USE-6).
func (s *Store) PutUsage(ctx context.Context, rows []apitypes.UsageTurn) error {
	if err := checkUsage(rows); err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error { return putUsageTx(ctx, tx, rows) })
}

func checkUsage(rows []apitypes.UsageTurn) error {
	for _, u := range rows {
		if u.RunRef == "" || u.Tenant == "" || u.Seq == 0 {
			return fmt.Errorf("put usage: row without run_ref, tenant or seq")
		}
		if u.Seq > 1<<62 {
			return fmt.Errorf("put usage: seq %d out of range", u.Seq)
		}
		if err := checkText("put usage", u.RunRef, u.Tenant, u.ProfileRef); err != nil {
			return err
		}
	}
	return nil
}

// putUsageTx stores in tx each row not stored yet (PutUsage's rules).
func putUsageTx(ctx context.Context, tx pgx.Tx, rows []apitypes.UsageTurn) error {
	for _, u := range rows {
		u.At = u.At.UTC()
		doc, err := encode(u)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO usage_turns (run_ref, seq, tenant, profile_ref, at, doc)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_ref, seq) DO NOTHING`,
			u.RunRef, int64(u.Seq), u.Tenant, u.ProfileRef, u.At, doc); err != nil {
			return err
		}
	}
	return nil
}

// ListUsage implements store.Usager.
func (s *Store) ListUsage(ctx context.Context, q store.UsageQuery) ([]apitypes.UsageTurn, error) {
	if !textOK(q.Tenant) {
		return []apitypes.UsageTurn{}, nil
	}
	sql := "SELECT doc FROM usage_turns WHERE tenant = $1"
	args := []any{q.Tenant}
	if !q.From.IsZero() {
		args = append(args, q.From)
		sql += fmt.Sprintf(" AND at >= $%d", len(args))
	}
	if !q.To.IsZero() {
		args = append(args, q.To)
		sql += fmt.Sprintf(" AND at < $%d", len(args))
	}
	sql += " ORDER BY at, run_ref, seq"
	return s.usageRows(ctx, sql, args...)
}

// LatestAccountUsage implements store.Usager.
func (s *Store) LatestAccountUsage(ctx context.Context, tenant string) ([]apitypes.UsageTurn, error) {
	if !textOK(tenant) {
		return []apitypes.UsageTurn{}, nil
	}
	return s.usageRows(ctx, `SELECT DISTINCT ON (profile_ref) doc FROM usage_turns WHERE tenant = $1
		ORDER BY profile_ref, at DESC, run_ref DESC, seq DESC`, tenant)
}

func (s *Store) usageRows(ctx context.Context, sql string, args ...any) ([]apitypes.UsageTurn, error) {
	db, err := s.q()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, closedErr(s, err)
	}
	defer rows.Close()
	out := []apitypes.UsageTurn{}
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, err
		}
		var u apitypes.UsageTurn
		if err := decode(doc, &u); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, closedErr(s, rows.Err())
}
