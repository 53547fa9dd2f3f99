package codex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/internal/jsonrpc"
)

// The requests Codex sends the client and waits on (Appendix A of
// real-clis.md; shapes from `codex app-server generate-ts`, 0.169.0, and
// the approvals measured against the real binary: R-REQ-6).
const (
	reqCommand     = "item/commandExecution/requestApproval"
	reqFileChange  = "item/fileChange/requestApproval"
	reqPermissions = "item/permissions/requestApproval"
	reqUserInput   = "item/tool/requestUserInput"
	reqElicitation = "mcpServer/elicitation/request"
	reqExecV1      = "execCommandApproval"
	reqPatchV1     = "applyPatchApproval"
)

// codexRequest is a request of Codex's waiting for an answer.
type codexRequest struct {
	method string
	rawID  json.RawMessage
	req    cliruntime.Request
	// decisions maps an option id to the decision value Codex takes back
	// (a string, or an object such as acceptWithExecpolicyAmendment).
	decisions map[string]json.RawMessage
	// permissions is what item/permissions/requestApproval asked for,
	// granted back as it is.
	permissions json.RawMessage
	// question is the id of requestUserInput's first question; others
	// are the rest of them, answered with nothing.
	question string
	others   []string
}

// maxOpenRequests bounds the requests a session holds open.
const maxOpenRequests = 64

// maxItems bounds the file-change items remembered for their diff.
const maxItems = 32

type fileItem struct {
	files []string
	diff  string
}

// rememberItemLocked keeps a fileChange item's paths and diffs from
// item/started: item/fileChange/requestApproval names only the item
// (measured on 0.169.0).
func (s *session) rememberItemLocked(params json.RawMessage) {
	var p struct {
		Item struct {
			Type    string `json:"type"`
			ID      string `json:"id"`
			Changes []struct {
				Path string `json:"path"`
				Kind struct {
					Type string `json:"type"`
				} `json:"kind"`
				Diff string `json:"diff"`
			} `json:"changes"`
		} `json:"item"`
	}
	if json.Unmarshal(params, &p) != nil || p.Item.Type != "fileChange" || p.Item.ID == "" {
		return
	}
	if s.items == nil {
		s.items = map[string]fileItem{}
	}
	if len(s.items) >= maxItems {
		clear(s.items)
	}
	var it fileItem
	var diff strings.Builder
	for _, c := range p.Item.Changes {
		it.files = append(it.files, c.Path)
		fmt.Fprintf(&diff, "--- %s\n+++ %s\n", c.Path, c.Path)
		// An add or a delete carries the file's content (measured on
		// 0.169.0), an update a unified diff.
		prefix := ""
		switch c.Kind.Type {
		case "add":
			prefix = "+"
		case "delete":
			prefix = "-"
		}
		for _, l := range strings.SplitAfter(c.Diff, "\n") {
			if l == "" {
				continue
			}
			diff.WriteString(prefix + l)
			if !strings.HasSuffix(l, "\n") {
				diff.WriteByte('\n')
			}
		}
	}
	it.diff = cliruntime.Clip(diff.String())
	s.items[p.Item.ID] = it
}

func str(v string) json.RawMessage { b, _ := json.Marshal(v); return b }

// approvalOptions are the options of a command or file-change approval:
// Codex's availableDecisions when it lists them (a decline is always
// offered: Codex takes it even when unlisted, measured on 0.169.0), else
// the four decisions of the protocol.
func approvalOptions(avail []json.RawMessage) ([]cliruntime.Option, map[string]json.RawMessage) {
	if len(avail) == 0 {
		for _, d := range []string{"accept", "acceptForSession", "decline", "cancel"} {
			avail = append(avail, str(d))
		}
	}
	var opts []cliruntime.Option
	dec := map[string]json.RawMessage{}
	add := func(id, label string, d cliruntime.Decision, session bool, v json.RawMessage) {
		if _, dup := dec[id]; dup {
			return
		}
		opts = append(opts, cliruntime.Option{ID: id, Label: label, Decision: d, Session: session})
		dec[id] = v
	}
	hasDecline := false
	for _, v := range avail {
		var name string
		if json.Unmarshal(v, &name) != nil {
			var obj map[string]json.RawMessage
			if json.Unmarshal(v, &obj) != nil || len(obj) != 1 {
				continue
			}
			for k := range obj {
				name = k
			}
		}
		switch name {
		case "accept":
			add(name, "Allow once", cliruntime.DecisionAllow, false, v)
		case "acceptForSession":
			add(name, "Allow for this session", cliruntime.DecisionAllow, true, v)
		case "acceptWithExecpolicyAmendment":
			add(name, "Allow, and allow this command from now on", cliruntime.DecisionAllow, true, v)
		case "applyNetworkPolicyAmendment":
			add(name, "Allow this network access from now on", cliruntime.DecisionAllow, true, v)
		case "decline":
			hasDecline = true
			add(name, "Deny", cliruntime.DecisionDeny, false, v)
		case "cancel":
			add(name, "Deny and stop the turn", cliruntime.DecisionDeny, false, v)
		}
	}
	if !hasDecline {
		opts = append([]cliruntime.Option{{ID: "decline", Label: "Deny", Decision: cliruntime.DecisionDeny}}, opts...)
		dec["decline"] = str("decline")
		// Keep allow options first, as the tool lists them.
		sort.SliceStable(opts, func(i, j int) bool {
			return opts[i].Decision == cliruntime.DecisionAllow && opts[j].Decision != cliruntime.DecisionAllow
		})
	}
	return opts, dec
}

// v1Options are the options of the legacy execCommandApproval and
// applyPatchApproval (ReviewDecision).
func v1Options() ([]cliruntime.Option, map[string]json.RawMessage) {
	return []cliruntime.Option{
			{ID: "approved", Label: "Allow once", Decision: cliruntime.DecisionAllow},
			{ID: "approved_for_session", Label: "Allow for this session", Decision: cliruntime.DecisionAllow, Session: true},
			{ID: "denied", Label: "Deny", Decision: cliruntime.DecisionDeny},
			{ID: "abort", Label: "Deny and stop the turn", Decision: cliruntime.DecisionDeny},
		}, map[string]json.RawMessage{"approved": str("approved"), "approved_for_session": str("approved_for_session"),
			"denied": nil, "abort": str("abort")}
}

// serverRequestLocked turns a request Codex sends into a request on the run
// (R-REQ-6). The approvals and questions wait for an answer (Answer);
// what is no question for a person (item/tool/call, token refresh,
// attestation) is answered "method not found" at once and reported.
func (s *session) serverRequestLocked(m jsonrpc.Message, raw json.RawMessage) cliruntime.Step {
	id := string(bytes.TrimSpace(m.ID))
	cr, ok := s.describeLocked(m)
	if !ok {
		reply := jsonrpc.Line(jsonrpc.Response{JSONRPC: "2.0", ID: m.ID, Error: &jsonrpc.Error{
			Code:    jsonrpc.MethodNotFound,
			Message: "olivares does not answer " + strconv.Quote(m.Method),
		}})
		return cliruntime.Step{
			Write:  [][]byte{reply},
			Events: []cliruntime.Event{{Kind: cliruntime.EventError, ConversationID: s.thread, ErrorKind: cliruntime.ErrorTool, Error: "codex asked " + strconv.Quote(m.Method) + "; olivares does not answer it", Raw: raw}},
		}
	}
	if s.open == nil {
		s.open = map[string]*codexRequest{}
	}
	if _, dup := s.open[id]; dup || len(s.open) >= maxOpenRequests {
		return cliruntime.Step{}
	}
	cr.method, cr.rawID = m.Method, append(json.RawMessage(nil), m.ID...)
	cr.req.ID = id
	cr.req.Title = cliruntime.Clip(cr.req.Title)
	s.open[id] = cr
	r := cr.req
	return step(cliruntime.Event{Kind: cliruntime.EventRequest, ConversationID: s.thread, Request: &r, Raw: raw})
}

// describeLocked reads one request's params; ok is false for a method that
// is no question for a person.
func (s *session) describeLocked(m jsonrpc.Message) (*codexRequest, bool) {
	cr := &codexRequest{}
	switch m.Method {
	case reqCommand:
		var p struct {
			ItemID    string            `json:"itemId"`
			Reason    string            `json:"reason"`
			Command   string            `json:"command"`
			Cwd       string            `json:"cwd"`
			Available []json.RawMessage `json:"availableDecisions"`
			Actions   []struct {
				Command string `json:"command"`
			} `json:"commandActions"`
		}
		_ = json.Unmarshal(m.Params, &p)
		cmd := p.Command
		if len(p.Actions) == 1 && p.Actions[0].Command != "" {
			// The command as the model wrote it, without the
			// "/bin/bash -lc '…'" wrapper.
			cmd = p.Actions[0].Command
		}
		cr.req = cliruntime.Request{Kind: cliruntime.RequestCommand, Tool: "commandExecution", Command: cliruntime.Clip(cmd), Cwd: p.Cwd,
			Title: "Run " + cliruntime.Title(cmd), Question: cliruntime.Clip(p.Reason)}
		if p.Reason != "" {
			cr.req.Title = p.Reason + ": " + cliruntime.Title(cmd)
		}
		if p.Command != cmd {
			cr.req.Input = []byte(cliruntime.Clip(string(str(p.Command))))
		}
		cr.req.Options, cr.decisions = approvalOptions(p.Available)
	case reqFileChange:
		var p struct {
			ItemID    string `json:"itemId"`
			Reason    string `json:"reason"`
			GrantRoot string `json:"grantRoot"`
		}
		_ = json.Unmarshal(m.Params, &p)
		it := s.items[p.ItemID]
		delete(s.items, p.ItemID)
		cr.req = cliruntime.Request{Kind: cliruntime.RequestFileChange, Tool: "fileChange", Files: it.files, Diff: it.diff,
			Question: cliruntime.Clip(p.Reason), Title: "Change " + filesTitle(it.files)}
		if p.GrantRoot != "" {
			cr.req.Title = "Write under " + p.GrantRoot
		}
		cr.req.Options, cr.decisions = approvalOptions(nil)
	case reqPermissions:
		var p struct {
			Reason      string          `json:"reason"`
			Cwd         string          `json:"cwd"`
			Permissions json.RawMessage `json:"permissions"`
		}
		_ = json.Unmarshal(m.Params, &p)
		cr.permissions = p.Permissions
		cr.req = cliruntime.Request{Kind: cliruntime.RequestPermission, Tool: "permissions", Cwd: p.Cwd, Question: cliruntime.Clip(p.Reason),
			Input: []byte(cliruntime.Clip(string(p.Permissions))), Title: "Grant more access"}
		if p.Reason != "" {
			cr.req.Title += ": " + cliruntime.Title(p.Reason)
		}
		cr.req.Options = []cliruntime.Option{
			{ID: "turn", Label: "Allow for this turn", Decision: cliruntime.DecisionAllow},
			{ID: "session", Label: "Allow for this session", Decision: cliruntime.DecisionAllow, Session: true},
			{ID: "deny", Label: "Deny", Decision: cliruntime.DecisionDeny},
		}
	case reqUserInput:
		var p struct {
			Questions []struct {
				ID       string `json:"id"`
				Header   string `json:"header"`
				Question string `json:"question"`
				IsOther  bool   `json:"isOther"`
				Options  []struct {
					Label       string `json:"label"`
					Description string `json:"description"`
				} `json:"options"`
			} `json:"questions"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if len(p.Questions) == 0 {
			return nil, false
		}
		q := p.Questions[0]
		cr.question = q.ID
		for _, o := range p.Questions[1:] {
			cr.others = append(cr.others, o.ID)
		}
		cr.req = cliruntime.Request{Kind: cliruntime.RequestQuestion, Tool: "requestUserInput", Question: cliruntime.Clip(q.Question),
			Title: cliruntime.Title(q.Header), Text: q.IsOther || len(q.Options) == 0}
		if cr.req.Title == "" {
			cr.req.Title = cliruntime.Title(q.Question)
		}
		for i, o := range q.Options {
			label := o.Label
			if o.Description != "" {
				label += " — " + o.Description
			}
			cr.req.Options = append(cr.req.Options, cliruntime.Option{ID: "choice_" + strconv.Itoa(i+1), Label: cliruntime.Clip(label), Decision: cliruntime.DecisionAnswer})
			cr.decisions = addDecision(cr.decisions, "choice_"+strconv.Itoa(i+1), str(o.Label))
		}
		if cr.req.Text {
			cr.req.Options = append(cr.req.Options, cliruntime.Option{ID: cliruntime.OptionText, Label: "Answer in your own words", Decision: cliruntime.DecisionAnswer})
		}
		cr.req.Options = append(cr.req.Options, cliruntime.Option{ID: "decline", Label: "Do not answer", Decision: cliruntime.DecisionDeny})
	case reqElicitation:
		var p struct {
			ServerName string          `json:"serverName"`
			Mode       string          `json:"mode"`
			Message    string          `json:"message"`
			URL        string          `json:"url"`
			Schema     json.RawMessage `json:"requestedSchema"`
		}
		_ = json.Unmarshal(m.Params, &p)
		cr.req = cliruntime.Request{Kind: cliruntime.RequestElicitation, Tool: p.ServerName, Question: cliruntime.Clip(p.Message),
			Title: cliruntime.Title(p.ServerName + " asks: " + p.Message), Text: p.Mode != "url"}
		if p.Mode == "url" {
			cr.req.Input = []byte(cliruntime.Clip(string(str(p.URL))))
		} else {
			cr.req.Input = []byte(cliruntime.Clip(string(p.Schema)))
		}
		cr.req.Options = []cliruntime.Option{
			{ID: "accept", Label: "Accept", Decision: cliruntime.DecisionAnswer},
			{ID: "decline", Label: "Decline", Decision: cliruntime.DecisionDeny},
			{ID: "cancel", Label: "Cancel", Decision: cliruntime.DecisionDeny},
		}
	case reqExecV1:
		var p struct {
			Command []string `json:"command"`
			Cwd     string   `json:"cwd"`
			Reason  string   `json:"reason"`
		}
		_ = json.Unmarshal(m.Params, &p)
		cmd := strings.Join(p.Command, " ")
		cr.req = cliruntime.Request{Kind: cliruntime.RequestCommand, Tool: "exec", Command: cliruntime.Clip(cmd), Cwd: p.Cwd,
			Question: cliruntime.Clip(p.Reason), Title: "Run " + cliruntime.Title(cmd)}
		cr.req.Options, cr.decisions = v1Options()
	case reqPatchV1:
		var p struct {
			FileChanges map[string]json.RawMessage `json:"fileChanges"`
			Reason      string                     `json:"reason"`
		}
		_ = json.Unmarshal(m.Params, &p)
		var files []string
		for f := range p.FileChanges {
			files = append(files, f)
		}
		sort.Strings(files)
		cr.req = cliruntime.Request{Kind: cliruntime.RequestFileChange, Tool: "applyPatch", Files: files, Question: cliruntime.Clip(p.Reason),
			Title: "Change " + filesTitle(files)}
		cr.req.Options, cr.decisions = v1Options()
	default:
		return nil, false
	}
	return cr, true
}

func addDecision(m map[string]json.RawMessage, k string, v json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	m[k] = v
	return m
}

func filesTitle(files []string) string {
	switch len(files) {
	case 0:
		return "files"
	case 1:
		return files[0]
	}
	return fmt.Sprintf("%s and %d more files", files[0], len(files)-1)
}

// Answer answers an open request in the shape its method expects.
func (s *session) Answer(id string, a cliruntime.Answer) (cliruntime.Step, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cr := s.open[id]
	if cr == nil {
		return cliruntime.Step{}, cliruntime.ErrNoSuchRequest
	}
	opt, ok := cr.req.Option(a.OptionID)
	if !ok {
		return cliruntime.Step{}, fmt.Errorf("%w: no option %q", cliruntime.ErrBadAnswer, a.OptionID)
	}
	var result any
	switch cr.method {
	case reqCommand, reqFileChange:
		result = map[string]any{"decision": cr.decisions[opt.ID]}
	case reqPermissions:
		if opt.Decision == cliruntime.DecisionDeny {
			result = map[string]any{"permissions": map[string]any{}, "scope": "turn"}
		} else {
			perms := cr.permissions
			if len(perms) == 0 || !json.Valid(perms) || string(perms) == "null" {
				perms = json.RawMessage(`{}`)
			}
			result = map[string]any{"permissions": perms, "scope": opt.ID}
		}
	case reqUserInput:
		answers := map[string]any{}
		if opt.Decision != cliruntime.DecisionDeny {
			text := a.Text
			if v, ok := cr.decisions[opt.ID]; ok {
				_ = json.Unmarshal(v, &text)
			}
			answers[cr.question] = map[string]any{"answers": []string{text}}
			for _, o := range cr.others {
				answers[o] = map[string]any{"answers": []string{}}
			}
		}
		result = map[string]any{"answers": answers}
	case reqElicitation:
		res := map[string]any{"action": opt.ID, "content": nil, "_meta": nil}
		if opt.Decision != cliruntime.DecisionDeny {
			var content map[string]any
			if a.Text != "" {
				if json.Unmarshal([]byte(a.Text), &content) != nil {
					return cliruntime.Step{}, fmt.Errorf("%w: the answer to a form must be a JSON object", cliruntime.ErrBadAnswer)
				}
			}
			if content != nil {
				res["content"] = content
			}
		}
		result = res
	case reqExecV1, reqPatchV1:
		var d any = cr.decisions[opt.ID]
		if opt.ID == "denied" {
			msg := a.Message
			if msg == "" {
				msg = "The user denied it."
			}
			d = map[string]any{"denied": map[string]string{"rejection": msg}}
		}
		result = map[string]any{"decision": d}
	}
	delete(s.open, id)
	return cliruntime.Step{Write: [][]byte{jsonrpc.Line(jsonrpc.Response{JSONRPC: "2.0", ID: cr.rawID, Result: result})}}, nil
}

// resolvedLocked: Codex no longer waits on a request (serverRequest/resolved
// after an answer, or after the turn was interrupted).
func (s *session) resolvedLocked(params json.RawMessage, raw json.RawMessage) cliruntime.Step {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || p.RequestID == nil {
		return cliruntime.Step{}
	}
	id := string(bytes.TrimSpace(p.RequestID))
	if s.open[id] == nil {
		return cliruntime.Step{}
	}
	delete(s.open, id)
	return step(cliruntime.Event{Kind: cliruntime.EventRequestWithdrawn, ConversationID: s.thread, RequestID: id, Raw: raw})
}
