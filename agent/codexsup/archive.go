package codexsup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/proto"
)

// Descendant enumeration's safety limit (R-CX-ARC-11).
const (
	MaxDescendantPages   = 50
	MaxDescendantThreads = 5000
)

// allKinds are every source kind of Codex 0.169.0: descendants of any
// origin count (sub-agents first of all).
var allKinds = []string{"cli", "vscode", "exec", "appServer", "subAgent", "subAgentReview",
	"subAgentCompact", "subAgentThreadSpawn", "subAgentOther", "unknown"}

// ErrDescendants: the descendant enumeration could not finish safely.
var ErrDescendants = errors.New("codexsup: descendants unknown")

// Archive is R-CX-ARC-1..8 on this node, with the node's lease: it re-reads
// the thread, proceeds only for idle or notLoaded, refuses while a branch of
// it is pending or a known binding owner of it or of a non-archived
// descendant is live, takes the thread's lease (fencing out a stopped run
// that held it), calls thread/archive, and succeeds only once Codex
// accepted it. The confirmation covers unknown clients and the race between
// the read and the archive (R-CX-ARC-8).
func (s *Service) Archive(ctx context.Context, p proto.CodexThreadRef) (apitypes.CodexArchived, error) {
	if !p.ConfirmNoOtherRunner {
		return apitypes.CodexArchived{}, refusal.New(ErrConfirmationRequired, "archive needs confirmNoOtherRunner: true: confirm that no other Codex client runs this thread")
	}
	if err := s.available(); err != nil {
		return apitypes.CodexArchived{}, err
	}
	runs, err := s.runtime()
	if err != nil {
		return apitypes.CodexArchived{}, err
	}
	holder := transientPrefix + randomID()
	s.holdersMu.Lock()
	s.holders[holder] = true
	s.holdersMu.Unlock()
	defer func() {
		s.holdersMu.Lock()
		delete(s.holders, holder)
		s.holdersMu.Unlock()
	}()

	t, err := s.read(ctx, p.ThreadID)
	if err != nil {
		return apitypes.CodexArchived{}, err
	}
	overlay := s.overlay()
	state := t.state()
	if o := overlay[p.ThreadID]; o != "" {
		state = o
	}
	switch state {
	case apitypes.CodexStateActive:
		return apitypes.CodexArchived{}, refusal.New(ErrThreadActive, "thread %s is active; only an idle or stored thread can be archived", p.ThreadID) // R-CX-ARC-3
	case apitypes.CodexStateError:
		return apitypes.CodexArchived{}, refusal.New(ErrThreadError, "thread %s is in an error state; it is not archived", p.ThreadID) // R-CX-ARC-3
	}
	bs, err := s.store.bindings()
	if err != nil {
		return apitypes.CodexArchived{}, err
	}
	live := func(runRef string) bool {
		r, err := runs.Get(runRef)
		// Unknown is not safe: only a run known to be down is not live.
		return err != nil || apitypes.Live(r.State)
	}
	owner := func(id string) string {
		for _, b := range bs {
			if (b.Canonical == id || (b.Fork == id && !b.ForkArchived)) && live(b.RunRef) {
				return b.RunRef
			}
		}
		return ""
	}
	for _, b := range bs {
		if b.Source == p.ThreadID && b.State == apitypes.CodexBranchPending {
			return apitypes.CodexArchived{}, refusal.New(ErrBranchPending, "run %s is a pending branch of thread %s; its first turn must create the canonical thread before the source can be archived", b.RunRef, p.ThreadID) // R-CX-ARC-4
		}
	}
	if r := owner(p.ThreadID); r != "" {
		return apitypes.CodexArchived{}, refusal.New(ErrOwnerActive, "run %s is live and bound to thread %s; stop it first", r, p.ThreadID) // R-CX-ARC-5
	}
	desc, err := s.descendants(ctx, p.ThreadID)
	if err != nil {
		s.o.Log.Warn("archive: descendants unknown", "thread", p.ThreadID, logging.Err(err))
		return apitypes.CodexArchived{}, refusal.New(ErrDescendantsUnknown, "the descendants of thread %s could not be enumerated safely, so it is not archived", p.ThreadID) // R-CX-ARC-6
	}
	for _, d := range desc {
		if r := owner(d); r != "" {
			return apitypes.CodexArchived{}, refusal.New(ErrOwnerActive, "run %s is live and bound to %s, a descendant of thread %s", r, d, p.ThreadID) // R-CX-ARC-5
		}
	}
	// The lease: no run of this node writes the thread while it is
	// archived, and a stopped run that held it is fenced out.
	token, err := s.store.acquire(p.ThreadID, holder, func(prev string) bool {
		s.holdersMu.Lock()
		busy := s.holders[prev]
		s.holdersMu.Unlock()
		if busy {
			return false
		}
		if len(prev) > len(transientPrefix) && prev[:len(transientPrefix)] == transientPrefix {
			return true // an operation of an earlier agent process
		}
		return !live(prev)
	})
	if err != nil {
		return apitypes.CodexArchived{}, refusal.New(ErrThreadLeased, "thread %s is being written by %s on this node; try again when it is done", p.ThreadID, s.store.holder(p.ThreadID))
	}
	defer s.store.release(p.ThreadID, holder, token)
	if err := s.store.check(p.ThreadID, holder, token); err != nil {
		return apitypes.CodexArchived{}, refusal.New(ErrThreadLeased, "thread %s changed hands during the archive; nothing was archived", p.ThreadID)
	}
	if err := s.conn.Call(ctx, "thread/archive", archiveParams{ThreadID: p.ThreadID}, nil); err != nil {
		return apitypes.CodexArchived{}, s.codexErr("thread/archive", err)
	}
	for _, b := range bs {
		if b.Fork == p.ThreadID {
			s.archivedByRun(b.RunRef, p.ThreadID)
		}
	}
	return apitypes.CodexArchived{ThreadID: p.ThreadID, Archived: true}, nil
}

type archiveParams struct {
	ThreadID string `json:"threadId"`
}

// descendants pages thread/list's ancestorThreadId relation (R-CX-ARC-6):
// the non-archived threads spawned from id at any depth. It fails safe on
// an error, a repeated cursor or thread (a cycle), or past
// MaxDescendantPages pages or MaxDescendantThreads threads.
func (s *Service) descendants(ctx context.Context, id string) ([]string, error) {
	seenCursor := map[string]bool{}
	seen := map[string]bool{id: true}
	var out []string
	var cursor *string
	for page := 0; ; page++ {
		if page == MaxDescendantPages {
			return nil, fmt.Errorf("%w: more than %d pages", ErrDescendants, MaxDescendantPages)
		}
		var res listResult
		err := s.conn.Call(ctx, "thread/list", listParams{Archived: false, SourceKinds: allKinds,
			Limit: searchPageSize, Cursor: cursor, AncestorThreadID: id}, &res)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrDescendants, err)
		}
		for _, raw := range res.Data {
			var t struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(raw, &t) != nil || t.ID == "" {
				return nil, fmt.Errorf("%w: a thread without an id", ErrDescendants)
			}
			if seen[t.ID] {
				return nil, fmt.Errorf("%w: thread %s seen twice (a cycle)", ErrDescendants, t.ID)
			}
			seen[t.ID] = true
			out = append(out, t.ID)
			if len(out) > MaxDescendantThreads {
				return nil, fmt.Errorf("%w: more than %d threads", ErrDescendants, MaxDescendantThreads)
			}
		}
		if res.NextCursor == nil || *res.NextCursor == "" {
			return out, nil
		}
		if seenCursor[*res.NextCursor] {
			return nil, fmt.Errorf("%w: cursor %q came back (a cycle)", ErrDescendants, *res.NextCursor)
		}
		seenCursor[*res.NextCursor] = true
		cursor = res.NextCursor
	}
}

func randomID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
