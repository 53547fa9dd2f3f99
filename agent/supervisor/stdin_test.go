//go:build linux

package supervisor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/agent/supervisor"
)

// TestEveryInputAnswered (R-IN-1, R-IN-4): every input the supervisor
// accepts reaches the child's stdin whole and once, so the tool answers
// each: runs launched together, inputs sent the moment Launch returns,
// back to back from two senders per run while turns are running, for the
// in-process fake, the fakecli peer as Claude Code (message and line) and
// as Codex (whose driver queues inputs until the handshake and between
// turns), and, for Claude Code, again right after a resume (a new
// generation and its own stdin queue). Each reply names its input, and a
// lost, cut or doubled line fails the wait or the count.
func TestEveryInputAnswered(t *testing.T) {
	const runs, inputs = 10, 20
	for _, tc := range []struct {
		name, tool string
		env        func(t *testing.T) *env
		in         func(text string) cliruntime.Input
		resume     bool
	}{
		{"fake", "fake", func(t *testing.T) *env { e, _ := fakeEnv(t); return e }, textInput, false},
		{"claude-message", "claude", fakecliEnv, func(text string) cliruntime.Input {
			b, _ := json.Marshal(text)
			return cliruntime.Input{Message: b}
		}, true},
		{"claude-line", "claude", fakecliEnv, func(text string) cliruntime.Input {
			b, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text}})
			return cliruntime.Input{Line: b}
		}, false},
		{"codex", "codex", fakecliEnv, textInput, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.env(t)
			refs := make([]string, runs)
			for i := range refs {
				refs[i] = fmt.Sprintf("run_input%d", i)
				e.profile(fmt.Sprintf("prof_input%d", i), tc.tool)
			}
			// send launches every run at once (or resumes it) and sends
			// its inputs from two goroutines as soon as it is live.
			send := func(round string, start func(ref, prof string) error) {
				t.Helper()
				var wg sync.WaitGroup
				errs := make(chan error, runs*(inputs+1))
				for i, ref := range refs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := start(ref, fmt.Sprintf("prof_input%d", i)); err != nil {
							errs <- err
							return
						}
						var senders sync.WaitGroup
						for k := range 2 {
							senders.Add(1)
							go func() {
								defer senders.Done()
								for j := k; j < inputs; j += 2 {
									if err := e.sup.Input(context.Background(), ref, tc.in(label(ref, round, j))); err != nil {
										errs <- fmt.Errorf("Input(%s, %d): %v", ref, j, err)
									}
								}
							}()
						}
						senders.Wait()
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
			}
			answered := func(round string) {
				t.Helper()
				for _, ref := range refs {
					out := e.tail(ref, 0)
					want := make([]string, inputs)
					for j := range want {
						want[j] = "pong: " + label(ref, round, j)
					}
					out.awaitText(ring.Stdout, want...)
					// A tool may answer one input in several frames (Claude
					// Code's assistant message, then its result): all of them
					// are awaited before the count, which a doubled input
					// would still exceed.
					out.await("every reply frame", func(tl *tail) bool {
						text := tl.text(ring.Stdout)
						for _, w := range want {
							if strings.Count(text, w) < replies(tc.tool) {
								return false
							}
						}
						return true
					})
					for _, w := range want {
						if n := strings.Count(out.text(ring.Stdout), w); n != replies(tc.tool) {
							t.Fatalf("%s: %q answered %d times, want %d (an input written twice?)", ref, w, n, replies(tc.tool))
						}
					}
				}
			}
			send("a", func(ref, prof string) error {
				_, err := e.sup.Launch(context.Background(), supervisor.LaunchParams{RunRef: ref, Tenant: tenant, ProfileRef: prof})
				return err
			})
			answered("a")
			if !tc.resume {
				return
			}
			for _, ref := range refs {
				if _, err := e.sup.Stop(context.Background(), ref, time.Second); err != nil {
					t.Fatalf("Stop(%s): %v", ref, err)
				}
			}
			send("b", func(ref, _ string) error {
				_, err := e.sup.Resume(context.Background(), ref, nil, "")
				return err
			})
			answered("b")
		})
	}
}

// TestInputAfterEarlyInterruptAnswered (R-INT-1, R-IN-1): on a Claude Code
// run, an interrupt given right after an input cancels that input's turn
// even when the tool has not begun it yet, as the real Claude Code 2.1.328
// does (agent/drivers TestRealInterruptEarly), so the next input is
// answered. Before, the fakecli peer dropped an interrupt that it read
// before its turn loop had taken the message: the "slow" turn then ran on
// for a minute with the next input accepted (202) and queued behind it,
// the agent and the peer idle, the peer blocked reading stdin.
func TestInputAfterEarlyInterruptAnswered(t *testing.T) {
	const runs = 10
	e := fakecliEnv(t)
	msg := func(text string) cliruntime.Input {
		b, _ := json.Marshal(text)
		return cliruntime.Input{Message: b}
	}
	for i := range runs {
		ref, prof := fmt.Sprintf("run_early%d", i), fmt.Sprintf("prof_early%d", i)
		e.profile(prof, "claude")
		e.launch(ref, prof)
		out := e.tail(ref, 0)
		if err := e.sup.Input(context.Background(), ref, msg("slow")); err != nil {
			t.Fatalf("Input(%s, slow): %v", ref, err)
		}
		if _, err := e.sup.Interrupt(context.Background(), ref); err != nil {
			t.Fatalf("Interrupt(%s): %v", ref, err)
		}
		if err := e.sup.Input(context.Background(), ref, msg("after")); err != nil {
			t.Fatalf("Input(%s, after): %v", ref, err)
		}
		out.awaitText(ring.Stdout, `"terminal_reason":"aborted_streaming"`, "pong: after")
	}
}

func textInput(text string) cliruntime.Input { return cliruntime.Input{Text: text} }

// fakecliEnv is procEnv on pipes.
func fakecliEnv(t *testing.T) *env { return procEnv(t, sessions.NewProcRunner()) }

// label names input j of a run in a round; all have one length, so that
// none is a prefix of another.
func label(ref, round string, j int) string { return fmt.Sprintf("%s-%s-%02d.", ref, round, j) }

// replies is how many times a tool's stdout carries "pong: <text>" for one
// input: Claude Code in the assistant message and in the result; the fake
// in its delta; Codex in its delta and in the completed item.
func replies(tool string) int {
	if tool == "fake" {
		return 1
	}
	return 2
}

// lineDriver runs cat, which writes back every line it is given, so that
// the test reads on stdout the child's stdin as it arrived. Its session
// writes "start" first, "in <text>" for an input, "int <n>" for an
// interrupt and "obs <text>" when it sees "in <text>" come back, and logs
// each line as it hands it over, one log per run. The supervisor calls a
// session under the lock that orders its stdin (cliruntime.Session), so
// the log is the order the lines must arrive in.
type lineDriver struct{ logs *lineLogs }

type lineLogs struct {
	mu   sync.Mutex
	runs map[string]*lineLog
}

func (l *lineLogs) of(ref string) *lineLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.runs[ref] == nil {
		l.runs[ref] = &lineLog{}
	}
	return l.runs[ref]
}

type lineLog struct {
	mu    sync.Mutex
	lines []string
	ints  int
}

func (l *lineLog) step(line string) cliruntime.Step {
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	return cliruntime.Step{Write: [][]byte{[]byte(line + "\n")}}
}

func (l *lineLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func (lineDriver) Kind() cliruntime.Kind                       { return "lines" }
func (lineDriver) LaunchTransport() cliruntime.LaunchTransport { return cliruntime.TransportStdio }
func (lineDriver) Launch(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	p, err := exec.LookPath("cat")
	if err != nil {
		return cliruntime.Command{}, err
	}
	return cliruntime.Command{Path: p, Env: []string{"PATH=/usr/bin:/bin"}, Dir: spec.Workdir}, nil
}
func (d lineDriver) Resume(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	return d.Launch(spec)
}
func (lineDriver) CheckInput(in cliruntime.Input) error { return cliruntime.CheckTextInput(in) }
func (d lineDriver) NewSession(spec cliruntime.LaunchSpec) cliruntime.Session {
	return &lineSession{log: d.logs.of(spec.RunRef)}
}

type lineSession struct{ log *lineLog }

func (s *lineSession) Start() cliruntime.Step { return s.log.step("start") }
func (s *lineSession) Encode(in cliruntime.Input) (cliruntime.Step, error) {
	return s.log.step("in " + in.Text), nil
}
func (s *lineSession) Interrupt() (cliruntime.Step, bool) {
	s.log.mu.Lock()
	s.log.ints++
	n := s.log.ints
	s.log.mu.Unlock()
	return s.log.step(fmt.Sprintf("int %d", n)), true
}
func (s *lineSession) Observe(line []byte) cliruntime.Step {
	if text, ok := strings.CutPrefix(strings.TrimSuffix(string(line), "\n"), "in "); ok {
		return s.log.step("obs " + text)
	}
	return cliruntime.Step{}
}
func (*lineSession) ConversationID() string { return "" }
func (*lineSession) TurnActive() bool       { return false }
func (*lineSession) Answer(string, cliruntime.Answer) (cliruntime.Step, error) {
	return cliruntime.Step{}, cliruntime.ErrNoSuchRequest
}

// lineEnv is a supervisor whose only tool is lineDriver, with a profile
// prof_lines1 of it.
func lineEnv(t *testing.T, o supervisor.Options) (*env, *lineLogs) {
	t.Helper()
	logs := &lineLogs{runs: map[string]*lineLog{}}
	o.Drivers = map[string]cliruntime.Driver{"lines": lineDriver{logs: logs}}
	o.Runners = map[cliruntime.LaunchTransport]sessions.Runner{cliruntime.TransportStdio: sessions.NewProcRunner()}
	e := newEnv(t, o)
	if _, err := e.reg.CreateProfile(registry.ProfileParams{Ref: "prof_lines1", Tenant: tenant, Tool: "lines", Name: "lines",
		Home: e.dir + "/home-lines"}); err != nil {
		t.Fatal(err)
	}
	return e, logs
}

// awaitLines waits until the child has written back n lines and returns
// them.
func awaitLines(t *testing.T, out *tail, n int) []string {
	t.Helper()
	var lines []string
	out.await(fmt.Sprintf("%d lines back from the child", n), func(tl *tail) bool {
		lines = strings.Split(strings.TrimSuffix(tl.text(ring.Stdout), "\n"), "\n")
		return len(lines) >= n && strings.HasSuffix(tl.text(ring.Stdout), "\n")
	})
	return lines
}

// TestInputDuringStartGoesAfterStartLines (cliruntime.Session: a
// session's lines reach stdin in call order): an input accepted while the
// new generation's started row commits (it is live from that moment) is
// written after the lines the driver's Start gave, never before them.
// Before, Start's lines were queued only after that commit, so an input in
// that window went first (a Codex or ACP handshake would have been
// preceded by a prompt).
func TestInputDuringStartGoesAfterStartLines(t *testing.T) {
	var commits atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	var o supervisor.Options
	supervisor.SetInTx(&o, func(ref string) {
		// The run's commits: 1 created, 2 started.
		if ref == "run_lines1" && commits.Add(1) == 2 {
			close(entered)
			<-release
		}
	})
	e, logs := lineEnv(t, o)
	launched := make(chan error, 1)
	go func() {
		_, err := e.sup.Launch(context.Background(), supervisor.LaunchParams{RunRef: "run_lines1", Tenant: tenant, ProfileRef: "prof_lines1"})
		launched <- err
	}()
	select {
	case <-entered:
	case <-time.After(waitFor):
		t.Fatal("the started row's commit did not begin")
	}
	err := e.sup.Input(context.Background(), "run_lines1", cliruntime.Input{Text: "early"})
	close(release)
	if err != nil {
		t.Fatalf("Input while the started row commits: %v, want accepted (the run is live)", err)
	}
	if err := <-launched; err != nil {
		t.Fatalf("Launch: %v", err)
	}
	out := e.tail("run_lines1", 0)
	got := awaitLines(t, out, 3)
	want := []string{"start", "in early", "obs early"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the child's stdin: got %q, want %q (the driver's log %q)", got, want, logs.of("run_lines1").snapshot())
	}
}

// TestStdinKeepsCallOrder (cliruntime.Session): inputs, interrupts and
// the lines a session writes from what it observes, made concurrently,
// reach the child's stdin in the order the session produced them, none
// lost or doubled; four runs one after the other. Before, an interrupt's
// and an observed line's writes were queued after the session's lock was
// released, so an input taken in between went first (this test caught it
// in most of its runs; it cannot fail on the fixed code).
func TestStdinKeepsCallOrder(t *testing.T) {
	const runs, senders, each, interrupts = 4, 4, 300, 600
	e, logs := lineEnv(t, supervisor.Options{})
	for i := range runs {
		ref := fmt.Sprintf("run_lines%d", i+1)
		e.launch(ref, "prof_lines1")
		var wg sync.WaitGroup
		errs := make(chan error, senders*each+interrupts)
		for k := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range each {
					if err := e.sup.Input(context.Background(), ref, cliruntime.Input{Text: fmt.Sprintf("s%d-%03d", k, j)}); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range interrupts {
				if _, err := e.sup.Interrupt(context.Background(), ref); err != nil {
					errs <- err
				}
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		// start, every input, its observed line, every interrupt.
		n := 1 + 2*senders*each + interrupts
		got := awaitLines(t, e.tail(ref, 0), n)
		want := logs.of(ref).snapshot()
		if len(got) != n || len(want) != n {
			t.Fatalf("%s: the child got %d lines, the session wrote %d, want %d each", ref, len(got), len(want), n)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: stdin line %d: got %q, want %q (the session's order); around it the child got %q",
					ref, i, got[i], want[i], got[max(0, i-3):min(len(got), i+4)])
			}
		}
		if _, err := e.sup.Stop(context.Background(), ref, time.Second); err != nil {
			t.Fatalf("Stop(%s): %v", ref, err)
		}
	}
}
