package acp

import (
	"maps"
	"strconv"

	"github.com/olivares-dev/olivares/agent/cliruntime"
)

// Adoption (issue 30): an ACP agent that outlived its Olivares agent under
// a holder is taken over by a new session. ACP has no request that says
// whether a prompt is in flight, and a prompt's end is the answer to the
// previous session's request id, so the session is a cliruntime.Replayer:
// it takes the state of a scratch session that read the generation from
// its start.

var _ cliruntime.Replayer = (*session)(nil)

// Adopt takes over the stored session as idle, writing nothing: what is
// left when the generation cannot be replayed. An answer to a prompt of
// the previous session then matches nothing here and is passed over.
func (s *session) Adopt() cliruntime.Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessionID = s.resumeID
	return cliruntime.Step{}
}

// AdoptFrom takes the protocol state of scratch, a session of the same
// agent that read the generation: its request numbering and what it waits
// for, the session, a replay under way, the prompt in flight. Its queue
// stays behind (the supervisor encodes those inputs again); so do the
// agent's open permission requests, which expired with the previous
// Olivares agent (R-REQ-8).
func (s *session) AdoptFrom(scratch cliruntime.Session) (cliruntime.Step, int, bool) {
	o, ok := scratch.(*session)
	if !ok || o == s {
		return cliruntime.Step{}, 0, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if o.dead || o.sessionID == "" || o.sessionID != s.resumeID {
		return cliruntime.Step{}, 0, false
	}
	s.nextID, s.pending, s.sessionID = o.nextID, maps.Clone(o.pending), o.sessionID
	s.authSent, s.retry = o.authSent, o.retry
	s.replaying, s.answered, s.marked = o.replaying, o.answered, o.marked
	s.prompt = o.prompt
	if s.prompt == 0 {
		return cliruntime.Step{}, len(o.queue), true
	}
	return step(cliruntime.Event{Kind: cliruntime.EventTurnStarted, ConversationID: s.sessionID, TurnID: strconv.FormatInt(s.prompt, 10)}), len(o.queue), true
}
