package bolt

import (
	"context"
	"encoding/json"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/coordinator/store"
)

// ListContinues implements store.Continuer: a scan of the run metas, which
// are one small record per run.
func (s *Store) ListContinues(ctx context.Context) ([]store.RunMeta, error) {
	var out []store.RunMeta
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketRunMeta).ForEach(func(k, v []byte) error {
			var m store.RunMeta
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("run meta %q: %w", k, err)
			}
			if m.Continue != nil {
				out = append(out, m)
			}
			return nil
		})
	})
	return out, err
}
