//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// grok is `grok agent stdio` speaking the Agent Client Protocol (acp.go).
// Sessions live under $GROK_HOME (default ~/.grok) as
// sessions/<url-encoded cwd>/<session id>/updates.jsonl, the layout xAI
// documents; no real grok binary was measured, so the answers follow ACP as
// Gemini CLI speaks it (real-clis.md §3), with the replay of a load wholly
// before its answer.
type grok struct {
	home string
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
	p.logCall(map[string]any{"argv": args})
	p.listen() // SIGTERM and SIGINT: the process dies of the signal
	return serveACP(p, &grok{home: home})
}

func (g *grok) initResult() any {
	return map[string]any{"protocolVersion": 1, "authMethods": []any{},
		"agentInfo":         map[string]string{"name": "grok", "title": "Grok Build (fakecli)", "version": "0.0.0-fakecli"},
		"agentCapabilities": map[string]any{"loadSession": true, "promptCapabilities": map[string]bool{"image": false, "audio": false, "embeddedContext": false}}}
}

func (g *grok) newSession(cwd string) (*acpSession, any, *acpError) {
	s := &acpSession{id: uuidV4(), cwd: cwd}
	s.ref = filepath.Join(g.home, "sessions", url.PathEscape(cwd), s.id)
	if err := os.MkdirAll(s.ref, 0o700); err != nil {
		return nil, nil, &acpError{Code: acpInternal, Message: err.Error()}
	}
	_ = os.WriteFile(filepath.Join(s.ref, "summary.json"), marshalLine(map[string]string{"id": s.id, "cwd": cwd}), 0o600)
	return s, map[string]string{"sessionId": s.id}, nil
}

func (g *grok) loadSession(id, _ string) (*acpSession, *acpError) {
	notFound := &acpError{Code: acpNotFound, Message: "Session not found: " + id}
	if id == "" || strings.ContainsAny(id, "/*?[\\") {
		return nil, notFound
	}
	matches, _ := filepath.Glob(filepath.Join(g.home, "sessions", "*", id))
	if len(matches) == 0 {
		return nil, notFound
	}
	s := &acpSession{id: id, ref: matches[0]}
	_ = readJSONL(filepath.Join(s.ref, "updates.jsonl"), func(l []byte) {
		var u struct {
			Update struct {
				SessionUpdate string `json:"sessionUpdate"`
				Content       struct{ Text string }
			} `json:"update"`
		}
		if json.Unmarshal(l, &u) == nil {
			switch u.Update.SessionUpdate {
			case "user_message_chunk", "agent_message_chunk":
				s.msgs = append(s.msgs, acpMsg{User: u.Update.SessionUpdate == "user_message_chunk", Text: u.Update.Content.Text})
			}
		}
	})
	return s, nil
}

func (g *grok) loadResult() any { return nil }

func (g *grok) authenticate(json.RawMessage) (any, *acpError) {
	return nil, &acpError{Code: acpMethodNotFound, Message: "Method not found: authenticate"}
}

// record keeps an update for a later session/load.
func (g *grok) record(s *acpSession, m acpMsg) {
	_ = appendJSONL(filepath.Join(s.ref, "updates.jsonl"), map[string]any{"sessionId": s.id, "update": textUpdate(m)})
}

func (g *grok) update(_ *acpSession, m acpMsg) map[string]any { return textUpdate(m) }

func (g *grok) beforeAnswer() int { return -1 }

func (g *grok) commands() bool { return false }

func (g *grok) promptResult(_ *acpSession, stop string) (any, []map[string]any) {
	return map[string]string{"stopReason": stop}, nil
}
