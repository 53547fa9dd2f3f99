//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ACP error codes: JSON-RPC's, and ACP's "resource not found".
const (
	acpInvalidRequest = -32600
	acpMethodNotFound = -32601
	acpInvalidParams  = -32602
	acpNotFound       = -32002
)

// grok is one `grok agent stdio` process speaking the Agent Client Protocol
// (JSON-RPC 2.0 with the "jsonrpc" member, as Gemini CLI's ACP agent does,
// real-clis.md §3). Sessions live under $GROK_HOME (default ~/.grok) as
// sessions/<url-encoded cwd>/<session id>/updates.jsonl, the layout xAI
// documents; no real grok binary was measured.
type grok struct {
	p    *peer
	home string

	mu          sync.Mutex
	initialized bool
	sessions    map[string]*grokSession // loaded in this process
}

type grokSession struct {
	id, dir string
	history []string          // user texts
	updates []json.RawMessage // what session/load replays
	cancel  chan struct{}     // non-nil while a prompt runs
}

func runGrok(p *peer, args []string) int {
	var rest []string
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			rest = append(rest, a) // --always-approve, --no-leader: accepted, ignored
		}
	}
	if len(rest) != 2 || rest[0] != "agent" || rest[1] != "stdio" {
		fmt.Fprintln(os.Stderr, "fakecli grok: only `agent stdio` is imitated")
		return 2
	}
	home := os.Getenv("GROK_HOME")
	if home == "" {
		home = filepath.Join(os.Getenv("HOME"), ".grok")
	}
	g := &grok{p: p, home: home, sessions: map[string]*grokSession{}}
	p.logCall(map[string]any{"argv": args})
	p.listen() // SIGTERM and SIGINT: the process dies of the signal
	r := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			g.message(line)
		}
		if err != nil {
			return 0 // stdin EOF ends the agent
		}
	}
}

func (g *grok) reply(id json.RawMessage, result any) {
	g.p.emit(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func (g *grok) fail(id json.RawMessage, code int, msg string) {
	g.p.emit(map[string]any{"jsonrpc": "2.0", "id": id, "error": rpcError{Code: code, Message: msg}})
}

func (g *grok) update(sessionID string, upd map[string]any) json.RawMessage {
	params := marshalLine(map[string]any{"sessionId": sessionID, "update": upd})
	g.p.emit(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": json.RawMessage(params)})
	return params
}

func (g *grok) message(line []byte) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		g.p.emit(map[string]any{"jsonrpc": "2.0", "id": nil, "error": rpcError{Code: -32700, Message: "Parse error"}})
		return
	}
	notification := m.ID == nil || string(m.ID) == "null"
	if m.Method == "" {
		return // a response to one of our requests
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if notification {
		if m.Method == "session/cancel" {
			var p struct {
				SessionID string `json:"sessionId"`
			}
			_ = json.Unmarshal(m.Params, &p)
			if s := g.sessions[p.SessionID]; s != nil && s.cancel != nil {
				close(s.cancel)
				s.cancel = nil
			}
		}
		return
	}
	if m.Method != "initialize" && !g.initialized {
		g.fail(m.ID, acpInvalidRequest, "the agent is not initialized")
		return
	}
	switch m.Method {
	case "initialize":
		g.initialized = true
		g.reply(m.ID, map[string]any{"protocolVersion": 1, "authMethods": []any{},
			"agentInfo":         map[string]string{"name": "grok", "title": "Grok Build (fakecli)", "version": "0.0.0-fakecli"},
			"agentCapabilities": map[string]any{"loadSession": true, "promptCapabilities": map[string]bool{"image": false, "audio": false, "embeddedContext": false}}})
	case "session/new":
		var p struct {
			Cwd string `json:"cwd"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if !filepath.IsAbs(p.Cwd) {
			g.fail(m.ID, acpInvalidParams, "cwd must be an absolute path")
			return
		}
		s := &grokSession{id: uuidV4()}
		s.dir = filepath.Join(g.home, "sessions", url.PathEscape(p.Cwd), s.id)
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			g.fail(m.ID, -32603, err.Error())
			return
		}
		_ = os.WriteFile(filepath.Join(s.dir, "summary.json"), marshalLine(map[string]string{"id": s.id, "cwd": p.Cwd}), 0o600)
		g.sessions[s.id] = s
		g.reply(m.ID, map[string]string{"sessionId": s.id})
	case "session/load":
		var p struct {
			SessionID string `json:"sessionId"`
		}
		_ = json.Unmarshal(m.Params, &p)
		s, err := g.load(p.SessionID)
		g.p.logCall(map[string]any{"resume": p.SessionID, "found": err == nil})
		if err != nil {
			g.fail(m.ID, acpNotFound, err.Error())
			return
		}
		// The history replays as session/update before the answer (§3).
		for _, u := range s.updates {
			g.p.emit(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": u})
		}
		g.reply(m.ID, nil)
	case "session/prompt":
		g.prompt(m.ID, m.Params)
	case "session/cancel":
		g.fail(m.ID, acpMethodNotFound, "Method not found: session/cancel is a notification")
	default:
		g.fail(m.ID, acpMethodNotFound, "Method not found: "+m.Method)
	}
}

func (g *grok) load(id string) (*grokSession, error) {
	if s, ok := g.sessions[id]; ok {
		return s, nil
	}
	if id == "" || strings.ContainsAny(id, "/*?[\\") {
		return nil, fmt.Errorf("Session not found: %s", id)
	}
	matches, _ := filepath.Glob(filepath.Join(g.home, "sessions", "*", id))
	if len(matches) == 0 {
		return nil, fmt.Errorf("Session not found: %s", id)
	}
	s := &grokSession{id: id, dir: matches[0]}
	_ = readJSONL(filepath.Join(s.dir, "updates.jsonl"), func(l []byte) {
		s.updates = append(s.updates, append(json.RawMessage(nil), l...))
		var u struct {
			Update struct {
				SessionUpdate string `json:"sessionUpdate"`
				Content       struct{ Text string }
			} `json:"update"`
		}
		if json.Unmarshal(l, &u) == nil && u.Update.SessionUpdate == "user_message_chunk" {
			s.history = append(s.history, u.Update.Content.Text)
		}
	})
	g.sessions[id] = s
	return s, nil
}

// record keeps an update for a later session/load. Called with mu.
func (g *grok) record(s *grokSession, params json.RawMessage) {
	s.updates = append(s.updates, params)
	_ = appendJSONL(filepath.Join(s.dir, "updates.jsonl"), params)
}

// prompt runs a turn in its own goroutine so that session/cancel can reach
// it. Called with mu.
func (g *grok) prompt(id json.RawMessage, params json.RawMessage) {
	var p struct {
		SessionID string `json:"sessionId"`
		Prompt    []struct {
			Type, Text string
		} `json:"prompt"`
	}
	_ = json.Unmarshal(params, &p)
	s, ok := g.sessions[p.SessionID]
	if !ok {
		g.fail(id, acpNotFound, "Session not found: "+p.SessionID)
		return
	}
	if s.cancel != nil {
		g.fail(id, acpInvalidRequest, "a prompt is already running in this session")
		return
	}
	var texts []string
	for _, b := range p.Prompt {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	text := strings.Join(texts, "\n")
	earlier := append([]string(nil), s.history...)
	s.history = append(s.history, text)
	g.record(s, marshalLine(map[string]any{"sessionId": s.id, "update": map[string]any{"sessionUpdate": "user_message_chunk",
		"content": map[string]string{"type": "text", "text": text}}}))
	s.cancel = make(chan struct{})
	go g.runPrompt(s, id, text, earlier, s.cancel)
}

func (g *grok) chunk(s *grokSession, text string) json.RawMessage {
	return g.update(s.id, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "text", "text": text}})
}

func (g *grok) runPrompt(s *grokSession, id json.RawMessage, text string, earlier []string, cancel chan struct{}) {
	finish := func(stop string, reply string) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if stop == "end_turn" {
			g.record(s, marshalLine(map[string]any{"sessionId": s.id, "update": map[string]any{"sessionUpdate": "agent_message_chunk",
				"content": map[string]string{"type": "text", "text": reply}}}))
		}
		if s.cancel == cancel {
			s.cancel = nil
		}
		g.reply(id, map[string]string{"stopReason": stop})
	}
	sp := parseSpecial(text)
	reply := "pong: " + text
	var pieces []string
	switch sp.kind {
	case "exit":
		g.p.exit(sp.n)
	case "stderr":
		fmt.Fprintln(os.Stderr, sp.arg)
	case "ignore-term":
		g.p.ignoreTerm.Store(true)
	case "history":
		reply = historyReply(earlier)
	case "flood":
		pieces = floodPieces(sp.n)
		reply = fmt.Sprintf("flooded %d bytes", sp.n)
	case "slow":
		tick := time.NewTicker(slowTick)
		defer tick.Stop()
		for i := 0; i < slowMax; i++ {
			select {
			case <-cancel:
				finish("cancelled", "")
				return
			case <-tick.C:
				g.chunk(s, fmt.Sprintf("tick%d ", i))
			}
		}
		finish("end_turn", "slow")
		return
	}
	if pieces == nil {
		pieces = []string{reply} // one chunk: ACP has no message-complete update to reassemble from
	}
	for _, piece := range pieces {
		select {
		case <-cancel:
			finish("cancelled", "")
			return
		default:
		}
		g.chunk(s, piece)
	}
	finish("end_turn", reply)
}
