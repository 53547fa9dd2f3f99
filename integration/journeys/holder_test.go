package journeys

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/integration/realcli"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Sessions outlive their agent (issue 30), through the real agent binary:
// a Claude Code run (the fake CLI) is held by `olivares-agent hold`. kill -9
// of the agent mid-flood: the child keeps writing into its holder's spool;
// the agent started again adopts it (same pid, same generation, ledger
// adopted, status adopted_from) and the attach stream goes on at last+1
// with every byte, once (R-RC-6); input echoes; stop shows the observed
// exit (R-STOP-2). A child that exits while no agent runs is an observed
// exit, not lost; a killed holder is process_lost (R-STATE-6). No holder
// and no child is left behind.
func TestHolderAdoptsAcrossAgentKill(t *testing.T) {
	t.Parallel()
	f := setup(t, "yamux", integration.ProcOptions{RingMaxBytes: 64 << 20, RingMaxFrames: 1 << 20})
	r := f.launch(f.profile("claude"))
	r = f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	pid := r.PID
	if h := f.agent.Holders(); len(h) != 1 {
		t.Fatalf("holders %v, want one for the run", h)
	}
	spool := filepath.Join(f.agent.Dir, "holders", r.RunRef, "1", "spool")

	// kill -9 of the agent mid-flood.
	const flood = 16 << 20
	v := f.viewer.Attach(r.RunRef, "from=1")
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("flood "+strconv.Itoa(flood)), nil)
	received := outputsFrom(t, v, 3)
	f.agent.Kill()
	for {
		ev, ok := v.Next(wait)
		if !ok {
			break
		}
		if ev.Name == apitypes.SSEOutput {
			received = append(received, ev.Output(t))
		}
	}
	contiguous(t, received, 1)
	integration.Await(t, wait, "the child to write into its holder's spool while no agent runs", func() bool {
		fi, err := os.Stat(spool)
		return err == nil && fi.Size() > 0
	})
	f.agent.Start()
	f.agent.AwaitConnected(wait)
	r = f.viewer.AwaitRun(r.RunRef, wait, "adopted", func(r apitypes.Run) bool { return apitypes.Live(r.State) })
	if r.PID != pid || r.Generation != 1 {
		t.Fatalf("after the restart: pid %d gen %d, want pid %d gen 1 (adopted, not respawned)", r.PID, r.Generation, pid)
	}
	last := received[len(received)-1].Seq
	s := f.viewer.Attach(r.RunRef, "from="+strconv.FormatUint(last+1, 10))
	rest := s.UntilOutput("flooded "+strconv.Itoa(flood)+" bytes", wait)
	contiguous(t, rest, last+1)
	checkFlood(t, append(received, rest...), flood)

	evs := integration.Kinds(f.viewer.Events(r.RunRef))
	if countOf(evs, "adopted") != 1 || countOf(evs, "started") != 1 || slices.Contains(evs, "lost") {
		t.Fatalf("events %v: want one started and one adopted, no lost", evs)
	}
	var st struct {
		Runs []struct {
			RunRef      string `json:"run_ref"`
			AdoptedFrom string `json:"adopted_from"`
		} `json:"runs"`
	}
	out, err := exec.Command(filepath.Join(integration.Binaries(t), "olivares-agent"), "status", "--state-dir", f.agent.Dir, "--json").Output()
	if err := firstErr(err, json.Unmarshal(out, &st)); err != nil || len(st.Runs) != 1 || st.Runs[0].AdoptedFrom == "" {
		t.Fatalf("olivares-agent status: %v %s, want the run adopted", err, out)
	}

	// Input echoes through the adopted child; stop shows its exit.
	s.Close()
	s = f.viewer.Attach(r.RunRef, "from="+strconv.FormatUint(rest[len(rest)-1].Seq+1, 10))
	f.operator.AwaitRun(r.RunRef, wait, "idle after the flood", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("ping"), nil)
	s.UntilOutput("pong: ping", wait)

	// An upgrade: a graceful stop of the agent (SIGTERM, as systemctl
	// restart) leaves the holder too, and a newly built agent adopts it.
	newer := integration.AgentBinary(t, "0.2.0-upgrade")
	f.agent.Terminate()
	f.agent.SetBinary(newer)
	f.agent.Start()
	f.agent.AwaitConnected(wait)
	r = f.viewer.AwaitRun(r.RunRef, wait, "adopted again", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	if r.PID != pid || r.Generation != 1 {
		t.Fatalf("after a graceful restart: pid %d gen %d, want pid %d gen 1", r.PID, r.Generation, pid)
	}
	s.Close()
	s = f.viewer.Attach(r.RunRef, "from="+strconv.FormatUint(r.RingLast+1, 10))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("ping again"), nil)
	s.UntilOutput("pong: ping again", wait)
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	var upgraded []string
	for _, ev := range f.viewer.Events(r.RunRef) {
		if ev.Kind == "adopted" {
			upgraded = append(upgraded, string(ev.Detail))
		}
	}
	if len(upgraded) != 2 || !strings.Contains(upgraded[1], `"to":"0.2.0-upgrade"`) || strings.Contains(upgraded[1], `"from":"0.2.0-upgrade"`) {
		t.Fatalf("adopted rows %v: want a second one onto 0.2.0-upgrade from the version that started the run", upgraded)
	}
	var stopped apitypes.Run
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, &stopped)
	if stopped.State != apitypes.StateStopped || stopped.ExitCode == nil || *stopped.ExitCode != 143 {
		t.Fatalf("stop: %+v, want stopped with exit code 143 (R-STOP-2)", stopped)
	}
	noneLeft(t, f, pid)

	// The child exits while no agent runs: an observed exit (R-EXIT-1).
	var res apitypes.Run
	f.post(f.operator, http.StatusOK, r.RunRef, "resume", nil, &res)
	res = f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	// The fake answers once its signal handlers are in place.
	s = f.viewer.Attach(r.RunRef, "from="+strconv.FormatUint(res.RingLast+1, 10))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("ready?"), nil)
	s.UntilOutput("pong: ready?", wait)
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.agent.Kill()
	syscall.Kill(res.PID, syscall.SIGINT) // the fake, idle, exits 0 at once
	integration.Await(t, wait, "the child to exit", func() bool { return !integration.Alive(res.PID) })
	f.agent.Start()
	f.agent.AwaitConnected(wait)
	ex := f.viewer.AwaitRun(r.RunRef, wait, "the exit", func(r apitypes.Run) bool { return !apitypes.Live(r.State) })
	if ex.State != apitypes.StateStopped || ex.ExitCode == nil || *ex.ExitCode != 0 || ex.Generation != 2 {
		t.Fatalf("after an exit while no agent ran: %+v, want stopped with exit code 0", ex)
	}
	if evs := integration.Kinds(f.viewer.Events(r.RunRef)); slices.Contains(evs, "lost") || countOf(evs, "exited") != 2 {
		t.Fatalf("events %v: want two exited rows, no lost", evs)
	}
	noneLeft(t, f, res.PID)

	// The holder killed: process_lost, and its child goes with it.
	f.post(f.operator, http.StatusOK, r.RunRef, "resume", nil, &res)
	res = f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	h := f.agent.Holders()
	if len(h) != 1 {
		t.Fatalf("holders %v, want one", h)
	}
	syscall.Kill(h[0], syscall.SIGKILL)
	lost := f.viewer.AwaitRun(r.RunRef, wait, "lost", func(r apitypes.Run) bool { return r.State == apitypes.StateFailed })
	if lost.Reason != apitypes.ReasonProcessLost || lost.ExitCode != nil || lost.Signal != "" {
		t.Fatalf("after the holder was killed: %+v, want failed/process_lost (R-STATE-6)", lost)
	}
	noneLeft(t, f, res.PID)

	// Release and delete leave no holder directory.
	f.post(f.admin, http.StatusOK, r.RunRef, "cleanup", nil, nil)
	f.admin.Must(http.StatusNoContent, http.MethodDelete, "/v1/m/sessions/runs/"+r.RunRef, nil, nil)
	integration.Await(t, wait, "the run's holder directory to go", func() bool {
		_, err := os.Stat(filepath.Join(f.agent.Dir, "holders", r.RunRef))
		return os.IsNotExist(err)
	})
}

// Issue 30 with the real Claude Code (2.1.328, the fake Messages API):
// kill -9 of the agent mid-turn, the turn ends while no agent runs, and the
// agent started again adopts the same process: the attach stream goes on at
// last+1 with the turn's end, input echoes, stop shows 143 (R-STOP-2).
func TestRealClaudeAdoptedMidTurn(t *testing.T) {
	t.Parallel()
	f, fake, r, s := idleRealClaude(t)

	last := f.killMidTurn(r, s, fake.Push, integration.Message("mid-turn"), `"type":"result"`)
	now := f.viewer.AwaitRun(r.RunRef, wait, "adopted", func(r apitypes.Run) bool { return apitypes.Live(r.State) })
	if now.PID != r.PID || now.Generation != 1 {
		t.Fatalf("after the restart: pid %d gen %d, want pid %d gen 1", now.PID, now.Generation, r.PID)
	}
	s = f.viewer.Attach(r.RunRef, "from="+strconv.FormatUint(last+1, 10))
	rest := s.UntilOutput(`"type":"result"`, wait)
	contiguous(t, rest, last+1)
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("after"), nil)
	s.UntilOutput("pong: after", wait)
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.stopAdopted(r, 1, 143)
}

// Issue 30 with the real Codex (0.169.0, app-server, the fake Responses
// API): kill -9 of the agent mid-turn, the turn ends while no agent runs,
// and the agent started again adopts the same app-server (R-STATE-6,
// decisions.md 27): it asks app-server for the turn in flight, the attach
// stream goes on at last+1 with the turn's end, input starts a turn on the
// same thread, and stop shows the observed exit code (R-STOP-2).
func TestRealCodexAdoptedMidTurn(t *testing.T) {
	t.Parallel()
	bin := realBin(t, "codex")
	fake := fakemodel.NewOpenAI()
	defer fake.Close()
	f := setup(t, "yamux", integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	r := f.launchHandshaken(f.realCodexProfile(t, fake))
	if h := f.agent.Holders(); len(h) != 1 {
		t.Fatalf("holders %v, want one for the Codex run", h)
	}
	s := f.viewer.Attach(r.RunRef, "from=0")
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("hello"), nil)
	s.UntilOutput("pong: hello", wait)
	r = f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })

	last := f.killMidTurn(r, s, fake.Push, integration.Text("mid-turn"), `"method":"turn/completed"`)
	now := f.viewer.AwaitRun(r.RunRef, wait, "adopted", func(r apitypes.Run) bool { return apitypes.Live(r.State) })
	if now.PID != r.PID || now.Generation != 1 || now.ConversationID != r.ConversationID {
		t.Fatalf("after the restart: pid %d gen %d thread %s, want pid %d gen 1 thread %s", now.PID, now.Generation, now.ConversationID, r.PID, r.ConversationID)
	}
	s = f.viewer.Attach(r.RunRef, "from="+strconv.FormatUint(last+1, 10))
	rest := s.UntilOutput(`"method":"turn/completed"`, wait)
	contiguous(t, rest, last+1)
	if !bytes.Contains(joined(rest), []byte("held pong: mid-turn")) {
		t.Fatal("the turn's answer written while no agent ran is missing from the stream")
	}
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("after"), nil)
	s.UntilOutput("pong: after", wait)
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	if reqs := fake.ModelRequests(); !slices.Contains(reqs[len(reqs)-1].Said(), "assistant: held pong: mid-turn") {
		t.Fatalf("the turn after the adoption did not carry the thread's history: %v", reqs[len(reqs)-1].Said())
	}

	// Adopted while the turn still runs: app-server names the turn in
	// flight, so an interrupt reaches it.
	g2 := fakemodel.NewGate()
	defer g2.Release()
	fake.Push(fakemodel.Held(g2))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("long"), nil)
	closedWithin(t, g2.Arrived(), "the second turn never reached the fake model")
	f.agent.Kill()
	f.agent.Start()
	f.agent.AwaitConnected(wait)
	f.viewer.AwaitRun(r.RunRef, wait, "adopted running", func(r apitypes.Run) bool { return r.State == apitypes.StateRunning })
	f.post(f.operator, http.StatusAccepted, r.RunRef, "interrupt", nil, nil)
	f.operator.AwaitRun(r.RunRef, wait, "idle after the interrupt", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })

	f.stopAdopted(r, 2, 0) // app-server's exit code
}

// Issue 30, resume_after_loss with the real Claude Code (the fake Messages
// API): a simulated reboot (the agent, then the holder and its child,
// killed) and the agent started again resumes the run on its exact
// conversation: generation 2, the ledger says resumed_after_loss, and the
// next turn's request to the model carries the earlier history
// (R-STATE-6, decisions.md 30).
func TestRealClaudeResumedAfterLoss(t *testing.T) {
	t.Parallel()
	bin := realBin(t, "claude")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	f := setup(t, "yamux", integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	p := f.realClaudeProfileWith(fake, apitypes.ProfileCreate{Name: "claude-back", ResumeAfterLoss: true})
	if !p.ResumeAfterLoss {
		t.Fatalf("profile %+v: resume_after_loss not kept", p)
	}
	r := f.launch(p)
	s := f.viewer.Attach(r.RunRef, "from=0")
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("remember the reboot"), nil)
	s.UntilOutput("pong: remember the reboot", wait)
	r = f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle && r.ConversationID != "" })
	h := f.agent.Holders()
	if len(h) != 1 {
		t.Fatalf("holders %v, want one", h)
	}
	f.agent.Kill()
	syscall.Kill(h[0], syscall.SIGKILL)
	integration.Await(t, wait, "the child to die with its holder", func() bool { return !integration.Alive(r.PID) })
	f.agent.Start()
	f.agent.AwaitConnected(wait)
	back := f.viewer.AwaitRun(r.RunRef, wait, "resumed", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle && r.Generation == 2 })
	if back.ConversationID != r.ConversationID || back.PID == r.PID {
		t.Fatalf("after the reboot: %+v, want conversation %s in a new process", back, r.ConversationID)
	}
	evs := integration.Kinds(f.viewer.Events(r.RunRef))
	if countOf(evs, "lost") != 1 || countOf(evs, "resumed_after_loss") != 1 {
		t.Fatalf("events %v: want lost, then resumed_after_loss", evs)
	}
	s = f.viewer.Attach(r.RunRef, "from="+strconv.FormatUint(back.RingLast+1, 10))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("after"), nil)
	s.UntilOutput("pong: after", wait)
	reqs := fake.ModelRequests()
	if said := reqs[len(reqs)-1].Said(); !slices.Contains(said, "user: remember the reboot") {
		t.Fatalf("the turn after the reboot did not carry the earlier history: %v", said)
	}
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
	noneLeft(t, f, back.PID)
}

// killAgent kills -9 the agent; s, a viewer's stream, ends with the
// tunnel. It returns the last seq s got.
func (f *fixture) killAgent(s *integration.Stream) uint64 {
	var last uint64
	f.agent.Kill()
	for {
		ev, ok := s.Next(wait)
		if !ok {
			return last
		}
		if ev.Name == apitypes.SSEOutput {
			last = ev.Output(f.t).Seq
		}
	}
}

// killMidTurn sends input whose turn the fake model holds, kills -9 the
// agent while it runs (s, the viewer's stream, ends with the tunnel: it
// returns the last seq it got), lets the turn end while no agent runs,
// waits until the turn's end (end) is in the holder's spool, and starts
// the agent again.
func (f *fixture) killMidTurn(r apitypes.Run, s *integration.Stream, push func(...fakemodel.Reply), input any, end string) uint64 {
	t := f.t
	t.Helper()
	g := f.holdTurn(r, push, input)
	last := f.killAgent(s)
	g.Release()
	spool := filepath.Join(f.agent.Dir, "holders", r.RunRef, "1", "spool")
	integration.Await(t, wait, "the turn's end in the holder's spool", func() bool {
		b, _ := os.ReadFile(spool)
		return bytes.Contains(b, []byte(end))
	})
	f.agent.Start()
	f.agent.AwaitConnected(wait)
	return last
}

// holdTurn sends input whose model request the fake holds, and returns
// once the run is running with its request held; the caller releases the
// gate (the test's end does too).
func (f *fixture) holdTurn(r apitypes.Run, push func(...fakemodel.Reply), input any) *fakemodel.Gate {
	t := f.t
	t.Helper()
	g := fakemodel.NewGate()
	t.Cleanup(g.Release)
	push(fakemodel.Held(g))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", input, nil)
	closedWithin(t, g.Arrived(), "the turn never reached the fake model")
	f.operator.AwaitRun(r.RunRef, wait, "running", func(r apitypes.Run) bool { return r.State == apitypes.StateRunning })
	return g
}

// closedWithin fails t unless ch closes within wait; what says what did
// not happen.
func closedWithin(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(wait):
		t.Fatal(what)
	}
}

// launchHandshaken launches a run of p and returns it once its tool's
// handshake named the conversation and the run is idle.
func (f *fixture) launchHandshaken(p apitypes.Profile) apitypes.Run {
	f.t.Helper()
	r := f.launch(p)
	return f.operator.AwaitRun(r.RunRef, wait, "the handshake", func(r apitypes.Run) bool {
		return r.State == apitypes.StateIdle && r.ConversationID != ""
	})
}

// stopAdopted stops r, adopted n times, and checks the observed exit code
// (R-STOP-2; -1: any observed end), the ledger (n adopted rows, no lost)
// and that no holder and no child is left.
func (f *fixture) stopAdopted(r apitypes.Run, n, code int) {
	t := f.t
	t.Helper()
	var stopped apitypes.Run
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, &stopped)
	if stopped.State != apitypes.StateStopped || code >= 0 && (stopped.ExitCode == nil || *stopped.ExitCode != code) {
		t.Fatalf("stop: %+v, want stopped with exit code %d", stopped, code)
	}
	if evs := integration.Kinds(f.viewer.Events(r.RunRef)); countOf(evs, "adopted") != n || slices.Contains(evs, "lost") {
		t.Fatalf("events %v: want %d adopted, no lost", evs, n)
	}
	noneLeft(t, f, r.PID)
}

// interruptAdoptedTurn holds a turn of r (holdTurn), kills the agent and
// starts it again, and checks that the process was adopted (same pid,
// generation 1) in its turn: an interrupt cancels the held model request
// and the run is idle again.
func (f *fixture) interruptAdoptedTurn(r apitypes.Run, push func(...fakemodel.Reply), input any) {
	t := f.t
	t.Helper()
	g := f.holdTurn(r, push, input)
	f.agent.Kill()
	f.agent.Start()
	f.agent.AwaitConnected(wait)
	integration.Await(t, wait, "the adoption", func() bool { return countOf(integration.Kinds(f.viewer.Events(r.RunRef)), "adopted") == 1 })
	if now := f.viewer.Run(r.RunRef); now.PID != r.PID || now.Generation != 1 {
		t.Fatalf("after the restart: pid %d gen %d, want pid %d gen 1", now.PID, now.Generation, r.PID)
	}
	f.post(f.operator, http.StatusAccepted, r.RunRef, "interrupt", nil, nil)
	closedWithin(t, g.Gone(), "the interrupt of the adopted turn did not cancel its model request")
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
}

// idleRealClaude is a run of the real Claude Code (the fake Messages API)
// after one answered turn, attached from its first frame.
func idleRealClaude(t *testing.T) (*fixture, *fakemodel.Anthropic, apitypes.Run, *integration.Stream) {
	t.Helper()
	bin := realBin(t, "claude")
	fake := fakemodel.NewAnthropic()
	t.Cleanup(fake.Close)
	f := setup(t, "yamux", integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	r := f.launch(f.realClaudeProfile(fake))
	s := f.viewer.Attach(r.RunRef, "from=0")
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("hello"), nil)
	s.UntilOutput("pong: hello", wait)
	r = f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	return f, fake, r, s
}

// joined is the data of outputs, in order.
func joined(outs []apitypes.Output) []byte {
	var b []byte
	for _, o := range outs {
		b = append(b, o.Data...)
	}
	return b
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// noneLeft waits until no holder of the agent and not the child pid lives.
func noneLeft(t *testing.T, f *fixture, child int) {
	t.Helper()
	integration.Await(t, wait, "no holder and no child left", func() bool {
		return len(f.agent.Holders()) == 0 && !integration.Alive(child)
	})
}

// checkFlood checks that the stdout of a flood is every frame the fake
// wrote, once: whole JSON lines, each uuid once, the flooded bytes all
// there.
func checkFlood(t *testing.T, outs []apitypes.Output, n int) {
	t.Helper()
	var b bytes.Buffer
	for _, o := range outs {
		if o.Stream == "stdout" {
			if o.Encoding == "base64" {
				t.Fatalf("seq %d is not UTF-8", o.Seq)
			}
			b.WriteString(o.Data)
		}
	}
	seen := map[string]bool{}
	x := 0
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		var fr struct {
			Type    string `json:"type"`
			UUID    string `json:"uuid"`
			Message struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"message"`
		}
		if err := json.Unmarshal([]byte(line), &fr); err != nil {
			t.Fatalf("a line of the flood is cut or spliced (a gap or a duplicate): %.120q: %v", line, err)
		}
		if fr.UUID != "" {
			if seen[fr.UUID] {
				t.Fatalf("frame %s twice (R-RC-6)", fr.UUID)
			}
			seen[fr.UUID] = true
		}
		if fr.Type == "assistant" {
			for _, c := range fr.Message.Content {
				x += strings.Count(c.Text, "x")
			}
		}
	}
	if x != n {
		t.Fatalf("flooded %d bytes reached the ring, want %d", x, n)
	}
}

// Issue 30 with the real Claude Code: the agent is killed and started again
// while a turn still waits for the model. Claude Code cannot be asked
// whether a turn runs, so the new agent reads the turn's start in the
// run's retained output: the adopted turn is one the agent knows runs, so
// an interrupt cancels it (before, it was a no-op until the next turn) and
// its stall check runs again (R-ATTN-6).
func TestRealClaudeAdoptedWhileItsTurnRuns(t *testing.T) {
	t.Parallel()
	f, fake, r, _ := idleRealClaude(t)
	f.interruptAdoptedTurn(r, fake.Push, integration.Message("mid-turn"))
	s := f.viewer.Attach(r.RunRef, "")
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("after"), nil)
	s.UntilOutput("pong: after", wait)
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.stopAdopted(r, 1, 143)
}

// Issue 30 for the ACP tools (Gemini CLI, OpenCode and Grok played by the
// fake CLI, which speaks their ACP): kill -9 of the agent while a prompt
// runs and a second input waits behind it. ACP cannot be asked whether a
// prompt is in flight, so the agent started again reads the generation
// from its start (its output and the inputs sent) to take over the
// previous session's state: the run is adopted (same pid, generation 1),
// the attach stream goes on at last+1, an interrupt cancels the adopted
// prompt, the queued input is then sent (before, it was lost, and the
// interrupt did nothing), input echoes, and stop leaves nothing behind.
func TestACPAdoptedMidTurn(t *testing.T) {
	t.Parallel()
	f := setup(t, "yamux", integration.ProcOptions{})
	for _, tool := range []string{"gemini", "opencode", "grok"} {
		r := f.launchHandshaken(f.profile(tool))
		if h := f.agent.Holders(); len(h) != 1 {
			t.Fatalf("holders %v, want one for the %s run", h, tool)
		}
		s := f.viewer.Attach(r.RunRef, "from=0")
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("hello"), nil)
		s.UntilOutput("pong: hello", wait)
		f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("slow"), nil)
		s.UntilOutput("tick1 ", wait)
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("queued words"), nil)

		last := f.killAgent(s)
		f.agent.Start()
		f.agent.AwaitConnected(wait)
		integration.Await(t, wait, "the adoption", func() bool { return countOf(integration.Kinds(f.viewer.Events(r.RunRef)), "adopted") == 1 })
		if now := f.viewer.Run(r.RunRef); now.PID != r.PID || now.Generation != 1 {
			t.Fatalf("%s after the restart: pid %d gen %d, want pid %d gen 1", tool, now.PID, now.Generation, r.PID)
		}
		s = f.viewer.Attach(r.RunRef, "from="+strconv.FormatUint(last+1, 10))
		f.post(f.operator, http.StatusAccepted, r.RunRef, "interrupt", nil, nil)
		rest := s.UntilOutput("pong: queued words", wait)
		contiguous(t, rest, last+1)
		if !bytes.Contains(joined(rest), []byte(`"stopReason":"cancelled"`)) {
			t.Fatalf("%s: the adopted prompt was not cancelled before the queued input went", tool)
		}
		f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("after"), nil)
		s.UntilOutput("pong: after", wait)
		f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
		f.stopAdopted(r, 1, -1) // the fake CLI ends as each tool does
	}
}

// TestACPAdoptedMidTurn with the real Gemini CLI (0.61.0, ACP, the fake
// Gemini API): kill -9 of the agent while the model request is held; the
// agent started again adopts the same process as running, an interrupt
// cancels the held request, and the next turn's request carries the
// session's history (R-STATE-6, decisions.md 27).
func TestRealGeminiAdoptedWhileItsTurnRuns(t *testing.T) {
	t.Parallel()
	bin := realBin(t, "gemini")
	fake := fakemodel.NewGemini()
	defer fake.Close()
	f := setup(t, "yamux", integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	home := filepath.Join(realcli.HomeDir(t), "home")
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(`{"general":{"sessionRetention":{"enabled":false}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var p apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "gemini", Name: "gemini-real", Home: home,
		Env: map[string]string{"GEMINI_API_KEY": "test", "GOOGLE_GEMINI_BASE_URL": fake.URL()}}, &p)
	r := f.launchHandshaken(p)
	s := f.viewer.Attach(r.RunRef, "from=0")
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("hello"), nil)
	s.UntilOutput(`"stopReason":"end_turn"`, wait)
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })

	f.interruptAdoptedTurn(r, fake.Push, integration.Text("mid-turn"))
	s = f.viewer.Attach(r.RunRef, "")
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("after"), nil)
	s.UntilOutput(`"stopReason":"end_turn"`, wait)
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	if reqs := fake.Turns(); !slices.Contains(reqs[len(reqs)-1].Said(), "model: pong: hello") {
		t.Fatalf("the turn after the adoption did not carry the session's history: %v", reqs[len(reqs)-1].Said())
	}
	f.stopAdopted(r, 1, 0) // Gemini CLI's exit code at stdin EOF
}
