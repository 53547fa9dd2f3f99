// Package fake is an in-process fake driver for supervisor unit tests
// (R-DRV-2: conformance runs against an in-process fake and a local peer).
//
// Driver speaks a small line protocol of its own, and Runner is a
// sessions.Runner whose "processes" are goroutines speaking it over io.Pipes,
// so a supervisor can be driven through the same Runner/Process/Session
// interfaces without starting anything. Conversations live in a Store shared
// by every process of a Runner, so a resume finds what an earlier
// generation said, and an unknown id is refused.
//
// The fake takes text input (like codex and grok) and honours the same
// driving texts as integration/peers/fakecli: slow, exit N, stderr X,
// history, ignore-term, flood N, and tokens IN OUT (the turn reports that
// usage); and hang (the turn writes nothing until cancelled).
//
// It must never be wired by the composition root: its Kind is not one of the
// contract's three.
package fake

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/olivares-dev/olivares/agent/cliruntime"
)

// Kind is the fake's driver kind.
const Kind cliruntime.Kind = "fake"

// Program is the Command.Path the fake's command lines name; Runner runs
// any path.
const Program = "fake-cli"

// The protocol, one JSON object per line.
//
// To the peer:
//
//	{"op":"hello"}                       start a new conversation
//	{"op":"hello","resume":"<id>"}       continue a stored one
//	{"op":"prompt","text":"…"}           one turn (the peer queues them)
//	{"op":"cancel"}                      cancel the running turn
//	{"op":"answer","id":"q1","decision":"allow"|"deny","text":"…"}
//	                                     answer the peer's question q1
//
// From the peer:
//
//	{"ev":"ready","conversation":"<id>"}
//	{"ev":"unavailable","conversation":"<id>","error":"…"}   then exit 1
//	{"ev":"turn_started","turn":"t1"}
//	{"ev":"delta","turn":"t1","text":"…"}
//	{"ev":"turn_ended","turn":"t1","status":"completed"|"cancelled","in":N,"out":M}
//	                                     in/out: the turn's tokens, when it reports usage
//	{"ev":"ask","id":"q1","text":"<command>"}     the turn waits for an answer
type (
	request struct {
		Op       string `json:"op"`
		Resume   string `json:"resume,omitempty"`
		Text     string `json:"text,omitempty"`
		ID       string `json:"id,omitempty"`
		Decision string `json:"decision,omitempty"`
	}
	event struct {
		Ev           string `json:"ev"`
		Conversation string `json:"conversation,omitempty"`
		Turn         string `json:"turn,omitempty"`
		Text         string `json:"text,omitempty"`
		Status       string `json:"status,omitempty"`
		Error        string `json:"error,omitempty"`
		ID           string `json:"id,omitempty"`
		// In and Out are a turn_ended's tokens, when the turn reports
		// usage (the "tokens IN OUT" driving text).
		In  int64 `json:"in,omitempty"`
		Out int64 `json:"out,omitempty"`
	}
)

func line(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// Driver is the fake driver. The zero value is ready to use.
type Driver struct{}

var _ cliruntime.Driver = Driver{}

// New returns the fake driver.
func New() Driver { return Driver{} }

func (Driver) Kind() cliruntime.Kind                       { return Kind }
func (Driver) LaunchTransport() cliruntime.LaunchTransport { return cliruntime.TransportStdio }

var command = cliruntime.ProtocolCommand{
	Name: Program,
	Vars: func(home string) []cliruntime.EnvVar {
		return []cliruntime.EnvVar{{Key: "FAKE_HOME", Value: filepath.Join(home, ".fake")}}
	},
	CheckID: cliruntime.CheckOpaqueID,
}

func (Driver) Launch(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	return command.Launch(spec)
}

func (Driver) Resume(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	return command.Resume(spec)
}

func (Driver) CheckInput(in cliruntime.Input) error { return cliruntime.CheckTextInput(in) }

func (Driver) NewSession(spec cliruntime.LaunchSpec) cliruntime.Session {
	return &session{resumeID: spec.ConversationID, cwd: spec.Workdir, open: map[string]cliruntime.Request{}}
}

type session struct {
	resumeID string
	cwd      string
	open     map[string]cliruntime.Request // the peer's questions waiting for an answer

	mu    sync.Mutex
	conv  string
	dead  bool
	sent  int // prompts written
	ended int // turn_ended seen
}

func (s *session) Start() cliruntime.Step {
	return cliruntime.Step{Write: [][]byte{line(request{Op: "hello", Resume: s.resumeID})}}
}

// Encode writes the prompt at once: the peer reads lines in order and queues
// turns itself.
func (s *session) Encode(in cliruntime.Input) (cliruntime.Step, error) {
	if err := cliruntime.CheckTextInput(in); err != nil {
		return cliruntime.Step{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return cliruntime.Step{}, cliruntime.ErrHandshakeFailed
	}
	s.sent++
	return cliruntime.Step{Write: [][]byte{line(request{Op: "prompt", Text: in.Text})}}, nil
}

func (s *session) Interrupt() (cliruntime.Step, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent == s.ended {
		return cliruntime.Step{}, false
	}
	return cliruntime.Step{Write: [][]byte{line(request{Op: "cancel"})}}, true
}

func (s *session) ConversationID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conv
}

func (s *session) TurnActive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent > s.ended
}

func (s *session) Observe(l []byte) cliruntime.Step {
	var e event
	if json.Unmarshal(l, &e) != nil {
		return cliruntime.Step{}
	}
	n := len(l)
	for n > 0 && (l[n-1] == '\n' || l[n-1] == '\r') {
		n--
	}
	raw := append(json.RawMessage(nil), l[:n]...)
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := cliruntime.Event{ConversationID: s.conv, TurnID: e.Turn, Raw: raw}
	switch e.Ev {
	case "ready":
		if e.Conversation == "" || e.Conversation == s.conv {
			return cliruntime.Step{}
		}
		if s.resumeID != "" && e.Conversation != s.resumeID {
			s.dead = true
			ev.Kind, ev.ConversationID, ev.Error = cliruntime.EventConversationUnavailable, s.resumeID, "the peer answered another conversation"
			break
		}
		s.conv = e.Conversation
		ev.Kind, ev.ConversationID = cliruntime.EventConversation, s.conv
	case "unavailable":
		s.dead = true
		ev.Kind, ev.ConversationID, ev.Error = cliruntime.EventConversationUnavailable, e.Conversation, e.Error
	case "turn_started":
		ev.Kind = cliruntime.EventTurnStarted
	case "ask":
		if e.ID == "" {
			return cliruntime.Step{}
		}
		req := cliruntime.Request{ID: e.ID, Kind: cliruntime.RequestCommand, Tool: "shell", Title: "Run " + e.Text,
			Command: e.Text, Cwd: s.cwd, Options: []cliruntime.Option{
				{ID: cliruntime.OptionAllowOnce, Label: "Allow once", Decision: cliruntime.DecisionAllow},
				{ID: cliruntime.OptionAllowSession, Label: "Allow for this session", Decision: cliruntime.DecisionAllow, Session: true},
				{ID: cliruntime.OptionDeny, Label: "Deny", Decision: cliruntime.DecisionDeny},
			}}
		s.open[e.ID] = req
		ev.Kind, ev.Request = cliruntime.EventRequest, &req
	case "turn_ended":
		if s.ended < s.sent {
			s.ended++
		}
		ev.Kind, ev.Reason, ev.IsError = cliruntime.EventTurnEnded, e.Status, e.Status != "completed"
		if e.In|e.Out != 0 {
			ev.Usage = &cliruntime.TurnUsage{Models: []cliruntime.ModelUsage{{Model: "fake", InputTokens: e.In, OutputTokens: e.Out}}}
		}
		if e.Status == "cancelled" {
			// Only a cancel op ends a turn so: a person's interrupt, not a
			// failure of the run (R-LERR-1).
			ev.ErrorKind = cliruntime.ErrorInterrupted
		}
	default:
		return cliruntime.Step{}
	}
	return cliruntime.Step{Events: []cliruntime.Event{ev}}
}

// Answer writes the answer to the peer's question id.
func (s *session) Answer(id string, a cliruntime.Answer) (cliruntime.Step, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req, ok := s.open[id]
	if !ok {
		return cliruntime.Step{}, cliruntime.ErrNoSuchRequest
	}
	opt, ok := req.Option(a.OptionID)
	if !ok {
		return cliruntime.Step{}, cliruntime.ErrBadAnswer
	}
	delete(s.open, id)
	return cliruntime.Step{Write: [][]byte{line(request{Op: "answer", ID: id, Decision: string(opt.Decision), Text: a.Message})}}, nil
}

// turnName numbers turns within one process.
func turnName(n int) string { return "t" + strconv.Itoa(n) }
