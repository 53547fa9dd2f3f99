package cliruntime

import (
	"encoding/json"
	"time"
)

// Kind names a driver (R-DRV-1).
type Kind string

// The contract's driver kinds.
const (
	KindClaude Kind = "claude"
	KindCodex  Kind = "codex"
	KindGrok   Kind = "grok"
)

// The optional launch drivers Q-36 allows, held to the same conformance:
// Gemini CLI (`gemini --acp`) and OpenCode (`opencode acp`), both ACP.
const (
	KindGemini   Kind = "gemini"
	KindOpenCode Kind = "opencode"
)

// LaunchTransport says which runner a driver's launch form needs (R-TR-1):
// "stdio" is sessions.NewProcRunner (three pipes), "pty" is
// sessions.NewPTYRunner. The three contract drivers all declare stdio (R-TR-2).
type LaunchTransport string

// The transports.
const (
	TransportStdio LaunchTransport = "stdio"
	TransportPTY   LaunchTransport = "pty"
)

// LaunchSpec is what a driver needs to build a command line and a Session.
type LaunchSpec struct {
	// Binary is the program. When empty it is the tool's own name ("claude",
	// "codex", "grok", "gemini", "opencode"), which the runner looks up in
	// the child's PATH, never in the agent's.
	Binary string `json:"binary,omitempty"`
	// Home is the provider profile's home, an absolute path. It becomes the
	// child's HOME, and the tool's config home lives under it
	// (CLAUDE_CONFIG_DIR=Home/.claude, CODEX_HOME=Home/.codex,
	// GROK_HOME=Home/.grok, GEMINI_CLI_HOME=Home: Gemini CLI keeps
	// Home/.gemini; OpenCode keeps its XDG directories under Home). The
	// driver never creates it.
	Home string `json:"home"`
	// Workdir is the directory the tool works in (the worktree for worktree
	// runs, R-RES-3), an absolute path. It is the child's working directory
	// and, for the JSON-RPC tools, the cwd sent in the handshake.
	Workdir string `json:"workdir"`
	// Env holds extra KEY=VALUE entries from the profile (API keys, base
	// URLs). They may override PATH, TERM and LANG but not the variables
	// the driver derives from Home (ErrReservedEnv). When empty, the child
	// gets only the driver's base environment.
	Env []string `json:"env,omitempty"`
	// ConversationID is the stored conversation to resume. It is empty for a
	// launch and required by Resume (ErrNoConversation).
	ConversationID string `json:"conversation_id,omitempty"`
	// IsolateSettings launches Claude Code with --setting-sources "" so that
	// it reads no settings file and no CLAUDE.md (R-PCS-15: set for a session
	// that carries the engine's hooks). Other drivers ignore it. When false
	// the profile home's own settings decide (real-clis.md §1.5).
	IsolateSettings bool `json:"isolate_settings,omitempty"`
	// EngineHook, when set, is the engine's PreToolUse hook command: Claude
	// Code gets it through --settings, which it honours even with
	// --setting-sources "" (measured on 2.1.328), so every tool use passes
	// the engine's policy point (R-ED-4). Other drivers ignore it.
	EngineHook string `json:"engine_hook,omitempty"`
	// RunRef is the run the spec is for. Drivers that keep per-run state
	// outside the spec (a Codex supervision branch, R-CX-FT-*) look it up by
	// it; the others ignore it. It is empty for a dry run.
	RunRef string `json:"run_ref,omitempty"`
}

// Command is a child to start; it maps field for field onto sessions.Spec.
type Command struct {
	// Path is the program: LaunchSpec.Binary, or the tool's name.
	Path string `json:"path"`
	// Args are the arguments after the program name.
	Args []string `json:"args"`
	// Env is the child's complete environment, built from scratch: PATH,
	// HOME, TERM, LANG, the XDG directories and the tool's config home under
	// LaunchSpec.Home, then LaunchSpec.Env. Nothing comes from the agent.
	Env []string `json:"env"`
	// Dir is the working directory: LaunchSpec.Workdir.
	Dir string `json:"dir"`
}

// InputField names a field of POST /runs/{ref}/input (R-IN-2).
type InputField string

// The input fields.
const (
	FieldLine    InputField = "line"
	FieldMessage InputField = "message"
	FieldText    InputField = "text"
)

// Input is one POST /runs/{ref}/input body (R-IN-1, R-IN-2). Exactly one field
// is set; which ones a driver takes is its own (claude: line or message;
// codex, grok: text).
type Input struct {
	// Line is one stream-json NDJSON line, without its newline, forwarded
	// verbatim. It must be one JSON object and hold no CR or LF.
	Line json.RawMessage `json:"line,omitempty"`
	// Message is user content that the driver wraps into a stream-json user
	// message: a JSON string, or a JSON array of content blocks
	// (real-clis.md §1.1). It is raw JSON rather than a Go string because
	// content may be an array.
	Message json.RawMessage `json:"message,omitempty"`
	// Text is plain user text that the driver turns into a protocol turn.
	Text string `json:"text,omitempty"`
	// By and Name say who sent it (a principal id and their name); the
	// supervisor records them with the input in the run's output
	// (R-ATT-11). Drivers ignore them.
	By   string `json:"-"`
	Name string `json:"-"`
}

// EventKind is what a driver learned from the child.
type EventKind string

// The event kinds.
const (
	// EventConversation: the tool named its conversation (Claude
	// system/init session_id, Codex thread id, ACP sessionId). Emitted once,
	// and again only if the id changes.
	EventConversation EventKind = "conversation"
	// EventConversationUnavailable: the stored conversation cannot be
	// resumed; the supervisor answers 409 conversation_unavailable and never
	// falls back to a new one (R-RES-2). ConversationID is the id asked for.
	EventConversationUnavailable EventKind = "conversation_unavailable"
	// EventReady: the handshake completed, but by design no conversation
	// exists yet (a Codex supervision branch creates its thread on the
	// first turn, R-CX-FT-1). The process takes input.
	EventReady EventKind = "ready"
	// EventTurnStarted: a turn began. TurnID is set where the tool names turns.
	EventTurnStarted EventKind = "turn_started"
	// EventTurnEnded: a turn ended. IsError and Reason say how: Reason is the
	// tool's own word (Claude terminal_reason, Codex turn status, ACP
	// stopReason). An interrupted turn ends with IsError true.
	EventTurnEnded EventKind = "turn_ended"
	// EventLimit: the turn ended on a usage or rate limit (R-LIM-1..6). It
	// precedes that turn's EventTurnEnded.
	EventLimit EventKind = "limit"
	// EventReplayStarted and EventReplayEnded bracket the history a tool
	// replays over stdout at resume (R-HW-4). Lines observed between them are
	// replay. ACP tools only: Claude and Codex replay nothing (R-HW-5).
	EventReplayStarted EventKind = "replay_started"
	EventReplayEnded   EventKind = "replay_ended"
	// EventError: the tool reported an error outside a turn's end (a failed
	// request, a control_response error, a non-retried error notification,
	// a request olivares refused to answer).
	EventError EventKind = "error"
	// EventRequest: the tool asks a person and waits (Request is set); the
	// answer goes back through Session.Answer (R-REQ-1).
	EventRequest EventKind = "request"
	// EventRequestWithdrawn: the tool no longer waits on request RequestID
	// (its turn was interrupted, or it resolved the request itself).
	EventRequestWithdrawn EventKind = "request_withdrawn"
	// EventDenied: the tool refused a tool use on its own, without asking
	// (Denial is set; R-REQ-9).
	EventDenied EventKind = "denied"
	// EventRetrying: the tool lost its model provider and retries on its
	// own (Codex "Reconnecting... 2/5"); Error says what it reports.
	EventRetrying EventKind = "retrying"
)

// Error kinds a driver puts in Event.ErrorKind, for the run's last_error
// (R-LERR-1). An empty ErrorKind on a failed turn is ErrorTurnFailed.
const (
	ErrorAuth        = "auth"         // the provider refused the credentials (401, 403)
	ErrorProvider    = "provider"     // the provider failed (5xx, overloaded, bad answer)
	ErrorConnection  = "connection"   // the provider could not be reached
	ErrorRateLimit   = "rate_limit"   // a usage or rate limit (the run's limit says more)
	ErrorTurnFailed  = "turn_failed"  // the turn failed for another reason
	ErrorTool        = "tool"         // the tool reported an error outside a turn's end
	ErrorRetrying    = "reconnecting" // the tool retries on its own and has not recovered yet
	ErrorInterrupted = "interrupted"  // a turn a person interrupted: not an error of the run
)

// LimitKind is the kind of a limit (R-LIM-2).
type LimitKind string

// The limit kinds.
const (
	LimitUsage LimitKind = "usage"
	LimitRate  LimitKind = "rate"
)

// Limit is a limit fact (R-LIM-1). Dropping a reset more than a year ahead
// (R-LIM-3) and the account_ref (R-LIM-4) are the supervisor's: it has the
// clock and the profile.
type Limit struct {
	Kind LimitKind `json:"kind"`
	// ResetsAt is when the tool says the limit lifts, nil when it does not say.
	ResetsAt *time.Time `json:"resets_at,omitempty"`
}

// Event is one fact a Session learned.
type Event struct {
	Kind           EventKind `json:"kind"`
	ConversationID string    `json:"conversation_id,omitempty"`
	TurnID         string    `json:"turn_id,omitempty"`
	IsError        bool      `json:"is_error,omitempty"`
	Reason         string    `json:"reason,omitempty"`
	Error          string    `json:"error,omitempty"`
	Limit          *Limit    `json:"limit,omitempty"`
	// Text is set on an EventTurnEnded that went well by the drivers that
	// know the turn's last assistant message (Claude Code, Codex): the
	// list's preview (R-LIST-8).
	Text string `json:"text,omitempty"`
	// Usage is set on EventTurnEnded when the tool reported the turn's
	// tokens, cost or rate-limit windows (R-USE-1).
	Usage *TurnUsage `json:"usage,omitempty"`
	// ErrorKind classifies Error on a failed turn or an EventError (the
	// Error* constants); "" when the driver cannot tell.
	ErrorKind string `json:"error_kind,omitempty"`
	// Request is set on EventRequest, RequestID on EventRequestWithdrawn,
	// Denial on EventDenied.
	Request   *Request `json:"request,omitempty"`
	RequestID string   `json:"request_id,omitempty"`
	Denial    *Denial  `json:"denial,omitempty"`
	// HandshakeRefused is set on the EventError that ends a launch's
	// handshake (initialize, the new session or its authentication
	// refused): the process takes no input, and the run fails with
	// handshake_failed instead of staying starting (issue 32 finding 3).
	HandshakeRefused bool `json:"handshake_refused,omitempty"`
	// Raw is a copy of the stdout line the event came from; nil for events
	// a Session makes itself (an ACP turn start).
	Raw json.RawMessage `json:"raw,omitempty"`
}

// Step is the outcome of one Session call: lines to write to the child's
// stdin, in order, and the events learned, in order.
type Step struct {
	// Write holds complete lines, each ending in '\n'.
	Write [][]byte
	// Events are in the order the facts were learned.
	Events []Event
}

// Driver is one vendor CLI's protocol (R-DRV-6). Implementations are
// stateless and safe for concurrent use.
type Driver interface {
	Kind() Kind
	// LaunchTransport is the runner the launch form needs (R-TR-1).
	LaunchTransport() LaunchTransport
	// Launch is the command line of a new conversation. It refuses a spec
	// with a ConversationID (ErrUnexpectedConversation): a launch is never a
	// resume in disguise.
	Launch(spec LaunchSpec) (Command, error)
	// Resume is the command line that continues exactly
	// spec.ConversationID (R-RES-1). It fails with ErrNoConversation when
	// the id is empty, and never returns a launch instead (R-RES-2).
	Resume(spec LaunchSpec) (Command, error)
	// CheckInput validates in without a live process: ErrWrongInputField for
	// a field this driver does not take, ErrInvalidInput otherwise (R-IN-2).
	CheckInput(in Input) error
	// NewSession returns the protocol state of one process started from
	// Launch(spec) or Resume(spec) (a non-empty spec.ConversationID means
	// resume). The spec must be one Launch or Resume accepted.
	NewSession(spec LaunchSpec) Session
}

// Session is the protocol state machine of one child process. It does no I/O:
// the caller writes Step.Write to the child's stdin and gives Observe every
// stdout line. A Session is safe for concurrent use; to keep the lines of
// different calls in call order, the caller makes the call and queues its
// writes under one lock, and hands them to a stdin writer goroutine (never
// writes from the stdout reader itself, which could deadlock against a child
// blocked on a full stdout).
type Session interface {
	// Start is what to write right after spawn (Codex and ACP: initialize;
	// the rest of the handshake follows from Observe). Call it once.
	Start() Step
	// Encode turns one input into protocol lines (R-IN-1). Errors are
	// CheckInput's, and ErrHandshakeFailed once the tool has refused the
	// handshake. An input given before the handshake is done, or while a
	// turn runs on a tool that cannot queue (Codex, ACP), is queued and
	// written by a later Observe; ErrInputQueueFull caps that queue.
	Encode(in Input) (Step, error)
	// Interrupt cancels the active turn (R-INT-1). active is false when no
	// turn was running or queued: an accepted no-op that writes nothing
	// (R-INT-2). An interrupt given before the tool has named the turn is
	// remembered and written once it does.
	Interrupt() (s Step, active bool)
	// Observe reads one stdout line (with or without its newline). A line
	// that is not the protocol's JSON is ignored. It never panics.
	Observe(line []byte) Step
	// ConversationID is the conversation the tool has confirmed, "" until it
	// has.
	ConversationID() string
	// TurnActive reports whether an input has been accepted whose turn has
	// not ended (running or queued).
	TurnActive() bool
	// Answer answers the open request id (from an EventRequest) in the
	// shape the tool expects: ErrNoSuchRequest when none is open with that
	// id, ErrBadAnswer when a.OptionID is not one of its options. The
	// request is closed once answered.
	Answer(id string, a Answer) (Step, error)
}

// Adopter is a Session that can take over a live process another agent
// started and handshook (issue 30: the process outlived that agent under
// its holder). Adopt is called in place of Start on a session made from
// the spec of the process's conversation (ConversationID set); it returns
// what to write to learn the protocol state the previous agent kept (Codex:
// the thread's newest turn, to know the turn in flight). Until the tool has
// answered, the session queues input and TurnActive is true; the answer
// yields EventConversation (and EventTurnStarted for a turn in flight).
//
// A session that writes nothing at Start (Claude Code's stream-json form)
// needs no Adopter: a fresh session takes its process over as it is. It
// cannot ask its tool whether a turn runs, so the supervisor reads the
// generation's retained output through a scratch session of the same
// driver, and tells a MidTurner it adopted a tool in the middle of a turn.
type Adopter interface {
	Adopt() Step
}

// MidTurner is a session that can be told its tool is in a turn it did not
// see start (an adoption, issue 30): TurnActive is true until that turn's
// end, and the step yields EventTurnStarted.
type MidTurner interface {
	MidTurn() Step
}

// Replayer is an Adopter whose tool can be asked nothing about its state
// and whose protocol state is not in its output alone (the ACP tools: the
// client numbers its requests, and a prompt's end is the answer to one).
// Such a session, once it went through Start, is deterministic: the same
// lines read and inputs encoded give the same state. So the supervisor
// replays the generation from its start through a scratch session of the
// same driver (its output lines with Observe, the inputs people sent with
// Encode, in the order the output holds them; nothing is written) and the
// adopting session takes the scratch's state with AdoptFrom, in place of
// Adopt. AdoptFrom returns the step of a turn in flight (EventTurnStarted),
// and how many of the replayed inputs the scratch still holds unsent (the
// last queued ones: the supervisor encodes them again). ok is false when
// the scratch did not reach the conversation the session was made for
// (the generation's start is no longer retained, or it began otherwise):
// the session is then as after Adopt.
type Replayer interface {
	Adopter
	AdoptFrom(scratch Session) (first Step, queued int, ok bool)
}
