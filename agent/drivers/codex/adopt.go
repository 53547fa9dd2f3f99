package codex

import (
	"encoding/json"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/internal/jsonrpc"
)

// Adoption (issue 30): an app-server process that outlived its agent
// under a holder is taken over by a fresh session. The process is
// initialized and its thread loaded; what the previous agent kept in
// memory is the request ids it used, the turn in flight and the queued
// texts. The queued texts were never written and went with that agent
// (decisions.md 27). The turn in flight is asked of app-server:
// thread/turns/list of the newest turn, without its items (bounded,
// R-CX-TRN-4); an "inProgress" status names it. This session's request
// ids start far above the previous agent's (a late answer to one of its
// requests matches nothing here).

var _ cliruntime.Adopter = (*session)(nil)

// tagAdopt tags the thread/turns/list of an adoption in session.pending.
const tagAdopt = "adopt:thread/turns/list"

type turnsListParams struct {
	ThreadID  string `json:"threadId"`
	Limit     int    `json:"limit"`
	ItemsView string `json:"itemsView"`
}

type turnsListResult struct {
	Data []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"data"`
}

// Adopt asks for the thread's newest turn. The session's spec names the
// thread (its ConversationID).
func (s *session) Adopt() cliruntime.Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.thread, s.adopting = s.resumeID, true
	// Microseconds since the epoch: above any id an earlier session of
	// this process counted to from 1, and below 2^53.
	s.nextID = time.Now().UnixMicro()
	s.nextID++
	s.pending[s.nextID] = tagAdopt
	return cliruntime.Step{Write: [][]byte{jsonrpc.Line(jsonrpc.Request{JSONRPC: "2.0", ID: s.nextID, Method: "thread/turns/list",
		Params: turnsListParams{ThreadID: s.thread, Limit: 1, ItemsView: "notLoaded"}})}}
}

// adoptedLocked ends the adoption with app-server's answer. A turn that
// started or ended while the answer was on its way was seen by the
// notifications (adoptTurnLocked); an error answer is taken as no turn in
// flight, so the session still takes input.
func (s *session) adoptedLocked(m jsonrpc.Message, raw json.RawMessage) cliruntime.Step {
	s.adopting = false
	var r turnsListResult
	if !m.HasError && json.Unmarshal(m.Result, &r) == nil && len(r.Data) > 0 {
		t := r.Data[0]
		if t.Status == "inProgress" && s.turn == "" && t.ID != s.adoptEnded {
			s.turn, s.notified = t.ID, true
		}
	}
	out := step(cliruntime.Event{Kind: cliruntime.EventConversation, ConversationID: s.thread, Raw: raw})
	if s.turn != "" {
		out.Events = append(out.Events, cliruntime.Event{Kind: cliruntime.EventTurnStarted, ConversationID: s.thread, TurnID: s.turn, Raw: raw})
		if s.interrupt {
			out.Write = append(out.Write, s.interruptLocked())
		}
	}
	s.interrupt = false
	return merge(out, s.flushLocked())
}

// adoptTurnLocked follows turn/started and turn/completed while the
// adoption's answer is on its way: a turn that ends meanwhile is reported
// ended (the turn the previous agent started), and not taken for the turn
// in flight when the answer comes.
func (s *session) adoptTurnLocked(m jsonrpc.Message, raw json.RawMessage) cliruntime.Step {
	var n turnNotification
	if json.Unmarshal(m.Params, &n) != nil || n.Turn.ID == "" {
		return cliruntime.Step{}
	}
	if m.Method == "turn/started" {
		s.turn, s.notified = n.Turn.ID, true
		return cliruntime.Step{}
	}
	s.turn, s.adoptEnded = n.Turn.ID, n.Turn.ID
	return s.turnCompletedLocked(&n, raw)
}
