package apitypes

// The read side of a run (R-ACT-1, R-AGT-1, R-MSG-2): what it is doing and
// what was said in it, read on its node from the tool's own transcript
// (agent/transcript produces these; the coordinator passes them through).

// TranscriptState is what became of the tool's native record on a read
// (R-ACT-1, R-MSG-2).
type TranscriptState string

const (
	// TranscriptRead: the record was found and read.
	TranscriptRead TranscriptState = "read"
	// TranscriptPending: the tool has not written it yet (no conversation
	// id yet, or a live run whose file does not exist yet).
	TranscriptPending TranscriptState = "pending"
	// TranscriptMissing: the run is not live, has a conversation id, and
	// the file does not exist.
	TranscriptMissing TranscriptState = "missing"
)

// States of agents, tasks and workflow phases (R-ACT-3).
const (
	WorkRunning   = "running"
	WorkCompleted = "completed"
	WorkFailed    = "failed"
	WorkStopped   = "stopped"
	WorkScheduled = "scheduled"
)

// Activity is GET /runs/{ref}/activity (R-ACT-1): what a run is doing,
// read fresh from the tool's native record at every request (R-ACT-2).
// Every list is present, possibly empty; unknown numbers are null.
type Activity struct {
	Agents     []ActivityAgent `json:"agents"`
	Tasks      []ActivityTask  `json:"tasks"`
	Files      []FileChange    `json:"files"`
	Todos      []Todo          `json:"todos"`
	Skills     []Skill         `json:"skills"`
	MCPServers []MCPServer     `json:"mcp_servers"`
	Model      *string         `json:"model"`
	// ContextTokens describe the last request, not cumulative use
	// (R-ACT-4). Claude Code: input + cache read + cache creation tokens of
	// the last main-chain request. Codex: last_token_usage.total_tokens,
	// the figure Codex's own context meter uses.
	ContextTokens *int64 `json:"context_tokens"`
	// ContextWindow and ContextPercent: for Claude Code from the window
	// report, only when it is unambiguous (R-ACT-7, R-ACT-9); for Codex
	// from the rollout's model_context_window.
	ContextWindow  *int64          `json:"context_window"`
	ContextPercent *float64        `json:"context_percent"`
	Compactions    int             `json:"compactions"`
	Transcript     TranscriptState `json:"transcript"`
	// Unreadable counts what could not be read: workflow summaries that
	// are missing, too large or broken, gaps in the live progress buffer
	// (R-WF-9, Q-23), and transcript records passed over.
	Unreadable int `json:"unreadable"`
	// AgentsOmitted, TasksOmitted and FilesOmitted count the oldest
	// finished entries a long session no longer lists.
	AgentsOmitted int `json:"agents_omitted,omitempty"`
	TasksOmitted  int `json:"tasks_omitted,omitempty"`
	FilesOmitted  int `json:"files_omitted,omitempty"`
}

// ActivityAgent is a sub-agent (R-ACT-1, R-ACT-3).
type ActivityAgent struct {
	// ID is the agent id GET /activity/agents/{agent} takes: Claude Code's
	// agent id (the tool_use id until the tool reports one), Codex's child
	// thread id.
	ID string `json:"id"`
	// Type is Claude Code's subagent_type, or "workflow"; Name is a Codex
	// child's nickname.
	Type        string `json:"type,omitempty"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	State       string `json:"state"` // a Work* state
	Background  bool   `json:"background,omitempty"`
	// Workflow is the run id of the workflow the agent belongs to.
	Workflow  string `json:"workflow,omitempty"`
	Phase     int    `json:"phase,omitempty"`
	StartedAt string `json:"started_at,omitempty"`
	EndedAt   string `json:"ended_at,omitempty"`
}

// Task kinds.
const (
	TaskCommand           = "command"
	TaskBackgroundCommand = "background_command"
	TaskWorkflow          = "workflow"
	TaskScheduled         = "scheduled"
)

// ActivityTask is a command or a piece of background work (R-ACT-1,
// R-ACT-3).
type ActivityTask struct {
	ID          string            `json:"id"`
	Kind        string            `json:"kind"` // a Task* kind
	Description string            `json:"description,omitempty"`
	Command     string            `json:"command,omitempty"`
	State       string            `json:"state"` // a Work* state
	ExitCode    *int              `json:"exit_code,omitempty"`
	Agent       string            `json:"agent,omitempty"` // the sub-agent that ran it
	StartedAt   string            `json:"started_at,omitempty"`
	EndedAt     string            `json:"ended_at,omitempty"`
	Workflow    *ActivityWorkflow `json:"workflow,omitempty"`
}

// ActivityWorkflow is a workflow task's progress (R-WF-1..5).
type ActivityWorkflow struct {
	RunID        string          `json:"run_id"`
	Name         string          `json:"name"`
	DurationMS   int64           `json:"duration_ms"`
	AgentsTotal  int             `json:"agents_total"`
	AgentsDone   int             `json:"agents_done"`
	AgentsFailed int             `json:"agents_failed"`
	Phases       []WorkflowPhase `json:"phases"`
}

// WorkflowPhase is one phase of a workflow (R-WF-2; state always present,
// D-01).
type WorkflowPhase struct {
	Index        int    `json:"index"`
	Title        string `json:"title"`
	Detail       string `json:"detail,omitempty"`
	State        string `json:"state"` // a Work* state
	AgentsTotal  int    `json:"agents_total"`
	AgentsDone   int    `json:"agents_done"`
	AgentsFailed int    `json:"agents_failed"`
}

// FileChange is a file the run changed: lines added and removed, and
// whether the run created it. Path is relative to the run's working
// directory when inside it.
type FileChange struct {
	Path    string `json:"path"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
	Created bool   `json:"created"`
}

// Todo is one entry of the run's todo list or plan; Status is pending,
// in_progress or completed.
type Todo struct {
	Content    string `json:"content"`
	Status     string `json:"status"`
	ActiveForm string `json:"active_form,omitempty"`
}

// Skill is a skill the run invoked, with how often.
type Skill struct {
	Name string `json:"name"`
	Uses int    `json:"uses"`
}

// MCPServer is an MCP server the run has (Status, from Claude Code's init
// frame) or called (Calls).
type MCPServer struct {
	Name   string `json:"name"`
	Status string `json:"status,omitempty"`
	Calls  int    `json:"calls"`
}

// SubAgentTurn is one turn of a sub-agent transcript (R-AGT-1): its text,
// clipped like a message text (R-MSG-8).
type SubAgentTurn struct {
	Role    string `json:"role"`
	Text    string `json:"text"`
	Clipped bool   `json:"clipped,omitempty"`
}

// SubAgentTurns is GET /runs/{ref}/activity/agents/{agent} (R-AGT-1).
type SubAgentTurns struct {
	Agent   string         `json:"agent"`
	Turns   []SubAgentTurn `json:"turns"`
	Omitted int            `json:"omitted,omitempty"`
}

// MaxMessageText is where a message or turn text is clipped, in bytes
// (R-MSG-8, R-MSG-14).
const MaxMessageText = 65536

// Message roles, and the role filter's values of GET /messages.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleAll       = "all"
)

// MessageItem is one message of a page (R-MSG-2, R-MSG-8).
type MessageItem struct {
	ID        int     `json:"id"`
	Role      string  `json:"role"`
	At        string  `json:"at,omitempty"`
	FirstLine string  `json:"first_line"`
	Text      *string `json:"text,omitempty"`
	Clipped   bool    `json:"clipped,omitempty"`
}

// MessagesPage is a GET /runs/{ref}/messages list response (R-MSG-2).
type MessagesPage struct {
	Items []MessageItem `json:"items"`
	// Total is the number of messages matching role, q and at (R-MSG-15).
	Total int `json:"total"`
	// Next is the id the following page starts from (R-MSG-13), absent on
	// the last page.
	Next       *int            `json:"next,omitempty"`
	Transcript TranscriptState `json:"transcript"`
}

// MessageRead is a GET /runs/{ref}/messages?id= response (R-MSG-7).
type MessageRead struct {
	ID        int    `json:"id"`
	Role      string `json:"role"`
	At        string `json:"at,omitempty"`
	FirstLine string `json:"first_line"`
	Text      string `json:"text"`
	// LaterSame counts the later messages of the same role with the same
	// first line (R-MSG-15).
	LaterSame int  `json:"later_same"`
	Clipped   bool `json:"clipped,omitempty"`
	// Total is the number of messages in the session (R-MSG-7).
	Total      int             `json:"total"`
	Transcript TranscriptState `json:"transcript"`
}

// Whoami is GET /v1/whoami: the caller, in the tenant it asked for.
type Whoami struct {
	PrincipalID string   `json:"principal_id"`
	Name        string   `json:"name"`
	Kind        string   `json:"kind"`
	Tenant      string   `json:"tenant"`
	Role        string   `json:"role"`
	Permissions []string `json:"permissions"`
}
