package handoff

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
)

// Gemini CLI keeps a session as a JSONL log of operations on the
// conversation (real-clis.md §3; its loader, chatRecordingService, replays
// them the same way):
//
//	{"sessionId","projectHash","startTime",…,"kind"}  header (may list messages)
//	{"$set":{"messages":[…],…}}                        replace the message list
//	{"$rewindTo":"<id>"}                               drop that message and all after it
//	{"id","timestamp","type",…}                        add a message, or replace the one with that id
//
// Message types are "user", "gemini", "info", "error" and "warning"; only
// the first two are conversation. A user message that is empty, a slash or
// "?" command, or a <session_context>/<hook_context> block is context the
// CLI injects, and one holding only functionResponse parts repeats the
// results that the "gemini" message's toolCalls already carry.

type geminiMessage struct {
	ID        string          `json:"id"`
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []struct {
		ID            string          `json:"id"`
		Name          string          `json:"name"`
		Args          json.RawMessage `json:"args"`
		Result        json.RawMessage `json:"result"`
		ResultDisplay json.RawMessage `json:"resultDisplay"`
		Status        string          `json:"status"`
		Timestamp     string          `json:"timestamp"`
	} `json:"toolCalls"`
}

type geminiPart struct {
	Text             *string `json:"text"`
	Thought          bool    `json:"thought"`
	FunctionResponse *struct {
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
	InlineData json.RawMessage `json:"inlineData"`
	FileData   json.RawMessage `json:"fileData"`
}

type geminiReader struct {
	c         *Conversation
	order     []string
	msgs      map[string][]Record
	sessionID string
	bad       int // messages inside a readable line that could not be read
}

func newGeminiReader(c *Conversation) *geminiReader {
	return &geminiReader{c: c, msgs: map[string][]Record{}}
}

func (r *geminiReader) line(b []byte) bool {
	var l map[string]json.RawMessage
	if json.Unmarshal(b, &l) != nil || l == nil {
		return false
	}
	if raw, ok := l["$rewindTo"]; ok {
		var id string
		if json.Unmarshal(raw, &id) != nil {
			return false
		}
		if i := slices.Index(r.order, id); i >= 0 {
			for _, gone := range r.order[i:] {
				delete(r.msgs, gone)
			}
			r.order = r.order[:i]
		} else {
			r.order, r.msgs = nil, map[string][]Record{}
		}
		return true
	}
	if rawID, ok := l["id"]; ok {
		var id string
		if json.Unmarshal(rawID, &id) == nil {
			return r.message(b)
		}
	}
	if raw, ok := l["$set"]; ok {
		var set map[string]json.RawMessage
		if json.Unmarshal(raw, &set) != nil {
			return false
		}
		if msgs, ok := set["messages"]; ok {
			var list []json.RawMessage
			if json.Unmarshal(msgs, &list) != nil {
				return false
			}
			r.order, r.msgs = nil, map[string][]Record{}
			for _, m := range list {
				if !r.message(m) {
					r.bad++
				}
			}
		}
		return true
	}
	if rawSID, ok := l["sessionId"]; ok {
		var sid string
		if json.Unmarshal(rawSID, &sid) != nil {
			return false
		}
		if r.sessionID == "" {
			r.sessionID = sid
		}
		if msgs, ok := l["messages"]; ok {
			var list []json.RawMessage
			if json.Unmarshal(msgs, &list) != nil {
				return false
			}
			for _, m := range list {
				if !r.message(m) {
					r.bad++
				}
			}
		}
		return true
	}
	return true
}

// message reads one message and puts it in place (replacing the one with
// its id, or after the others).
func (r *geminiReader) message(b []byte) bool {
	var m geminiMessage
	if json.Unmarshal(b, &m) != nil || m.ID == "" {
		return false
	}
	recs, ok := geminiRecords(m)
	if !ok {
		return false
	}
	if _, known := r.msgs[m.ID]; !known {
		r.order = append(r.order, m.ID)
	}
	r.msgs[m.ID] = recs
	return true
}

// geminiRecords turns a message into records (none for a message that is
// not conversation).
func geminiRecords(m geminiMessage) ([]Record, bool) {
	at := parseTime(m.Timestamp)
	switch m.Type {
	case "user":
		text, onlyResponses, ok := geminiText(m.Content)
		if !ok {
			return nil, false
		}
		t := strings.TrimSpace(text)
		if onlyResponses || t == "" || strings.HasPrefix(t, "/") || strings.HasPrefix(t, "?") ||
			strings.HasPrefix(t, "<session_context>") || strings.HasPrefix(t, "<hook_context>") {
			return nil, true
		}
		return []Record{message(KindUser, at, text)}, true
	case "gemini":
		var out []Record
		if len(m.Content) > 0 {
			text, _, ok := geminiText(m.Content)
			if !ok {
				return nil, false
			}
			if strings.TrimSpace(text) != "" {
				out = append(out, message(KindAssistant, at, text))
			}
		}
		for _, tc := range m.ToolCalls {
			cat := parseTime(tc.Timestamp)
			if cat.IsZero() {
				cat = at
			}
			out = append(out, toolCall(cat, tc.Name, tc.ID, tc.Args))
			if len(tc.Result) > 0 || len(tc.ResultDisplay) > 0 || tc.Status != "" {
				outText, isErr := geminiResult(tc.Result, tc.ResultDisplay)
				out = append(out, toolResult(cat, tc.Name, tc.ID, outText, isErr || tc.Status == "error" || tc.Status == "cancelled"))
			}
		}
		return out, true
	}
	return nil, true
}

// geminiText joins a content's text parts (a string, or parts); non-text
// parts read "[inline data]"/"[file]", thoughts are left out. onlyResponses
// is set when every part is a functionResponse.
func geminiText(raw json.RawMessage) (text string, onlyResponses, ok bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, true
	}
	var s string
	if jsonString(raw, &s) {
		return s, false, true
	}
	var parts []geminiPart
	if json.Unmarshal(raw, &parts) != nil {
		var one geminiPart
		if json.Unmarshal(raw, &one) != nil {
			return "", false, false
		}
		parts = []geminiPart{one}
	}
	var b strings.Builder
	responses := 0
	for _, p := range parts {
		switch {
		case p.FunctionResponse != nil:
			responses++
		case p.Text != nil && !p.Thought:
			b.WriteString(*p.Text)
		case p.InlineData != nil:
			b.WriteString("[inline data]")
		case p.FileData != nil:
			b.WriteString("[file]")
		}
	}
	return b.String(), len(parts) > 0 && responses == len(parts), true
}

// geminiResult is a tool call's result: the functionResponse's output or
// error, else the display text.
func geminiResult(result, display json.RawMessage) (string, bool) {
	var s string
	if jsonString(result, &s) {
		return s, false
	}
	var parts []geminiPart
	if json.Unmarshal(result, &parts) == nil {
		var outs []string
		isErr := false
		for _, p := range parts {
			if p.FunctionResponse == nil {
				if p.Text != nil {
					outs = append(outs, *p.Text)
				}
				continue
			}
			var resp struct {
				Output json.RawMessage `json:"output"`
				Error  json.RawMessage `json:"error"`
			}
			_ = json.Unmarshal(p.FunctionResponse.Response, &resp)
			switch {
			case resp.Error != nil:
				isErr = true
				outs = append(outs, string(stringOrRaw(resp.Error)))
			case resp.Output != nil:
				outs = append(outs, string(stringOrRaw(resp.Output)))
			default:
				outs = append(outs, compactInput(p.FunctionResponse.Response))
			}
		}
		if len(outs) > 0 {
			return strings.Join(outs, "\n"), isErr
		}
	}
	if jsonString(display, &s) {
		return s, false
	}
	if len(display) > 0 && string(display) != "null" {
		return compactInput(display), false
	}
	return "", false
}

// finish puts the replayed messages in the conversation.
func (r *geminiReader) finish() {
	for _, id := range r.order {
		r.c.Records = append(r.c.Records, r.msgs[id]...)
	}
	r.c.Unreadable += r.bad
}

// readGemini reads <home>/.gemini/tmp/<project>/chats/session-*-<8 hex>.jsonl.
func readGemini(ctx context.Context, src Source, lim limits) (Conversation, error) {
	if !isUUID(src.ConversationID) {
		return Conversation{}, refuse(ErrBadSource, "%q is not a Gemini CLI session id (a UUID)", src.ConversationID)
	}
	home, err := openHome(src.Home)
	if err != nil {
		return Conversation{}, unavailable(err, src)
	}
	defer home.Close()
	gem, err := openDirPath(home, ".gemini")
	if err != nil {
		return Conversation{}, unavailable(err, src)
	}
	defer gem.Close()
	projects, roots, err := geminiProjects(gem, src.Cwd)
	if err != nil {
		return Conversation{}, unavailable(err, src)
	}
	suffix := "-" + strings.ToLower(src.ConversationID[:8]) + ".jsonl"
	var best *Conversation
	for _, p := range projects {
		chats, err := openDirPath(gem, "tmp", p, "chats")
		if err != nil {
			if errors.Is(err, errNotExist) {
				continue
			}
			return Conversation{}, unavailable(err, src)
		}
		names, err := listDir(chats, false)
		if err != nil {
			chats.Close()
			continue
		}
		for _, n := range names {
			if !strings.HasPrefix(n, "session-") || !strings.HasSuffix(n, suffix) {
				continue
			}
			// Each --acp start and each session/load writes a file of its
			// own, some with this suffix and only a header: read the ones of
			// this session and keep the one with the most records.
			c, err := readGeminiFile(ctx, chats, n, src.ConversationID, lim)
			if errors.Is(err, errNotExist) {
				continue
			}
			if err != nil {
				chats.Close()
				return Conversation{}, unavailable(err, src)
			}
			if best == nil || len(c.Records) > len(best.Records) {
				c.Cwd = roots[p]
				best = &c
			}
		}
		chats.Close()
	}
	if best == nil {
		return Conversation{}, unavailable(errNotExist, src)
	}
	best.finish()
	return *best, nil
}

// readGeminiFile reads one chat log when its header names session id;
// errNotExist when it names another.
func readGeminiFile(ctx context.Context, dir *os.File, name, id string, lim limits) (Conversation, error) {
	f, size, err := openFileAt(dir, name)
	if err != nil {
		return Conversation{}, err
	}
	var head struct {
		SessionID string `json:"sessionId"`
	}
	lr := newLineReader(f, lim)
	first, _, err := lr.next()
	f.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return Conversation{}, err
	}
	if json.Unmarshal(first, &head) != nil || !strings.EqualFold(head.SessionID, id) {
		return Conversation{}, errNotExist
	}
	if size > lim.total {
		return Conversation{}, refuse(ErrConversationTooLarge, "%s is %s; a handoff reads at most %s", f.Name(), sizeText(size), sizeText(lim.total)) // R-HOF-15
	}
	c := Conversation{Tool: ToolGemini, ID: id}
	r := newGeminiReader(&c)
	c.Path, c.Unreadable, c.Bytes, err = readConversationFile(ctx, dir, name, lim, r.line)
	if err != nil {
		return Conversation{}, err
	}
	r.finish()
	return c, nil
}

// geminiProjects returns the project folder names to look in (cwd's, from
// projects.json, or every project it lists when cwd is not there) and the
// folder each name stands for.
func geminiProjects(gem *os.File, cwd string) ([]string, map[string]string, error) {
	f, size, err := openFileAt(gem, "projects.json")
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if size > maxProjectsJSON {
		return nil, nil, refuse(ErrConversationTooLarge, "%s is %s; it lists projects and should be small", f.Name(), sizeText(size))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxProjectsJSON))
	if err != nil {
		return nil, nil, err
	}
	var pj struct {
		Projects map[string]string `json:"projects"`
	}
	if json.Unmarshal(bytes.TrimSpace(b), &pj) != nil {
		return nil, nil, errNotExist
	}
	roots := map[string]string{}
	var out []string
	for dir, name := range pj.Projects {
		if safeName(name) {
			out = append(out, name)
			if _, dup := roots[name]; !dup || dir < roots[name] {
				roots[name] = dir
			}
		}
	}
	if name, ok := pj.Projects[cwd]; ok && safeName(name) {
		roots[name] = cwd
		return []string{name}, roots, nil
	}
	slices.Sort(out)
	return slices.Compact(out), roots, nil
}

// maxProjectsJSON bounds Gemini CLI's project list, a small map.
const maxProjectsJSON = 4 << 20
