//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

const codexVersion = "0.169.0"

// codex is one `codex app-server` process (real-clis.md §2): JSON-RPC lines
// without a "jsonrpc" member on output.
type codex struct {
	p    *peer
	home string
	cwd  string

	mu          sync.Mutex
	initialized bool
	threads     map[string]*codexThread // loaded in this process
	active      *codexTurn
}

type codexThread struct {
	id, cwd   string
	createdAt time.Time
	rollout   string   // created at the first turn (§2.2)
	history   []string // user texts
	started   bool     // the rollout exists
}

type codexTurn struct {
	id, thread string
	cancel     chan struct{}
}

func runCodex(p *peer, args []string) int {
	if len(args) == 0 || args[0] != "app-server" || (len(args) > 1 && strings.Join(args[1:], " ") != "--listen stdio://") {
		fmt.Fprintln(os.Stderr, "fakecli codex: only `app-server` on stdio is imitated")
		return 2
	}
	home := os.Getenv("CODEX_HOME")
	if home == "" {
		home = filepath.Join(os.Getenv("HOME"), ".codex")
	}
	if _, err := os.Stat(home); err != nil {
		fmt.Fprintf(os.Stderr, "WARNING: proceeding, even though we could not create PATH aliases: CODEX_HOME points to %q, but that path does not exist\n", home)
		_ = os.MkdirAll(home, 0o700)
	}
	cwd, _ := os.Getwd()
	c := &codex{p: p, home: home, cwd: cwd, threads: map[string]*codexThread{}}
	p.logCall(map[string]any{"argv": args})
	p.onTerm = func() { p.exit(0) } // SIGTERM mid-turn → exit 0 (§2.1)
	p.listen()
	// The stderr log noise real Codex prints; drivers must not parse it.
	fmt.Fprintln(os.Stderr, "ERROR codex_app_server: fakecli has no bubblewrap either")
	r := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			c.message(line)
		}
		if err != nil {
			return 0 // stdin EOF → exit 0 at once, even mid-turn (§2.1)
		}
	}
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (c *codex) reply(id json.RawMessage, result any) {
	c.p.emit(map[string]any{"id": id, "result": result})
}

func (c *codex) fail(id json.RawMessage, msg string) {
	c.p.emit(map[string]any{"id": id, "error": rpcError{Code: -32600, Message: msg}})
}

// notify writes a notification with its members in the real app server's
// order: method first, which is what the agent's line peeks rely on.
func (c *codex) notify(method string, params any) {
	c.p.emit(codexNotification{Method: method, Params: params, EmittedAtMs: time.Now().UnixMilli()})
}

type codexNotification struct {
	Method      string `json:"method"`
	Params      any    `json:"params"`
	EmittedAtMs int64  `json:"emittedAtMs"`
}

var codexMethods = []string{"initialize", "thread/start", "thread/resume", "thread/turns/list", "turn/start", "turn/interrupt"}

func (c *codex) message(line []byte) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		c.p.emit(map[string]any{"id": nil, "error": rpcError{Code: -32700, Message: "Parse error: " + err.Error()}})
		return
	}
	if m.ID == nil || string(m.ID) == "null" {
		return // a notification (initialized) or a response to us
	}
	if m.Method == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.Method != "initialize" && !c.initialized {
		c.fail(m.ID, "Not initialized")
		return
	}
	switch m.Method {
	case "initialize":
		if c.initialized {
			c.fail(m.ID, "Already initialized")
			return
		}
		c.initialized = true
		var p struct {
			ClientInfo struct{ Name, Version string } `json:"clientInfo"`
		}
		_ = json.Unmarshal(m.Params, &p)
		c.reply(m.ID, map[string]any{"userAgent": fmt.Sprintf("%s/%s (fakecli) dumb (%s; %s)", p.ClientInfo.Name, codexVersion, p.ClientInfo.Name, p.ClientInfo.Version),
			"codexHome": c.home, "platformFamily": "unix", "platformOs": "linux"})
	case "thread/start":
		var p struct{ Cwd string }
		_ = json.Unmarshal(m.Params, &p)
		if p.Cwd == "" {
			p.Cwd = c.cwd
		}
		now := time.Now().UTC()
		t := &codexThread{id: uuidV7(), cwd: p.Cwd, createdAt: now}
		t.rollout = filepath.Join(c.home, "sessions", now.Format("2006/01/02"),
			"rollout-"+now.Format("2006-01-02T15-04-05")+"-"+t.id+".jsonl")
		c.threads[t.id] = t
		c.reply(m.ID, c.threadResult(t))
		c.notify("thread/started", map[string]any{"thread": c.threadJSON(t)})
	case "thread/resume":
		var p struct {
			ThreadID string `json:"threadId"`
			Cwd      string `json:"cwd"`
		}
		_ = json.Unmarshal(m.Params, &p)
		t, err := c.load(p.ThreadID)
		c.p.logCall(map[string]any{"resume": p.ThreadID, "found": err == nil})
		if err != nil {
			c.fail(m.ID, err.Error())
			return
		}
		if p.Cwd != "" {
			t.cwd = p.Cwd
		}
		c.reply(m.ID, c.threadResult(t))
	case "account/read", "account/login/start":
		c.account(m.ID, m.Method, m.Params)
	case "thread/turns/list":
		// The newest turn without its items (§2.2): the turn in flight,
		// or none (this peer keeps no finished turns).
		var p struct {
			ThreadID string `json:"threadId"`
		}
		_ = json.Unmarshal(m.Params, &p)
		data := []map[string]any{}
		if c.active != nil && c.active.thread == p.ThreadID {
			data = append(data, map[string]any{"id": c.active.id, "items": []any{}, "itemsView": "notLoaded", "status": "inProgress"})
		}
		c.reply(m.ID, map[string]any{"data": data, "nextCursor": nil, "backwardsCursor": nil})
	case "turn/start":
		c.turnStart(m.ID, m.Params)
	case "turn/interrupt":
		var p struct {
			ThreadID string `json:"threadId"`
			TurnID   string `json:"turnId"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if c.active == nil || c.active.id != p.TurnID || c.active.thread != p.ThreadID || c.active.cancel == nil {
			c.fail(m.ID, "no active turn to interrupt")
			return
		}
		// {} first, then the turn's own goroutine ends it (§2.2).
		c.reply(m.ID, map[string]any{})
		close(c.active.cancel)
		c.active.cancel = nil
	default:
		c.fail(m.ID, fmt.Sprintf("Invalid request: unknown variant `%s`, expected one of `%s`", m.Method, strings.Join(codexMethods, "`, `")))
	}
}

// load finds a thread by its rollout under CODEX_HOME (§2.3).
func (c *codex) load(id string) (*codexThread, error) {
	if t, ok := c.threads[id]; ok {
		return t, nil
	}
	if id == "" || strings.ContainsAny(id, "/*?[\\") {
		return nil, fmt.Errorf("invalid thread id: %q", id)
	}
	matches, _ := filepath.Glob(filepath.Join(c.home, "sessions", "*", "*", "*", "rollout-*-"+id+".jsonl"))
	if len(matches) == 0 {
		return nil, fmt.Errorf("no rollout found for thread id %s", id)
	}
	t := &codexThread{id: id, cwd: c.cwd, rollout: matches[0], started: true, createdAt: time.Now().UTC()}
	_ = readJSONL(t.rollout, func(l []byte) {
		var r struct {
			Type    string `json:"type"`
			Payload struct {
				Type    string `json:"type"`
				Role    string `json:"role"`
				Cwd     string `json:"cwd"`
				Content []struct {
					Type, Text string
				} `json:"content"`
			} `json:"payload"`
		}
		if json.Unmarshal(l, &r) != nil {
			return
		}
		if r.Type == "response_item" && r.Payload.Type == "message" && r.Payload.Role == "user" {
			for _, b := range r.Payload.Content {
				if b.Type == "input_text" {
					t.history = append(t.history, b.Text)
				}
			}
		}
	})
	c.threads[id] = t
	return t, nil
}

func (c *codex) threadJSON(t *codexThread) map[string]any {
	path := any(t.rollout)
	return map[string]any{"id": t.id, "sessionId": t.id, "forkedFromId": nil, "parentThreadId": nil, "preview": "",
		"ephemeral": false, "historyMode": "paginated", "modelProvider": "fake", "model": "fake-model",
		"createdAt": t.createdAt.Unix(), "updatedAt": t.createdAt.Unix(), "status": map[string]string{"type": "idle"},
		"path": path, "cwd": t.cwd, "cliVersion": codexVersion, "originator": "fakecli", "source": "vscode", "turns": []any{}}
}

func (c *codex) threadResult(t *codexThread) map[string]any {
	return map[string]any{"thread": c.threadJSON(t), "model": "fake-model", "modelProvider": "fake", "cwd": t.cwd,
		"approvalPolicy": "never", "sandbox": map[string]any{"type": "readOnly", "networkAccess": false}}
}

func (c *codex) rollout(t *codexThread, typ string, payload map[string]any) {
	if !t.started {
		t.started = true
		c.rollout(t, "session_meta", map[string]any{"session_id": t.id, "id": t.id, "cwd": t.cwd, "originator": "fakecli",
			"cli_version": codexVersion, "source": "vscode", "model_provider": "fake", "history_mode": "paginated"})
	}
	_ = appendJSONL(t.rollout, map[string]any{"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "type": typ, "payload": payload})
}

// turnStart answers turn/start before turn/started (§2.4) and runs the turn
// in its own goroutine, so that turn/interrupt can reach it. Called with mu.
func (c *codex) turnStart(id json.RawMessage, params json.RawMessage) {
	var p struct {
		ThreadID string `json:"threadId"`
		Input    []struct {
			Type, Text string
		} `json:"input"`
	}
	_ = json.Unmarshal(params, &p)
	t, ok := c.threads[p.ThreadID]
	if !ok {
		c.fail(id, "thread not found: "+p.ThreadID) // call thread/resume first (§2.2)
		return
	}
	if c.active != nil {
		c.fail(id, "a turn is already active on thread "+p.ThreadID)
		return
	}
	var texts []string
	for _, in := range p.Input {
		if in.Type == "text" {
			texts = append(texts, in.Text)
		}
	}
	text := strings.Join(texts, "\n")
	turn := &codexTurn{id: uuidV7(), thread: t.id, cancel: make(chan struct{})}
	c.active = turn
	c.reply(id, map[string]any{"turn": map[string]any{"id": turn.id, "rootTurnId": turn.id, "items": []any{}, "itemsView": "notLoaded",
		"status": "inProgress", "error": nil, "startedAt": nil, "completedAt": nil, "durationMs": nil}})
	earlier := append([]string(nil), t.history...)
	t.history = append(t.history, text)
	c.rollout(t, "event_msg", map[string]any{"type": "task_started", "turn_id": turn.id, "model_context_window": 258400})
	c.rollout(t, "turn_context", map[string]any{"cwd": t.cwd, "approval_policy": "never", "model": "fake-model"})
	c.rollout(t, "response_item", map[string]any{"type": "message", "role": "user", "content": []map[string]string{{"type": "input_text", "text": text}}})
	go c.runTurn(t, turn, text, earlier, turn.cancel)
}

func (c *codex) runTurn(t *codexThread, turn *codexTurn, text string, earlier []string, cancel chan struct{}) {
	base := map[string]any{"threadId": t.id, "turnId": turn.id}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	started := time.Now()
	c.notify("thread/status/changed", map[string]any{"threadId": t.id, "status": map[string]any{"type": "active", "activeFlags": []string{}}})
	c.notify("turn/started", map[string]any{"threadId": t.id, "turn": map[string]any{"id": turn.id, "status": "inProgress", "startedAt": started.Unix()}})
	user := map[string]any{"type": "userMessage", "id": uuidV7(), "content": []map[string]any{{"type": "text", "text": text, "text_elements": []any{}}}}
	c.notify("item/started", with("item", user))
	c.notify("item/completed", with("item", user))

	sp := parseSpecial(text)
	reply := "pong: " + text
	switch sp.kind {
	case "exit":
		c.p.exit(sp.n)
	case "stderr":
		fmt.Fprintln(os.Stderr, sp.arg)
	case "ignore-term":
		c.p.ignoreTerm.Store(true)
	case "history":
		reply = historyReply(earlier)
	case "env", "file":
		reply = envReply(sp)
	case "limit":
		// A 429 usage_limit_reached with exhausted windows (§2.5).
		reset := time.Now().Add(time.Hour).Unix()
		c.notify("account/rateLimits/updated", map[string]any{"rateLimits": map[string]any{"limitId": "codex",
			"primary": map[string]any{"usedPercent": 100, "windowDurationMins": 300, "resetsAt": reset}, "secondary": nil}})
		e := map[string]any{"message": "You’ve hit your usage limit.", "codexErrorInfo": "usageLimitExceeded", "additionalDetails": nil}
		c.notify("error", with("error", e, "willRetry", false))
		c.end(t, turn, "failed", e, nil, started)
		return
	}
	msgID := "msg_fake_" + uuidV4()[:8]
	c.notify("item/started", with("item", map[string]any{"type": "agentMessage", "id": msgID, "text": ""}))
	var deltas []string
	switch sp.kind {
	case "flood":
		deltas = floodPieces(sp.n)
		reply = fmt.Sprintf("flooded %d bytes", sp.n)
	case "slow":
		tick := time.NewTicker(slowTick)
		defer tick.Stop()
		reply = ""
		for i := 0; i < slowMax; i++ {
			select {
			case <-cancel:
				c.end(t, turn, "interrupted", nil, nil, started)
				return
			case <-tick.C:
				d := fmt.Sprintf("tick%d ", i)
				reply += d
				c.notify("item/agentMessage/delta", with("itemId", msgID, "delta", d))
			}
		}
	default:
		half := len(reply) / 2
		deltas = []string{reply[:half], reply[half:]}
	}
	for _, d := range deltas {
		select {
		case <-cancel:
			c.end(t, turn, "interrupted", nil, nil, started)
			return
		default:
		}
		c.notify("item/agentMessage/delta", with("itemId", msgID, "delta", d))
	}
	item := map[string]any{"type": "agentMessage", "id": msgID, "text": reply, "phase": nil}
	c.notify("item/completed", with("item", item))
	c.notify("thread/tokenUsage/updated", with("tokenUsage", map[string]any{"total": map[string]int{"totalTokens": 2, "inputTokens": 1, "outputTokens": 1},
		"last": map[string]int{"totalTokens": 2, "inputTokens": 1, "outputTokens": 1}, "modelContextWindow": 258400}))
	c.notify("account/rateLimits/updated", map[string]any{"rateLimits": map[string]any{"limitId": "codex", "primary": nil, "secondary": nil}})
	c.mu.Lock()
	c.rollout(t, "response_item", map[string]any{"type": "message", "role": "assistant", "content": []map[string]string{{"type": "output_text", "text": reply}}})
	usage := map[string]int{"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1, "reasoning_output_tokens": 0, "total_tokens": 2}
	c.rollout(t, "event_msg", map[string]any{"type": "token_count", "info": map[string]any{"total_token_usage": usage,
		"last_token_usage": usage, "model_context_window": 258400}, "rate_limits": nil})
	c.mu.Unlock()
	c.end(t, turn, "completed", nil, item, started)
}

// end is thread/status/changed idle, then turn/completed. An interrupted
// turn drops its partial message (§2.2).
func (c *codex) end(t *codexThread, turn *codexTurn, status string, turnErr map[string]any, item map[string]any, started time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.active == turn {
		c.active = nil
	}
	items := []any{}
	if item != nil {
		items = append(items, item)
	}
	c.notify("thread/status/changed", map[string]any{"threadId": t.id, "status": map[string]string{"type": "idle"}})
	c.notify("turn/completed", map[string]any{"threadId": t.id, "turn": map[string]any{"id": turn.id, "items": items, "itemsView": "summary",
		"status": status, "error": turnErr, "startedAt": started.Unix(), "completedAt": time.Now().Unix(),
		"durationMs": time.Since(started).Milliseconds()}})
}
