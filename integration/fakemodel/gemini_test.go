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

// geminiBody is shaped like Gemini CLI's: a <session_context> user content,
// a model answer with a function call, the function response, then the
// prompt; thought parts are not prompts.
const geminiBody = `{"contents":[
 {"role":"user","parts":[{"text":"<session_context>x</session_context>"}]},
 {"role":"user","parts":[{"text":"hello"}]},
 {"role":"model","parts":[{"text":"thinking","thought":true},{"functionCall":{"id":"call_1","name":"read_file","args":{"file_path":"/w/a"}}}]},
 {"role":"user","parts":[{"functionResponse":{"id":"call_1","name":"read_file","response":{"output":"file text"}}}]},
 {"role":"user","parts":[{"text":"again"}]}],
 "generationConfig":{"temperature":0}}`

// geminiChunks reads a streamGenerateContent?alt=sse answer (shared/sse):
// every event is a data-only one holding one JSON object.
func geminiChunks(t *testing.T, r io.Reader) []map[string]any {
	t.Helper()
	var out []map[string]any
	rd := sse.NewReader(r)
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading the event stream: %v", err)
		}
		if ev.Type != "message" {
			t.Fatalf("an event of type %q, want data only", ev.Type)
		}
		var m map[string]any
		if err := json.Unmarshal(ev.Data, &m); err != nil {
			t.Fatalf("data is not JSON: %q", ev.Data)
		}
		out = append(out, m)
	}
}

func candidate(m map[string]any) map[string]any {
	cs, _ := m["candidates"].([]any)
	if len(cs) == 0 {
		return nil
	}
	c, _ := cs[0].(map[string]any)
	return c
}

func partsText(c map[string]any) string {
	parts, _ := get(c, "content", "parts").([]any)
	var s string
	for _, p := range parts {
		pm, _ := p.(map[string]any)
		t, _ := pm["text"].(string)
		s += t
	}
	return s
}

func TestGeminiStream(t *testing.T) {
	g := fakemodel.NewGemini()
	defer g.Close()
	if u, _ := url.Parse(g.URL()); u.Hostname() != "127.0.0.1" {
		t.Fatalf("listens on %s, want 127.0.0.1", u.Host)
	}
	resp := post(t, context.Background(), g.URL()+"/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", geminiBody)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content-type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	chunks := geminiChunks(t, resp.Body)
	if len(chunks) != 2 {
		t.Fatalf("got %d chunks, want 2 (a client has to join them)", len(chunks))
	}
	var text string
	for i, ch := range chunks {
		c := candidate(ch)
		if get(c, "content", "role") != "model" {
			t.Errorf("chunk %d role %v, want model", i, get(c, "content", "role"))
		}
		text += partsText(c)
		last := i == len(chunks)-1
		if (c["finishReason"] == "STOP") != last || (ch["usageMetadata"] != nil) != last {
			t.Errorf("chunk %d: finishReason %v, usageMetadata %v; want both on the last chunk only", i, c["finishReason"], ch["usageMetadata"])
		}
	}
	if text != "pong: again" {
		t.Errorf("streamed text %q, want the echo of the last user text", text)
	}
	if u := chunks[1]["usageMetadata"].(map[string]any); u["promptTokenCount"] == nil || u["candidatesTokenCount"] == nil || u["totalTokenCount"] == nil {
		t.Errorf("usageMetadata %v", u)
	}

	turns := g.Turns()
	if len(turns) != 1 {
		t.Fatalf("%d turns recorded, want 1", len(turns))
	}
	r := turns[0]
	if r.Path != "/v1beta/models/gemini-2.5-pro:streamGenerateContent" || r.Query != "alt=sse" || r.Model != "gemini-2.5-pro" || !r.Stream || r.Prompt != "again" {
		t.Errorf("recorded %q?%q model %q stream %t prompt %q", r.Path, r.Query, r.Model, r.Stream, r.Prompt)
	}
	wantSaid := []string{"user: <session_context>x</session_context>", "user: hello", "user: again"}
	if got := r.Said(); !slices.Equal(got, wantSaid) {
		t.Errorf("Said() = %q, want %q (thoughts are not said)", got, wantSaid)
	}
	if h := r.History[2]; h.Role != "model" || !slices.Equal(h.ToolCalls, []string{"call_1"}) {
		t.Errorf("model entry %+v, want the function call", h)
	}
	if h := r.History[3]; !slices.Equal(h.ToolResults, []string{"call_1"}) || len(h.Outputs) != 1 || !strings.Contains(h.Outputs[0], "file text") {
		t.Errorf("function response entry %+v", h)
	}
}

// TestGeminiSideCalls: a JSON-mode generateContent is the router's
// classifier (or a next-speaker check): it gets the JSON those callers
// parse and does not take a queued reply; a plain generateContent does.
func TestGeminiSideCalls(t *testing.T) {
	g := fakemodel.NewGemini()
	defer g.Close()
	g.Push(fakemodel.Text("queued"))
	classify := `{"contents":[{"role":"user","parts":[{"text":"hello"}]}],"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{"complexity_reasoning":{},"complexity_score":{}}}}}`
	nextSpeaker := `{"contents":[{"role":"user","parts":[{"text":"who"}]}],"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":{"properties":{"reasoning":{},"next_speaker":{}}}}}`
	answer := func(body string) map[string]any {
		t.Helper()
		resp := post(t, context.Background(), g.URL()+"/v1beta/models/gemini-3.5-flash-lite:generateContent", body)
		defer resp.Body.Close()
		var m map[string]any
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&m) != nil {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return m
	}
	for _, tc := range []struct {
		body string
		key  string
	}{{classify, "complexity_score"}, {nextSpeaker, "next_speaker"}} {
		c := candidate(answer(tc.body))
		var got map[string]any
		if err := json.Unmarshal([]byte(partsText(c)), &got); err != nil || got[tc.key] == nil || c["finishReason"] != "STOP" {
			t.Errorf("side call answered %q (finishReason %v), want JSON with %s", partsText(c), c["finishReason"], tc.key)
		}
	}
	if got := candidate(answer(classify)); partsText(got) == "queued" {
		t.Error("a side call took the queued reply")
	}
	if got := partsText(candidate(answer(`{"contents":[{"role":"user","parts":[{"text":"plain"}]}]}`))); got != "queued" {
		t.Errorf("plain generateContent answered %q, want the queued reply", got)
	}
	if n, s := len(g.Turns()), len(g.SideCalls()); n != 1 || s != 3 {
		t.Errorf("%d turns and %d side calls recorded, want 1 and 3", n, s)
	}
	resp := post(t, context.Background(), g.URL()+"/v1beta/models/m:countTokens", `{"contents":[]}`)
	var ct map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&ct)
	resp.Body.Close()
	if resp.StatusCode != 200 || ct["totalTokens"] == nil {
		t.Errorf("countTokens: %d %v", resp.StatusCode, ct)
	}
}

func TestGeminiToolFailuresAndRoutes(t *testing.T) {
	g := fakemodel.NewGemini()
	defer g.Close()
	call := fakemodel.Tool("read_file", `{"file_path":"/w/notes.txt"}`)
	call.Tool.ID = "call_9"
	g.Push(call, fakemodel.GeminiQuotaExhausted(), fakemodel.GeminiServerError())
	stream := g.URL() + "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"

	resp := post(t, context.Background(), stream, geminiBody)
	chunks := geminiChunks(t, resp.Body)
	resp.Body.Close()
	if len(chunks) != 1 {
		t.Fatalf("tool answer: %d chunks, want 1", len(chunks))
	}
	c := candidate(chunks[0])
	parts, _ := get(c, "content", "parts").([]any)
	fc, _ := parts[0].(map[string]any)["functionCall"].(map[string]any)
	if fc["name"] != "read_file" || fc["id"] != "call_9" || get(fc, "args", "file_path") != "/w/notes.txt" || c["finishReason"] != "STOP" {
		t.Errorf("functionCall chunk %v", chunks[0])
	}
	for _, tc := range []struct {
		status int
		code   string
	}{{429, "RESOURCE_EXHAUSTED"}, {500, "INTERNAL"}} {
		resp := post(t, context.Background(), stream, geminiBody)
		var body struct {
			Error struct {
				Code   int    `json:"code"`
				Status string `json:"status"`
			} `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || body.Error.Status != tc.code || body.Error.Code != tc.status {
			t.Errorf("got %d %+v, want %d %s", resp.StatusCode, body, tc.status, tc.code)
		}
	}
	// The default reply again once the queue is empty.
	resp = post(t, context.Background(), stream, geminiBody)
	var text string
	for _, ch := range geminiChunks(t, resp.Body) {
		text += partsText(candidate(ch))
	}
	resp.Body.Close()
	if text != "pong: again" {
		t.Errorf("after the queue: %q, want the echo", text)
	}

	for _, path := range []string{"/v1beta/models", "/v1/models/m:generateContent", "/v1beta/models/m:unknownMethod"} {
		resp := post(t, context.Background(), g.URL()+path, `{}`)
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("POST %s: %d, want 404", path, resp.StatusCode)
		}
	}
	if resp, err := http.Get(g.URL() + "/v1beta/models/m:generateContent"); err != nil || resp.StatusCode != 404 {
		t.Errorf("GET of a model path: %v %v, want 404", resp, err)
	} else {
		resp.Body.Close()
	}
	if n := len(g.Turns()); n != 4 {
		t.Errorf("%d turns, want 4 (404s are none)", n)
	}
	if n := len(g.Requests()); n != 8 {
		t.Errorf("%d requests recorded, want 8", n)
	}
}

// TestGeminiHoldAndAwait: a held stream sends "held " and waits for
// Release; AwaitTurns returns once the turns came in.
func TestGeminiHoldAndAwait(t *testing.T) {
	g := fakemodel.NewGemini()
	defer g.Close()
	gate := fakemodel.NewGate()
	g.Push(fakemodel.Held(gate))
	awaited := make(chan int, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		reqs, _ := g.AwaitTurns(ctx, 1)
		awaited <- len(reqs)
	}()
	got := make(chan string, 1)
	go func() {
		resp, err := http.Post(g.URL()+"/v1beta/models/m:streamGenerateContent?alt=sse", "application/json", strings.NewReader(geminiBody))
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	select {
	case <-gate.Arrived():
	case <-time.After(deadline):
		t.Fatal("the held request did not arrive")
	}
	select {
	case n := <-awaited:
		if n != 1 {
			t.Errorf("AwaitTurns returned %d requests, want 1", n)
		}
	case <-time.After(deadline):
		t.Fatal("AwaitTurns did not return")
	}
	gate.Release()
	select {
	case body := <-got:
		var text string
		for _, ch := range geminiChunks(t, strings.NewReader(body)) {
			text += partsText(candidate(ch))
		}
		if text != "held pong: again" {
			t.Errorf("held answer %q, want %q", text, "held pong: again")
		}
	case <-time.After(deadline):
		t.Fatal("the held answer did not finish after Release")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := g.AwaitTurns(ctx, 2); err == nil {
		t.Error("AwaitTurns for a turn that never comes returned no error")
	}
}

func TestGeminiMethod(t *testing.T) {
	for _, tc := range []struct {
		path, model, method string
		ok                  bool
	}{
		{"/v1beta/models/gemini-2.5-pro:streamGenerateContent", "gemini-2.5-pro", "streamGenerateContent", true},
		{"/v1beta/models/m:generateContent", "m", "generateContent", true},
		{"/v1beta/models/m", "", "", false},
		{"/v1beta/models/:generateContent", "", "", false},
		{"/v1beta/models/a/b:generateContent", "", "", false},
		{"/v1/models/m:generateContent", "", "", false},
	} {
		m, meth, ok := fakemodel.GeminiMethod(tc.path)
		if m != tc.model || meth != tc.method || ok != tc.ok {
			t.Errorf("GeminiMethod(%q) = %q, %q, %t; want %q, %q, %t", tc.path, m, meth, ok, tc.model, tc.method, tc.ok)
		}
	}
}
