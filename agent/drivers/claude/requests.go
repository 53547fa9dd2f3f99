package claude

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/olivares-dev/olivares/agent/cliruntime"
)

// openRequest is a can_use_tool control request waiting for an answer.
type openRequest struct {
	req   cliruntime.Request
	input json.RawMessage // the tool input, given back on allow
	// suggestions are Claude Code's permission_suggestions, given back
	// (scoped to the session) on "allow for this session".
	suggestions json.RawMessage
}

// canUseTool is the request of a can_use_tool control request
// (measured on 2.1.328, real-clis.md §1.7):
//
//	{"subtype":"can_use_tool","tool_name":"Bash","display_name":"Bash",
//	 "input":{...},"description":"...","permission_suggestions":[...],
//	 "blocked_path":"...","tool_use_id":"toolu_..."}
type canUseTool struct {
	Subtype     string          `json:"subtype"`
	ToolName    string          `json:"tool_name"`
	Input       json.RawMessage `json:"input"`
	Description string          `json:"description"`
	Suggestions json.RawMessage `json:"permission_suggestions"`
	BlockedPath string          `json:"blocked_path"`
	ToolUseID   string          `json:"tool_use_id"`
}

// toolInput holds the members of the tools' inputs a request shows.
type toolInput struct {
	Command     string `json:"command"`
	Description string `json:"description"`
	FilePath    string `json:"file_path"`
	NotebookPat string `json:"notebook_path"`
	OldString   string `json:"old_string"`
	NewString   string `json:"new_string"`
	Content     string `json:"content"`
	Edits       []struct {
		OldString string `json:"old_string"`
		NewString string `json:"new_string"`
	} `json:"edits"`
	URL       string `json:"url"`
	Questions []struct {
		Question string `json:"question"`
		Header   string `json:"header"`
		Options  []struct {
			Label       string `json:"label"`
			Description string `json:"description"`
		} `json:"options"`
	} `json:"questions"`
}

// controlRequestLocked handles a control request Claude Code sends the
// host. can_use_tool becomes a request on the run (R-REQ-5); every other
// subtype is answered with an error at once, so that no turn waits on a
// question nobody will answer.
func (s *session) controlRequestLocked(f *frame, raw json.RawMessage) cliruntime.Step {
	var id string
	if json.Unmarshal(f.RequestID, &id) != nil || id == "" {
		return cliruntime.Step{}
	}
	var c canUseTool
	if json.Unmarshal(f.Request, &c) != nil || c.Subtype != "can_use_tool" || c.ToolName == "" {
		sub := c.Subtype
		return cliruntime.Step{
			Write:  [][]byte{controlError(id, "olivares does not answer control request "+fmt.Sprintf("%q", sub))},
			Events: []cliruntime.Event{{Kind: cliruntime.EventError, ConversationID: s.conv, ErrorKind: cliruntime.ErrorTool, Error: fmt.Sprintf("claude asked %q; olivares refused", sub), Raw: raw}},
		}
	}
	if _, dup := s.open[id]; dup {
		return cliruntime.Step{}
	}
	if len(s.open) >= maxOpenRequests {
		return cliruntime.Step{Write: [][]byte{s.denyLine(id, "too many requests are waiting for an answer")}}
	}
	req := s.describe(id, &c)
	s.open[id] = &openRequest{req: req, input: c.Input, suggestions: c.Suggestions}
	if c.ToolUseID != "" {
		s.answered[c.ToolUseID] = true
	}
	r := req
	return step(cliruntime.Event{Kind: cliruntime.EventRequest, ConversationID: s.conv, Request: &r, Raw: raw})
}

// maxOpenRequests bounds the requests a session holds open: a tool that
// asks without end is refused past it.
const maxOpenRequests = 64

// describe turns a can_use_tool into the request a person sees.
func (s *session) describe(id string, c *canUseTool) cliruntime.Request {
	var in toolInput
	_ = json.Unmarshal(c.Input, &in)
	req := cliruntime.Request{ID: id, Tool: c.ToolName, ToolUseID: c.ToolUseID, Input: []byte(cliruntime.Clip(string(c.Input))),
		Options: []cliruntime.Option{
			{ID: cliruntime.OptionAllowOnce, Label: "Allow once", Decision: cliruntime.DecisionAllow},
			{ID: cliruntime.OptionAllowSession, Label: "Allow for this session", Decision: cliruntime.DecisionAllow, Session: true},
			{ID: cliruntime.OptionDeny, Label: "Deny", Decision: cliruntime.DecisionDeny},
		}}
	switch c.ToolName {
	case askUserQuestion:
		// The model asks the person (measured on 2.1.328: allowed with
		// updatedInput.answers {question: answer}, the model gets the
		// answers as the tool's result).
		req.Kind, req.Text = cliruntime.RequestQuestion, true
		req.Options = nil
		for i, q := range in.Questions {
			if i == 0 {
				req.Title, req.Question = cliruntime.Title(firstNonEmpty(q.Header, q.Question)), cliruntime.Clip(q.Question)
				for j, o := range q.Options {
					label := o.Label
					if o.Description != "" {
						label += " — " + o.Description
					}
					req.Options = append(req.Options, cliruntime.Option{ID: fmt.Sprintf("choice_%d", j+1), Label: cliruntime.Clip(label), Decision: cliruntime.DecisionAnswer})
				}
			} else {
				req.Question += "\n" + cliruntime.Clip(q.Question)
			}
		}
		if req.Title == "" {
			req.Title = "A question"
		}
		req.Options = append(req.Options, cliruntime.Option{ID: cliruntime.OptionText, Label: "Answer in your own words", Decision: cliruntime.DecisionAnswer},
			cliruntime.Option{ID: cliruntime.OptionDeny, Label: "Do not answer", Decision: cliruntime.DecisionDeny})
	case "Bash":
		req.Kind, req.Command, req.Cwd = cliruntime.RequestCommand, cliruntime.Clip(in.Command), s.cwd
		req.Title = "Run " + cliruntime.Title(in.Command)
		if in.Description != "" {
			req.Title = in.Description + ": " + cliruntime.Title(in.Command)
		}
	case "Edit", "MultiEdit", "Write", "NotebookEdit":
		path := in.FilePath
		if path == "" {
			path = in.NotebookPat
		}
		req.Kind, req.Files = cliruntime.RequestFileChange, []string{path}
		req.Diff = cliruntime.Clip(editDiff(path, &in))
		verb := "Edit "
		if c.ToolName == "Write" {
			verb = "Write "
		}
		req.Title = verb + filepath.Base(path)
	default:
		req.Kind = cliruntime.RequestPermission
		req.Title = "Use " + c.ToolName
		if in.URL != "" {
			req.Title += " on " + in.URL
		}
		if c.Description != "" {
			req.Title += ": " + cliruntime.Title(c.Description)
		}
	}
	req.Title = cliruntime.Clip(req.Title)
	return req
}

// askUserQuestion is Claude Code's tool for asking the person.
const askUserQuestion = "AskUserQuestion"

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// answers is AskUserQuestion's updatedInput.answers: the text (or the
// chosen option's label) answers the first question; a text that is a JSON
// object of question → answer answers several.
func answers(input json.RawMessage, opt cliruntime.Option, text string) map[string]any {
	var in toolInput
	_ = json.Unmarshal(input, &in)
	out := map[string]any{}
	if len(in.Questions) == 0 {
		return out
	}
	if opt.ID != "" && opt.Decision == cliruntime.DecisionAnswer && text == "" {
		var n int
		if _, err := fmt.Sscanf(opt.ID, "choice_%d", &n); err == nil && n >= 1 && n <= len(in.Questions[0].Options) {
			text = in.Questions[0].Options[n-1].Label
		}
	}
	var many map[string]string
	if len(in.Questions) > 1 && json.Unmarshal([]byte(text), &many) == nil {
		for k, v := range many {
			out[k] = v
		}
		return out
	}
	out[in.Questions[0].Question] = text
	return out
}

// editDiff is a unified-looking diff of an edit's strings, or a write's
// content as added lines.
func editDiff(path string, in *toolInput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", path, path)
	hunk := func(old, new string) {
		b.WriteString("@@\n")
		for _, l := range cliruntime.Lines(old) {
			b.WriteString("-" + l + "\n")
		}
		for _, l := range cliruntime.Lines(new) {
			b.WriteString("+" + l + "\n")
		}
	}
	switch {
	case in.Content != "":
		hunk("", in.Content)
	case len(in.Edits) > 0:
		for _, e := range in.Edits {
			hunk(e.OldString, e.NewString)
		}
	default:
		hunk(in.OldString, in.NewString)
	}
	return b.String()
}

// Answer answers a can_use_tool request: allow with the original input
// (and, for the session option, Claude Code's own suggestions scoped to
// the session, so that nothing is written to a settings file), or deny
// with the reason the tool is told (measured on 2.1.328: the model gets
// the message as the tool result, with is_error).
func (s *session) Answer(id string, a cliruntime.Answer) (cliruntime.Step, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.open[id]
	if o == nil {
		return cliruntime.Step{}, cliruntime.ErrNoSuchRequest
	}
	opt, ok := o.req.Option(a.OptionID)
	if !ok {
		return cliruntime.Step{}, fmt.Errorf("%w: no option %q", cliruntime.ErrBadAnswer, a.OptionID)
	}
	delete(s.open, id)
	if opt.Decision == cliruntime.DecisionDeny {
		msg := a.Message
		if msg == "" {
			msg = "The user denied this tool use."
		}
		return cliruntime.Step{Write: [][]byte{s.denyLine(id, msg)}}, nil
	}
	resp := map[string]any{"behavior": "allow", "updatedInput": json.RawMessage(o.input)}
	if len(o.input) == 0 || !json.Valid(o.input) {
		resp["updatedInput"] = map[string]any{}
	}
	if o.req.Tool == askUserQuestion {
		var in map[string]any
		if json.Unmarshal(o.input, &in) != nil || in == nil {
			in = map[string]any{}
		}
		in["answers"] = answers(o.input, opt, a.Text)
		resp["updatedInput"] = in
	}
	if opt.Session {
		if p := sessionScoped(o.suggestions); p != nil {
			resp["updatedPermissions"] = p
		}
	}
	return cliruntime.Step{Write: [][]byte{controlSuccess(id, resp)}}, nil
}

// sessionScoped returns Claude Code's permission suggestions with every
// destination set to "session": allowing for the session never writes a
// settings file of the profile or the project.
func sessionScoped(raw json.RawMessage) []map[string]any {
	var sug []map[string]any
	if json.Unmarshal(raw, &sug) != nil || len(sug) == 0 {
		return nil
	}
	for _, x := range sug {
		x["destination"] = "session"
	}
	return sug
}

func (s *session) denyLine(id, msg string) []byte {
	return controlSuccess(id, map[string]any{"behavior": "deny", "message": msg})
}

func controlSuccess(id string, resp any) []byte {
	b, _ := json.Marshal(map[string]any{"type": "control_response",
		"response": map[string]any{"subtype": "success", "request_id": id, "response": resp}})
	return append(b, '\n')
}

func controlError(id, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "control_response",
		"response": map[string]any{"subtype": "error", "request_id": id, "error": msg}})
	return append(b, '\n')
}

// permissionDeniedLocked reports a system/permission_denied frame: Claude
// Code refused a tool use by its own rules (measured on 2.1.328 without
// --permission-prompt-tool; R-REQ-9).
func (s *session) permissionDeniedLocked(f *frame, raw json.RawMessage) cliruntime.Step {
	tool, use := str(f.ToolName), str(f.ToolUseID)
	if tool == "" || (use != "" && s.answered[use]) {
		return cliruntime.Step{}
	}
	if use != "" {
		s.answered[use] = true
	}
	return step(cliruntime.Event{Kind: cliruntime.EventDenied, ConversationID: s.conv,
		Denial: &cliruntime.Denial{Tool: tool, ToolUseID: use, Message: cliruntime.Clip(str(f.Message))}, Raw: raw})
}

// denialsLocked reports the result frame's permission_denials that no
// request of this session and no permission_denied frame covered.
func (s *session) denialsLocked(raw, line json.RawMessage) []cliruntime.Event {
	var ds []struct {
		ToolName  string    `json:"tool_name"`
		ToolUseID string    `json:"tool_use_id"`
		ToolInput toolInput `json:"tool_input"`
	}
	if json.Unmarshal(raw, &ds) != nil {
		return nil
	}
	var evs []cliruntime.Event
	for _, d := range ds {
		if d.ToolName == "" || (d.ToolUseID != "" && s.answered[d.ToolUseID]) {
			continue
		}
		if d.ToolUseID != "" {
			s.answered[d.ToolUseID] = true
		}
		evs = append(evs, cliruntime.Event{Kind: cliruntime.EventDenied, ConversationID: s.conv,
			Denial: &cliruntime.Denial{Tool: d.ToolName, ToolUseID: d.ToolUseID, Command: cliruntime.Clip(d.ToolInput.Command),
				Message: "Claude Code refused it by its own permission rules"}, Raw: line})
	}
	return evs
}
