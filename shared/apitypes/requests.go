package apitypes

import (
	"encoding/json"
	"time"
)

// Request kinds (R-REQ-1).
const (
	RequestCommand     = "command"
	RequestFileChange  = "file_change"
	RequestPermission  = "permission"
	RequestQuestion    = "question"
	RequestElicitation = "elicitation"
)

// Request states and decisions (R-REQ-1, R-REQ-2).
const (
	RequestPending = "pending"
	RequestSettled = "settled"
	RequestExpired = "expired"

	DecisionAllow  = "allow"
	DecisionDeny   = "deny"
	DecisionAnswer = "answer"

	// Who settled a request other than a person (a principal id).
	ByPolicy  = "policy"
	ByTimeout = "timeout"
	ByTool    = "tool"
)

// RunRequest is a question a run's tool asked and waits on, or asked and
// had settled (R-REQ-1): a command to run, files to change, a permission, a
// question or an elicitation.
type RunRequest struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Tool is what the tool wants to use (Bash, Edit, commandExecution, an
	// ACP tool call's kind).
	Tool       string          `json:"tool,omitempty"`
	Title      string          `json:"title"`
	Detail     RequestDetail   `json:"detail"`
	Options    []RequestOption `json:"options"`
	Generation uint32          `json:"generation"`
	AskedAt    time.Time       `json:"asked_at"`
	ExpiresAt  *time.Time      `json:"expires_at,omitempty"`

	State string `json:"state"` // pending | settled | expired
	// Decision, OptionID, By and At are set once settled; By is a
	// principal id, "policy", "timeout" or "tool". Reason says why when a
	// rule, the timeout, the tool or an expiry settled it.
	Decision string `json:"decision,omitempty"`
	OptionID string `json:"option_id,omitempty"`
	By       string `json:"by,omitempty"`
	// ByName is the name of the person By names, as they were called
	// when they answered (R-CON-7).
	ByName string     `json:"by_name,omitempty"`
	At     *time.Time `json:"at,omitempty"`
	Reason string     `json:"reason,omitempty"`
}

// RequestDetail is what a person needs to decide (R-REQ-1): the command
// and its directory, the files and the diff, the question. Input is the
// tool's own arguments (JSON) when the fields do not say it all.
type RequestDetail struct {
	Command  string          `json:"command,omitempty"`
	Cwd      string          `json:"cwd,omitempty"`
	Files    []string        `json:"files,omitempty"`
	Diff     string          `json:"diff,omitempty"`
	Question string          `json:"question,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
	// Text: the request takes a free-text answer (a question).
	Text bool `json:"text,omitempty"`
}

// RequestOption is one answer the tool offers: allow once, allow for the
// tool's session, deny, or the tool's own option ids.
type RequestOption struct {
	ID       string `json:"id"`
	Label    string `json:"label"`
	Decision string `json:"decision"` // allow | deny | answer
	Session  bool   `json:"session,omitempty"`
}

// RequestList is GET /runs/{ref}/requests: the pending requests, oldest
// first, then the last settled ones, newest first (R-REQ-2).
type RequestList struct {
	Items []RunRequest `json:"items"`
}

// RequestAnswer is POST /runs/{ref}/requests/{id} (R-REQ-2). Decision is
// allow, deny or answer; OptionID picks one of the request's options (it
// must be one with that decision); Text is a question's answer.
type RequestAnswer struct {
	Decision string `json:"decision"`
	OptionID string `json:"option_id,omitempty"`
	Text     string `json:"text,omitempty"`
	// ByName is never read from the body: the node gets the answerer's
	// name beside it (proto.RunAnswer) and keeps it on the request.
	ByName string `json:"-"`
}

// LastError is a run's last_error (R-LERR-1).
type LastError struct {
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}
