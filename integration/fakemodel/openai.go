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

// ResponsesPath is the OpenAI Responses endpoint (a Codex model provider's
// base_url ends in /v1).
const ResponsesPath = "/v1/responses"

// OpenAI is a fake OpenAI Responses API (real-clis.md §2.4, §6.3): POST
// /v1/responses as SSE. A GET there (a websocket upgrade, only tried when the
// provider sets supports_websockets) is a 404, after which Codex falls back
// to POST. Every request is recorded.
type OpenAI struct{ server }

// NewOpenAI starts a fake Responses server on 127.0.0.1. Close it when done.
func NewOpenAI() *OpenAI {
	o := &OpenAI{server{log: newLog()}}
	o.srv = httptest.NewServer(http.HandlerFunc(o.serve))
	return o
}

// BaseURL is the base_url of a Codex [model_providers.*] entry.
func (o *OpenAI) BaseURL() string { return o.URL() + "/v1" }

// ModelRequests returns the POST /v1/responses requests recorded so far.
func (o *OpenAI) ModelRequests() []Request { return o.modelRequests(ResponsesPath) }

type responsesBody struct {
	Model  string            `json:"model"`
	Stream bool              `json:"stream"`
	Input  []json.RawMessage `json:"input"`
}

type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	CallID  string          `json:"call_id"`
	Output  json.RawMessage `json:"output"`
}

// parseResponses reads a Responses body; input is an array of items, or a
// plain string.
func parseResponses(body []byte) (model string, stream bool, hist []Message, prompt string) {
	var raw struct {
		Input json.RawMessage `json:"input"`
	}
	if json.Unmarshal(body, &raw) != nil {
		return "", false, nil, ""
	}
	var b responsesBody
	var s string
	if json.Unmarshal(raw.Input, &s) == nil {
		_ = json.Unmarshal(body, &struct {
			Model  *string `json:"model"`
			Stream *bool   `json:"stream"`
		}{&b.Model, &b.Stream})
		return b.Model, b.Stream, []Message{{Role: "user", Texts: []string{s}}}, s
	}
	_ = json.Unmarshal(body, &b)
	for _, rawItem := range b.Input {
		var it responsesItem
		if json.Unmarshal(rawItem, &it) != nil {
			continue
		}
		switch {
		case it.Type == "function_call":
			hist = append(hist, Message{Role: "assistant", ToolCalls: []string{it.CallID}})
		case it.Type == "function_call_output":
			hist = append(hist, Message{Role: "tool", ToolResults: []string{it.CallID}, Outputs: []string{outputText(it.Output)}})
		case it.Type == "message" || (it.Type == "" && it.Role != ""):
			msg := Message{Role: it.Role}
			var cs string
			if json.Unmarshal(it.Content, &cs) == nil {
				msg.Texts = []string{cs}
			} else {
				var parts []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				}
				_ = json.Unmarshal(it.Content, &parts)
				for _, p := range parts {
					if p.Type == "input_text" || p.Type == "output_text" || p.Type == "text" {
						msg.Texts = append(msg.Texts, p.Text)
					}
				}
			}
			hist = append(hist, msg)
		}
	}
	for i := len(hist) - 1; i >= 0 && prompt == ""; i-- {
		if hist[i].Role == "user" && len(hist[i].Texts) > 0 {
			prompt = hist[i].Texts[len(hist[i].Texts)-1]
		}
	}
	return b.Model, b.Stream, hist, prompt
}

// outputText is a function_call_output's output: a string, or content parts.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return strings.Join(out, "\n")
}

func (o *OpenAI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	req := Request{At: time.Now(), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	if r.URL.Path != ResponsesPath || r.Method != http.MethodPost {
		o.record(req)
		http.Error(w, `{"error":{"code":"not_found","message":"fakemodel: no such route"}}`, http.StatusNotFound)
		return
	}
	req.Model, req.Stream, req.History, req.Prompt = parseResponses(body)
	req.Reply = o.next()
	o.record(req)
	o.answer(w, r, req)
}

func (o *OpenAI) answer(w http.ResponseWriter, r *http.Request, req Request) {
	rep := req.Reply
	n := o.id()
	setHeader(w, rep.Header)
	w.Header().Set("x-request-id", fmt.Sprintf("req_fake_%d", n))
	if rep.Status != 0 && rep.Status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		_, _ = io.WriteString(w, rep.Body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	ev := func(data map[string]any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", data["type"], b)
		if fl != nil {
			fl.Flush()
		}
	}
	respID := fmt.Sprintf("resp_fake_%d", n)
	ev(map[string]any{"type": "response.created", "response": map[string]any{"id": respID, "status": "in_progress"}})
	if rep.Failed != "" {
		ev(map[string]any{"type": "response.failed", "response": map[string]any{"id": respID, "status": "failed",
			"error": map[string]any{"code": rep.Failed, "message": "fake failure: " + rep.Failed}}})
		return
	}
	if rep.Tool != nil {
		item := map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_fake_%d", n),
			"call_id": toolID(rep.Tool, "call_fake_", n), "name": rep.Tool.Name, "arguments": rep.Tool.Input, "status": "completed"}
		ev(map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
		ev(map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	} else {
		text := rep.Text
		if text == "" {
			text = "pong: " + req.Prompt
		}
		itemID := fmt.Sprintf("msg_fake_%d", n)
		ev(map[string]any{"type": "response.output_item.added", "output_index": 0, "item": map[string]any{
			"id": itemID, "type": "message", "role": "assistant", "status": "in_progress", "content": []any{}}})
		delta := func(s string) {
			ev(map[string]any{"type": "response.output_text.delta", "item_id": itemID, "output_index": 0, "content_index": 0, "delta": s})
		}
		full := text
		if rep.Hold != nil {
			delta("held ")
			if !rep.Hold.hold(r.Context()) {
				return
			}
			full = "held " + text
		}
		for _, part := range split(text) {
			delta(part)
		}
		ev(map[string]any{"type": "response.output_text.done", "item_id": itemID, "output_index": 0, "content_index": 0, "text": full})
		ev(map[string]any{"type": "response.output_item.done", "output_index": 0, "item": map[string]any{
			"id": itemID, "type": "message", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": full, "annotations": []any{}}}}})
	}
	ev(map[string]any{"type": "response.completed", "response": map[string]any{"id": respID, "status": "completed",
		"usage": map[string]any{"input_tokens": 1234, "input_tokens_details": map[string]any{"cached_tokens": 1000},
			"output_tokens": 56, "output_tokens_details": map[string]any{"reasoning_tokens": 7}, "total_tokens": 1290}}})
}

// Window is one Codex rate-limit window, sent as x-codex-primary-* or
// x-codex-secondary-* headers (real-clis.md §2.5).
type Window struct {
	UsedPercent float64
	Minutes     int
	ResetAt     time.Time
}

// CodexWindows returns the x-codex-* headers for the windows; a nil window
// sends none. Codex reports them in account/rateLimits/updated.
func CodexWindows(primary, secondary *Window) http.Header {
	h := http.Header{}
	for name, w := range map[string]*Window{"primary": primary, "secondary": secondary} {
		if w == nil {
			continue
		}
		h.Set("x-codex-"+name+"-used-percent", strconv.FormatFloat(w.UsedPercent, 'f', 1, 64))
		h.Set("x-codex-"+name+"-window-minutes", strconv.Itoa(w.Minutes))
		h.Set("x-codex-"+name+"-reset-at", strconv.FormatInt(w.ResetAt.Unix(), 10))
	}
	return h
}

// OpenAIUsageLimit is an HTTP 429 usage_limit_reached, which Codex types
// usageLimitExceeded (real-clis.md §2.5); header may carry CodexWindows.
func OpenAIUsageLimit(header http.Header) Reply {
	return Reply{Status: http.StatusTooManyRequests, Header: header,
		Body: `{"error":{"type":"usage_limit_reached","code":"usage_limit_reached","message":"fake: usage limit reached","plan_type":"plus","resets_in_seconds":3600}}`}
}

// OpenAIRateLimitFailed is a 200 stream ending in response.failed
// rate_limit_exceeded, which Codex types rateLimitExceeded (real-clis.md §2.5).
func OpenAIRateLimitFailed() Reply { return Reply{Failed: "rate_limit_exceeded"} }

// OpenAIRateLimited429 is an HTTP 429 rate_limit_exceeded. Codex does not
// type it as a limit: it is responseTooManyFailedAttempts{429}
// (real-clis.md §2.5).
func OpenAIRateLimited429() Reply {
	return Reply{Status: http.StatusTooManyRequests,
		Body: `{"error":{"code":"rate_limit_exceeded","type":"requests","message":"fake: Rate limit reached for requests"}}`}
}

// OpenAIServerError is an HTTP 500, which Codex types internalServerError.
func OpenAIServerError() Reply {
	return Reply{Status: http.StatusInternalServerError, Body: `{"error":{"code":"server_error","message":"fake: internal error"}}`}
}
