// Package acp is the client half of the Agent Client Protocol
// (agentclientprotocol.com: JSON-RPC 2.0, one message per line on stdio) that
// the grok, gemini and opencode drivers share: initialize, then session/new
// (launch) or session/load (resume, R-RES-1), one session/prompt per text
// input, the session/cancel notification to interrupt (R-INT-1), the bracket
// around the history a load replays (R-HW-4), and the answers to what the
// agent asks the client. What differs between the agents is data: an Agent.
//
// A Session does no I/O and never blocks. It never grants a permission, never
// sends a secret (an authenticate step names a method; the key stays in the
// child's environment), and never starts a new session when a load fails
// (R-RES-2).
package acp

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/internal/jsonrpc"
)

// ProtocolVersion is the ACP version asked for in initialize.
const ProtocolVersion = 1

// AuthRequired is ACP's error code for "authenticate first"
// (agentclientprotocol.com, RequestError.authRequired; Gemini CLI answers a
// session/load with it when no auth type is selected, real-clis.md §3).
const AuthRequired = -32000

// Agent is what one ACP tool does its own way. The zero value of every
// optional field is plain ACP.
type Agent struct {
	// Tool is the driver kind.
	Tool cliruntime.Kind
	// Name is the tool as events name it: "<Name> asked ...".
	Name string
	// Command is the command line of both launch and resume: an ACP agent
	// resumes in the protocol (session/load), not on argv.
	Command cliruntime.ProtocolCommand
	// AuthMethod, when set, names the authenticate method to send once per
	// process when the agent refuses session/new or session/load with
	// AuthRequired; the request is then sent again. It sees the spec only
	// (never the agent's environment); "" means no authenticate step, and so
	// does a nil AuthMethod.
	AuthMethod func(spec cliruntime.LaunchSpec) string
	// ReplayEndsWith, when set, is the session/update kind after which a
	// load's replay is over, in addition to the load's response. When empty
	// the replay ends with the response, as ACP has it: the agent streams the
	// history and then answers. Gemini CLI 0.61.0 answers after the first
	// replayed message, streams the rest afterwards and then sends
	// available_commands_update (measured).
	ReplayEndsWith string
}

var _ cliruntime.Driver = Agent{}

// Kind is the agent's driver kind.
func (a Agent) Kind() cliruntime.Kind { return a.Tool }

// LaunchTransport is stdio: ACP is JSON-RPC on stdin and stdout (R-TR-4).
func (Agent) LaunchTransport() cliruntime.LaunchTransport { return cliruntime.TransportStdio }

// Launch starts a new session.
func (a Agent) Launch(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	return a.Command.Launch(spec)
}

// Resume starts the same command line on a stored session id.
func (a Agent) Resume(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	return a.Command.Resume(spec)
}

// CheckInput takes text (R-IN-2).
func (Agent) CheckInput(in cliruntime.Input) error { return cliruntime.CheckTextInput(in) }

// NewSession returns the protocol state of one agent process.
func (a Agent) NewSession(spec cliruntime.LaunchSpec) cliruntime.Session {
	s := &session{name: a.Name, replayEnd: a.ReplayEndsWith, cwd: spec.Workdir, resumeID: spec.ConversationID,
		pending: map[int64]string{}}
	if a.AuthMethod != nil {
		s.auth = a.AuthMethod(spec)
	}
	return s
}

type session struct {
	name      string
	replayEnd string
	cwd       string
	resumeID  string
	auth      string // authenticate methodId for AuthRequired, "" for none

	mu        sync.Mutex
	nextID    int64
	pending   map[int64]string // our request id → method
	sessionID string           // confirmed by session/new or session/load
	dead      bool             // the handshake failed

	authSent bool   // authenticate went out (once per process)
	retry    string // the session request to send again once authenticated

	// replaying: a load's history is on its way (R-HW-4); prompts wait.
	// answered and marked are the two ends of a replay with ReplayEndsWith.
	replaying, answered, marked bool

	queue     []string
	prompt    int64 // id of the session/prompt in flight, 0 when none
	interrupt bool  // interrupt asked for before the prompt went out

	// open are the agent's session/request_permission requests waiting
	// for an answer, by JSON-RPC id (requests.go).
	open map[string]*acpRequest
}

func (s *session) requestLocked(method string, params any) []byte {
	s.nextID++
	s.pending[s.nextID] = method
	return jsonrpc.Line(jsonrpc.Request{JSONRPC: "2.0", ID: s.nextID, Method: method, Params: params})
}

type fsCapabilities struct {
	ReadTextFile  bool `json:"readTextFile"`
	WriteTextFile bool `json:"writeTextFile"`
}

type clientCapabilities struct {
	FS       fsCapabilities `json:"fs"`
	Terminal bool           `json:"terminal"`
}

type initializeParams struct {
	ProtocolVersion    int                `json:"protocolVersion"`
	ClientCapabilities clientCapabilities `json:"clientCapabilities"`
}

// Start is initialize. The client offers no file system and no terminal, so
// the agent reads and writes files itself, inside the workspace.
func (s *session) Start() cliruntime.Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cliruntime.Step{Write: [][]byte{s.requestLocked("initialize", initializeParams{ProtocolVersion: ProtocolVersion})}}
}

type newParams struct {
	Cwd        string     `json:"cwd"`
	MCPServers []struct{} `json:"mcpServers"`
}

type loadParams struct {
	SessionID  string     `json:"sessionId"`
	Cwd        string     `json:"cwd"`
	MCPServers []struct{} `json:"mcpServers"`
}

type authenticateParams struct {
	MethodID string `json:"methodId"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type promptParams struct {
	SessionID string      `json:"sessionId"`
	Prompt    []textBlock `json:"prompt"`
}

type cancelParams struct {
	SessionID string `json:"sessionId"`
}

func (s *session) Encode(in cliruntime.Input) (cliruntime.Step, error) {
	if err := cliruntime.CheckTextInput(in); err != nil {
		return cliruntime.Step{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return cliruntime.Step{}, cliruntime.ErrHandshakeFailed
	}
	if len(s.queue) >= cliruntime.MaxQueuedInputs {
		return cliruntime.Step{}, cliruntime.ErrInputQueueFull
	}
	s.queue = append(s.queue, in.Text)
	return s.flushLocked(), nil
}

// flushLocked sends the next queued text once the session exists, its
// replay is over and no prompt is in flight: an ACP session runs one prompt
// at a time, and a prompt sent during a replay would mix the new turn's
// output into the withheld history. An ACP turn has no start notification;
// it starts when the request goes out.
func (s *session) flushLocked() cliruntime.Step {
	if s.sessionID == "" || s.replaying || s.prompt != 0 || len(s.queue) == 0 {
		return cliruntime.Step{}
	}
	text := s.queue[0]
	s.queue = s.queue[1:]
	out := cliruntime.Step{Write: [][]byte{s.requestLocked("session/prompt", promptParams{
		SessionID: s.sessionID, Prompt: []textBlock{{Type: "text", Text: text}},
	})}}
	s.prompt = s.nextID
	out.Events = []cliruntime.Event{{Kind: cliruntime.EventTurnStarted, ConversationID: s.sessionID, TurnID: strconv.FormatInt(s.prompt, 10)}}
	if s.interrupt {
		out.Write = append(out.Write, s.cancelLocked())
	}
	return out
}

// cancelLocked is session/cancel, a notification (sent with an id it is
// refused, real-clis.md §3).
func (s *session) cancelLocked() []byte {
	s.interrupt = false
	return jsonrpc.Line(jsonrpc.Notification{JSONRPC: "2.0", Method: "session/cancel", Params: cancelParams{SessionID: s.sessionID}})
}

func (s *session) Interrupt() (cliruntime.Step, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.prompt != 0:
		// ACP: the client answers the turn's open permission requests
		// with "cancelled" when it cancels the turn.
		return merge(s.cancelOpenLocked(), cliruntime.Step{Write: [][]byte{s.cancelLocked()}}), true
	case len(s.queue) > 0 && !s.dead:
		s.interrupt = true
		return cliruntime.Step{}, true
	default:
		return cliruntime.Step{}, false
	}
}

func (s *session) ConversationID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionID
}

func (s *session) TurnActive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.prompt != 0 || (len(s.queue) > 0 && !s.dead)
}

func (s *session) Observe(line []byte) cliruntime.Step {
	m, ok := jsonrpc.Parse(line)
	if !ok {
		return cliruntime.Step{}
	}
	n := len(line)
	for n > 0 && (line[n-1] == '\n' || line[n-1] == '\r') {
		n--
	}
	// Events keep a copy of their line; most lines (session/update) make
	// none, and are not copied.
	raw := func() json.RawMessage { return append(json.RawMessage(nil), line[:n]...) }
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case m.IsResponse():
		return s.responseLocked(m, raw())
	case m.IsRequest():
		return s.agentRequestLocked(m, raw())
	case m.IsNotification():
		return s.notificationLocked(m, raw)
	}
	return cliruntime.Step{}
}

// rpcError is the error member of a response, read for its code and for
// the details Gemini CLI puts under data.
type rpcError struct {
	Error struct {
		Code int `json:"code"`
		Data struct {
			Details json.RawMessage `json:"details"`
		} `json:"data"`
	} `json:"error"`
}

// errorOf returns a failed response's code and its message, with
// data.details when that is a string (Gemini CLI's "Internal error" says
// what went wrong only there).
func errorOf(m jsonrpc.Message, raw json.RawMessage) (int, string) {
	var e rpcError
	_ = json.Unmarshal(raw, &e)
	msg := m.ErrorMessage
	var details string
	if json.Unmarshal(e.Error.Data.Details, &details) == nil && details != "" {
		msg += ": " + details
	}
	return e.Error.Code, msg
}

func (s *session) responseLocked(m jsonrpc.Message, raw json.RawMessage) cliruntime.Step {
	id, ok := m.IntID()
	if !ok {
		return cliruntime.Step{}
	}
	method, ok := s.pending[id]
	if !ok {
		return cliruntime.Step{}
	}
	delete(s.pending, id)
	switch method {
	case "initialize":
		return s.initializedLocked(m, raw)
	case "authenticate":
		return s.authenticatedLocked(m, raw)
	case "session/new":
		var r struct {
			SessionID string `json:"sessionId"`
		}
		if !m.HasError {
			_ = json.Unmarshal(m.Result, &r)
		}
		if r.SessionID == "" {
			if st, again := s.authenticateLocked(m, raw, method); again {
				return st
			}
			s.dead = true
			var msg string
			if m.HasError {
				_, msg = errorOf(m, raw)
			} else {
				msg = "no sessionId in the answer"
			}
			return step(cliruntime.Event{Kind: cliruntime.EventError, Error: "session/new: " + msg, ErrorKind: errorKindOf(m, raw), HandshakeRefused: true, Raw: raw})
		}
		s.sessionID = r.SessionID
		return merge(step(cliruntime.Event{Kind: cliruntime.EventConversation, ConversationID: s.sessionID, Raw: raw}), s.flushLocked())
	case "session/load":
		if m.HasError {
			if st, again := s.authenticateLocked(m, raw, method); again {
				return st
			}
			_, msg := errorOf(m, raw)
			return s.unavailableLocked(msg, raw)
		}
		s.sessionID = s.resumeID
		s.answered = true
		conv := step(cliruntime.Event{Kind: cliruntime.EventConversation, ConversationID: s.sessionID, Raw: raw})
		if s.replayEnd != "" && !s.marked {
			// The history is still on its way (Gemini CLI); it ends
			// with the ReplayEndsWith update.
			return conv
		}
		s.replaying = false
		return merge(merge(step(cliruntime.Event{Kind: cliruntime.EventReplayEnded, ConversationID: s.resumeID, Raw: raw}), conv), s.flushLocked())
	case "session/prompt":
		if id != s.prompt {
			return cliruntime.Step{}
		}
		s.prompt = 0
		ev := cliruntime.Event{Kind: cliruntime.EventTurnEnded, ConversationID: s.sessionID, TurnID: strconv.FormatInt(id, 10), Raw: raw}
		if m.HasError {
			_, msg := errorOf(m, raw)
			ev.IsError, ev.Reason, ev.Error = true, "error", msg
		} else {
			var r struct {
				StopReason string `json:"stopReason"`
			}
			_ = json.Unmarshal(m.Result, &r)
			// end_turn is the one normal end; cancelled, refusal,
			// max_tokens and max_turn_requests all cut the turn short.
			ev.Reason, ev.IsError = r.StopReason, r.StopReason != "end_turn"
			if r.StopReason == "cancelled" {
				// The client's session/cancel: a person's interrupt, not a
				// failure of the run (R-LERR-1).
				ev.ErrorKind = cliruntime.ErrorInterrupted
			}
		}
		s.interrupt = false
		return merge(step(ev), s.flushLocked())
	}
	return cliruntime.Step{}
}

// errorKindOf is ErrorAuth for ACP's authRequired and for a refusal that
// says the credentials are missing ("Gemini API key is missing or not
// configured"), else ErrorTool.
func errorKindOf(m jsonrpc.Message, raw json.RawMessage) string {
	code, msg := errorOf(m, raw)
	l := strings.ToLower(msg)
	if code == AuthRequired || strings.Contains(l, "api key") || strings.Contains(l, "authenticat") || strings.Contains(l, "not logged in") {
		return cliruntime.ErrorAuth
	}
	return cliruntime.ErrorTool
}

// unavailableLocked ends a resume that cannot continue the stored session:
// the replay bracket closes and no session/new follows (R-RES-2).
func (s *session) unavailableLocked(msg string, raw json.RawMessage) cliruntime.Step {
	s.dead = true
	s.replaying = false
	return step(cliruntime.Event{Kind: cliruntime.EventReplayEnded, ConversationID: s.resumeID, Raw: raw},
		cliruntime.Event{Kind: cliruntime.EventConversationUnavailable, ConversationID: s.resumeID, Error: msg, Raw: raw})
}

// authenticateLocked answers AuthRequired on a session request with the
// agent's authenticate step, once per process; again is false when there is
// none to take.
func (s *session) authenticateLocked(m jsonrpc.Message, raw json.RawMessage, method string) (cliruntime.Step, bool) {
	if code, _ := errorOf(m, raw); !m.HasError || code != AuthRequired || s.auth == "" || s.authSent {
		return cliruntime.Step{}, false
	}
	s.authSent = true
	s.retry = method
	return cliruntime.Step{Write: [][]byte{s.requestLocked("authenticate", authenticateParams{MethodID: s.auth})}}, true
}

// authenticatedLocked sends the refused session request again, or gives up.
func (s *session) authenticatedLocked(m jsonrpc.Message, raw json.RawMessage) cliruntime.Step {
	if m.HasError {
		_, msg := errorOf(m, raw)
		msg = "authenticate " + strconv.Quote(s.auth) + ": " + msg
		if s.resumeID != "" {
			return s.unavailableLocked(msg, raw)
		}
		s.dead = true
		return step(cliruntime.Event{Kind: cliruntime.EventError, Error: msg, ErrorKind: cliruntime.ErrorAuth, HandshakeRefused: true, Raw: raw})
	}
	if s.retry == "session/load" {
		return cliruntime.Step{Write: [][]byte{s.loadLocked()}}
	}
	return cliruntime.Step{Write: [][]byte{s.newLocked()}}
}

func (s *session) newLocked() []byte {
	return s.requestLocked("session/new", newParams{Cwd: s.cwd, MCPServers: []struct{}{}})
}

func (s *session) loadLocked() []byte {
	return s.requestLocked("session/load", loadParams{SessionID: s.resumeID, Cwd: s.cwd, MCPServers: []struct{}{}})
}

// initializedLocked follows initialize with session/new, or with
// session/load of the stored session; from that request until the replay
// ends, every line is replayed history (R-HW-4).
func (s *session) initializedLocked(m jsonrpc.Message, raw json.RawMessage) cliruntime.Step {
	if m.HasError {
		s.dead = true
		_, msg := errorOf(m, raw)
		return step(cliruntime.Event{Kind: cliruntime.EventError, Error: "initialize: " + msg, ErrorKind: errorKindOf(m, raw), HandshakeRefused: true, Raw: raw})
	}
	if s.resumeID == "" {
		return cliruntime.Step{Write: [][]byte{s.newLocked()}}
	}
	var r struct {
		AgentCapabilities struct {
			LoadSession bool `json:"loadSession"`
		} `json:"agentCapabilities"`
	}
	_ = json.Unmarshal(m.Result, &r)
	if !r.AgentCapabilities.LoadSession {
		// No way to continue the stored session; never start a new one
		// instead (R-RES-2).
		s.dead = true
		return step(cliruntime.Event{Kind: cliruntime.EventConversationUnavailable, ConversationID: s.resumeID,
			Error: "the agent cannot load sessions (agentCapabilities.loadSession is false)", Raw: raw})
	}
	s.replaying = true
	return cliruntime.Step{
		Write:  [][]byte{s.loadLocked()},
		Events: []cliruntime.Event{{Kind: cliruntime.EventReplayStarted, ConversationID: s.resumeID, Raw: raw}},
	}
}

// notificationLocked watches for the update that ends a replay which
// outlasts the load's response. Every other notification (session/update
// above all) is the conversation itself; the attach stream shows it as it
// is.
func (s *session) notificationLocked(m jsonrpc.Message, raw func() json.RawMessage) cliruntime.Step {
	if !s.replaying || s.replayEnd == "" || s.marked || m.Method != "session/update" {
		return cliruntime.Step{}
	}
	var p struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			SessionUpdate string `json:"sessionUpdate"`
		} `json:"update"`
	}
	if json.Unmarshal(m.Params, &p) != nil || p.SessionID != s.resumeID || p.Update.SessionUpdate != s.replayEnd {
		return cliruntime.Step{}
	}
	s.marked = true
	if !s.answered {
		return cliruntime.Step{} // the response ends it
	}
	s.replaying = false
	return merge(step(cliruntime.Event{Kind: cliruntime.EventReplayEnded, ConversationID: s.resumeID, Raw: raw()}), s.flushLocked())
}

func step(ev ...cliruntime.Event) cliruntime.Step { return cliruntime.Step{Events: ev} }

func merge(a, b cliruntime.Step) cliruntime.Step {
	a.Write = append(a.Write, b.Write...)
	a.Events = append(a.Events, b.Events...)
	return a
}
