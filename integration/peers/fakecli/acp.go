//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ACP error codes: JSON-RPC's, and ACP's "resource not found" and
// "authentication required".
const (
	acpInvalidRequest = -32600
	acpMethodNotFound = -32601
	acpInvalidParams  = -32602
	acpInternal       = -32603
	acpNotFound       = -32002
	acpAuthRequired   = -32000
)

// acpError is an error answer; Data carries details (Gemini CLI puts the
// reason of an "Internal error" there).
type acpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *acpError) Error() string { return e.Message }

// acpMsg is one message of a stored conversation.
type acpMsg struct {
	ID   string
	User bool
	Text string
	// Context marks what the agent injects itself (Gemini CLI's
	// <session_context>): replayed, but not a user text of the history.
	Context bool
}

// acpSession is a session loaded in this process.
type acpSession struct {
	id, cwd string
	msgs    []acpMsg
	cancel  chan struct{} // non-nil while a prompt runs
	ref     string        // where the tool keeps it (a directory or a file)
}

// userTexts are the prompts the session was given, in order.
func (s *acpSession) userTexts() []string {
	var out []string
	for _, m := range s.msgs {
		if m.User && !m.Context {
			out = append(out, m.Text)
		}
	}
	return out
}

// acpFlavor is what one ACP tool does its own way: its storage, its
// answers' shapes, its auth rules, and the order of a load's replay.
type acpFlavor interface {
	initResult() any
	// newSession makes and stores a session for cwd; result is the answer.
	newSession(cwd string) (s *acpSession, result any, err *acpError)
	// loadSession finds a stored session; loadResult is the answer to a
	// load that found it.
	loadSession(id, cwd string) (*acpSession, *acpError)
	loadResult() any
	authenticate(params json.RawMessage) (any, *acpError)
	// record appends a message to the stored session.
	record(s *acpSession, m acpMsg)
	// update decorates one session/update of a message (OpenCode adds a
	// messageId).
	update(s *acpSession, m acpMsg) map[string]any
	// beforeAnswer is how many replayed updates precede a load's answer
	// (-1: all, ACP's rule).
	beforeAnswer() int
	// commands reports whether available_commands_update follows a new
	// session or a load.
	commands() bool
	// promptResult is the answer to a prompt that stopped for stop; extra
	// notifications (OpenCode's usage_update) go out just before it.
	promptResult(s *acpSession, stop string) (result any, before []map[string]any)
}

// acpAgent is one ACP agent process (JSON-RPC 2.0 with the "jsonrpc"
// member, as Gemini CLI's ACP agent speaks it, real-clis.md §3).
type acpAgent struct {
	p  *peer
	fl acpFlavor

	mu          sync.Mutex
	initialized bool
	sessions    map[string]*acpSession // loaded in this process
	// asked are the agent's requests to the client waiting for their
	// response, by id ("ask").
	asked  map[string]chan json.RawMessage
	nextID int
}

// serveACP reads requests from stdin until EOF, which ends the agent with
// exit 0 (real-clis.md §3).
func serveACP(p *peer, fl acpFlavor) int {
	a := &acpAgent{p: p, fl: fl, sessions: map[string]*acpSession{}}
	r := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			a.message(line)
		}
		if err != nil {
			return 0
		}
	}
}

func (a *acpAgent) reply(id json.RawMessage, result any) {
	a.p.emit(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func (a *acpAgent) fail(id json.RawMessage, e *acpError) {
	a.p.emit(map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
}

func (a *acpAgent) notify(sessionID string, upd map[string]any) {
	params := marshalLine(map[string]any{"sessionId": sessionID, "update": upd})
	a.p.emit(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": json.RawMessage(params)})
}

func (a *acpAgent) availableCommands(s *acpSession) {
	a.notify(s.id, map[string]any{"sessionUpdate": "available_commands_update",
		"availableCommands": []map[string]string{{"name": "init", "description": "fakecli: nothing to initialize"}}})
}

func (a *acpAgent) message(line []byte) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		a.p.emit(map[string]any{"jsonrpc": "2.0", "id": nil, "error": acpError{Code: -32700, Message: "Parse error"}})
		return
	}
	notification := m.ID == nil || string(m.ID) == "null"
	if m.Method == "" {
		// A response to one of our requests.
		var r struct {
			Result json.RawMessage `json:"result"`
		}
		_ = json.Unmarshal(line, &r)
		a.mu.Lock()
		ch := a.asked[string(m.ID)]
		delete(a.asked, string(m.ID))
		a.mu.Unlock()
		if ch != nil {
			ch <- r.Result
		}
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if notification {
		if m.Method == "session/cancel" {
			var p struct {
				SessionID string `json:"sessionId"`
			}
			_ = json.Unmarshal(m.Params, &p)
			if s := a.sessions[p.SessionID]; s != nil && s.cancel != nil {
				close(s.cancel)
				s.cancel = nil
			}
		}
		return
	}
	if m.Method != "initialize" && !a.initialized {
		a.fail(m.ID, &acpError{Code: acpInvalidRequest, Message: "the agent is not initialized"})
		return
	}
	switch m.Method {
	case "initialize":
		a.initialized = true
		a.reply(m.ID, a.fl.initResult())
	case "authenticate":
		res, err := a.fl.authenticate(m.Params)
		if err != nil {
			a.fail(m.ID, err)
			return
		}
		a.reply(m.ID, res)
	case "session/new":
		var p struct {
			Cwd string `json:"cwd"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if !filepath.IsAbs(p.Cwd) {
			a.fail(m.ID, &acpError{Code: acpInvalidParams, Message: "cwd must be an absolute path"})
			return
		}
		s, res, err := a.fl.newSession(p.Cwd)
		if err != nil {
			a.fail(m.ID, err)
			return
		}
		a.sessions[s.id] = s
		a.reply(m.ID, res)
		if a.fl.commands() {
			a.availableCommands(s)
		}
	case "session/load":
		var p struct {
			SessionID string `json:"sessionId"`
			Cwd       string `json:"cwd"`
		}
		_ = json.Unmarshal(m.Params, &p)
		s, res, err := a.load(p.SessionID, p.Cwd)
		found := err == nil
		a.p.logCall(map[string]any{"resume": p.SessionID, "found": found})
		if err != nil {
			a.fail(m.ID, err)
			return
		}
		// The history replays as session/update: all of it before the
		// answer (ACP), or only its first message (Gemini CLI 0.61.0).
		n := a.fl.beforeAnswer()
		if n < 0 || n > len(s.msgs) {
			n = len(s.msgs)
		}
		for _, msg := range s.msgs[:n] {
			a.notify(s.id, a.fl.update(s, msg))
		}
		a.reply(m.ID, res)
		for _, msg := range s.msgs[n:] {
			a.notify(s.id, a.fl.update(s, msg))
		}
		if a.fl.commands() {
			a.availableCommands(s)
		}
	case "session/prompt":
		a.prompt(m.ID, m.Params)
	case "session/cancel":
		a.fail(m.ID, &acpError{Code: acpMethodNotFound, Message: "Method not found: session/cancel is a notification"})
	default:
		a.fail(m.ID, &acpError{Code: acpMethodNotFound, Message: "Method not found: " + m.Method})
	}
}

// load returns a session loaded in this process, or the stored one.
// Called with mu.
func (a *acpAgent) load(id, cwd string) (*acpSession, any, *acpError) {
	if s, ok := a.sessions[id]; ok {
		return s, a.fl.loadResult(), nil
	}
	s, err := a.fl.loadSession(id, cwd)
	if err != nil {
		return nil, nil, err
	}
	a.sessions[id] = s
	return s, a.fl.loadResult(), nil
}

// prompt runs a turn in its own goroutine so that session/cancel can reach
// it. Called with mu.
func (a *acpAgent) prompt(id json.RawMessage, params json.RawMessage) {
	var p struct {
		SessionID string `json:"sessionId"`
		Prompt    []struct {
			Type, Text string
		} `json:"prompt"`
	}
	_ = json.Unmarshal(params, &p)
	s, ok := a.sessions[p.SessionID]
	if !ok {
		a.fail(id, &acpError{Code: acpNotFound, Message: "Session not found: " + p.SessionID})
		return
	}
	if s.cancel != nil {
		a.fail(id, &acpError{Code: acpInvalidRequest, Message: "a prompt is already running in this session"})
		return
	}
	var texts []string
	for _, b := range p.Prompt {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	text := strings.Join(texts, "\n")
	earlier := s.userTexts()
	user := acpMsg{ID: newMessageID(), User: true, Text: text}
	s.msgs = append(s.msgs, user)
	a.fl.record(s, user)
	s.cancel = make(chan struct{})
	go a.runPrompt(s, id, text, earlier, s.cancel)
}

func (a *acpAgent) runPrompt(s *acpSession, id json.RawMessage, text string, earlier []string, cancel chan struct{}) {
	msgID := newMessageID()
	chunk := func(piece string) {
		a.notify(s.id, a.fl.update(s, acpMsg{ID: msgID, Text: piece}))
	}
	finish := func(stop string, reply string) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if stop == "end_turn" {
			m := acpMsg{ID: msgID, Text: reply}
			s.msgs = append(s.msgs, m)
			a.fl.record(s, m)
		}
		if s.cancel == cancel {
			s.cancel = nil
		}
		res, before := a.fl.promptResult(s, stop)
		for _, u := range before {
			a.notify(s.id, u)
		}
		a.reply(id, res)
	}
	sp := parseSpecial(text)
	reply := "pong: " + text
	var pieces []string
	switch sp.kind {
	case "exit":
		a.p.exit(sp.n)
	case "stderr":
		fmt.Fprintln(os.Stderr, sp.arg)
	case "ignore-term":
		a.p.ignoreTerm.Store(true)
	case "history":
		reply = historyReply(earlier)
	case "ask":
		stop, answer := a.ask(s, sp.arg, cancel)
		if stop != "" {
			finish(stop, "")
			return
		}
		reply = answer
	case "flood":
		pieces = floodPieces(sp.n)
		reply = fmt.Sprintf("flooded %d bytes", sp.n)
	case "slow":
		tick := time.NewTicker(slowTick)
		defer tick.Stop()
		for i := 0; i < slowMax; i++ {
			select {
			case <-cancel:
				finish("cancelled", "")
				return
			case <-tick.C:
				chunk(fmt.Sprintf("tick%d ", i))
			}
		}
		finish("end_turn", "slow")
		return
	}
	if pieces == nil {
		pieces = []string{reply} // one chunk: ACP has no message-complete update to reassemble from
	}
	for _, piece := range pieces {
		select {
		case <-cancel:
			finish("cancelled", "")
			return
		default:
		}
		chunk(piece)
	}
	finish("end_turn", reply)
}

// ask sends session/request_permission for running cmd, with the options
// Gemini CLI offers, and waits for the client's outcome (or a cancel of
// the turn, stop "cancelled").
func (a *acpAgent) ask(s *acpSession, cmd string, cancel chan struct{}) (stop, reply string) {
	a.mu.Lock()
	a.nextID++
	id := strconv.Itoa(a.nextID)
	ch := make(chan json.RawMessage, 1)
	if a.asked == nil {
		a.asked = map[string]chan json.RawMessage{}
	}
	a.asked[id] = ch
	a.mu.Unlock()
	a.p.emit(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": "session/request_permission", "params": map[string]any{
		"sessionId": s.id,
		"toolCall": map[string]any{"toolCallId": "call-" + id, "title": cmd, "kind": "execute", "status": "pending",
			"rawInput": map[string]any{"command": cmd}},
		"options": []map[string]string{
			{"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
			{"optionId": "proceed_always", "name": "Allow always", "kind": "allow_always"},
			{"optionId": "cancel", "name": "Reject", "kind": "reject_once"},
		},
	}})
	var res json.RawMessage
	select {
	case res = <-ch:
	case <-cancel:
		// ACP: the client answers the open request "cancelled" too.
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
		}
		return "cancelled", ""
	}
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	_ = json.Unmarshal(res, &r)
	if r.Outcome.Outcome == "selected" && strings.HasPrefix(r.Outcome.OptionID, "proceed") {
		return "", "ran: " + cmd + " (" + r.Outcome.OptionID + ")"
	}
	return "", "denied: " + cmd + " (" + r.Outcome.Outcome + " " + r.Outcome.OptionID + ")"
}

// textUpdate is the plain ACP update of a message.
func textUpdate(m acpMsg) map[string]any {
	kind := "agent_message_chunk"
	if m.User {
		kind = "user_message_chunk"
	}
	return map[string]any{"sessionUpdate": kind, "content": map[string]string{"type": "text", "text": m.Text}}
}

// newMessageID is a message id for the records.
func newMessageID() string { return uuidV4() }

// flagsOnly reports whether every argument is a --flag, which the peer
// accepts and ignores.
func flagsOnly(args []string) bool {
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			return false
		}
	}
	return true
}
