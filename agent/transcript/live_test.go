package transcript

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// TestLiveWindow: the last result frame's modelUsage is the window report
// (R-ACT-7). An error result without entries keeps the last one; a new
// launch clears it; a stop does not (nothing to call); a persisted report
// can be restored; OnWindow sees each changed report, not a repeat.
func TestLiveWindow(t *testing.T) {
	l := NewLive()
	var seen []*WindowReport
	l.OnWindow(func(w *WindowReport) { seen = append(seen, w) })
	if l.Window() != nil {
		t.Fatal("a window before any result")
	}
	// The result frame does not start with "type" (real-clis.md §1.9).
	l.Observe([]byte(`{"duration_api_ms":28,"stop_reason":"end_turn","session_id":"s","modelUsage":{"claude-opus-5-5":{"inputTokens":11,"contextWindow":1000000,"maxOutputTokens":128000}},"type":"result","subtype":"success","is_error":false}`))
	w := l.Window()
	if w == nil || w.ModelUsage["claude-opus-5-5"].ContextWindow != 1000000 || len(seen) != 1 {
		t.Fatalf("window %+v (callbacks %d), want claude-opus-5-5 at 1000000", w, len(seen))
	}
	// The next turn's report differs only in its counters: not a change.
	l.Observe([]byte(`{"type":"result","subtype":"success","modelUsage":{"claude-opus-5-5":{"inputTokens":99,"contextWindow":1000000,"maxOutputTokens":128000}}}`))
	if len(seen) != 1 {
		t.Errorf("a repeated report was passed on: %d callbacks", len(seen))
	}
	l.Observe([]byte(`{"type":"result","subtype":"success","modelUsage":{"claude-opus-5-5":{"contextWindow":1000000,"maxOutputTokens":128000},"claude-haiku-5-5":{"contextWindow":200000}}}`))
	l.Observe([]byte(`{"type":"result","subtype":"success","modelUsage":{"claude-opus-5-5":{"inputTokens":1,"contextWindow":1000000,"maxOutputTokens":128000}}}`))
	if len(seen) != 3 {
		t.Errorf("two changed reports: %d callbacks, want 3 in all", len(seen))
	}
	l.Observe([]byte(`{"type":"result","subtype":"success","is_error":true,"modelUsage":{}}`))
	if w := l.Window(); w == nil || len(w.ModelUsage) != 1 || len(seen) != 3 {
		t.Errorf("an error result replaced the report: %+v", w)
	}
	w.ModelUsage["mutated"] = ModelWindow{}
	if len(l.Window().ModelUsage) != 1 {
		t.Error("Window returned the observer's own map")
	}
	persisted, _ := json.Marshal(l.Window())
	l.Launch()
	if l.Window() != nil || l.Snapshot().Window != nil {
		t.Error("a new launch kept the window report")
	}
	var back WindowReport
	if err := json.Unmarshal(persisted, &back); err != nil {
		t.Fatal(err)
	}
	l.SetWindow(&back)
	if w := l.Window(); w == nil || w.ModelUsage["claude-opus-5-5"].ContextWindow != 1000000 {
		t.Errorf("restored report %+v", w)
	}
}

// TestLiveProgress: the buffer keeps the last 256 task_progress snapshots,
// oldest first, and counts what it dropped and could not read (R-WF-9,
// R-WF-10); frames without workflow rows are not workflow snapshots.
func TestLiveProgress(t *testing.T) {
	l := NewLive()
	for i := 0; i < 300; i++ {
		l.Observe([]byte(fmt.Sprintf(`{"type":"system","subtype":"task_progress","task_id":"t%d","tool_use_id":"u","description":"d","usage":{"total_tokens":0,"tool_uses":0,"duration_ms":%d},"workflow_progress":[{"type":"workflow_phase","index":1,"title":"P"}]}`, i, i)))
	}
	l.Observe([]byte(`{"type":"system","subtype":"task_progress","task_id":"agent","description":"an agent's status line","usage":{"total_tokens":1,"tool_uses":0,"duration_ms":1}}`))
	l.Observe([]byte(`{"type":"system","subtype":"task_progress","task_id":`))
	s := l.Snapshot()
	if len(s.Progress) != MaxProgressSnapshots || s.Dropped != 300-MaxProgressSnapshots || s.Malformed != 1 {
		t.Fatalf("%d snapshots, %d dropped, %d malformed; want 256, 44, 1", len(s.Progress), s.Dropped, s.Malformed)
	}
	if s.Progress[0].TaskID != "t44" || s.Progress[255].TaskID != "t299" || s.Progress[255].DurationMS != 299 {
		t.Errorf("oldest %q, newest %q", s.Progress[0].TaskID, s.Progress[255].TaskID)
	}
}

// TestLivePlanAndInit: Codex's turn/plan/updated (R-ACT-5) and Claude's
// init MCP servers; Codex responses and other frames are left alone.
func TestLivePlanAndInit(t *testing.T) {
	l := NewLive()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return now }
	l.Observe([]byte(`{"method":"turn/plan/updated","params":{"threadId":"th","turnId":"tu","explanation":"why","plan":[{"step":"a","status":"completed"},{"step":"b","status":"inProgress"},{"step":"c","status":"pending"}]},"emittedAtMs":1796206701719}`))
	p := l.Snapshot().Plan
	want := []apitypes.Todo{{Content: "a", Status: "completed"}, {Content: "b", Status: "in_progress"}, {Content: "c", Status: "pending"}}
	if p == nil || p.TurnID != "tu" || p.Explanation != "why" || !p.At.Equal(time.UnixMilli(1796206701719)) || fmt.Sprint(p.Steps) != fmt.Sprint(want) {
		t.Errorf("plan %+v", p)
	}
	l.Observe([]byte(`{"method":"turn/plan/updated","params":{"threadId":"th","turnId":"tu2","plan":[]}}`))
	if p := l.Snapshot().Plan; p == nil || !p.At.Equal(now) || len(p.Steps) != 0 {
		t.Errorf("plan without emittedAtMs: %+v, want the clock's time", p)
	}
	l.Observe([]byte(`{"id":3,"result":{"method":"turn/plan/updated","type":"result","modelUsage":{"m":{"contextWindow":1}}}}`))
	l.Observe([]byte(`{"type":"system","subtype":"init","session_id":"s","mcp_servers":[{"name":"github","status":"connected"}]}`))
	s := l.Snapshot()
	if s.Window != nil || len(s.MCPServers) != 1 || s.MCPServers[0] != (apitypes.MCPServer{Name: "github", Status: "connected"}) {
		t.Errorf("snapshot %+v", s)
	}
	for _, junk := range []string{"", "null", "[]", `"x"`, "{", `{"type":`, `{"method":"turn/plan/updated","params":7}`} {
		l.Observe([]byte(junk))
	}
}

// TestLiveObserveCheap: a frame nobody wants is passed over without a
// decode, however large: Observe sits on the output hot path.
func TestLiveObserveCheap(t *testing.T) {
	l := NewLive()
	big := []byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"` + strings.Repeat("x", 1<<20) + `"}]}}`)
	codex := []byte(`{"method":"item/agentMessage/delta","params":{"delta":"` + strings.Repeat("y", 1<<20) + `"}}`)
	if n := testing.AllocsPerRun(20, func() { l.Observe(big); l.Observe(codex) }); n != 0 {
		t.Errorf("%v allocations per unwanted frame, want 0", n)
	}
}
