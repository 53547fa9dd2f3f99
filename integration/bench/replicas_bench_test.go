package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// TestReplicasReport measures coordinator replicas on one PostgreSQL
// (issue 24), each figure against its baseline in the same run: attach
// throughput through a replica that forwards to the node's replica against
// the node's replica itself (target ≥ 0.7×), the input echo p50 the same
// two ways, and the time an agent takes to be connected again after its
// replica is killed with SIGKILL, against its heartbeat interval. Both
// replicas measured are processes of the same coordinator binary (issue
// 34: a forwarded/direct ratio between a process and this test binary, or
// between a -race build and a plain one, says nothing). It runs only with
// OLIVARES_BENCH=1 and never fails on a figure.
func TestReplicasReport(t *testing.T) {
	if os.Getenv("OLIVARES_BENCH") != "1" {
		t.Skip("set OLIVARES_BENCH=1 (or run scripts/bench) to measure replicas")
	}
	const heartbeat = time.Second
	env := integration.NewEnv(t, integration.Options{Postgres: pgtest.NewDatabase(t), Heartbeat: heartbeat})
	// The agent's replica (a) and the forwarding one (b); the env's own
	// coordinator, in this process, is there for the agent to go to when
	// a is killed.
	a, b := env.StartReplicaProcess(), env.StartReplicaProcess()
	agent := env.StartAgentProcess(integration.ProcOptions{Transport: "yamux", Coordinators: []string{a.TunnelAddr(), env.TunnelAddr()}})
	agent.AwaitConnected(time.Minute)
	integration.Await(t, time.Minute, "the agent on replica "+a.ID, func() bool {
		l := env.Fleet().Link(agent.ID)
		return l.Connected && l.Replica == a.ID
	})
	admin := env.Client(env.AdminToken)
	var ws apitypes.Workspace
	admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/workspaces",
		apitypes.WorkspaceCreate{NodeID: agent.ID, Path: t.TempDir(), Name: "w"}, &ws)
	var prof apitypes.Profile
	admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles",
		apitypes.ProfileCreate{NodeID: agent.ID, Tool: "claude", Name: "c", Home: filepath.Join(t.TempDir(), "home")}, &prof)
	var run apitypes.Run
	admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/runs",
		apitypes.LaunchRequest{ProviderProfileRef: prof.Ref, WorkspaceRef: ws.Ref}, &run)
	forwarded, direct := admin.Via(b), admin.Via(a)

	// Throughput: a flood read through each, alternately, best of three.
	const flood = 16 << 20
	var fwdBest, dirBest float64
	for range 3 {
		for _, w := range []struct {
			c    *integration.Client
			best *float64
		}{{forwarded, &fwdBest}, {direct, &dirBest}} {
			*w.best = max(*w.best, floodRate(t, w.c, run.RunRef, flood))
		}
	}
	t.Logf("attach throughput of a %d MiB flood: %.1f MB/s through a forwarding replica, %.1f MB/s direct: forwarded/direct %.2fx (target ≥ 0.70x): %s",
		flood>>20, fwdBest/1e6, dirBest/1e6, fwdBest/dirBest, verdict(fwdBest/dirBest >= 0.7))

	// Input echo: POST input, then the echo on the attach stream.
	fwdP50, dirP50 := echoP50(t, forwarded, run.RunRef, 30), echoP50(t, direct, run.RunRef, 30)
	t.Logf("input echo p50: %v forwarded, %v direct: forwarded/direct %.2fx", fwdP50, dirP50, float64(fwdP50)/float64(dirP50))

	// Reconnect: kill -9 the agent's replica; time until the other holds it.
	start := time.Now()
	a.Kill()
	integration.Await(t, time.Minute, "the agent on another replica", func() bool {
		l := env.Fleet().Link(agent.ID)
		return l.Connected && l.Replica != a.ID
	})
	took := time.Since(start)
	t.Logf("agent reconnect after its replica was killed: %v, %.2fx the heartbeat interval (%v)", took, float64(took)/float64(heartbeat), heartbeat)
}

// floodRate attaches through c at the run's end, asks for n bytes of
// output and returns the bytes per second until the turn's reply arrived.
func floodRate(t *testing.T, c *integration.Client, ref string, n int) float64 {
	t.Helper()
	from := c.Run(ref).RingLast + 1
	s, err := c.API().Attach(context.Background(), ref, apiclient.AttachOptions{Query: map[string][]string{"from": {strconv.FormatUint(from, 10)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	c.Must(http.StatusAccepted, http.MethodPost, "/v1/m/sessions/runs/"+ref+"/input", integration.Message(fmt.Sprintf("flood %d", n)), nil)
	got := 0
	for {
		ev, err := s.Next()
		if err != nil {
			t.Fatalf("flood: %v", err)
		}
		if ev.Type != apitypes.SSEOutput {
			continue
		}
		got += len(ev.Data)
		if strings.Contains(string(ev.Data), "flooded") {
			break
		}
	}
	c.AwaitRun(ref, time.Minute, "idle after the flood", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	return float64(got) / time.Since(start).Seconds()
}

// echoP50 sends k inputs through c, each once the previous one's echo
// arrived on c's attach stream, and returns the p50 round trip.
func echoP50(t *testing.T, c *integration.Client, ref string, k int) time.Duration {
	t.Helper()
	c.AwaitRun(ref, time.Minute, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	from := c.Run(ref).RingLast + 1
	s, err := c.API().Attach(context.Background(), ref, apiclient.AttachOptions{Query: map[string][]string{"from": {strconv.FormatUint(from, 10)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var rtts []time.Duration
	for i := range k {
		want := fmt.Sprintf("pong: echo %d", i)
		start := time.Now()
		c.Must(http.StatusAccepted, http.MethodPost, "/v1/m/sessions/runs/"+ref+"/input", integration.Message(fmt.Sprintf("echo %d", i)), nil)
		for {
			ev, err := s.Next()
			if err != nil {
				t.Fatalf("echo: %v", err)
			}
			if ev.Type == apitypes.SSEOutput && strings.Contains(string(ev.Data), want) {
				break
			}
		}
		rtts = append(rtts, time.Since(start))
		c.AwaitRun(ref, time.Minute, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2]
}
