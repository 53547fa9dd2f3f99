package acp

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/internal/jsonrpc"
)

// The protocol is tested through the grok, gemini and opencode goldens
// (testdata/session of each driver), which run every branch of Session with
// each Agent's settings. This file tests what those cannot see, and
// measures Observe.

// TestErrorOf: the code and the message of a failed response, with Gemini
// CLI's data.details when it is a string.
func TestErrorOf(t *testing.T) {
	for _, tc := range []struct {
		line string
		code int
		msg  string
	}{
		{`{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"Authentication required"}}`, AuthRequired, "Authentication required"},
		{`{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"Internal error","data":{"details":"No previous sessions found for this project."}}}`,
			-32603, "Internal error: No previous sessions found for this project."},
		{`{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"Internal error: OpenCode service failure","data":{"service":"session"}}}`,
			-32603, "Internal error: OpenCode service failure"},
		{`{"jsonrpc":"2.0","id":2,"error":{"code":"x","message":"odd","data":{"details":7}}}`, 0, "odd"},
		{`{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"a","data":"details"}}`, 1, "a"},
		{`{"jsonrpc":"2.0","id":2,"error":"boom"}`, 0, `"boom"`},
	} {
		m, ok := jsonrpc.Parse([]byte(tc.line))
		if !ok {
			t.Fatalf("Parse(%s) failed", tc.line)
		}
		code, msg := errorOf(m, json.RawMessage(tc.line))
		if code != tc.code || msg != tc.msg {
			t.Errorf("errorOf(%s) = %d, %q; want %d, %q", tc.line, code, msg, tc.code, tc.msg)
		}
	}
}

// TestAgentAuthMethod: the authenticate method comes from the spec the
// session was made for; a nil AuthMethod means none.
func TestAgentAuthMethod(t *testing.T) {
	spec := cliruntime.LaunchSpec{Home: "/h", Workdir: "/w", ConversationID: "s1", Env: []string{"KEY=1"}}
	a := Agent{Tool: "x", Name: "x", AuthMethod: func(s cliruntime.LaunchSpec) string {
		if len(s.Env) > 0 {
			return "key"
		}
		return ""
	}}
	for _, tc := range []struct {
		agent Agent
		env   []string
		want  string
	}{
		{a, spec.Env, "key"},
		{a, nil, ""},
		{Agent{Tool: "x", Name: "x"}, spec.Env, ""},
	} {
		s := spec
		s.Env = tc.env
		if got := tc.agent.NewSession(s).(*session).auth; got != tc.want {
			t.Errorf("auth with env %q = %q, want %q", tc.env, got, tc.want)
		}
	}
	if got := (Agent{Tool: cliruntime.KindGemini}).Kind(); got != cliruntime.KindGemini {
		t.Errorf("Kind() = %q", got)
	}
}

// live returns a session with a prompt in flight, the state in which
// session/update lines stream by the thousand.
func live(tb testing.TB, replayEnd string) cliruntime.Session {
	tb.Helper()
	s := Agent{Tool: "x", Name: "x", ReplayEndsWith: replayEnd}.NewSession(cliruntime.LaunchSpec{Home: "/h", Workdir: "/w"})
	s.Start()
	s.Observe([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`))
	s.Observe([]byte(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}`))
	if _, err := s.Encode(cliruntime.Input{Text: "go"}); err != nil || !s.TurnActive() {
		tb.Fatalf("no turn in flight: %v", err)
	}
	return s
}

func updateLine(text int) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` +
		strings.Repeat("x", text) + `"}}}}` + "\n")
}

// BenchmarkObserve: Observe of one agent_message_chunk during a turn, as a
// ratio to json.Valid over the same line in the same run (the least any
// reader of the line must do). Observe parses the line once into its
// members; the ratio says what the rest of the protocol costs on the hot
// path of every run's stdout.
func BenchmarkObserve(b *testing.B) {
	for _, tc := range []struct {
		name      string
		text      int
		replayEnd string
	}{
		{"chunk-128B", 128, ""},
		{"chunk-64KiB", 64 << 10, ""},
		{"chunk-128B-gemini", 128, "available_commands_update"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			line := updateLine(tc.text)
			s := live(b, tc.replayEnd)
			b.SetBytes(int64(len(line)))
			var valid, observe time.Duration
			for b.Loop() {
				t0 := time.Now()
				if !json.Valid(line) {
					b.Fatal("invalid line")
				}
				t1 := time.Now()
				if st := s.Observe(line); len(st.Write)+len(st.Events) != 0 {
					b.Fatalf("a chunk gave %+v", st)
				}
				observe += time.Since(t1)
				valid += t1.Sub(t0)
			}
			b.ReportMetric(float64(observe)/float64(valid), "x-json.Valid")
		})
	}
}

// TestAdoptFrom (issue 30): a session adopting a live ACP agent takes the
// state of a scratch that read the generation, so the answer to the
// previous session's prompt ends the adopted turn, an interrupt reaches it,
// its requests go on from the previous numbering, and the inputs still
// queued are counted for the supervisor to send again. A scratch that read
// a generation begun otherwise (a launch read as a resume, or the reverse)
// or another conversation is refused.
func TestAdoptFrom(t *testing.T) {
	a := Agent{Tool: "x", Name: "x"}
	launched := func(conv string) cliruntime.Session {
		s := a.NewSession(cliruntime.LaunchSpec{Workdir: "/w", ConversationID: conv})
		s.Start()
		s.Observe([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}`))
		s.Observe([]byte(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}`))
		return s
	}
	scratch := launched("")
	for _, text := range []string{"first", "second"} {
		if _, err := scratch.Encode(cliruntime.Input{Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	scratch.Observe(updateLine(8))

	s := a.NewSession(cliruntime.LaunchSpec{Workdir: "/w", ConversationID: "s1"})
	if st := s.(cliruntime.Adopter).Adopt(); len(st.Write) != 0 {
		t.Fatalf("Adopt wrote %q", st.Write)
	}
	first, queued, ok := s.(cliruntime.Replayer).AdoptFrom(scratch)
	if !ok || queued != 1 || len(first.Events) != 1 || first.Events[0].Kind != cliruntime.EventTurnStarted || first.Events[0].TurnID != "3" {
		t.Fatalf("AdoptFrom = %+v, %d, %v; want the turn of prompt 3 in flight and one input queued", first, queued, ok)
	}
	if !s.TurnActive() || s.ConversationID() != "s1" {
		t.Fatalf("adopted: active %v conversation %q", s.TurnActive(), s.ConversationID())
	}
	st, active := s.Interrupt()
	if !active || len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), `"method":"session/cancel","params":{"sessionId":"s1"}`) {
		t.Fatalf("Interrupt = %q, %v; want session/cancel of s1", st.Write, active)
	}
	st = s.Observe([]byte(`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"cancelled"}}`))
	if len(st.Events) != 1 || st.Events[0].Kind != cliruntime.EventTurnEnded || st.Events[0].ErrorKind != cliruntime.ErrorInterrupted || s.TurnActive() {
		t.Fatalf("the previous session's prompt answer gave %+v, want the adopted turn's end", st)
	}
	st, err := s.Encode(cliruntime.Input{Text: "second"})
	if err != nil || len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), `"id":4,"method":"session/prompt"`) {
		t.Fatalf("the input sent again: %q %v, want prompt 4", st.Write, err)
	}

	// A resumed generation: its load's answer names no session, so a
	// scratch read as a launch dies and one read as the resume it was
	// takes over.
	resumeLines := [][]byte{
		[]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}`),
		[]byte(`{"jsonrpc":"2.0","id":2,"result":{}}`),
	}
	for _, tc := range []struct {
		conv string
		ok   bool
	}{{"", false}, {"s1", true}} {
		sc := a.NewSession(cliruntime.LaunchSpec{Workdir: "/w", ConversationID: tc.conv})
		sc.Start()
		for _, l := range resumeLines {
			sc.Observe(l)
		}
		s := a.NewSession(cliruntime.LaunchSpec{Workdir: "/w", ConversationID: "s1"})
		if _, _, ok := s.(cliruntime.Replayer).AdoptFrom(sc); ok != tc.ok {
			t.Errorf("a resumed generation read with conversation %q: ok %v, want %v", tc.conv, ok, tc.ok)
		}
	}
	other := a.NewSession(cliruntime.LaunchSpec{Workdir: "/w", ConversationID: "s2"})
	if _, _, ok := other.(cliruntime.Replayer).AdoptFrom(launched("")); ok {
		t.Error("a scratch of conversation s1 was taken for s2")
	}
}
