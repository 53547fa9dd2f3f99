// Package conversation turns a run's output frames (the attach stream's
// output events) into conversation items, from each tool's own protocol:
//
//	claude    Claude Code --print stream-json lines
//	codex     Codex app-server JSON-RPC (server messages have no "jsonrpc")
//	gemini, opencode, grok   the Agent Client Protocol (JSON-RPC 2.0)
//
// It is the Go twin of the console's normalize.js (coordinator/console/
// assets/normalize.js): both give the same items for the same frames, which
// the recorded fixtures in integration/console/testdata/frames and their
// golden files check on both sides (R-CLI-7). The CLI's attach prints the
// items; nothing here touches a terminal.
package conversation

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Item kinds.
const (
	KindTurnStart = "turn_start" // a turn began
	KindUser      = "user"       // what a person sent: an input frame (Sent), or the tool's echo
	KindAssistant = "assistant"  // assistant text (grows while it streams)
	KindThinking  = "thinking"   // the model's reasoning, when the tool shows it
	KindToolCall  = "tool_call"  // a tool call: Name, Input, Result, Status
	KindTurnEnd   = "turn_end"   // Status completed | interrupted | failed, Detail
	KindError     = "error"      // the tool's errors and refusals
	KindSystem    = "system"     // session facts and warnings
	KindOutput    = "output"     // a stdout line that is not the protocol
)

// Tool call and turn statuses.
const (
	StatusRunning     = "running"
	StatusDone        = "done"
	StatusError       = "error"
	StatusCompleted   = "completed"
	StatusInterrupted = "interrupted"
	StatusFailed      = "failed"
)

// Item is one entry of the conversation. Which fields it has depends on its
// kind, as in normalize.js; MarshalJSON writes exactly those, in its order.
type Item struct {
	Kind string
	// ID is the message or tool call id; HasID tells whether the item has
	// the field at all (a Claude Code user item has none, an ACP one has
	// one even when it is empty).
	ID    string
	HasID bool
	Text  string
	// Sent: a user item from an input frame (R-ATT-11), with who sent it
	// (By, SenderName) and whether its text was cut (Clipped).
	Sent           bool
	By, SenderName string
	Clipped        bool
	// Tool calls.
	Name, Input, Result, Status string
	// Detail of a turn end: duration_ms, cost_usd, stop_reason.
	Detail map[string]any
	// Seq is the output frame the item began in.
	Seq uint64
}

// MarshalJSON writes the item's fields as normalize.js has them.
func (it Item) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	field := func(k string, v any) {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		kj, _ := json.Marshal(k)
		b.Write(kj)
		b.WriteByte(':')
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(v)
		b.Truncate(b.Len() - 1) // the encoder's newline
	}
	field("kind", it.Kind)
	switch it.Kind {
	case KindTurnStart:
	case KindUser:
		if it.HasID {
			field("id", it.ID)
		}
		if it.Sent {
			field("by", it.By)
			field("name", it.SenderName)
		}
		field("text", it.Text)
		if it.Clipped {
			field("clipped", true)
		}
	case KindAssistant, KindThinking:
		field("id", it.ID)
		field("text", it.Text)
	case KindToolCall:
		field("id", it.ID)
		field("name", it.Name)
		field("input", it.Input)
		field("result", it.Result)
		field("status", it.Status)
	case KindTurnEnd:
		field("status", it.Status)
		if it.Detail != nil {
			field("detail", it.Detail)
		}
	default:
		field("text", it.Text)
	}
	field("seq", it.Seq)
	b.WriteByte('}')
	return b.Bytes(), nil
}

const interrupted = "[Request interrupted by user]"

// Normalizer turns one run's frames into items. It is not safe for use by
// several goroutines at once.
type Normalizer struct {
	driver    string
	Items     []Item
	byKey     map[string]int
	partial   string
	gen       uint32
	changed   map[int]bool
	stderr    []string
	openText  int
	openThink int
	inTurn    bool
	turnError bool
	sent      []string // texts of input frames the tool has not echoed yet
}

// New returns the normalizer of a run of driver (claude, codex, gemini,
// opencode or grok; anything else is read as ACP, as the console does).
func New(driver string) *Normalizer {
	return &Normalizer{driver: driver, byKey: map[string]int{}, openText: -1, openThink: -1}
}

// Feed takes one output event and returns the indexes of the items it added
// or changed, in order, and the stderr text it carried.
func (n *Normalizer) Feed(o apitypes.Output) (changed []int, stderr []string) {
	n.changed = map[int]bool{}
	n.stderr = nil
	data := o.Data
	if o.Encoding == "base64" {
		raw, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			data = ""
		} else {
			data = strings.ToValidUTF8(string(raw), "\uFFFD")
		}
	}
	if o.Generation != n.gen {
		// A new process: what the old one left unterminated is flushed.
		if n.partial != "" {
			n.line(n.partial, o.Seq)
		}
		n.partial = ""
		n.gen = o.Generation
		n.openText, n.openThink = -1, -1
		n.inTurn = false
	}
	switch o.Stream {
	case "stderr":
		n.stderr = append(n.stderr, data)
	case "input":
		n.input(data, o.Seq)
	case "setup":
		// The setup command's output, before the tool (R-SETUP-2): not
		// the conversation.
	default:
		buf := n.partial + data
		for {
			nl := strings.IndexByte(buf, '\n')
			if nl < 0 {
				break
			}
			line := buf[:nl]
			buf = buf[nl+1:]
			if strings.TrimSpace(line) != "" {
				n.line(line, o.Seq)
			}
		}
		n.partial = buf
	}
	return n.changedList(), n.stderr
}

// Flush turns what is left after the last newline into items, as a new
// generation would (the stream ended).
func (n *Normalizer) Flush(seq uint64) []int {
	n.changed = map[int]bool{}
	if strings.TrimSpace(n.partial) != "" {
		n.line(n.partial, seq)
	}
	n.partial = ""
	return n.changedList()
}

func (n *Normalizer) changedList() []int {
	out := make([]int, 0, len(n.changed))
	for i := range len(n.Items) {
		if n.changed[i] {
			out = append(out, i)
		}
	}
	return out
}

func (n *Normalizer) add(it Item, seq uint64) int {
	it.Seq = seq
	n.Items = append(n.Items, it)
	i := len(n.Items) - 1
	n.changed[i] = true
	return i
}

func (n *Normalizer) touch(i int) { n.changed[i] = true }

// input is one input frame (R-ATT-11): what a person sent, in order, with
// who sent it. The tools that echo a person's message (Codex) do so
// later: echo drops that copy.
func (n *Normalizer) input(data string, seq uint64) {
	var f struct {
		By      string  `json:"by"`
		Name    string  `json:"name"`
		Text    *string `json:"text"`
		Clipped bool    `json:"clipped"`
	}
	if json.Unmarshal([]byte(data), &f) != nil || f.Text == nil {
		return
	}
	n.add(Item{Kind: KindUser, Sent: true, By: f.By, SenderName: f.Name, Text: *f.Text, Clipped: f.Clipped}, seq)
	n.sent = append(n.sent, *f.Text)
	if len(n.sent) > 64 {
		n.sent = n.sent[1:]
	}
}

// echo adds a user message the tool shows, unless an input frame already
// holds it.
func (n *Normalizer) echo(text string, seq uint64) {
	for k, s := range n.sent {
		if s == text {
			n.sent = n.sent[k+1:]
			return
		}
	}
	n.add(Item{Kind: KindUser, Text: text}, seq)
}

// obj is a decoded JSON object; fields are read leniently, as JavaScript
// reads them.
type obj map[string]any

func (n *Normalizer) line(line string, seq uint64) {
	v, err := decodeOrdered(line)
	if err != nil {
		n.add(Item{Kind: KindOutput, Text: line}, seq)
		return
	}
	var m obj
	switch x := v.(type) {
	case ordered:
		m = object(x)
	case []any:
		m = obj{} // an array is an object to JavaScript, with no fields
	default:
		n.add(Item{Kind: KindOutput, Text: line}, seq)
		return
	}
	switch n.driver {
	case "claude":
		n.claude(m, seq)
	case "codex":
		n.codex(m, seq)
	default:
		n.acp(m, seq)
	}
}

func (n *Normalizer) turnStart(seq uint64) {
	if n.inTurn {
		return
	}
	n.inTurn = true
	n.turnError = false
	n.openText, n.openThink = -1, -1
	n.add(Item{Kind: KindTurnStart}, seq)
}

func (n *Normalizer) turnEnd(status string, detail map[string]any, seq uint64) {
	if !n.inTurn {
		n.turnStart(seq)
	}
	n.inTurn = false
	n.openText, n.openThink = -1, -1
	n.add(Item{Kind: KindTurnEnd, Status: status, Detail: detail}, seq)
}

func (n *Normalizer) error(text string, seq uint64) {
	n.turnError = true
	n.add(Item{Kind: KindError, Text: text}, seq)
}

// appendText adds text to the item of kind and key; with no key, to the
// open one of that kind.
func (n *Normalizer) appendText(kind string, key *string, text string, seq uint64) int {
	open := &n.openText
	if kind == KindThinking {
		open = &n.openThink
	}
	i, ok := -1, false
	if key != nil {
		i, ok = n.byKey[kind+":"+*key]
	} else if *open >= 0 {
		i, ok = *open, true
	}
	if !ok {
		id := ""
		if key != nil {
			id = *key
		}
		i = n.add(Item{Kind: kind, ID: id, HasID: true}, seq)
		if key != nil {
			n.byKey[kind+":"+*key] = i
		}
	}
	n.Items[i].Text += text
	*open = i
	n.touch(i)
	return i
}

func (n *Normalizer) setText(kind, key, text string, seq uint64) int {
	i, ok := n.byKey[kind+":"+key]
	if !ok {
		i = n.add(Item{Kind: kind, ID: key, HasID: true, Text: text}, seq)
		n.byKey[kind+":"+key] = i
	} else {
		n.Items[i].Text = text
		n.touch(i)
	}
	return i
}

// toolFields are the fields a tool call update sets; nil leaves one as is.
type toolFields struct {
	name, input, result, appendResult, status *string
}

func (n *Normalizer) tool(id string, f toolFields, seq uint64) int {
	i, ok := n.byKey["tool:"+id]
	if !ok {
		i = n.add(Item{Kind: KindToolCall, ID: id, HasID: true, Status: StatusRunning}, seq)
		n.byKey["tool:"+id] = i
	}
	it := &n.Items[i]
	if f.name != nil {
		it.Name = *f.name
	}
	if f.input != nil {
		it.Input = *f.input
	}
	if f.result != nil {
		it.Result = *f.result
	}
	if f.appendResult != nil {
		it.Result += *f.appendResult
	}
	if f.status != nil {
		it.Status = *f.status
	}
	n.touch(i)
	return i
}

func ptr(s string) *string { return &s }

// --- Claude Code stream-json (real-clis.md §1) ---

func (n *Normalizer) claude(m obj, seq uint64) {
	switch str(m["type"]) {
	case "system":
		if str(m["subtype"]) == "init" {
			n.turnStart(seq)
		}
	case "stream_event":
		e := object(m["event"])
		delta := object(e["delta"])
		if str(e["type"]) == "content_block_delta" && e["delta"] != nil && truthy(e["delta"]) {
			n.turnStart(seq)
			switch str(delta["type"]) {
			case "text_delta":
				n.appendText(KindAssistant, nil, orEmpty(delta["text"]), seq)
			case "thinking_delta":
				n.appendText(KindThinking, nil, orEmpty(delta["thinking"]), seq)
			}
		}
	case "assistant":
		n.turnStart(seq)
		msg := object(m["message"])
		content, _ := msg["content"].([]any)
		if truthy(m["error"]) || truthy(m["is_api_error_message"]) {
			// An API error dressed as an assistant message: an error, once.
			var texts []string
			for _, b := range content {
				bo := object(b)
				if str(bo["type"]) == "text" {
					texts = append(texts, jsString(bo["text"]))
				}
			}
			text := strings.Join(texts, "\n")
			if text == "" {
				text = jsString(m["error"])
			}
			n.error(text, seq)
			return
		}
		msgID := orEmpty(msg["id"])
		for idx, b := range content {
			bo := object(b)
			switch str(bo["type"]) {
			case "text":
				key := msgID + ":" + itoa(idx)
				if _, has := n.byKey["assistant:"+key]; n.openText >= 0 && !has && n.Items[n.openText].ID == "" {
					// the whole message after its streamed deltas
					i := n.openText
					n.Items[i].ID = key
					n.Items[i].Text = orEmpty(bo["text"])
					n.byKey["assistant:"+key] = i
					n.touch(i)
				} else {
					n.setText(KindAssistant, key, orEmpty(bo["text"]), seq)
				}
				n.openText = -1
			case "thinking":
				n.setText(KindThinking, msgID+":"+itoa(idx), orEmpty(bo["thinking"]), seq)
			case "tool_use":
				n.tool(jsString(bo["id"]), toolFields{name: ptr(orEmpty(bo["name"])), input: ptr(stringify(bo["input"]))}, seq)
			}
		}
	case "user":
		msg := object(m["message"])
		var content []any
		if s, ok := msg["content"].(string); ok {
			content = []any{map[string]any{"type": "text", "text": s}}
		} else {
			content, _ = msg["content"].([]any)
		}
		for _, b := range content {
			bo := object(b)
			switch str(bo["type"]) {
			case "tool_result":
				status := StatusDone
				if truthy(bo["is_error"]) {
					status = StatusError
				}
				n.tool(jsString(bo["tool_use_id"]), toolFields{result: ptr(resultText(bo["content"])), status: &status}, seq)
			case "text":
				if t := jsString(bo["text"]); t != interrupted {
					n.echo(t, seq)
				}
			}
		}
	case "result":
		isErr := truthy(m["is_error"])
		interruptedTurn := str(m["terminal_reason"]) == "aborted_streaming" || (str(m["subtype"]) == "error_during_execution" && !truthy(m["result"]))
		if isErr && !interruptedTurn && !n.turnError {
			text := ""
			if truthy(m["result"]) {
				text = jsString(m["result"])
			} else if errs, _ := m["errors"].([]any); len(errs) > 0 {
				var parts []string
				for _, e := range errs {
					parts = append(parts, jsString(e))
				}
				text = strings.Join(parts, "\n")
			}
			if text == "" {
				text = jsString(m["terminal_reason"])
			}
			if text == "" {
				text = "the turn failed"
			}
			n.error(text, seq)
		}
		detail := map[string]any{}
		if v, ok := m["duration_ms"]; ok {
			detail["duration_ms"] = v
		}
		if truthy(m["total_cost_usd"]) {
			detail["cost_usd"] = m["total_cost_usd"]
		}
		if len(detail) == 0 {
			detail = nil
		}
		status := StatusCompleted
		if isErr {
			status = StatusFailed
			if interruptedTurn {
				status = StatusInterrupted
			}
		}
		n.turnEnd(status, detail, seq)
	case "rate_limit_event":
		info := object(m["rate_limit_info"])
		if st := orEmpty(info["status"]); st != "" && st != "allowed" {
			text := "rate limit " + st
			if at := jsDate(info["resetsAt"]); at != "" {
				text += "; resets at " + at
			}
			n.add(Item{Kind: KindSystem, Text: text}, seq)
		}
	case "control_response":
		r := object(m["response"])
		if str(r["subtype"]) == "error" {
			text := jsString(r["error"])
			if !truthy(r["error"]) {
				text = "control request refused"
			}
			n.error(text, seq)
		}
	}
}

// --- Codex app-server (real-clis.md §2) ---

func (n *Normalizer) codex(m obj, seq uint64) {
	method, hasMethod := m["method"]
	if !hasMethod {
		if truthy(m["error"]) {
			n.error(errMessage(m["error"]), seq)
		}
		return
	}
	p := object(m["params"])
	if _, isReq := m["id"]; isReq {
		// A server request, such as an approval the tool asks for.
		n.add(Item{Kind: KindSystem, Text: "the tool asks: " + jsString(method)}, seq)
		return
	}
	switch str(method) {
	case "turn/started":
		n.turnStart(seq)
	case "item/started":
		n.codexItem(object(p["item"]), false, seq)
	case "item/completed":
		n.codexItem(object(p["item"]), true, seq)
	case "item/agentMessage/delta":
		n.turnStart(seq)
		n.appendText(KindAssistant, keyOf(p["itemId"]), orEmpty(p["delta"]), seq)
	case "item/reasoning/textDelta", "item/reasoning/summaryTextDelta":
		n.appendText(KindThinking, keyOf(p["itemId"]), orEmpty(p["delta"]), seq)
	case "item/commandExecution/outputDelta":
		n.tool(jsString(p["itemId"]), toolFields{appendResult: ptr(orEmpty(p["delta"]))}, seq)
	case "error":
		e := object(p["error"])
		msg := ""
		if truthy(p["error"]) && truthy(e["message"]) {
			msg = jsString(e["message"])
		}
		if truthy(p["willRetry"]) {
			if msg == "" {
				msg = "retrying"
			}
			n.add(Item{Kind: KindSystem, Text: msg}, seq)
		} else {
			if msg == "" {
				msg = "the turn failed"
			}
			n.error(msg, seq)
		}
	case "warning", "configWarning":
		text := ""
		switch {
		case truthy(p["message"]):
			text = jsString(p["message"])
		case truthy(p["summary"]):
			text = jsString(p["summary"])
		default:
			text = compactJSON(m["params"], p)
		}
		n.add(Item{Kind: KindSystem, Text: "warning: " + text}, seq)
	case "turn/completed":
		t := object(p["turn"])
		status := str(t["status"])
		if status == "failed" && truthy(t["error"]) && !n.turnError {
			msg := jsString(object(t["error"])["message"])
			if !truthy(object(t["error"])["message"]) {
				msg = "the turn failed"
			}
			n.error(msg, seq)
		}
		var detail map[string]any
		if d, ok := t["durationMs"]; ok && d != nil {
			detail = map[string]any{"duration_ms": d}
		}
		switch status {
		case "interrupted":
			status = StatusInterrupted
		case "failed":
			status = StatusFailed
		default:
			status = StatusCompleted
		}
		n.turnEnd(status, detail, seq)
	}
}

func (n *Normalizer) codexItem(it obj, done bool, seq uint64) {
	n.turnStart(seq)
	id := jsString(it["id"])
	switch str(it["type"]) {
	case "userMessage":
		if done {
			return
		}
		var texts []string
		content, _ := it["content"].([]any)
		for _, c := range content {
			co := object(c)
			if str(co["type"]) == "text" {
				texts = append(texts, jsString(co["text"]))
			}
		}
		n.echo(strings.Join(texts, "\n"), seq)
	case "agentMessage":
		if _, has := n.byKey["assistant:"+id]; done || !has {
			n.setText(KindAssistant, id, orEmpty(it["text"]), seq)
		}
	case "reasoning":
		if done {
			var parts []string
			for _, k := range []string{"summary", "content"} {
				arr, _ := it[k].([]any)
				for _, x := range arr {
					parts = append(parts, jsString(x))
				}
			}
			if text := strings.Join(parts, "\n"); text != "" {
				n.setText(KindThinking, id, text, seq)
			}
		}
	case "commandExecution":
		f := toolFields{name: ptr("command"), input: ptr(orEmpty(it["command"]))}
		if done && it["aggregatedOutput"] != nil {
			f.result = ptr(jsString(it["aggregatedOutput"]))
		}
		status := StatusRunning
		if done {
			status = StatusDone
			if str(it["status"]) == "failed" || !isZeroOrNil(it["exitCode"]) {
				status = StatusError
			}
		}
		f.status = &status
		n.tool(id, f, seq)
	case "fileChange":
		var lines []string
		changes, _ := it["changes"].([]any)
		for _, c := range changes {
			co := object(c)
			kind := ""
			if isObject(co["kind"]) {
				kind = orEmpty(object(co["kind"])["type"])
			} else {
				kind = orEmpty(co["kind"])
			}
			lines = append(lines, strings.TrimSpace(kind+" "+jsString(co["path"])))
		}
		status := StatusRunning
		if done {
			status = StatusDone
			if str(it["status"]) == "failed" {
				status = StatusError
			}
		}
		n.tool(id, toolFields{name: ptr("edit"), input: ptr(strings.Join(lines, "\n")), status: &status}, seq)
	case "mcpToolCall":
		f := toolFields{name: ptr(orEmpty(it["server"]) + "/" + orEmpty(it["tool"])), input: ptr(stringify(it["arguments"]))}
		status := StatusRunning
		if done {
			res := it["result"]
			if res == nil {
				res = it["error"]
			}
			if res == nil {
				res = ""
			}
			f.result = ptr(stringify(res))
			status = StatusDone
			if truthy(it["error"]) {
				status = StatusError
			}
		}
		f.status = &status
		n.tool(id, f, seq)
	default:
		typ := str(it["type"])
		if typ != "" && truthy(it["id"]) && typ != "plan" && typ != "contextCompaction" {
			status := StatusRunning
			if done {
				status = StatusDone
			}
			n.tool(id, toolFields{name: &typ, input: ptr(""), status: &status}, seq)
		}
	}
}

// --- ACP: Gemini CLI, OpenCode, Grok (real-clis.md §3, §4) ---

func (n *Normalizer) acp(m obj, seq uint64) {
	method, hasMethod := m["method"]
	if !hasMethod {
		if truthy(m["error"]) {
			n.error(errMessage(m["error"]), seq)
			return
		}
		if !isObject(m["result"]) {
			return
		}
		r := object(m["result"])
		reason, ok := r["stopReason"].(string)
		if !ok {
			return
		}
		switch reason {
		case "cancelled":
			n.turnEnd(StatusInterrupted, nil, seq)
		case "refusal":
			n.error("the model refused to answer", seq)
			n.turnEnd(StatusFailed, nil, seq)
		case "end_turn":
			n.turnEnd(StatusCompleted, nil, seq)
		default:
			n.turnEnd(StatusCompleted, map[string]any{"stop_reason": reason}, seq)
		}
		return
	}
	if _, isReq := m["id"]; isReq {
		n.add(Item{Kind: KindSystem, Text: "the tool asks: " + jsString(method)}, seq)
		return
	}
	if str(method) != "session/update" {
		return
	}
	u := object(object(m["params"])["update"])
	c := object(u["content"])
	switch str(u["sessionUpdate"]) {
	case "agent_message_chunk":
		n.turnStart(seq)
		if str(c["type"]) == "text" {
			n.appendText(KindAssistant, keyOf(u["messageId"]), orEmpty(c["text"]), seq)
		}
	case "agent_thought_chunk":
		n.turnStart(seq)
		if str(c["type"]) == "text" {
			n.appendText(KindThinking, keyOf(u["messageId"]), orEmpty(c["text"]), seq)
		}
	case "user_message_chunk":
		if str(c["type"]) == "text" {
			id := orEmpty(u["messageId"])
			if k := len(n.Items) - 1; k >= 0 && n.Items[k].Kind == KindUser && n.Items[k].HasID && n.Items[k].ID == id {
				n.Items[k].Text += jsString(c["text"])
				n.touch(k)
			} else {
				n.add(Item{Kind: KindUser, ID: id, HasID: true, Text: orEmpty(c["text"])}, seq)
			}
		}
	case "tool_call":
		n.turnStart(seq)
		name := orEmpty(u["title"])
		if name == "" {
			name = orEmpty(u["kind"])
		}
		if name == "" {
			name = "tool"
		}
		in := u["rawInput"]
		if in == nil {
			in = ""
		}
		n.tool(jsString(u["toolCallId"]), toolFields{name: &name, input: ptr(stringify(in)), status: ptr(acpStatus(u["status"]))}, seq)
	case "tool_call_update":
		var outs []string
		arr, _ := u["content"].([]any)
		for _, x := range arr {
			xo := object(x)
			s := ""
			if t := object(xo["content"])["text"]; truthy(xo["content"]) && truthy(t) {
				s = jsString(t)
			} else if str(xo["type"]) == "diff" {
				s = "diff " + jsString(xo["path"])
			}
			if s != "" {
				outs = append(outs, s)
			}
		}
		var f toolFields
		if truthy(u["status"]) {
			f.status = ptr(acpStatus(u["status"]))
		}
		if out := strings.Join(outs, "\n"); out != "" {
			f.result = &out
		} else if raw, ok := u["rawOutput"]; ok {
			f.result = ptr(stringify(raw))
		}
		if truthy(u["title"]) {
			f.name = ptr(jsString(u["title"]))
		}
		n.tool(jsString(u["toolCallId"]), f, seq)
	case "plan":
		var parts []string
		entries, _ := u["entries"].([]any)
		for _, e := range entries {
			eo := object(e)
			mark := "·"
			if str(eo["status"]) == "completed" {
				mark = "✓"
			}
			parts = append(parts, mark+" "+jsString(eo["content"]))
		}
		n.add(Item{Kind: KindSystem, Text: "plan: " + strings.Join(parts, "; ")}, seq)
	}
}

func acpStatus(s any) string {
	switch str(s) {
	case "completed":
		return StatusDone
	case "failed":
		return StatusError
	}
	return StatusRunning
}

// --- JavaScript's view of JSON values ---

// object is v's fields when it is a JSON object, else none.
func object(v any) obj {
	switch x := v.(type) {
	case map[string]any:
		return x
	case ordered:
		m := make(obj, len(x))
		for _, f := range x {
			m[f.k] = f.v
		}
		return m
	}
	return obj{}
}

func isObject(v any) bool {
	switch v.(type) {
	case map[string]any, ordered:
		return true
	}
	return false
}

// kv and ordered keep a JSON object's keys in their order, so that
// stringify writes them as JSON.stringify does.
type kv struct {
	k string
	v any
}

type ordered []kv

// decodeOrdered decodes one JSON value: objects as ordered, arrays as
// []any, numbers as json.Number. Text after the value is an error, as in
// JSON.parse.
func decodeOrdered(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("text after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := ordered{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				// A repeated key keeps its first place and its last value.
				replaced := false
				for i := range o {
					if o[i].k == k {
						o[i].v, replaced = v, true
					}
				}
				if !replaced {
					o = append(o, kv{k, v})
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return a, nil
		}
		return nil, errors.New("unexpected delimiter")
	}
	return tok, nil
}

// jsDate is new Date(seconds * 1000).toISOString(), "" for a falsy value.
func jsDate(v any) string {
	if !truthy(v) {
		return ""
	}
	n, ok := v.(json.Number)
	if !ok {
		return ""
	}
	f, err := n.Float64()
	if err != nil {
		return ""
	}
	return time.UnixMilli(int64(f * 1000)).UTC().Format("2006-01-02T15:04:05.000Z")
}

// str is v when it is a string, else "" (for comparisons: a non-string is
// never equal to a string in JavaScript's ===).
func str(v any) string {
	s, _ := v.(string)
	return s
}

// truthy is JavaScript's truthiness.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case json.Number:
		f, err := x.Float64()
		return err == nil && f != 0
	}
	return true
}

// orEmpty is `v || ”` of a field used as a string.
func orEmpty(v any) string {
	if !truthy(v) {
		return ""
	}
	return jsString(v)
}

// jsString is String(v).
func jsString(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	case bool:
		if x {
			return "true"
		}
		return "false"
	case json.Number:
		return jsNumber(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			if e != nil {
				parts[i] = jsString(e)
			}
		}
		return strings.Join(parts, ",")
	}
	return "[object Object]"
}

func jsNumber(n json.Number) string {
	f, err := n.Float64()
	if err != nil {
		return n.String()
	}
	b, _ := json.Marshal(f)
	return string(b)
}

// keyOf is a message or item id used as a map key: nil when absent or null.
func keyOf(v any) *string {
	if v == nil {
		return nil
	}
	s := jsString(v)
	return &s
}

func isZeroOrNil(v any) bool {
	if v == nil {
		return true
	}
	if n, ok := v.(json.Number); ok {
		f, err := n.Float64()
		return err == nil && f == 0
	}
	return false
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// stringify is normalize.js's stringify: a string as it is, anything else
// as JSON indented by two spaces, keys in their order.
func stringify(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	return indentJSON(v)
}

// indentJSON is JSON.stringify(v, null, 2). Objects decoded into maps lose
// their key order, so the value is re-encoded from the ordered form kept
// by orderedJSON.
func indentJSON(v any) string {
	var b strings.Builder
	writeJSON(&b, v, "")
	return b.String()
}

func writeJSON(b *strings.Builder, v any, ind string) {
	switch x := v.(type) {
	case ordered:
		if len(x) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{\n")
		for i, kv := range x {
			b.WriteString(ind + "  ")
			b.WriteString(jsonString(kv.k))
			b.WriteString(": ")
			writeJSON(b, kv.v, ind+"  ")
			if i < len(x)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(ind + "}")
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		o := make(ordered, 0, len(x))
		for _, k := range keys {
			o = append(o, kv{k, x[k]})
		}
		writeJSON(b, o, ind)
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[\n")
		for i, e := range x {
			b.WriteString(ind + "  ")
			writeJSON(b, e, ind+"  ")
			if i < len(x)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(ind + "]")
	case string:
		b.WriteString(jsonString(x))
	case json.Number:
		b.WriteString(jsNumber(x))
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case nil:
		b.WriteString("null")
	}
}

// jsonString is JSON.stringify of a string: only ", \ and control
// characters escaped.
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&0xf])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// compactJSON is JSON.stringify(v) without indentation.
func compactJSON(v any, _ obj) string {
	s := indentJSON(v)
	var out bytes.Buffer
	if err := json.Compact(&out, []byte(s)); err != nil {
		return s
	}
	return out.String()
}

func resultText(c any) string {
	switch x := c.(type) {
	case string:
		return x
	case []any:
		parts := make([]string, len(x))
		for i, b := range x {
			if bo := object(b); isObject(b) && str(bo["type"]) == "text" {
				parts[i] = jsString(bo["text"])
			} else {
				parts[i] = stringify(b)
			}
		}
		return strings.Join(parts, "\n")
	}
	return stringify(c)
}

// errMessage is `e.message || JSON.stringify(e)`.
func errMessage(e any) string {
	if m := object(e)["message"]; truthy(m) {
		return jsString(m)
	}
	return compactJSON(e, nil)
}
