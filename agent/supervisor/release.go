package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// WorktreeNone is the cleaned event's worktree outcome for a run that had
// no worktree (R-CLN-9); worktree runs record worktree.Outcome's
// (merged_removed, discarded, left_in_place, R-CLN-6).
const WorktreeNone = "none"

// Release is POST /runs/{ref}/cleanup on the node: it releases a run that
// is not live (R-CLN-8: a live run is 409). A worktree run is released only
// when its branch is merged, its worktree on that branch and clean, or with
// discard (R-CLN-3..5); a refusal changes nothing. A run without a worktree
// keeps its ring and ledger until it is deleted (R-CLN-9). Releasing a
// released run changes nothing and writes no event (R-CLN-8).
func (s *Supervisor) Release(ctx context.Context, ref string, discard bool) (apitypes.Run, error) {
	r, err := s.Runs.get(ref)
	if err != nil {
		return apitypes.Run{}, err
	}
	r.op.Lock()
	defer r.op.Unlock()
	rec, live := r.current()
	if rec.Released {
		return r.snapshot(), nil
	}
	if live {
		return apitypes.Run{}, refusal.New(ErrRunLive, "run %s is live (state=%s); stop it before cleanup", ref, r.snapshot().State)
	}
	detail, _ := json.Marshal(map[string]string{"worktree": WorktreeNone})
	if rec.WorktreeBranch != "" {
		if detail, err = s.releaseWorktree(ctx, rec, discard); err != nil {
			return apitypes.Run{}, err
		}
	}
	if err := r.update(ledger.Event{Kind: ledger.KindCleaned, Generation: rec.Generation, Detail: detail}, func(rec *record) {
		rec.Released = true
	}); err != nil {
		return apitypes.Run{}, err
	}
	return r.snapshot(), nil
}

// Delete removes a released run from the node: its record, its output ring
// and its lifecycle ledger (R-DEL-1). A run that is not released is 409
// with R-DEL-2's message.
func (s *Supervisor) Delete(ctx context.Context, ref string) error {
	r, err := s.Runs.get(ref)
	if err != nil {
		return err
	}
	r.op.Lock()
	defer r.op.Unlock()
	if snap := r.snapshot(); snap.State != apitypes.StateReleased {
		return refusal.New(ErrNotReleased, "session must be cleaned before delete (state=%s)", snap.State)
	}
	s.Runs.remove(ref)
	// The record goes first: a crash before the ring and ledger are gone
	// leaves orphans that Open sweeps, never a record without its evidence.
	if err := s.o.DB.Update(func(tx *bbolt.Tx) error {
		if err := deleteRequestsTx(tx, ref); err != nil {
			return err
		}
		return tx.Bucket(bucketRuns).Delete([]byte(ref))
	}); err != nil {
		return err
	}
	if s.o.HoldersDir != "" {
		// The logs of its holders (issue 30); none of them is live.
		os.RemoveAll(filepath.Join(s.o.HoldersDir, ref))
	}
	return errors.Join(s.o.Ring.Delete(ref), s.o.Ledger.Delete(ref))
}

// sweepOrphans removes rings and ledgers whose run record is gone (a
// Delete cut short by a crash).
func (s *Supervisor) sweepOrphans() error {
	rings, err := s.o.Ring.Runs()
	if err != nil {
		return err
	}
	ledgers, err := s.o.Ledger.Runs()
	if err != nil {
		return err
	}
	for _, ref := range rings {
		if _, err := s.Runs.get(ref); err != nil {
			if err := s.o.Ring.Delete(ref); err != nil {
				return fmt.Errorf("sweep ring %s: %w", ref, err)
			}
		}
	}
	for _, ref := range ledgers {
		if _, err := s.Runs.get(ref); err != nil {
			if err := s.o.Ledger.Delete(ref); err != nil {
				return fmt.Errorf("sweep ledger %s: %w", ref, err)
			}
		}
	}
	return nil
}
