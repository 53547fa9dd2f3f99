package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/tunnel"
)

// The sizes of TestRunsReport.
const (
	floodPiece  = 16 << 10         // the peer's flood piece (fakecli floodChunk)
	floodBytes  = 64 << 20         // one flood, per link and round
	runsRounds  = 5                // links take turns round by round; medians
	echoTrips   = 300              // per link, spread over the rounds
	echoWarmup  = 30               // per link, before the first round
	scaleRuns   = 500              // OLIVARES_BENCH_RUNS overrides
	launchConc  = 16               // launches in flight at once
	attachTries = 300              // attach samples, single run and at scale
	ringBound   = 256 << 20        // ring_max_bytes of the stream agents: nothing is evicted under a viewer
	phaseBudget = 10 * time.Minute // no measured phase takes this long
)

// Targets (issues 3 and 18).
const (
	floodVsTLSTarget    = 0.25 // output throughput / raw TLS
	floodVsSSHTarget    = 1.0  // output throughput / ssh
	floodVsAppendTarget = 0.5  // output throughput / durable append of the same bytes
	// agent (with its holder) + coordinator CPU per MiB / the floor: the
	// minimal pipeline's + io.Copy between two TLS sockets (issue 34)
	cpuPerByteTarget = 1.5
	echoP99Target    = 4 * time.Millisecond
	echoP50Target    = 1800 * time.Microsecond
	memPerRunTarget  = 2 << 20 // agent RSS per live idle run
	attachP99Target  = 1.5     // p99 at scale / p99 with one run
)

// turnCompleted ends a codex turn: the last line the peer writes for it.
const turnCompleted = `"turn/completed"`

// TestRunsReport measures runs end to end: real olivares-agent processes
// whose children are the fakecli peer (as codex), the tunnel on both
// transports, the coordinator's HTTP API and an SSE client. Every figure is
// printed beside a baseline measured in the same run, with the target it
// meets or misses; it never fails on a figure (issue 3). It
// runs only with OLIVARES_BENCH=1 (scripts/bench).
//
//   - stream: output throughput (a 64 MiB flood) and input-to-echo latency
//     on QUIC and yamux, beside raw TLS 1.3 and ssh on 127.0.0.1;
//   - scale: 500 live runs on one agent (OLIVARES_BENCH_RUNS=N for
//     another count): the agent's RSS per run and attach latency against
//     one run.
func TestRunsReport(t *testing.T) {
	if os.Getenv("OLIVARES_BENCH") != "1" {
		t.Skip("set OLIVARES_BENCH=1 (or run scripts/bench) to measure runs end to end")
	}
	t.Run("stream", runsStreamReport)
	t.Run("scale", runsScaleReport)
}

// runNode is one agent process with a workspace and a codex profile.
type runNode struct {
	env   *integration.Env
	agent *integration.AgentProc
	c     *integration.Client
	api   *apiclient.Client // c's, for worker goroutines: it fails no test
	ws    apitypes.Workspace
	prof  apitypes.Profile
}

func newRunNode(t testing.TB, env *integration.Env, o integration.ProcOptions) *runNode {
	t.Helper()
	a := env.StartAgentProcess(o)
	a.AwaitConnected(time.Minute)
	n := &runNode{env: env, agent: a, c: env.Client(env.AdminToken)}
	n.api = n.c.API()
	n.c.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/workspaces",
		apitypes.WorkspaceCreate{NodeID: a.ID, Path: t.TempDir(), Name: "bench-" + a.ID}, &n.ws)
	n.c.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles",
		apitypes.ProfileCreate{NodeID: a.ID, Tool: "codex", Name: "codex-" + a.ID, Home: filepath.Join(t.TempDir(), "home")}, &n.prof)
	return n
}

// launch starts one codex run; safe from any goroutine.
func (n *runNode) launch() (string, error) {
	r, err := n.api.Launch(context.Background(), apitypes.LaunchRequest{ProviderProfileRef: n.prof.Ref, WorkspaceRef: n.ws.Ref})
	if err != nil {
		return "", fmt.Errorf("launch: %w", err)
	}
	return r.RunRef, nil
}

func (n *runNode) input(ref, text string) error {
	if _, err := n.api.Input(context.Background(), ref, apitypes.InputRequest{Text: &text}); err != nil {
		return fmt.Errorf("input to %s: %w", ref, err)
	}
	return nil
}

// awaitIdle polls the run until it is idle.
func (n *runNode) awaitIdle(ref string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		r, err := n.api.Run(context.Background(), ref)
		if err != nil {
			return err
		}
		switch {
		case r.State == apitypes.StateIdle:
			return nil
		case !apitypes.Live(r.State):
			return fmt.Errorf("run %s is %s (%s), want idle", ref, r.State, r.Reason)
		case time.Now().After(deadline):
			return fmt.Errorf("run %s still %s after %v", ref, r.State, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// marker finds sub in a stream of chunks, across chunk boundaries.
type marker struct {
	sub  []byte
	tail []byte
}

func newMarker(sub string) *marker { return &marker{sub: []byte(sub)} }

func (m *marker) seen(p []byte) bool {
	k := len(m.sub) - 1
	found := bytes.Contains(p, m.sub)
	if !found && len(m.tail) > 0 {
		joint := append(m.tail, p[:min(len(p), k)]...)
		found = bytes.Contains(joint, m.sub)
	}
	if len(p) >= k {
		m.tail = append(m.tail[:0], p[len(p)-k:]...)
	} else {
		m.tail = append(m.tail, p...)
		if len(m.tail) > k {
			m.tail = m.tail[len(m.tail)-k:]
		}
	}
	return found
}

// runStream is one transport's agent and its run, attached over SSE.
type runStream struct {
	name string
	n    *runNode
	ref  string
	next uint64 // the seq to attach from: one past the last one read
	peer int    // the child's pid
	buf  []byte

	mbps    []float64 // per round, 10^6 decoded output bytes per second
	got     int64     // decoded output bytes of the last flood
	lags    int       // lag events: frames evicted before the viewer read them
	dropped int       // viewers dropped as slow: by the agent (end slow_viewer) or the coordinator
	// CPU seconds per flood of the agent, the run's holder (0 for an
	// unheld run), the peer and this process (the coordinator and the SSE
	// client), and the flood's wall time.
	cpuAgent, cpuHolder, cpuPeer, cpuSelf, wall []float64

	trips []time.Duration // POST input -> the output event with the pong
	first []time.Duration // POST input -> the turn's first output event
	posts []time.Duration // POST input -> its 202
	pings int             // inputs sent, so that every "ping N" is new
}

// attach opens the run's attach from r.next, read in the caller's
// goroutine so that a timed loop measures the stack and not a channel hop;
// it returns once the coordinator answered 200 (the agent's viewer is
// subscribed by then). It does not reconnect: readUntil counts the drops.
func (r *runStream) attach(ctx context.Context) (*apiclient.Stream, error) {
	return r.n.api.Attach(ctx, r.ref, apiclient.AttachOptions{From: r.next, HaveFrom: true})
}

// readUntil reads events until the decoded output shows done (it may span
// two events); each decoded output is passed to onOutput first. Lag events
// are counted; a viewer the agent or the coordinator dropped as slow is
// counted and attached again from the next seq.
func (r *runStream) readUntil(ctx context.Context, s **apiclient.Stream, done *marker, onOutput func([]byte)) error {
	for {
		ev, err := (*s).Next()
		if errors.Is(err, io.EOF) && ctx.Err() == nil {
			// The coordinator dropped this viewer as slow: its stream
			// ends without end (coordinator/api/relay.go). Counted, and
			// attached again at the next seq, as a client does.
			r.dropped++
			(*s).Close()
			if *s, err = r.attach(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: attach: %w", r.name, err)
		}
		switch ev.Type {
		case apitypes.SSEOutput:
			r.buf, err = outputData(r.buf[:0], ev.Data)
			if err != nil {
				return err
			}
			seq, err := strconv.ParseUint(ev.ID, 10, 64)
			if err != nil {
				return fmt.Errorf("%s: output id %q: %w", r.name, ev.ID, err)
			}
			r.next = seq + 1
			if onOutput != nil {
				onOutput(r.buf)
			}
			if done.seen(r.buf) {
				return nil
			}
		case apitypes.SSELag:
			r.lags++
		case apitypes.SSEEnd:
			if !bytes.Contains(ev.Data, []byte("slow_viewer")) {
				return fmt.Errorf("%s: end %s", r.name, ev.Data)
			}
			r.dropped++
			(*s).Close()
			if *s, err = r.attach(ctx); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: event %s %s", r.name, ev.Type, ev.Data)
		}
	}
}

// flood asks the peer for n bytes and reads the turn's output to its end:
// the decoded bytes of output events per second, from the input's POST.
func (r *runStream) flood(n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), phaseBudget)
	defer cancel()
	s, err := r.attach(ctx)
	if err != nil {
		return err
	}
	defer func() { s.Close() }()
	var got int64
	pids := []int{r.n.agent.Pid(), r.holder(), r.peer, os.Getpid()}
	cpu0 := cpuSeconds(pids)
	start := time.Now()
	if err := r.n.input(r.ref, fmt.Sprintf("flood %d", n)); err != nil {
		return err
	}
	if err := r.readUntil(ctx, &s, newMarker(turnCompleted), func(p []byte) { got += int64(len(p)) }); err != nil {
		return err
	}
	d := time.Since(start)
	cpu1 := cpuSeconds(pids)
	r.cpuAgent = append(r.cpuAgent, cpu1[0]-cpu0[0])
	r.cpuHolder = append(r.cpuHolder, cpu1[1]-cpu0[1])
	r.cpuPeer = append(r.cpuPeer, cpu1[2]-cpu0[2])
	r.cpuSelf = append(r.cpuSelf, cpu1[3]-cpu0[3])
	r.wall = append(r.wall, d.Seconds())
	if got < int64(n) {
		return fmt.Errorf("%s: flood of %d bytes: read %d", r.name, n, got)
	}
	r.got = got
	r.mbps = append(r.mbps, float64(got)/1e6/d.Seconds())
	return nil
}

// holder is the pid of the run's holder, the peer's parent (0 when the
// agent itself is that parent: an unheld run).
func (r *runStream) holder() int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.peer))
	if err != nil {
		return 0
	}
	_, rest, _ := bytes.Cut(b, []byte(") "))
	f := strings.Fields(string(rest))
	if len(f) < 2 {
		return 0
	}
	if ppid, _ := strconv.Atoi(f[1]); ppid != r.n.agent.Pid() {
		return ppid
	}
	return 0
}

// echoes sends k inputs "ping i", each once the previous turn completed,
// and records the time from the POST to the output event that carries
// "pong: ping i". warm trips are not recorded.
func (r *runStream) echoes(warm, k int) error {
	ctx, cancel := context.WithTimeout(context.Background(), phaseBudget)
	defer cancel()
	s, err := r.attach(ctx)
	if err != nil {
		return err
	}
	defer func() { s.Close() }()
	for i := range warm + k {
		pong, first, post, err := r.echo(ctx, &s)
		if err != nil {
			return err
		}
		if i >= warm {
			r.trips = append(r.trips, pong)
			r.first = append(r.first, first)
			r.posts = append(r.posts, post)
		}
	}
	return nil
}

// echo is one trip on the open attach s: the times from the POST to the
// output with the pong, to the turn's first output and to the POST's 202.
// It returns once the turn completed.
func (r *runStream) echo(ctx context.Context, s **apiclient.Stream) (pong, first, post time.Duration, err error) {
	r.pings++
	id := r.pings
	m := newMarker(fmt.Sprintf(`pong: ping %d"`, id))
	start := time.Now()
	if err := r.n.input(r.ref, "ping "+strconv.Itoa(id)); err != nil {
		return 0, 0, 0, err
	}
	post = time.Since(start)
	err = r.readUntil(ctx, s, newMarker(turnCompleted), func(p []byte) {
		if first == 0 {
			first = time.Since(start)
		}
		if pong == 0 && m.seen(p) {
			pong = time.Since(start)
		}
	})
	if err == nil && pong == 0 {
		err = fmt.Errorf("%s: turn %d completed without %q", r.name, id, m.sub)
	}
	return pong, first, post, err
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// streamNamed is the stream called name, nil when none is.
func streamNamed(streams []*runStream, name string) *runStream {
	for _, r := range streams {
		if r.name == name {
			return r
		}
	}
	return nil
}

// perRound is the median over rounds of a[i]/b[i].
func perRound(a, b []float64) float64 {
	rs := make([]float64, len(a))
	for i := range rs {
		rs[i] = a[i] / b[i]
	}
	return median(rs)
}

func runsHeader(sb *strings.Builder, what string) {
	fmt.Fprintf(sb, "\n%s (%s, GOMAXPROCS=%d, NumCPU=%d, %s/%s%s)\n", what,
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, udpBuffers())
}

// unheld is the name of the third stream: yamux, its agent starting no
// holders (issue 30), the baseline of the holder's end-to-end cost.
const unheld = "yamux unheld"

// newRunStreams starts one agent process per transport, each with one
// idle codex run, and a third on yamux whose run has no holder: the same
// agent binary under another name, which starts none (agentd.holders).
func newRunStreams(t testing.TB) []*runStream {
	t.Helper()
	env := integration.NewEnv(t, integration.Options{Unchecked: true}) // the contract check would be timed too
	var streams []*runStream
	for _, name := range []string{tunnel.TransportQUIC, tunnel.TransportYamux, unheld} {
		tr, _, _ := strings.Cut(name, " ")
		// A bound far above one flood: a viewer that the agent drops as
		// slow reattaches from its next seq without losing frames.
		n := newRunNode(t, env, integration.ProcOptions{Transport: tr, RingMaxBytes: ringBound})
		if l := env.Fleet().Link(n.agent.ID); l.Transport != tr {
			t.Fatalf("agent on %s, want %s", l.Transport, tr)
		}
		if name == unheld {
			n.agent.Terminate()
			n.agent.SetBinary(renamedAgent(t))
			n.agent.Start()
			n.agent.AwaitConnected(time.Minute)
		}
		ref, err := n.launch()
		if err != nil {
			t.Fatal(err)
		}
		if err := n.awaitIdle(ref, time.Minute); err != nil {
			t.Fatal(err)
		}
		if held := len(n.agent.Holders()) == 1; held != (name != unheld) {
			t.Fatalf("%s: run held %v", name, held)
		}
		streams = append(streams, &runStream{name: name, n: n, ref: ref, next: 1, peer: n.c.Run(ref).PID})
	}
	return streams
}

// renamedAgent is a copy of the agent binary named olivares-agent-unheld.
func renamedAgent(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(integration.Binaries(t), "olivares-agent"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "olivares-agent-unheld")
	if err := os.WriteFile(out, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

// BenchmarkRunOutput: one 64 MiB flood per iteration from the peer's
// stdout to an SSE client, per transport (TestRunsReport has the ratios).
func BenchmarkRunOutput(b *testing.B) {
	for _, r := range newRunStreams(b) {
		b.Run(r.name, func(b *testing.B) {
			if err := r.flood(8 << 20); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(floodBytes)
			for b.Loop() {
				if err := r.flood(floodBytes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRunEcho: one input-to-pong trip per iteration on an open
// attach, per transport.
func BenchmarkRunEcho(b *testing.B) {
	for _, r := range newRunStreams(b) {
		b.Run(r.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), phaseBudget)
			defer cancel()
			s, err := r.attach(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { s.Close() }()
			for range echoWarmup {
				if _, _, _, err := r.echo(ctx, &s); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if _, _, _, err := r.echo(ctx, &s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// runsStreamReport: output throughput and input-to-echo latency through
// agent, tunnel (QUIC and yamux) and coordinator, beside raw TLS and ssh.
func runsStreamReport(t *testing.T) {
	streams := newRunStreams(t)
	tb := newTLSBase(t)
	sb, sshSkip := newSSHBase(t)

	// Warm-up: one smaller flood and some echoes per link.
	for _, r := range streams {
		if err := r.flood(8 << 20); err != nil {
			t.Fatal(err)
		}
		r.mbps, r.cpuAgent, r.cpuPeer, r.cpuSelf, r.wall = nil, nil, nil, nil, nil
		if err := r.echoes(echoWarmup, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tb.pull(8 << 20); err != nil {
		t.Fatal(err)
	}
	var tlsMB, sshMB, oneMB, appendMB, pipeMB, pipeCPU, relayCPU []float64
	var tlsTrips, sshTrips []time.Duration
	dir := t.TempDir()
	profiles := map[string]string{}
	for i := range echoWarmup {
		if _, err := tb.roundTrip(i); err != nil {
			t.Fatal(err)
		}
		if sb != nil {
			if _, err := sb.roundTrip(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	if sb != nil {
		if _, err := sb.pull(8 << 20); err != nil {
			t.Fatal(err)
		}
	}

	for round := range runsRounds {
		for _, r := range streams {
			if round == 0 {
				// The first round runs under perf: the agent's profile, and
				// the coordinator's (this process, with the SSE client).
				var agentTop, coordTop string
				var err error
				coordTop, err = pprofTop(dir, "coordinator-"+strings.ReplaceAll(r.name, " ", "-"), func() error {
					var ferr error
					agentTop, ferr = perfTop(dir, r.n.agent.Pid(), func() error { return r.flood(floodBytes) })
					return ferr
				})
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				profiles[r.name+" agent"], profiles[r.name+" coordinator+SSE client"] = agentTop, coordTop
				continue
			}
			if err := r.flood(floodBytes); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		v, err := durableAppend(dir, floodBytes)
		if err != nil {
			t.Fatal(err)
		}
		appendMB = append(appendMB, v)
		v, cpu, err := minimalPipeline(t, dir, floodBytes)
		if err != nil {
			t.Fatal(err)
		}
		pipeMB, pipeCPU = append(pipeMB, v), append(pipeCPU, cpu.Seconds())
		cpu, err = relayCopy(t, floodBytes)
		if err != nil {
			t.Fatal(err)
		}
		relayCPU = append(relayCPU, cpu.Seconds())
		v, err = tb.pull(floodBytes)
		if err != nil {
			t.Fatal(err)
		}
		tlsMB = append(tlsMB, v)
		if sb != nil {
			if v, err = sb.pull(floodBytes); err != nil {
				t.Fatal(err)
			}
			sshMB = append(sshMB, v)
			if v, err = sb.oneShot(floodBytes); err != nil {
				t.Fatal(err)
			}
			oneMB = append(oneMB, v)
		}
		k := echoTrips / runsRounds
		for _, r := range streams {
			if err := r.echoes(0, k); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		for i := range k {
			d, err := tb.roundTrip(i)
			if err != nil {
				t.Fatal(err)
			}
			tlsTrips = append(tlsTrips, d)
			if sb != nil {
				if d, err = sb.roundTrip(i); err != nil {
					t.Fatal(err)
				}
				sshTrips = append(sshTrips, d)
			}
		}
	}

	fsyncs, err := fsyncLatency(dir, echoTrips)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	runsHeader(&b, "runs: child stdout -> agent -> tunnel -> coordinator -> SSE client, vs raw TLS 1.3 and ssh on 127.0.0.1")
	fmt.Fprintf(&b, "flood: %d MiB asked of the codex peer (%d KiB deltas, one JSON line each), %d rounds, links interleaved, median of per-round ratios;\n",
		floodBytes>>20, floodPiece>>10, runsRounds)
	fmt.Fprintf(&b, "  product MB/s = decoded data bytes of SSE output events (%d bytes per flood with the JSON-RPC framing) / time from POST input to turn/completed;\n", streams[0].got)
	fmt.Fprintf(&b, "  raw TLS: in-process Go server writes %d MiB in %d KiB writes to a Go TLS client; ssh session: `while read n; do head -c $n /dev/zero; done` on one open session;\n", floodBytes>>20, floodPiece>>10)
	fmt.Fprintf(&b, "  ssh one-shot: `ssh 127.0.0.1 'head -c %d /dev/zero'`, connection set-up included.\n\n", floodBytes)
	fmt.Fprintf(&b, "%-20s %9s %8s %10s %8s %6s %12s\n", "link", "MB/s", "×TLS", "×ssh sess", "×ssh 1x", "lag", "slow_viewer")
	for _, r := range streams {
		sshR, oneR := "-", "-"
		if sb != nil {
			sshR, oneR = fmt.Sprintf("%.2f×", perRound(r.mbps, sshMB)), fmt.Sprintf("%.2f×", perRound(r.mbps, oneMB))
		}
		fmt.Fprintf(&b, "%-20s %9.1f %7.2f× %10s %8s %6d %12d\n", r.name, median(r.mbps), perRound(r.mbps, tlsMB), sshR, oneR, r.lags, r.dropped)
	}
	fmt.Fprintf(&b, "%-20s %9.1f\n", "raw TLS", median(tlsMB))
	fmt.Fprintf(&b, "%-20s %9.1f   (the same bytes in %d KiB writes to a file, fdatasync per %d KiB)\n", "durable append", median(appendMB), floodPiece>>10, durableBatch>>10)
	fmt.Fprintf(&b, "%-20s %9.1f   (Go: read a pipe -> append + fdatasync per %d KiB -> write a TLS socket; CPU %.2fs per flood, reader included)\n", "minimal pipeline", median(pipeMB), durableBatch>>10, median(pipeCPU))
	fmt.Fprintf(&b, "%-20s %9s   (io.Copy between two TLS sockets, writer and reader in process: CPU %.2fs per flood)\n", "TLS relay", "-", median(relayCPU))
	fmt.Fprintf(&b, "4 KiB append + fdatasync: p50 %s p99 %s\n", ms(percentile(fsyncs, 50)), ms(percentile(fsyncs, 99)))
	for _, r := range streams {
		fmt.Fprintf(&b, "%s CPU per flood (medians, 2 cores = 2 s per s): wall %.2fs, agent %.2fs, holder %.2fs, peer %.2fs, coordinator+SSE client %.2fs\n",
			r.name, median(r.wall), median(r.cpuAgent), median(r.cpuHolder), median(r.cpuPeer), median(r.cpuSelf))
	}
	if sb != nil {
		fmt.Fprintf(&b, "%-20s %9.1f\n", "ssh session", median(sshMB))
		fmt.Fprintf(&b, "%-20s %9.1f   (ssh true: %s)\n", "ssh one-shot", median(oneMB), ms(sb.handsh))
	} else {
		fmt.Fprintf(&b, "ssh baseline skipped: %s\n", sshSkip)
	}

	fmt.Fprintf(&b, "\necho: POST /runs/{ref}/input {text:\"ping N\"} -> the SSE output event carrying \"pong: ping N\" on an open attach, %d trips per link after %d warm-up;\n", echoTrips, echoWarmup)
	fmt.Fprintf(&b, "  raw TLS and ssh: write \"ping N\\n\" and read it back (in-process TLS echo server; one ssh session running cat);\n")
	fmt.Fprintf(&b, "  POST: the input call's own answer (202); first out: POST -> the turn's first output event (the peer's turn/start answer); same trips.\n\n")
	fmt.Fprintf(&b, "%-20s %10s %10s %10s %10s %10s %14s\n", "link", "p50", "p99", "mean", "p50 ×TLS", "POST p50", "first out p50")
	tls50 := percentile(tlsTrips, 50)
	for _, r := range streams {
		fmt.Fprintf(&b, "%-20s %10s %10s %10s %9.1f× %10s %14s\n", r.name, ms(percentile(r.trips, 50)), ms(percentile(r.trips, 99)), ms(mean(r.trips)),
			float64(percentile(r.trips, 50))/float64(tls50), ms(percentile(r.posts, 50)), ms(percentile(r.first, 50)))
	}
	fmt.Fprintf(&b, "%-20s %10s %10s %10s\n", "raw TLS", ms(tls50), ms(percentile(tlsTrips, 99)), ms(mean(tlsTrips)))
	if sb != nil {
		fmt.Fprintf(&b, "%-20s %10s %10s %10s\n", "ssh session", ms(percentile(sshTrips, 50)), ms(percentile(sshTrips, 99)), ms(mean(sshTrips)))
	}
	b.WriteString("\n")
	for _, r := range streams {
		tlsR := perRound(r.mbps, tlsMB)
		fmt.Fprintf(&b, "%s throughput = %.2f× raw TLS (target ≥ %.2f): %s\n", r.name, tlsR, floodVsTLSTarget, verdict(tlsR >= floodVsTLSTarget))
		if sb != nil {
			sshR, oneR := perRound(r.mbps, sshMB), perRound(r.mbps, oneMB)
			fmt.Fprintf(&b, "%s throughput = %.2f× ssh session (target ≥ %.2f): %s; %.2f× ssh one-shot: %s\n", r.name, sshR, floodVsSSHTarget,
				verdict(sshR >= floodVsSSHTarget), oneR, verdict(oneR >= floodVsSSHTarget))
		} else {
			fmt.Fprintf(&b, "%s throughput vs ssh: not measured (%s)\n", r.name, sshSkip)
		}
		if r.lags > 0 || r.dropped > 0 {
			fmt.Fprintf(&b, "%s: %d lag events and %d slow_viewer drops during the floods\n", r.name, r.lags, r.dropped)
		}
		appR := perRound(r.mbps, appendMB[len(appendMB)-len(r.mbps):])
		fmt.Fprintf(&b, "%s throughput = %.2f× durable append (target ≥ %.2f): %s\n", r.name, appR, floodVsAppendTarget, verdict(appR >= floodVsAppendTarget))
		agent, coord, floor := median(sum(r.cpuAgent, r.cpuHolder)), median(r.cpuSelf), median(pipeCPU)+median(relayCPU)
		perMiB := func(s float64) float64 { return s / float64(floodBytes>>20) * 1000 }
		cpuR := (agent + coord) / floor
		fmt.Fprintf(&b, "%s CPU per MiB = %.2f× the floor (agent+holder %.1f ms + coordinator+SSE client %.1f ms, against the minimal pipeline %.1f ms + TLS relay %.1f ms; parts %.2f× and %.2f×) (target ≤ %.1f×): %s\n",
			r.name, cpuR, perMiB(agent), perMiB(coord), perMiB(median(pipeCPU)), perMiB(median(relayCPU)), agent/median(pipeCPU), coord/median(relayCPU),
			cpuPerByteTarget, verdict(cpuR <= cpuPerByteTarget))
		p50, p99, f50 := percentile(r.trips, 50), percentile(r.trips, 99), percentile(fsyncs, 50)
		fmt.Fprintf(&b, "%s echo p50 = %s (target ≤ %s and ≤ fsync p50 + 1 ms = %s): %s; p99 %s (target ≤ %s): %s\n", r.name, ms(p50), ms(echoP50Target),
			ms(f50+time.Millisecond), verdict(p50 <= echoP50Target && p50 <= f50+time.Millisecond), ms(p99), ms(echoP99Target), verdict(p99 <= echoP99Target))
	}
	if h, u := streamNamed(streams, tunnel.TransportYamux), streamNamed(streams, unheld); h != nil && u != nil {
		e50 := float64(percentile(h.trips, 50)) / float64(percentile(u.trips, 50))
		e99 := float64(percentile(h.trips, 99)) / float64(percentile(u.trips, 99))
		thr := perRound(h.mbps, u.mbps)
		fmt.Fprintf(&b, "holder (issue 30), end to end, yamux held vs %s: echo p50 %.2f× p99 %.2f× (target ≤ 1.15×): %s; throughput %.2f× (target ≥ 0.9×): %s\n",
			unheld, e50, e99, verdict(e50 <= 1.15 && e99 <= 1.15), thr, verdict(thr >= 0.9))
	}
	b.WriteString("\nCPU profiles of the first flood round, top five by self time (the agent's by perf; the coordinator's by Go's profiler: flat, flat%, sum%, cum, cum%):\n")
	for _, r := range streams {
		for _, who := range []string{r.name + " agent", r.name + " coordinator+SSE client"} {
			top := profiles[who]
			if top == "" {
				top = "    (no perf on this machine)"
			}
			fmt.Fprintf(&b, "  %s:\n%s\n", who, top)
		}
	}
	t.Log(b.String())
}

// cpuSeconds returns the user+system CPU seconds of each pid so far (0
// for one that is gone), from /proc/<pid>/stat.
func cpuSeconds(pids []int) []float64 {
	out := make([]float64, len(pids))
	for i, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The fields after the command name's closing parenthesis: utime
		// and stime are the 12th and 13th, in USER_HZ (100 on Linux).
		_, rest, _ := bytes.Cut(b, []byte(") "))
		f := strings.Fields(string(rest))
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		out[i] = (ut + st) / 100
	}
	return out
}

// procStatus reads fields of /proc/<pid>/status in bytes (kB fields) or
// as counts.
func procStatus(pid int, fields ...string) (map[string]int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		for _, want := range fields {
			if k != want {
				continue
			}
			parts := strings.Fields(v)
			if len(parts) == 0 {
				continue
			}
			n, err := strconv.ParseInt(parts[0], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", k, err)
			}
			if len(parts) > 1 && parts[1] == "kB" {
				n <<= 10
			}
			out[k] = n
		}
	}
	return out, sc.Err()
}

var memFields = []string{"VmRSS", "RssAnon", "RssFile", "VmHWM", "Threads"}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// attachLatency samples the time from GET attach?from=1 on a run picked
// from refs to its first replayed output event.
func attachLatency(n *runNode, refs []string, k int) ([]time.Duration, error) {
	var out []time.Duration
	for range k {
		ref := refs[rand.IntN(len(refs))]
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		start := time.Now()
		s, err := n.api.Attach(ctx, ref, apiclient.AttachOptions{From: 1, HaveFrom: true})
		if err != nil {
			cancel()
			return nil, err
		}
		ev, err := s.Next()
		d := time.Since(start)
		s.Close()
		cancel()
		if err != nil {
			return nil, err
		}
		if ev.Type != apitypes.SSEOutput || ev.ID != "1" {
			return nil, fmt.Errorf("attach %s from=1: first event %s id %s: %.200s", ref, ev.Type, ev.ID, ev.Data)
		}
		out = append(out, d)
	}
	return out, nil
}

// awaitIdleCount pages through the run index until want runs are idle.
func (n *runNode) awaitIdleCount(want int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		idle, failed := 0, 0
		cursor := ""
		for {
			page, err := n.api.Runs(context.Background(), apiclient.RunQuery{Limit: 200, CursorPages: true, Cursor: cursor})
			if err != nil {
				return err
			}
			for _, r := range page.Items {
				switch {
				case r.State == apitypes.StateIdle:
					idle++
				case !apitypes.Live(r.State):
					failed++
				}
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		switch {
		case failed > 0:
			return fmt.Errorf("%d runs ended while launching", failed)
		case idle >= want:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("%d of %d runs idle after %v", idle, want, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runsScaleReport: N live runs on one agent (default 500): the agent's
// memory per run and attach latency against one run, same agent, same run.
func runsScaleReport(t *testing.T) {
	count := scaleRuns
	if v := os.Getenv("OLIVARES_BENCH_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			t.Fatalf("OLIVARES_BENCH_RUNS=%q: want a count of at least 2", v)
		}
		count = n
	}
	env := integration.NewEnv(t, integration.Options{Unchecked: true}) // the contract check would be timed too
	n := newRunNode(t, env, integration.ProcOptions{Transport: tunnel.TransportQUIC})
	pid := n.agent.Pid()
	before, err := procStatus(pid, memFields...)
	if err != nil {
		t.Fatal(err)
	}

	first, err := n.launch()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.awaitIdle(first, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := attachLatency(n, []string{first}, 30); err != nil { // warm-up
		t.Fatal(err)
	}
	single, err := attachLatency(n, []string{first}, attachTries)
	if err != nil {
		t.Fatal(err)
	}

	refs := []string{first}
	var mu sync.Mutex
	var next atomic.Int64
	next.Store(1)
	errs := make(chan error, launchConc)
	start := time.Now()
	for range launchConc {
		go func() {
			for next.Add(1) <= int64(count) {
				ref, err := n.launch()
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				refs = append(refs, ref)
				mu.Unlock()
			}
			errs <- nil
		}()
	}
	for range launchConc {
		if err := <-errs; err != nil {
			t.Fatalf("launch %d runs: %v", count, err)
		}
	}
	launched := time.Since(start)
	if err := n.awaitIdleCount(count, phaseBudget); err != nil {
		t.Fatal(err)
	}
	allIdle := time.Since(start)
	idle, err := procStatus(pid, memFields...)
	if err != nil {
		t.Fatal(err)
	}
	many, err := attachLatency(n, refs, attachTries)
	if err != nil {
		t.Fatal(err)
	}
	after, err := procStatus(pid, memFields...)
	if err != nil {
		t.Fatal(err)
	}

	var b strings.Builder
	runsHeader(&b, fmt.Sprintf("runs: %d live idle codex-peer runs on one agent (QUIC)", count))
	fmt.Fprintf(&b, "launch: %d runs, %d in flight, all POSTs answered in %v, all idle after %v (%.0f runs/s)\n",
		count, launchConc, launched.Round(time.Millisecond), allIdle.Round(time.Millisecond), float64(count)/allIdle.Seconds())
	fmt.Fprintf(&b, "agent pid %d /proc status (children are other processes): %-8s %10s %10s %10s %10s %8s\n", pid, "", "VmRSS", "RssAnon", "RssFile", "VmHWM", "Threads")
	for _, row := range []struct {
		name string
		m    map[string]int64
	}{{"before", before}, {"all idle", idle}, {"after attaches", after}} {
		fmt.Fprintf(&b, "  %-16s %10s %10s %10s %10s %8d\n", row.name, mib(row.m["VmRSS"]), mib(row.m["RssAnon"]), mib(row.m["RssFile"]), mib(row.m["VmHWM"]), row.m["Threads"])
	}
	grow := max(idle["VmRSS"], after["VmRSS"]) - before["VmRSS"]
	per := grow / int64(count)
	fmt.Fprintf(&b, "\nattach: GET attach?from=1 -> first replayed output event (new HTTP connection, tunnel stream, ring read), %d samples each\n", attachTries)
	fmt.Fprintf(&b, "  %-16s p50 %s p99 %s mean %s\n", "1 live run", ms(percentile(single, 50)), ms(percentile(single, 99)), ms(mean(single)))
	fmt.Fprintf(&b, "  %-16s p50 %s p99 %s mean %s (random run of %d)\n", fmt.Sprintf("%d live runs", count), ms(percentile(many, 50)), ms(percentile(many, 99)), ms(mean(many)), count)
	ratio := float64(percentile(many, 99)) / float64(percentile(single, 99))
	b.WriteString("\n")
	if count < scaleRuns {
		fmt.Fprintf(&b, "run count %d is below the %d of the target (OLIVARES_BENCH_RUNS)\n", count, scaleRuns)
	}
	fmt.Fprintf(&b, "agent memory per run = %s (VmRSS %s -> %s over %d runs, the larger of the two readings) (target ≤ %s): %s\n",
		fmt.Sprintf("%.2f MiB", float64(per)/(1<<20)), mib(before["VmRSS"]), mib(before["VmRSS"]+grow), count, mib(memPerRunTarget), verdict(per <= memPerRunTarget))
	fmt.Fprintf(&b, "attach p99 with %d runs = %.2f× one run (%s vs %s) (target ≤ %.1f×): %s\n",
		count, ratio, ms(percentile(many, 99)), ms(percentile(single, 99)), attachP99Target, verdict(ratio <= attachP99Target))
	t.Log(b.String())
}
