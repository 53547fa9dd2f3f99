//go:build linux

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// gemini is `gemini --acp`, Gemini CLI 0.61.0's ACP agent (acp.go), as
// real-clis.md §3 and the gemini driver's measurements record it:
//
//   - chat logs under $GEMINI_CLI_HOME (default $HOME)/.gemini:
//     projects.json maps a cwd to a project name, and a session is
//     tmp/<project>/chats/session-<UTC minute>-<first 8 of its id>.jsonl in
//     the real format (header, {"$set":…}, message records), with the
//     <session_context> message Gemini CLI injects first;
//   - session/new needs GEMINI_API_KEY, GOOGLE_GEMINI_BASE_URL or an auth
//     type selected in settings.json; session/load needs the base URL or a
//     selected type, else -32000 "Authentication required"; authenticate
//     selects a type in settings.json;
//   - session/load answers after the first replayed message, streams the
//     rest after its answer, then sends available_commands_update;
//   - an unknown id is -32603 "Internal error" with the reason in
//     data.details;
//   - SIGTERM ends it with exit 0 (the npm launcher, signalled with its
//     child as a process group).
//
// Not imitated: the throwaway header-only files every start and every load
// leave, and the session clean-up that deletes them with the session they
// share a short id with.
type gemini struct {
	dir string // <GEMINI_CLI_HOME>/.gemini
}

const geminiVersion = "0.61.0"

// geminiStamp is the chat log's timestamp form (JavaScript's toISOString).
const geminiStamp = "2006-01-02T15:04:05.000Z"

func runGemini(p *peer, args []string) int {
	acp := slices.Contains(args, "--acp") || slices.Contains(args, "--experimental-acp")
	if !acp || !flagsOnly(args) {
		fmt.Fprintln(os.Stderr, "fakecli gemini: only `gemini --acp` is imitated")
		return 2
	}
	base := os.Getenv("GEMINI_CLI_HOME")
	if base == "" {
		base = os.Getenv("HOME")
	}
	p.logCall(map[string]any{"argv": args})
	p.onTerm = func() { p.exit(0) }
	p.listen()
	// The stderr noise the real agent prints; drivers must not parse it.
	fmt.Fprintln(os.Stderr, "Skipping project agents due to untrusted folder. To enable, ensure that the project root is trusted.")
	return serveACP(p, &gemini{dir: filepath.Join(base, ".gemini")})
}

func (g *gemini) initResult() any {
	return map[string]any{
		"protocolVersion": 1,
		"authMethods": []any{
			map[string]any{"id": "oauth-personal", "name": "Log in with Google", "description": "Log in with your Google account"},
			map[string]any{"id": "gemini-api-key", "name": "Gemini API key", "description": "Use an API key with Gemini Developer API",
				"_meta": map[string]any{"api-key": map[string]string{"provider": "google"}}},
			map[string]any{"id": "vertex-ai", "name": "Vertex AI", "description": "Use an API key with Vertex AI GenAI API"},
			map[string]any{"id": "gateway", "name": "AI API Gateway", "description": "Use a custom AI API Gateway",
				"_meta": map[string]any{"gateway": map[string]string{"protocol": "google", "restartRequired": "false"}}},
		},
		"agentInfo": map[string]string{"name": "gemini-cli", "title": "Gemini CLI (fakecli)", "version": geminiVersion},
		"agentCapabilities": map[string]any{"loadSession": true,
			"promptCapabilities": map[string]bool{"image": true, "audio": true, "embeddedContext": true},
			"mcpCapabilities":    map[string]bool{"http": true, "sse": true}},
	}
}

// selectedAuth is settings.json's security.auth.selectedType.
func (g *gemini) selectedAuth() string {
	var st struct {
		Security struct {
			Auth struct {
				SelectedType string `json:"selectedType"`
			} `json:"auth"`
		} `json:"security"`
	}
	b, err := os.ReadFile(filepath.Join(g.dir, "settings.json"))
	if err == nil {
		_ = json.Unmarshal(b, &st)
	}
	return st.Security.Auth.SelectedType
}

func (g *gemini) modes() map[string]any {
	return map[string]any{
		"modes": map[string]any{"availableModes": []map[string]string{
			{"id": "default", "name": "Default", "description": "Prompts for approval"},
			{"id": "plan", "name": "Plan", "description": "Read-only mode"}}, "currentModeId": "default"},
		"models": map[string]any{"availableModels": []map[string]string{{"modelId": "auto", "name": "Auto"}}, "currentModelId": "auto"},
	}
}

func (g *gemini) newSession(cwd string) (*acpSession, any, *acpError) {
	auth := g.selectedAuth()
	if auth == "" && os.Getenv("GOOGLE_GEMINI_BASE_URL") != "" {
		auth = "gateway"
	}
	if (auth == "" || auth == "gemini-api-key") && os.Getenv("GEMINI_API_KEY") == "" {
		return nil, nil, &acpError{Code: acpAuthRequired, Message: "Gemini API key is missing or not configured."}
	}
	chats, err := g.chats(cwd, true)
	if err != nil {
		return nil, nil, &acpError{Code: acpInternal, Message: "Internal error", Data: map[string]string{"details": err.Error()}}
	}
	s := &acpSession{id: uuidV4(), cwd: cwd}
	now := time.Now().UTC()
	s.ref = filepath.Join(chats, "session-"+strings.ReplaceAll(now.Format("2006-01-02T15:04"), ":", "-")+"-"+s.id[:8]+".jsonl")
	ctx := acpMsg{ID: strings.ReplaceAll(uuidV4(), "-", ""), User: true, Context: true,
		Text: "<session_context>\nThis is the Gemini CLI (fakecli). We are setting up the context for our chat.\n- **Workspace Directories:**\n  - " + cwd + "\n</session_context>"}
	s.msgs = []acpMsg{ctx}
	stamp := now.Format(geminiStamp)
	sum := sha256.Sum256([]byte(cwd))
	_ = appendJSONL(s.ref, map[string]any{"sessionId": s.id, "projectHash": hex.EncodeToString(sum[:]), "startTime": stamp, "lastUpdated": stamp, "kind": "main"})
	_ = appendJSONL(s.ref, map[string]any{"$set": map[string]any{"messages": []any{g.record0(ctx, stamp)}, "lastUpdated": stamp}})
	res := g.modes()
	res["sessionId"] = s.id
	return s, res, nil
}

// chats is the chats directory of cwd's project; create registers the
// project in projects.json first (real-clis.md §3: the lowercased base
// name with every other character a '-', and -1, -2 … on a collision).
func (g *gemini) chats(cwd string, create bool) (string, error) {
	var reg struct {
		Projects map[string]string `json:"projects"`
	}
	path := filepath.Join(g.dir, "projects.json")
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &reg)
	}
	name, ok := reg.Projects[cwd]
	if !ok {
		if !create {
			return "", os.ErrNotExist
		}
		if reg.Projects == nil {
			reg.Projects = map[string]string{}
		}
		slug := strings.Map(func(r rune) rune {
			if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' {
				return r
			}
			return '-'
		}, strings.ToLower(filepath.Base(cwd)))
		taken := map[string]bool{}
		for _, n := range reg.Projects {
			taken[n] = true
		}
		name = slug
		for i := 1; taken[name]; i++ {
			name = slug + "-" + strconv.Itoa(i)
		}
		reg.Projects[cwd] = name
		if err := os.MkdirAll(g.dir, 0o700); err != nil {
			return "", err
		}
		b, _ := json.MarshalIndent(reg, "", "  ")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return "", err
		}
		for _, d := range []string{filepath.Join(g.dir, "tmp", name), filepath.Join(g.dir, "history", name)} {
			_ = os.MkdirAll(d, 0o700)
			_ = os.WriteFile(filepath.Join(d, ".project_root"), []byte(cwd), 0o600)
		}
	}
	dir := filepath.Join(g.dir, "tmp", name, "chats")
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// record0 is a message record in the chat log's form.
func (g *gemini) record0(m acpMsg, stamp string) map[string]any {
	if m.User {
		return map[string]any{"id": m.ID, "timestamp": stamp, "type": "user", "content": []map[string]string{{"text": m.Text}}}
	}
	return map[string]any{"id": m.ID, "timestamp": stamp, "type": "gemini", "content": m.Text, "thoughts": []any{},
		"tokens": map[string]int{"input": 321, "output": 9, "cached": 0, "thoughts": 0, "tool": 0, "total": 330}, "model": "gemini-fakecli"}
}

func (g *gemini) loadSession(id, cwd string) (*acpSession, *acpError) {
	if g.selectedAuth() == "" && os.Getenv("GOOGLE_GEMINI_BASE_URL") == "" {
		return nil, &acpError{Code: acpAuthRequired, Message: "Authentication required"}
	}
	internal := func(details string) *acpError {
		return &acpError{Code: acpInternal, Message: "Internal error", Data: map[string]string{"details": details}}
	}
	chats, err := g.chats(cwd, false)
	files, _ := filepath.Glob(filepath.Join(chats, "session-*.jsonl"))
	if err != nil || len(files) == 0 {
		return nil, internal("No previous sessions found for this project.")
	}
	for _, f := range files {
		if s := g.read(f, id); s != nil {
			s.cwd = cwd
			_ = appendJSONL(f, map[string]any{"$set": map[string]string{"sessionId": id}})
			return s, nil
		}
	}
	return nil, internal(fmt.Sprintf("Invalid session identifier %q.\n  Searched for sessions in %s.\n  Use --list-sessions to see available sessions, then use --resume {number}, --resume {uuid}, or --resume latest.", id, chats))
}

// read loads the chat log at path if it holds session id: a header names
// the session, {"$set":{"messages":…}} replaces the list, a message record
// adds a message or replaces the one with its id.
func (g *gemini) read(path, id string) *acpSession {
	var s *acpSession
	var order []string
	msgs := map[string]acpMsg{}
	add := func(raw json.RawMessage) {
		var r struct {
			ID      string          `json:"id"`
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(raw, &r) != nil || r.ID == "" || (r.Type != "user" && r.Type != "gemini") {
			return
		}
		m := acpMsg{ID: r.ID, User: r.Type == "user"}
		var parts []struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(r.Content, &m.Text) != nil && json.Unmarshal(r.Content, &parts) == nil {
			for _, p := range parts {
				m.Text += p.Text
			}
		}
		m.Context = m.User && strings.HasPrefix(m.Text, "<session_context>")
		if _, seen := msgs[r.ID]; !seen {
			order = append(order, r.ID)
		}
		msgs[r.ID] = m
	}
	_ = readJSONL(path, func(l []byte) {
		var rec map[string]json.RawMessage
		if json.Unmarshal(l, &rec) != nil {
			return
		}
		switch {
		case rec["sessionId"] != nil && rec["$set"] == nil:
			var sid string
			_ = json.Unmarshal(rec["sessionId"], &sid)
			if sid == id && s == nil {
				s = &acpSession{id: id, ref: path}
			}
		case rec["$set"] != nil:
			var set struct {
				Messages []json.RawMessage `json:"messages"`
			}
			if json.Unmarshal(rec["$set"], &set) == nil && set.Messages != nil {
				order, msgs = nil, map[string]acpMsg{}
				for _, m := range set.Messages {
					add(m)
				}
			}
		default:
			add(json.RawMessage(l))
		}
	})
	if s == nil {
		return nil
	}
	for _, mid := range order {
		s.msgs = append(s.msgs, msgs[mid])
	}
	return s
}

func (g *gemini) loadResult() any { return g.modes() }

func (g *gemini) authenticate(params json.RawMessage) (any, *acpError) {
	var p struct {
		MethodID string `json:"methodId"`
	}
	_ = json.Unmarshal(params, &p)
	switch p.MethodID {
	case "gemini-api-key":
		if os.Getenv("GEMINI_API_KEY") == "" {
			return nil, &acpError{Code: acpAuthRequired, Message: "Gemini API key is missing or not configured."}
		}
	case "oauth-personal", "vertex-ai", "gateway":
	default:
		return nil, &acpError{Code: acpInvalidParams, Message: "Invalid enum value " + strconv.Quote(p.MethodID)}
	}
	settings := map[string]any{"security": map[string]any{"auth": map[string]string{"selectedType": p.MethodID}}}
	b, _ := json.MarshalIndent(settings, "", "  ")
	if err := os.MkdirAll(g.dir, 0o700); err != nil {
		return nil, &acpError{Code: acpAuthRequired, Message: err.Error()}
	}
	if err := os.WriteFile(filepath.Join(g.dir, "settings.json"), b, 0o600); err != nil {
		return nil, &acpError{Code: acpAuthRequired, Message: err.Error()}
	}
	return map[string]any{}, nil
}

func (g *gemini) record(s *acpSession, m acpMsg) {
	stamp := time.Now().UTC().Format(geminiStamp)
	_ = appendJSONL(s.ref, g.record0(m, stamp))
	_ = appendJSONL(s.ref, map[string]any{"$set": map[string]string{"lastUpdated": stamp}})
}

func (g *gemini) update(_ *acpSession, m acpMsg) map[string]any { return textUpdate(m) }

// beforeAnswer: Gemini CLI starts the replay without awaiting it, so only
// the first message goes out before the answer.
func (g *gemini) beforeAnswer() int { return 1 }

func (g *gemini) commands() bool { return true }

func (g *gemini) promptResult(_ *acpSession, stop string) (any, []map[string]any) {
	if stop != "end_turn" {
		return map[string]string{"stopReason": stop}, nil
	}
	count := map[string]int{"input_tokens": 321, "output_tokens": 9}
	return map[string]any{"stopReason": stop, "_meta": map[string]any{"quota": map[string]any{"token_count": count,
		"model_usage": []any{map[string]any{"model": "gemini-fakecli", "token_count": count}}}}}, nil
}
