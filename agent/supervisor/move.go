package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/claudeconv"
	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/taint"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// bucketMoves: "<profile ref>\x00<conversation id>" → the manifest
// (relative path → sha256) of the copy of a conversation a move left in
// that profile's home: the one it copied in, and the one it read on its way
// out. A later move into that home tells such a copy (replaced, R-MOVE-8)
// from a different version of the conversation (409, R-MOVE-11e).
var bucketMoves = []byte("moves")

// Move re-attaches a stopped or failed Claude Code run to another profile
// of the same tool on this node (R-MOVE-1..15): claudeconv carries that
// one conversation into the target home, and the run and its ledger are
// re-linked in one transaction with the manifests. Nothing starts. The
// source home is only read; a refusal writes nothing and removes whatever
// the move created.
func (s *Supervisor) Move(ctx context.Context, ref, targetRef string) (apitypes.Run, error) {
	defer s.o.Registry.Hold()()
	r, err := s.Runs.get(ref)
	if err != nil {
		return apitypes.Run{}, err
	}
	r.op.Lock()
	defer r.op.Unlock()
	rec, live := r.current()
	if rec.Driver != string(cliruntime.KindClaude) {
		// R-MOVE-12, Q-27: only Claude Code sessions move.
		return apitypes.Run{}, refusal.New(ErrMoveUnsupported, "only Claude Code runs can be moved; run %s is %s (hand it off instead)", ref, rec.Driver)
	}
	target, err := s.o.Registry.ProfileIn(targetRef, rec.Tenant)
	if err != nil {
		return apitypes.Run{}, err
	}
	if target.Ref == rec.ProfileRef {
		// R-MOVE-16: moving to the profile the run is on changes nothing.
		return r.snapshot(), nil
	}
	state := r.snapshot().State
	switch {
	case live || rec.PendingApproval || rec.Released || state != apitypes.StateStopped && state != apitypes.StateFailed:
		return apitypes.Run{}, refusal.New(ErrRunNotStopped, "run %s is %s; stop it before moving it", ref, state) // R-MOVE-3
	case target.Tool != string(cliruntime.KindClaude):
		return apitypes.Run{}, refusal.New(ErrProfileOtherTool, "profile %s is a %s profile; a Claude Code run moves only to a Claude Code profile", target.Ref, target.Tool)
	}
	if err := rec.taint().Refusal(ref, false, rec.Generation, taint.SurfaceMove); err != nil {
		return apitypes.Run{}, err
	}
	if err := target.Accepts(rec.WorkspaceRef); err != nil {
		return apitypes.Run{}, err
	}
	source, ok, err := s.o.Registry.Profile(rec.ProfileRef)
	if err != nil {
		return apitypes.Run{}, err
	}
	if !ok {
		return apitypes.Run{}, refusal.New(ErrProfileGone, "the profile %s of run %s is gone", rec.ProfileRef, ref)
	}
	if err := s.o.Registry.OwnsHome(source); err != nil {
		return apitypes.Run{}, err
	}
	if err := s.o.Registry.OwnsHome(target); err != nil {
		return apitypes.Run{}, err
	}
	if rec.ConversationID != "" {
		if other := s.boundTo(target.Ref, rec.ConversationID, ref); other != "" {
			return apitypes.Run{}, refusal.New(ErrConversationBound, "conversation %s is already the conversation of run %s under profile %s", rec.ConversationID, other, target.Ref)
		}
	}

	var files []claudeconv.File
	if rec.ConversationID != "" {
		if files, err = claudeconv.Files(source.Home, rec.ConversationID); err != nil {
			return apitypes.Run{}, err
		}
	}
	// R-MOVE-9: a run without a conversation moves with nothing to carry.
	manifest := map[string]string{}
	var staged string
	if len(files) > 0 {
		if staged, err = claudeconv.Stage(source.Home, target.Home, files); err != nil {
			return apitypes.Run{}, err
		}
		defer os.RemoveAll(staged)
		for _, f := range files {
			manifest[f.Rel] = f.SHA256
		}
	}
	var earlier map[string]string
	_ = s.o.DB.View(func(tx *bbolt.Tx) error {
		_, err := getJSON(tx, bucketMoves, target.Ref+"\x00"+rec.ConversationID, &earlier)
		return err
	})
	installed, err := claudeconv.Install(target.Home, target.Ref, rec.ConversationID, staged, files, earlier)
	if err != nil {
		return apitypes.Run{}, err
	}
	detail, _ := json.Marshal(map[string]any{"from": source.Ref, "to": target.Ref, "files": len(files)})
	err = r.updateTx(ledger.Event{Kind: ledger.KindMoved, Generation: rec.Generation, Detail: detail}, func(rec *record) {
		rec.ProfileRef = target.Ref
		rec.Limit = nil // R-MOVE-14, R-LIM-8
	}, func(tx *bbolt.Tx) error {
		if len(files) == 0 {
			return nil
		}
		if err := putJSON(tx, bucketMoves, source.Ref+"\x00"+rec.ConversationID, manifest); err != nil {
			return err
		}
		return putJSON(tx, bucketMoves, target.Ref+"\x00"+rec.ConversationID, manifest)
	})
	if err != nil {
		installed.Undo()
		// The record in memory goes back with the files, and the row that
		// would have said otherwise is dropped.
		r.mu.Lock()
		r.rec.ProfileRef, r.rec.Limit = rec.ProfileRef, rec.Limit
		r.unsaved = slices.DeleteFunc(r.unsaved, func(e ledger.Event) bool { return e.Kind == ledger.KindMoved })
		r.mu.Unlock()
		return apitypes.Run{}, fmt.Errorf("move: %w", err)
	}
	installed.Commit()
	return r.snapshot(), nil
}

// boundTo returns another run of profile bound to conversation conv.
func (s *Supervisor) boundTo(profileRef, conv, except string) string {
	for _, r := range s.Runs.all() {
		if r.ref == except {
			continue
		}
		rec, _ := r.current()
		if rec.ProfileRef == profileRef && rec.ConversationID == conv {
			return r.ref
		}
	}
	return ""
}
