package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"
)

// MessagesPath is the Anthropic Messages endpoint (Claude Code adds
// ?beta=true, which the server ignores).
const MessagesPath = "/v1/messages"

// Anthropic is a fake Anthropic Messages API (real-clis.md §1.9, §6.3):
// POST /v1/messages as SSE (or JSON when the body says stream:false), and
// HEAD or GET /api/hello, the preflight Claude Code sends unless
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1. Any other path is a 404, and
// recorded too, so that a test sees a call it did not expect.
type Anthropic struct{ server }

// NewAnthropic starts a fake Messages server on 127.0.0.1. Close it when done.
func NewAnthropic() *Anthropic {
	a := &Anthropic{server{log: newLog()}}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	return a
}

// ModelRequests returns the POST /v1/messages requests recorded so far.
func (a *Anthropic) ModelRequests() []Request { return a.modelRequests(MessagesPath) }

type anthropicBody struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// parseAnthropic reads a Messages body: content is a string or an array of
// blocks; roles need not alternate (Claude sends a "system" message).
func parseAnthropic(body []byte) (model string, stream bool, hist []Message, prompt string) {
	var b anthropicBody
	if json.Unmarshal(body, &b) != nil {
		return "", false, nil, ""
	}
	for _, m := range b.Messages {
		msg := Message{Role: m.Role}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			msg.Texts = []string{s}
		} else {
			var blocks []anthropicBlock
			_ = json.Unmarshal(m.Content, &blocks)
			for _, bl := range blocks {
				switch bl.Type {
				case "text":
					msg.Texts = append(msg.Texts, bl.Text)
				case "tool_use":
					msg.ToolCalls = append(msg.ToolCalls, bl.ID)
				case "tool_result":
					msg.ToolResults = append(msg.ToolResults, bl.ToolUseID)
					msg.Outputs = append(msg.Outputs, blockText(bl.Content))
				}
			}
		}
		hist = append(hist, msg)
	}
	for i := len(hist) - 1; i >= 0 && prompt == ""; i-- {
		if hist[i].Role == "user" && len(hist[i].Texts) > 0 {
			prompt = hist[i].Texts[len(hist[i].Texts)-1]
		}
	}
	return b.Model, b.Stream, hist, prompt
}

// blockText is a tool_result's content: a string or text blocks.
func blockText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []anthropicBlock
	_ = json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (a *Anthropic) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	req := Request{At: time.Now(), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	switch {
	case r.URL.Path == "/api/hello":
		a.record(req)
		w.WriteHeader(http.StatusOK)
	case r.URL.Path == MessagesPath && r.Method == http.MethodPost:
		req.Model, req.Stream, req.History, req.Prompt = parseAnthropic(body)
		req.Reply = a.next()
		a.record(req)
		a.answer(w, r, req)
	default:
		a.record(req)
		http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"fakemodel: no such route"}}`, http.StatusNotFound)
	}
}

// answer writes req.Reply.
func (a *Anthropic) answer(w http.ResponseWriter, r *http.Request, req Request) {
	rep := req.Reply
	n := a.id()
	setHeader(w, rep.Header)
	w.Header().Set("request-id", fmt.Sprintf("req_fake_%d", n))
	if rep.Status != 0 && rep.Status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		_, _ = io.WriteString(w, rep.Body)
		return
	}
	model := req.Model
	if model == "" {
		model = "claude-fake"
	}
	text := rep.Text
	if text == "" && rep.Tool == nil {
		text = "pong: " + req.Prompt
	}
	msgID := fmt.Sprintf("msg_fake_%d", n)
	usage := Usage{InputTokens: 11}
	if rep.Usage != nil {
		usage = *rep.Usage
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(anthropicMessage(msgID, model, text, rep.Tool, n, usage))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	ev := func(typ string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		if fl != nil {
			fl.Flush()
		}
	}
	ev("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": usage.json(1),
	}})
	stop := "end_turn"
	if rep.Tool != nil {
		stop = "tool_use"
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{
			"type": "tool_use", "id": toolID(rep.Tool, "toolu_fake_", n), "name": rep.Tool.Name, "input": map[string]any{}}})
		ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": rep.Tool.Input}})
	} else {
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		delta := func(s string) {
			ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "text_delta", "text": s}})
		}
		if rep.Hold != nil {
			delta("held ")
			if !rep.Hold.hold(r.Context()) {
				return
			}
		}
		for _, part := range split(text) {
			delta(part)
		}
	}
	ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	ev("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 5}})
	ev("message_stop", map[string]any{"type": "message_stop"})
}

// anthropicMessage is the non-streamed answer.
func anthropicMessage(id, model, text string, tool *ToolCall, n int, usage Usage) map[string]any {
	content := []any{map[string]any{"type": "text", "text": text}}
	stop := "end_turn"
	if tool != nil {
		var input any = map[string]any{}
		_ = json.Unmarshal([]byte(tool.Input), &input)
		content = []any{map[string]any{"type": "tool_use", "id": toolID(tool, "toolu_fake_", n), "name": tool.Name, "input": input}}
		stop = "tool_use"
	}
	return map[string]any{"id": id, "type": "message", "role": "assistant", "model": model, "content": content,
		"stop_reason": stop, "stop_sequence": nil,
		"usage": usage.json(5)}
}

func toolID(t *ToolCall, prefix string, n int) string {
	if t.ID != "" {
		return t.ID
	}
	return prefix + strconv.Itoa(n)
}

// split cuts s in two deltas, so that a client has to join them.
func split(s string) []string {
	if len(s) < 2 {
		return []string{s}
	}
	h := len(s) / 2
	for h > 0 && !isRuneStart(s[h]) {
		h--
	}
	return []string{s[:h], s[h:]}
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// AnthropicRateLimited is an HTTP 429 rate_limit_error that Claude Code does
// not retry (x-should-retry: false); with API-key auth it ends the turn with
// api_error_status 429 and no rate_limit_event (real-clis.md §1.10).
func AnthropicRateLimited() Reply {
	return Reply{Status: http.StatusTooManyRequests,
		Header: http.Header{"X-Should-Retry": {"false"}},
		Body:   `{"type":"error","error":{"type":"rate_limit_error","message":"fake: Number of request tokens has exceeded your per-minute rate limit"}}`}
}

// AnthropicUsageLimit is an HTTP 429 whose anthropic-ratelimit-unified-*
// headers say the five-hour window is used up until reset. Under
// subscription auth (CLAUDE_CODE_OAUTH_TOKEN) Claude Code emits a
// rate_limit_event with status "rejected" and resetsAt, then ends the turn
// with api_error usage_limit_reached (real-clis.md §1.10).
func AnthropicUsageLimit(reset time.Time) Reply {
	r := strconv.FormatInt(reset.Unix(), 10)
	return Reply{Status: http.StatusTooManyRequests,
		Header: http.Header{
			"X-Should-Retry":                                      {"false"},
			"Anthropic-Ratelimit-Unified-Status":                  {"rejected"},
			"Anthropic-Ratelimit-Unified-Reset":                   {r},
			"Anthropic-Ratelimit-Unified-Representative-Claim":    {"five_hour"},
			"Anthropic-Ratelimit-Unified-5h-Status":               {"rejected"},
			"Anthropic-Ratelimit-Unified-5h-Utilization":          {"1.0"},
			"Anthropic-Ratelimit-Unified-5h-Reset":                {r},
			"Anthropic-Ratelimit-Unified-Overage-Status":          {"rejected"},
			"Anthropic-Ratelimit-Unified-Overage-Disabled-Reason": {"org_level_disabled"},
		},
		Body: `{"type":"error","error":{"type":"rate_limit_error","message":"fake: usage limit reached"}}`}
}

// AnthropicServerError is an HTTP 500 api_error: a failure that is no limit.
func AnthropicServerError() Reply {
	return Reply{Status: http.StatusInternalServerError,
		Header: http.Header{"X-Should-Retry": {"false"}},
		Body:   `{"type":"error","error":{"type":"api_error","message":"fake: internal server error"}}`}
}

func (u Usage) json(output int) map[string]any {
	return map[string]any{"input_tokens": u.InputTokens, "cache_creation_input_tokens": u.CacheCreationInputTokens,
		"cache_read_input_tokens": u.CacheReadInputTokens, "output_tokens": output}
}
