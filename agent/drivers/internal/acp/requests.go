package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/internal/jsonrpc"
)

// acpRequest is a session/request_permission waiting for an answer.
type acpRequest struct {
	rawID json.RawMessage
	req   cliruntime.Request
	// addedDeny: the agent offered no reject option and the driver added
	// "deny", answered "cancelled".
	addedDeny bool
}

// maxOpenRequests bounds the requests a session holds open.
const maxOpenRequests = 64

// permissionParams is session/request_permission's params
// (agentclientprotocol.com, RequestPermissionRequest).
type permissionParams struct {
	SessionID string `json:"sessionId"`
	ToolCall  struct {
		ToolCallID string `json:"toolCallId"`
		Title      string `json:"title"`
		Kind       string `json:"kind"`
		Locations  []struct {
			Path string `json:"path"`
		} `json:"locations"`
		Content []struct {
			Type    string  `json:"type"`
			Path    string  `json:"path"`
			OldText *string `json:"oldText"`
			NewText string  `json:"newText"`
		} `json:"content"`
		RawInput json.RawMessage `json:"rawInput"`
	} `json:"toolCall"`
	Options []struct {
		OptionID string `json:"optionId"`
		Name     string `json:"name"`
		Kind     string `json:"kind"`
	} `json:"options"`
}

// agentRequestLocked answers what the agent asks the client. A permission
// request becomes a request on the run with the agent's own options
// (R-REQ-7); everything else (file system, terminal, vendor extensions)
// is not offered: "method not found".
func (s *session) agentRequestLocked(m jsonrpc.Message, raw json.RawMessage) cliruntime.Step {
	if m.Method != "session/request_permission" {
		resp := jsonrpc.Response{JSONRPC: "2.0", ID: m.ID, Error: &jsonrpc.Error{Code: jsonrpc.MethodNotFound, Message: "olivares does not answer " + strconv.Quote(m.Method)}}
		return cliruntime.Step{
			Write:  [][]byte{jsonrpc.Line(resp)},
			Events: []cliruntime.Event{{Kind: cliruntime.EventError, ConversationID: s.sessionID, ErrorKind: cliruntime.ErrorTool, Error: s.name + " asked " + strconv.Quote(m.Method) + "; olivares does not answer it", Raw: raw}},
		}
	}
	id := string(bytes.TrimSpace(m.ID))
	if s.open == nil {
		s.open = map[string]*acpRequest{}
	}
	if _, dup := s.open[id]; dup || len(s.open) >= maxOpenRequests {
		return cliruntime.Step{Write: [][]byte{outcome(m.ID, "")}}
	}
	var p permissionParams
	_ = json.Unmarshal(m.Params, &p)
	req, added := describe(&p)
	req.ID = id
	s.open[id] = &acpRequest{rawID: append(json.RawMessage(nil), m.ID...), req: req, addedDeny: added}
	r := req
	return step(cliruntime.Event{Kind: cliruntime.EventRequest, ConversationID: s.sessionID, Request: &r, Raw: raw})
}

// describe turns a permission request into the request a person sees: the
// tool call's kind says which of ours it is, and the options are the
// agent's own (a "deny" is added when the agent offers no reject option:
// it is answered "cancelled").
func describe(p *permissionParams) (cliruntime.Request, bool) {
	tc := &p.ToolCall
	req := cliruntime.Request{Tool: tc.Kind, Title: cliruntime.Title(tc.Title), Input: []byte(cliruntime.Clip(string(tc.RawInput))), ToolUseID: tc.ToolCallID}
	var in struct {
		Command json.RawMessage `json:"command"`
		Cwd     string          `json:"cwd"`
	}
	_ = json.Unmarshal(tc.RawInput, &in)
	switch tc.Kind {
	case "execute":
		req.Kind = cliruntime.RequestCommand
		var cmd string
		if json.Unmarshal(in.Command, &cmd) != nil {
			var argv []string
			_ = json.Unmarshal(in.Command, &argv)
			cmd = strings.Join(argv, " ")
		}
		if cmd == "" {
			cmd = tc.Title
		}
		req.Command, req.Cwd = cliruntime.Clip(cmd), in.Cwd
	case "edit", "delete", "move":
		req.Kind = cliruntime.RequestFileChange
		var diff strings.Builder
		for _, c := range tc.Content {
			if c.Type != "diff" || c.Path == "" {
				continue
			}
			req.Files = append(req.Files, c.Path)
			fmt.Fprintf(&diff, "--- %s\n+++ %s\n@@\n", c.Path, c.Path)
			if c.OldText != nil {
				for _, l := range cliruntime.Lines(*c.OldText) {
					diff.WriteString("-" + l + "\n")
				}
			}
			for _, l := range cliruntime.Lines(c.NewText) {
				diff.WriteString("+" + l + "\n")
			}
		}
		if len(req.Files) == 0 {
			for _, l := range tc.Locations {
				req.Files = append(req.Files, l.Path)
			}
		}
		req.Diff = cliruntime.Clip(diff.String())
	default:
		req.Kind = cliruntime.RequestPermission
	}
	if req.Title == "" {
		req.Title = "Use " + tc.Kind
	}
	hasReject := false
	for _, o := range p.Options {
		if o.OptionID == "" {
			continue
		}
		opt := cliruntime.Option{ID: o.OptionID, Label: cliruntime.Clip(o.Name), Decision: cliruntime.DecisionAllow, Session: o.Kind == "allow_always"}
		if strings.HasPrefix(o.Kind, "reject") {
			opt.Decision, opt.Session, hasReject = cliruntime.DecisionDeny, o.Kind == "reject_always", true
		}
		if opt.Label == "" {
			opt.Label = o.Kind
		}
		req.Options = append(req.Options, opt)
	}
	if !hasReject {
		req.Options = append(req.Options, cliruntime.Option{ID: cliruntime.OptionDeny, Label: "Deny", Decision: cliruntime.DecisionDeny})
	}
	return req, !hasReject
}

// outcome is a session/request_permission answer: the chosen option, or
// "cancelled" when optionID is "".
func outcome(id json.RawMessage, optionID string) []byte {
	o := map[string]string{"outcome": "cancelled"}
	if optionID != "" {
		o = map[string]string{"outcome": "selected", "optionId": optionID}
	}
	return jsonrpc.Line(jsonrpc.Response{JSONRPC: "2.0", ID: id, Result: map[string]any{"outcome": o}})
}

// Answer answers a permission request with the chosen option of the
// agent's (R-REQ-7); the added "deny" is "cancelled".
func (s *session) Answer(id string, a cliruntime.Answer) (cliruntime.Step, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.open[id]
	if r == nil {
		return cliruntime.Step{}, cliruntime.ErrNoSuchRequest
	}
	opt, ok := r.req.Option(a.OptionID)
	if !ok {
		return cliruntime.Step{}, fmt.Errorf("%w: no option %q", cliruntime.ErrBadAnswer, a.OptionID)
	}
	delete(s.open, id)
	chosen := opt.ID
	if r.addedDeny && chosen == cliruntime.OptionDeny {
		chosen = ""
	}
	return cliruntime.Step{Write: [][]byte{outcome(r.rawID, chosen)}}, nil
}

// cancelOpenLocked answers every open request "cancelled" (the turn is
// cancelled) and reports them withdrawn.
func (s *session) cancelOpenLocked() cliruntime.Step {
	var out cliruntime.Step
	for id, r := range s.open {
		out.Write = append(out.Write, outcome(r.rawID, ""))
		out.Events = append(out.Events, cliruntime.Event{Kind: cliruntime.EventRequestWithdrawn, ConversationID: s.sessionID, RequestID: id})
		delete(s.open, id)
	}
	return out
}
