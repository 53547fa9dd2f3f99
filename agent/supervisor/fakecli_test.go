//go:build linux

package supervisor_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration/peers/peerbin"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/claude"
	"github.com/olivares-dev/olivares/agent/drivers/codex"
	"github.com/olivares-dev/olivares/agent/holder"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// fakecli (integration/peers/fakecli) is built once per test binary and
// linked as claude, codex and grok, so that the peer picks its protocol
// from argv[0] (as agent/drivers/harness_test.go does). The children find
// it through Options.Path.
func TestMain(m *testing.M) {
	if os.Getenv(holderMainEnv) == "1" {
		// This test binary is also the runs' holder (olivares-agent hold).
		os.Exit(holder.Main(os.Args[1:]))
	}
	code := m.Run()
	peerbin.Remove()
	os.Exit(code)
}

func fakecliDir(t *testing.T) string { return peerbin.Dir(t) }

// procEnv is the composition root's wiring (R-TR-2) with fakecli on the
// children's PATH: claude and codex drivers, runner for stdio.
func procEnv(t *testing.T, stdio sessions.Runner) *env {
	t.Helper()
	return newEnv(t, supervisor.Options{
		Path:    fakecliDir(t),
		Drivers: map[string]cliruntime.Driver{"claude": claude.New(), "codex": codex.New()},
		Runners: map[cliruntime.LaunchTransport]sessions.Runner{cliruntime.TransportStdio: stdio},
	})
}

// killGroup SIGKILLs the process group of a child this test started (its
// pid is the group id, R-STOP-3) and waits until its reaper has collected
// it.
func killGroup(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		t.Fatalf("killGroup: pid %d", pid)
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -KILL -%d: %v", pid, err)
	}
	timer := time.NewTimer(waitFor)
	defer timer.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for syscall.Kill(pid, 0) != syscall.ESRCH {
		select {
		case <-tick.C:
		case <-timer.C:
			t.Fatalf("pid %d: still there %v after SIGKILL", pid, waitFor)
		}
	}
}

// codexIdle launches a codex run on fakecli and waits for the handshake,
// and for the startup log line on stderr, so that the ring is quiet.
func (e *env) codexIdle(ref string) (apitypes.Run, *tail) {
	e.t.Helper()
	prof := "prof_" + strings.TrimPrefix(ref, "run_")
	e.profile(prof, "codex")
	e.launch(ref, prof)
	r := e.awaitState(ref, apitypes.StateIdle)
	out := e.tail(ref, 0)
	// The last frames of the handshake: the thread/start response, then
	// thread/started; after them codex is silent until a turn.
	out.awaitText(ring.Stdout, r.ConversationID, `"method":"thread/started"`)
	out.awaitText(ring.Stderr, "ERROR codex_app_server")
	return r, out
}

func sameFrame(a, b ring.Frame) bool {
	return a.Seq == b.Seq && a.Generation == b.Generation && a.Stream == b.Stream && string(a.Data) == string(b.Data)
}

// TestRestartRecordsLost: an agent that dies with a live child finds, on
// its next start, the run failed with reason process_lost and no exit code,
// a lost row in the ledger, and a ring that replays what was retained and
// then ends (R-STATE-6, R-RC-2, R-RC-7). Nothing is re-spawned (R-RC-4).
func TestRestartRecordsLost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		crash func(e *env, pid int)
	}{
		{"crash", func(e *env, pid int) {
			// kill -9 of the agent: no Close; the file goes away under the
			// live generation, then the child dies as it would with the
			// agent.
			old := e.crash()
			killGroup(e.t, pid)
			e.t.Cleanup(func() { closeBounded(e.t, old) })
		}},
		{"close", func(e *env, pid int) {
			// Close kills the children and records nothing.
			e.sup.Close()
			if evs, err := e.led.List("run_lost1"); err != nil || len(evs) != 3 || evs[2].Kind != ledger.KindInputAccepted {
				e.t.Fatalf("ledger after Close: %v %v, want created, started, input_accepted only", evs, err)
			}
			if syscall.Kill(pid, 0) == nil {
				e.t.Fatalf("pid %d lives after Close", pid)
			}
			e.sup = nil
			e.shut()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := procEnv(t, sessions.NewProcRunner())
			r, out := e.codexIdle("run_lost1")
			e.input("run_lost1", "before the crash")
			out.awaitText(ring.Stdout, "pong: before the crash", `"turn/completed"`)
			e.awaitState("run_lost1", apitypes.StateIdle)
			e.awaitKinds("run_lost1", ledger.KindCreated, ledger.KindStarted, ledger.KindInputAccepted)
			seen := out.snapshot()
			tc.crash(e, r.PID)
			if tc.name == "crash" {
				// R-RC-8: the store closing ends a viewer without End.
				out.await("viewer ends", func(tl *tail) bool {
					tl.mu.Lock()
					defer tl.mu.Unlock()
					return tl.closed
				})
				if out.end != nil || !errors.Is(out.err, ring.ErrClosed) {
					t.Fatalf("viewer at the crash: end %+v err %v, want ErrClosed and no End", out.end, out.err)
				}
			}

			e.open()
			got := e.get("run_lost1")
			if got.State != apitypes.StateFailed || got.Reason != apitypes.ReasonProcessLost || got.ExitCode != nil ||
				got.Signal != "" || got.PID != 0 || got.LiveRef != "" || got.Generation != 1 || got.EndedAt == nil {
				t.Fatalf("after restart: state %s reason %s exit %v signal %q pid %d live_ref %q generation %d ended %v; want failed process_lost, no exit",
					got.State, got.Reason, got.ExitCode, got.Signal, got.PID, got.LiveRef, got.Generation, got.EndedAt)
			}
			evs := e.events("run_lost1")
			if k := kinds(evs); !equal(k, []string{ledger.KindCreated, ledger.KindStarted, ledger.KindInputAccepted, ledger.KindLost}) {
				t.Fatalf("events after restart: %v, want created, started, input_accepted, lost", k)
			}
			if l := last(evs); l.Reason != ledger.ReasonProcessLost || l.ExitCode != nil || l.Signal != "" || l.Generation != 1 || l.PID != r.PID {
				t.Fatalf("lost row: %+v, want process_lost for generation 1 pid %d, no exit", l, r.PID)
			}
			rg, err := e.rings.Ring("run_lost1")
			if err != nil {
				t.Fatal(err)
			}
			if rg.Live() || rg.EndReason() != apitypes.ReasonProcessLost {
				t.Fatalf("ring after restart: live %v end %q, want ended process_lost", rg.Live(), rg.EndReason())
			}
			if live := e.sup.Live(); len(live) != 0 {
				t.Fatalf("Live after restart: %+v, want none (R-RC-4)", live)
			}

			// R-RC-2, R-ATT-6: replay, then the end; every frame a viewer
			// saw before the crash is still there (R-RC-7).
			frames, end := e.replay("run_lost1")
			if end.Reason != apitypes.ReasonProcessLost {
				t.Fatalf("replay end: %q, want process_lost", end.Reason)
			}
			if len(frames) < len(seen) || len(seen) == 0 {
				t.Fatalf("replay: %d frames, want at least the %d seen before the restart", len(frames), len(seen))
			}
			for i := range seen {
				if !sameFrame(frames[i], seen[i]) {
					t.Fatalf("replay frame %d: got seq %d %s %q, want seq %d %s %q", i,
						frames[i].Seq, frames[i].Stream, frames[i].Data, seen[i].Seq, seen[i].Stream, seen[i].Data)
				}
			}
			checkSeqs(t, frames)
			// Input and interrupt need a live run (R-STATE-5).
			wantErr(t, "Input after restart", e.sup.Input(context.Background(), "run_lost1", cliruntime.Input{Text: "hi"}), supervisor.ErrNotLive)
			// A second start on the same file records nothing more.
			e.shut()
			e.open()
			if got := e.events("run_lost1"); len(got) != len(evs) {
				t.Fatalf("second restart added rows: %v", kinds(got[len(evs):]))
			}

			// R-RES-1 after a restart: the stored conversation goes on in
			// generation 2, and R-RC-6: its frames follow every seq
			// retained before the restart.
			res, err := e.sup.Resume(context.Background(), "run_lost1", nil, "")
			if err != nil {
				t.Fatalf("Resume after restart: %v", err)
			}
			if res.Generation != 2 || res.ConversationID != r.ConversationID {
				t.Fatalf("Resume after restart: generation %d conversation %q, want 2, %q", res.Generation, res.ConversationID, r.ConversationID)
			}
			out2 := e.tail("run_lost1", 0)
			e.input("run_lost1", "history")
			out2.awaitText(ring.Stdout, "history: before the crash")
			all := out2.snapshot()
			checkSeqs(t, all)
			for _, f := range all[len(frames):] {
				if f.Generation != 2 || f.Seq <= last2(frames).Seq {
					t.Fatalf("frame after the restart: seq %d generation %d, want generation 2 after seq %d", f.Seq, f.Generation, last2(frames).Seq)
				}
			}
		})
	}
}

// TestPTYClaudeRefusesTerminal: Claude's stream-json form on a PTY answers
// on stderr and exits 1 without a protocol frame, and the run is failed
// with exit_code 1 (R-TR-3, R-EXIT-5, R-DRV-7).
func TestPTYClaudeRefusesTerminal(t *testing.T) {
	pty, err := sessions.NewPTYRunner()
	if err != nil {
		t.Skipf("no PTY on this host: %v", err)
	}
	e := procEnv(t, pty) // this test only: the PTY runner for stdio
	e.profile("prof_pty1", "claude")
	e.launch("run_pty1", "prof_pty1")
	got := e.awaitState("run_pty1", apitypes.StateFailed)
	if got.ExitCode == nil || *got.ExitCode != 1 || got.Reason != apitypes.ReasonExitNonZero || got.Signal != "" {
		t.Fatalf("claude on a PTY: exit %v reason %q signal %q, want exit 1, exit_nonzero", got.ExitCode, got.Reason, got.Signal)
	}
	// The state is in memory before the exit's commit: await the row.
	evs := e.awaitKinds("run_pty1", ledger.KindCreated, ledger.KindStarted, ledger.KindExited)
	if l := last(evs); l.ExitCode == nil || *l.ExitCode != 1 {
		t.Fatalf("exited row: %+v, want exit_code 1", l)
	}
	frames, end := e.replay("run_pty1")
	var stderr strings.Builder
	for _, f := range frames {
		switch f.Stream {
		case ring.Stderr:
			stderr.Write(f.Data)
		case ring.PTY:
			// R-TR-9: the terminal side is tagged pty; R-TR-3: no protocol
			// frame on it.
			if strings.Contains(string(f.Data), `"type"`) {
				t.Fatalf("protocol frame on the PTY: %q", f.Data)
			}
		default:
			t.Fatalf("frame %d tagged %s on the PTY runner, want pty or stderr", f.Seq, f.Stream)
		}
	}
	const refusal = "Error: Input must be provided either through stdin or as a prompt argument when using --print"
	if !strings.Contains(stderr.String(), refusal) {
		t.Fatalf("stderr: %q, want the refusal %q", stderr.String(), refusal)
	}
	if end.Reason != "exited" {
		t.Fatalf("end: %q, want exited", end.Reason)
	}
}

// TestPTYOutputTagged: a stdio protocol that accepts a terminal (fakecli
// codex) runs on the PTY; its stdout side is tagged pty and its stderr
// stays a separate stream (R-TR-5, R-TR-9).
func TestPTYOutputTagged(t *testing.T) {
	pty, err := sessions.NewPTYRunner()
	if err != nil {
		t.Skipf("no PTY on this host: %v", err)
	}
	e := procEnv(t, pty)
	e.profile("prof_ptyc1", "codex")
	e.launch("run_ptyc1", "prof_ptyc1")
	r := e.awaitState("run_ptyc1", apitypes.StateIdle)
	out := e.tail("run_ptyc1", 0)
	out.awaitText(ring.PTY, r.ConversationID)
	out.awaitText(ring.Stderr, "ERROR codex_app_server")
	e.input("run_ptyc1", "over the terminal")
	out.awaitText(ring.PTY, `"turn/completed"`, `pong: over the terminal`)
	if s := out.text(ring.Stdout); s != "" {
		t.Fatalf("stdout-tagged output on the PTY runner: %q", s)
	}
	if s := out.text(ring.Stderr); strings.Contains(s, `"method"`) {
		t.Fatalf("protocol output on stderr: %q", s)
	}
	checkSeqs(t, out.snapshot())
	stopped, err := e.sup.Stop(context.Background(), "run_ptyc1", 0)
	if err != nil || stopped.State != apitypes.StateStopped {
		t.Fatalf("Stop: %v, state %s", err, stopped.State)
	}
}

// TestStreamsApart: stdout and stderr are separate streams in one seq
// space (R-TR-2, R-TR-9): every stdout line is a protocol frame, the
// stderr lines are the tool's own.
func TestStreamsApart(t *testing.T) {
	e := procEnv(t, sessions.NewProcRunner())
	_, out := e.codexIdle("run_streams1")
	e.input("run_streams1", "stderr marker-on-stderr")
	out.awaitText(ring.Stdout, `pong: stderr marker-on-stderr`, `"turn/completed"`)
	out.awaitText(ring.Stderr, "marker-on-stderr\n")
	for _, l := range strings.Split(strings.TrimSuffix(out.text(ring.Stdout), "\n"), "\n") {
		if !json.Valid([]byte(l)) {
			t.Fatalf("stdout line is not a protocol frame (stderr mixed in?): %q", l)
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(out.text(ring.Stderr), "\n"), "\n") {
		if l != "marker-on-stderr" && !strings.HasPrefix(l, "ERROR codex_app_server") {
			t.Fatalf("stderr line %q: want only the tool's log lines", l)
		}
	}
	frames := out.snapshot()
	checkSeqs(t, frames)
	streams := map[ring.Stream]bool{}
	for _, f := range frames {
		streams[f.Stream] = true
	}
	if !streams[ring.Stdout] || !streams[ring.Stderr] || streams[ring.PTY] {
		t.Fatalf("streams: %v, want stdout and stderr only", streams)
	}
}

// TestExitObserved: the exit observed by wait is on the row and in the
// exited row, never invented (R-EXIT-1..3, R-STATE-3, R-STOP-1..3).
func TestExitObserved(t *testing.T) {
	e := procEnv(t, sessions.NewProcRunner())
	code := func(n int) *int { return &n }
	tests := []struct {
		name  string
		tool  string
		drive func(t *testing.T, ref string, pid int) apitypes.Run
		code  *int
		sig   string
		state string
		why   string
	}{
		{"codex exit 0", "codex", func(t *testing.T, ref string, _ int) apitypes.Run {
			e.input(ref, "exit 0")
			return e.awaitState(ref, apitypes.StateStopped)
		}, code(0), "", apitypes.StateStopped, ""},
		{"codex exit 1", "codex", func(t *testing.T, ref string, _ int) apitypes.Run {
			e.input(ref, "exit 1")
			return e.awaitState(ref, apitypes.StateFailed)
		}, code(1), "", apitypes.StateFailed, apitypes.ReasonExitNonZero},
		{"claude stop: SIGTERM exits 143", "claude", func(t *testing.T, ref string, _ int) apitypes.Run {
			out := e.tail(ref, 0)
			// One turn first, so that claude's SIGTERM handler is in place.
			if err := e.sup.Input(context.Background(), ref, cliruntime.Input{Message: json.RawMessage(`"hi"`)}); err != nil {
				t.Fatalf("Input: %v", err)
			}
			out.awaitText(ring.Stdout, `"type":"result"`)
			r, err := e.sup.Stop(context.Background(), ref, 5*time.Second)
			if err != nil {
				t.Fatalf("Stop: %v", err)
			}
			return r
		}, code(143), "", apitypes.StateStopped, ""},
		{"codex ignore-term: SIGKILL after the grace", "codex", func(t *testing.T, ref string, _ int) apitypes.Run {
			out := e.tail(ref, 0)
			e.input(ref, "ignore-term")
			out.awaitText(ring.Stdout, `"turn/completed"`)
			e.awaitState(ref, apitypes.StateIdle)
			r, err := e.sup.Stop(context.Background(), ref, 100*time.Millisecond)
			if err != nil {
				t.Fatalf("Stop: %v", err)
			}
			return r
		}, nil, "SIGKILL", apitypes.StateStopped, ""},
		{"unrequested SIGKILL", "codex", func(t *testing.T, ref string, pid int) apitypes.Run {
			killGroup(t, pid)
			return e.awaitState(ref, apitypes.StateFailed)
		}, nil, "SIGKILL", apitypes.StateFailed, apitypes.ReasonSignal},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := fmt.Sprintf("run_exit%d", i+10)
			prof := fmt.Sprintf("prof_exit%d", i+10)
			e.profile(prof, tt.tool)
			e.launch(ref, prof)
			live := e.awaitState(ref, apitypes.StateIdle)
			got := tt.drive(t, ref, live.PID)
			if got.State != tt.state || got.Reason != tt.why || !sameCode(got.ExitCode, tt.code) || got.Signal != tt.sig {
				t.Fatalf("row: state %s reason %q exit %s signal %q; want %s %q exit %s signal %q",
					got.State, got.Reason, show(got.ExitCode), got.Signal, tt.state, tt.why, show(tt.code), tt.sig)
			}
			if got.PID != 0 || got.EndedAt == nil {
				t.Fatalf("row: pid %d ended %v, want not live", got.PID, got.EndedAt)
			}
			// The row's state is in memory before its commit (run.change,
			// then run.save): a state awaited is not yet a ledger row.
			ev := last(e.awaitKind(ref, ledger.KindExited))
			if ev.Kind != ledger.KindExited || !sameCode(ev.ExitCode, tt.code) || ev.Signal != tt.sig || ev.PID != live.PID {
				t.Fatalf("last event: %s exit %s signal %q pid %d; want exited exit %s signal %q pid %d",
					ev.Kind, show(ev.ExitCode), ev.Signal, ev.PID, show(tt.code), tt.sig, live.PID)
			}
			end := e.sup.EndOf(ref)
			if !sameCode(end.ExitCode, tt.code) || end.Signal != tt.sig || end.Generation != 1 {
				t.Fatalf("EndOf: %+v, want generation 1 exit %s signal %q (R-ATT-4)", end, show(tt.code), tt.sig)
			}
		})
	}
}

// viewerSum is what one viewer received: the seqs and a hash of every
// frame, so that a hundred of them need not keep 2 MB each.
type viewerSum struct {
	frames     int
	first      uint64
	last       uint64
	stdout     int64
	sum        [sha256.Size]byte
	end        string
	lag, notIn bool
	err        error
}

func readAll(v *ring.Viewer) viewerSum {
	defer v.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	h := sha256.New()
	var s viewerSum
	var hdr [13]byte
	for {
		ev, err := v.Next(ctx)
		if err != nil {
			s.err = err
			return s
		}
		switch ev.Kind {
		case ring.EventLag:
			s.lag = true
		case ring.EventEnd:
			s.end = ev.End.Reason
			copy(s.sum[:], h.Sum(nil))
			if _, err := v.Next(ctx); err != io.EOF {
				s.err = fmt.Errorf("Next after End: %v, want io.EOF", err)
			}
			return s
		case ring.EventFrame:
			f := ev.Frame
			if s.frames == 0 {
				s.first = f.Seq
			} else if f.Seq != s.last+1 {
				s.notIn = true
			}
			s.last = f.Seq
			s.frames++
			if f.Stream == ring.Stdout {
				s.stdout += int64(len(f.Data))
			}
			binary.BigEndian.PutUint64(hdr[:8], f.Seq)
			binary.BigEndian.PutUint32(hdr[8:12], f.Generation)
			hdr[12] = byte(f.Stream)
			h.Write(hdr[:])
			h.Write(f.Data)
		}
	}
}

// TestFloodViewers: a hundred viewers of one run during a 2 MB flood all
// receive the identical frame sequence, and a viewer that does not read is
// dropped with slow_viewer without slowing the child or the others
// (R-TR-10, R-RC-1, R-RC-9).
func TestFloodViewers(t *testing.T) {
	const viewers = 100
	e := procEnv(t, sessions.NewProcRunner())
	_, out := e.codexIdle("run_flood1")

	// The ring is quiet at idle, so from = last+1 tails live at once.
	lastSeq := e.get("run_flood1").RingLast
	slow, live, err := e.sup.Attach("run_flood1", lastSeq+1, 1)
	if err != nil || !live {
		t.Fatalf("Attach slow viewer: live %v err %v", live, err)
	}
	defer slow.Close()

	sums := make([]viewerSum, viewers)
	var wg sync.WaitGroup
	for i := range sums {
		v, live, err := e.sup.Attach("run_flood1", 0, 4096)
		if err != nil || !live {
			t.Fatalf("Attach viewer %d: live %v err %v", i, live, err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); sums[i] = readAll(v) }()
	}

	e.input("run_flood1", "flood 2000000")
	out.awaitText(ring.Stdout, "flooded 2000000 bytes", `"turn/completed"`)
	if _, err := e.sup.Stop(context.Background(), "run_flood1", 0); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatalf("viewers: not all ended within %v", waitFor)
	}

	want := sums[0]
	if want.err != nil || want.end != "exited" || want.lag || want.notIn || want.first != 1 || want.stdout < 2000000 {
		t.Fatalf("viewer 0: %+v, want seq 1.. without a gap, ≥ 2000000 stdout bytes, end exited", want)
	}
	for i, s := range sums[1:] {
		if s != want {
			t.Fatalf("viewer %d: %d frames %d..%d end %q err %v; viewer 0: %d frames %d..%d end %q (R-TR-10: identical sequences)",
				i+1, s.frames, s.first, s.last, s.end, s.err, want.frames, want.first, want.last, want.end)
		}
	}
	if got := e.get("run_flood1"); got.RingLast != want.last {
		t.Fatalf("ring last %d, viewers' last %d", got.RingLast, want.last)
	}

	// The slow viewer: whatever was queued for it, then slow_viewer.
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	n := 0
	for {
		ev, err := slow.Next(ctx)
		if err != nil {
			t.Fatalf("slow viewer: %v after %d frames", err, n)
		}
		if ev.Kind == ring.EventEnd {
			if ev.End.Reason != ring.ReasonSlowViewer {
				t.Fatalf("slow viewer end: %q after %d frames, want %s", ev.End.Reason, n, ring.ReasonSlowViewer)
			}
			break
		}
		if ev.Kind == ring.EventFrame {
			if ev.Frame.Seq != lastSeq+1+uint64(n) {
				t.Fatalf("slow viewer frame %d: seq %d, want %d", n, ev.Frame.Seq, lastSeq+1+uint64(n))
			}
			n++
		}
	}
	if n == 0 || n > 1 {
		t.Fatalf("slow viewer got %d frames before the drop, want its queue (1)", n)
	}
}
