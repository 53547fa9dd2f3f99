package transcript

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// workflowSession is a session that launched n workflows, each finished
// (so that each has a final summary to read).
func workflowSession(t *testing.T, n int) *session {
	s := newSession(t)
	s.user("run them")
	for i := 0; i < n; i++ {
		tool := fmt.Sprintf("toolu_w%d", i)
		s.record(map[string]any{"type": "assistant", "message": map[string]any{"id": "m" + tool, "role": "assistant",
			"content": []any{map[string]any{"type": "tool_use", "id": tool, "name": "Workflow", "input": map[string]any{"script": "x"}}}}})
		s.record(map[string]any{"type": "user", "message": map[string]any{"role": "user",
			"content": []any{map[string]any{"type": "tool_result", "tool_use_id": tool, "content": "launched"}}},
			"toolUseResult": map[string]any{"status": "async_launched", "taskId": fmt.Sprintf("task%d", i), "runId": fmt.Sprintf("wf_run%05d", i), "workflowName": "w"}})
	}
	return s
}

// summaryPath is where a session's workflow summary lives.
func (s *session) summaryPath(run string) string {
	dir := filepath.Join(s.home, ".claude", "projects", ClaudeSlug(s.cwd), s.sid, "workflows")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		s.t.Fatal(err)
	}
	return filepath.Join(dir, run+".json")
}

// writeSummary writes a completed summary, followed by spaces up to size
// bytes (the size is what the bounds look at).
func (s *session) writeSummary(run string, size int) {
	head := `{"runId":"` + run + `","status":"completed","durationMs":5,"workflowProgress":[{"type":"workflow_phase","index":1,"title":"Only"},{"type":"workflow_agent","index":1,"phaseIndex":1,"state":"done","agentId":"a1"}]}`
	if err := os.WriteFile(s.summaryPath(run), []byte(head+strings.Repeat(" ", max(size-len(head), 0))), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// TestSummaryFileBound: a summary over 8 MiB is unreadable, and the live
// progress already known is kept (R-WF-8, R-WF-9).
func TestSummaryFileBound(t *testing.T) {
	s := workflowSession(t, 2)
	s.writeSummary("wf_run00000", MaxSummaryFileBytes)   // at the bound: read
	s.writeSummary("wf_run00001", MaxSummaryFileBytes+1) // over it
	live := &LiveSnapshot{Progress: []ProgressSnapshot{{TaskID: "task1", ToolUseID: "toolu_w1", DurationMS: 77,
		Rows: []WorkflowRow{{Type: "workflow_phase", Index: 1, Title: "Live"}, {Type: "workflow_agent", Index: 1, PhaseIndex: 1, State: "progress"}}}}}
	src := s.src()
	src.Live = true
	a, err := NewCache(0, 0).Activity(src, live, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Unreadable != 1 || len(a.Tasks) != 2 {
		t.Fatalf("unreadable %d, %d tasks; want 1 and 2", a.Unreadable, len(a.Tasks))
	}
	read, over := a.Tasks[0].Workflow, a.Tasks[1].Workflow
	if a.Tasks[0].State != StateCompleted || read.DurationMS != 5 || read.Phases[0].State != StateCompleted {
		t.Errorf("summary at the bound: %+v %+v", a.Tasks[0], read)
	}
	if a.Tasks[1].State != StateRunning || over.DurationMS != 77 || len(over.Phases) != 1 || over.Phases[0].Title != "Live" || over.Phases[0].State != StateRunning {
		t.Errorf("summary over the bound: %+v %+v, want the live progress", a.Tasks[1], over)
	}
}

// TestSummaryRequestBound: one request reads at most 64 MiB of summaries;
// the next one is unreadable (R-WF-8).
func TestSummaryRequestBound(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 72 MiB of summaries")
	}
	const each = 8 << 20 // 8 fit in 64 MiB exactly
	s := workflowSession(t, 9)
	for i := 0; i < 9; i++ {
		s.writeSummary(fmt.Sprintf("wf_run%05d", i), each)
	}
	a, err := NewCache(0, 0).Activity(s.src(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	for _, tk := range a.Tasks {
		if tk.State == StateCompleted {
			done++
		}
	}
	if a.Unreadable != 1 || done != 8 {
		t.Errorf("unreadable %d, %d summaries read; want 1 and 8", a.Unreadable, done)
	}
}

// TestSummaryLinkRules: a summary reached through a symlink is unreadable,
// like the transcript itself would be (R-WF-7).
func TestSummaryLinkRules(t *testing.T) {
	s := workflowSession(t, 1)
	other := filepath.Join(t.TempDir(), "elsewhere.json")
	must(t, os.WriteFile(other, []byte(`{"status":"completed"}`), 0o600))
	must(t, os.Symlink(other, s.summaryPath("wf_run00000")))
	a, err := NewCache(0, 0).Activity(s.src(), nil, nil)
	if err != nil || a.Unreadable != 1 || a.Tasks[0].State == StateCompleted {
		t.Errorf("unreadable %d, task %+v, %v; want the summary refused", a.Unreadable, a.Tasks, err)
	}
}

// TestContextPercent: 100 × tokens / window, one decimal (R-ACT-9).
func TestContextPercent(t *testing.T) {
	for _, tc := range []struct {
		tokens, window int64
		want           float64
	}{{21500, 200000, 10.8}, {1, 1000000, 0}, {50000, 272000, 18.4}, {200000, 200000, 100}, {250000, 200000, 125}} {
		if got := percent(tc.tokens, tc.window); got == nil || *got != tc.want {
			t.Errorf("percent(%d, %d) = %v, want %v", tc.tokens, tc.window, got, tc.want)
		}
	}
	if percent(1, 0) != nil {
		t.Error("a zero window gave a percentage")
	}
	w := &WindowReport{ModelUsage: map[string]ModelWindow{"claude-sonnet-4-5[1m]": {ContextWindow: 1000000}, "claude-haiku-4-5": {ContextWindow: 200000}}}
	if got, ok := claudeWindow(w, "claude-sonnet-4-5", ""); !ok || got != 1000000 {
		t.Errorf("the bracketed variant alone: %d %t", got, ok)
	}
	w.ModelUsage["claude-sonnet-4-5"] = ModelWindow{ContextWindow: 200000}
	if _, ok := claudeWindow(w, "claude-sonnet-4-5", ""); ok {
		t.Error("two entries for the model: not ambiguous")
	}
	if _, ok := claudeWindow(w, "claude-opus-5-5", ""); ok {
		t.Error("no entry for the model: a window")
	}
	if _, ok := claudeWindow(nil, "claude-opus-5-5", ""); ok {
		t.Error("no report: a window")
	}
}
