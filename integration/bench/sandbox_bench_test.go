package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/tunnel"
)

// Sizes and targets of TestSandboxReport (issue 31).
const (
	sandboxLaunches   = 9
	sandboxRounds     = 3
	sandboxFlood      = 16 << 20
	sandboxEchoes     = 40 // per run and round
	sandboxLaunchMax  = 1.5
	sandboxEchoMax    = 1.1
	sandboxThroughMin = 0.9
)

// TestSandboxReport measures isolation=sandbox and isolation=container
// against native on one agent process, taking turns in the same run
// (docs/isolation.md):
// POST /runs to the run's first output event on an attach, input-to-echo
// p50 on an open attach, and output throughput of a flood. It runs only
// with OLIVARES_BENCH=1 and never fails on a figure.
func TestSandboxReport(t *testing.T) {
	if os.Getenv("OLIVARES_BENCH") != "1" {
		t.Skip("set OLIVARES_BENCH=1 (or run scripts/bench) to measure the sandbox")
	}
	env := integration.NewEnv(t, integration.Options{Unchecked: true}) // the contract check would be timed too
	n := newRunNode(t, env, integration.ProcOptions{Transport: tunnel.TransportYamux, RingMaxBytes: ringBound, Container: true})
	var node apitypes.Node
	n.c.Must(http.StatusOK, http.MethodGet, "/v1/nodes/"+n.agent.ID, nil, &node)
	var caps proto.Capabilities
	if err := json.Unmarshal(node.Capabilities, &caps); err != nil || !caps.Sandbox {
		t.Skipf("sandbox does not work on this node: %s %v", caps.SandboxError, err)
	}
	profs := map[string]apitypes.Profile{"native": n.prof}
	names := []string{"native", apitypes.IsolationSandbox}
	if caps.Container {
		names = append(names, apitypes.IsolationContainer)
	} else {
		t.Logf("container does not work on this node, measured sandbox only: %s", caps.ContainerError)
	}
	for _, iso := range names[1:] {
		var p apitypes.Profile
		n.c.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{NodeID: n.agent.ID, Tool: "codex",
			Name: "codex-" + iso, Home: filepath.Join(t.TempDir(), "home-"+iso), Isolation: iso}, &p)
		profs[iso] = p
	}

	// Launch to first output.
	launches := map[string][]time.Duration{}
	for i := range len(names) * sandboxLaunches {
		name := names[i%len(names)]
		d, ref, err := launchToOutput(n, profs[name])
		if err != nil {
			t.Fatal(err)
		}
		if i >= len(names) { // the first of each warms up
			launches[name] = append(launches[name], d)
		}
		n.c.Must(http.StatusOK, http.MethodPost, "/v1/m/sessions/runs/"+ref+"/stop", nil, nil)
	}

	streams := map[string]*runStream{}
	for _, name := range names {
		r, err := n.api.Launch(context.Background(), apitypes.LaunchRequest{ProviderProfileRef: profs[name].Ref, WorkspaceRef: n.ws.Ref})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.awaitIdle(r.RunRef, time.Minute); err != nil {
			t.Fatal(err)
		}
		streams[name] = &runStream{name: name, n: n, ref: r.RunRef, next: 1, peer: n.c.Run(r.RunRef).PID}
		if err := streams[name].flood(4 << 20); err != nil {
			t.Fatal(err)
		}
		if err := streams[name].echoes(10, 0); err != nil {
			t.Fatal(err)
		}
		streams[name].mbps = nil
	}
	for range sandboxRounds {
		for _, name := range names {
			r := streams[name]
			if err := r.flood(sandboxFlood); err != nil {
				t.Fatal(err)
			}
			if err := r.echoes(0, sandboxEchoes); err != nil {
				t.Fatal(err)
			}
		}
	}

	var b strings.Builder
	runsHeader(&b, "isolation=sandbox and container against native, one agent (yamux), the same run")
	ln, en := percentile(launches["native"], 50), percentile(streams["native"].trips, 50)
	for _, iso := range names[1:] {
		l := percentile(launches[iso], 50)
		fmt.Fprintf(&b, "launch (POST /runs -> first output event), median of %d: native %s, %s %s: %.2f× (target ≤ %.1f): %s\n",
			sandboxLaunches-1, ms(ln), iso, ms(l), float64(l)/float64(ln), sandboxLaunchMax, verdict(float64(l)/float64(ln) <= sandboxLaunchMax))
		e := percentile(streams[iso].trips, 50)
		fmt.Fprintf(&b, "echo p50 (input -> pong on an open attach), %d trips each: native %s, %s %s: %.2f× (target ≤ %.1f): %s\n",
			sandboxRounds*sandboxEchoes, ms(en), iso, ms(e), float64(e)/float64(en), sandboxEchoMax, verdict(float64(e)/float64(en) <= sandboxEchoMax))
		tr := perRound(streams[iso].mbps, streams["native"].mbps)
		fmt.Fprintf(&b, "throughput (a %d MiB flood), median per round of %d: native %.1f MB/s, %s %.1f MB/s: %.2f× (target ≥ %.1f): %s\n",
			sandboxFlood>>20, sandboxRounds, median(streams["native"].mbps), iso, median(streams[iso].mbps), tr, sandboxThroughMin, verdict(tr >= sandboxThroughMin))
	}
	t.Log(b.String())
}

// launchToOutput launches a run of prof and attaches from its first seq:
// the time from the POST to the first output event.
func launchToOutput(n *runNode, prof apitypes.Profile) (time.Duration, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	r, err := n.api.Launch(ctx, apitypes.LaunchRequest{ProviderProfileRef: prof.Ref, WorkspaceRef: n.ws.Ref})
	if err != nil {
		return 0, "", err
	}
	s, err := n.api.Attach(ctx, r.RunRef, apiclient.AttachOptions{From: 1, HaveFrom: true})
	if err != nil {
		return 0, "", err
	}
	defer s.Close()
	for {
		ev, err := s.Next()
		if err != nil {
			return 0, "", fmt.Errorf("launch %s: attach: %w", r.RunRef, err)
		}
		if ev.Type == apitypes.SSEOutput {
			return time.Since(start), r.RunRef, nil
		}
	}
}
