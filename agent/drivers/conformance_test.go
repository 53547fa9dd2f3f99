//go:build linux

package drivers_test

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/claude"
	"github.com/olivares-dev/olivares/agent/drivers/codex"
	"github.com/olivares-dev/olivares/agent/drivers/fake"
	"github.com/olivares-dev/olivares/agent/drivers/gemini"
	"github.com/olivares-dev/olivares/agent/drivers/grok"
	"github.com/olivares-dev/olivares/agent/drivers/opencode"
	"github.com/olivares-dev/olivares/agent/sessions"
)

// peer is one row of the conformance table: a driver and the local peer it
// runs against.
type peer struct {
	name   string
	driver cliruntime.Driver
	// input is the right-field input for a user text; wrong uses a field the
	// driver does not take (R-IN-2).
	input func(text string) cliruntime.Input
	wrong cliruntime.Input
	// runner starts children: ProcRunner for fakecli, the fake's own for
	// the in-process fake.
	runner func(t *testing.T) sessions.Runner
	// binary is LaunchSpec.Binary; conversations lists what the tool's
	// home holds.
	binary        func(t *testing.T) string
	conversations func(t *testing.T, home string) []string
	// unknownID is a well-formed id that no home holds.
	unknownID string
	// interrupted is the Reason of an interrupted turn.
	interrupted string
	// termExit is the exit SIGTERM gives (real-clis.md §1.8, §2.1).
	termExit string
	// refusedExit is the exit after a refused resume.
	refusedExit string
	// process: a real child (calls log, PTY cases).
	process bool
	// ptyRefused: the launch form refuses a terminal (claude, R-TR-3);
	// otherwise the peer also runs on the PTY runner (R-DRV-7).
	ptyRefused bool
	// replays: a resume replays the history, bracketed by replay events
	// (the ACP tools, R-HW-4).
	replays bool
	// env is what the profile adds (a key the tool needs to start a
	// session).
	env []string
}

func textInput(s string) cliruntime.Input { return cliruntime.Input{Text: s} }

func messageInput(s string) cliruntime.Input {
	b, _ := json.Marshal(s)
	return cliruntime.Input{Message: b}
}

func procRunner(*testing.T) sessions.Runner { return sessions.NewProcRunner() }

func glob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range m {
		ids = append(ids, filepath.Base(p))
	}
	slices.Sort(ids)
	return ids
}

func peers() []peer {
	store := fake.NewStore()
	return []peer{
		{
			name: "claude", driver: claude.New(), input: messageInput, wrong: cliruntime.Input{Text: "hi"},
			runner: procRunner, binary: func(t *testing.T) string { return fakecliBin(t, cliruntime.KindClaude) },
			conversations: func(t *testing.T, home string) []string {
				return glob(t, filepath.Join(home, ".claude", "projects", "*", "*.jsonl"))
			},
			unknownID: "11111111-2222-4333-8444-555555555555", interrupted: "aborted_streaming",
			termExit: "code 143", refusedExit: "code 1", process: true, ptyRefused: true,
		},
		{
			name: "codex", driver: codex.New(), input: textInput, wrong: messageInput("hi"),
			runner: procRunner, binary: func(t *testing.T) string { return fakecliBin(t, cliruntime.KindCodex) },
			conversations: func(t *testing.T, home string) []string {
				return glob(t, filepath.Join(home, ".codex", "sessions", "*", "*", "*", "rollout-*.jsonl"))
			},
			unknownID: "01a23643-8a79-7b72-93b2-000000000000", interrupted: "interrupted",
			termExit: "code 0", refusedExit: "code 0", process: true,
		},
		{
			name: "grok", driver: grok.New(), input: textInput, wrong: cliruntime.Input{Line: json.RawMessage(`{"type":"user"}`)},
			runner: procRunner, binary: func(t *testing.T) string { return fakecliBin(t, cliruntime.KindGrok) },
			conversations: func(t *testing.T, home string) []string {
				return glob(t, filepath.Join(home, ".grok", "sessions", "*", "*"))
			},
			unknownID: "00000000-0000-4000-8000-000000000000", interrupted: "cancelled",
			termExit: "SIGTERM", refusedExit: "code 0", process: true, replays: true,
		},
		{
			// the optional ACP drivers pass the same table. Gemini
			// needs a key for session/new; its session/load then asks for
			// authenticate, which the driver answers with the key's method.
			name: "gemini", driver: gemini.New(), input: textInput, wrong: messageInput("hi"),
			runner: procRunner, binary: func(t *testing.T) string { return fakecliBin(t, cliruntime.KindGemini) },
			conversations: func(t *testing.T, home string) []string {
				return glob(t, filepath.Join(home, ".gemini", "tmp", "*", "chats", "session-*.jsonl"))
			},
			unknownID: "00000000-0000-4000-8000-000000000000", interrupted: "cancelled",
			termExit: "code 0", refusedExit: "code 0", process: true, replays: true,
			env: []string{"GEMINI_API_KEY=test"},
		},
		{
			name: "opencode", driver: opencode.New(), input: textInput, wrong: cliruntime.Input{Line: json.RawMessage(`{"type":"user"}`)},
			runner: procRunner, binary: func(t *testing.T) string { return fakecliBin(t, cliruntime.KindOpenCode) },
			conversations: func(t *testing.T, home string) []string {
				return glob(t, filepath.Join(home, ".local", "share", "opencode", "storage", "session", "ses_*.json"))
			},
			unknownID: "ses_00000000000000000000000000", interrupted: "cancelled",
			termExit: "SIGTERM", refusedExit: "code 0", process: true, replays: true,
		},
		{
			// R-DRV-2: the in-process fake passes the same table, less what
			// needs a real process.
			name: "fake", driver: fake.New(), input: textInput, wrong: messageInput("hi"),
			runner: func(*testing.T) sessions.Runner { return fake.NewRunner(store) },
			binary: func(*testing.T) string { return "" },
			conversations: func(*testing.T, string) []string {
				ids := store.Conversations()
				slices.Sort(ids)
				return ids
			},
			unknownID: "conv-unknown", interrupted: "cancelled",
			termExit: "SIGTERM", refusedExit: "code 1",
		},
	}
}

func newSpec(t *testing.T, p peer) cliruntime.LaunchSpec {
	t.Helper()
	home := t.TempDir()
	// CODEX_HOME must exist (real-clis.md §0.2); the profile set-up makes it.
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	return cliruntime.LaunchSpec{Binary: p.binary(t), Home: home, Workdir: t.TempDir(),
		Env: append([]string{"PATH=" + cliruntime.DefaultPath}, p.env...)}
}

// launch starts spec's launch (or resume, when it names a conversation).
func launch(t *testing.T, p peer, r sessions.Runner, spec cliruntime.LaunchSpec) *harness {
	t.Helper()
	var cmd cliruntime.Command
	var err error
	if spec.ConversationID == "" {
		cmd, err = p.driver.Launch(spec)
	} else {
		cmd, err = p.driver.Resume(spec)
	}
	if err != nil {
		t.Fatalf("command: %v", err)
	}
	return start(t, r, cmd, p.driver.NewSession(spec))
}

// turn sends text and waits for its turn to end.
func turn(t *testing.T, h *harness, p peer, text string) cliruntime.Event {
	t.Helper()
	if err := h.encode(p.input(text)); err != nil {
		t.Fatalf("Encode(%q): %v", text, err)
	}
	h.await(cliruntime.EventTurnStarted)
	return h.await(cliruntime.EventTurnEnded)
}

// TestConformance drives every driver through launch → input → output
// events → interrupt → stdin close and exit → resume of the same
// conversation with its history → resume of an unknown id (R-DRV-2, R-IN-1/2,
// R-INT-1/2, R-RES-1/2, R-STOP-1, R-EXIT-1/3).
func TestConformance(t *testing.T) {
	for _, p := range peers() {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			if got := p.driver.LaunchTransport(); got != cliruntime.TransportStdio {
				t.Fatalf("LaunchTransport() = %q; every contract form is stdio (R-TR-2)", got)
			}
			r := p.runner(t)
			spec := newSpec(t, p)
			before := p.conversations(t, spec.Home)

			// Launch and a first turn: the conversation is named, the echo
			// arrives on stdout (R-IN-1, R-IN-4).
			h := launch(t, p, r, spec)
			pid := h.proc.Pid()
			if end := turn(t, h, p, "hello"); end.IsError {
				t.Fatalf("first turn ended with an error: %+v", end)
			}
			// The conversation is named by the first turn at the latest
			// (Claude: system/init; Codex, ACP: the handshake).
			ev, ok := h.first(cliruntime.EventConversation)
			conv := ev.ConversationID
			if !ok || conv == "" || h.sess.ConversationID() != conv {
				t.Fatalf("conversation id: event %q, session %q", conv, h.sess.ConversationID())
			}
			h.stdout.await(t, "echo", func(s string, _ int64) bool { return strings.Contains(s, "pong: hello") })

			// R-IN-2: the wrong field is refused before anything is written.
			if err := p.driver.CheckInput(p.wrong); !errors.Is(err, cliruntime.ErrWrongInputField) {
				t.Errorf("CheckInput(wrong field) = %v, want ErrWrongInputField", err)
			}
			if err := h.encode(p.wrong); !errors.Is(err, cliruntime.ErrWrongInputField) {
				t.Errorf("Encode(wrong field) = %v, want ErrWrongInputField", err)
			}

			// R-INT-2: an idle interrupt is a no-op that writes nothing.
			if active, writes := h.interrupt(); active || writes != 0 {
				t.Errorf("idle Interrupt() = active %t with %d writes, want a no-op", active, writes)
			}

			// R-INT-1: interrupt cancels the running turn; the process
			// stays, and takes the next input.
			if err := h.encode(p.input("slow")); err != nil {
				t.Fatal(err)
			}
			h.await(cliruntime.EventTurnStarted)
			if active, _ := h.interrupt(); !active {
				t.Fatal("Interrupt() during a turn: not active")
			}
			end := h.await(cliruntime.EventTurnEnded)
			if !end.IsError || end.Reason != p.interrupted {
				t.Errorf("interrupted turn ended %+v, want is_error and reason %q", end, p.interrupted)
			}
			if !h.alive() || h.proc.Pid() != pid {
				t.Fatal("the process did not survive the interrupt")
			}
			if end := turn(t, h, p, "after"); end.IsError {
				t.Errorf("turn after the interrupt: %+v", end)
			}
			// An interrupt right after the input, before the tool named
			// the turn, cancels that turn too, as the real CLIs do
			// (TestRealInterruptEarly), and the next input is answered.
			if err := h.encode(p.input("slow")); err != nil {
				t.Fatal(err)
			}
			if active, _ := h.interrupt(); !active {
				t.Fatal("Interrupt() right after the input: not active")
			}
			if end := h.await(cliruntime.EventTurnEnded); !end.IsError || end.Reason != p.interrupted {
				t.Errorf("turn interrupted before it began ended %+v, want is_error and reason %q", end, p.interrupted)
			}
			if end := turn(t, h, p, "after early"); end.IsError {
				t.Errorf("turn after the early interrupt: %+v", end)
			}
			h.stdout.await(t, "answer after the early interrupt", func(s string, _ int64) bool { return strings.Contains(s, "pong: after early") })

			// stderr stays its own stream (R-TR-2); bulk output gets through.
			turn(t, h, p, "stderr canary-on-stderr")
			h.stderr.await(t, "stderr", func(s string, _ int64) bool { return strings.Contains(s, "canary-on-stderr") })
			_, atFlood, _, _ := h.stdout.snapshot()
			if end := turn(t, h, p, "flood 1048576"); end.IsError {
				t.Errorf("flood turn: %+v", end)
			}
			h.stdout.await(t, "flood", func(_ string, n int64) bool { return n-atFlood >= 1<<20 })
			if h.sess.TurnActive() {
				t.Error("TurnActive() after every turn ended")
			}

			// stdin EOF: the tool exits 0 (real-clis.md §1.1, §2.1).
			h.closeStdin()
			if got := exitString(h.waitExit()); got != "code 0" {
				t.Errorf("exit after stdin EOF: %s, want code 0", got)
			}

			// R-RES-1: a new generation on the exact conversation, history kept.
			rs := spec
			rs.ConversationID = conv
			h2 := launch(t, p, r, rs)
			if end := turn(t, h2, p, "history"); end.IsError {
				t.Fatalf("resumed turn: %+v", end)
			}
			if got, _ := h2.first(cliruntime.EventConversation); got.ConversationID != conv {
				t.Errorf("resumed conversation %q, want %q", got.ConversationID, conv)
			}
			h2.stdout.await(t, "history", func(s string, _ int64) bool { return strings.Contains(s, "history: hello | slow | after") })
			if p.replays {
				// R-HW-4: ACP replays the history at session/load.
				evs := h2.all()
				if !slices.ContainsFunc(evs, func(e cliruntime.Event) bool { return e.Kind == cliruntime.EventReplayStarted }) ||
					!slices.ContainsFunc(evs, func(e cliruntime.Event) bool { return e.Kind == cliruntime.EventReplayEnded }) {
					t.Errorf("resume without replay_started/replay_ended: %s", h2.kinds())
				}
			}
			if p.process {
				// J03: the peer was asked for the stored conversation.
				assertAskedResume(t, spec.Home, conv)
			}
			h2.closeStdin()
			h2.waitExit()
			afterResume := p.conversations(t, spec.Home)
			if len(afterResume) != len(before)+1 {
				t.Errorf("conversations %v after launch and resume, want exactly one more than %v", afterResume, before)
			}

			// R-RES-2: an unknown id is refused, and no conversation is made.
			ru := spec
			ru.ConversationID = p.unknownID
			h3 := launch(t, p, r, ru)
			// Claude refuses at spawn, the others in the handshake.
			h3.await(cliruntime.EventConversationUnavailable)
			if err := h3.encode(p.input("hello")); !errors.Is(err, cliruntime.ErrHandshakeFailed) {
				t.Errorf("Encode after a refused resume = %v, want ErrHandshakeFailed", err)
			}
			h3.closeStdin()
			if got := exitString(h3.waitExit()); got != p.refusedExit {
				t.Errorf("exit after a refused resume: %s, want %s", got, p.refusedExit)
			}
			for _, e := range h3.all() {
				if e.Kind == cliruntime.EventConversation {
					t.Errorf("a refused resume named a conversation: %+v", e)
				}
			}
			if got := p.conversations(t, spec.Home); !slices.Equal(got, afterResume) {
				t.Errorf("conversations after a refused resume: %v, want %v", got, afterResume)
			}

			// R-RES-2: no stored id, no resume (never a launch instead).
			if _, err := p.driver.Resume(spec); !errors.Is(err, cliruntime.ErrNoConversation) {
				t.Errorf("Resume without an id = %v, want ErrNoConversation", err)
			}
		})
	}
}

// assertAskedResume reads fakecli's call log: one call resumed conv and found it.
func assertAskedResume(t *testing.T, home, conv string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, ".fakecli", "calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec struct {
			Resume string `json:"resume"`
			Found  *bool  `json:"found"`
		}
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Resume == conv && (rec.Found == nil || *rec.Found) {
			return
		}
	}
	t.Errorf("the peer was never asked to resume %s; calls:\n%s", conv, b)
}

// TestExits: the observed exit is the one wait() saw (R-EXIT-1/3): an exit
// code as the child chose it, the tool's own SIGTERM behaviour, and SIGKILL
// after the grace for a child that ignores SIGTERM (R-STOP-1).
func TestExits(t *testing.T) {
	for _, p := range peers() {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			r := p.runner(t)
			spec := newSpec(t, p)

			h := launch(t, p, r, spec)
			if err := h.encode(p.input("exit 3")); err != nil {
				t.Fatal(err)
			}
			if got := exitString(h.waitExit()); got != "code 3" {
				t.Errorf("exit 3: %s", got)
			}

			h = launch(t, p, r, spec)
			turn(t, h, p, "hello")
			if got := exitString(h.proc.Stop(5 * time.Second)); got != p.termExit {
				t.Errorf("SIGTERM: %s, want %s", got, p.termExit)
			}

			h = launch(t, p, r, spec)
			turn(t, h, p, "ignore-term")
			if got := exitString(h.proc.Stop(200 * time.Millisecond)); got != "SIGKILL" {
				t.Errorf("stop of a child ignoring SIGTERM: %s, want SIGKILL", got)
			}
		})
	}
}

// TestPTY runs each launch form on the PTY runner too (R-DRV-7). Claude's
// --print form refuses a terminal on stdin: exit 1, the exact error on
// stderr, not a single protocol frame (R-TR-3, R-EXIT-5). The JSON-RPC
// forms work over a raw PTY as well.
func TestPTY(t *testing.T) {
	r, err := sessions.NewPTYRunner()
	if err != nil {
		t.Skipf("no PTY on this host: %v", err)
	}
	for _, p := range peers() {
		if !p.process {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			spec := newSpec(t, p)
			cmd, err := p.driver.Launch(spec)
			if err != nil {
				t.Fatal(err)
			}
			if !p.ptyRefused {
				h := start(t, r, cmd, p.driver.NewSession(spec))
				turn(t, h, p, "hello")
				h.stdout.await(t, "echo", func(s string, _ int64) bool { return strings.Contains(s, "pong: hello") })
				if got := exitString(h.proc.Stop(5 * time.Second)); got != p.termExit {
					t.Errorf("SIGTERM: %s, want %s", got, p.termExit)
				}
				return
			}
			proc, err := r.Start(t.Context(), sessions.Spec{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { proc.Stop(-1) })
			out := make(chan []byte, 1)
			errs := make(chan []byte, 1)
			go func() { b, _ := io.ReadAll(proc.Stdout()); out <- b }()
			go func() { b, _ := io.ReadAll(proc.Stderr()); errs <- b }()
			var stdout, stderr []byte
			for _, ch := range []chan []byte{out, errs} {
				select {
				case b := <-ch:
					if ch == out {
						stdout = b
					} else {
						stderr = b
					}
				case <-time.After(deadline):
					t.Fatal("no EOF on the PTY runner's streams")
				}
			}
			if got := exitString(proc.Wait()); got != "code 1" {
				t.Errorf("claude on a PTY: %s, want code 1", got)
			}
			if len(stdout) != 0 {
				t.Errorf("claude on a PTY wrote %q; want not a single frame", stdout)
			}
			const want = "Error: Input must be provided either through stdin or as a prompt argument when using --print\n"
			if string(stderr) != want {
				t.Errorf("stderr = %q, want %q", stderr, want)
			}
		})
	}
}
