package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
	"github.com/olivares-dev/olivares/coordinator/vault"
	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/auditchain"
)

const replicaWait = 60 * time.Second

// auditVerifies reads the tenant's whole audit ledger through c and checks
// its chain; it returns how many entries it holds.
func auditVerifies(t *testing.T, c *Client) int {
	t.Helper()
	var v auditchain.Verifier
	for q := "limit=200"; ; {
		var l apitypes.AuditList
		c.Must(http.StatusOK, http.MethodGet, "/v1/audit?"+q, nil, &l)
		for _, e := range l.Items {
			if b := v.Add(e); b != nil {
				t.Fatalf("audit chain broken at seq %d: %s", b.Seq, b.Reason)
			}
		}
		if l.Next == "" {
			return v.Count()
		}
		q = "limit=200&cursor=" + l.Next
	}
}

// attachFrom opens an attach stream without the client's own reconnects:
// the test reconnects by hand, to see every seq the server sends.
func attachFrom(t *testing.T, c *Client, ref string, from uint64) *apiclient.Stream {
	t.Helper()
	var s *apiclient.Stream
	Await(t, replicaWait, "attach "+ref, func() bool {
		var err error
		s, err = c.API().Attach(context.Background(), ref, apiclient.AttachOptions{Query: map[string][]string{"from": {strconv.FormatUint(from, 10)}}})
		return err == nil
	})
	t.Cleanup(func() { s.Close() })
	return s
}

// nextOutput reads s until an output frame and returns it; ok is false
// when the stream ended first.
func nextOutput(t *testing.T, s *apiclient.Stream) (apitypes.Output, bool) {
	t.Helper()
	for {
		ev, err := s.Next()
		if err != nil {
			return apitypes.Output{}, false
		}
		if ev.Type == apitypes.SSEOutput {
			return SSEEvent{Name: ev.Type, ID: ev.ID, Data: ev.Data}.Output(t), true
		}
	}
}

// The replicas journey (issue 24; R-REP-1/2/3/5/6): PostgreSQL, replicas A (in this
// process) and B (a real process), one agent on each. A launch through A
// reaches the node held by B; attach through A and input through B meet;
// B killed with SIGKILL mid-stream costs the viewer a reconnect and not a
// frame; a node revoked through A is cut on B; the audit chain written by
// both verifies; a restart of both loses nothing.
func TestReplicasJourney(t *testing.T) {
	env := NewEnv(t, Options{Postgres: pgtest.NewDatabase(t), Heartbeat: time.Second})
	b := env.StartReplicaProcess()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica B output:\n%s", b.Output())
		}
	})
	onA := env.StartAgentProcess(ProcOptions{Transport: "yamux"})
	// The agent held by B knows both replicas, B first.
	onB := env.StartAgentProcess(ProcOptions{Transport: "yamux", Coordinators: []string{b.TunnelAddr(), env.TunnelAddr()}})
	onA.AwaitConnected(replicaWait)
	if l := onB.AwaitConnected(replicaWait); l.Replica != b.ID {
		t.Fatalf("node %s is held by %q as A sees it, want %s", onB.ID, l.Replica, b.ID)
	}

	admin := env.Client(env.AdminToken)
	operator := env.Client(env.Principal(Tenant, store.RoleOperator, store.KindHuman))
	// The workspace through A, the profile through B: both replicas write
	// the audit chain, and both reach the node held by B.
	var ws apitypes.Workspace
	admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/workspaces",
		apitypes.WorkspaceCreate{NodeID: onB.ID, Path: t.TempDir(), Name: "w"}, &ws)
	var prof apitypes.Profile
	admin.Via(b).Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles",
		apitypes.ProfileCreate{NodeID: onB.ID, Tool: "claude", Name: "c", Home: filepath.Join(t.TempDir(), "home")}, &prof)

	// Launch through A on the node held by B.
	var run apitypes.Run
	operator.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/runs",
		apitypes.LaunchRequest{ProviderProfileRef: prof.Ref, WorkspaceRef: ws.Ref}, &run)
	if run.NodeID != onB.ID || run.PID == 0 || run.Generation != 1 {
		t.Fatalf("launched through A: %+v", run)
	}
	if n := env.Fleet().ReplicaStats().Forwards; n == 0 {
		t.Fatal("A forwarded no call to B")
	}
	// The reply came after the row was indexed: both replicas read it.
	for _, c := range []*Client{operator, operator.Via(b)} {
		if got := c.Run(run.RunRef); got.PID != run.PID {
			t.Fatalf("GET right after the launch: pid %d, want %d", got.PID, run.PID)
		}
	}

	// R-CHG-5: a change stream on A carries what B indexes and renames.
	cctx, ccancel := context.WithTimeout(context.Background(), replicaWait)
	defer ccancel()
	changes, err := operator.API().Changes(cctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer changes.Close()
	awaitChange := func(what string, ok func(apitypes.Run) bool) {
		t.Helper()
		for {
			ev, err := changes.Next()
			if err != nil {
				t.Fatalf("A's change stream ended before %s: %v", what, err)
			}
			var r apitypes.Run
			if ev.Type == apitypes.ChangeRun && json.Unmarshal(ev.Data, &r) == nil && r.RunRef == run.RunRef && ok(r) {
				return
			}
		}
	}

	// Attach through A, input through B.
	s := attachFrom(t, operator, run.RunRef, 0)
	operator.Via(b).Must(http.StatusAccepted, http.MethodPost, "/v1/m/sessions/runs/"+run.RunRef+"/input", Message("hello"), nil)
	var last uint64
	for {
		o, ok := nextOutput(t, s)
		if !ok {
			t.Fatal("attach through A ended before the echo of input sent through B")
		}
		if last != 0 && o.Seq != last+1 {
			t.Fatalf("seq %d after %d: a gap or a duplicate", o.Seq, last)
		}
		last = o.Seq
		if strings.Contains(o.Data, "pong: hello") {
			break
		}
	}
	// The turn's rows went to B's index (the node is B's), and the name
	// through B: both reach A's stream.
	awaitChange("the turn's row indexed by B", func(r apitypes.Run) bool { return r.RingLast >= last })
	name := "via b"
	operator.Via(b).Must(http.StatusOK, http.MethodPut, "/v1/m/sessions/runs/"+run.RunRef+"/name", apitypes.NameRequest{Name: &name}, nil)
	awaitChange("the name given through B", func(r apitypes.Run) bool { return r.Name == name })

	// Revoke, through A, a node held by B: B cuts it (LISTEN/NOTIFY wakes
	// it; liveness, not a timing), and the agent learns it is revoked.
	revoked := env.StartAgentProcess(ProcOptions{Transport: "yamux", Coordinators: []string{b.TunnelAddr()}})
	if l := revoked.AwaitConnected(replicaWait); l.Replica != b.ID {
		t.Fatalf("third node held by %q, want %s", l.Replica, b.ID)
	}
	admin.Must(http.StatusOK, http.MethodPost, "/v1/nodes/"+revoked.ID+"/revoke", nil, nil)
	Await(t, replicaWait, "B to cut the node revoked through A", func() bool {
		var n apitypes.Node
		return admin.Via(b).Call(http.MethodGet, "/v1/nodes/"+revoked.ID, nil).Status == http.StatusOK &&
			func() bool {
				admin.Via(b).Must(http.StatusOK, http.MethodGet, "/v1/nodes/"+revoked.ID, nil, &n)
				return !n.Connected
			}()
	})
	Await(t, replicaWait, "the revoked agent to stop dialing", func() bool {
		return strings.Contains(revoked.Output(), "will not connect again")
	})

	// kill -9 replica B mid-stream.
	b.Kill()
	for {
		if _, ok := nextOutput(t, s); !ok {
			break // the stream through A ended with B: the viewer reconnects
		}
	}
	// B's agent reconnects to A with its backoff.
	Await(t, replicaWait, "node "+onB.ID+" to reconnect to A", func() bool {
		l := env.Fleet().Link(onB.ID)
		return l.Connected && l.Replica == "replica-a"
	})
	// The viewer reconnects at last+1 and the next frame is last+1: no gap,
	// no duplicate.
	s2 := attachFrom(t, operator, run.RunRef, last+1)
	operator.Must(http.StatusAccepted, http.MethodPost, "/v1/m/sessions/runs/"+run.RunRef+"/input", Message("again"), nil)
	o, ok := nextOutput(t, s2)
	if !ok || o.Seq != last+1 {
		t.Fatalf("after the reconnect: first frame %+v (ok %v), want seq %d", o, ok, last+1)
	}
	for last = o.Seq; !strings.Contains(o.Data, "pong: again"); last = o.Seq {
		if o, ok = nextOutput(t, s2); !ok || o.Seq != last+1 {
			t.Fatalf("after the reconnect: frame %+v (ok %v) after seq %d", o, ok, last)
		}
	}
	// The run kept its process and generation.
	if got := operator.Run(run.RunRef); got.PID != run.PID || got.Generation != run.Generation {
		t.Fatalf("after B died: pid %d generation %d, want %d %d", got.PID, got.Generation, run.PID, run.Generation)
	}

	// Audit: both replicas wrote, one chain.
	before := auditVerifies(t, admin)

	// Restart both: nothing is lost.
	b.Restart()
	env.RestartCoordinator()
	onA.AwaitConnected(replicaWait)
	Await(t, replicaWait, "node "+onB.ID+" back", func() bool { return env.Fleet().Link(onB.ID).Connected })
	for _, c := range []*Client{operator, operator.Via(b)} {
		got := c.Run(run.RunRef)
		if got.PID != run.PID || got.Generation != run.Generation {
			t.Fatalf("after restarting both: pid %d generation %d, want %d %d", got.PID, got.Generation, run.PID, run.Generation)
		}
	}
	if after := auditVerifies(t, admin.Via(b)); after != before {
		t.Fatalf("audit entries after restarting both: %d, want %d", after, before)
	}
	var nodes apitypes.NodeList
	admin.Via(b).Must(http.StatusOK, http.MethodGet, "/v1/nodes", nil, &nodes)
	if len(nodes.Items) != 3 {
		t.Fatalf("nodes after restarting both: %d, want 3", len(nodes.Items))
	}
}

// R-REP-5: profile and workspace creation converge: requests racing for one name
// through two replicas all reach the node (the name looked free to each),
// the index takes one, and the node keeps only that one: the others are
// removed from it again (issue 24, "a 409 after the agent call leaves an
// orphan on the node").
func TestCreateRaceLeavesNoOrphan(t *testing.T) {
	env := NewEnv(t, Options{Postgres: pgtest.NewDatabase(t)})
	b := env.StartReplica()
	a := env.StartAgent(AgentOptions{Transport: "yamux"})
	a.AwaitConnected(replicaWait)
	admin := env.Client(env.AdminToken)
	const n = 8
	type result struct {
		status int
		code   string
	}
	for _, kind := range []string{"profiles", "workspaces"} {
		t.Run(kind, func(t *testing.T) {
			results := make(chan result, n)
			start := make(chan struct{})
			for i := range n {
				c := admin
				if i%2 == 1 {
					c = admin.Via(b)
				}
				var body any = apitypes.WorkspaceCreate{NodeID: a.ID, Path: t.TempDir(), Name: "same"}
				if kind == "profiles" {
					body = apitypes.ProfileCreate{NodeID: a.ID, Tool: "claude", Name: "same", Home: filepath.Join(t.TempDir(), "home")}
				}
				go func() {
					<-start
					r, err := c.Send(http.MethodPost, "/v1/m/sessions/"+kind, body, nil)
					if err != nil {
						t.Error(err)
					}
					results <- result{r.Status, r.ErrorCode()}
				}()
			}
			close(start)
			created := 0
			for range n {
				r := <-results
				switch {
				case r.status == http.StatusCreated:
					created++
				case r.status == http.StatusConflict && r.code == "name_taken":
				default:
					t.Errorf("a racing create answered %d %s, want 201 or 409 name_taken", r.status, r.code)
				}
			}
			if created != 1 {
				t.Fatalf("%d creates succeeded, want 1", created)
			}
			profiles, workspaces, err := a.Daemon.RegistryRefs()
			if err != nil {
				t.Fatal(err)
			}
			var onNode []string
			var index struct {
				Items []struct{ Ref string } `json:"items"`
			}
			admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/"+kind, nil, &index)
			if onNode = workspaces; kind == "profiles" {
				onNode = profiles
			}
			if len(index.Items) != 1 || len(onNode) != 1 || onNode[0] != index.Items[0].Ref {
				t.Fatalf("node has %v, index has %+v: want the same one record", onNode, index.Items)
			}
		})
	}
}

// R-REP-4: a replica started with a CA or a vault key of its own, instead
// of copies of the first replica's, refuses to start, says which files to
// copy, and leaves no CA or key of its own behind; with copies it starts.
func TestReplicaRefusesOtherKeys(t *testing.T) {
	env := NewEnv(t, Options{Postgres: pgtest.NewDatabase(t)})
	cfg := env.cfg
	cfg.Replica.ID = "replica-x"
	cfg.API.Listen, cfg.Tunnel.Listen, cfg.Metrics.Listen, cfg.Replica.Listen = freePort(t), freePort(t), "off", freePort(t)
	steps := []struct {
		name    string
		prepare func(dir string)
		want    string // "" starts
	}{
		{"a CA of its own", func(string) {}, "CA"},
		{"the CA but a vault key of its own", func(dir string) {
			if err := copyPrivateDir(filepath.Join(env.cfg.StateDir, coordd.CADir), filepath.Join(dir, coordd.CADir)); err != nil {
				t.Fatal(err)
			}
		}, "vault key"},
		{"both copied", func(dir string) {
			if err := copyPrivate(filepath.Join(env.cfg.StateDir, vault.KeyFile), filepath.Join(dir, vault.KeyFile)); err != nil {
				t.Fatal(err)
			}
		}, ""},
	}
	cfg.StateDir = filepath.Join(env.Dir, "replica-x")
	for _, st := range steps {
		st.prepare(cfg.StateDir)
		c, err := coordd.New(cfg, env.logs.logger())
		if st.want == "" {
			if err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			c.Close()
			continue
		}
		if err == nil {
			c.Close()
			t.Fatalf("%s: started, want a refusal", st.name)
		}
		if !strings.Contains(err.Error(), st.want) || !strings.Contains(err.Error(), "copy STATE_DIR/") {
			t.Fatalf("%s: got %v, want a refusal naming the %s and the files to copy", st.name, err, st.want)
		}
	}
	// The refused starts left nothing of their own: the files are copies.
	for _, f := range []string{filepath.Join(coordd.CADir, "ca.pem"), vault.KeyFile} {
		a, _ := os.ReadFile(filepath.Join(env.cfg.StateDir, f))
		x, _ := os.ReadFile(filepath.Join(cfg.StateDir, f))
		if string(a) != string(x) {
			t.Errorf("%s differs from the first replica's", f)
		}
	}
}
