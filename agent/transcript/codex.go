package transcript

import (
	"encoding/json"
	"strings"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// codexRecord is a rollout record (real-clis.md §2.3):
// {"timestamp","ordinal","type","payload"}.
type codexRecord struct {
	Timestamp string       `json:"timestamp"`
	Type      string       `json:"type"`
	Payload   codexPayload `json:"payload"`
}

// codexPayload is the union of the payloads this package reads.
type codexPayload struct {
	Type               string          `json:"type"`
	Role               string          `json:"role"`
	Content            json.RawMessage `json:"content"`
	Name               string          `json:"name"`
	Namespace          string          `json:"namespace"`
	Arguments          string          `json:"arguments"`
	CallID             string          `json:"call_id"`
	Output             json.RawMessage `json:"output"`
	Model              string          `json:"model"`
	Info               *codexTokenInfo `json:"info"`
	ModelContextWindow int64           `json:"model_context_window"`
	Item               json.RawMessage `json:"item"`
	Metadata           *struct {
		ContentItemMetadata []struct {
			Provenance struct {
				Type string `json:"type"`
			} `json:"provenance"`
		} `json:"content_item_metadata"`
	} `json:"internal_chat_message_metadata_passthrough"`
}

type codexTokenInfo struct {
	LastTokenUsage     *codexUsage `json:"last_token_usage"`
	ModelContextWindow int64       `json:"model_context_window"`
}

type codexUsage struct {
	InputTokens       int64 `json:"input_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	TotalTokens       int64 `json:"total_tokens"`
}

// codexHarnessPrefixes start the user-role items Codex writes itself
// (environment, instructions, notifications); used when an item carries
// no provenance metadata.
var codexHarnessPrefixes = []string{"<environment_context>", "<user_instructions>", "<turn_aborted>", "<subagent_notification>",
	"<user_shell_command>", "# AGENTS.md instructions", "<INSTRUCTIONS>", "<skill>", "<permissions instructions>"}

// codexMessageText decides whether a response_item message is a message
// and returns its role and text. A user item is the person's when every
// part's provenance says "user"; without provenance metadata, when its text
// does not open with one of Codex's own tags. Developer and system items are
// never messages.
func codexMessageText(p *codexPayload) (role uint8, text string, ok bool) {
	if p.Type != "message" {
		return 0, "", false
	}
	text = codexPartsText(p.Content)
	if strings.TrimSpace(text) == "" {
		return 0, "", false
	}
	switch p.Role {
	case "user":
		if p.Metadata != nil && len(p.Metadata.ContentItemMetadata) > 0 {
			for _, m := range p.Metadata.ContentItemMetadata {
				if m.Provenance.Type != "user" {
					return 0, "", false
				}
			}
			return roleUser, text, true
		}
		t := strings.TrimSpace(text)
		for _, pre := range codexHarnessPrefixes {
			if strings.HasPrefix(t, pre) {
				return 0, "", false
			}
		}
		return roleUser, text, true
	case "assistant":
		return roleAssistant, text, true
	}
	return 0, "", false
}

// codexPartsText joins the text parts of a message's content (a string
// or input_text/output_text parts).
func codexPartsText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var texts []string
	for _, pt := range parts {
		if (pt.Type == "input_text" || pt.Type == "output_text" || pt.Type == "text") && pt.Text != "" {
			texts = append(texts, pt.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// codexText re-reads a message's text from its record.
func codexText(line []byte) string {
	var rec codexRecord
	if json.Unmarshal(line, &rec) != nil {
		return ""
	}
	_, text, _ := codexMessageText(&rec.Payload)
	return text
}

// codexRecord indexes one rollout record.
func (ix *fileIndex) codexRecord(off int64, line []byte) {
	if t, ok := topString(line, "type"); ok {
		switch string(t) {
		case "response_item", "event_msg", "turn_context", "compacted":
		default:
			return // session_meta, world_state, token_usage_record, …
		}
	}
	var rec codexRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		ix.skipped++
		return
	}
	at := parseTime(rec.Timestamp)
	st := ix.codex
	before := st.mem
	st.seq++
	p := &rec.Payload
	switch rec.Type {
	case "turn_context":
		if p.Model != "" {
			st.model = p.Model
		}
	case "compacted":
		st.compactions++
	case "response_item":
		switch p.Type {
		case "message":
			if role, text, ok := codexMessageText(p); ok {
				ix.addMessage(msgEntry{span: span{off, int32(len(line))}, role: role, how: fromCodexMessage, at: at, first: firstLine(text)})
			} else if p.Role == "user" {
				st.userItem(p, at)
			}
		case "function_call":
			st.functionCall(p, at)
		case "function_call_output", "custom_tool_call_output":
			st.functionOutput(p, at)
		}
	case "event_msg":
		switch p.Type {
		case "token_count":
			if p.Info != nil {
				if p.Info.LastTokenUsage != nil {
					st.last = p.Info.LastTokenUsage
				}
				if p.Info.ModelContextWindow > 0 {
					st.window = p.Info.ModelContextWindow
				}
			}
		case "task_started":
			if p.ModelContextWindow > 0 {
				st.window = p.ModelContextWindow
			}
		case "context_compacted":
			st.contextCompacted++
		case "turn_aborted":
			for _, u := range st.order {
				if u.kind == kindCommand && u.state == "" && !u.background {
					u.settle(StateStopped, at)
				}
			}
		case "item_completed":
			st.item(p.Item, at)
		}
	}
	ix.mem += st.mem - before
}

// codexState is the activity a rollout's records built so far.
type codexState struct {
	seq              int64
	model            string
	last             *codexUsage
	window           int64
	uses             map[string]*workUse // by call id
	order            []*workUse
	omitted          map[string]int
	polls            map[string]string   // write_stdin call id → exec session id
	sessions         map[string]*workUse // exec session id → command
	agents           map[string]*codexAgent
	agentOrder       []string
	files            map[string]*apitypes.FileChange
	fileOrder        []string
	filesOver        int
	plan             []apitypes.Todo
	planAt           int64
	mcp              counter
	compactions      int
	contextCompacted int
	mem              int64
}

type codexAgent struct {
	id, nickname, prompt string
	state                string
	start, end           int64
}

func newCodexState() *codexState {
	return &codexState{uses: map[string]*workUse{}, omitted: map[string]int{}, polls: map[string]string{},
		sessions: map[string]*workUse{}, agents: map[string]*codexAgent{}, files: map[string]*apitypes.FileChange{}}
}

func (st *codexState) track(u *workUse) {
	if _, dup := st.uses[u.id]; dup || u.id == "" {
		return
	}
	u.seq = st.seq
	st.uses[u.id] = u
	st.order = append(st.order, u)
	st.mem += 256 + int64(len(u.description)+len(u.command))
	if len(st.order) > maxTracked {
		excess := len(st.order) - maxTracked*4/5
		kept := st.order[:0]
		for _, o := range st.order {
			if excess > 0 && o.state != "" {
				excess--
				delete(st.uses, o.id)
				if o.taskID != "" && st.sessions[o.taskID] == o {
					delete(st.sessions, o.taskID)
				}
				st.omitted[o.kind]++
				st.mem -= 256 + int64(len(o.description)+len(o.command))
				continue
			}
			kept = append(kept, o)
		}
		clear(st.order[len(kept):])
		st.order = kept
	}
}

// functionCall notes a tool call of the model.
func (st *codexState) functionCall(p *codexPayload, at int64) {
	var args struct {
		Cmd         string          `json:"cmd"`
		Command     json.RawMessage `json:"command"`
		SessionID   json.Number     `json:"session_id"`
		Explanation string          `json:"explanation"`
		Plan        []struct {
			Step   string `json:"step"`
			Status string `json:"status"`
		} `json:"plan"`
	}
	_ = json.Unmarshal([]byte(p.Arguments), &args)
	switch {
	case p.Namespace == "" && (p.Name == "exec_command" || p.Name == "shell" || p.Name == "local_shell" || p.Name == "shell_command"):
		cmd := args.Cmd
		if cmd == "" && len(args.Command) > 0 {
			var argv []string
			if json.Unmarshal(args.Command, &argv) == nil {
				cmd = strings.Join(argv, " ")
			} else {
				_ = json.Unmarshal(args.Command, &cmd)
			}
		}
		st.track(&workUse{id: p.CallID, kind: kindCommand, tool: p.Name, command: short(cmd, maxText), start: at})
	case p.Namespace == "" && p.Name == "write_stdin":
		if sid := args.SessionID.String(); sid != "" && len(st.polls) < maxTracked {
			st.polls[p.CallID] = sid
		}
	case p.Namespace == "" && p.Name == "update_plan":
		plan := make([]apitypes.Todo, 0, len(args.Plan))
		for _, s := range args.Plan {
			plan = append(plan, apitypes.Todo{Content: short(s.Step, maxText), Status: todoStatus(s.Status)})
		}
		st.plan, st.planAt = plan, at
	case strings.HasPrefix(p.Namespace, "mcp__") || strings.HasPrefix(p.Name, "mcp__"):
		name := strings.TrimPrefix(p.Namespace, "mcp__")
		if name == "" {
			name, _, _ = strings.Cut(strings.TrimPrefix(p.Name, "mcp__"), "__")
		}
		if name = strings.TrimSuffix(name, "__"); name != "" {
			st.mcp.add(name)
		}
	}
}

// outputText is a function call output: a string, or {content} or parts.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Content != "" {
		return obj.Content
	}
	return blockText(raw)
}

// functionOutput settles a command from the output the model got back.
func (st *codexState) functionOutput(p *codexPayload, at int64) {
	text := outputText(p.Output)
	if sid, ok := st.polls[p.CallID]; ok {
		delete(st.polls, p.CallID)
		if u := st.sessions[sid]; u != nil {
			if code := exitCodeIn(text); code != nil {
				u.exitCode = code
				u.settle(exitState(*code), at)
			}
		}
		return
	}
	u := st.uses[p.CallID]
	if u == nil || u.kind != kindCommand || u.state != "" {
		return
	}
	if sid, ok := between(text, "Process running with session ID ", "\n"); ok || strings.Contains(text, "Process running with session ID ") {
		if !ok {
			sid = text[strings.Index(text, "Process running with session ID ")+len("Process running with session ID "):]
		}
		sid = strings.TrimSpace(sid)
		u.background, u.taskID = true, sid
		st.sessions[sid] = u
		return
	}
	if code := exitCodeIn(text); code != nil {
		u.exitCode = code
		u.settle(exitState(*code), at)
	}
}

func exitState(code int) string {
	if code == 0 {
		return StateCompleted
	}
	return StateFailed
}

// codexItem is the union of the completed thread items this package reads.
type codexItem struct {
	Type     string          `json:"type"`
	ID       string          `json:"id"`
	Command  json.RawMessage `json:"command"`
	Status   string          `json:"status"`
	ExitCode *int            `json:"exit_code"`
	Changes  map[string]struct {
		Type        string  `json:"type"`
		Content     string  `json:"content"`
		UnifiedDiff string  `json:"unified_diff"`
		MovePath    *string `json:"move_path"`
	} `json:"changes"`
	ReceiverAgents []struct {
		ThreadID string `json:"thread_id"`
		Nickname string `json:"agent_nickname"`
	} `json:"receiver_agents"`
	ReceiverThreadIDs []string                   `json:"receiver_thread_ids"`
	Prompt            string                     `json:"prompt"`
	AgentsStates      map[string]json.RawMessage `json:"agents_states"`
	Server            string                     `json:"server"`
}

// item reads a completed thread item (event_msg item_completed).
func (st *codexState) item(raw json.RawMessage, at int64) {
	var it codexItem
	if json.Unmarshal(raw, &it) != nil {
		return
	}
	switch it.Type {
	case "CommandExecution", "commandExecution":
		u := st.uses[it.ID]
		if u == nil {
			var argv []string
			cmd := ""
			if json.Unmarshal(it.Command, &argv) == nil {
				cmd = strings.Join(argv, " ")
			} else {
				_ = json.Unmarshal(it.Command, &cmd)
			}
			u = &workUse{id: it.ID, kind: kindCommand, tool: "exec_command", command: short(cmd, maxText), start: at}
			st.track(u)
		}
		if it.ExitCode != nil {
			u.exitCode = it.ExitCode
		}
		switch strings.ToLower(it.Status) {
		case "completed":
			if u.exitCode != nil {
				u.settle(exitState(*u.exitCode), at)
			} else {
				u.settle(StateCompleted, at)
			}
		case "failed":
			u.settle(StateFailed, at)
		case "declined", "interrupted":
			u.settle(StateStopped, at)
		}
	case "FileChange", "fileChange":
		if s := strings.ToLower(it.Status); s != "" && s != "completed" {
			return
		}
		for path, ch := range it.Changes {
			if ch.MovePath != nil && *ch.MovePath != "" {
				path = *ch.MovePath
			}
			fc := st.file(path)
			if fc == nil {
				continue
			}
			switch ch.Type {
			case "add":
				fc.Created = true
				fc.Added += lineCount(ch.Content)
			case "delete":
				fc.Removed += lineCount(ch.Content)
			default:
				for _, l := range strings.Split(ch.UnifiedDiff, "\n") {
					switch {
					case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
					case strings.HasPrefix(l, "+"):
						fc.Added++
					case strings.HasPrefix(l, "-"):
						fc.Removed++
					}
				}
			}
		}
	case "CollabAgentToolCall", "collabAgentToolCall":
		for _, r := range it.ReceiverAgents {
			a := st.agent(r.ThreadID, at)
			if a != nil && r.Nickname != "" {
				a.nickname = r.Nickname
			}
		}
		for _, id := range it.ReceiverThreadIDs {
			if a := st.agent(id, at); a != nil && a.prompt == "" && it.Prompt != "" {
				a.prompt = short(firstLine(it.Prompt), maxText)
			}
		}
		for id, raw := range it.AgentsStates {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				var obj struct {
					Status string `json:"status"`
				}
				_ = json.Unmarshal(raw, &obj)
				s = obj.Status
			}
			if a := st.agent(id, at); a != nil {
				a.setState(codexAgentState(s, a.state), at)
			}
		}
	case "McpToolCall", "mcpToolCall":
		if it.Server != "" {
			st.mcp.add(it.Server)
		}
	}
}

// file returns the change record of path, or nil past the bound.
func (st *codexState) file(path string) *apitypes.FileChange {
	if fc := st.files[path]; fc != nil {
		return fc
	}
	if path == "" || len(st.fileOrder) >= maxChangedFiles {
		st.filesOver++
		return nil
	}
	fc := &apitypes.FileChange{Path: path}
	st.files[path] = fc
	st.fileOrder = append(st.fileOrder, path)
	st.mem += 96 + int64(len(path))
	return fc
}

// agent returns the child agent of a thread id, creating it.
func (st *codexState) agent(id string, at int64) *codexAgent {
	if id == "" {
		return nil
	}
	if a := st.agents[id]; a != nil {
		return a
	}
	if len(st.agentOrder) >= maxTracked {
		return nil
	}
	a := &codexAgent{id: id, start: at}
	st.agents[id] = a
	st.agentOrder = append(st.agentOrder, id)
	st.mem += 192
	return a
}

func (a *codexAgent) setState(s string, at int64) {
	if s == "" || s == a.state {
		return
	}
	a.state = s
	switch s {
	case StateCompleted, StateFailed, StateStopped:
		a.end = at
	default:
		a.end = 0
	}
}

// codexAgentState maps a Codex collab agent status (CollabAgentStatus, in
// camel or snake case) to R-ACT-3. A shut-down agent that had completed
// stays completed.
func codexAgentState(s, prev string) string {
	switch strings.ToLower(strings.ReplaceAll(s, "_", "")) {
	case "pendinginit":
		return StateScheduled
	case "running":
		return StateRunning
	case "interrupted":
		return StateStopped
	case "completed":
		return StateCompleted
	case "errored", "notfound", "failed":
		return StateFailed
	case "shutdown", "closed":
		if prev == StateCompleted || prev == StateFailed {
			return prev
		}
		return StateStopped
	}
	return ""
}

// userItem reads a user-role item Codex wrote itself: a sub-agent's
// notification carries the child's final status.
func (st *codexState) userItem(p *codexPayload, at int64) {
	text := codexPartsText(p.Content)
	body, ok := between(text, "<subagent_notification>", "</subagent_notification>")
	if !ok {
		return
	}
	var n struct {
		AgentPath string          `json:"agent_path"`
		AgentID   string          `json:"agent_id"`
		Status    json.RawMessage `json:"status"`
	}
	if json.Unmarshal([]byte(strings.TrimSpace(body)), &n) != nil {
		return
	}
	id := n.AgentID
	if id == "" {
		id = n.AgentPath
	}
	var status string
	if json.Unmarshal(n.Status, &status) != nil {
		var obj map[string]json.RawMessage
		if json.Unmarshal(n.Status, &obj) == nil {
			for k := range obj {
				status = k
			}
		}
	}
	if a := st.agent(id, at); a != nil {
		a.setState(codexAgentState(status, a.state), at)
	}
}
