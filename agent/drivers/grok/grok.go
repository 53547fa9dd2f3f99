// Package grok is the driver of Grok Build's stdio agent, `grok agent stdio`:
// JSON-RPC 2.0, one message per line (R-TR-4).
//
// No grok binary could be measured for real-clis.md, so this driver follows
// the Agent Client Protocol (agentclientprotocol.com), which xAI documents as
// the protocol of `grok agent stdio`, in the shape real-clis.md §3 recorded
// for Gemini CLI's ACP agent: initialize, session/new (launch) or
// session/load (resume, which replays the history as session/update
// notifications, R-HW-4), session/prompt per text input, and the
// session/cancel notification to interrupt. The program name, the
// subcommand, GROK_HOME and GROK_DISABLE_AUTOUPDATER come from xAI's public
// documentation, not from a measurement.
package grok

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/olivares-dev/olivares/agent/drivers/internal/jsonrpc"
	"github.com/olivares-dev/olivares/shared/sessions/cliruntime"
)

// Name is the program run when LaunchSpec.Binary is empty.
const Name = "grok"

// ProtocolVersion is the ACP version asked for in initialize.
const ProtocolVersion = 1

// Driver is the grok driver. The zero value is ready to use.
type Driver struct{}

var _ cliruntime.Driver = Driver{}

// New returns the grok driver.
func New() Driver { return Driver{} }

func (Driver) Kind() cliruntime.Kind { return cliruntime.KindGrok }

// LaunchTransport is stdio (R-TR-2, R-TR-4).
func (Driver) LaunchTransport() cliruntime.LaunchTransport { return cliruntime.TransportStdio }

// command is `grok agent stdio` for both launch and resume: the session is
// loaded in the protocol. Grok's home (config, auth, sessions) goes under the
// profile home, and its self-updater is off: a supervised binary must not
// change under a live run. A profile may turn the updater back on.
var command = cliruntime.ProtocolCommand{
	Name: Name,
	Args: []string{"agent", "stdio"},
	Vars: func(home string) []cliruntime.EnvVar {
		return []cliruntime.EnvVar{
			{Key: "GROK_HOME", Value: filepath.Join(home, ".grok")},
			{Key: "GROK_DISABLE_AUTOUPDATER", Value: "1", Overridable: true},
		}
	},
	CheckID: cliruntime.CheckOpaqueID,
}

// Launch starts a new session.
func (Driver) Launch(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	return command.Launch(spec)
}

// Resume starts the same command line on a stored session id.
func (Driver) Resume(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	return command.Resume(spec)
}

// CheckInput takes text (R-IN-2).
func (Driver) CheckInput(in cliruntime.Input) error { return cliruntime.CheckTextInput(in) }

// NewSession returns the protocol state of one agent process.
func (Driver) NewSession(spec cliruntime.LaunchSpec) cliruntime.Session {
	return &session{cwd: spec.Workdir, resumeID: spec.ConversationID, pending: map[int64]string{}}
}

type session struct {
	cwd      string
	resumeID string

	mu        sync.Mutex
	nextID    int64
	pending   map[int64]string // our request id → method
	sessionID string           // confirmed by session/new or session/load
	dead      bool             // the handshake failed

	queue     []string
	prompt    int64 // id of the session/prompt in flight, 0 when none
	interrupt bool  // interrupt asked for before the prompt went out
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

// flushLocked sends the next queued text once the session exists and no
// prompt is in flight: an ACP session runs one prompt at a time. An ACP turn
// has no start notification; it starts when the request goes out.
func (s *session) flushLocked() cliruntime.Step {
	if s.sessionID == "" || s.prompt != 0 || len(s.queue) == 0 {
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
		return cliruntime.Step{Write: [][]byte{s.cancelLocked()}}, true
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
	raw := append(json.RawMessage(nil), line[:n]...)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case m.IsResponse():
		return s.responseLocked(m, raw)
	case m.IsRequest():
		return s.agentRequestLocked(m, raw)
	}
	// Notifications (session/update) carry the conversation itself; the
	// attach stream shows them as they are.
	return cliruntime.Step{}
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
	case "session/new":
		var r struct {
			SessionID string `json:"sessionId"`
		}
		if !m.HasError {
			_ = json.Unmarshal(m.Result, &r)
		}
		if r.SessionID == "" {
			s.dead = true
			msg := m.ErrorMessage
			if msg == "" {
				msg = "no sessionId in the answer"
			}
			return step(cliruntime.Event{Kind: cliruntime.EventError, Error: "session/new: " + msg, Raw: raw})
		}
		s.sessionID = r.SessionID
		return merge(step(cliruntime.Event{Kind: cliruntime.EventConversation, ConversationID: s.sessionID, Raw: raw}), s.flushLocked())
	case "session/load":
		end := cliruntime.Event{Kind: cliruntime.EventReplayEnded, ConversationID: s.resumeID, Raw: raw}
		if m.HasError {
			s.dead = true
			return step(end, cliruntime.Event{Kind: cliruntime.EventConversationUnavailable, ConversationID: s.resumeID, Error: m.ErrorMessage, Raw: raw})
		}
		s.sessionID = s.resumeID
		return merge(step(end, cliruntime.Event{Kind: cliruntime.EventConversation, ConversationID: s.sessionID, Raw: raw}), s.flushLocked())
	case "session/prompt":
		if id != s.prompt {
			return cliruntime.Step{}
		}
		s.prompt = 0
		ev := cliruntime.Event{Kind: cliruntime.EventTurnEnded, ConversationID: s.sessionID, TurnID: strconv.FormatInt(id, 10), Raw: raw}
		if m.HasError {
			ev.IsError, ev.Reason, ev.Error = true, "error", m.ErrorMessage
		} else {
			var r struct {
				StopReason string `json:"stopReason"`
			}
			_ = json.Unmarshal(m.Result, &r)
			// end_turn is the one normal end; cancelled, refusal,
			// max_tokens and max_turn_requests all cut the turn short.
			ev.Reason, ev.IsError = r.StopReason, r.StopReason != "end_turn"
		}
		s.interrupt = false
		return merge(step(ev), s.flushLocked())
	}
	return cliruntime.Step{}
}

// initializedLocked follows initialize with session/new, or with
// session/load of the stored session; from that request until its answer,
// every line is replayed history (R-HW-4).
func (s *session) initializedLocked(m jsonrpc.Message, raw json.RawMessage) cliruntime.Step {
	if m.HasError {
		s.dead = true
		return step(cliruntime.Event{Kind: cliruntime.EventError, Error: "initialize: " + m.ErrorMessage, Raw: raw})
	}
	if s.resumeID == "" {
		return cliruntime.Step{Write: [][]byte{s.requestLocked("session/new", newParams{Cwd: s.cwd, MCPServers: []struct{}{}})}}
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
	return cliruntime.Step{
		Write:  [][]byte{s.requestLocked("session/load", loadParams{SessionID: s.resumeID, Cwd: s.cwd, MCPServers: []struct{}{}})},
		Events: []cliruntime.Event{{Kind: cliruntime.EventReplayStarted, ConversationID: s.resumeID, Raw: raw}},
	}
}

type permissionOption struct {
	OptionID string `json:"optionId"`
	Kind     string `json:"kind"`
}

// agentRequestLocked answers what the agent asks the client. Permission
// requests are refused with the agent's own reject option (nobody is there
// to grant one; a profile that wants tools to run configures the agent to
// approve them itself). Everything else (file system, terminal, vendor
// extensions) is not offered: "method not found".
func (s *session) agentRequestLocked(m jsonrpc.Message, raw json.RawMessage) cliruntime.Step {
	var resp jsonrpc.Response
	resp.JSONRPC, resp.ID = "2.0", m.ID
	what := "olivares refused"
	if m.Method == "session/request_permission" {
		var p struct {
			Options []permissionOption `json:"options"`
		}
		_ = json.Unmarshal(m.Params, &p)
		resp.Result = map[string]any{"outcome": map[string]string{"outcome": "cancelled"}}
		for _, want := range []string{"reject_once", "reject_always"} {
			if id := optionOf(p.Options, want); id != "" {
				resp.Result = map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": id}}
				break
			}
		}
		what = "olivares rejected it"
	} else {
		resp.Error = &jsonrpc.Error{Code: jsonrpc.MethodNotFound, Message: "olivares does not answer " + strconv.Quote(m.Method)}
	}
	return cliruntime.Step{
		Write:  [][]byte{jsonrpc.Line(resp)},
		Events: []cliruntime.Event{{Kind: cliruntime.EventError, ConversationID: s.sessionID, Error: "grok asked " + strconv.Quote(m.Method) + "; " + what, Raw: raw}},
	}
}

func optionOf(opts []permissionOption, kind string) string {
	for _, o := range opts {
		if o.Kind == kind && o.OptionID != "" {
			return o.OptionID
		}
	}
	return ""
}

func step(ev ...cliruntime.Event) cliruntime.Step { return cliruntime.Step{Events: ev} }

func merge(a, b cliruntime.Step) cliruntime.Step {
	a.Write = append(a.Write, b.Write...)
	a.Events = append(a.Events, b.Events...)
	return a
}
