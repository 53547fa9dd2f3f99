//go:build linux

package drivers_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/gemini"
	"github.com/olivares-dev/olivares/agent/drivers/opencode"
	"github.com/olivares-dev/olivares/integration/fakemodel"
)

// The real-binary battery of the optional ACP drivers: gemini against
// Gemini CLI 0.61.0 and opencode against OpenCode 1.18.33, held to what
// R-DRV-3..8 ask of the contract drivers. Each launch gets a fresh home
// (R-DRV-5); a missing binary skips with the reason (R-DRV-8). The handshake
// cases send no model turn (R-DRV-4); the turn cases talk to the fakemodel
// servers on 127.0.0.1 only. Both CLIs take 1.5–3.5 s to start on this
// machine kind (real-clis.md §5), so each case starts as few processes as it
// can: the interrupt of a held turn runs in the turn case's first process.

// acpLimit bounds each wait on these CLIs: several seconds to start, and
// several times that when the two cores are shared with other tests.
const acpLimit = 60 * time.Second

var (
	geminiDriver   cliruntime.Driver = gemini.New()
	opencodeDriver cliruntime.Driver = opencode.New()
)

// geminiSpec is a Gemini CLI launch in a fresh home with an API key and, when
// fake is set, the fake Gemini API as GOOGLE_GEMINI_BASE_URL (real-clis.md
// §3). The home's settings.json turns Gemini's session clean-up off: 0.61.0
// deletes, at every start, each chat log without a turn together with every
// other log sharing its 8-character id prefix, and a session/load leaves
// such a log (measured), so a resumed session would vanish at the next
// start.
func geminiSpec(t *testing.T, bin string, fake *fakemodel.Gemini) cliruntime.LaunchSpec {
	t.Helper()
	home, work := realDirs(t)
	writeFile(t, filepath.Join(home, ".gemini", "settings.json"), `{"general":{"sessionRetention":{"enabled":false}}}`)
	env := []string{realPath(bin), "GEMINI_API_KEY=test"}
	if fake != nil {
		env = append(env, "GOOGLE_GEMINI_BASE_URL="+fake.URL())
	}
	return cliruntime.LaunchSpec{Home: home, Workdir: work, Env: env}
}

// opencodeSpec is an OpenCode launch in a fresh home kept offline
// (real-clis.md §4): the driver's defaults turn the catalog fetch and the
// updater off, $HOME/.npmrc points npm at a closed port, and opencode.json
// sends the anthropic provider to the fake Messages server. The title agent
// is off, so that each turn is one model request.
func opencodeSpec(t *testing.T, bin string, fake *fakemodel.Anthropic) cliruntime.LaunchSpec {
	t.Helper()
	home, work := realDirs(t)
	writeFile(t, filepath.Join(home, ".npmrc"), "registry=http://127.0.0.1:9/\n")
	cfg, err := json.Marshal(map[string]any{
		"autoupdate": false, "share": "disabled", "model": "anthropic/claude-sonnet-4-5",
		"agent":    map[string]any{"title": map[string]any{"disable": true}},
		"provider": map[string]any{"anthropic": map[string]any{"options": map[string]any{"baseURL": fake.URL() + "/v1", "apiKey": "test"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, ".config", "opencode", "opencode.json"), string(cfg))
	return cliruntime.LaunchSpec{Home: home, Workdir: work, Env: []string{realPath(bin)}}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// chunks joins the text of every session/update of kind in an ACP stdout,
// in order: what the agent said, however it cut it into chunks.
func chunks(stdout, kind string) string {
	var b strings.Builder
	for _, l := range strings.Split(stdout, "\n") {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Update struct {
					SessionUpdate string `json:"sessionUpdate"`
					Content       struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"update"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Method == "session/update" && m.Params.Update.SessionUpdate == kind {
			b.WriteString(m.Params.Update.Content.Text)
		}
	}
	return b.String()
}

// said waits until the agent's chunks on h's stdout hold text.
func said(t *testing.T, h *harness, kind, text string) {
	t.Helper()
	h.stdout.await(t, kind+" "+text, func(s string, _ int64) bool { return strings.Contains(chunks(s, kind), text) })
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// seen waits for an event of kind anywhere in h's events, whatever the
// cursor of await has passed.
func seen(t *testing.T, h *harness, kind cliruntime.EventKind) cliruntime.Event {
	t.Helper()
	began := time.Now()
	for {
		h.evMu.Lock()
		wake := h.evWake
		h.evMu.Unlock()
		if ev, ok := h.first(kind); ok {
			return ev
		}
		end, speaking := h.giveUp(began)
		if !time.Now().Before(end) {
			t.Fatalf("no %s event within %v (%s); events: %s; stdio:\n%s", kind, time.Since(began).Round(time.Millisecond), startNote(h.t0, h.stdout.spokeAt()), h.kinds(), h.traceText())
		}
		timer := time.NewTimer(time.Until(end))
		select {
		case <-wake:
		case <-speaking:
		case <-timer.C:
		case <-h.eof:
			if ev, ok := h.first(kind); ok {
				return ev
			}
			t.Fatalf("no %s event before stdout EOF; events: %s; stdio:\n%s", kind, h.kinds(), h.traceText())
		}
		timer.Stop()
	}
}

// acpStart starts spec's launch (or resume) of a slow ACP CLI.
func acpStart(t *testing.T, d cliruntime.Driver, spec cliruntime.LaunchSpec) *harness {
	t.Helper()
	return realStart(t, d, spec).patient(acpLimit)
}

// waitWithin fails unless ch is closed within d.
func waitWithin(t *testing.T, ch <-chan struct{}, what string, d time.Duration) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
	}
}

// hasReplay reports whether evs bracket a replay: replay_started, then
// replay_ended (R-HW-4).
func hasReplay(evs []cliruntime.Event) bool {
	start := slices.IndexFunc(evs, func(e cliruntime.Event) bool { return e.Kind == cliruntime.EventReplayStarted })
	end := slices.IndexFunc(evs, func(e cliruntime.Event) bool { return e.Kind == cliruntime.EventReplayEnded })
	return start >= 0 && end > start
}

// replayed reports whether an ACP stdout line replays the history: a user
// message, or one of the answers an earlier process got (a replay sends
// each message whole, in one chunk).
func replayed(answers ...string) func(line string) bool {
	return func(line string) bool {
		return chunks(line, "user_message_chunk") != "" || slices.Contains(answers, chunks(line, "agent_message_chunk"))
	}
}

// checkWithheld: every replayed line of h's stdout lies strictly between
// the line that brought replay_started and the one that brought
// replay_ended, which is what the supervisor drops for a tainted run
// (R-HW-2..4); and there was something to withhold.
func checkWithheld(t *testing.T, h *harness, isReplay func(line string) bool) {
	t.Helper()
	out, _, _, _ := h.stdout.snapshot()
	lines := strings.Split(out, "\n")
	at := func(kind cliruntime.EventKind) int {
		ev, ok := h.first(kind)
		if !ok {
			t.Fatalf("no %s event: %s", kind, h.kinds())
		}
		i := slices.Index(lines, string(ev.Raw))
		if i < 0 {
			t.Fatalf("%s came from no stdout line: %s", kind, ev.Raw)
		}
		return i
	}
	start, end := at(cliruntime.EventReplayStarted), at(cliruntime.EventReplayEnded)
	n := 0
	for i, l := range lines {
		if !isReplay(l) {
			continue
		}
		n++
		if i <= start || i >= end {
			t.Errorf("replayed line %d is outside the replay (lines %d to %d): %.300s", i, start, end, l)
		}
	}
	if n == 0 {
		t.Error("the resume replayed nothing")
	}
}

// interruptHeld runs a turn the fake holds open, interrupts it once the
// held delta is on stdout, and checks that the turn ends cancelled, the CLI
// drops the request and the process stays (R-INT-1), and that an interrupt
// after the end is a no-op (R-INT-2).
func interruptHeld(t *testing.T, h *harness, g *fakemodel.Gate) {
	t.Helper()
	pid := h.proc.Pid()
	if err := h.encode(textInput("hold on")); err != nil {
		t.Fatal(err)
	}
	h.await(cliruntime.EventTurnStarted)
	waitWithin(t, g.Arrived(), "held request", acpLimit)
	h.stdout.await(t, "held delta", func(s string, _ int64) bool { return strings.Contains(s, "held") })
	if active, writes := h.interrupt(); !active || writes != 1 {
		t.Fatalf("Interrupt() during a turn = active %t with %d writes, want one write", active, writes)
	}
	if end := h.await(cliruntime.EventTurnEnded); !end.IsError || end.Reason != "cancelled" {
		t.Errorf("interrupted turn ended %+v, want is_error and reason cancelled", end)
	}
	waitWithin(t, g.Gone(), "the CLI dropping the held request", acpLimit)
	if !h.alive() || h.proc.Pid() != pid {
		t.Fatal("the process did not survive the interrupt")
	}
	if active, writes := h.interrupt(); active || writes != 0 {
		t.Errorf("Interrupt() after the turn ended = active %t with %d writes, want a no-op", active, writes)
	}
}

// refusedResume resumes an id no home holds: conversation_unavailable, no
// input taken, exit 0 at stdin EOF, no conversation named (R-RES-2).
func refusedResume(t *testing.T, d cliruntime.Driver, spec cliruntime.LaunchSpec, id string) {
	t.Helper()
	spec.ConversationID = id
	h := acpStart(t, d, spec)
	if ev := h.await(cliruntime.EventConversationUnavailable); ev.ConversationID != id {
		t.Errorf("conversation_unavailable for %q, want %q", ev.ConversationID, id)
	}
	if err := h.encode(textInput("hello")); !errors.Is(err, cliruntime.ErrHandshakeFailed) {
		t.Errorf("Encode after a refused resume = %v, want ErrHandshakeFailed", err)
	}
	h.closeStdin()
	if got := exitString(h.waitExit()); got != "code 0" {
		t.Errorf("exit after a refused resume: %s, want code 0", got)
	}
	for _, e := range h.all() {
		if e.Kind == cliruntime.EventConversation {
			t.Errorf("a refused resume named a conversation: %+v", e)
		}
	}
}

// geminiLogs lists the chat logs of the profile home by full path.
func geminiLogs(t *testing.T, home string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(home, ".gemini", "tmp", "*", "chats", "session-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// geminiLogOf is the chat log that holds session sid's turns: the one whose
// name ends in the id's first 8 characters and that has a "gemini" message.
func geminiLogOf(t *testing.T, home, sid string) string {
	t.Helper()
	for _, p := range geminiLogs(t, home) {
		if !strings.HasSuffix(p, "-"+sid[:8]+".jsonl") {
			continue
		}
		for _, r := range jsonlRecords(t, p) {
			if r["type"] == "gemini" {
				return p
			}
		}
	}
	t.Fatalf("no chat log with turns for session %s in %v", sid, geminiLogs(t, home))
	return ""
}

// geminiSaid lists the user and model texts of a chat log in file order.
func geminiSaid(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, r := range jsonlRecords(t, path) {
		switch c := r["content"].(type) {
		case string:
			if r["type"] == "gemini" {
				out = append(out, "model: "+c)
			}
		case []any:
			for _, p := range c {
				if pm, _ := p.(map[string]any); r["type"] == "user" && pm["text"] != nil {
					s, _ := pm["text"].(string)
					out = append(out, "user: "+s)
				}
			}
		}
	}
	return out
}

// logMinute is the UTC minute in a chat log's name.
var logMinute = regexp.MustCompile(`session-\d{4}-\d\d-\d\dT\d\d-\d\d-`)

// ageGeminiLog renames a chat log as if written in 2000. Gemini CLI 0.61.0
// names a log by the UTC minute it starts and the id's first 8 characters,
// and a session/load opens a new log for the id first: in the minute the
// session began that is the session's own log, which it then resets to an
// empty conversation, and the load fails with "No previous sessions found"
// (measured). A test resumes within seconds; a person rarely within the
// minute. The loader finds a log by the id inside it, not by its name.
func ageGeminiLog(t *testing.T, path string) string {
	t.Helper()
	old := filepath.Join(filepath.Dir(path), logMinute.ReplaceAllString(filepath.Base(path), "session-2000-01-01T00-00-"))
	if err := os.Rename(path, old); err != nil {
		t.Fatal(err)
	}
	return old
}

// awaitGeminiTurns waits for n turn requests at the fake.
func awaitGeminiTurns(t *testing.T, fake *fakemodel.Gemini, n int) []fakemodel.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), acpLimit)
	defer cancel()
	got, err := fake.AwaitTurns(ctx, n)
	if err != nil {
		t.Fatalf("Gemini turn requests: got %d, want %d: %v", len(got), n, err)
	}
	return got
}

// awaitMessages waits for n POST /v1/messages at the fake.
func awaitMessages(t *testing.T, fake *fakemodel.Anthropic, n int) []fakemodel.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), acpLimit)
	defer cancel()
	got, err := fake.Await(ctx, fakemodel.MessagesPath, n)
	if err != nil {
		t.Fatalf("model requests: got %d, want %d: %v", len(got), n, err)
	}
	return got
}

// TestRealGeminiHandshake: launch with only an API key, initialize →
// session/new names the session without an authenticate call and without a
// request to any model; stop with the observed exit code (the npm launcher
// and its relaunched child take SIGTERM as a group and exit 0).
func TestRealGeminiHandshake(t *testing.T) {
	t.Parallel()
	bin := realBinDir(t, "gemini")
	spec := geminiSpec(t, bin, nil)

	h := acpStart(t, geminiDriver, spec)
	ev := h.await(cliruntime.EventConversation)
	if !cliruntime.IsUUID(ev.ConversationID) || h.sess.ConversationID() != ev.ConversationID {
		t.Fatalf("session id: event %q, session %q", ev.ConversationID, h.sess.ConversationID())
	}
	if h.sess.TurnActive() {
		t.Error("TurnActive() after the handshake")
	}
	if got := exitString(h.proc.Stop(10 * time.Second)); got != "code 0" {
		t.Errorf("SIGTERM: %s, want code 0", got)
	}
	for _, e := range h.all() {
		if e.Kind == cliruntime.EventError {
			t.Errorf("handshake error event: %+v", e)
		}
	}
	if _, err := os.Stat(filepath.Join(spec.Home, ".gemini", "projects.json")); err != nil {
		t.Errorf("Gemini CLI kept nothing in the profile home: %v", err)
	}
}

// TestRealGeminiTurns: turns against the fake Gemini API, an interrupt of a
// held turn in the same process, stdin EOF; then the resume of the exact
// session in three more processes (R-RES-1, R-HW-4): with only the key,
// where session/load asks for authenticate and the driver answers with the
// key's method, and the history replays between replay_started and
// replay_ended; with the base URL, where the next request carries the whole
// history and the same chat log grows; and an unknown id, refused (R-RES-2).
func TestRealGeminiTurns(t *testing.T) {
	t.Parallel()
	bin := realBinDir(t, "gemini")
	fake := fakemodel.NewGemini()
	defer fake.Close()
	spec := geminiSpec(t, bin, fake)

	h := acpStart(t, geminiDriver, spec)
	wantOK(t, "first turn", realTurn(t, h, textInput("hello")), "end_turn")
	sid := h.sess.ConversationID()
	if !cliruntime.IsUUID(sid) {
		t.Fatalf("session id %q", sid)
	}
	said(t, h, "agent_message_chunk", "pong: hello")
	reqs := awaitGeminiTurns(t, fake, 1)
	if r := reqs[0]; r.Prompt != "hello" || r.Header.Get("X-Goog-Api-Key") != "test" || !r.Stream {
		t.Errorf("first request: prompt %q, x-goog-api-key %q, stream %t", r.Prompt, r.Header.Get("X-Goog-Api-Key"), r.Stream)
	}

	g := fakemodel.NewGate()
	defer g.Release()
	fake.Push(fakemodel.Held(g))
	interruptHeld(t, h, g)
	wantOK(t, "turn after the interrupt", realTurn(t, h, textInput("next")), "end_turn")
	reqs = awaitGeminiTurns(t, fake, 3)
	if said := reqs[2].Said(); !inOrder(said, []string{"user: hello", "model: pong: hello", "user: next"}) {
		t.Errorf("third request's history: %q", said)
	}
	h.closeStdin()
	if got := exitString(h.waitExit()); got != "code 0" {
		t.Errorf("exit after stdin EOF: %s, want code 0", got)
	}
	log := ageGeminiLog(t, geminiLogOf(t, spec.Home, sid))
	if said := geminiSaid(t, log); !inOrder(said, []string{"user: hello", "model: pong: hello", "user: next", "model: pong: next"}) {
		t.Errorf("chat log %s says %q", log, said)
	}
	before := len(jsonlRecords(t, log))

	// Only the key: session/load → -32000 → authenticate → session/load.
	// No model request: the history replays from the log.
	settings := filepath.Join(spec.Home, ".gemini", "settings.json")
	if st := readFile(t, settings); strings.Contains(st, "selectedType") {
		t.Fatalf("settings.json selects an auth type before any authenticate: %s", st)
	}
	keyOnly := spec
	keyOnly.Env = slices.DeleteFunc(slices.Clone(spec.Env), func(kv string) bool { return strings.HasPrefix(kv, "GOOGLE_GEMINI_BASE_URL=") })
	keyOnly.ConversationID = sid
	h2 := acpStart(t, geminiDriver, keyOnly)
	if got := h2.await(cliruntime.EventConversation).ConversationID; got != sid {
		t.Errorf("resumed session %q, want %q", got, sid)
	}
	seen(t, h2, cliruntime.EventReplayEnded)
	if !hasReplay(h2.all()) {
		t.Errorf("resume without replay_started before replay_ended: %s", h2.kinds())
	}
	said(t, h2, "user_message_chunk", "hello")
	said(t, h2, "agent_message_chunk", "pong: hello")
	said(t, h2, "agent_message_chunk", "pong: next")
	// Gemini streams most of the history after the load's answer: the
	// replay must still hold all of it.
	checkWithheld(t, h2, replayed("pong: hello", "pong: next"))
	// Gemini CLI records the authenticate call's choice in settings.json.
	if st := readFile(t, settings); !strings.Contains(st, `"selectedType": "gemini-api-key"`) || !strings.Contains(st, "sessionRetention") {
		t.Errorf("settings.json after the resume with only a key: %s; want the gemini-api-key auth added", st)
	}
	h2.closeStdin()
	if got := exitString(h2.waitExit()); got != "code 0" {
		t.Errorf("exit after stdin EOF: %s, want code 0", got)
	}
	if n := len(fake.Turns()); n != 3 {
		t.Errorf("%d turn requests after a replay-only resume, want 3", n)
	}

	// With the base URL: the next request carries the history.
	rs := spec
	rs.ConversationID = sid
	h3 := acpStart(t, geminiDriver, rs)
	wantOK(t, "resumed turn", realTurn(t, h3, textInput("after resume")), "end_turn")
	if !hasReplay(h3.all()) {
		t.Errorf("resume without replay events: %s", h3.kinds())
	}
	checkWithheld(t, h3, replayed("pong: hello", "pong: next"))
	reqs = awaitGeminiTurns(t, fake, 4)
	if said := reqs[3].Said(); !inOrder(said, []string{"user: hello", "model: pong: hello", "user: next", "model: pong: next", "user: after resume"}) {
		t.Errorf("resumed request's history: %q", said)
	}
	h3.closeStdin()
	h3.waitExit()
	if after := len(jsonlRecords(t, log)); after <= before {
		t.Errorf("chat log: %d records after the resumed turn, %d before; want it appended", after, before)
	}

	refusedResume(t, geminiDriver, spec, "00000000-0000-4000-8000-000000000000")
	if n := len(fake.Turns()); n != 4 {
		t.Errorf("%d turn requests, want 4 (the refused resume sends none)", n)
	}
}

// TestRealOpenCodeHandshake: launch offline, initialize → session/new names
// a ses_ session without a model request; stop with the observed exit code
// (OpenCode dies of SIGTERM).
func TestRealOpenCodeHandshake(t *testing.T) {
	t.Parallel()
	bin := realBinDir(t, "opencode")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	spec := opencodeSpec(t, bin, fake)

	h := acpStart(t, opencodeDriver, spec)
	ev := h.await(cliruntime.EventConversation)
	if err := opencode.CheckID(ev.ConversationID); err != nil || h.sess.ConversationID() != ev.ConversationID {
		t.Fatalf("session id: event %q (%v), session %q", ev.ConversationID, err, h.sess.ConversationID())
	}
	if got := exitString(h.proc.Stop(10 * time.Second)); got != "SIGTERM" {
		t.Errorf("SIGTERM: %s, want SIGTERM", got)
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("the handshake made %d requests to the model server, want none", n)
	}
	for _, e := range h.all() {
		if e.Kind == cliruntime.EventError {
			t.Errorf("handshake error event: %+v", e)
		}
	}
}

// TestRealOpenCodeTurns: turns against the fake Messages server, an
// interrupt of a held turn in the same process, stdin EOF; the resume of the
// exact session in a new process, whose history replays before session/load
// answers and is in the next request (R-RES-1, R-HW-4); an unknown id,
// refused (R-RES-2).
func TestRealOpenCodeTurns(t *testing.T) {
	t.Parallel()
	bin := realBinDir(t, "opencode")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	spec := opencodeSpec(t, bin, fake)

	h := acpStart(t, opencodeDriver, spec)
	wantOK(t, "first turn", realTurn(t, h, textInput("hello")), "end_turn")
	sid := h.sess.ConversationID()
	if err := opencode.CheckID(sid); err != nil {
		t.Fatal(err)
	}
	said(t, h, "agent_message_chunk", "pong: hello")
	reqs := awaitMessages(t, fake, 1)
	if r := reqs[0]; r.Prompt != "hello" || r.Header.Get("X-Api-Key") != "test" {
		t.Errorf("first request: prompt %q, x-api-key %q", r.Prompt, r.Header.Get("X-Api-Key"))
	}

	g := fakemodel.NewGate()
	defer g.Release()
	fake.Push(fakemodel.Held(g))
	interruptHeld(t, h, g)
	wantOK(t, "turn after the interrupt", realTurn(t, h, textInput("next")), "end_turn")
	reqs = awaitMessages(t, fake, 3)
	if said := reqs[2].Said(); !inOrder(said, []string{"user: hello", "assistant: pong: hello", "user: next"}) {
		t.Errorf("third request's history: %q", said)
	}
	h.closeStdin()
	if got := exitString(h.waitExit()); got != "code 0" {
		t.Errorf("exit after stdin EOF: %s, want code 0", got)
	}

	rs := spec
	rs.ConversationID = sid
	h2 := acpStart(t, opencodeDriver, rs)
	if got := h2.await(cliruntime.EventConversation).ConversationID; got != sid {
		t.Errorf("resumed session %q, want %q", got, sid)
	}
	if !hasReplay(h2.all()) {
		t.Errorf("resume without replay events: %s", h2.kinds())
	}
	// The replay came before the answer that ended it.
	out, _, _, _ := h2.stdout.snapshot()
	if got := chunks(out, "user_message_chunk"); !strings.HasPrefix(got, "hello") || !strings.HasSuffix(got, "next") {
		t.Errorf("replayed questions %q by the end of the replay, want hello … next", got)
	}
	wantOK(t, "resumed turn", realTurn(t, h2, textInput("after resume")), "end_turn")
	checkWithheld(t, h2, replayed("pong: hello", "pong: next"))
	reqs = awaitMessages(t, fake, 4)
	if said := reqs[3].Said(); !inOrder(said, []string{"user: hello", "assistant: pong: hello", "user: next", "assistant: pong: next", "user: after resume"}) {
		t.Errorf("resumed request's history: %q", said)
	}
	h2.closeStdin()
	h2.waitExit()

	refusedResume(t, opencodeDriver, spec, "ses_00000000000000000000000000")
	if n := len(fake.ModelRequests()); n != 4 {
		t.Errorf("%d model requests, want 4 (the refused resume sends none)", n)
	}
}
