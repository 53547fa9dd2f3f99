package fakemodel

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"
)

// GeminiModelsPrefix is the start of every Gemini model path:
// /v1beta/models/{model}:{method} (real-clis.md §3).
const GeminiModelsPrefix = "/v1beta/models/"

// Gemini is a fake Gemini API (real-clis.md §3, §6.3), which Gemini CLI
// talks to when GOOGLE_GEMINI_BASE_URL points at it (with GEMINI_API_KEY
// set to anything):
//
//   - POST /v1beta/models/{m}:streamGenerateContent?alt=sse answers the
//     next queued Reply as "data:" candidate chunks, the last one with
//     finishReason STOP and usageMetadata;
//   - POST /v1beta/models/{m}:generateContent answers in one JSON document.
//     When generationConfig.responseMimeType asks for JSON, this is a side
//     call of the CLI, not a turn: the "auto" router's classifier gets
//     {"complexity_reasoning":…,"complexity_score":10} and a next-speaker
//     check gets {"next_speaker":"user"}; neither takes a queued Reply;
//   - POST /v1beta/models/{m}:countTokens answers a token count.
//
// Any other route is a 404, recorded too. Path keeps the model name; use
// Turns or AwaitTurns for the turn requests.
type Gemini struct{ server }

// NewGemini starts a fake Gemini server on 127.0.0.1. Close it when done.
func NewGemini() *Gemini {
	g := &Gemini{server{log: newLog()}}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	return g
}

// GeminiMethod splits a Gemini model path into its model and method
// ("gemini-2.5-pro", "streamGenerateContent"); ok is false for any other
// path.
func GeminiMethod(path string) (model, method string, ok bool) {
	rest, found := strings.CutPrefix(path, GeminiModelsPrefix)
	if !found {
		return "", "", false
	}
	model, method, ok = strings.Cut(rest, ":")
	if !ok || model == "" || strings.Contains(model, "/") || method == "" {
		return "", "", false
	}
	return model, method, true
}

// geminiIsTurn reports whether r is a model request that took a queued
// Reply.
func geminiIsTurn(r Request) bool {
	_, m, ok := GeminiMethod(r.Path)
	return ok && r.Method == http.MethodPost && (m == "streamGenerateContent" || (m == "generateContent" && !geminiSide(r)))
}

// geminiSide reports whether r is a JSON-mode generateContent: a side call
// (router classifier, next-speaker check) that takes no queued Reply.
func geminiSide(r Request) bool {
	_, m, ok := GeminiMethod(r.Path)
	if !ok || m != "generateContent" {
		return false
	}
	_, _, jsonMode, _ := parseGemini(r.Body)
	return jsonMode
}

// Turns returns the recorded model requests that took a Reply (the
// streamGenerateContent calls and plain generateContent calls), in order.
func (g *Gemini) Turns() []Request {
	var out []Request
	for _, r := range g.Requests() {
		if geminiIsTurn(r) {
			out = append(out, r)
		}
	}
	return out
}

// SideCalls returns the JSON-mode generateContent requests (the router's
// classifier and similar), which never take a queued Reply.
func (g *Gemini) SideCalls() []Request {
	var out []Request
	for _, r := range g.Requests() {
		if r.Method == http.MethodPost && geminiSide(r) {
			out = append(out, r)
		}
	}
	return out
}

// AwaitTurns waits until n turn requests (see Turns) have been recorded and
// returns them.
func (g *Gemini) AwaitTurns(ctx context.Context, n int) ([]Request, error) {
	for {
		l := g.log
		l.mu.Lock()
		var got []Request
		for _, r := range l.reqs {
			if geminiIsTurn(r) {
				got = append(got, r)
			}
		}
		wake := l.wake
		l.mu.Unlock()
		if len(got) >= n {
			return got, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return got, ctx.Err()
		}
	}
}

type geminiBody struct {
	Contents []struct {
		Role  string       `json:"role"`
		Parts []geminiPart `json:"parts"`
	} `json:"contents"`
	GenerationConfig struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	} `json:"generationConfig"`
}

type geminiPart struct {
	Text         string `json:"text"`
	Thought      bool   `json:"thought"`
	FunctionCall *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

// parseGemini reads a generateContent body. Roles are "user" and "model";
// a function call is listed by its id, or its name when it has none (Gemini
// CLI gives ids to its calls, the API does not require them). The prompt is
// the last non-thought text part of the last user content.
func parseGemini(body []byte) (hist []Message, prompt string, jsonMode bool, schema string) {
	var b geminiBody
	if json.Unmarshal(body, &b) != nil {
		return nil, "", false, ""
	}
	for _, c := range b.Contents {
		msg := Message{Role: c.Role}
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				msg.ToolCalls = append(msg.ToolCalls, firstNonEmpty(p.FunctionCall.ID, p.FunctionCall.Name))
			case p.FunctionResponse != nil:
				msg.ToolResults = append(msg.ToolResults, firstNonEmpty(p.FunctionResponse.ID, p.FunctionResponse.Name))
				msg.Outputs = append(msg.Outputs, string(p.FunctionResponse.Response))
			case p.Text != "" && !p.Thought:
				msg.Texts = append(msg.Texts, p.Text)
			}
		}
		hist = append(hist, msg)
	}
	for i := len(hist) - 1; i >= 0 && prompt == ""; i-- {
		if hist[i].Role == "user" && len(hist[i].Texts) > 0 {
			prompt = hist[i].Texts[len(hist[i].Texts)-1]
		}
	}
	gc := b.GenerationConfig
	schema = string(gc.ResponseJSONSchema)
	if schema == "" {
		schema = string(gc.ResponseSchema)
	}
	return hist, prompt, strings.Contains(strings.ToLower(gc.ResponseMimeType), "json"), schema
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (g *Gemini) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	req := Request{At: time.Now(), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	model, method, ok := GeminiMethod(r.URL.Path)
	if !ok || r.Method != http.MethodPost {
		g.record(req)
		geminiError(w, http.StatusNotFound, "NOT_FOUND", "fakemodel: no such route")
		return
	}
	req.Model = model
	var jsonMode bool
	var schema string
	req.History, req.Prompt, jsonMode, schema = parseGemini(body)
	switch method {
	case "countTokens":
		g.record(req)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"totalTokens":321}`)
	case "generateContent":
		if jsonMode {
			// A side call (real-clis.md §3): answered by its schema, never
			// from the queue, so a test's queued turns stay in order.
			text := `{"complexity_reasoning":"fakemodel: a simple request","complexity_score":10}`
			if strings.Contains(schema, "next_speaker") {
				text = `{"reasoning":"fakemodel: the model answered","next_speaker":"user"}`
			}
			req.Reply = Reply{Text: text}
			g.record(req)
			g.answerJSON(w, model, req.Reply)
			return
		}
		req.Reply = g.next()
		g.record(req)
		if !geminiFailed(w, req.Reply) {
			g.answerJSON(w, model, g.withEcho(req))
		}
	case "streamGenerateContent":
		req.Stream = true
		req.Reply = g.next()
		g.record(req)
		if !geminiFailed(w, req.Reply) {
			g.answerSSE(w, r, model, g.withEcho(req))
		}
	default:
		g.record(req)
		geminiError(w, http.StatusNotFound, "NOT_FOUND", "fakemodel: no such method "+method)
	}
}

// withEcho fills in the default answer, "pong: <prompt>".
func (g *Gemini) withEcho(req Request) Reply {
	rep := req.Reply
	if rep.Text == "" && rep.Tool == nil {
		rep.Text = "pong: " + req.Prompt
	}
	return rep
}

// geminiFailed writes rep's HTTP error, if it is one.
func geminiFailed(w http.ResponseWriter, rep Reply) bool {
	if rep.Status == 0 || rep.Status == http.StatusOK {
		return false
	}
	setHeader(w, rep.Header)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.Status)
	_, _ = io.WriteString(w, rep.Body)
	return true
}

func geminiError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": msg, "status": code}})
	_, _ = w.Write(b)
}

// geminiUsage is the usageMetadata of every answer.
var geminiUsage = map[string]any{"promptTokenCount": 321, "candidatesTokenCount": 9, "totalTokenCount": 330}

// parts are rep's content parts: one functionCall, or one text.
func geminiParts(rep Reply, n int) []any {
	if rep.Tool != nil {
		var args any = map[string]any{}
		_ = json.Unmarshal([]byte(rep.Tool.Input), &args)
		call := map[string]any{"name": rep.Tool.Name, "args": args}
		if rep.Tool.ID != "" {
			call["id"] = rep.Tool.ID
		}
		return []any{map[string]any{"functionCall": call}}
	}
	return []any{map[string]any{"text": rep.Text}}
}

func geminiChunk(model string, parts []any, last bool, n int) map[string]any {
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	out := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": fmt.Sprintf("resp_fake_%d", n)}
	if last {
		cand["finishReason"] = "STOP"
		out["usageMetadata"] = geminiUsage
	}
	return out
}

func (g *Gemini) answerJSON(w http.ResponseWriter, model string, rep Reply) {
	n := g.id()
	setHeader(w, rep.Header)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(geminiChunk(model, geminiParts(rep, n), true, n))
}

// answerSSE streams rep: text in two chunks (so a client has to join them),
// the last with finishReason STOP and usageMetadata; a tool call in one.
func (g *Gemini) answerSSE(w http.ResponseWriter, r *http.Request, model string, rep Reply) {
	n := g.id()
	setHeader(w, rep.Header)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(parts []any, last bool) {
		b, _ := json.Marshal(geminiChunk(model, parts, last, n))
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	text := func(s string) []any { return []any{map[string]any{"text": s}} }
	if rep.Hold != nil {
		send(text("held "), false)
		if !rep.Hold.hold(r.Context()) {
			return
		}
	}
	if rep.Tool != nil {
		send(geminiParts(rep, n), true)
		return
	}
	chunks := split(rep.Text)
	for i, c := range chunks {
		send(text(c), i == len(chunks)-1)
	}
}

// GeminiQuotaExhausted is an HTTP 429 RESOURCE_EXHAUSTED, the Gemini API's
// quota error.
func GeminiQuotaExhausted() Reply {
	return Reply{Status: http.StatusTooManyRequests,
		Body: `{"error":{"code":429,"message":"fake: Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`}
}

// GeminiServerError is an HTTP 500 INTERNAL.
func GeminiServerError() Reply {
	return Reply{Status: http.StatusInternalServerError,
		Body: `{"error":{"code":500,"message":"fake: internal error","status":"INTERNAL"}}`}
}
