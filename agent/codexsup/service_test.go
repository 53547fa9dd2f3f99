package codexsup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
)

// rawTurns answers thread/turns/list with n turns whose answers are size
// bytes each, and cursors; the line is built as bytes (a 40 MiB page
// through encoding/json is slow under the race detector).
func rawTurns(n, size int) map[string]func(int64) []byte {
	return map[string]func(int64) []byte{"thread/turns/list": func(id int64) []byte {
		var b bytes.Buffer
		fmt.Fprintf(&b, `{"id":%d,"result":{"data":[`, id)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":"t%d","status":"completed","itemsView":"full","items":[{"type":"userMessage","id":"u","content":[{"type":"text","text":"q%d"}]},{"type":"agentMessage","id":"a","text":"`, i, i)
			b.Write(bytes.Repeat([]byte("x"), size))
			b.WriteString(`"}]}`)
		}
		b.WriteString(`],"nextCursor":"older-1","backwardsCursor":"newer-1"}}`)
		return b.Bytes()
	}}
}

// TestTurnsPage is R-CX-TRN-1..3: thread/turns/list with itemsView full,
// 20 turns, newest first; the cursors are opaque and a backwards cursor
// reads with the opposite sort, still returned newest first.
func TestTurnsPage(t *testing.T) {
	f := &fakeServer{handle: func(method string, params json.RawMessage) (any, string) {
		var p map[string]any
		json.Unmarshal(params, &p)
		data := []json.RawMessage{turnJSON("completed", userText("a")), turnJSON("completed", userText("b"))}
		return map[string]any{"data": data, "nextCursor": "N-" + fmt.Sprint(p["sortDirection"]), "backwardsCursor": "B-" + fmt.Sprint(p["sortDirection"])}, ""
	}}
	s, _, _ := newTestService(t, f)
	page, big, err := s.Turns(ctx(t), proto.CodexTurnsList{ThreadID: uuid(1)})
	if err != nil || big != nil {
		t.Fatal(err, big)
	}
	var got apitypes.CodexTurnsPage
	json.Unmarshal(page, &got)
	var p map[string]any
	json.Unmarshal(f.callsOf("thread/turns/list")[0].Params, &p)
	if p["itemsView"] != "full" || p["limit"] != float64(20) || p["sortDirection"] != "desc" || p["threadId"] != uuid(1) {
		t.Fatalf("thread/turns/list params %v", p)
	}
	if got.NextCursor == "" || strings.Contains(got.NextCursor, "N-desc") || got.Host != "node-1" {
		t.Fatalf("page %+v: cursors must be opaque", got)
	}
	// The backwards cursor reads ascending; the page still reads newest
	// first, and its cursors swap.
	page, _, err = s.Turns(ctx(t), proto.CodexTurnsList{ThreadID: uuid(1), Cursor: got.BackwardsCursor})
	if err != nil {
		t.Fatal(err)
	}
	var back apitypes.CodexTurnsPage
	json.Unmarshal(page, &back)
	calls := f.callsOf("thread/turns/list")
	json.Unmarshal(calls[1].Params, &p)
	if p["sortDirection"] != "asc" || p["cursor"] != "B-desc" {
		t.Fatalf("backwards read params %v, want asc from B-desc", p)
	}
	var items []turnView
	json.Unmarshal(back.Turns, &items)
	if len(items) != 2 || !strings.Contains(string(back.Turns), `"b"`) || strings.Index(string(back.Turns), `"b"`) > strings.Index(string(back.Turns), `"a"`) {
		t.Fatalf("backwards page %s, want it reversed to newest first", back.Turns)
	}
	var nc, bc turnsCursor
	decodeCursor(back.NextCursor, &nc)
	decodeCursor(back.BackwardsCursor, &bc)
	if nc != (turnsCursor{Native: "B-asc", Dir: "desc"}) || bc != (turnsCursor{Native: "N-asc", Dir: "asc"}) {
		t.Errorf("cursors of an ascending read: next %+v back %+v", nc, bc)
	}
	if _, _, err := s.Turns(ctx(t), proto.CodexTurnsList{ThreadID: "../../etc"}); !isCode(err, "bad_thread_id") {
		t.Errorf("a bad thread id: got %v", err)
	}
}

// TestTurnsPageTooLarge is R-CX-TRN-5/6: a serialized page over the bound
// is refused on the node with the cursors around it, whether the line
// could be read or not (over the connection's line bound). The bounds are
// lowered here (20 MiB and 32 MiB of copies are slow under the race
// detector); the journey refuses a real 21 MiB page.
func TestTurnsPageTooLarge(t *testing.T) {
	f := &fakeServer{raw: rawTurns(3, 100<<10)}
	s, _, _ := newTestService(t, f)
	s.maxPage = 256 << 10
	page, big, err := s.Turns(ctx(t), proto.CodexTurnsList{ThreadID: uuid(1)})
	if err != nil || page != nil || big == nil || big.Bytes <= 300<<10 || big.NextCursor == "" || big.BackwardsCursor == "" {
		t.Fatalf("a 300 KiB page over a 256 KiB bound: page %d bytes, refusal %+v, err %v", len(page), big, err)
	}
	// The cursor stays valid: the next page reads.
	f.setRaw(rawTurns(2, 10))
	if page, big, err = s.Turns(ctx(t), proto.CodexTurnsList{ThreadID: uuid(1), Cursor: big.NextCursor}); err != nil || big != nil || page == nil {
		t.Fatalf("after a refusal the next cursor: %v %v", big, err)
	}
	if s.maxPage = proto.MaxCodexPage; s.maxPage != 20<<20 {
		t.Fatalf("MaxCodexPage is %d, want 20 MiB", s.maxPage)
	}
	s.conn.Close()
	s.conn = newConn(f.spawn, ClientName, ClientVersion, slog.New(slog.NewTextHandler(t.Output(), nil)))
	s.conn.maxLine = 1 << 20
	f.setRaw(rawTurns(3, 1<<20))
	page, big, err = s.Turns(ctx(t), proto.CodexTurnsList{ThreadID: uuid(1)})
	if err != nil || page != nil || big == nil || big.Bytes <= 3<<20 || big.NextCursor == "" {
		t.Fatalf("a line over the bound: refusal %+v, err %v", big, err)
	}
	var nc turnsCursor
	if decodeCursor(big.NextCursor, &nc); nc.Native != "older-1" {
		t.Errorf("next cursor %+v, want Codex's older-1 read from the end of the line", nc)
	}
	// The connection still works after skipping the long line.
	f.setRaw(rawTurns(1, 10))
	if _, big, err = s.Turns(ctx(t), proto.CodexTurnsList{ThreadID: uuid(1)}); err != nil || big != nil {
		t.Fatalf("after a long line: %v %v", big, err)
	}
}

// TestConnPassive is R-CX-PASS-1: the connection opts out of every
// notification, never answers a server request (an approval), and starts a
// new app-server after the last one died.
func TestConnPassive(t *testing.T) {
	f := &fakeServer{handle: pagedThreads([][]map[string]any{{threadJSON(uuid(1), "a")}})}
	f.beforeAnswer = func(w io.Writer) {
		io.WriteString(w, `{"id":"srv-1","method":"item/commandExecution/requestApproval","params":{"threadId":"x","command":"rm -rf /"}}`+"\n")
		io.WriteString(w, `{"method":"thread/status/changed","params":{"threadId":"x","status":{"type":"idle"}}}`+"\n")
	}
	s, _, _ := newTestService(t, f)
	if _, err := s.Threads(ctx(t), proto.CodexThreadsList{Limit: 5}); err != nil {
		t.Fatal(err)
	}
	init := f.callsOf("initialize")
	var ip initializeParams
	json.Unmarshal(init[0].Params, &ip)
	if !ip.Capabilities.ExperimentalAPI || len(ip.Capabilities.OptOutNotificationMethods) != 86 || ip.ClientInfo.Name != ClientName {
		t.Fatalf("initialize %s", init[0].Params)
	}
	f.mu.Lock()
	for _, c := range f.calls {
		if c.Method == "" || strings.Contains(c.Method, "resume") || strings.Contains(c.Method, "Approval") {
			t.Errorf("the passive connection sent %q %s", c.Method, c.Params)
		}
	}
	f.mu.Unlock()
	f.kill()
	// In-flight or later calls: the next one runs on a new process.
	for range 3 {
		if _, err := s.Threads(ctx(t), proto.CodexThreadsList{Limit: 5}); err == nil {
			break
		}
	}
	if _, err := s.Threads(ctx(t), proto.CodexThreadsList{Limit: 5}); err != nil {
		t.Fatalf("after the app-server died: %v", err)
	}
	if f.spawns != 2 {
		t.Errorf("%d app-servers started, want 2", f.spawns)
	}
}

// TestUnsupportedConfigFailsClosed is R-CX-CONN-7: an unsupported transport
// or an agent home scope advertises nothing and refuses every call.
func TestUnsupportedConfigFailsClosed(t *testing.T) {
	for _, cfg := range []Config{
		{Enabled: false},
		{Enabled: true, Transport: "websocket"},
		{Enabled: true, HomeScope: "agent"},
		{Enabled: true, Command: "/nonexistent/codex"},
	} {
		f := &fakeServer{handle: pagedThreads([][]map[string]any{{}})}
		s, _, db := newTestService(t, f)
		s.Close()
		cfg.CodexHome = t.TempDir()
		if err := cfg.CheckAndSetDefaults(); err != nil {
			t.Fatal(err)
		}
		s2, err := Open(Options{Config: cfg, DB: db, NodeID: "n", Tenant: "t", Path: "/usr/bin:/bin", spawn: f.spawn})
		if err != nil {
			t.Fatal(err)
		}
		if c := s2.Capability(); c != nil {
			t.Errorf("%+v: advertised %+v", cfg, c)
		}
		if _, err := s2.Threads(ctx(t), proto.CodexThreadsList{Limit: 1}); !isCode(err, "codex_supervision_unavailable") {
			t.Errorf("%+v: Threads got %v, want codex_supervision_unavailable", cfg, err)
		}
		if f.spawns != 0 {
			t.Errorf("%+v: an app-server was started", cfg)
		}
	}
}

// TestLeases (R-CX-LEASE-1, R-CX-LEASE-2): a thread's lease has one holder
// and a fencing token; a new
// acquisition makes the old token stale; another holder is refused unless
// the takeover says the holder can no longer write; the leases of
// operations die with the agent process.
func TestLeases(t *testing.T) {
	f := &fakeServer{}
	s, _, db := newTestService(t, f)
	st := s.store
	th := uuid(1)
	t1, err := st.acquire(th, "run_a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.check(th, "run_a", t1); err != nil {
		t.Fatalf("check: %v", err)
	}
	if _, err := st.acquire(th, "run_b", nil); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("a second holder: got %v, want ErrLeaseHeld", err)
	}
	if _, err := st.acquire(th, "run_b", func(string) bool { return false }); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("a refused takeover: got %v", err)
	}
	t2, err := st.acquire(th, "run_b", func(prev string) bool { return prev == "run_a" })
	if err != nil || t2 <= t1 {
		t.Fatalf("takeover: token %d (was %d), err %v", t2, t1, err)
	}
	if err := st.check(th, "run_a", t1); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the fenced-out holder: got %v, want ErrLeaseLost", err)
	}
	st.release(th, "run_a", t1) // stale: no effect
	if st.holder(th) != "run_b" {
		t.Fatal("a stale release dropped the current lease")
	}
	if _, err := st.acquire(uuid(2), transientPrefix+"x", nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := openTestService(t, db, f)
	if h := s2.store.holder(uuid(2)); h != "" {
		t.Errorf("an operation's lease survived the agent: %q", h)
	}
	if h := s2.store.holder(th); h != "run_b" {
		t.Errorf("a run's lease was dropped at open: %q", h)
	}
}

// TestContinueReuses is R-CX-CONT-2: a source with a supervised run gets
// that run back, even while its canonical thread is active (R-CX-SCOPE-5);
// the run is also found from its canonical thread. An active source
// without one cannot be branched.
func TestContinueReuses(t *testing.T) {
	active := threadJSON(uuid(9), "busy")
	active["status"] = map[string]any{"type": "active", "activeFlags": []any{}}
	f := &fakeServer{handle: func(method string, params json.RawMessage) (any, string) {
		var p struct {
			ThreadID string `json:"threadId"`
		}
		json.Unmarshal(params, &p)
		switch method {
		case "thread/read":
			if p.ThreadID == uuid(9) {
				return map[string]any{"thread": active}, ""
			}
			return map[string]any{"thread": threadJSON(p.ThreadID, "src")}, ""
		case "thread/turns/list":
			return map[string]any{"data": []json.RawMessage{turnJSON("completed", userText("hello"), agentText("hi"))}, "nextCursor": nil}, ""
		}
		return nil, "unexpected " + method
	}}
	s, runs, _ := newTestService(t, f)
	r, created, err := s.Continue(ctx(t), proto.CodexThreadRef{ThreadID: uuid(1), RunRef: "run_first1", Tenant: "t1"})
	if err != nil || !created || r.RunRef != "run_first1" {
		t.Fatalf("first continue: %+v %v %v", r, created, err)
	}
	if l := runs.launched[0]; l.ProfileRef != ProfileRef || l.Tenant != "t1" {
		t.Fatalf("launch %+v, want the supervision profile", l)
	}
	br, err := s.Branch("run_first1")
	if err != nil || br.Binding.State != apitypes.CodexBranchPending || !br.Binding.ModelLocked ||
		!reflect.DeepEqual(br.History, []apitypes.CodexMessage{{Role: "user", Text: "hello"}, {Role: "assistant", Text: "hi"}}) {
		t.Fatalf("branch %+v %v", br, err)
	}
	r, created, err = s.Continue(ctx(t), proto.CodexThreadRef{ThreadID: uuid(1), RunRef: "run_second", Tenant: "t1"})
	if err != nil || created || r.RunRef != "run_first1" || len(runs.launched) != 1 {
		t.Fatalf("second continue: %+v created %v err %v launches %d", r, created, err, len(runs.launched))
	}
	s.store.update("run_first1", func(b *binding) error { b.State, b.Canonical = apitypes.CodexBranchCommitted, uuid(2); return nil })
	runs.set("run_first1", apitypes.StateRunning)
	if r, created, err = s.Continue(ctx(t), proto.CodexThreadRef{ThreadID: uuid(2), RunRef: "run_third1", Tenant: "t1"}); err != nil || created || r.RunRef != "run_first1" {
		t.Fatalf("continue of the canonical thread: %+v %v %v", r, created, err)
	}
	if _, _, err := s.Continue(ctx(t), proto.CodexThreadRef{ThreadID: uuid(9), RunRef: "run_fourth", Tenant: "t1"}); !isCode(err, "thread_active") {
		t.Fatalf("an active source: got %v, want thread_active", err)
	}
}
