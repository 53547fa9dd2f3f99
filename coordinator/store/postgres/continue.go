package postgres

import (
	"context"

	"github.com/olivares-dev/olivares/coordinator/store"
)

// ListContinues implements store.Continuer.
func (s *Store) ListContinues(ctx context.Context) ([]store.RunMeta, error) {
	db, err := s.q()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT doc FROM run_meta WHERE (doc::jsonb) ? 'continue' ORDER BY run_ref`)
	if err != nil {
		return nil, closedErr(s, err)
	}
	defer rows.Close()
	var out []store.RunMeta
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, err
		}
		var m store.RunMeta
		if err := decode(doc, &m); err != nil {
			return nil, err
		}
		if m.Continue != nil {
			out = append(out, m)
		}
	}
	return out, closedErr(s, rows.Err())
}
