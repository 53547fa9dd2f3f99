package fakemodel_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/shared/sse"
)

const deadline = 10 * time.Second

// sseEvent is one server-sent event: its event: line (if any) and its data.
type sseEvent struct {
	name string
	data map[string]any
}

// readSSE reads events until EOF (shared/sse); each event's data must be
// one JSON object.
func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	rd := sse.NewReader(r)
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading the event stream: %v", err)
		}
		cur := sseEvent{name: ev.Type}
		if ev.Type == "message" {
			cur.name = "" // no event: line
		}
		if err := json.Unmarshal(ev.Data, &cur.data); err != nil {
			t.Fatalf("data is not JSON: %q", ev.Data)
		}
		out = append(out, cur)
	}
}

// types lists each event's data type, checking it matches the event: line.
func types(t *testing.T, evs []sseEvent) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		typ, _ := e.data["type"].(string)
		if e.name != typ {
			t.Errorf("event: %q carries data type %q", e.name, typ)
		}
		out = append(out, typ)
	}
	return out
}

func post(t *testing.T, ctx context.Context, u, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func get(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, _ := v.(map[string]any)
		v = mm[p]
	}
	return v
}

// claudeBody is shaped like Claude Code's: a system message among the
// messages, string and block content, <system-reminder> before the prompt.
const claudeBody = `{"model":"claude-opus-5-5","stream":true,"max_tokens":128000,"messages":[
 {"role":"system","content":[{"type":"text","text":"# Environment"}]},
 {"role":"user","content":"hello"},
 {"role":"assistant","content":[{"type":"text","text":"pong: hello"}]},
 {"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"again"}]}]}`

func TestAnthropicStream(t *testing.T) {
	a := fakemodel.NewAnthropic()
	defer a.Close()
	if u, _ := url.Parse(a.URL()); u.Hostname() != "127.0.0.1" {
		t.Fatalf("listens on %s, want 127.0.0.1", u.Host)
	}
	resp := post(t, context.Background(), a.URL()+"/v1/messages?beta=true", claudeBody)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("request-id") == "" {
		t.Fatalf("status %d, content-type %q, request-id %q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("request-id"))
	}
	evs := readSSE(t, resp.Body)
	want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if got := types(t, evs); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	if got := get(evs[0].data, "message", "model"); got != "claude-opus-5-5" {
		t.Errorf("message_start model %v", got)
	}
	if _, ok := get(evs[0].data, "message", "usage", "input_tokens").(float64); !ok {
		t.Error("message_start without usage.input_tokens")
	}
	var text string
	for _, e := range evs[2:4] {
		if get(e.data, "delta", "type") != "text_delta" {
			t.Errorf("delta %v, want text_delta", e.data)
		}
		s, _ := get(e.data, "delta", "text").(string)
		text += s
	}
	if text != "pong: again" {
		t.Errorf("streamed text %q, want the echo of the last user text", text)
	}
	if get(evs[5].data, "delta", "stop_reason") != "end_turn" || get(evs[5].data, "usage", "output_tokens") == nil {
		t.Errorf("message_delta %v", evs[5].data)
	}

	reqs := a.ModelRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests recorded", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/messages" || r.Query != "beta=true" || r.Prompt != "again" || !r.Stream || r.Model != "claude-opus-5-5" {
		t.Errorf("recorded %q?%q prompt %q stream %t model %q", r.Path, r.Query, r.Prompt, r.Stream, r.Model)
	}
	wantSaid := []string{"system: # Environment", "user: hello", "assistant: pong: hello", "user: <system-reminder>x</system-reminder>", "user: again"}
	if got := r.Said(); !slices.Equal(got, wantSaid) {
		t.Errorf("Said() = %q, want %q", got, wantSaid)
	}
}

func TestAnthropicToolAndJSON(t *testing.T) {
	a := fakemodel.NewAnthropic()
	defer a.Close()
	call := fakemodel.Tool("Read", `{"file_path":"/w/notes.txt"}`)
	call.Tool.ID = "toolu_1"
	a.Push(call, fakemodel.Text("done"), fakemodel.Tool("Read", `{"file_path":"/x"}`))

	resp := post(t, context.Background(), a.URL()+"/v1/messages", claudeBody)
	evs := readSSE(t, resp.Body)
	resp.Body.Close()
	if got := types(t, evs); len(got) != 6 {
		t.Fatalf("tool stream events %q", got)
	}
	if cb := evs[1].data["content_block"].(map[string]any); cb["type"] != "tool_use" || cb["id"] != "toolu_1" || cb["name"] != "Read" {
		t.Errorf("content_block_start %v", cb)
	}
	if d := evs[2].data["delta"].(map[string]any); d["type"] != "input_json_delta" || d["partial_json"] != `{"file_path":"/w/notes.txt"}` {
		t.Errorf("tool delta %v", d)
	}
	if get(evs[4].data, "delta", "stop_reason") != "tool_use" {
		t.Errorf("message_delta %v, want stop_reason tool_use", evs[4].data)
	}

	// The tool result comes back; then a non-stream request gets JSON.
	withResult := `{"model":"m","stream":false,"messages":[{"role":"user","content":"read"},
	 {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"file text"}]}]}]}`
	resp = post(t, context.Background(), a.URL()+"/v1/messages", withResult)
	var msg map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c := msg["content"].([]any)[0].(map[string]any); c["type"] != "text" || c["text"] != "done" || msg["stop_reason"] != "end_turn" {
		t.Errorf("JSON answer %v", msg)
	}
	r := a.ModelRequests()[1]
	if r.Prompt != "read" || !slices.Equal(r.History[1].ToolCalls, []string{"toolu_1"}) ||
		!slices.Equal(r.History[2].ToolResults, []string{"toolu_1"}) || !slices.Equal(r.History[2].Outputs, []string{"file text"}) {
		t.Errorf("recorded history %+v, prompt %q", r.History, r.Prompt)
	}

	resp = post(t, context.Background(), a.URL()+"/v1/messages", `{"stream":false,"messages":[]}`)
	msg = nil
	_ = json.NewDecoder(resp.Body).Decode(&msg)
	resp.Body.Close()
	if c := msg["content"].([]any)[0].(map[string]any); c["type"] != "tool_use" || msg["stop_reason"] != "tool_use" || get(c, "input", "file_path") != "/x" {
		t.Errorf("JSON tool answer %v", msg)
	}
}

func TestAnthropicFailuresAndRoutes(t *testing.T) {
	a := fakemodel.NewAnthropic()
	defer a.Close()
	reset := time.Unix(1796210193, 0)
	a.Push(fakemodel.AnthropicRateLimited(), fakemodel.AnthropicUsageLimit(reset), fakemodel.AnthropicServerError())
	for _, tc := range []struct {
		status  int
		errType string
		header  map[string]string
	}{
		{429, "rate_limit_error", map[string]string{"X-Should-Retry": "false"}},
		{429, "rate_limit_error", map[string]string{
			"Anthropic-Ratelimit-Unified-Status":               "rejected",
			"Anthropic-Ratelimit-Unified-Reset":                "1796210193",
			"Anthropic-Ratelimit-Unified-Representative-Claim": "five_hour",
			"Anthropic-Ratelimit-Unified-5h-Status":            "rejected",
			"Anthropic-Ratelimit-Unified-5h-Reset":             "1796210193",
		}},
		{500, "api_error", nil},
	} {
		resp := post(t, context.Background(), a.URL()+"/v1/messages", claudeBody)
		var body struct {
			Type  string `json:"type"`
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || body.Type != "error" || body.Error.Type != tc.errType {
			t.Errorf("got %d %+v, want %d %s", resp.StatusCode, body, tc.status, tc.errType)
		}
		for k, v := range tc.header {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("header %s = %q, want %q", k, got, v)
			}
		}
	}

	req, _ := http.NewRequest(http.MethodHead, a.URL()+"/api/hello", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD /api/hello: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get(a.URL() + "/v1/models")
	if err != nil || resp.StatusCode != 404 {
		t.Fatalf("GET /v1/models: %v %v", resp, err)
	}
	resp.Body.Close()
	var paths []string
	for _, r := range a.Requests() {
		paths = append(paths, r.Method+" "+r.Path)
	}
	want := []string{"POST /v1/messages", "POST /v1/messages", "POST /v1/messages", "HEAD /api/hello", "GET /v1/models"}
	if !slices.Equal(paths, want) {
		t.Errorf("recorded %q, want %q", paths, want)
	}
}

// TestHold: a held answer opens the stream, then waits; Release finishes it,
// and a client that leaves closes Gone.
func TestHold(t *testing.T) {
	for _, name := range []string{"anthropic", "openai"} {
		t.Run(name, func(t *testing.T) {
			var u, body string
			var push func(...fakemodel.Reply)
			switch name {
			case "anthropic":
				a := fakemodel.NewAnthropic()
				defer a.Close()
				u, body, push = a.URL()+"/v1/messages", claudeBody, a.Push
			default:
				o := fakemodel.NewOpenAI()
				defer o.Close()
				u, body, push = o.URL()+"/v1/responses", codexBody, o.Push
			}
			released, left := fakemodel.NewGate(), fakemodel.NewGate()
			push(fakemodel.Held(released), fakemodel.Held(left))

			resp := post(t, context.Background(), u, body)
			wait(t, released.Arrived(), "arrived")
			released.Release()
			evs := readSSE(t, resp.Body)
			resp.Body.Close()
			text := streamedText(evs)
			if text != "held pong: again" {
				t.Errorf("released stream text %q", text)
			}
			select {
			case <-released.Gone():
				t.Error("Gone closed for a released answer")
			default:
			}

			ctx, cancel := context.WithCancel(context.Background())
			resp = post(t, ctx, u, body)
			wait(t, left.Arrived(), "arrived")
			cancel()
			resp.Body.Close()
			wait(t, left.Gone(), "gone")
			left.Release() // after the fact: harmless
		})
	}
}

func streamedText(evs []sseEvent) string {
	var text string
	for _, e := range evs {
		switch e.data["type"] {
		case "content_block_delta":
			s, _ := get(e.data, "delta", "text").(string)
			text += s
		case "response.output_text.delta":
			s, _ := e.data["delta"].(string)
			text += s
		}
	}
	return text
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(deadline):
		t.Fatalf("%s: not within %v", what, deadline)
	}
}

// codexBody is shaped like Codex's: developer messages, the environment
// context, a function call and its output, then the prompt.
const codexBody = `{"model":"fake-model","stream":true,"instructions":"x","input":[
 {"type":"message","role":"developer","content":[{"type":"input_text","text":"dev"}]},
 {"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>"}]},
 {"type":"message","role":"user","content":[{"type":"input_text","text":"hello"}]},
 {"type":"message","role":"assistant","content":[{"type":"output_text","text":"pong: hello"}]},
 {"type":"function_call","call_id":"call_1","name":"exec_command","arguments":"{}"},
 {"type":"function_call_output","call_id":"call_1","output":"ok"},
 {"type":"message","role":"user","content":[{"type":"input_text","text":"again"}]}]}`

func TestOpenAIStream(t *testing.T) {
	o := fakemodel.NewOpenAI()
	defer o.Close()
	if !strings.HasSuffix(o.BaseURL(), "/v1") || !strings.HasPrefix(o.BaseURL(), "http://127.0.0.1:") {
		t.Fatalf("BaseURL %q", o.BaseURL())
	}
	resp := post(t, context.Background(), o.BaseURL()+"/responses", codexBody)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content-type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := readSSE(t, resp.Body)
	want := []string{"response.created", "response.output_item.added", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.output_item.done", "response.completed"}
	if got := types(t, evs); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	if text := streamedText(evs); text != "pong: again" {
		t.Errorf("deltas %q", text)
	}
	item := evs[5].data["item"].(map[string]any)
	c := item["content"].([]any)[0].(map[string]any)
	if item["type"] != "message" || item["role"] != "assistant" || c["type"] != "output_text" || c["text"] != "pong: again" {
		t.Errorf("output_item.done %v", item)
	}
	if evs[2].data["item_id"] != item["id"] {
		t.Errorf("delta item_id %v, item id %v", evs[2].data["item_id"], item["id"])
	}
	usage := get(evs[6].data, "response", "usage").(map[string]any)
	if usage["input_tokens"] == nil || usage["output_tokens"] == nil || usage["total_tokens"] == nil {
		t.Errorf("response.completed usage %v", usage)
	}

	r := o.ModelRequests()[0]
	wantSaid := []string{"developer: dev", "user: <environment_context>", "user: hello", "assistant: pong: hello", "user: again"}
	if r.Prompt != "again" || r.Model != "fake-model" || !r.Stream || !slices.Equal(r.Said(), wantSaid) {
		t.Errorf("recorded prompt %q model %q stream %t said %q", r.Prompt, r.Model, r.Stream, r.Said())
	}
	if h := r.History[4]; h.Role != "assistant" || !slices.Equal(h.ToolCalls, []string{"call_1"}) {
		t.Errorf("function_call entry %+v", h)
	}
	if h := r.History[5]; h.Role != "tool" || !slices.Equal(h.ToolResults, []string{"call_1"}) || !slices.Equal(h.Outputs, []string{"ok"}) {
		t.Errorf("function_call_output entry %+v", h)
	}
}

func TestOpenAIToolFailuresAndRoutes(t *testing.T) {
	o := fakemodel.NewOpenAI()
	defer o.Close()
	reset := time.Unix(1796210375, 0)
	o.Push(fakemodel.Tool("exec_command", `{"cmd":"true"}`), fakemodel.OpenAIRateLimitFailed(),
		fakemodel.OpenAIUsageLimit(fakemodel.CodexWindows(&fakemodel.Window{UsedPercent: 100, Minutes: 300, ResetAt: reset}, nil)),
		fakemodel.OpenAIRateLimited429(), fakemodel.OpenAIServerError())

	resp := post(t, context.Background(), o.BaseURL()+"/responses", codexBody)
	evs := readSSE(t, resp.Body)
	resp.Body.Close()
	if got := types(t, evs); !slices.Equal(got, []string{"response.created", "response.output_item.added", "response.output_item.done", "response.completed"}) {
		t.Fatalf("tool events %q", got)
	}
	if it := evs[2].data["item"].(map[string]any); it["type"] != "function_call" || it["name"] != "exec_command" || it["arguments"] != `{"cmd":"true"}` || it["call_id"] == "" {
		t.Errorf("function_call item %v", it)
	}

	resp = post(t, context.Background(), o.BaseURL()+"/responses", codexBody)
	evs = readSSE(t, resp.Body)
	resp.Body.Close()
	if got := types(t, evs); !slices.Equal(got, []string{"response.created", "response.failed"}) || get(evs[1].data, "response", "error", "code") != "rate_limit_exceeded" {
		t.Errorf("failed stream %q %v", got, evs)
	}

	for _, tc := range []struct {
		status int
		code   string
		header map[string]string
	}{
		{429, "usage_limit_reached", map[string]string{"x-codex-primary-used-percent": "100.0", "x-codex-primary-window-minutes": "300", "x-codex-primary-reset-at": "1796210375"}},
		{429, "rate_limit_exceeded", nil},
		{500, "server_error", nil},
	} {
		resp := post(t, context.Background(), o.BaseURL()+"/responses", codexBody)
		var body struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || body.Error.Code != tc.code {
			t.Errorf("got %d %q, want %d %q", resp.StatusCode, body.Error.Code, tc.status, tc.code)
		}
		for k, v := range tc.header {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("header %s = %q, want %q", k, got, v)
			}
		}
		if resp.Header.Get("x-codex-secondary-used-percent") != "" {
			t.Error("a nil secondary window sent headers")
		}
	}

	// The websocket upgrade Codex tries with supports_websockets is refused.
	resp, err := http.Get(o.BaseURL() + "/responses")
	if err != nil || resp.StatusCode != 404 {
		t.Fatalf("GET /v1/responses: %v %v", resp, err)
	}
	resp.Body.Close()
	if n := len(o.ModelRequests()); n != 5 {
		t.Errorf("%d model requests, want 5 (the GET is not one)", n)
	}
	if n := len(o.Requests()); n != 6 {
		t.Errorf("%d requests recorded, want 6", n)
	}
}

func TestAwait(t *testing.T) {
	o := fakemodel.NewOpenAI()
	defer o.Close()
	done := make(chan []fakemodel.Request, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		reqs, _ := o.Await(ctx, fakemodel.ResponsesPath, 2)
		done <- reqs
	}()
	for range 2 {
		resp := post(t, context.Background(), o.BaseURL()+"/responses", codexBody)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	select {
	case reqs := <-done:
		if len(reqs) != 2 {
			t.Errorf("Await returned %d requests", len(reqs))
		}
	case <-time.After(deadline):
		t.Fatal("Await did not return")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := o.Await(ctx, fakemodel.ResponsesPath, 3); err == nil {
		t.Error("Await for a request that never comes returned no error")
	}
}
