//go:build linux

package main

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// opencode is OpenCode 1.18.33 (real-clis.md §4 and the opencode driver's
// measurements): `opencode acp`, its ACP agent (acp.go), and
// `opencode export [<id>]`, which a handoff runs to read a session
// (R-HOF-6).
//
//   - initialize offers loadSession and the session capabilities close,
//     fork, list and resume; session/new works offline without
//     authenticate and is followed by available_commands_update;
//   - session/load replays the history before its answer (each chunk with
//     its messageId), then available_commands_update; an unknown id is
//     -32603 "Internal error: OpenCode service failure";
//   - a prompt's answer follows a usage_update and carries usage; a
//     cancelled one has zero usage;
//   - SIGTERM kills it (it dies of the signal).
//
// The real OpenCode keeps sessions in SQLite ($XDG_DATA_HOME/opencode/
// opencode.db); the peer keeps each as the JSON `opencode export` prints,
// under $XDG_DATA_HOME/opencode/storage/session/<id>.json.
type opencode struct {
	dir string // the session directory
}

const opencodeVersion = "1.18.33"

func runOpenCode(p *peer, args []string) int {
	data := os.Getenv("XDG_DATA_HOME")
	if data == "" {
		data = filepath.Join(os.Getenv("HOME"), ".local", "share")
	}
	o := &opencode{dir: filepath.Join(data, "opencode", "storage", "session")}
	switch {
	case len(args) > 0 && args[0] == "acp" && flagsOnly(args[1:]):
		p.logCall(map[string]any{"argv": args})
		p.listen() // SIGTERM and SIGINT: the process dies of the signal
		return serveACP(p, o)
	case len(args) > 0 && args[0] == "export" && len(args) <= 2:
		p.logCall(map[string]any{"argv": args})
		id := ""
		if len(args) == 2 {
			id = args[1]
		}
		return o.export(id)
	}
	fmt.Fprintln(os.Stderr, "fakecli opencode: only `opencode acp` and `opencode export [<id>]` are imitated")
	return 2
}

// ocExport is a session as `opencode export` prints it.
type ocExport struct {
	Info     ocInfo      `json:"info"`
	Messages []ocMessage `json:"messages"`
}

type ocTime struct {
	Created int64 `json:"created"`
	Updated int64 `json:"updated,omitempty"`
}

type ocInfo struct {
	ID        string            `json:"id"`
	Slug      string            `json:"slug"`
	ProjectID string            `json:"projectID"`
	Directory string            `json:"directory"`
	Title     string            `json:"title"`
	Agent     string            `json:"agent"`
	Model     map[string]string `json:"model"`
	Version   string            `json:"version"`
	Time      ocTime            `json:"time"`
}

type ocMessage struct {
	Info struct {
		ID        string `json:"id"`
		SessionID string `json:"sessionID"`
		Role      string `json:"role"`
		Time      ocTime `json:"time"`
	} `json:"info"`
	Parts []map[string]any `json:"parts"`
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// opencodeID is an id of OpenCode's form: prefix, 12 hex digits of time,
// 14 letters and digits (ses_dc537faa3ffecqHIie204Atr7P).
func opencodeID(prefix string) string {
	var b strings.Builder
	b.WriteString(prefix)
	fmt.Fprintf(&b, "%012x", uint64(time.Now().UnixNano()/1000)&0xffffffffffff)
	for i := 0; i < 14; i++ {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(base62))))
		b.WriteByte(base62[n.Int64()])
	}
	return b.String()
}

func (o *opencode) path(id string) string { return filepath.Join(o.dir, id+".json") }

func (o *opencode) read(id string) (*ocExport, error) {
	if !strings.HasPrefix(id, "ses_") || strings.ContainsAny(id, "/\\.") {
		return nil, os.ErrNotExist
	}
	b, err := os.ReadFile(o.path(id))
	if err != nil {
		return nil, err
	}
	var e ocExport
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// write replaces the stored session in one rename.
func (o *opencode) write(e *ocExport) error {
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return err
	}
	tmp := o.path(e.Info.ID) + ".tmp"
	if err := os.WriteFile(tmp, marshalLine(e), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, o.path(e.Info.ID))
}

func (o *opencode) initResult() any {
	return map[string]any{
		"protocolVersion": 1,
		"agentCapabilities": map[string]any{"loadSession": true,
			"mcpCapabilities":     map[string]bool{"http": true, "sse": true},
			"promptCapabilities":  map[string]bool{"embeddedContext": true, "image": true},
			"sessionCapabilities": map[string]any{"close": map[string]any{}, "fork": map[string]any{}, "list": map[string]any{}, "resume": map[string]any{}}},
		"authMethods": []any{map[string]string{"description": "Run `opencode auth login` in the terminal", "name": "Login with opencode", "id": "opencode-login"}},
		"agentInfo":   map[string]string{"name": "OpenCode", "version": opencodeVersion},
	}
}

func (o *opencode) configOptions() []any {
	return []any{map[string]any{"id": "model", "name": "Model", "category": "model", "type": "select",
		"currentValue": "anthropic/claude-sonnet-4-5",
		"options":      []any{map[string]string{"value": "anthropic/claude-sonnet-4-5", "name": "Anthropic/Claude Sonnet 4.5"}}}}
}

func (o *opencode) newSession(cwd string) (*acpSession, any, *acpError) {
	now := time.Now().UnixMilli()
	e := &ocExport{Info: ocInfo{ID: opencodeID("ses_"), Slug: "fakecli-session", ProjectID: "global", Directory: cwd,
		Title: "New session - " + time.Now().UTC().Format(time.RFC3339), Agent: "build",
		Model:   map[string]string{"id": "claude-sonnet-4-5", "providerID": "anthropic", "variant": "default"},
		Version: opencodeVersion, Time: ocTime{Created: now, Updated: now}}, Messages: []ocMessage{}}
	if err := o.write(e); err != nil {
		return nil, nil, &acpError{Code: acpInternal, Message: "Internal error: " + err.Error()}
	}
	s := &acpSession{id: e.Info.ID, cwd: cwd, ref: o.path(e.Info.ID)}
	return s, map[string]any{"sessionId": s.id, "configOptions": o.configOptions()}, nil
}

func (o *opencode) loadSession(id, cwd string) (*acpSession, *acpError) {
	e, err := o.read(id)
	if err != nil {
		return nil, &acpError{Code: acpInternal, Message: "Internal error: OpenCode service failure", Data: map[string]string{"service": "session"}}
	}
	s := &acpSession{id: id, cwd: cwd, ref: o.path(id)}
	for _, m := range e.Messages {
		for _, part := range m.Parts {
			if text, _ := part["text"].(string); part["type"] == "text" {
				s.msgs = append(s.msgs, acpMsg{ID: m.Info.ID, User: m.Info.Role == "user", Text: text})
			}
		}
	}
	return s, nil
}

func (o *opencode) loadResult() any { return map[string]any{"configOptions": o.configOptions()} }

func (o *opencode) authenticate(json.RawMessage) (any, *acpError) {
	return nil, &acpError{Code: acpAuthRequired, Message: "Authentication required: run `opencode auth login` in a terminal"}
}

// record appends a message in the export's form: a user text, or an
// assistant's step-start, text and step-finish.
func (o *opencode) record(s *acpSession, m acpMsg) {
	e, err := o.read(s.id)
	if err != nil {
		return
	}
	var msg ocMessage
	msg.Info.ID, msg.Info.SessionID = ocMessageID(m.ID), s.id
	msg.Info.Time.Created = time.Now().UnixMilli()
	if m.User {
		msg.Info.Role = "user"
		msg.Parts = []map[string]any{{"type": "text", "text": m.Text}}
	} else {
		msg.Info.Role = "assistant"
		msg.Parts = []map[string]any{{"type": "step-start"}, {"type": "text", "text": m.Text}, {"type": "step-finish", "reason": "stop"}}
	}
	e.Messages = append(e.Messages, msg)
	e.Info.Time.Updated = msg.Info.Time.Created
	_ = o.write(e)
}

func (o *opencode) update(_ *acpSession, m acpMsg) map[string]any {
	u := textUpdate(m)
	u["messageId"] = ocMessageID(m.ID)
	return u
}

// ocMessageID is OpenCode's form of a message id: msg_ and 26 letters and
// digits, made from the peer's own id when that is not one already.
func ocMessageID(id string) string {
	if strings.HasPrefix(id, "msg_") {
		return id
	}
	id = strings.ReplaceAll(id, "-", "")
	if len(id) > 26 {
		id = id[:26]
	}
	return "msg_" + id
}

func (o *opencode) beforeAnswer() int { return -1 }

func (o *opencode) commands() bool { return true }

func (o *opencode) promptResult(_ *acpSession, stop string) (any, []map[string]any) {
	used, in, out := 11, 11, 5
	if stop != "end_turn" {
		used, in, out = 0, 0, 0
	}
	usage := map[string]any{"sessionUpdate": "usage_update", "used": used, "size": 1000000,
		"cost": map[string]any{"amount": 0.000108, "currency": "USD"}}
	return map[string]any{"stopReason": stop, "usage": map[string]int{"inputTokens": in, "outputTokens": out, "totalTokens": in + out},
		"_meta": map[string]any{}}, []map[string]any{usage}
}

// export is `opencode export [<id>]` (real-clis.md §4): the session as one
// JSON object on stdout; with no id the latest, and with none stored an
// empty stdout and exit 0; an unknown id exits 1.
func (o *opencode) export(id string) int {
	if id == "" {
		fmt.Fprintln(os.Stderr, "Exporting session: latest")
		files, _ := filepath.Glob(filepath.Join(o.dir, "ses_*.json"))
		var latest *ocExport
		for _, f := range files {
			if e, err := o.read(strings.TrimSuffix(filepath.Base(f), ".json")); err == nil &&
				(latest == nil || e.Info.Time.Updated > latest.Info.Time.Updated) {
				latest = e
			}
		}
		if latest == nil {
			fmt.Fprintln(os.Stderr, "┌ Export session\n│\n■ No sessions found\n│\n└ Done")
			return 0
		}
		id = latest.Info.ID
	} else {
		fmt.Fprintln(os.Stderr, "Exporting session: "+id)
	}
	e, err := o.read(id)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			fmt.Fprintln(os.Stderr, "Error: Session not found: "+id)
		} else {
			fmt.Fprintln(os.Stderr, "Error: "+err.Error())
		}
		return 1
	}
	_, _ = os.Stdout.Write(marshalLine(e))
	return 0
}
