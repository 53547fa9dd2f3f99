// Package codex is the driver of `codex app-server`: JSON-RPC, one message per
// line over stdio (real-clis.md §2, R-TR-4). The conversation is a Codex
// thread; its id is the run's conversation id.
//
// The handshake is initialize → initialized → thread/start (launch) or
// thread/resume of the stored thread id (resume). Each text input is one
// turn/start; an interrupt is turn/interrupt of the active turn id.
package codex

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/internal/jsonrpc"
)

// Name is the program run when LaunchSpec.Binary is empty.
const Name = "codex"

// ClientName is clientInfo.name in initialize; Codex records it as the
// thread's originator (real-clis.md §2.2).
const ClientName = "olivares"

// ClientVersion is clientInfo.version in initialize.
const ClientVersion = "0.1.0"

// Driver is the codex driver. The zero value is ready to use.
type Driver struct{}

var _ cliruntime.Driver = Driver{}

// New returns the codex driver.
func New() Driver { return Driver{} }

func (Driver) Kind() cliruntime.Kind { return cliruntime.KindCodex }

// LaunchTransport is stdio (R-TR-2, R-TR-4).
func (Driver) LaunchTransport() cliruntime.LaunchTransport { return cliruntime.TransportStdio }

// command is `codex app-server` (its default listener is stdio://) for both
// launch and resume: the thread is resumed in the protocol (thread/resume).
// CODEX_HOME goes under the profile home; the directory must exist (Codex
// warns otherwise, real-clis.md §0.2) and the profile's set-up makes it.
var command = cliruntime.ProtocolCommand{
	Name: Name,
	Args: []string{"app-server"},
	Vars: func(home string) []cliruntime.EnvVar {
		return []cliruntime.EnvVar{{Key: "CODEX_HOME", Value: filepath.Join(home, ".codex")}}
	},
	CheckID: cliruntime.CheckUUIDID,
}

// Launch starts a new thread.
func (Driver) Launch(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	return command.Launch(spec)
}

// Resume starts the same command line on a stored thread id.
func (Driver) Resume(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	return command.Resume(spec)
}

// CheckInput takes text (R-IN-2).
func (Driver) CheckInput(in cliruntime.Input) error { return cliruntime.CheckTextInput(in) }

// NewSession returns the protocol state of one app-server process.
func (Driver) NewSession(spec cliruntime.LaunchSpec) cliruntime.Session {
	return NewSessionWith(spec, Options{})
}

type session struct {
	// lastText is the current turn's last agent message (R-LIST-8).
	lastText string
	cwd      string
	resumeID string
	opt      Options
	branch   *branchState // a pending Codex supervision branch (branch.go)
	// archiving maps an outstanding thread/archive request to its thread.
	archiving map[int64]string
	// forkToArchive is archived once this process's first turn started.
	forkToArchive string

	mu      sync.Mutex
	nextID  int64
	pending map[int64]string // our request id → method
	thread  string           // confirmed thread id; "" until thread/start|resume answered
	dead    bool             // the handshake failed: no thread will come
	// adopting: this session took over a live process (Adopt) and waits
	// for the newest turn's status; adoptEnded is a turn that ended
	// meanwhile (adopt.go).
	adopting   bool
	adoptEnded string

	queue     []string // texts not yet sent as turn/start
	starting  bool     // a turn/start is out and has no answer or turn id yet
	turn      string   // active turn id
	interrupt bool     // interrupt asked for before the turn id was known
	// notified: turn/started was seen for the active turn. Codex answers
	// a turn/interrupt sent between the turn/start result and turn/started
	// with "no active turn to interrupt" (issue 4, measured on 0.169.0),
	// so such a refusal is retried once, at turn/started.
	notified bool
	retry    bool // resend the interrupt at turn/started
	retried  bool // the one retry of this turn was spent
	windows  rateWindows
	tokens   turnTokens // the active turn's token reports (usage.go)

	// open are Codex's requests waiting for an answer, by JSON-RPC id;
	// items the file-change items whose diff an approval shows
	// (requests.go).
	open  map[string]*codexRequest
	items map[string]fileItem
}

func (s *session) requestLocked(method string, params any) []byte {
	s.nextID++
	s.pending[s.nextID] = method
	return jsonrpc.Line(jsonrpc.Request{JSONRPC: "2.0", ID: s.nextID, Method: method, Params: params})
}

type clientInfo struct {
	Name    string  `json:"name"`
	Title   *string `json:"title"`
	Version string  `json:"version"`
}

type initializeParams struct {
	ClientInfo   clientInfo `json:"clientInfo"`
	Capabilities *struct{}  `json:"capabilities"`
}

func (s *session) Start() cliruntime.Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Only initialize: any other request before its answer gets "Not
	// initialized" (real-clis.md §2.1).
	return cliruntime.Step{Write: [][]byte{s.requestLocked("initialize", initializeParams{
		ClientInfo: clientInfo{Name: ClientName, Version: ClientVersion},
	})}}
}

type threadStartParams struct {
	Cwd string `json:"cwd,omitempty"`
}

type threadResumeParams struct {
	ThreadID string `json:"threadId"`
	Cwd      string `json:"cwd,omitempty"`
}

type textInput struct {
	Type         string   `json:"type"`
	Text         string   `json:"text"`
	TextElements []string `json:"text_elements"`
}

type turnStartParams struct {
	ThreadID string      `json:"threadId"`
	Input    []textInput `json:"input"`
}

type turnInterruptParams struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
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

// flushLocked sends the next queued text when the thread is ready and no
// turn runs: Codex takes one turn at a time.
func (s *session) flushLocked() cliruntime.Step {
	if s.thread == "" && s.branch != nil {
		return s.branchFlushLocked()
	}
	if s.thread == "" || s.adopting || s.starting || s.turn != "" || len(s.queue) == 0 {
		return cliruntime.Step{}
	}
	text := s.queue[0]
	s.queue = s.queue[1:]
	if err := s.fenceCheckLocked(s.thread); err != nil {
		// Fail closed: a run that lost its lease writes nothing to the
		// thread (R-CX-FT-8); the input is dropped, not run elsewhere.
		s.interrupt = false
		return merge(step(cliruntime.Event{Kind: cliruntime.EventError, ConversationID: s.thread, Error: err.Error()}), s.flushLocked())
	}
	s.starting = true
	return cliruntime.Step{Write: [][]byte{s.requestLocked("turn/start", turnStartParams{
		ThreadID: s.thread,
		Input:    []textInput{{Type: "text", Text: text, TextElements: []string{}}},
	})}}
}

// Interrupt is turn/interrupt with the active turn id (real-clis.md §2.2).
func (s *session) Interrupt() (cliruntime.Step, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.turn != "":
		return cliruntime.Step{Write: [][]byte{s.interruptLocked()}}, true
	case s.adopting || s.starting || (len(s.queue) > 0 && !s.dead):
		// The turn id is not known yet: send it when it is.
		s.interrupt = true
		return cliruntime.Step{}, true
	default:
		return cliruntime.Step{}, false
	}
}

func (s *session) interruptLocked() []byte {
	s.interrupt = false
	return s.requestLocked("turn/interrupt", turnInterruptParams{ThreadID: s.thread, TurnID: s.turn})
}

func (s *session) ConversationID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.thread
}

func (s *session) TurnActive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.adopting || s.starting || s.turn != "" || (len(s.queue) > 0 && !s.dead)
}

// observed are the notifications the driver reads; every other
// notification (the deltas, most of a busy turn's lines) is passed over
// after a Peek, without a decode or a copy.
var observed = map[string]bool{"turn/started": true, "turn/completed": true, "account/rateLimits/updated": true, "error": true,
	"item/started": true, "item/completed": true, "serverRequest/resolved": true, "thread/tokenUsage/updated": true}

func (s *session) Observe(line []byte) cliruntime.Step {
	h, ok := jsonrpc.Peek(line)
	if !ok || (!h.HasID && !h.Escaped && !observed[string(h.Method)]) {
		return cliruntime.Step{}
	}
	m, ok := jsonrpc.Parse(line)
	if !ok {
		return cliruntime.Step{}
	}
	n := len(line)
	for n > 0 && (line[n-1] == '\n' || line[n-1] == '\r') {
		n--
	}
	raw := json.RawMessage(line[:n]) // copied below for the events that keep it
	var out cliruntime.Step
	s.mu.Lock()
	switch {
	case m.IsResponse():
		out = s.responseLocked(m, raw)
	case m.IsRequest():
		out = s.serverRequestLocked(m, raw)
	case m.IsNotification():
		out = s.notificationLocked(m, raw)
	}
	s.mu.Unlock()
	for i := range out.Events {
		if out.Events[i].Raw != nil {
			out.Events[i].Raw = append(json.RawMessage(nil), out.Events[i].Raw...)
		}
	}
	return out
}

type threadResult struct {
	Thread struct {
		ID    string `json:"id"`
		Model string `json:"model"`
	} `json:"thread"`
}

type turnResult struct {
	Turn struct {
		ID string `json:"id"`
	} `json:"turn"`
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
		if m.HasError {
			s.dead = true
			return step(cliruntime.Event{Kind: cliruntime.EventError, Error: "initialize: " + m.ErrorMessage, HandshakeRefused: true, Raw: raw})
		}
		out := cliruntime.Step{Write: [][]byte{jsonrpc.Line(jsonrpc.Notification{JSONRPC: "2.0", Method: "initialized"})}}
		if s.branch != nil {
			// R-CX-FT-1: no thread before the first turn.
			out = merge(out, step(cliruntime.Event{Kind: cliruntime.EventReady, Raw: raw}))
			return merge(out, s.flushLocked())
		}
		if s.resumeID != "" {
			if err := s.fenceCheckLocked(s.resumeID); err != nil {
				s.dead = true
				return step(cliruntime.Event{Kind: cliruntime.EventConversationUnavailable, ConversationID: s.resumeID, Error: err.Error(), Raw: raw})
			}
			out.Write = append(out.Write, s.requestLocked("thread/resume", threadResumeParams{ThreadID: s.resumeID, Cwd: s.cwd}))
		} else {
			out.Write = append(out.Write, s.requestLocked("thread/start", threadStartParams{Cwd: s.cwd}))
		}
		return out
	case "thread/start", "thread/resume":
		return s.threadLocked(method, m, raw)
	case tagAdopt:
		return s.adoptedLocked(m, raw)
	case tagFork, tagStart, tagInject, tagArchive:
		return s.branchResponseLocked(method, id, m, raw)
	case "turn/start":
		if m.HasError {
			// The turn never started; the next queued text may go.
			s.starting = false
			s.interrupt = false
			out := step(cliruntime.Event{Kind: cliruntime.EventError, ConversationID: s.thread, Error: "turn/start: " + m.ErrorMessage, Raw: raw})
			return merge(out, s.flushLocked())
		}
		var r turnResult
		_ = json.Unmarshal(m.Result, &r)
		// The result comes before turn/started (real-clis.md §2.4).
		return s.turnStartedLocked(r.Turn.ID, raw)
	case "turn/interrupt":
		// An error here is "no active turn to interrupt". After the turn
		// ended it is the R-INT-2 no-op; while the turn is still ours it
		// came too early, before Codex registered the turn: retry once.
		if m.HasError && s.turn != "" && !s.retried {
			s.retried = true
			if s.notified {
				return cliruntime.Step{Write: [][]byte{s.interruptLocked()}}
			}
			s.retry = true
		}
	}
	return cliruntime.Step{}
}

func (s *session) threadLocked(method string, m jsonrpc.Message, raw json.RawMessage) cliruntime.Step {
	var r threadResult
	if !m.HasError {
		_ = json.Unmarshal(m.Result, &r)
	}
	switch {
	case method == "thread/resume" && (m.HasError || r.Thread.ID != s.resumeID):
		// Never fall back to a new thread (R-RES-2).
		s.dead = true
		msg := m.ErrorMessage
		if !m.HasError {
			msg = fmt.Sprintf("codex resumed thread %q instead of %q", r.Thread.ID, s.resumeID)
		}
		return step(cliruntime.Event{Kind: cliruntime.EventConversationUnavailable, ConversationID: s.resumeID, Error: msg, Raw: raw})
	case m.HasError || r.Thread.ID == "":
		s.dead = true
		msg := m.ErrorMessage
		if msg == "" {
			msg = "no thread id in the answer"
		}
		return step(cliruntime.Event{Kind: cliruntime.EventError, Error: method + ": " + msg, HandshakeRefused: true, Raw: raw})
	}
	s.thread = r.Thread.ID
	if r.Thread.Model != "" {
		s.tokens.model = r.Thread.Model
	}
	out := step(cliruntime.Event{Kind: cliruntime.EventConversation, ConversationID: s.thread, Raw: raw})
	return merge(out, s.flushLocked())
}

// turnStartedLocked records the turn id from whichever of the turn/start
// result and turn/started comes first.
func (s *session) turnStartedLocked(id string, raw json.RawMessage) cliruntime.Step {
	if id == "" || !s.starting {
		return cliruntime.Step{} // the other one already named it
	}
	s.starting = false
	s.turn = id
	s.notified, s.retry, s.retried = false, false, false
	out := step(cliruntime.Event{Kind: cliruntime.EventTurnStarted, ConversationID: s.thread, TurnID: id, Raw: raw})
	if s.interrupt {
		out.Write = append(out.Write, s.interruptLocked())
	}
	// R-CX-FT-4: the temporary fork goes once the turn runs.
	return merge(out, s.archiveForkLocked())
}

type turnNotification struct {
	Turn struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Error  *struct {
			Message        string          `json:"message"`
			CodexErrorInfo json.RawMessage `json:"codexErrorInfo"`
		} `json:"error"`
	} `json:"turn"`
}

func (s *session) notificationLocked(m jsonrpc.Message, raw json.RawMessage) cliruntime.Step {
	if s.adopting && (m.Method == "turn/started" || m.Method == "turn/completed") {
		return s.adoptTurnLocked(m, raw)
	}
	switch m.Method {
	case "turn/started":
		var n turnNotification
		_ = json.Unmarshal(m.Params, &n)
		out := s.turnStartedLocked(n.Turn.ID, raw)
		if n.Turn.ID != "" && n.Turn.ID == s.turn {
			s.notified = true
			if s.retry {
				s.retry = false
				out.Write = append(out.Write, s.interruptLocked())
			}
		}
		return out
	case "turn/completed":
		var n turnNotification
		if json.Unmarshal(m.Params, &n) != nil || n.Turn.ID == "" || n.Turn.ID != s.turn {
			return cliruntime.Step{}
		}
		return s.turnCompletedLocked(&n, raw)
	case "account/rateLimits/updated":
		s.windows.update(m.Params)
	case "thread/tokenUsage/updated":
		s.tokens.add(m.Params)
	case "item/started":
		s.rememberItemLocked(m.Params)
	case "item/completed":
		// The turn's last agent message is the list's preview (R-LIST-8).
		var n struct {
			Item struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"item"`
		}
		if json.Unmarshal(m.Params, &n) == nil && n.Item.Type == "agentMessage" && n.Item.Text != "" {
			s.lastText = n.Item.Text
		}
	case "serverRequest/resolved":
		return s.resolvedLocked(m.Params, raw)
	case "error":
		// Every failure is an error notification, then turn/completed
		// "failed" (real-clis.md §2.5); a retried one is progress, not a fact.
		var e struct {
			WillRetry bool `json:"willRetry"`
			Error     struct {
				Message        string          `json:"message"`
				CodexErrorInfo json.RawMessage `json:"codexErrorInfo"`
			} `json:"error"`
			TurnID string `json:"turnId"`
		}
		_ = json.Unmarshal(m.Params, &e)
		if e.WillRetry {
			// "Reconnecting... 2/5": not a fact yet, but a run that
			// never recovers must say why (R-LERR-1).
			return step(cliruntime.Event{Kind: cliruntime.EventRetrying, ConversationID: s.thread, TurnID: e.TurnID, ErrorKind: cliruntime.ErrorRetrying, Error: e.Error.Message, Raw: raw})
		}
		return step(cliruntime.Event{Kind: cliruntime.EventError, ConversationID: s.thread, TurnID: e.TurnID, ErrorKind: errorKind(e.Error.CodexErrorInfo), Error: e.Error.Message, Raw: raw})
	}
	return cliruntime.Step{}
}

func (s *session) turnCompletedLocked(n *turnNotification, raw json.RawMessage) cliruntime.Step {
	t := n.Turn
	var evs []cliruntime.Event
	ev := cliruntime.Event{Kind: cliruntime.EventTurnEnded, ConversationID: s.thread, TurnID: t.ID, Reason: t.Status, IsError: t.Status != "completed", Raw: raw,
		Usage: s.tokens.turn(s.windows.list())}
	if !ev.IsError {
		ev.Text = s.lastText
	}
	s.lastText = ""
	if t.Status == "interrupted" {
		ev.ErrorKind = cliruntime.ErrorInterrupted
	}
	if t.Error != nil {
		ev.Error = t.Error.Message
		if ev.ErrorKind == "" {
			ev.ErrorKind = errorKind(t.Error.CodexErrorInfo)
		}
		if lim := s.limitLocked(t.Error.CodexErrorInfo); lim != nil {
			evs = append(evs, cliruntime.Event{Kind: cliruntime.EventLimit, ConversationID: s.thread, TurnID: t.ID, Limit: lim, Raw: raw})
		}
	}
	evs = append(evs, ev)
	s.turn = ""
	s.interrupt, s.retry = false, false
	return merge(cliruntime.Step{Events: evs}, s.flushLocked())
}

// errorKind classifies a turn's codexErrorInfo for the run's last_error
// (R-LERR-1): a string ("usageLimitExceeded", "serverOverloaded", …) or an
// object such as {"httpConnectionFailed":{"httpStatusCode":401}}
// (real-clis.md §2.5).
func errorKind(info json.RawMessage) string {
	var name string
	var status int
	if json.Unmarshal(info, &name) != nil {
		var obj map[string]struct {
			HTTPStatusCode *int `json:"httpStatusCode"`
		}
		if json.Unmarshal(info, &obj) != nil {
			return cliruntime.ErrorTurnFailed
		}
		for k, v := range obj {
			name = k
			if v.HTTPStatusCode != nil {
				status = *v.HTTPStatusCode
			}
		}
	}
	switch {
	case status == 401 || status == 403 || name == "unauthorized":
		return cliruntime.ErrorAuth
	case status == 429 || name == "usageLimitExceeded" || name == "rateLimitExceeded" || name == "responseTooManyFailedAttempts":
		return cliruntime.ErrorRateLimit
	case name == "httpConnectionFailed" || name == "responseStreamConnectionFailed" || name == "responseStreamDisconnected":
		if status >= 500 {
			return cliruntime.ErrorProvider
		}
		return cliruntime.ErrorConnection
	case name == "serverOverloaded" || name == "internalServerError" || status >= 500:
		return cliruntime.ErrorProvider
	case name == "":
		return cliruntime.ErrorTurnFailed
	}
	return cliruntime.ErrorTurnFailed
}

// limitLocked is R-LIM-6: usageLimitExceeded → usage, rateLimitExceeded →
// rate, with the later reset of the exhausted windows.
func (s *session) limitLocked(info json.RawMessage) *cliruntime.Limit {
	var name string
	if json.Unmarshal(info, &name) != nil {
		return nil // an object such as {"responseTooManyFailedAttempts":…}
	}
	var kind cliruntime.LimitKind
	switch name {
	case "usageLimitExceeded":
		kind = cliruntime.LimitUsage
	case "rateLimitExceeded":
		kind = cliruntime.LimitRate
	default:
		return nil
	}
	return &cliruntime.Limit{Kind: kind, ResetsAt: s.windows.resetsAt()}
}

func step(ev ...cliruntime.Event) cliruntime.Step { return cliruntime.Step{Events: ev} }

func merge(a, b cliruntime.Step) cliruntime.Step {
	a.Write = append(a.Write, b.Write...)
	a.Events = append(a.Events, b.Events...)
	return a
}

// rateWindows is the last account/rateLimits/updated (real-clis.md §2.5).
type rateWindows struct {
	primary, secondary *window
}

type window struct {
	UsedPercent        float64 `json:"usedPercent"`
	ResetsAt           float64 `json:"resetsAt"`
	WindowDurationMins int     `json:"windowDurationMins"`
}

func (w *rateWindows) update(params json.RawMessage) {
	var p struct {
		RateLimits struct {
			Primary   *window `json:"primary"`
			Secondary *window `json:"secondary"`
		} `json:"rateLimits"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	w.primary, w.secondary = p.RateLimits.Primary, p.RateLimits.Secondary
}

// resetsAt is the later reset of the exhausted windows (R-LIM-6), nil when
// none is exhausted or none names a reset.
func (w *rateWindows) resetsAt() *time.Time {
	var best float64
	for _, win := range []*window{w.primary, w.secondary} {
		if win != nil && win.UsedPercent >= 100 && win.ResetsAt > best && win.ResetsAt < 1e11 {
			best = win.ResetsAt
		}
	}
	if best == 0 {
		return nil
	}
	t := time.Unix(int64(best), 0).UTC()
	return &t
}
