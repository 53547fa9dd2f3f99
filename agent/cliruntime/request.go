package cliruntime

import (
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"
)

// RequestKind says what a tool asks a person (people in the loop,
// docs/rules/requests.md).
type RequestKind string

// The request kinds (R-REQ-1).
const (
	// RequestCommand: run a shell command (Detail: Command, Cwd).
	RequestCommand RequestKind = "command"
	// RequestFileChange: write or edit files (Detail: Files, Diff).
	RequestFileChange RequestKind = "file_change"
	// RequestPermission: use a tool or a capability that is neither (a
	// web fetch, more sandbox access; Detail: Input).
	RequestPermission RequestKind = "permission"
	// RequestQuestion: the tool asks the person a question (Detail:
	// Question; Options are the choices, Text that free text is taken).
	RequestQuestion RequestKind = "question"
	// RequestElicitation: a tool server asks for structured input (MCP
	// elicitation; Detail: Question, and Input the schema or URL).
	RequestElicitation RequestKind = "elicitation"
)

// Decision is how an option answers a request.
type Decision string

// The decisions.
const (
	DecisionAllow  Decision = "allow"
	DecisionDeny   Decision = "deny"
	DecisionAnswer Decision = "answer" // a question answered (a choice or text)
)

// Option is one answer the tool offers. ID is the tool's own option id
// where it has them (ACP optionId, a Codex decision), else the driver's
// ("allow_once", "allow_session", "deny").
type Option struct {
	ID       string   `json:"id"`
	Label    string   `json:"label"`
	Decision Decision `json:"decision"`
	// Session: allowing it also allows the same use for the rest of the
	// tool's session.
	Session bool `json:"session,omitempty"`
}

// The option ids drivers use when the tool has none of its own.
const (
	OptionAllowOnce    = "allow_once"
	OptionAllowSession = "allow_session"
	OptionDeny         = "deny"
	// OptionText answers a question in the person's own words
	// (Answer.Text); offered where the tool takes free text.
	OptionText = "text"
)

// Request is a question a tool asked over its protocol and waits on. A
// Session reports it as EventRequest and takes its answer through Answer;
// until then the tool's turn waits.
type Request struct {
	// ID is the tool's id for the request (a control request id, a
	// JSON-RPC id), unique among the session's open requests.
	ID   string      `json:"id"`
	Kind RequestKind `json:"kind"`
	// Tool is the name of what the tool wants to use (Claude Code's Bash or
	// Edit, Codex's commandExecution, an ACP tool call's kind).
	Tool  string `json:"tool,omitempty"`
	Title string `json:"title"`
	// Command and Cwd: a command request. Files and Diff: a file change
	// (the diff when the tool gives one). Question: a question or
	// elicitation. Input: the tool's own arguments, for what the fields
	// above do not say.
	Command  string          `json:"command,omitempty"`
	Cwd      string          `json:"cwd,omitempty"`
	Files    []string        `json:"files,omitempty"`
	Diff     string          `json:"diff,omitempty"`
	Question string          `json:"question,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
	Options  []Option        `json:"options"`
	// Text: the request takes a free-text answer.
	Text bool `json:"text,omitempty"`
	// ToolUseID is the tool's id of the tool use the request is about,
	// when it names one (Claude Code's tool_use_id): a later refusal of
	// the same use (EventDenied) is that request's, not a new one.
	ToolUseID string `json:"tool_use_id,omitempty"`
}

// Option returns the option with id, and whether there is one.
func (r *Request) Option(id string) (Option, bool) {
	for _, o := range r.Options {
		if o.ID == id {
			return o, true
		}
	}
	return Option{}, false
}

// First returns the first option with decision d (the "once" one where
// the tool offers several), and whether there is one.
func (r *Request) First(d Decision) (Option, bool) {
	for _, o := range r.Options {
		if o.Decision == d && !o.Session {
			return o, true
		}
	}
	for _, o := range r.Options {
		if o.Decision == d {
			return o, true
		}
	}
	return Option{}, false
}

// Answer is what a person, a policy rule or the timeout decided. OptionID
// is one of the request's options (the supervisor checks it); Text is a
// question's free-text answer; Message tells the tool why a request was
// denied.
type Answer struct {
	OptionID string
	Text     string
	Message  string
}

// Denial is a tool use the tool refused on its own, without asking
// (Claude Code's permission_denials): reported so that no refusal is
// silent.
type Denial struct {
	Tool      string `json:"tool"`
	ToolUseID string `json:"tool_use_id,omitempty"`
	Message   string `json:"message,omitempty"`
	// Input is the tool use's arguments as the tool gave them.
	Command string `json:"command,omitempty"`
}

// ErrNoSuchRequest: Answer was given an id the session has no open request
// for (answered already, withdrawn, or never asked).
var ErrNoSuchRequest = errors.New("cliruntime: the tool has no open request with this id")

// ErrBadAnswer: the answer does not fit the request (an option it does not
// offer, text for a request that takes none).
var ErrBadAnswer = errors.New("cliruntime: the answer does not fit the request")

// MaxRequestDetail bounds each text field of a Request a driver reports (a
// diff, a command): a longer one is cut at a rune boundary.
const MaxRequestDetail = 16 << 10

// Title is s on one line (runs of white space made one space), cut to 200
// bytes at a rune boundary with an ellipsis: a request's title.
func Title(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		n := 200
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}

// Lines splits s into its lines, without a final empty one; nil for "".
func Lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// Clip cuts s to at most MaxRequestDetail bytes at a rune boundary.
func Clip(s string) string {
	if len(s) <= MaxRequestDetail {
		return s
	}
	n := MaxRequestDetail
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
