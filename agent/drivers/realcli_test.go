//go:build linux

package drivers_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/integration/fakemodel"
)

// The real-binary battery: the claude and codex drivers against Claude Code
// 2.1.328 and Codex 0.169.0 themselves (R-DRV-3), each launch in a fresh
// home (R-DRV-5), skipped with the reason when a binary is absent (R-DRV-8).
// TestRealClaudeHandshake and TestRealCodexHandshake send no model turn
// (R-DRV-4); the other cases run real turns against the fakemodel servers
// on 127.0.0.1 (real-clis.md §6). Every wait has a deadline; nothing sleeps.

// initializeLine is Claude's control-protocol handshake: it answers without
// a user message and without a model request (real-clis.md §1.7).
const initializeLine = `{"type":"control_request","request_id":"hs-1","request":{"subtype":"initialize"}}`

// TestRealClaudeHandshake: launch, the control-protocol handshake, stop with
// the observed exit code (Claude Code exits 143 on SIGTERM, §1.8), and no
// request to the model at all.
func TestRealClaudeHandshake(t *testing.T) {
	t.Parallel()
	bin := realBinDir(t, "claude")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	spec := claudeSpec(t, bin, fake)

	h := realStart(t, claudeDriver, spec)
	if err := h.encode(cliruntime.Input{Line: json.RawMessage(initializeLine)}); err != nil {
		t.Fatal(err)
	}
	h.stdout.await(t, "initialize control_response", func(s string, _ int64) bool {
		return strings.Contains(s, `"request_id":"hs-1"`) && strings.Contains(s, `"subtype":"success"`)
	})
	if h.sess.TurnActive() {
		t.Error("TurnActive() after a control request; it starts no turn")
	}
	for _, e := range h.all() {
		t.Errorf("event from the handshake alone: %+v", e)
	}
	if got := exitString(h.proc.Stop(5 * time.Second)); got != "code 143" {
		t.Errorf("SIGTERM: %s, want code 143", got)
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("the handshake made %d requests to the model server, want none: %+v", n, fake.Requests())
	}
	if got := claudeTranscripts(t, spec.Home); len(got) != 0 {
		t.Errorf("transcripts after a handshake: %v, want none", got)
	}
}

// TestRealCodexHandshake: launch, initialize → thread/start names the thread,
// stop with the observed exit code; stdin EOF ends app-server at once
// (real-clis.md §2.1). No model request, no rollout (it comes with the first
// turn, §2.2).
func TestRealCodexHandshake(t *testing.T) {
	t.Parallel()
	bin := realBinDir(t, "codex")
	fake := fakemodel.NewOpenAI()
	defer fake.Close()
	spec := codexSpec(t, bin, fake)

	h := realStart(t, codexDriver, spec)
	ev := h.await(cliruntime.EventConversation)
	if !cliruntime.IsUUID(ev.ConversationID) || h.sess.ConversationID() != ev.ConversationID {
		t.Fatalf("thread id: event %q, session %q; want one UUID", ev.ConversationID, h.sess.ConversationID())
	}
	if h.sess.TurnActive() {
		t.Error("TurnActive() after the handshake")
	}
	if got := exitString(h.proc.Stop(5 * time.Second)); got != "code 0" {
		t.Errorf("SIGTERM: %s, want code 0", got)
	}

	h = realStart(t, codexDriver, spec)
	h.await(cliruntime.EventConversation)
	h.closeStdin()
	if got := exitString(h.waitExit()); got != "code 0" {
		t.Errorf("exit after stdin EOF: %s, want code 0", got)
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("the handshake made %d requests to the model server, want none", n)
	}
	if got := codexRollouts(t, spec.Home); len(got) != 0 {
		t.Errorf("rollouts after handshakes only: %v, want none", got)
	}
	for _, e := range h.all() {
		if e.Kind == cliruntime.EventError {
			t.Errorf("handshake error event: %+v", e)
		}
	}
}

// TestRealClaudeTurns: two turns in one process, then a tool call; the fake's
// answers arrive on stdout, the driver sees each turn start and end, and the
// transcript lands in the profile home. Then resume proves the exact
// conversation (R-RES-1): the same session id, the same transcript file
// appended, the whole history in the next model request; and an unknown id is
// EventConversationUnavailable (R-RES-2).
func TestRealClaudeTurns(t *testing.T) {
	t.Parallel()
	bin := realBinDir(t, "claude")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	spec := claudeSpec(t, bin, fake)

	h := realStart(t, claudeDriver, spec)
	wantOK(t, "first turn", realTurn(t, h, messageInput("hello")), "completed")
	ev, _ := h.first(cliruntime.EventConversation)
	sid := ev.ConversationID
	if !cliruntime.IsUUID(sid) || h.sess.ConversationID() != sid {
		t.Fatalf("session id: event %q, session %q", sid, h.sess.ConversationID())
	}
	h.stdout.await(t, "first answer", func(s string, _ int64) bool { return strings.Contains(s, "pong: hello") })
	reqs := awaitModel(t, fake.Await, fakemodel.MessagesPath, 1)
	if r := reqs[0]; r.Prompt != "hello" || r.Header.Get("X-Api-Key") != "test" || r.Header.Get("X-Claude-Code-Session-Id") != sid || !r.Stream {
		t.Errorf("first request: prompt %q, x-api-key %q, session %q, stream %t", r.Prompt, r.Header.Get("X-Api-Key"), r.Header.Get("X-Claude-Code-Session-Id"), r.Stream)
	}

	// A second turn in the same process carries the first in its history.
	wantOK(t, "second turn", realTurn(t, h, messageInput("again")), "completed")
	h.stdout.await(t, "second answer", func(s string, _ int64) bool { return strings.Contains(s, "pong: again") })
	reqs = awaitModel(t, fake.Await, fakemodel.MessagesPath, 2)
	if said := reqs[1].Said(); !inOrder(said, []string{"user: hello", "assistant: pong: hello", "user: again"}) {
		t.Errorf("second request's history: %q", said)
	}
	if got := h.all(); len(slices.DeleteFunc(slices.Clone(got), func(e cliruntime.Event) bool { return e.Kind != cliruntime.EventConversation })) != 1 {
		t.Errorf("conversation events over two turns: %s, want exactly one", h.kinds())
	}

	// A tool call: Claude reads the file and sends the result back.
	if err := os.WriteFile(filepath.Join(spec.Workdir, "notes.txt"), []byte("canary-in-notes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	input, _ := json.Marshal(map[string]string{"file_path": filepath.Join(spec.Workdir, "notes.txt")})
	call := fakemodel.Tool("Read", string(input))
	call.Tool.ID = "toolu_fake_read"
	fake.Push(call, fakemodel.Text("read it"))
	wantOK(t, "tool turn", realTurn(t, h, messageInput("read notes.txt")), "completed")
	h.stdout.await(t, "tool answer", func(s string, _ int64) bool { return strings.Contains(s, "read it") })
	reqs = awaitModel(t, fake.Await, fakemodel.MessagesPath, 4)
	var result string
	for _, m := range reqs[3].History {
		if i := slices.Index(m.ToolResults, "toolu_fake_read"); i >= 0 {
			result = m.Outputs[i]
		}
	}
	if !strings.Contains(result, "canary-in-notes") {
		t.Errorf("tool_result for toolu_fake_read = %q, want the file's text", result)
	}

	h.closeStdin()
	if got := exitString(h.waitExit()); got != "code 0" {
		t.Errorf("exit after stdin EOF: %s, want code 0", got)
	}
	path := claudeTranscript(t, spec, sid)
	if said := claudeSaid(t, path); !inOrder(said, []string{"user: hello", "assistant: pong: hello", "user: again", "assistant: pong: again", "assistant: read it"}) {
		t.Errorf("transcript %s says %q", path, said)
	}
	before := len(jsonlRecords(t, path))

	// Resume: same session, same file, the history sent again.
	rs := spec
	rs.ConversationID = sid
	h2 := realStart(t, claudeDriver, rs)
	wantOK(t, "resumed turn", realTurn(t, h2, messageInput("after resume")), "completed")
	if ev, _ := h2.first(cliruntime.EventConversation); ev.ConversationID != sid {
		t.Errorf("resumed session %q, want %q", ev.ConversationID, sid)
	}
	reqs = awaitModel(t, fake.Await, fakemodel.MessagesPath, 5)
	if r := reqs[4]; r.Header.Get("X-Claude-Code-Session-Id") != sid ||
		!inOrder(r.Said(), []string{"user: hello", "assistant: pong: hello", "user: again", "assistant: pong: again", "assistant: read it", "user: after resume"}) {
		t.Errorf("resumed request: session %q, history %q", r.Header.Get("X-Claude-Code-Session-Id"), r.Said())
	}
	h2.closeStdin()
	h2.waitExit()
	if after := len(jsonlRecords(t, path)); after <= before {
		t.Errorf("transcript %s: %d records after the resumed turn, %d before; want it appended", path, after, before)
	}
	if said := claudeSaid(t, path); !inOrder(said, []string{"user: hello", "user: after resume", "assistant: pong: after resume"}) {
		t.Errorf("transcript after resume says %q", said)
	}
	if got, want := claudeTranscripts(t, spec.Home), []string{sid + ".jsonl"}; !slices.Equal(got, want) {
		t.Errorf("transcripts %v, want only %v", got, want)
	}

	// An unknown id: refused at spawn, exit 1, no conversation made.
	ru := spec
	ru.ConversationID = "11111111-2222-4333-8444-555555555555"
	h3 := realStart(t, claudeDriver, ru)
	if ev := h3.await(cliruntime.EventConversationUnavailable); ev.ConversationID != ru.ConversationID {
		t.Errorf("conversation_unavailable for %q, want %q", ev.ConversationID, ru.ConversationID)
	}
	if err := h3.encode(messageInput("hello")); !errors.Is(err, cliruntime.ErrHandshakeFailed) {
		t.Errorf("Encode after a refused resume = %v, want ErrHandshakeFailed", err)
	}
	h3.closeStdin()
	if got := exitString(h3.waitExit()); got != "code 1" {
		t.Errorf("exit after a refused resume: %s, want code 1", got)
	}
	if got := claudeTranscripts(t, spec.Home); len(got) != 1 {
		t.Errorf("transcripts after a refused resume: %v", got)
	}
	if n := len(fake.ModelRequests()); n != 5 {
		t.Errorf("%d model requests, want 5 (the refused resume sends none)", n)
	}
}

// TestRealCodexTurns: the same for Codex: turns, a tool call, the rollout,
// thread/resume in a new process (real-clis.md §2.2: needed before
// turn/start) with the history sent and the same rollout appended, and an
// unknown thread refused.
func TestRealCodexTurns(t *testing.T) {
	t.Parallel()
	bin := realBinDir(t, "codex")
	fake := fakemodel.NewOpenAI()
	defer fake.Close()
	spec := codexSpec(t, bin, fake)

	h := realStart(t, codexDriver, spec)
	thread := h.await(cliruntime.EventConversation).ConversationID
	end := realTurn(t, h, textInput("hello"))
	wantOK(t, "first turn", end, "completed")
	if end.TurnID == "" {
		t.Errorf("turn end without a turn id: %+v", end)
	}
	h.stdout.await(t, "first answer", func(s string, _ int64) bool { return strings.Contains(s, "pong: hello") })
	reqs := awaitModel(t, fake.Await, fakemodel.ResponsesPath, 1)
	if r := reqs[0]; r.Prompt != "hello" || r.Header.Get("Authorization") != "Bearer test" || r.Header.Get("Originator") != "olivares" {
		t.Errorf("first request: prompt %q, authorization %q, originator %q", r.Prompt, r.Header.Get("Authorization"), r.Header.Get("Originator"))
	}

	// A tool call: Codex runs it and sends the output back.
	call := fakemodel.Tool("exec_command", `{"cmd":"echo canary-from-tool"}`)
	call.Tool.ID = "call_fake_exec"
	fake.Push(call, fakemodel.Text("ran it"))
	wantOK(t, "tool turn", realTurn(t, h, textInput("run echo")), "completed")
	h.stdout.await(t, "tool answer", func(s string, _ int64) bool { return strings.Contains(s, "ran it") })
	reqs = awaitModel(t, fake.Await, fakemodel.ResponsesPath, 3)
	var output string
	for _, m := range reqs[2].History {
		if i := slices.Index(m.ToolResults, "call_fake_exec"); i >= 0 {
			output = m.Outputs[i]
		}
	}
	if !strings.Contains(output, "canary-from-tool") {
		t.Errorf("function_call_output for call_fake_exec = %q, want the command's output", output)
	}

	h.closeStdin()
	if got := exitString(h.waitExit()); got != "code 0" {
		t.Errorf("exit after stdin EOF: %s, want code 0", got)
	}
	rollouts := codexRollouts(t, spec.Home)
	if len(rollouts) != 1 || !strings.HasSuffix(rollouts[0], "-"+thread+".jsonl") {
		t.Fatalf("rollouts %v, want one for thread %s", rollouts, thread)
	}
	path := rollouts[0]
	if said := codexSaid(t, path); !inOrder(said, []string{"user: hello", "assistant: pong: hello", "user: run echo", "assistant: ran it"}) {
		t.Errorf("rollout %s says %q", path, said)
	}
	before := len(jsonlRecords(t, path))

	rs := spec
	rs.ConversationID = thread
	h2 := realStart(t, codexDriver, rs)
	if got := h2.await(cliruntime.EventConversation).ConversationID; got != thread {
		t.Errorf("resumed thread %q, want %q", got, thread)
	}
	wantOK(t, "resumed turn", realTurn(t, h2, textInput("after resume")), "completed")
	reqs = awaitModel(t, fake.Await, fakemodel.ResponsesPath, 4)
	if said := reqs[3].Said(); !inOrder(said, []string{"user: hello", "assistant: pong: hello", "user: run echo", "assistant: ran it", "user: after resume"}) {
		t.Errorf("resumed request's history: %q", said)
	}
	h2.closeStdin()
	h2.waitExit()
	if got := codexRollouts(t, spec.Home); !slices.Equal(got, []string{path}) {
		t.Errorf("rollouts after resume %v, want only %s", got, path)
	}
	if after := len(jsonlRecords(t, path)); after <= before {
		t.Errorf("rollout: %d records after the resumed turn, %d before; want it appended", after, before)
	}

	ru := spec
	ru.ConversationID = "01a23643-8a79-7b72-93b2-000000000000"
	h3 := realStart(t, codexDriver, ru)
	if ev := h3.await(cliruntime.EventConversationUnavailable); ev.ConversationID != ru.ConversationID {
		t.Errorf("conversation_unavailable for %q, want %q", ev.ConversationID, ru.ConversationID)
	}
	if err := h3.encode(textInput("hello")); !errors.Is(err, cliruntime.ErrHandshakeFailed) {
		t.Errorf("Encode after a refused resume = %v, want ErrHandshakeFailed", err)
	}
	h3.closeStdin()
	if got := exitString(h3.waitExit()); got != "code 0" {
		t.Errorf("exit after a refused resume: %s, want code 0", got)
	}
	if got := codexRollouts(t, spec.Home); !slices.Equal(got, []string{path}) {
		t.Errorf("rollouts after a refused resume: %v", got)
	}
}

// TestRealInterrupt: an interrupt cancels a turn the fake holds open; the CLI
// drops the request, the process stays, and it takes the next turn (R-INT-1).
func TestRealInterrupt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bin    string
		reason string
		// partial: the held delta shows on stdout (Codex's
		// item/agentMessage/delta; Claude prints no partial text without
		// --include-partial-messages).
		partial bool
		run     func(t *testing.T, bin string, g *fakemodel.Gate) (*harness, func(text string) cliruntime.Input)
	}{
		{"claude", "claude", "aborted_streaming", false, func(t *testing.T, bin string, g *fakemodel.Gate) (*harness, func(string) cliruntime.Input) {
			fake := fakemodel.NewAnthropic()
			t.Cleanup(fake.Close)
			fake.Push(fakemodel.Held(g))
			return realStart(t, claudeDriver, claudeSpec(t, bin, fake)), messageInput
		}},
		{"codex", "codex", "interrupted", true, func(t *testing.T, bin string, g *fakemodel.Gate) (*harness, func(string) cliruntime.Input) {
			fake := fakemodel.NewOpenAI()
			t.Cleanup(fake.Close)
			fake.Push(fakemodel.Held(g))
			return realStart(t, codexDriver, codexSpec(t, bin, fake)), textInput
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bin := realBinDir(t, tc.bin)
			g := fakemodel.NewGate()
			defer g.Release()
			h, in := tc.run(t, bin, g)
			pid := h.proc.Pid()
			if err := h.encode(in("hold on")); err != nil {
				t.Fatal(err)
			}
			h.await(cliruntime.EventTurnStarted)
			wait(t, g.Arrived(), "held request")
			if tc.partial {
				h.stdout.await(t, "held delta", func(s string, _ int64) bool { return strings.Contains(s, "held") })
			}
			if active, writes := h.interrupt(); !active || writes != 1 {
				t.Fatalf("Interrupt() during a turn = active %t with %d writes, want one write", active, writes)
			}
			end := h.await(cliruntime.EventTurnEnded)
			if !end.IsError || end.Reason != tc.reason {
				t.Errorf("interrupted turn ended %+v, want is_error and reason %q", end, tc.reason)
			}
			wait(t, g.Gone(), "the CLI dropping the held request")
			if !h.alive() || h.proc.Pid() != pid {
				t.Fatal("the process did not survive the interrupt")
			}
			if active, writes := h.interrupt(); active || writes != 0 {
				t.Errorf("Interrupt() after the turn ended = active %t with %d writes, want a no-op (R-INT-2)", active, writes)
			}
			wantOK(t, "turn after the interrupt", realTurn(t, h, in("next")), "completed")
			h.stdout.await(t, "answer after the interrupt", func(s string, _ int64) bool { return strings.Contains(s, "pong: next") })
		})
	}
}

// TestRealInterruptEarly: an interrupt given right after the input, before
// the tool has named the turn (R-INT-1; the Session contract: "remembered
// and written once it does"). Claude takes the control request at once and
// aborts the turn, even before its model request; Codex must get
// turn/interrupt only once it will accept it.
func TestRealInterruptEarly(t *testing.T) {
	for _, tc := range []struct {
		name, bin, reason string
		run               func(t *testing.T, bin string, g *fakemodel.Gate) (*harness, func(text string) cliruntime.Input)
	}{
		{"claude", "claude", "aborted_streaming", func(t *testing.T, bin string, g *fakemodel.Gate) (*harness, func(string) cliruntime.Input) {
			fake := fakemodel.NewAnthropic()
			t.Cleanup(fake.Close)
			fake.Push(fakemodel.Held(g))
			return realStart(t, claudeDriver, claudeSpec(t, bin, fake)), messageInput
		}},
		{"codex", "codex", "interrupted", func(t *testing.T, bin string, g *fakemodel.Gate) (*harness, func(string) cliruntime.Input) {
			fake := fakemodel.NewOpenAI()
			t.Cleanup(fake.Close)
			fake.Push(fakemodel.Held(g))
			return realStart(t, codexDriver, codexSpec(t, bin, fake)), textInput
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bin := realBinDir(t, tc.bin)
			g := fakemodel.NewGate()
			defer g.Release()
			h, in := tc.run(t, bin, g)
			if err := h.encode(in("stop me")); err != nil {
				t.Fatal(err)
			}
			if active, _ := h.interrupt(); !active {
				t.Fatal("Interrupt() right after the input: not active")
			}
			// Codex 0.169.0 refuses an interrupt sent between the turn/start
			// result and turn/started ("no active turn to interrupt"); the
			// driver retries it once at turn/started, so the turn is
			// cancelled either way.
			end := h.await(cliruntime.EventTurnEnded)
			if !end.IsError || end.Reason != tc.reason {
				t.Errorf("interrupted turn ended %+v, want is_error and reason %q", end, tc.reason)
			}
			if h.sess.TurnActive() {
				t.Error("TurnActive() after the interrupted turn ended")
			}
			// A held answer the CLI never asked for finishes at once now.
			g.Release()
			wantOK(t, "turn after the interrupt", realTurn(t, h, in("next")), "completed")
			h.stdout.await(t, "answer after the interrupt", func(s string, _ int64) bool { return strings.Contains(s, "pong: next") })
		})
	}
}

// TestRealClaudeLimits: R-LIM-5 with the responses real-clis.md §1.10 says
// produce each result. An API-key 429 is a rate limit with no reset; a 429
// with the unified headers under subscription auth is usage_limit_reached
// with the reset from the rate_limit_event; a 500 and a good turn set no
// limit (R-LIM-9).
func TestRealClaudeLimits(t *testing.T) {
	reset := time.Now().Add(3 * time.Hour).Truncate(time.Second).UTC()
	for _, tc := range []struct {
		name  string
		env   []string
		reply fakemodel.Reply
		want  *cliruntime.Limit
	}{
		{"rate", nil, fakemodel.AnthropicRateLimited(), &cliruntime.Limit{Kind: cliruntime.LimitRate}},
		{"usage", []string{"CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-fake"}, fakemodel.AnthropicUsageLimit(reset), &cliruntime.Limit{Kind: cliruntime.LimitUsage, ResetsAt: &reset}},
		{"server-error", nil, fakemodel.AnthropicServerError(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bin := realBinDir(t, "claude")
			fake := fakemodel.NewAnthropic()
			defer fake.Close()
			h := realStart(t, claudeDriver, claudeSpec(t, bin, fake, tc.env...))
			fake.Push(tc.reply)
			end := realTurn(t, h, messageInput("hello"))
			if !end.IsError || end.Reason != "api_error" {
				t.Errorf("failed turn ended %+v, want is_error and reason api_error", end)
			}
			checkLimit(t, limits(h.all()), tc.want)
			// The next good turn sets no limit (R-LIM-8 is the supervisor's
			// clearing; the driver must simply report none).
			n := len(h.all())
			wantOK(t, "turn after the failure", realTurn(t, h, messageInput("again")), "completed")
			if got := limits(since(h, n)); len(got) != 0 {
				t.Errorf("limit events of a good turn: %+v", got)
			}
		})
	}
}

// TestRealCodexLimits: R-LIM-6 with the responses real-clis.md §2.5 says
// produce each typed failure: HTTP 429 usage_limit_reached is
// usageLimitExceeded, with the later reset of the two exhausted windows;
// response.failed rate_limit_exceeded is rateLimitExceeded; an HTTP 429
// rate_limit_exceeded (responseTooManyFailedAttempts) and an HTTP 500 are no
// limit (R-LIM-9). One process runs them all, then a good turn.
func TestRealCodexLimits(t *testing.T) {
	t.Parallel()
	bin := realBinDir(t, "codex")
	fake := fakemodel.NewOpenAI()
	defer fake.Close()
	h := realStart(t, codexDriver, codexSpec(t, bin, fake))
	h.await(cliruntime.EventConversation)

	now := time.Now().Truncate(time.Second).UTC()
	early, late := now.Add(2*time.Hour), now.Add(50*time.Hour)
	for _, tc := range []struct {
		name  string
		reply fakemodel.Reply
		want  *cliruntime.Limit
	}{
		{"usage", fakemodel.OpenAIUsageLimit(fakemodel.CodexWindows(
			&fakemodel.Window{UsedPercent: 100, Minutes: 300, ResetAt: early},
			&fakemodel.Window{UsedPercent: 100, Minutes: 10080, ResetAt: late})),
			&cliruntime.Limit{Kind: cliruntime.LimitUsage, ResetsAt: &late}},
		{"rate", fakemodel.OpenAIRateLimitFailed(), &cliruntime.Limit{Kind: cliruntime.LimitRate}},
		{"http-429", fakemodel.OpenAIRateLimited429(), nil},
		{"server-error", fakemodel.OpenAIServerError(), nil},
	} {
		n := len(h.all())
		fake.Push(tc.reply)
		end := realTurn(t, h, textInput(tc.name))
		if !end.IsError || end.Reason != "failed" {
			t.Errorf("%s: turn ended %+v, want is_error and reason failed", tc.name, end)
		}
		t.Run(tc.name, func(t *testing.T) { checkLimit(t, limits(since(h, n)), tc.want) })
	}
	n := len(h.all())
	wantOK(t, "good turn", realTurn(t, h, textInput("fine")), "completed")
	if got := limits(since(h, n)); len(got) != 0 {
		t.Errorf("limit events of a good turn: %+v", got)
	}
}

// checkLimit compares the limit events of one turn with want (nil: none).
func checkLimit(t *testing.T, got []cliruntime.Event, want *cliruntime.Limit) {
	t.Helper()
	if want == nil {
		if len(got) != 0 {
			t.Errorf("limit events %+v, want none", got)
		}
		return
	}
	if len(got) != 1 || got[0].Limit == nil {
		t.Fatalf("limit events %+v, want one %+v", got, want)
	}
	l := got[0].Limit
	if l.Kind != want.Kind {
		t.Errorf("limit kind %q, want %q", l.Kind, want.Kind)
	}
	switch {
	case want.ResetsAt == nil && l.ResetsAt != nil:
		t.Errorf("limit resets_at %v, want none", l.ResetsAt)
	case want.ResetsAt != nil && (l.ResetsAt == nil || !l.ResetsAt.Equal(*want.ResetsAt)):
		t.Errorf("limit resets_at %v, want %v", l.ResetsAt, want.ResetsAt)
	}
}

// TestRealClaudeIsolateSettings: R-PCS-15. With IsolateSettings the driver
// passes --setting-sources "", and Claude Code does not load the project's
// .claude/settings.json (real-clis.md §1.5); without it, it does. The model
// named there is what the model request shows.
func TestRealClaudeIsolateSettings(t *testing.T) {
	const model = "claude-project-setting-model"
	for _, isolate := range []bool{true, false} {
		name := map[bool]string{true: "isolated", false: "project-settings"}[isolate]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bin := realBinDir(t, "claude")
			fake := fakemodel.NewAnthropic()
			defer fake.Close()
			spec := claudeSpec(t, bin, fake)
			spec.IsolateSettings = isolate
			if err := os.MkdirAll(filepath.Join(spec.Workdir, ".claude"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(spec.Workdir, ".claude", "settings.json"), []byte(`{"model":"`+model+`"}`), 0o600); err != nil {
				t.Fatal(err)
			}
			h := realStart(t, claudeDriver, spec)
			wantOK(t, "turn", realTurn(t, h, messageInput("which model")), "completed")
			reqs := awaitModel(t, fake.Await, fakemodel.MessagesPath, 1)
			if got := reqs[0].Model == model; got == isolate {
				t.Errorf("IsolateSettings %t: the request's model is %q; the project setting names %q", isolate, reqs[0].Model, model)
			}
		})
	}
}
