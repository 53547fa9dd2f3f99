package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/enroll"
	agentlink "github.com/olivares-dev/olivares/agent/link"
	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/tunnel"
	"github.com/olivares-dev/olivares/shared/wire"
)

// The simulated fleet (issue 34): N agents, each with its own enrolled
// certificate and the real tunnel protocol (agent/link, the agent's own
// client), run in a second process so that the coordinator's process (this
// one) is measured alone.
const (
	fleetRunsPerNode = 10
	// fleetHeartbeat is the production default (coordd.DefaultConfig).
	fleetHeartbeat = 5 * time.Second
	// fleetTrickle is how often each node changes one of its runs while
	// the change stream and GET /runs are measured: 1,000 nodes make 200
	// index pushes a second.
	fleetTrickle = 5 * time.Second
	fleetRest    = 15 * time.Second
	fleetWindow  = 15 * time.Second
	fleetGets    = 300

	// Targets (issue 34).
	fleetMemTarget  = 64 << 10 // bytes of coordinator memory per idle node
	fleetCPUTarget  = 0.5      // % of one core per 1,000 idle nodes
	fleetLagTarget  = 250 * time.Millisecond
	fleetListTarget = 50 * time.Millisecond
)

// fleetSimEnv names the simulated fleet's config file: set, the test binary
// is the fleet (TestFleetSim), not the coordinator.
const fleetSimEnv = "OLIVARES_FLEETSIM"

type fleetSimConfig struct {
	// Watch, when set, makes the process the change stream's subscribers
	// instead: one stream per token on API.
	Watch []string `json:"watch,omitempty"`
	API   string   `json:"api,omitempty"`

	Addr      string   `json:"addr"`
	Transport string   `json:"transport"`
	Dir       string   `json:"dir"`
	Tokens    []string `json:"tokens"`
	Pin       string   `json:"pin"`
	Runs      int      `json:"runs"`
	// First is the index of the first node (its runs' refs): a second
	// fleet process, on another replica, numbers its nodes after the
	// first's.
	First int `json:"first,omitempty"`
	// Remote, for subscribers: runs of nodes numbered from it are on
	// another replica, and their lag is counted apart (0: none).
	Remote int `json:"remote,omitempty"`
}

// TestFleetReport connects 100 and then 1,000 simulated nodes (2,000 with
// OLIVARES_FLEET_MAX=2000) to one coordinator, over QUIC and yamux, and
// prints per size: the enrollment time, coordinator memory per connected
// node, coordinator CPU per 1,000 idle nodes (heartbeats only), index pushes
// absorbed per second, change-stream lag p50/p99 to K subscribers while
// every node changes a run every 5 s, and GET /runs p99 with N×10 live
// rows under that churn, each against its target. It runs only with
// OLIVARES_BENCH=1 and never fails on a figure.
func TestFleetReport(t *testing.T) {
	if os.Getenv("OLIVARES_BENCH") != "1" {
		t.Skip("set OLIVARES_BENCH=1 (or run scripts/bench) to simulate a fleet")
	}
	sizes := []int{100, 1000}
	if m, _ := strconv.Atoi(os.Getenv("OLIVARES_FLEET_MAX")); m > 1000 {
		sizes = append(sizes, m)
	}
	for _, transport := range []string{tunnel.TransportQUIC, tunnel.TransportYamux} {
		for _, n := range sizes {
			t.Run(fmt.Sprintf("%s-%d", transport, n), func(t *testing.T) { fleetReport(t, transport, n) })
		}
	}
}

func fleetReport(t *testing.T, transport string, n int) {
	k := min(200, n/5)
	env := integration.NewEnv(t, integration.Options{Heartbeat: fleetHeartbeat, Unchecked: true, Configure: func(c *coordd.Config) {
		c.API.MaxChangeStreams = 10 * k
	}})
	ctx := context.Background()
	cfg := fleetSimConfig{Addr: env.TunnelAddr(), Transport: transport, Dir: t.TempDir(), Runs: fleetRunsPerNode}
	for range n {
		iss, err := env.Coord.Enroll.CreateToken(ctx, integration.Tenant, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Tokens, cfg.Pin = append(cfg.Tokens, iss.Token), iss.CAPin
	}
	// The coordinator's own idle cost, before any node: subtracted below.
	base0 := cpuTime()
	time.Sleep(fleetRest) // the window the idle CPU is measured over
	baseCPU := cpuTime() - base0
	runtime.GC()
	rss0, heap0, g0 := rss(), heapInuse(), runtime.NumGoroutine()

	sim := startFleetSim(t, cfg)
	enrolled := sim.await("enrolled")
	start := time.Now()
	integration.Await(t, 5*time.Minute, fmt.Sprintf("%d nodes to connect", n), func() bool {
		return len(env.Fleet().Connected()) == n
	})
	connected := time.Since(start)
	rows := 0
	integration.Await(t, 2*time.Minute, "every node's runs indexed", func() bool {
		rows = fleetIndexed(t, env)
		return rows >= n*fleetRunsPerNode
	})

	// At rest: heartbeats only.
	time.Sleep(fleetHeartbeat) // a measurement window, not a wait for a condition
	runtime.GC()
	rss1, heap1, g1 := rss(), heapInuse(), runtime.NumGoroutine()
	fleetHeapProfile(t, fmt.Sprintf("heap-%s-%d", transport, n))
	stopProfile := fleetProfile(t, fmt.Sprintf("rest-%s-%d", transport, n))
	cpu0 := cpuTime()
	time.Sleep(fleetRest) // the window the idle CPU is measured over
	idle := cpuTime() - cpu0
	stopProfile()
	cpuPer1k := 100 * (idle - baseCPU).Seconds() / fleetRest.Seconds() * 1000 / float64(n)
	memPerNode := (int64(rss1) - int64(rss0)) / int64(n)
	heapPerNode := (int64(heap1) - int64(heap0)) / int64(n)

	// Index pushes absorbed: every node pushes back to back.
	sim.send(fmt.Sprintf("flood %d", fleetWindow.Milliseconds()))
	flood := sim.await("flooded")

	lag, gets := fleetChurn(t, env, k, 0, sim)
	if lag.Events == 0 {
		t.Fatalf("no change reached a subscriber (flood %d pushes)", flood.Pushes)
	}
	p := func(d []time.Duration, q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	lagP50, lagP99 := time.Duration(lag.P50), time.Duration(lag.P99)

	t.Logf("fleet %s N=%d: enrollment of %d nodes %.1fs (%.1f ms each, 16 at a time); all connected %.1fs after",
		transport, n, n, enrolled.Seconds, 1000*enrolled.Seconds/float64(n), connected.Seconds())
	t.Logf("fleet %s N=%d: coordinator memory per connected node: RSS %.1f KiB, Go heap in use %.1f KiB, %.1f goroutines (target <= %d KiB): %s",
		transport, n, float64(memPerNode)/1024, float64(heapPerNode)/1024, float64(g1-g0)/float64(n), fleetMemTarget>>10, verdict(memPerNode <= fleetMemTarget))
	t.Logf("fleet %s N=%d: coordinator CPU at rest (heartbeats every %v), beyond its own idle %.3f%%: %.3f%% of one core per 1,000 nodes (target <= %.1f%%): %s",
		transport, n, fleetHeartbeat, 100*baseCPU.Seconds()/fleetRest.Seconds(), cpuPer1k, fleetCPUTarget, verdict(cpuPer1k <= fleetCPUTarget))
	t.Logf("fleet %s N=%d: index pushes absorbed: %.0f/s (%d in %v, one changed row each)",
		transport, n, float64(flood.Pushes)/fleetWindow.Seconds(), flood.Pushes, fleetWindow)
	t.Logf("fleet %s N=%d: change-stream lag to %d subscribers at %.0f changes/s: p50 %v p99 %v (%d events; target p99 <= %v): %s",
		transport, n, k, float64(n)/fleetTrickle.Seconds(), lagP50.Round(time.Microsecond), lagP99.Round(time.Microsecond), lag.Events, fleetLagTarget, verdict(lagP99 <= fleetLagTarget))
	t.Logf("fleet %s N=%d: GET /runs?limit=50 with %d live rows under that churn: p50 %v p99 %v (target p99 <= %v): %s",
		transport, n, rows, p(gets, 0.5).Round(time.Microsecond), p(gets, 0.99).Round(time.Microsecond), fleetListTarget, verdict(p(gets, 0.99) <= fleetListTarget))
}

// TestFleetReplicasReport is the simulated fleet on two coordinator
// replicas over one PostgreSQL database, the nodes split between them
// (issue 34): replica a in this process, b a process of the coordinator
// binary, each fleet half a process of its own. It prints the enrollment
// of N nodes, a's memory per node it holds, the index pushes both absorb
// (PostgreSQL's commits), the change-stream lag on a for rows of its own
// nodes and of b's (those reach a's subscribers through PostgreSQL: the
// forwarding share), and GET /runs p99 on a with N×10 live rows under
// that churn. N is 1,000 (OLIVARES_FLEET_REPLICAS_N). It runs only with
// OLIVARES_BENCH=1 and never fails on a figure.
func TestFleetReplicasReport(t *testing.T) {
	if os.Getenv("OLIVARES_BENCH") != "1" {
		t.Skip("set OLIVARES_BENCH=1 (or run scripts/bench) to simulate a fleet on replicas")
	}
	n := 1000
	if m, _ := strconv.Atoi(os.Getenv("OLIVARES_FLEET_REPLICAS_N")); m > 0 {
		n = m
	}
	transport := tunnel.TransportYamux
	k := min(200, n/5)
	env := integration.NewEnv(t, integration.Options{Postgres: pgtest.NewDatabase(t), Heartbeat: fleetHeartbeat, Unchecked: true,
		Configure: func(c *coordd.Config) { c.API.MaxChangeStreams = 10 * k }})
	b := env.StartReplicaProcess()
	ctx := context.Background()
	half := n / 2
	onA := fleetSimConfig{Addr: env.TunnelAddr(), Transport: transport, Dir: t.TempDir(), Runs: fleetRunsPerNode}
	onB := fleetSimConfig{Addr: b.TunnelAddr(), Transport: transport, Dir: t.TempDir(), Runs: fleetRunsPerNode, First: half}
	for i := range n {
		iss, err := env.Coord.Enroll.CreateToken(ctx, integration.Tenant, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		c := &onA
		if i >= half {
			c = &onB
		}
		c.Tokens, c.Pin = append(c.Tokens, iss.Token), iss.CAPin
	}
	runtime.GC()
	rss0 := rss()
	start := time.Now()
	simA, simB := startFleetSim(t, onA), startFleetSim(t, onB)
	simA.await("enrolled")
	simB.await("enrolled")
	enrolled := time.Since(start)
	integration.Await(t, 5*time.Minute, fmt.Sprintf("%d nodes to connect to replica a", half), func() bool {
		return len(env.Fleet().Connected()) == half
	})
	rows := 0
	integration.Await(t, 5*time.Minute, "every node's runs indexed", func() bool {
		rows = fleetIndexed(t, env)
		return rows >= n*fleetRunsPerNode
	})
	runtime.GC()
	memPerNode := (int64(rss()) - int64(rss0)) / int64(half)

	// Index pushes absorbed: every node of both halves pushes back to back.
	simA.send(fmt.Sprintf("flood %d", fleetWindow.Milliseconds()))
	simB.send(fmt.Sprintf("flood %d", fleetWindow.Milliseconds()))
	pushes := simA.await("flooded").Pushes + simB.await("flooded").Pushes

	lag, gets := fleetChurn(t, env, k, half, simA, simB)
	if lag.Events == 0 || lag.RemoteEvents == 0 {
		t.Fatalf("changes reached a's subscribers: %d of a's nodes, %d of b's", lag.Events, lag.RemoteEvents)
	}
	get99 := gets[min(len(gets)-1, len(gets)*99/100)]
	d := func(ns int64) time.Duration { return time.Duration(ns).Round(time.Microsecond) }

	t.Logf("fleet on replicas (PostgreSQL, %s) N=%d split %d/%d: enrollment of %d nodes %.1fs (%.1f ms each, 16 at a time per half, both halves at once)",
		transport, n, half, n-half, n, enrolled.Seconds(), 1000*enrolled.Seconds()/float64(n))
	t.Logf("fleet on replicas N=%d: replica a's memory per node it holds: RSS %.1f KiB (target <= %d KiB): %s",
		n, float64(memPerNode)/1024, fleetMemTarget>>10, verdict(memPerNode <= fleetMemTarget))
	t.Logf("fleet on replicas N=%d: index pushes absorbed by both: %.0f/s (%d in %v, one changed row each)",
		n, float64(pushes)/fleetWindow.Seconds(), pushes, fleetWindow)
	t.Logf("fleet on replicas N=%d: change-stream lag on a to %d subscribers at %.0f changes/s: rows of a's nodes p50 %v p99 %v (%d events), of b's (through PostgreSQL) p50 %v p99 %v (%d events, %.0f%% of all); target p99 <= %v: %s",
		n, k, float64(n)/fleetTrickle.Seconds(), d(lag.P50), d(lag.P99), lag.Events, d(lag.RemoteP50), d(lag.RemoteP99), lag.RemoteEvents,
		100*float64(lag.RemoteEvents)/float64(lag.Events+lag.RemoteEvents), fleetLagTarget, verdict(max(lag.P99, lag.RemoteP99) <= int64(fleetLagTarget)))
	t.Logf("fleet on replicas N=%d: GET /runs?limit=50 on a with %d live rows under that churn: p50 %v p99 %v (target p99 <= %v): %s",
		n, rows, gets[len(gets)/2].Round(time.Microsecond), get99.Round(time.Microsecond), fleetListTarget, verdict(get99 <= fleetListTarget))
}

// fleetChurn measures the change-stream fan-out and GET /runs under churn,
// then ends the fleet processes: k subscribers on env's coordinator follow
// the stream while every node of sims changes a run every fleetTrickle,
// and GET /runs is timed meanwhile (sorted). The subscribers are a process
// of their own, so that reading 200 streams does not take the
// coordinator's CPU. Runs of nodes numbered from remote count apart
// (0: none do).
func fleetChurn(t *testing.T, env *integration.Env, k, remote int, sims ...*fleetSimProc) (fleetSimReply, []time.Duration) {
	watch := fleetSimConfig{API: env.Coord.APIURL(), Remote: remote}
	for i := range k {
		_, tok := env.PrincipalNamed(integration.Tenant, fmt.Sprintf("watch%d", i), store.RoleViewer, store.KindHuman)
		watch.Watch = append(watch.Watch, tok)
	}
	watchers := startFleetSim(t, watch)
	watchers.await("watching")
	for _, sim := range sims {
		sim.send(fmt.Sprintf("trickle %d", fleetTrickle.Milliseconds()))
	}
	time.Sleep(fleetTrickle) // every node has changed a run once: the churn is steady
	list := env.Client(env.AdminToken)
	var gets []time.Duration
	for range fleetGets {
		t0 := time.Now()
		list.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs?limit=50", nil, nil)
		gets = append(gets, time.Since(t0))
	}
	time.Sleep(fleetWindow) // the window the lag is sampled over
	for _, sim := range sims {
		sim.send("rest")
	}
	watchers.send("stop")
	lag := watchers.await("lags")
	for _, sim := range sims {
		sim.quit()
	}
	watchers.quit()
	slices.Sort(gets)
	return lag, gets
}

// fleetIndexed counts the run rows of the index.
func fleetIndexed(t *testing.T, env *integration.Env) int {
	n := 0
	next := ""
	c := env.Client(env.AdminToken)
	for {
		var page apitypes.RunList
		c.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs?pagination=cursor&limit=200"+next, nil, &page)
		n += len(page.Items)
		if page.Next == "" || len(page.Items) == 0 {
			return n
		}
		next = "&cursor=" + url.QueryEscape(page.Next)
	}
}

// fleetProfile writes a CPU profile of this process (the coordinator) to
// $OLIVARES_FLEET_PROFILE/NAME.pprof until the returned func is called,
// when that variable names a directory.
func fleetProfile(t *testing.T, name string) func() {
	dir := os.Getenv("OLIVARES_FLEET_PROFILE")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// fleetHeapProfile writes this process's heap profile next to the CPU
// profiles (OLIVARES_FLEET_PROFILE).
func fleetHeapProfile(t *testing.T, name string) {
	dir := os.Getenv("OLIVARES_FLEET_PROFILE")
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pprof.Lookup("heap").WriteTo(f, 0)
}

func rss() uint64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func heapInuse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fleetSub follows the change stream and records, for each run event, how
// long after the node stamped the row (its name) it arrived.
type fleetSub struct {
	resp *http.Response
	done chan fleetLags
}

// fleetLags are a subscriber's lags: of runs of nodes on its own replica,
// and on another (remote).
type fleetLags struct{ local, remote []time.Duration }

// follow counts a run of node remote or later as remote (0: none is).
func follow(t *testing.T, base, token string, remote int) *fleetSub {
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/m/sessions/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Olivares-Tenant", integration.Tenant)
	resp, err := fleetHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("change stream: %d %s", resp.StatusCode, b)
	}
	s := &fleetSub{resp: resp, done: make(chan fleetLags, 1)}
	go func() {
		var lags fleetLags
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if !strings.HasPrefix(string(line), "data: ") {
				continue
			}
			now := time.Now()
			var r struct {
				RunRef    string     `json:"run_ref"`
				StartedAt *time.Time `json:"started_at"`
			}
			if json.Unmarshal(line[6:], &r) != nil || r.StartedAt == nil {
				continue
			}
			// run_NNNNNNNNKKKKKKKK: the node's index, then the run's (simNode.row).
			if node, err := strconv.ParseUint(strings.TrimPrefix(r.RunRef, "run_")[:8], 16, 32); err == nil && remote > 0 && int(node) >= remote {
				lags.remote = append(lags.remote, now.Sub(*r.StartedAt))
			} else {
				lags.local = append(lags.local, now.Sub(*r.StartedAt))
			}
		}
		s.done <- lags
	}()
	return s
}

func (s *fleetSub) stop() fleetLags {
	s.resp.Body.Close()
	return <-s.done
}

var fleetHTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 0}}

// fleetSimProc is the simulated fleet's process.
type fleetSimProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan fleetSimReply
}

type fleetSimReply struct {
	What    string  `json:"what"`
	Seconds float64 `json:"seconds,omitempty"`
	Pushes  int     `json:"pushes,omitempty"`
	// The subscribers' lag, in nanoseconds, over Events run events; of
	// nodes on another replica apart (fleetSimConfig.Remote).
	P50          int64  `json:"p50,omitempty"`
	P99          int64  `json:"p99,omitempty"`
	Events       int    `json:"events,omitempty"`
	RemoteP50    int64  `json:"remote_p50,omitempty"`
	RemoteP99    int64  `json:"remote_p99,omitempty"`
	RemoteEvents int    `json:"remote_events,omitempty"`
	Error        string `json:"error,omitempty"`
}

func startFleetSim(t *testing.T, cfg fleetSimConfig) *fleetSimProc {
	path := filepath.Join(t.TempDir(), "fleet.json")
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFleetSim$", "-test.timeout=0")
	cmd.Env = append(os.Environ(), fleetSimEnv+"="+path)
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &fleetSimProc{t: t, cmd: cmd, in: in, lines: make(chan fleetSimReply, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var r fleetSimReply
			if json.Unmarshal(sc.Bytes(), &r) == nil && r.What != "" {
				p.lines <- r
			}
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // the fleet process this test started
		cmd.Wait()
	})
	return p
}

func (p *fleetSimProc) send(cmd string) { fmt.Fprintln(p.in, cmd) }

func (p *fleetSimProc) await(what string) fleetSimReply {
	p.t.Helper()
	timeout := time.After(10 * time.Minute)
	for {
		select {
		case r, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("the fleet process ended before %q", what)
			}
			if r.Error != "" {
				p.t.Fatalf("fleet: %s", r.Error)
			}
			if r.What == what {
				return r
			}
		case <-timeout:
			p.t.Fatalf("the fleet process did not say %q in 10 minutes", what)
		}
	}
}

func (p *fleetSimProc) quit() {
	p.in.Close()
	p.cmd.Wait()
}

// TestFleetSim is the simulated fleet when TestFleetReport starts this
// binary with OLIVARES_FLEETSIM; otherwise it skips.
func TestFleetSim(t *testing.T) {
	path := os.Getenv(fleetSimEnv)
	if path == "" {
		t.Skip("the simulated fleet of TestFleetReport (run by it)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg fleetSimConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	out := json.NewEncoder(os.Stdout)
	say := func(r fleetSimReply) { out.Encode(r) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if len(cfg.Watch) > 0 {
		fleetWatch(t, cfg, say)
		return
	}

	nodes := make([]*simNode, len(cfg.Tokens))
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	var failed atomic.Value
	for i, tok := range cfg.Tokens {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			id, err := enroll.Enroll(ctx, enroll.Options{Coordinator: cfg.Addr, Token: tok, CAPin: cfg.Pin, StateDir: filepath.Join(cfg.Dir, strconv.Itoa(i))})
			if err != nil {
				failed.Store(err.Error())
				return
			}
			nodes[i] = &simNode{i: cfg.First + i, runs: cfg.Runs}
			nodes[i].link = agentlink.New(agentlink.Options{Identity: id, Addr: cfg.Addr, Transport: cfg.Transport,
				Hello: func(context.Context) proto.Hello {
					return proto.Hello{Hostname: fmt.Sprintf("sim-%d", cfg.First+i), AgentVersion: "sim", Capabilities: proto.Capabilities{CLIs: []proto.CLI{}}}
				},
				OnSession: nodes[i].session})
		}()
	}
	wg.Wait()
	if e := failed.Load(); e != nil {
		say(fleetSimReply{What: "enrolled", Error: e.(string)})
		return
	}
	say(fleetSimReply{What: "enrolled", Seconds: time.Since(start).Seconds()})
	for _, nd := range nodes {
		go nd.link.Run(ctx)
	}

	var trickle context.CancelFunc = func() {}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		ms := 0
		if len(f) > 1 {
			ms, _ = strconv.Atoi(f[1])
		}
		switch f[0] {
		case "flood":
			var pushes atomic.Int64
			fctx, fcancel := context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
			var fw sync.WaitGroup
			for _, nd := range nodes {
				fw.Add(1)
				go func() {
					defer fw.Done()
					for fctx.Err() == nil {
						if nd.change(fctx) == nil {
							pushes.Add(1)
						}
					}
				}()
			}
			fw.Wait()
			fcancel()
			say(fleetSimReply{What: "flooded", Pushes: int(pushes.Load())})
		case "trickle":
			trickle()
			var tctx context.Context
			tctx, trickle = context.WithCancel(ctx)
			every := time.Duration(ms) * time.Millisecond
			for _, nd := range nodes {
				go func() {
					// Spread the nodes over the interval.
					select {
					case <-time.After(rand.N(every)):
					case <-tctx.Done():
						return
					}
					tick := time.NewTicker(every)
					defer tick.Stop()
					for {
						nd.change(tctx)
						select {
						case <-tick.C:
						case <-tctx.Done():
							return
						}
					}
				}()
			}
		case "rest":
			trickle()
		}
	}
	trickle()
}

// fleetWatch follows the change stream once per token until "stop", then
// says the lag's p50 and p99 over every run event.
func fleetWatch(t *testing.T, cfg fleetSimConfig, say func(fleetSimReply)) {
	subs := make([]*fleetSub, len(cfg.Watch))
	for i, tok := range cfg.Watch {
		subs[i] = follow(t, cfg.API, tok, cfg.Remote)
	}
	say(fleetSimReply{What: "watching"})
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() && sc.Text() != "stop" {
	}
	var lags fleetLags
	for _, s := range subs {
		l := s.stop()
		lags.local, lags.remote = append(lags.local, l.local...), append(lags.remote, l.remote...)
	}
	quantiles := func(d []time.Duration) (int64, int64) {
		if len(d) == 0 {
			return 0, 0
		}
		slices.Sort(d)
		return int64(d[len(d)/2]), int64(d[min(len(d)-1, len(d)*99/100)])
	}
	r := fleetSimReply{What: "lags", Events: len(lags.local), RemoteEvents: len(lags.remote)}
	r.P50, r.P99 = quantiles(lags.local)
	r.RemoteP50, r.RemoteP99 = quantiles(lags.remote)
	say(r)
	for sc.Scan() {
	}
}

// simNode is one simulated agent: its link and its runs.
type simNode struct {
	i    int
	runs int
	link *agentlink.Link

	mu   sync.Mutex
	open func(context.Context) (tunnel.Stream, error)
	rev  uint64
	next int
}

func (n *simNode) row(k int, rev uint64, sent *time.Time) apitypes.Run {
	created := time.Unix(1_796_000_000, 0).Add(time.Duration(n.i*n.runs+k) * time.Second)
	return apitypes.Run{RunRef: fmt.Sprintf("run_%08x%08x", n.i, k), State: apitypes.StateRunning, Driver: "claude",
		Generation: 1, Isolation: apitypes.IsolationNative, ProviderProfileRef: "prof_sim", CreatedAt: created,
		Rev: rev, RingFirst: 1, RingLast: rev, StartedAt: sent}
}

// session pushes every run once, as an agent does on each new session.
func (n *simNode) session(ctx context.Context, open func(context.Context) (tunnel.Stream, error)) {
	n.mu.Lock()
	n.open = open
	n.rev++
	rows := make([]apitypes.Run, n.runs)
	for k := range rows {
		rows[k] = n.row(k, n.rev, nil)
	}
	n.mu.Unlock()
	push(ctx, open, proto.RunsPush{Full: true, Runs: rows})
	<-ctx.Done()
	n.mu.Lock()
	n.open = nil
	n.mu.Unlock()
}

// change pushes one run row, newer than before, stamped with the time it
// was sent (as its started_at, a field the index takes from the agent) for
// the change stream's lag.
func (n *simNode) change(ctx context.Context) error {
	n.mu.Lock()
	open := n.open
	n.rev++
	k := n.next % n.runs
	n.next++
	now := time.Now()
	r := n.row(k, n.rev, &now)
	n.mu.Unlock()
	if open == nil {
		return fmt.Errorf("not connected")
	}
	return push(ctx, open, proto.RunsPush{Runs: []apitypes.Run{r}})
}

func push(ctx context.Context, open func(context.Context) (tunnel.Stream, error), msg proto.RunsPush) error {
	s, err := open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	s.SetDeadline(time.Now().Add(30 * time.Second))
	return wire.Call(s, wire.Header{Op: proto.OpRunsPush}, msg, nil)
}
