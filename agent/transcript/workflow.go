package transcript

import (
	"encoding/json"
	"io"
	"sort"
	"strings"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Bounds of workflow summary reads (R-WF-8) and sub-agent transcripts.
const (
	// MaxSummaryFileBytes bounds one workflows/<runId>.json.
	MaxSummaryFileBytes = 8 << 20
	// maxSummaryRequestBytes bounds the summaries read by one request.
	maxSummaryRequestBytes = 64 << 20
	// maxSubagentFiles bounds the sub-agent transcripts one Activity reads.
	maxSubagentFiles = 256
)

// workflowSummary is Claude Code's finished workflows/<runId>.json, which
// 2.1.328 writes under <project>/<session id>/workflows/ (found in the
// binary: path.join(<project dir>, <session id>, "workflows", `${runId}.json`)).
type workflowSummary struct {
	RunID        string `json:"runId"`
	WorkflowName string `json:"workflowName"`
	Summary      string `json:"summary"`
	Title        string `json:"title"`
	Status       string `json:"status"`
	Error        any    `json:"error"`
	DurationMS   int64  `json:"durationMs"`
	AgentCount   int    `json:"agentCount"`
	Phases       []struct {
		Title  string `json:"title"`
		Detail string `json:"detail"`
	} `json:"phases"`
	WorkflowProgress []WorkflowRow `json:"workflowProgress"`
}

// final is the workflow's end state, "" while it has none.
func (s *workflowSummary) final() string {
	status := s.Status
	if status == "" {
		if s.Error != nil {
			status = "failed"
		} else {
			status = "completed"
		}
	}
	switch st := taskState(status); st {
	case StateCompleted, StateFailed, StateStopped:
		return st
	}
	return ""
}

// readSummary reads a workflow's summary under the home, link and size
// rules (R-WF-7, R-WF-8). found is false when the file does not exist; an
// error means it exists and cannot be read.
func (b *builder) readSummary(sessionDir []string, runID string) (s *workflowSummary, found bool, err error) {
	if !safeName(runID) {
		return nil, false, errf(ErrTranscriptUnsafe, "workflow run id %q", runID)
	}
	of, err := openInHome(b.src.Home, append(append([]string(nil), sessionDir...), "workflows", runID+".json")...)
	if err == errNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	defer of.f.Close()
	if of.size > MaxSummaryFileBytes {
		return nil, true, errf(ErrTranscriptUnsafe, "workflow summary %s.json is %d bytes, over %d", runID, of.size, MaxSummaryFileBytes) // R-WF-8
	}
	if of.size > b.budget {
		return nil, true, errf(ErrTranscriptUnsafe, "workflow summaries of this request are over %d bytes", maxSummaryRequestBytes) // R-WF-8
	}
	b.budget -= of.size
	var sum workflowSummary
	if err := json.NewDecoder(io.LimitReader(of.f, MaxSummaryFileBytes)).Decode(&sum); err != nil {
		return nil, true, err
	}
	return &sum, true, nil
}

// latestSnapshot returns the index of the newest live snapshot of a
// workflow task, or -1.
func (b *builder) latestSnapshot(taskID, toolUseID string) int {
	if b.live == nil {
		return -1
	}
	for i := len(b.live.Progress) - 1; i >= 0; i-- {
		p := &b.live.Progress[i]
		if (taskID != "" && p.TaskID == taskID) || (toolUseID != "" && p.ToolUseID == toolUseID) {
			return i
		}
	}
	return -1
}

// workflowTask builds a workflow task: from its final summary once there
// is one (R-WF-5, R-WF-7), from the live snapshots before (R-WF-4, R-WF-6).
func (b *builder) workflowTask(u *workUse, sessionDir []string, matched map[int]bool) apitypes.ActivityTask {
	t := apitypes.ActivityTask{ID: u.id, Kind: apitypes.TaskWorkflow, Description: u.description, StartedAt: formatTime(u.start), EndedAt: formatTime(u.end)}
	wf := &apitypes.ActivityWorkflow{RunID: u.runID, Name: u.workflowName, Phases: []apitypes.WorkflowPhase{}}
	t.Workflow = wf
	state := u.state

	var sum *workflowSummary
	var rows []WorkflowRow // the rows fillWorkflow read, for workflowAgents
	if u.runID != "" {
		s, found, err := b.readSummary(sessionDir, u.runID)
		switch {
		case err != nil:
			b.a.Unreadable++ // R-WF-8, R-WF-9: the live progress already known is kept
		case !found && state != "" && state != StateRunning:
			b.a.Unreadable++ // finished, and its final summary is not there
		case found:
			sum = s
		}
	}
	snap := b.latestSnapshot(u.taskID, u.id)
	if snap >= 0 {
		matched[snap] = true
	}
	if sum != nil && sum.final() != "" {
		state = sum.final()
		if sum.WorkflowName != "" {
			wf.Name = sum.WorkflowName
		}
		wf.DurationMS = sum.DurationMS
		rows = sum.WorkflowProgress
		fillWorkflow(wf, rows, sum, state, b.src.Live)
	} else {
		if snap >= 0 {
			p := &b.live.Progress[snap]
			wf.DurationMS = p.DurationMS
			rows = p.Rows
			fillWorkflow(wf, rows, sum, b.resolve(state), b.src.Live)
			if p.Omitted > 0 {
				b.a.Unreadable++
			}
		} else if b.live != nil && (b.live.Dropped > 0 || b.live.Malformed > 0) && (state == "" || state == StateRunning) {
			b.a.Unreadable++ // its progress fell out of the bounded buffer (R-WF-9)
		}
		state = b.resolve(state)
	}
	if wf.Name == "" {
		wf.Name = u.description
	}
	t.State = state
	b.workflowAgents(rows, wf.RunID, t.State)
	return t
}

// liveWorkflows adds the workflows only the live buffer knows (their
// transcript records are not written yet).
func (b *builder) liveWorkflows(matched map[int]bool) {
	if b.live == nil {
		return
	}
	seen := map[string]bool{}
	for i := len(b.live.Progress) - 1; i >= 0; i-- {
		p := &b.live.Progress[i]
		key := p.TaskID + "\x00" + p.ToolUseID
		if matched[i] || seen[key] {
			continue
		}
		seen[key] = true
		if matched != nil && b.matchedTask(p, matched) {
			continue
		}
		id := p.ToolUseID
		if id == "" {
			id = p.TaskID
		}
		wf := &apitypes.ActivityWorkflow{Name: p.Description, DurationMS: p.DurationMS, Phases: []apitypes.WorkflowPhase{}}
		state := b.resolve("")
		fillWorkflow(wf, p.Rows, nil, state, b.src.Live)
		if p.Omitted > 0 {
			b.a.Unreadable++
		}
		b.a.Tasks = append(b.a.Tasks, apitypes.ActivityTask{ID: id, Kind: apitypes.TaskWorkflow, Description: p.Description, State: state, Workflow: wf})
		b.workflowAgents(p.Rows, "", state)
	}
}

// matchedTask reports whether an older snapshot belongs to a workflow a
// newer matched snapshot already stands for.
func (b *builder) matchedTask(p *ProgressSnapshot, matched map[int]bool) bool {
	for i := range matched {
		q := &b.live.Progress[i]
		if (p.TaskID != "" && q.TaskID == p.TaskID) || (p.ToolUseID != "" && q.ToolUseID == p.ToolUseID) {
			return true
		}
	}
	return false
}

// rowState maps a workflow agent row's state to R-ACT-3.
func rowState(r *WorkflowRow) string {
	switch r.State {
	case "done":
		return StateCompleted
	case "error":
		return StateFailed
	case "start":
		if r.StartedAt == 0 && r.QueuedAt != 0 {
			return StateScheduled
		}
		return StateRunning
	case "progress":
		return StateRunning
	case "":
		return StateScheduled
	}
	return StateRunning
}

// fillWorkflow computes counters and phases from progress rows. state is
// the workflow's: a final state (completed, failed, stopped) from its
// summary, or running while live.
//
// Phase states: with a final summary, a phase is failed when one of its
// agents failed, completed when the workflow completed or all its agents
// finished, and stopped otherwise: the workflow ended while it ran, or
// before it was reached (R-WF-5). While
// live, a phase is running when one of its agents runs, failed when one
// failed, and scheduled otherwise: an agent finishing does not prove the
// script left the phase, so it never makes the phase completed nor points
// at a current step (R-WF-4). When the run is gone without a summary, what
// ran was stopped.
func fillWorkflow(wf *apitypes.ActivityWorkflow, rows []WorkflowRow, sum *workflowSummary, state string, live bool) {
	type agg struct {
		apitypes.WorkflowPhase
		running, scheduled int
	}
	phases := map[int]*agg{}
	phase := func(i int) *agg {
		if p := phases[i]; p != nil {
			return p
		}
		p := &agg{WorkflowPhase: apitypes.WorkflowPhase{Index: i}}
		phases[i] = p
		return p
	}
	if sum != nil {
		for i, m := range sum.Phases {
			p := phase(i + 1)
			p.Title, p.Detail = m.Title, m.Detail
		}
	}
	seenAgent := map[int]bool{}
	for i := range rows {
		r := &rows[i]
		switch r.Type {
		case "workflow_phase":
			p := phase(r.Index)
			if r.Title != "" {
				p.Title = r.Title
			}
			if r.Detail != "" {
				p.Detail = r.Detail
			}
		case "workflow_agent":
			if seenAgent[r.Index] {
				continue
			}
			seenAgent[r.Index] = true
			wf.AgentsTotal++
			var p *agg
			if r.PhaseIndex > 0 {
				p = phase(r.PhaseIndex)
				if p.Title == "" {
					p.Title = r.PhaseTitle
				}
				p.AgentsTotal++
			}
			switch rowState(r) {
			case StateCompleted:
				wf.AgentsDone++
				if p != nil {
					p.AgentsDone++
				}
			case StateFailed:
				wf.AgentsFailed++
				if p != nil {
					p.AgentsFailed++
				}
			case StateRunning:
				if p != nil {
					p.running++
				}
			case StateScheduled:
				if p != nil {
					p.scheduled++
				}
			}
		}
	}
	if sum != nil && sum.AgentCount > wf.AgentsTotal {
		wf.AgentsTotal = sum.AgentCount
	}
	final := state == StateCompleted || state == StateFailed || state == StateStopped
	idx := make([]int, 0, len(phases))
	for i := range phases {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		p := phases[i]
		switch {
		case final && p.AgentsFailed > 0:
			p.State = StateFailed
		case final && state == StateCompleted:
			p.State = StateCompleted
		case final && p.AgentsTotal > 0 && p.AgentsDone == p.AgentsTotal:
			p.State = StateCompleted
		case final:
			p.State = StateStopped // cut short, or never reached
		case p.running > 0 && live:
			p.State = StateRunning
		case p.running > 0:
			p.State = StateStopped
		case p.AgentsFailed > 0:
			p.State = StateFailed
		case live:
			p.State = StateScheduled
		default:
			p.State = StateStopped
		}
		wf.Phases = append(wf.Phases, p.WorkflowPhase)
	}
}

// workflowAgents lists a workflow's agents among the activity's agents.
func (b *builder) workflowAgents(rows []WorkflowRow, runID, wfState string) {
	final := wfState == StateCompleted || wfState == StateFailed || wfState == StateStopped
	seen := map[int]bool{}
	for i := range rows {
		r := &rows[i]
		if r.Type != "workflow_agent" || seen[r.Index] {
			continue
		}
		seen[r.Index] = true
		state := rowState(r)
		if (state == StateRunning || state == StateScheduled) && (final || !b.src.Live) {
			state = StateStopped
		}
		id := r.AgentID
		if id == "" {
			id = runID + "#" + strings.TrimSpace(r.Label)
		}
		b.a.Agents = append(b.a.Agents, apitypes.ActivityAgent{ID: id, Type: "workflow", Description: r.Label, State: state,
			Workflow: runID, Phase: r.PhaseIndex, StartedAt: formatTime(r.StartedAt)})
		if b.sessionDir != nil && safeName(runID) && safeName(r.AgentID) {
			b.subTranscript(append(append([]string(nil), b.sessionDir...), "subagents", "workflows", runID, "agent-"+r.AgentID+".jsonl"), r.AgentID)
		}
	}
}
