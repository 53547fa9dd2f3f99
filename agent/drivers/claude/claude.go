// Package claude is the driver of Claude Code's operate form:
// `claude --print --input-format stream-json --output-format stream-json
// --verbose`, one NDJSON frame per line in both directions (real-clis.md §1).
//
// It runs on pipes only, never on a PTY: with a terminal on stdin Claude Code
// refuses to start (R-TR-3).
package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/internal/jsonscan"
)

// Name is the program run when LaunchSpec.Binary is empty.
const Name = "claude"

// baseArgs is the operate form (real-clis.md §1.1): stream-json output needs
// --verbose, or Claude exits 1. --permission-prompt-tool stdio makes Claude
// Code ask the host (a can_use_tool control request on stdout) instead of
// refusing every use its permission rules do not allow (R-REQ-5; measured
// on 2.1.328). --include-partial-messages adds the model's text as it
// streams (stream_event deltas, real-clis.md §1.7), so a viewer reads a
// slow answer as it is written, not all at once when the turn ends
// (R-ATT-12).
var baseArgs = []string{"--print", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
	"--include-partial-messages", "--permission-prompt-tool", "stdio"}

// resumeNotFound starts the error Claude Code gives for --resume of an id it
// has no transcript for (real-clis.md §1.4).
const resumeNotFound = "No conversation found with session ID"

// Driver is the claude driver. The zero value is ready to use.
type Driver struct{}

var _ cliruntime.Driver = Driver{}

// New returns the claude driver.
func New() Driver { return Driver{} }

func (Driver) Kind() cliruntime.Kind { return cliruntime.KindClaude }

// LaunchTransport is stdio: the --print form refuses a terminal (R-TR-3).
func (Driver) LaunchTransport() cliruntime.LaunchTransport { return cliruntime.TransportStdio }

// Launch starts a new conversation. Settings come from the profile home
// unless spec.IsolateSettings asks for --setting-sources "" (R-PCS-15,
// real-clis.md §1.5): that flag also drops every CLAUDE.md and the user's own
// settings, so it is not the default.
func (d Driver) Launch(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	if spec.ConversationID != "" {
		return cliruntime.Command{}, cliruntime.ErrUnexpectedConversation
	}
	return d.command(spec, nil)
}

// Resume continues spec.ConversationID with --resume, which keeps the session
// id and appends to the same transcript (real-clis.md §1.4). Not
// --fork-session: that would be a new conversation (R-RES-2).
func (d Driver) Resume(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	// A UUID, so that it can never be read as a flag on argv.
	if err := cliruntime.CheckUUIDID(spec.ConversationID); err != nil {
		return cliruntime.Command{}, err
	}
	return d.command(spec, []string{"--resume", spec.ConversationID})
}

func (Driver) command(spec cliruntime.LaunchSpec, extra []string) (cliruntime.Command, error) {
	env, err := cliruntime.BuildEnv(spec, cliruntime.EnvVar{Key: "CLAUDE_CONFIG_DIR", Value: filepath.Join(spec.Home, ".claude")})
	if err != nil {
		return cliruntime.Command{}, err
	}
	args := append([]string(nil), baseArgs...)
	if spec.IsolateSettings {
		args = append(args, "--setting-sources", "")
	}
	if spec.EngineHook != "" {
		settings, err := json.Marshal(map[string]any{"hooks": map[string]any{"PreToolUse": []any{
			map[string]any{"matcher": "*", "hooks": []any{map[string]any{"type": "command", "command": spec.EngineHook}}},
		}}})
		if err != nil {
			return cliruntime.Command{}, err
		}
		args = append(args, "--settings", string(settings))
	}
	args = append(args, extra...)
	path := spec.Binary
	if path == "" {
		path = Name
	}
	return cliruntime.Command{Path: path, Args: args, Env: env, Dir: spec.Workdir}, nil
}

// CheckInput takes line or message (R-IN-2).
func (Driver) CheckInput(in cliruntime.Input) error { return cliruntime.CheckStreamJSONInput(in) }

// NewSession returns the protocol state of one claude process.
func (Driver) NewSession(spec cliruntime.LaunchSpec) cliruntime.Session {
	return &session{resumeID: spec.ConversationID, cwd: spec.Workdir, open: map[string]*openRequest{}, answered: map[string]bool{}}
}

type session struct {
	resumeID string // asked for at resume; "" for a launch
	cwd      string // the workdir, the cwd of the commands Claude asks to run

	mu sync.Mutex
	// conv is the session_id confirmed by system/init.
	conv string
	// pending counts user messages written whose turn has not ended; Claude
	// queues them itself and runs one turn each (real-clis.md §1.1).
	pending int
	// ctl numbers control requests: "olv-1", "olv-2", ...
	ctl int
	// resetsAt is the reset of the last rejecting rate_limit_event of the
	// current turn (R-LIM-5).
	resetsAt *time.Time
	// dead: the resume was refused; the process takes no more input.
	dead bool
	// open are the can_use_tool requests waiting for an answer, by
	// request_id (requests.go).
	open map[string]*openRequest
	// answered are the tool_use_ids of the uses this session answered or
	// already reported refused: a permission_denials entry for one of them
	// is no new refusal. Cleared at each result.
	answered map[string]bool
	// model is the model system/init last named; windows the account's
	// rate-limit windows of the last rate_limit_event (usage.go).
	model   string
	windows []cliruntime.RateWindow
}

func (s *session) Start() cliruntime.Step { return cliruntime.Step{} }

func (s *session) Encode(in cliruntime.Input) (cliruntime.Step, error) {
	if err := cliruntime.CheckStreamJSONInput(in); err != nil {
		return cliruntime.Step{}, err
	}
	var line []byte
	user := true
	if in.Line != nil {
		// Verbatim (R-IN-2). Only a user frame starts a turn; a line may
		// also be a control_request.
		line = append(append(line, in.Line...), '\n')
		var f struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(in.Line, &f)
		user = f.Type == "user"
	} else {
		var content bytes.Buffer
		if err := json.Compact(&content, in.Message); err != nil {
			return cliruntime.Step{}, fmt.Errorf("%w: %v", cliruntime.ErrInvalidInput, err)
		}
		line = append(line, `{"type":"user","message":{"role":"user","content":`...)
		line = append(line, content.Bytes()...)
		line = append(line, "}}\n"...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return cliruntime.Step{}, cliruntime.ErrHandshakeFailed
	}
	if user {
		s.pending++
	}
	return cliruntime.Step{Write: [][]byte{line}}, nil
}

// Interrupt is the control protocol's interrupt (real-clis.md §1.7). Claude
// answers an idle interrupt with success too, but we write nothing then:
// R-INT-2 makes it a no-op.
func (s *session) Interrupt() (cliruntime.Step, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == 0 {
		return cliruntime.Step{}, false
	}
	s.ctl++
	line := `{"type":"control_request","request_id":"olv-` + strconv.Itoa(s.ctl) + `","request":{"subtype":"interrupt"}}` + "\n"
	return cliruntime.Step{Write: [][]byte{[]byte(line)}}, true
}

func (s *session) ConversationID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conv
}

// MidTurn is cliruntime.MidTurner: the adopted process is in a turn whose
// init this session did not read; its result balances the count.
func (s *session) MidTurn() cliruntime.Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == 0 {
		s.pending = 1
	}
	conv := s.conv
	if conv == "" {
		conv = s.resumeID
	}
	return step(cliruntime.Event{Kind: cliruntime.EventTurnStarted, ConversationID: conv})
}

func (s *session) TurnActive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending > 0
}

// frame holds the members of a stream-json frame the driver reads. Each is
// raw so that a member of an unexpected type spoils only itself.
type frame struct {
	Type      string          `json:"type"`
	Subtype   json.RawMessage `json:"subtype"`
	SessionID json.RawMessage `json:"session_id"`

	// result
	IsError        json.RawMessage `json:"is_error"`
	TerminalReason json.RawMessage `json:"terminal_reason"`
	Result         json.RawMessage `json:"result"`
	Errors         json.RawMessage `json:"errors"`
	APIError       json.RawMessage `json:"api_error"`
	APIErrorStatus json.RawMessage `json:"api_error_status"`
	QueuedTurns    json.RawMessage `json:"queued_turn_count"`
	// Usage (usage.go): the turn's own per-model figures, and the
	// request totals for a tool that sends no per-turn map.
	ModelUsageSince json.RawMessage `json:"model_usage_since_last_result"`
	Usage           json.RawMessage `json:"usage"`

	// system/init
	Model json.RawMessage `json:"model"`

	// rate_limit_event
	RateLimitInfo json.RawMessage `json:"rate_limit_info"`

	// control_response
	Response json.RawMessage `json:"response"`

	// control_request (requests.go)
	RequestID json.RawMessage `json:"request_id"`
	Request   json.RawMessage `json:"request"`

	// system/permission_denied
	ToolName  json.RawMessage `json:"tool_name"`
	ToolUseID json.RawMessage `json:"tool_use_id"`
	Message   json.RawMessage `json:"message"`

	// result
	PermissionDenials json.RawMessage `json:"permission_denials"`
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// observed are the frame types the driver reads; the others (assistant,
// user and stream_event frames, most of a busy turn's lines) are passed over
// after a scan for their type, without a decode or a copy.
var observed = map[string]bool{"system": true, "result": true, "rate_limit_event": true, "control_response": true, "control_request": true,
	"control_cancel_request": true}

func (s *session) Observe(line []byte) cliruntime.Step {
	if t, esc, ok := jsonscan.String(line, "type"); ok && !esc && !observed[string(t)] {
		return cliruntime.Step{}
	}
	var f frame
	if json.Unmarshal(line, &f) != nil {
		return cliruntime.Step{}
	}
	raw := json.RawMessage(bytes.TrimRight(line, "\r\n")) // copied below for the events that keep it
	out := s.observeFrame(&f, raw)
	for i := range out.Events {
		if out.Events[i].Raw != nil {
			out.Events[i].Raw = bytes.Clone(out.Events[i].Raw)
		}
	}
	return out
}

func (s *session) observeFrame(f *frame, raw json.RawMessage) cliruntime.Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch f.Type {
	case "system":
		switch str(f.Subtype) {
		case "init":
			if m := str(f.Model); m != "" {
				s.model = m
			}
			return s.initLocked(str(f.SessionID), raw)
		case "permission_denied":
			return s.permissionDeniedLocked(f, raw)
		}
	case "control_request":
		return s.controlRequestLocked(f, raw)
	case "control_cancel_request":
		// Claude Code no longer waits on a can_use_tool (its turn was
		// interrupted; measured on 2.1.328).
		id := str(f.RequestID)
		if s.open[id] == nil {
			return cliruntime.Step{}
		}
		delete(s.open, id)
		return step(cliruntime.Event{Kind: cliruntime.EventRequestWithdrawn, ConversationID: s.conv, RequestID: id, Raw: raw})
	case "result":
		return s.resultLocked(f, raw)
	case "rate_limit_event":
		s.rateLimitLocked(f.RateLimitInfo)
	case "control_response":
		var r struct {
			Subtype string `json:"subtype"`
			Error   string `json:"error"`
		}
		if json.Unmarshal(f.Response, &r) == nil && r.Subtype == "error" {
			return step(cliruntime.Event{Kind: cliruntime.EventError, Error: r.Error, Raw: raw})
		}
	}
	return cliruntime.Step{}
}

func step(ev ...cliruntime.Event) cliruntime.Step { return cliruntime.Step{Events: ev} }

// initLocked handles system/init, sent at the start of every turn
// (real-clis.md §1.1): the first names the conversation.
func (s *session) initLocked(id string, raw json.RawMessage) cliruntime.Step {
	s.resetsAt = nil
	var evs []cliruntime.Event
	switch {
	case id == "" || id == s.conv:
	case s.resumeID != "" && id != s.resumeID:
		// A resume that came back in another session is a fallback to a new
		// conversation, which R-RES-2 forbids: report it, and never adopt
		// the new id as the run's conversation.
		s.dead = true
		evs = append(evs, cliruntime.Event{Kind: cliruntime.EventConversationUnavailable, ConversationID: s.resumeID,
			Error: fmt.Sprintf("claude resumed into session %s instead of %s", id, s.resumeID), Raw: raw})
	default:
		s.conv = id
		evs = append(evs, cliruntime.Event{Kind: cliruntime.EventConversation, ConversationID: id, Raw: raw})
	}
	if s.pending == 0 {
		// A turn we did not count (a verbatim line of another type that
		// Claude took as a turn): count it, so that its result balances.
		s.pending = 1
	}
	evs = append(evs, cliruntime.Event{Kind: cliruntime.EventTurnStarted, ConversationID: s.conv, Raw: raw})
	return cliruntime.Step{Events: evs}
}

// resultLocked handles a result frame. is_error and terminal_reason tell how
// the turn ended; subtype does not ("success" comes with is_error:true,
// real-clis.md §1.2).
func (s *session) resultLocked(f *frame, raw json.RawMessage) cliruntime.Step {
	var isErr bool
	_ = json.Unmarshal(f.IsError, &isErr)
	var errs []string
	_ = json.Unmarshal(f.Errors, &errs)
	for _, e := range errs {
		if strings.HasPrefix(e, resumeNotFound) {
			// The --resume refusal: one frame, then exit 1; no turn ran
			// (real-clis.md §1.4).
			id := s.resumeID
			if id == "" {
				id = str(f.SessionID)
			}
			s.pending = 0
			s.dead = true
			return step(cliruntime.Event{Kind: cliruntime.EventConversationUnavailable, ConversationID: id, Error: e, Raw: raw})
		}
	}
	var evs []cliruntime.Event
	if isErr {
		if lim := s.limitLocked(f); lim != nil {
			evs = append(evs, cliruntime.Event{Kind: cliruntime.EventLimit, ConversationID: s.conv, Limit: lim, Raw: raw})
		}
	}
	evs = append(evs, s.denialsLocked(f.PermissionDenials, raw)...)
	ev := cliruntime.Event{Kind: cliruntime.EventTurnEnded, ConversationID: s.conv, IsError: isErr, Reason: str(f.TerminalReason), Raw: raw,
		Usage: s.usageLocked(f)}
	if isErr {
		ev.Error = strings.Join(errs, "; ")
		if ev.Error == "" {
			ev.Error = str(f.Result)
		}
		ev.ErrorKind = errorKind(f)
	} else {
		ev.Text = str(f.Result) // the turn's last assistant text (R-LIST-8)
	}
	evs = append(evs, ev)
	clear(s.answered)
	// queued_turn_count says how many user messages still wait; without it,
	// one turn ended.
	var queued int
	if json.Unmarshal(f.QueuedTurns, &queued) == nil && f.QueuedTurns != nil && queued >= 0 {
		s.pending = queued
	} else if s.pending > 0 {
		s.pending--
	}
	s.resetsAt = nil
	return cliruntime.Step{Events: evs}
}

// notLoggedIn starts the result of a turn Claude Code refused without
// asking the model: no API key and no sign-in in its home (real-clis.md
// §1.2: terminal_reason api_error, api_error_status null, the assistant
// frame's error authentication_failed). It is an auth failure (R-ACCT-8).
const notLoggedIn = "Not logged in"

// errorKind classifies a failed turn's result for the run's last_error
// (R-LERR-1): the API status Claude Code reports (real-clis.md §1.10), a
// connection failure, or an interrupt (terminal_reason aborted_*).
func errorKind(f *frame) string {
	var status int
	_ = json.Unmarshal(f.APIErrorStatus, &status)
	switch reason := str(f.TerminalReason); {
	case strings.HasPrefix(reason, "aborted"):
		return cliruntime.ErrorInterrupted
	case status == 401 || status == 403, strings.HasPrefix(str(f.Result), notLoggedIn):
		return cliruntime.ErrorAuth
	case status == 429:
		return cliruntime.ErrorRateLimit
	case status >= 500:
		return cliruntime.ErrorProvider
	case str(f.APIError) == "connection_failed":
		return cliruntime.ErrorConnection
	case status != 0 || reason == "api_error":
		return cliruntime.ErrorProvider
	}
	return cliruntime.ErrorTurnFailed
}

// limitLocked is R-LIM-5: api_error usage_limit_reached → usage, an HTTP 429
// otherwise → rate; any other error result sets no limit (R-LIM-9).
func (s *session) limitLocked(f *frame) *cliruntime.Limit {
	var status int
	_ = json.Unmarshal(f.APIErrorStatus, &status)
	var kind cliruntime.LimitKind
	switch {
	case str(f.APIError) == "usage_limit_reached":
		kind = cliruntime.LimitUsage
	case status == 429:
		kind = cliruntime.LimitRate
	default:
		return nil
	}
	return &cliruntime.Limit{Kind: kind, ResetsAt: s.resetsAt}
}

// rateLimitLocked keeps the reset of a rejecting rate_limit_event; only
// subscription auth sends them (real-clis.md §1.10).
func (s *session) rateLimitLocked(info json.RawMessage) {
	if w := windowsOf(info); w != nil {
		s.windows = w
	}
	var ri struct {
		Status   string  `json:"status"`
		ResetsAt float64 `json:"resetsAt"`
	}
	if json.Unmarshal(info, &ri) != nil || ri.Status != "rejected" || ri.ResetsAt <= 0 || ri.ResetsAt > 1e11 {
		return
	}
	t := time.Unix(int64(ri.ResetsAt), 0).UTC()
	s.resetsAt = &t
}
