package codex_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/codex"
)

const adoptThread = "01a23643-8a79-7b72-93b2-655098698f6d"

// adopt starts an adopting session and returns it with the id of its
// thread/turns/list request.
func adopt(t *testing.T) (cliruntime.Session, int64) {
	t.Helper()
	sess := codex.New().NewSession(cliruntime.LaunchSpec{Workdir: "/w", ConversationID: adoptThread})
	st := sess.(cliruntime.Adopter).Adopt()
	if len(st.Write) != 1 || len(st.Events) != 0 {
		t.Fatalf("Adopt() = %+v, want one request", st)
	}
	var req struct {
		ID     int64           `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(st.Write[0], &req); err != nil || req.Method != "thread/turns/list" ||
		string(req.Params) != `{"threadId":"`+adoptThread+`","limit":1,"itemsView":"notLoaded"}` {
		t.Fatalf("Adopt wrote %s, want thread/turns/list of the newest turn without items (R-CX-TRN-4)", st.Write[0])
	}
	if req.ID < 1<<40 {
		t.Fatalf("the adoption's request id %d could be one the previous agent used", req.ID)
	}
	return sess, req.ID
}

func kinds(evs []cliruntime.Event) string {
	var k []string
	for _, e := range evs {
		k = append(k, string(e.Kind)+":"+e.TurnID)
	}
	return strings.Join(k, ",")
}

// TestAdoptTurnInFlight: a session that takes over a live app-server
// (issue 30, R-STATE-6) learns the turn in flight from app-server; input
// and an interrupt given before the answer wait for it, and the interrupt
// names the turn.
func TestAdoptTurnInFlight(t *testing.T) {
	sess, id := adopt(t)
	if !sess.TurnActive() {
		t.Fatal("an adopting session must count as busy until it knows")
	}
	if st, err := sess.Encode(cliruntime.Input{Text: "next"}); err != nil || len(st.Write) != 0 {
		t.Fatalf("Encode while adopting = %+v, %v: want it queued", st, err)
	}
	if _, active := sess.Interrupt(); !active {
		t.Fatal("Interrupt while adopting: want it remembered")
	}
	// A late answer to a request of the previous agent matches nothing.
	if st := sess.Observe([]byte(`{"id":3,"result":{"turn":{"id":"t-old","status":"inProgress"}}}`)); len(st.Write)+len(st.Events) != 0 {
		t.Fatalf("a late answer gave %+v", st)
	}
	st := sess.Observe(fmt.Appendf(nil, `{"id":%d,"result":{"data":[{"id":"t1","items":[],"itemsView":"notLoaded","status":"inProgress"}],"nextCursor":null}}`, id))
	if got := kinds(st.Events); got != "conversation:,turn_started:t1" {
		t.Fatalf("events %s, want the conversation and the turn in flight", got)
	}
	if len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), `"method":"turn/interrupt","params":{"threadId":"`+adoptThread+`","turnId":"t1"}`) {
		t.Fatalf("writes %q, want the remembered interrupt of t1", st.Write)
	}
	if sess.ConversationID() != adoptThread || !sess.TurnActive() {
		t.Fatal("want the thread confirmed and the turn active")
	}
	st = sess.Observe([]byte(`{"method":"turn/completed","params":{"threadId":"` + adoptThread + `","turn":{"id":"t1","items":[],"status":"interrupted","error":null}}}`))
	if got := kinds(st.Events); got != "turn_ended:t1" || len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), `"turn/start"`) {
		t.Fatalf("after the turn: events %s writes %q, want the end and the queued input's turn/start", got, st.Write)
	}
}

// TestAdoptTurnEndedMeanwhile: the turn that ends while the answer is on
// its way is reported ended and not taken for the turn in flight; an idle
// thread takes input at once.
func TestAdoptTurnEndedMeanwhile(t *testing.T) {
	sess, id := adopt(t)
	st := sess.Observe([]byte(`{"method":"turn/completed","params":{"threadId":"` + adoptThread + `","turn":{"id":"t1","items":[],"status":"completed","error":null}}}`))
	if got := kinds(st.Events); got != "turn_ended:t1" {
		t.Fatalf("events %s, want t1 ended", got)
	}
	st = sess.Observe(fmt.Appendf(nil, `{"id":%d,"result":{"data":[{"id":"t1","status":"inProgress"}]}}`, id))
	if got := kinds(st.Events); got != "conversation:" || sess.TurnActive() {
		t.Fatalf("events %s active %v, want idle", got, sess.TurnActive())
	}
	if st, _ := sess.Encode(cliruntime.Input{Text: "go"}); len(st.Write) != 1 {
		t.Fatalf("Encode when idle wrote %q, want a turn/start", st.Write)
	}

	// An error answer: no turn known, the session still takes input.
	sess, id = adopt(t)
	sess.Encode(cliruntime.Input{Text: "queued"})
	st = sess.Observe(fmt.Appendf(nil, `{"id":%d,"error":{"code":-32601,"message":"unknown method"}}`, id))
	if got := kinds(st.Events); got != "conversation:" || len(st.Write) != 1 {
		t.Fatalf("after an error answer: events %s writes %q, want the queued turn/start", got, st.Write)
	}
}
