package transcript

import (
	"encoding/json"
	"maps"
	"sync"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// MaxProgressSnapshots is how many system/task_progress snapshots a Live
// keeps per run (R-WF-10).
const MaxProgressSnapshots = 256

// WindowReport is the context window report of a Claude Code result frame:
// its modelUsage, keyed by model (real-clis.md §1.9). It is JSON so the
// agent can persist it: it outlives a stop and a reconnect, and only a new
// launch clears it (R-ACT-7).
type WindowReport struct {
	ModelUsage map[string]ModelWindow `json:"modelUsage"`
}

// ModelWindow is one modelUsage entry, reduced to the window.
type ModelWindow struct {
	ContextWindow   int64 `json:"contextWindow"`
	MaxOutputTokens int64 `json:"maxOutputTokens,omitempty"`
}

// WorkflowRow is one row of a workflow's progress, as Claude Code reports
// it in task_progress frames and keeps in workflows/<runId>.json: a phase
// (Type "workflow_phase") or an agent (Type "workflow_agent").
type WorkflowRow struct {
	Type       string `json:"type"`
	Index      int    `json:"index"`
	Title      string `json:"title,omitempty"`
	Detail     string `json:"detail,omitempty"`
	Label      string `json:"label,omitempty"`
	PhaseIndex int    `json:"phaseIndex,omitempty"`
	PhaseTitle string `json:"phaseTitle,omitempty"`
	AgentID    string `json:"agentId,omitempty"`
	State      string `json:"state,omitempty"`
	QueuedAt   int64  `json:"queuedAt,omitempty"`
	StartedAt  int64  `json:"startedAt,omitempty"`
	DurationMS int64  `json:"durationMs,omitempty"`
	Skipped    bool   `json:"skipped,omitempty"`
	Blocked    bool   `json:"blocked,omitempty"`
}

// ProgressSnapshot is one system/task_progress frame of a workflow (R-WF-6).
type ProgressSnapshot struct {
	TaskID      string
	ToolUseID   string
	Description string
	DurationMS  int64
	Rows        []WorkflowRow
	// Omitted is the frame's workflow_progress_omitted: rows Claude Code
	// left out for size, a gap in what the snapshot shows (R-WF-9).
	Omitted int
}

// Plan is Codex's latest turn/plan/updated notification (R-ACT-5).
type Plan struct {
	At          time.Time
	TurnID      string
	Explanation string
	Steps       []apitypes.Todo
}

// LiveSnapshot is what a Live saw of a run's stdout.
type LiveSnapshot struct {
	// Window is the last Claude Code window report, nil before any.
	Window *WindowReport
	// Progress holds the last MaxProgressSnapshots task_progress frames,
	// oldest first.
	Progress []ProgressSnapshot
	// Dropped counts task_progress frames evicted from the buffer, and
	// Malformed those that could not be read: both are gaps (R-WF-9).
	Dropped, Malformed int
	// Plan is Codex's latest turn/plan/updated, nil before any.
	Plan *Plan
	// MCPServers are the servers of Claude Code's last system/init frame.
	MCPServers []apitypes.MCPServer
}

// Live watches one run's stdout, line by line, for what the native record
// does not keep: Claude Code's result window report (R-ACT-7) and
// system/task_progress snapshots (R-WF-6), and Codex's turn/plan/updated
// (R-ACT-5). Observe sits on the output hot path: it reads only a line's
// first members to pick the few frames it wants and decodes just those.
// A Live is safe for concurrent use.
type Live struct {
	mu        sync.Mutex
	window    *WindowReport
	progress  []ProgressSnapshot // ring of MaxProgressSnapshots
	head      int                // next slot once full
	dropped   int
	malformed int
	plan      *Plan
	mcp       []apitypes.MCPServer
	onWindow  func(*WindowReport)
	now       func() time.Time
}

// NewLive returns an empty observer.
func NewLive() *Live { return &Live{now: time.Now} }

// OnWindow sets a function called, outside any lock, with every new window
// report, so that the agent can persist it. Set it before the first Observe.
func (l *Live) OnWindow(f func(*WindowReport)) {
	l.mu.Lock()
	l.onWindow = f
	l.mu.Unlock()
}

// SetWindow restores a persisted window report (after an agent restart).
func (l *Live) SetWindow(w *WindowReport) {
	l.mu.Lock()
	l.window = w.clone()
	l.mu.Unlock()
}

// Window returns the current window report, nil when there is none.
func (l *Live) Window() *WindowReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.window.clone()
}

// Launch tells the observer the tool was launched again (a new launch or
// resume): the previous window report no longer describes it (R-ACT-7).
// The progress buffer and the plan stay: Activity still needs what the
// previous generation's workflows and plans were.
func (l *Live) Launch() {
	l.mu.Lock()
	l.window = nil
	l.mu.Unlock()
}

func (w *WindowReport) clone() *WindowReport {
	if w == nil {
		return nil
	}
	c := &WindowReport{ModelUsage: make(map[string]ModelWindow, len(w.ModelUsage))}
	for k, v := range w.ModelUsage {
		c.ModelUsage[k] = v
	}
	return c
}

// Observe looks at one stdout line (one JSON frame, without its newline).
// Claude Code frames open with "type" (the result frame excepted) and Codex
// notifications with "method"; Codex responses ("id" first) are never
// wanted. Only a frame whose first member is none of these is scanned in
// full for its type.
func (l *Live) Observe(line []byte) {
	key, val, ok := firstMember(line)
	if !ok {
		return
	}
	switch string(key) {
	case "method":
		if string(val) == "turn/plan/updated" {
			l.planUpdated(line)
		}
		return
	case "id", "error", "result", "jsonrpc":
		return
	case "type":
	default:
		if val, ok = topString(line, "type"); !ok {
			return
		}
	}
	switch string(val) {
	case "result":
		l.result(line)
	case "system":
		if st, ok := topStringN(line, "subtype", 3); ok {
			switch string(st) {
			case "task_progress":
				l.taskProgress(line)
			case "init":
				l.init(line)
			}
		}
	}
}

// result keeps a result frame's modelUsage. A report without entries (an
// error result) does not replace the last real one.
func (l *Live) result(line []byte) {
	var f struct {
		ModelUsage map[string]ModelWindow `json:"modelUsage"`
	}
	if json.Unmarshal(line, &f) != nil || len(f.ModelUsage) == 0 {
		return
	}
	w := &WindowReport{ModelUsage: f.ModelUsage}
	l.mu.Lock()
	same := l.window != nil && maps.Equal(l.window.ModelUsage, w.ModelUsage)
	l.window = w
	cb := l.onWindow
	l.mu.Unlock()
	// Most turns repeat the report: only a change is worth persisting.
	if cb != nil && !same {
		cb(w.clone())
	}
}

func (l *Live) taskProgress(line []byte) {
	var f struct {
		TaskID      string `json:"task_id"`
		ToolUseID   string `json:"tool_use_id"`
		Description string `json:"description"`
		Usage       struct {
			DurationMS int64 `json:"duration_ms"`
		} `json:"usage"`
		Rows    []WorkflowRow `json:"workflow_progress"`
		Omitted int           `json:"workflow_progress_omitted"`
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if json.Unmarshal(line, &f) != nil {
		l.malformed++
		return
	}
	if f.Rows == nil {
		return // a status line of an agent or a backgrounded task, not a workflow
	}
	s := ProgressSnapshot{TaskID: f.TaskID, ToolUseID: f.ToolUseID, Description: short(f.Description, maxText),
		DurationMS: f.Usage.DurationMS, Rows: f.Rows, Omitted: f.Omitted}
	if len(l.progress) < MaxProgressSnapshots {
		l.progress = append(l.progress, s)
		return
	}
	l.progress[l.head] = s
	l.head = (l.head + 1) % MaxProgressSnapshots
	l.dropped++
}

func (l *Live) init(line []byte) {
	var f struct {
		MCPServers []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
		} `json:"mcp_servers"`
	}
	if json.Unmarshal(line, &f) != nil {
		return
	}
	servers := make([]apitypes.MCPServer, 0, len(f.MCPServers))
	for _, s := range f.MCPServers {
		servers = append(servers, apitypes.MCPServer{Name: s.Name, Status: s.Status})
	}
	l.mu.Lock()
	l.mcp = servers
	l.mu.Unlock()
}

func (l *Live) planUpdated(line []byte) {
	var f struct {
		Params struct {
			TurnID      string  `json:"turnId"`
			Explanation *string `json:"explanation"`
			Plan        []struct {
				Step   string `json:"step"`
				Status string `json:"status"`
			} `json:"plan"`
		} `json:"params"`
		EmittedAtMs int64 `json:"emittedAtMs"`
	}
	if json.Unmarshal(line, &f) != nil {
		return
	}
	p := &Plan{TurnID: f.Params.TurnID, Steps: make([]apitypes.Todo, 0, len(f.Params.Plan))}
	if f.Params.Explanation != nil {
		p.Explanation = *f.Params.Explanation
	}
	for _, s := range f.Params.Plan {
		p.Steps = append(p.Steps, apitypes.Todo{Content: short(s.Step, maxText), Status: todoStatus(s.Status)})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if f.EmittedAtMs > 0 {
		p.At = time.UnixMilli(f.EmittedAtMs)
	} else {
		p.At = l.now()
	}
	l.plan = p
}

// Snapshot returns a copy of what the observer holds.
func (l *Live) Snapshot() LiveSnapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := LiveSnapshot{Window: l.window.clone(), Dropped: l.dropped, Malformed: l.malformed,
		MCPServers: append([]apitypes.MCPServer(nil), l.mcp...)}
	s.Progress = make([]ProgressSnapshot, 0, len(l.progress))
	s.Progress = append(s.Progress, l.progress[l.head:]...)
	s.Progress = append(s.Progress, l.progress[:l.head]...)
	if l.plan != nil {
		p := *l.plan
		p.Steps = append([]apitypes.Todo(nil), l.plan.Steps...)
		s.Plan = &p
	}
	return s
}
