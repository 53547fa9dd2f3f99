//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Texts Claude Code 2.1.328 prints, verbatim (real-clis.md §1.1, §1.4, §1.6).
const (
	claudeNoInput      = "Error: Input must be provided either through stdin or as a prompt argument when using --print"
	claudeNeedsVerbose = "Error: When using --print, --output-format=stream-json requires --verbose"
	claudeNotFound     = "No conversation found with session ID: "
	claudeInterrupted  = "[Request interrupted by user]"
	claudeVersion      = "2.1.328"
	claudeModel        = "claude-opus-5-5"
)

type claudeFlags struct {
	print, verbose, partial bool
	inputFormat             string
	outputFormat            string
	resume, sessionID       string
}

func parseClaudeFlags(args []string) (claudeFlags, error) {
	var f claudeFlags
	for i := 0; i < len(args); i++ {
		a := args[i]
		value := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("error: option '%s' argument missing", a)
			}
			i++
			return args[i], nil
		}
		var err error
		switch a {
		case "--print", "-p":
			f.print = true
		case "--verbose":
			f.verbose = true
		case "--include-partial-messages":
			f.partial = true
		case "--replay-user-messages":
		case "--input-format":
			f.inputFormat, err = value()
		case "--output-format":
			f.outputFormat, err = value()
		case "--resume", "-r":
			f.resume, err = value()
		case "--session-id":
			f.sessionID, err = value()
		case "--setting-sources", "--model":
			_, err = value()
		case "--permission-prompt-tool":
			// The real one takes "stdio" or an MCP tool's name; the peer
			// asks nothing, so it only checks the value is there.
			_, err = value()
		default:
			err = fmt.Errorf("error: unknown option '%s'", a)
		}
		if err != nil {
			return f, err
		}
	}
	return f, nil
}

// claudeSlug is the project directory name of a cwd (real-clis.md §1.3):
// every UTF-16 unit that is not [a-zA-Z0-9] becomes '-'; beyond 200
// characters, the first 200 plus '-' and the base-36 Java string hash.
func claudeSlug(cwd string) string {
	var units []uint16
	for _, r := range cwd {
		if r > 0xFFFF {
			r -= 0x10000
			units = append(units, uint16(0xD800+(r>>10)), uint16(0xDC00+(r&0x3FF)))
		} else {
			units = append(units, uint16(r))
		}
	}
	var b strings.Builder
	var h int32
	for _, u := range units {
		h = h*31 + int32(u)
		if u < 0x80 && (u >= 'a' && u <= 'z' || u >= 'A' && u <= 'Z' || u >= '0' && u <= '9') {
			b.WriteByte(byte(u))
		} else {
			b.WriteByte('-')
		}
	}
	slug := b.String()
	if len(slug) <= 200 {
		return slug
	}
	abs := int64(h)
	if abs < 0 {
		abs = -abs
	}
	return slug[:200] + "-" + strconv.FormatInt(abs, 36)
}

// claude is one --print stream-json process.
type claude struct {
	p        *peer
	flags    claudeFlags
	cwd      string
	sid      string
	file     string   // transcript path
	history  []string // user texts of the conversation so far
	lastErr  bool     // the last result had is_error:true
	queue    chan string
	stopping atomic.Bool // SIGINT: finish the turn, then exit 0

	mu     sync.Mutex
	cancel chan struct{} // closed to interrupt the running turn
	queued int           // user messages read whose turn has not begun
	// cancelNext: an interrupt came while no turn ran and a message was
	// queued; that message's turn begins cancelled. Claude Code takes a
	// control request in stdin order: an interrupt right after a message
	// aborts its turn, even before the model request (TestRealInterruptEarly
	// in agent/drivers).
	cancelNext bool
}

func runClaude(p *peer, args []string) int {
	if len(args) > 0 && args[0] == "setup-token" {
		return setupToken(p)
	}
	flags, err := parseClaudeFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if !flags.print || flags.inputFormat != "stream-json" || flags.outputFormat != "stream-json" {
		fmt.Fprintln(os.Stderr, "fakecli claude: only --print --input-format stream-json --output-format stream-json is imitated")
		return 2
	}
	if !flags.verbose {
		fmt.Fprintln(os.Stderr, claudeNeedsVerbose)
		return 1
	}
	// R-TR-3: a terminal on stdin is refused before any frame.
	if _, err := unix.IoctlGetTermios(0, unix.TCGETS); err == nil {
		fmt.Fprintln(os.Stderr, claudeNoInput)
		return 1
	}
	config := os.Getenv("CLAUDE_CONFIG_DIR")
	if config == "" {
		if os.Getenv("HOME") == "" {
			fmt.Fprintln(os.Stderr, "fakecli claude: neither CLAUDE_CONFIG_DIR nor HOME is set")
			return 2
		}
		config = filepath.Join(os.Getenv("HOME"), ".claude")
	}
	cwd, _ := os.Getwd()
	if phys, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = phys // the physical path names the project (real-clis.md §1.3)
	}
	c := &claude{p: p, flags: flags, cwd: cwd, queue: make(chan string, 256)}
	p.logCall(map[string]any{"argv": args, "resume": flags.resume})
	switch {
	case flags.resume != "":
		matches, _ := filepath.Glob(filepath.Join(config, "projects", "*", flags.resume+".jsonl"))
		if len(matches) == 0 || strings.ContainsAny(flags.resume, "/*?[") {
			// One frame, the same text on stderr, exit 1 (real-clis.md §1.4).
			msg := claudeNotFound + flags.resume
			p.emit(map[string]any{"type": "result", "subtype": "error_during_execution", "is_error": true, "num_turns": 0,
				"session_id": flags.resume, "errors": []string{msg}, "uuid": uuidV4()})
			fmt.Fprintln(os.Stderr, msg)
			return 1
		}
		// Appended to where it is, even from another cwd (§1.4).
		c.sid, c.file = flags.resume, matches[0]
		_ = readJSONL(c.file, func(l []byte) {
			var r struct {
				Type    string `json:"type"`
				Message struct {
					Content json.RawMessage `json:"content"`
				} `json:"message"`
			}
			if json.Unmarshal(l, &r) == nil && r.Type == "user" {
				if t := contentText(r.Message.Content); t != "" { // not a tool result
					c.history = append(c.history, t)
				}
			}
		})
	case flags.sessionID != "":
		if m, _ := filepath.Glob(filepath.Join(config, "projects", "*", flags.sessionID+".jsonl")); len(m) > 0 {
			fmt.Fprintf(os.Stderr, "Error: Session ID %s is already in use.\n", flags.sessionID)
			return 1
		}
		c.sid = flags.sessionID
	default:
		c.sid = uuidV4()
	}
	if c.file == "" {
		c.file = filepath.Join(config, "projects", claudeSlug(cwd), c.sid+".jsonl")
	}
	p.onTerm = func() { p.exit(143) } // SIGTERM: nothing more on stdout (§1.8)
	p.onInt = c.sigint
	p.listen()
	go c.readStdin()
	for text := range c.queue {
		c.turn(text, c.begin())
		if c.stopping.Load() {
			return 0
		}
	}
	if c.lastErr {
		return 1 // exit 1 after an error result (§1.1)
	}
	return 0
}

// sigint interrupts a running turn, which then exits 0; idle, it exits 0
// at once (real-clis.md §1.8).
func (c *claude) sigint() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel == nil {
		c.p.exit(0)
	}
	c.stopping.Store(true)
	c.interruptLocked()
}

// interruptLocked cancels the running turn, else the turn of the next
// queued message: the interrupt follows that message on stdin.
func (c *claude) interruptLocked() {
	switch {
	case c.cancel != nil:
		select {
		case <-c.cancel:
		default:
			close(c.cancel)
		}
	case c.queued > 0:
		c.cancelNext = true
	}
}

// begin makes the next queued message the running turn and returns its
// cancel channel, under the lock an interrupt takes, so that no interrupt
// falls between the message leaving the queue and its turn starting.
func (c *claude) begin() chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queued--
	c.cancel = make(chan struct{})
	if c.cancelNext {
		c.cancelNext = false
		close(c.cancel)
	}
	return c.cancel
}

// readStdin takes one frame per line; on EOF the queued turns still run.
func (c *claude) readStdin() {
	defer close(c.queue)
	r := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if t := strings.TrimSpace(string(line)); t != "" {
			c.frame([]byte(t))
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			return
		}
	}
}

func (c *claude) frame(line []byte) {
	var f struct {
		Type      string `json:"type"`
		RequestID string `json:"request_id"`
		Request   struct {
			Subtype string `json:"subtype"`
		} `json:"request"`
		Message struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if err := json.Unmarshal(line, &f); err != nil {
		fmt.Fprintf(os.Stderr, "Error parsing streaming input line (type=unknown, %d chars): SyntaxError\n", len(line))
		c.p.exit(1)
	}
	switch f.Type {
	case "user":
		c.mu.Lock()
		c.queued++
		c.mu.Unlock()
		c.queue <- contentText(f.Message.Content)
	case "control_request":
		c.control(f.RequestID, f.Request.Subtype)
	}
}

// control answers the control protocol (real-clis.md §1.7).
func (c *claude) control(id, subtype string) {
	ok := func(resp any) {
		c.p.emit(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": id, "response": resp}})
	}
	switch subtype {
	case "interrupt":
		c.mu.Lock()
		// The response goes out before the aborted frames.
		ok(map[string]any{"still_queued": []string{}})
		c.interruptLocked()
		c.mu.Unlock()
	case "initialize":
		ok(map[string]any{"commands": []string{}, "agents": []string{}, "pid": os.Getpid(),
			"claude_code_version": claudeVersion, "session_state": "idle", "capabilities": []string{"interrupt_receipt_v1"}})
	default:
		c.p.emit(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "error", "request_id": id,
			"error": "Unsupported control request subtype: " + subtype, "error_code": "unsupported_request"}})
	}
}

// contentText is the text of a user message: a string, or the text blocks
// of an array.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type, Text string
	}
	_ = json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (c *claude) record(typ string, msg map[string]any) {
	c.recordTo(c.file, typ, msg, nil)
}

// recordTo appends one transcript record to file, with extra top-level
// members (toolUseResult, agentId, isSidechain).
func (c *claude) recordTo(file, typ string, msg map[string]any, extra map[string]any) {
	r := map[string]any{"type": typ, "message": msg, "uuid": uuidV4(), "sessionId": c.sid,
		"cwd": c.cwd, "timestamp": time.Now().UTC().Format(time.RFC3339Nano), "version": claudeVersion}
	for k, v := range extra {
		r[k] = v
	}
	_ = appendJSONL(file, r)
}

// assistantMsg is an assistant record's message: the model and the
// request's usage with its content, as Claude Code writes it (§1.3).
func assistantMsg(content []map[string]any, input, cacheRead, cacheCreation int) map[string]any {
	return map[string]any{"id": "msg_fake_" + uuidV4()[:8], "type": "message", "role": "assistant", "model": claudeModel,
		"content": content, "stop_reason": "tool_use", "usage": map[string]any{"input_tokens": input,
			"cache_read_input_tokens": cacheRead, "cache_creation_input_tokens": cacheCreation, "output_tokens": 40}}
}

// Figures of the work turn's last request: 1200 + 30000 + 2800 = 34000
// context tokens.
const (
	workInput         = 1200
	workCacheRead     = 30000
	workCacheCreation = 2800
)

// work is a turn that uses tools (the `work` command): what the activity
// reads, written the way Claude Code 2.1.328 writes it, one user record
// per tool result with its toolUseResult, and the foreground sub-agent's
// own transcript under <session>/subagents/.
func (c *claude) work(ambiguous bool) {
	id := func() string { return "toolu_fake_" + uuidV4()[:12] }
	agentUse, bashUse, todoUse, writeUse, skillUse, mcpUse := id(), id(), id(), id(), id(), id()
	agentID := "a" + strings.ReplaceAll(uuidV4(), "-", "")[:16]
	newFile := filepath.Join(c.cwd, "notes.txt")
	uses := []map[string]any{
		{"type": "tool_use", "id": agentUse, "name": "Agent", "input": map[string]any{"description": "find the tests",
			"prompt": "List the test files.", "subagent_type": "Explore", "run_in_background": false}},
		{"type": "tool_use", "id": bashUse, "name": "Bash", "input": map[string]any{"command": "go test ./...", "description": "run the tests"}},
		{"type": "tool_use", "id": todoUse, "name": "TodoWrite", "input": map[string]any{"todos": []map[string]any{
			{"content": "read the tests", "status": "completed", "activeForm": "reading the tests"},
			{"content": "write notes", "status": "in_progress", "activeForm": "writing notes"},
			{"content": "open a pull request", "status": "pending", "activeForm": "opening a pull request"}}}},
		{"type": "tool_use", "id": writeUse, "name": "Write", "input": map[string]any{"file_path": newFile, "content": "one\ntwo\n"}},
		{"type": "tool_use", "id": skillUse, "name": "Skill", "input": map[string]any{"skill": "review"}},
		{"type": "tool_use", "id": mcpUse, "name": "mcp__docs__search", "input": map[string]any{"query": "bbolt"}},
	}
	c.recordTo(c.file, "assistant", assistantMsg(uses, 900, 20000, 1000), nil)

	sub := filepath.Join(strings.TrimSuffix(c.file, ".jsonl"), "subagents", "agent-"+agentID+".jsonl")
	side := map[string]any{"isSidechain": true, "agentId": agentID}
	c.recordTo(sub, "user", map[string]any{"role": "user", "content": "List the test files."}, side)
	subMsg := assistantMsg([]map[string]any{{"type": "text", "text": "main_test.go and api_test.go"}}, 10, 0, 0)
	subMsg["stop_reason"] = "end_turn"
	c.recordTo(sub, "assistant", subMsg, side)

	result := func(use string, content string, info map[string]any) {
		var extra map[string]any
		if info != nil {
			extra = map[string]any{"toolUseResult": info}
		}
		c.recordTo(c.file, "user", map[string]any{"role": "user", "content": []map[string]any{
			{"type": "tool_result", "tool_use_id": use, "content": content}}}, extra)
	}
	result(agentUse, "main_test.go and api_test.go", map[string]any{"status": "completed", "agentId": agentID, "agentType": "Explore",
		"prompt": "List the test files.", "content": []map[string]any{{"type": "text", "text": "main_test.go and api_test.go"}}})
	result(bashUse, "ok", map[string]any{"stdout": "ok", "stderr": "", "interrupted": false})
	result(todoUse, "Todos have been modified successfully.", map[string]any{"oldTodos": []any{}, "newTodos": []any{}})
	_ = os.WriteFile(newFile, []byte("one\ntwo\n"), 0o644)
	result(writeUse, "File created successfully at: "+newFile, map[string]any{"type": "create", "filePath": newFile, "content": "one\ntwo\n", "structuredPatch": []any{}})
	result(skillUse, "Launching skill: review", map[string]any{"success": true, "commandName": "review"})
	result(mcpUse, "3 results", nil)

	reply := "worked"
	last := assistantMsg([]map[string]any{{"type": "text", "text": reply}}, workInput, workCacheRead, workCacheCreation)
	last["stop_reason"] = "end_turn"
	c.recordTo(c.file, "assistant", last, nil)
	c.assistant(reply, nil)
	usage := map[string]any{claudeModel: map[string]any{"inputTokens": workInput, "outputTokens": 80, "contextWindow": 1000000, "maxOutputTokens": 128000}}
	if ambiguous {
		// Two entries for the model of the last request (R-ACT-9).
		usage[claudeModel+"[1m]"] = map[string]any{"inputTokens": 1, "outputTokens": 1, "contextWindow": 200000, "maxOutputTokens": 64000}
	}
	c.result(false, "completed", reply, map[string]any{"stop_reason": "end_turn", "modelUsage": usage})
}

func (c *claude) assistant(text string, extra map[string]any) {
	f := map[string]any{"type": "assistant", "message": map[string]any{"id": "msg_fake_" + uuidV4()[:8], "type": "message",
		"role": "assistant", "model": claudeModel, "content": []map[string]string{{"type": "text", "text": text}},
		"stop_reason": nil}, "parent_tool_use_id": nil, "session_id": c.sid, "uuid": uuidV4()}
	for k, v := range extra {
		f[k] = v
	}
	c.p.emit(f)
}

// result ends the turn. The turn is over once its result is out: under the
// lock an interrupt takes, it stops being the running turn as the frame
// goes, so that an interrupt read after the result is for the next queued
// message, never for this finished turn.
func (c *claude) result(isErr bool, reason, text string, extra map[string]any) {
	f := map[string]any{"type": "result", "subtype": "success", "is_error": isErr, "result": text, "terminal_reason": reason,
		"num_turns": 1, "duration_ms": 1, "session_id": c.sid, "total_cost_usd": 0,
		"modelUsage": map[string]any{claudeModel: map[string]any{"inputTokens": 1, "outputTokens": 1, "contextWindow": 1000000, "maxOutputTokens": 128000}},
		"uuid":       uuidV4()}
	for k, v := range extra {
		f[k] = v
	}
	c.lastErr = isErr
	c.mu.Lock()
	defer c.mu.Unlock()
	f["queued_turn_count"] = c.queued
	c.cancel = nil
	c.p.emit(f)
}

// turn runs one user message: system/init at its start (real-clis.md §1.1),
// then assistant and result.
func (c *claude) turn(text string, cancel chan struct{}) {
	defer func() {
		c.mu.Lock()
		c.cancel = nil
		c.mu.Unlock()
	}()
	c.p.emit(map[string]any{"type": "system", "subtype": "init", "cwd": c.cwd, "session_id": c.sid, "tools": []string{},
		"mcp_servers": []string{}, "model": claudeModel, "permissionMode": "default", "apiKeySource": "none",
		"claude_code_version": claudeVersion, "output_style": "default", "uuid": uuidV4()})
	earlier := append([]string(nil), c.history...)
	c.history = append(c.history, text)
	c.record("user", map[string]any{"role": "user", "content": text})

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
	case "flood":
		for _, piece := range floodPieces(sp.n) {
			c.assistant(piece, nil)
		}
		c.record("assistant", map[string]any{"role": "assistant", "content": []map[string]string{{"type": "text", "text": "flood"}}})
		c.result(false, "completed", fmt.Sprintf("flooded %d bytes", sp.n), map[string]any{"stop_reason": "end_turn"})
		return
	case "limit":
		// Subscription auth hitting the 5-hour limit (real-clis.md §1.10).
		reset := time.Now().Add(time.Hour).Unix()
		c.p.emit(map[string]any{"type": "rate_limit_event", "rate_limit_info": map[string]any{"status": "rejected", "resetsAt": reset,
			"rateLimitType": "five_hour", "isUsingOverage": false}, "uuid": uuidV4(), "session_id": c.sid})
		msg := "You've hit your 5-hour limit"
		c.assistant(msg, map[string]any{"error": "rate_limit", "is_api_error_message": true, "api_error_status": 429,
			"api_error": "usage_limit_reached", "api_error_type": "rate_limit_error"})
		c.result(true, "api_error", msg, map[string]any{"api_error_status": 429, "api_error_type": "rate_limit_error", "api_error": "usage_limit_reached"})
		return
	case "slow":
		c.slow(cancel)
		return
	case "work":
		c.work(sp.arg == "ambiguous")
		return
	}
	select {
	case <-cancel:
		c.aborted("")
		return
	default:
	}
	c.assistant(reply, nil)
	c.record("assistant", map[string]any{"role": "assistant", "content": []map[string]string{{"type": "text", "text": reply}}})
	c.result(false, "completed", reply, map[string]any{"stop_reason": "end_turn"})
}

// slow streams one tick per 100 ms (as stream_event deltas when
// --include-partial-messages asks for them) until interrupted.
func (c *claude) slow(cancel chan struct{}) {
	t := time.NewTicker(slowTick)
	defer t.Stop()
	text := "pong: slow"
	for i := 0; i < slowMax; i++ {
		select {
		case <-cancel:
			c.aborted(text)
			return
		case <-t.C:
			d := " tick" + strconv.Itoa(i)
			text += d
			if c.flags.partial {
				c.p.emit(map[string]any{"type": "stream_event", "event": map[string]any{"type": "content_block_delta", "index": 0,
					"delta": map[string]string{"type": "text_delta", "text": d}}, "session_id": c.sid, "uuid": uuidV4()})
			}
		}
	}
	c.assistant(text, nil)
	c.result(false, "completed", text, map[string]any{"stop_reason": "end_turn"})
}

// aborted is what an interrupt produces (real-clis.md §1.7); the partial
// reply is not written to the transcript (§1.3).
func (c *claude) aborted(partial string) {
	if partial != "" {
		c.assistant(partial, map[string]any{"aborted": true})
	}
	c.p.emit(map[string]any{"type": "user", "message": map[string]any{"role": "user",
		"content": []map[string]string{{"type": "text", "text": claudeInterrupted}}}, "session_id": c.sid, "uuid": uuidV4()})
	c.result(true, "aborted_streaming", "", map[string]any{"subtype": "error_during_execution", "num_turns": 2, "stop_reason": nil,
		"errors": []string{"[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=null"}})
}
