package transcript

import (
	"encoding/json"
	"strings"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Bounds of the activity state kept per transcript.
const (
	// maxTracked is how many agents and tasks a transcript's state keeps;
	// beyond it the oldest finished ones are dropped (Activity reports
	// how many in TasksOmitted / AgentsOmitted).
	maxTracked = 1000
	// maxFiles bounds the changed files listed per transcript.
	maxChangedFiles = 5000
	// maxText bounds a description or command kept for a task.
	maxText = 1024
)

// Kinds of tracked work.
const (
	kindAgent     = "agent"
	kindCommand   = "command"
	kindWorkflow  = "workflow"
	kindScheduled = "scheduled"
)

// States of agents, tasks and phases (R-ACT-3), as the API names them.
const (
	StateRunning   = apitypes.WorkRunning
	StateCompleted = apitypes.WorkCompleted
	StateFailed    = apitypes.WorkFailed
	StateStopped   = apitypes.WorkStopped
	StateScheduled = apitypes.WorkScheduled
)

// workUse is one tool use the activity follows: an agent, a command, a
// workflow or a scheduled job.
type workUse struct {
	id           string // tool_use id
	kind         string
	tool         string
	description  string
	command      string
	subagentType string
	background   bool
	start, end   int64
	state        string // "" until an outcome is known
	exitCode     *int
	agentID      string // the sub-agent's id (agent-<id>.jsonl)
	taskID       string // the background task id
	runID        string // the workflow run id (workflows/<runId>.json)
	workflowName string
	seq          int64
}

// pendingEdit is a file-editing tool use waiting for its result.
type pendingEdit struct {
	tool           string
	path           string
	added, removed int
}

// claudeState is the activity a transcript's records built so far.
type claudeState struct {
	seq         int64
	uses        map[string]*workUse // tracked tool uses by tool_use id
	order       []*workUse
	byTask      map[string]*workUse // by background task id and agent id
	omitted     map[string]int      // dropped finished uses, by kind
	edits       map[string]pendingEdit
	files       map[string]*apitypes.FileChange
	fileOrder   []string
	filesOver   int
	todos       []apitypes.Todo // the latest TodoWrite list
	todosSeq    int64
	tasks       []apitypes.Todo // the TaskCreate/TaskUpdate list
	taskIDs     []string
	tasksSeq    int64
	skills      counter
	mcp         counter
	model       string
	requested   string
	usage       *claudeUsage
	compactions int
	mem         int64
}

// counter counts names in the order first seen.
type counter struct {
	n     map[string]int
	order []string
}

func (c *counter) add(name string) {
	if c.n == nil {
		c.n = map[string]int{}
	}
	if _, ok := c.n[name]; !ok {
		if len(c.order) >= maxTracked {
			return
		}
		c.order = append(c.order, name)
	}
	c.n[name]++
}

func newClaudeState() *claudeState {
	return &claudeState{uses: map[string]*workUse{}, byTask: map[string]*workUse{}, omitted: map[string]int{},
		edits: map[string]pendingEdit{}, files: map[string]*apitypes.FileChange{}}
}

// toolInput is the union of the tool inputs the activity reads.
type toolInput struct {
	Description     string `json:"description"`
	Prompt          string `json:"prompt"`
	SubagentType    string `json:"subagent_type"`
	RunInBackground *bool  `json:"run_in_background"`
	Command         string `json:"command"`
	FilePath        string `json:"file_path"`
	NotebookPath    string `json:"notebook_path"`
	Content         string `json:"content"`
	OldString       string `json:"old_string"`
	NewString       string `json:"new_string"`
	NewSource       string `json:"new_source"`
	Edits           []struct {
		OldString string `json:"old_string"`
		NewString string `json:"new_string"`
	} `json:"edits"`
	Todos       []todoInput `json:"todos"`
	Subject     string      `json:"subject"`
	ActiveForm  string      `json:"activeForm"`
	TaskID      string      `json:"taskId"`
	TaskIDSnake string      `json:"task_id"`
	ShellID     string      `json:"shell_id"`
	Status      string      `json:"status"`
	Skill       string      `json:"skill"`
	Name        string      `json:"name"`
	Cron        string      `json:"cron"`
	ID          string      `json:"id"`
}

type todoInput struct {
	Content    string `json:"content"`
	Status     string `json:"status"`
	ActiveForm string `json:"activeForm"`
}

// track starts following a tool use.
func (st *claudeState) track(u *workUse) {
	if _, dup := st.uses[u.id]; dup {
		return
	}
	u.seq = st.seq
	st.uses[u.id] = u
	st.order = append(st.order, u)
	st.mem += 256 + int64(len(u.description)+len(u.command))
	if len(st.order) > maxTracked {
		st.dropFinished()
	}
}

// dropFinished forgets the oldest finished uses beyond the bound.
func (st *claudeState) dropFinished() {
	excess := len(st.order) - maxTracked*4/5
	kept := st.order[:0]
	for _, u := range st.order {
		if excess > 0 && u.state != "" {
			excess--
			delete(st.uses, u.id)
			if u.taskID != "" && st.byTask[u.taskID] == u {
				delete(st.byTask, u.taskID)
			}
			if u.agentID != "" && st.byTask[u.agentID] == u {
				delete(st.byTask, u.agentID)
			}
			st.omitted[u.kind]++
			st.mem -= 256 + int64(len(u.description)+len(u.command))
			continue
		}
		kept = append(kept, u)
	}
	clear(st.order[len(kept):])
	st.order = kept
}

// assistantRecord reads the model, the last request's usage and the tool
// uses of an assistant record.
func (st *claudeState) assistantRecord(rec *ClaudeRecord, at int64, sub bool) {
	m := rec.Message
	if !sub && m.Model != "" && m.Model != "<synthetic>" {
		st.model = m.Model
		st.usage = m.Usage
	}
	_, isString, bs := ClaudeBlocks(m.Content)
	if isString {
		return
	}
	for _, b := range bs {
		if b.Type != "tool_use" || b.ID == "" {
			continue
		}
		st.toolUse(b, at)
	}
}

// toolUse notes one tool call.
func (st *claudeState) toolUse(b ClaudeBlock, at int64) {
	var in toolInput
	_ = json.Unmarshal(b.Input, &in)
	switch name := b.Name; {
	case name == "Agent" || name == "Task":
		// 2.1.328's Agent runs in the background unless told otherwise;
		// the older Task tool ran in the foreground.
		bg := in.RunInBackground != nil && *in.RunInBackground || in.RunInBackground == nil && name == "Agent"
		desc := in.Description
		if desc == "" {
			desc = firstLine(in.Prompt)
		}
		st.track(&workUse{id: b.ID, kind: kindAgent, tool: name, description: short(desc, maxText),
			subagentType: in.SubagentType, background: bg, start: at})
	case name == "Bash":
		desc := in.Description
		st.track(&workUse{id: b.ID, kind: kindCommand, tool: name, description: short(desc, maxText),
			command: short(in.Command, maxText), background: in.RunInBackground != nil && *in.RunInBackground, start: at})
	case name == "Workflow":
		st.track(&workUse{id: b.ID, kind: kindWorkflow, tool: name, description: short(in.Description, maxText), start: at, background: true})
	case name == "CronCreate":
		desc := in.Prompt
		if in.Cron != "" {
			desc = in.Cron + " " + desc
		}
		st.track(&workUse{id: b.ID, kind: kindScheduled, tool: name, description: short(strings.TrimSpace(desc), maxText), start: at, background: true})
	case name == "CronDelete":
		for _, u := range st.order {
			if u.kind == kindScheduled && u.taskID != "" && u.taskID == in.ID && u.state == "" {
				u.state, u.end = StateStopped, at
			}
		}
	case name == "TaskStop" || name == "KillShell" || name == "KillBash":
		id := in.TaskIDSnake
		if id == "" {
			id = in.ShellID
		}
		st.edits["stop:"+b.ID] = pendingEdit{tool: name, path: id}
	case name == "Write" || name == "Edit" || name == "MultiEdit" || name == "NotebookEdit":
		pe := pendingEdit{tool: name, path: in.FilePath}
		switch name {
		case "Write":
			pe.added = lineCount(in.Content)
		case "Edit":
			pe.added, pe.removed = lineCount(in.NewString), lineCount(in.OldString)
		case "MultiEdit":
			for _, e := range in.Edits {
				pe.added += lineCount(e.NewString)
				pe.removed += lineCount(e.OldString)
			}
		case "NotebookEdit":
			pe.path = in.NotebookPath
			pe.added = lineCount(in.NewSource)
		}
		if pe.path != "" && len(st.edits) < maxTracked {
			st.edits[b.ID] = pe
		}
	case name == "TodoWrite":
		todos := make([]apitypes.Todo, 0, len(in.Todos))
		for _, t := range in.Todos {
			todos = append(todos, apitypes.Todo{Content: short(t.Content, maxText), Status: todoStatus(t.Status), ActiveForm: short(t.ActiveForm, maxText)})
		}
		st.todos, st.todosSeq = todos, st.seq
	case name == "TaskUpdate":
		st.taskUpdate(in)
	case name == "TaskCreate":
		st.edits["create:"+b.ID] = pendingEdit{tool: name, path: in.Subject + "\x00" + in.ActiveForm}
	case name == "Skill":
		if in.Skill != "" {
			st.skills.add(in.Skill)
		}
	case strings.HasPrefix(name, "mcp__"):
		if server, _, ok := strings.Cut(strings.TrimPrefix(name, "mcp__"), "__"); ok && server != "" {
			st.mcp.add(server)
		}
	}
}

func todoStatus(s string) string {
	switch s {
	case "in_progress", "inProgress", "in-progress":
		return "in_progress"
	case "completed", "done":
		return "completed"
	default:
		return "pending"
	}
}

// taskUpdate applies a TaskUpdate to the task list.
func (st *claudeState) taskUpdate(in toolInput) {
	for i, id := range st.taskIDs {
		if id != in.TaskID {
			continue
		}
		if in.Status == "deleted" {
			st.taskIDs = append(st.taskIDs[:i], st.taskIDs[i+1:]...)
			st.tasks = append(st.tasks[:i], st.tasks[i+1:]...)
		} else {
			t := &st.tasks[i]
			if in.Status != "" {
				t.Status = todoStatus(in.Status)
			}
			if in.Subject != "" {
				t.Content = short(in.Subject, maxText)
			}
			if in.ActiveForm != "" {
				t.ActiveForm = short(in.ActiveForm, maxText)
			}
		}
		st.tasksSeq = st.seq
		return
	}
}

// toolResultInfo is the union of the toolUseResult objects the activity reads.
type toolResultInfo struct {
	Status           string          `json:"status"`
	AgentID          string          `json:"agentId"`
	AgentType        string          `json:"agentType"`
	TaskID           string          `json:"taskId"`
	RunID            string          `json:"runId"`
	WorkflowName     string          `json:"workflowName"`
	Summary          string          `json:"summary"`
	Interrupted      bool            `json:"interrupted"`
	BackgroundTaskID string          `json:"backgroundTaskId"`
	Type             string          `json:"type"`
	FilePath         string          `json:"filePath"`
	Content          json.RawMessage `json:"content"`
	StructuredPatch  []struct {
		Lines []string `json:"lines"`
	} `json:"structuredPatch"`
	Task *struct {
		ID      string `json:"id"`
		Subject string `json:"subject"`
	} `json:"task"`
	ID string `json:"id"`
}

// userRecord reads the tool results of a user record.
func (st *claudeState) userRecord(rec *ClaudeRecord, at int64) {
	if rec.Origin != nil && rec.Origin.Kind == "task-notification" {
		st.notification(blockText(rec.Message.Content), at)
	}
	s, isString, bs := ClaudeBlocks(rec.Message.Content)
	if isString {
		if strings.HasPrefix(strings.TrimSpace(s), "<task-notification>") {
			st.notification(s, at)
		}
		return
	}
	var info toolResultInfo
	decoded, infoOK := false, false
	for _, b := range bs {
		if b.Type != "tool_result" || b.ToolUseID == "" || !st.follows(b.ToolUseID) {
			continue
		}
		// toolUseResult (a Read's whole file, a command's output) is only
		// decoded for a tool use the activity follows.
		if !decoded {
			decoded = true
			infoOK = len(rec.ToolUseResult) > 0 && rec.ToolUseResult[0] == '{' && json.Unmarshal(rec.ToolUseResult, &info) == nil
		}
		if b.IsError && rec.ToolDenialKind != "" {
			b.Text = "denied:" + rec.ToolDenialKind
		}
		st.toolResult(b, info, infoOK, at)
	}
}

// follows reports whether a tool use's result means something to the
// activity.
func (st *claudeState) follows(id string) bool {
	if _, ok := st.uses[id]; ok {
		return true
	}
	if _, ok := st.edits[id]; ok {
		return true
	}
	_, stop := st.edits["stop:"+id]
	_, create := st.edits["create:"+id]
	return stop || create
}

// toolResult settles a tracked tool use from its result.
func (st *claudeState) toolResult(b ClaudeBlock, info toolResultInfo, infoOK bool, at int64) {
	text := blockText(b.Content)
	if strings.HasPrefix(b.Text, "denied:") {
		text = b.Text // the record's toolDenialKind, which errorState reads
	}
	if pe, ok := st.edits[b.ToolUseID]; ok {
		delete(st.edits, b.ToolUseID)
		if !b.IsError {
			st.fileEdit(pe, info, infoOK)
		}
		return
	}
	if pe, ok := st.edits["stop:"+b.ToolUseID]; ok {
		delete(st.edits, "stop:"+b.ToolUseID)
		if u := st.byTask[pe.path]; u != nil && !b.IsError && u.state == "" {
			u.state, u.end = StateStopped, at
		}
		return
	}
	if pe, ok := st.edits["create:"+b.ToolUseID]; ok {
		delete(st.edits, "create:"+b.ToolUseID)
		if !b.IsError && infoOK && info.Task != nil && len(st.tasks) < maxTracked {
			subject, active, _ := strings.Cut(pe.path, "\x00")
			if info.Task.Subject != "" {
				subject = info.Task.Subject
			}
			st.taskIDs = append(st.taskIDs, info.Task.ID)
			st.tasks = append(st.tasks, apitypes.Todo{Content: short(subject, maxText), Status: "pending", ActiveForm: short(active, maxText)})
			st.tasksSeq = st.seq
		}
		return
	}
	u := st.uses[b.ToolUseID]
	if u == nil {
		return
	}
	switch u.kind {
	case kindAgent:
		if infoOK && info.AgentID != "" {
			u.agentID = info.AgentID
			st.byTask[info.AgentID] = u
		}
		if infoOK && info.AgentType != "" && u.subagentType == "" {
			u.subagentType = info.AgentType
		}
		switch {
		case infoOK && info.Status == "async_launched":
			u.background = true
		case infoOK && info.Status != "":
			u.background = false // it answered in its tool result: it ran in the foreground
			u.settle(taskState(info.Status), at)
		case b.IsError:
			u.settle(errorState(text), at)
		default:
			u.settle(StateCompleted, at)
		}
	case kindCommand:
		switch {
		case infoOK && info.BackgroundTaskID != "":
			u.background, u.taskID = true, info.BackgroundTaskID
			st.byTask[info.BackgroundTaskID] = u
		case infoOK && info.Interrupted:
			u.settle(StateStopped, at)
		case b.IsError:
			u.exitCode = exitCodeIn(text)
			u.settle(errorState(text), at)
		default:
			zero := 0
			u.exitCode = &zero
			u.settle(StateCompleted, at)
		}
	case kindWorkflow:
		if infoOK {
			u.taskID, u.runID, u.workflowName = info.TaskID, info.RunID, info.WorkflowName
			if info.Summary != "" && u.description == "" {
				u.description = short(info.Summary, maxText)
			}
			if info.TaskID != "" {
				st.byTask[info.TaskID] = u
			}
		}
		switch {
		case infoOK && info.Status == "async_launched":
		case infoOK && info.Status != "":
			u.settle(taskState(info.Status), at)
		case b.IsError:
			u.settle(StateFailed, at)
		}
	case kindScheduled:
		if b.IsError {
			u.settle(StateFailed, at)
			return
		}
		if infoOK && info.ID != "" {
			u.taskID = info.ID
		} else if id, ok := between(text, "job ", " "); ok {
			u.taskID = id
		}
	}
}

// settle records an outcome, unless the use already has a final one or
// the state is unknown.
func (u *workUse) settle(state string, at int64) {
	if state == "" {
		return
	}
	if u.state == "" || u.state == StateRunning || u.state == StateScheduled {
		u.state, u.end = state, at
	}
}

// errorState is the state of a tool use whose result is an error: stopped
// when the person interrupted, cancelled or rejected it (the record's
// toolDenialKind, or the interrupt marker in the result), failed otherwise
// (a permission rule refusing it included).
func errorState(text string) string {
	switch text {
	case "denied:interrupted", "denied:cancelled", "denied:user-rejected":
		return StateStopped
	case "denied:permission-rule":
		return StateFailed
	}
	if strings.Contains(strings.ToLower(text), "interrupted") {
		return StateStopped
	}
	return StateFailed
}

// taskState maps a Claude Code task status to R-ACT-3.
func taskState(s string) string {
	switch strings.ToLower(s) {
	case "completed", "done", "success":
		return StateCompleted
	case "failed", "error", "errored":
		return StateFailed
	case "killed", "stopped", "cancelled", "canceled", "aborted", "interrupted", "paused":
		return StateStopped
	case "running", "in_progress", "started":
		return StateRunning
	case "pending", "queued", "scheduled":
		return StateScheduled
	}
	return ""
}

// notification reads a <task-notification> (a background command, agent
// or workflow that ended) and settles the use it names.
func (st *claudeState) notification(s string, at int64) {
	if !strings.Contains(s, "<task-notification>") {
		return
	}
	status, _ := between(s, "<status>", "</status>")
	state := taskState(strings.TrimSpace(status))
	if state == "" {
		return
	}
	var u *workUse
	if id, ok := between(s, "<tool-use-id>", "</tool-use-id>"); ok {
		u = st.uses[strings.TrimSpace(id)]
	}
	if u == nil {
		if id, ok := between(s, "<task-id>", "</task-id>"); ok {
			u = st.byTask[strings.TrimSpace(id)]
		}
	}
	if u != nil {
		u.settle(state, at)
	}
}

// fileEdit counts a file change from the tool's result, or from its input
// when the result carries no patch.
func (st *claudeState) fileEdit(pe pendingEdit, info toolResultInfo, infoOK bool) {
	path := pe.path
	if infoOK && info.FilePath != "" {
		path = info.FilePath
	}
	if path == "" {
		return
	}
	fc := st.files[path]
	if fc == nil {
		if len(st.fileOrder) >= maxChangedFiles {
			st.filesOver++
			return
		}
		fc = &apitypes.FileChange{Path: path}
		st.files[path] = fc
		st.fileOrder = append(st.fileOrder, path)
		st.mem += 96 + int64(len(path))
	}
	switch {
	case infoOK && info.Type == "create":
		fc.Created = true
		fc.Added += lineCount(rawString(info.Content))
	case infoOK && len(info.StructuredPatch) > 0:
		for _, h := range info.StructuredPatch {
			for _, l := range h.Lines {
				switch {
				case strings.HasPrefix(l, "+"):
					fc.Added++
				case strings.HasPrefix(l, "-"):
					fc.Removed++
				}
			}
		}
	case infoOK && info.Type == "update":
		// A Write over an existing file without a patch: count its lines.
		fc.Added += lineCount(rawString(info.Content))
	default:
		fc.Added += pe.added
		fc.Removed += pe.removed
	}
}

// rawString is a JSON string value, "" for anything else.
func rawString(raw json.RawMessage) string {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}
