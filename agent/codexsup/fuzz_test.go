package codexsup

import (
	"encoding/json"
	"testing"

	"github.com/olivares-dev/olivares/shared/logging"
)

// FuzzUntrusted: what a client or the app-server sends never panics the
// node: a catalog or transcript cursor from a client, a Codex thread or
// turn to project, and any line on the supervision connection.
func FuzzUntrusted(f *testing.F) {
	raw, _ := json.Marshal(threadJSON(uuid(1), "title"))
	f.Add("", raw)
	f.Add(encodeCursor(catalogCursor{Native: "2026-12-02T10:20:22Z|01a23645", Skip: 3}), []byte(turnJSON("completed", userText("a"), agentText("b"))))
	f.Add("eyJjIjoieCIsImQiOiJhc2MifQ", []byte(`{"id":1,"result":{"data":[{"items":[{"type":"userMessage","content":"x"}]}]}}`))
	f.Add("%%%", []byte(`{"id":"srv","method":"item/commandExecution/requestApproval","params":{}}`))
	f.Fuzz(func(t *testing.T, cursor string, data []byte) {
		var cc catalogCursor
		if decodeCursor(cursor, &cc) == nil {
			var back catalogCursor
			if err := decodeCursor(encodeCursor(cc), &back); err != nil || back != cc {
				t.Fatalf("cursor %+v does not round-trip: %+v %v", cc, back, err)
			}
		}
		var tc turnsCursor
		decodeCursor(cursor, &tc)
		Project(data, "")
		var h History
		h.AddTurn(data)
		if len(h.Messages()) > MaxHistoryMessages {
			t.Fatal("history over its bound")
		}
		p := &peer{log: logging.Discard(), waits: map[int64]*waiter{}}
		p.waits[1] = &waiter{method: "m", ch: make(chan reply, 1)}
		p.dispatch(data)
		p.oversized(data, data, int64(len(data)))
	})
}
