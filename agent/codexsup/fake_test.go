package codexsup

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// fakeServer is an in-process app-server: it answers initialize itself and
// every other request with handle. It records every line it got.
type fakeServer struct {
	t      testing.TB
	handle func(method string, params json.RawMessage) (result any, rpcErr string)
	// raw, when set for a method, is written as the answer line instead
	// (with %d for the id).
	raw map[string]func(id int64) []byte
	// beforeAnswer runs before each answer is written (a server request).
	beforeAnswer func(w io.Writer)

	mu     sync.Mutex
	calls  []fakeCall
	spawns int
	stdins []*io.PipeWriter
}

type fakeCall struct {
	ID     *int64
	Method string
	Params json.RawMessage
}

func (f *fakeServer) spawn(ctx context.Context) (*proc, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	f.mu.Lock()
	f.spawns++
	f.stdins = append(f.stdins, inW)
	f.mu.Unlock()
	go f.serve(inR, outW)
	return &proc{stdin: inW, stdout: outR, stop: func() { inW.Close(); outW.Close() }}, nil
}

// kill ends the newest process as if it crashed.
func (f *fakeServer) kill() {
	f.mu.Lock()
	w := f.stdins[len(f.stdins)-1]
	f.mu.Unlock()
	w.CloseWithError(io.ErrClosedPipe)
}

func (f *fakeServer) serve(in io.Reader, out *io.PipeWriter) {
	defer out.Close()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var wmu sync.Mutex
	for sc.Scan() {
		var c fakeCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			f.t.Errorf("fake app-server: bad line %s", sc.Bytes())
			return
		}
		f.mu.Lock()
		f.calls = append(f.calls, c)
		f.mu.Unlock()
		if c.ID == nil {
			continue // a notification (initialized)
		}
		var line []byte
		switch {
		case c.Method == "initialize":
			line, _ = json.Marshal(map[string]any{"id": *c.ID, "result": map[string]any{"userAgent": "fake"}})
		case f.rawFor(c.Method) != nil:
			line = f.rawFor(c.Method)(*c.ID)
		default:
			res, e := f.handle(c.Method, c.Params)
			if e != "" {
				line, _ = json.Marshal(map[string]any{"error": map[string]any{"code": -32600, "message": e}, "id": *c.ID})
			} else {
				line, _ = json.Marshal(map[string]any{"id": *c.ID, "result": res})
			}
		}
		wmu.Lock()
		if f.beforeAnswer != nil {
			f.beforeAnswer(out)
		}
		out.Write(append(line, '\n'))
		wmu.Unlock()
	}
}

func (f *fakeServer) rawFor(method string) func(int64) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raw[method]
}

func (f *fakeServer) setRaw(raw map[string]func(int64) []byte) {
	f.mu.Lock()
	f.raw = raw
	f.mu.Unlock()
}

func (f *fakeServer) callsOf(method string) []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeCall
	for _, c := range f.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// fakeRuns is the run runtime: runs are rows whose state a test sets.
type fakeRuns struct {
	mu       sync.Mutex
	runs     map[string]apitypes.Run
	launched []supervisor.LaunchParams
}

func newFakeRuns() *fakeRuns { return &fakeRuns{runs: map[string]apitypes.Run{}} }

func (r *fakeRuns) CreateProfile(p registry.ProfileParams) (apitypes.Profile, error) {
	return apitypes.Profile{Ref: p.Ref}, nil
}

func (r *fakeRuns) Launch(ctx context.Context, p supervisor.LaunchParams) (apitypes.Run, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.launched = append(r.launched, p)
	run := apitypes.Run{RunRef: p.RunRef, Tenant: p.Tenant, State: apitypes.StateIdle, Driver: "codex"}
	r.runs[p.RunRef] = run
	return run, nil
}

func (r *fakeRuns) Get(ref string) (apitypes.Run, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run, ok := r.runs[ref]
	if !ok {
		return apitypes.Run{}, refusal.New(supervisor.ErrRunNotFound, "no run %s", ref)
	}
	return run, nil
}

func (r *fakeRuns) set(ref, state string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run := r.runs[ref]
	run.RunRef, run.State = ref, state
	r.runs[ref] = run
}

// newTestService is a Service on a fresh bbolt file whose app-server is f.
func newTestService(t testing.TB, f *fakeServer) (*Service, *fakeRuns, *bbolt.DB) {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "agent.db"), 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f.t = t
	s := openTestService(t, db, f)
	runs := newFakeRuns()
	s.SetRuns(runs)
	return s, runs, db
}

func openTestService(t testing.TB, db *bbolt.DB, f *fakeServer) *Service {
	t.Helper()
	cfg := Config{Enabled: true, CodexHome: filepath.Join(t.TempDir(), ".codex"), Command: "/bin/sh"}
	if err := cfg.CheckAndSetDefaults(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Options{Config: cfg, DB: db, NodeID: "node-1", Tenant: "t1", Path: "/usr/bin:/bin",
		ProfilesDir: t.TempDir(), spawn: f.spawn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// threadJSON is a Codex Thread as thread/list returns it.
func threadJSON(id, name string) map[string]any {
	t := map[string]any{
		"id": id, "sessionId": id, "forkedFromId": nil, "parentThreadId": nil,
		"preview": "secret first message of " + id, "ephemeral": false, "historyMode": "paginated",
		"modelProvider": "fake", "model": "fake-model", "createdAt": 1796206725, "updatedAt": 1796206800,
		"recencyAt": 1796206800, "status": map[string]any{"type": "notLoaded"},
		"path": "/home/u/.codex/sessions/2026/12/02/rollout-2026-12-02T10-18-45-" + id + ".jsonl",
		"cwd":  "/work/x", "cliVersion": "0.169.0", "originator": "codex_cli_rs", "source": "cli",
		"threadSource": nil, "gitInfo": map[string]any{"branch": "main", "sha": "0123abcd", "originUrl": "git@example.com:x/y.git"},
		"turns": []any{},
	}
	if name != "" {
		t["name"] = name
	} else {
		t["name"] = nil
	}
	return t
}

// uuid returns a thread id numbered n.
func uuid(n int) string { return fmt.Sprintf("01a23643-8a79-7b72-93b2-%012d", n) }

func ctx(t testing.TB) context.Context {
	// A guard against a hang, not a timing assertion.
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func itoa(i int) string { return fmt.Sprint(i) }

func fmtSscanf(s string, i *int) (int, error) { return fmt.Sscanf(s, "p%d", i) }
