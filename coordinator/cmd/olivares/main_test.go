package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration/contract"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

const (
	testToken  = "olv_test"
	testTenant = "acme"
)

// fakeAPI serves h behind a check of the headers every command must send,
// and logs the CLI in to it. The fake and the CLI are both checked against
// openapi.yaml: what the CLI sends, and what the fake answers in the API's
// place (issue 17).
func fakeAPI(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	return serveFake(t, contract.Handler(t, h))
}

// fakeAPIOffContract is fakeAPI for a fake that answers what no route
// answers, on purpose (statuses and codes a client must map whatever they
// are).
func fakeAPIOffContract(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	return serveFake(t, h)
}

func serveFake(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer "+testToken {
			t.Errorf("%s %s: Authorization %q, want %q", r.Method, r.URL, got, "Bearer "+testToken)
		}
		if got := r.Header.Get("X-Olivares-Tenant"); got != testTenant {
			t.Errorf("%s %s: X-Olivares-Tenant %q, want %q", r.Method, r.URL, got, testTenant)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	t.Setenv("OLIVARES_CONFIG_DIR", dir)
	raw, _ := json.Marshal(Credentials{URL: srv.URL, Token: testToken, Tenant: testTenant})
	if err := os.WriteFile(filepath.Join(dir, "credentials.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return srv
}

// cli runs the CLI as main does and returns its output and exit code.
func cli(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code = report(run(ctx, args, &out, &errb), &errb)
	return out.String(), errb.String(), code
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(answered(v))
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// sse writes one event and flushes it.
func writeEvent(t *testing.T, w http.ResponseWriter, event string, id uint64, data any) {
	t.Helper()
	raw, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(w, "event: %s\nid: %d\ndata: %s\n\n", event, id, raw)
	w.(http.Flusher).Flush()
}

func output(seq uint64, stream, text string) apitypes.Output {
	return apitypes.Output{Seq: seq, Generation: 1, Stream: stream, Data: text, Encoding: "utf8"}
}

func startStream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

// testAttacher returns an attacher whose waits are recorded, not slept.
func testAttacher(t *testing.T, srv *httptest.Server, raw bool) (a *attacher, stdout, stderr *bytes.Buffer, waits *[]time.Duration) {
	t.Helper()
	cl, err := newClient(Credentials{URL: srv.URL, Token: testToken, Tenant: testTenant}, callTimeout)
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr = new(bytes.Buffer), new(bytes.Buffer)
	a = newAttacher(cl, "run_1", raw, stdout, stderr)
	waits = new([]time.Duration)
	a.wait = func(ctx context.Context, d time.Duration) error {
		*waits = append(*waits, d)
		return ctx.Err()
	}
	return a, stdout, stderr, waits
}

func TestAttachReconnects(t *testing.T) {
	var mu sync.Mutex
	var froms []string
	conn := 0
	srv := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/m/sessions/runs/run_1/attach" {
			t.Errorf("path %s", r.URL.Path)
		}
		mu.Lock()
		conn++
		n := conn
		if r.URL.Query().Has("from") {
			froms = append(froms, r.URL.Query().Get("from"))
		} else {
			froms = append(froms, "(none)")
		}
		mu.Unlock()
		switch n {
		case 1:
			startStream(w)
			writeEvent(t, w, "output", 1, output(1, "stdout", "one\n"))
			writeEvent(t, w, "output", 2, output(2, "stderr", "oops\n"))
			o := output(3, "pty", base64.StdEncoding.EncodeToString([]byte("three\n")))
			o.Encoding = "base64"
			writeEvent(t, w, "output", 3, o)
			// Frame 4 is cut off mid-line: it must not be printed now.
			fmt.Fprint(w, "event: output\nid: 4\ndata: {\"seq\":4,\"stream\":\"stdout\",\"data\":\"fo")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		case 2:
			// A clean end of stream without end or notice is a drop too.
			startStream(w)
			writeEvent(t, w, "output", 3, output(3, "stdout", "three again\n")) // a replay: skipped
			writeEvent(t, w, "output", 4, output(4, "stdout", "four\n"))
		case 3, 4:
			writeErr(w, http.StatusServiceUnavailable, "node_unreachable", "the node has no tunnel")
		default:
			startStream(w)
			writeEvent(t, w, "output", 5, output(5, "stdout", "five\n"))
			code := 0
			writeEvent(t, w, "end", 5, apitypes.End{Generation: 1, ExitCode: &code})
		}
	})
	a, stdout, stderr, waits := testAttacher(t, srv, false)
	if err := a.run(t.Context(), 0, false); err != nil {
		t.Fatalf("attach: %v", err)
	}
	if got, want := stdout.String(), "one\nthree\nfour\nfive\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if want := []string{"(none)", "4", "5", "5", "5"}; !reflect.DeepEqual(froms, want) {
		t.Errorf("from per connection %q, want %q", froms, want)
	}
	if want := []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}; !reflect.DeepEqual(*waits, want) {
		t.Errorf("backoff %v, want %v", *waits, want)
	}
	errText := stderr.String()
	for _, want := range []string{
		"oops\n",
		"-- reconnecting at seq 4\n",
		"-- reconnecting at seq 5\n",
		"-- stream dropped: the node has no tunnel (node_unreachable)\n",
		"-- ended: generation 1, exit code 0\n",
	} {
		if !strings.Contains(errText, want) {
			t.Errorf("stderr %q lacks %q", errText, want)
		}
	}
	if n := strings.Count(errText, "-- reconnecting"); n != 4 {
		t.Errorf("%d reconnects in %q, want 4", n, errText)
	}
}

// attachRequest is a pending request as the attach stream carries it.
var attachRequest = apitypes.RunRequest{ID: "req_0123456789abcdef", Kind: "command", Tool: "Bash", Title: "Run make",
	State: "pending", Detail: apitypes.RequestDetail{Command: "make", Cwd: "/w"},
	Options: []apitypes.RequestOption{{ID: "allow_once", Label: "Allow once", Decision: "allow"},
		{ID: "allow_session", Label: "Allow for this session", Decision: "allow", Session: true},
		{ID: "deny", Label: "Deny", Decision: "deny"}}}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAttachEvents(t *testing.T) {
	code := 3
	tests := []struct {
		name      string
		from      string // query from, "" for none
		events    func(t *testing.T, w http.ResponseWriter)
		raw       bool
		stdout    string
		stderr    string
		reconnect bool
	}{
		{
			name: "lag then notice", from: "2",
			events: func(t *testing.T, w http.ResponseWriter) {
				writeEvent(t, w, "lag", 4, apitypes.Lag{RequestedFrom: 2, ResumedFrom: 5})
				writeEvent(t, w, "output", 5, output(5, "stdout", "five"))
				writeEvent(t, w, "notice", 5, apitypes.Notice{Kind: "not_live", State: "stopped"})
				writeEvent(t, w, "output", 6, output(6, "stdout", "after the notice"))
			},
			// The line the notice cut short is printed whole before it.
			stdout: "five\n",
			stderr: "-- lag: frames 2..4 were evicted; resuming at 5\n-- session is not live (state=stopped)\n",
		},
		{
			name: "end with an exit code",
			events: func(t *testing.T, w http.ResponseWriter) {
				writeEvent(t, w, "olivares_notice", 0, map[string]string{"kind": "history_withheld"})
				writeEvent(t, w, "end", 0, apitypes.End{Generation: 2, ExitCode: &code})
			},
			stderr: "-- notice: history_withheld\n-- ended: generation 2, exit code 3\n",
		},
		{
			// R-REQ-4, R-REQ-14: a request at its place in the
			// conversation, with the commands that answer it, then who
			// settled it.
			name: "a request and its settlement",
			events: func(t *testing.T, w http.ResponseWriter) {
				writeEvent(t, w, "output", 6, output(6, "stdout", "about to build"))
				writeEvent(t, w, "request", 7, attachRequest)
				req := attachRequest
				req.State, req.Decision, req.OptionID, req.By = "settled", "allow", "allow_session", "prn_alice"
				writeEvent(t, w, "request_settled", 8, req)
				writeEvent(t, w, "output", 9, output(9, "stdout", "built\n"))
				writeEvent(t, w, "end", 9, apitypes.End{Generation: 1, ExitCode: &code})
			},
			stdout: "about to build\n" +
				"? req_0123456789abcdef asks (command, Bash): Run make\n" +
				"    command: make\n" +
				"    in:      /w\n" +
				"    options: allow_once (allow: Allow once); allow_session (allow: Allow for this session); deny (deny: Deny)\n" +
				"    answer:  olivares session answer run_1 req_0123456789abcdef   (allow once)\n" +
				"             olivares session answer run_1 req_0123456789abcdef --always\n" +
				"             olivares session answer run_1 req_0123456789abcdef --deny\n" +
				"? request req_0123456789abcdef: allow by prn_alice: Run make\n" +
				"built\n",
			stderr: "-- ended: generation 1, exit code 3\n",
		},
		{
			name: "a request expires",
			events: func(t *testing.T, w http.ResponseWriter) {
				req := attachRequest
				req.State, req.Reason = "expired", "the process that asked is gone"
				writeEvent(t, w, "request_settled", 3, req)
				writeEvent(t, w, "notice", 3, apitypes.Notice{Kind: "not_live", State: "stopped"})
			},
			stdout: "? request req_0123456789abcdef expired: the process that asked is gone: Run make\n",
			stderr: "-- session is not live (state=stopped)\n",
		},
		{
			// --raw: stdout stays one JSON event a line; the commands
			// that answer go to stderr.
			name: "a request, raw", raw: true,
			events: func(t *testing.T, w http.ResponseWriter) {
				writeEvent(t, w, "request", 7, attachRequest)
				req := attachRequest
				req.State, req.Decision, req.By, req.Reason = "settled", "deny", "timeout", "nobody answered in 10m0s"
				writeEvent(t, w, "request_settled", 8, req)
				writeEvent(t, w, "notice", 8, apitypes.Notice{Kind: "not_live", State: "idle"})
			},
			stdout: `{"event":"request","id":"7","data":` + mustJSON(t, attachRequest) + "}\n" +
				`{"event":"request_settled","id":"8","data":` + mustJSON(t, func() apitypes.RunRequest {
				r := attachRequest
				r.State, r.Decision, r.By, r.Reason = "settled", "deny", "timeout", "nobody answered in 10m0s"
				return r
			}()) + "}\n" +
				`{"event":"notice","id":"8","data":{"kind":"not_live","state":"idle"}}` + "\n",
			stderr: "-- request req_0123456789abcdef (command, Bash): Run make; answer: " +
				"olivares session answer run_1 req_0123456789abcdef   (allow once)  |  olivares session answer run_1 req_0123456789abcdef --always  |  olivares session answer run_1 req_0123456789abcdef --deny\n" +
				"-- request req_0123456789abcdef: deny by timeout (nobody answered in 10m0s): Run make\n",
		},
		{
			name: "end by a signal",
			events: func(t *testing.T, w http.ResponseWriter) {
				writeEvent(t, w, "end", 0, apitypes.End{Generation: 1, Signal: "SIGKILL"})
			},
			stderr: "-- ended: generation 1, signal SIGKILL\n",
		},
		{
			name: "raw", raw: true,
			events: func(t *testing.T, w http.ResponseWriter) {
				writeEvent(t, w, "output", 1, output(1, "stdout", "x"))
				writeEvent(t, w, "end", 1, apitypes.End{Generation: 1, ExitCode: &code})
			},
			stdout: `{"event":"output","id":"1","data":{"seq":1,"generation":1,"stream":"stdout","at":"0001-01-01T00:00:00Z","data":"x","encoding":"utf8"}}` + "\n" +
				`{"event":"end","id":"1","data":{"generation":1,"exit_code":3}}` + "\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
				if got := r.URL.Query().Get("from"); got != tt.from {
					t.Errorf("from %q, want %q", got, tt.from)
				}
				startStream(w)
				tt.events(t, w)
			})
			a, stdout, stderr, waits := testAttacher(t, srv, tt.raw)
			var from uint64
			fmt.Sscan(tt.from, &from)
			if err := a.run(t.Context(), from, tt.from != ""); err != nil {
				t.Fatal(err)
			}
			if stdout.String() != tt.stdout {
				t.Errorf("stdout %q, want %q", stdout, tt.stdout)
			}
			if stderr.String() != tt.stderr {
				t.Errorf("stderr %q, want %q", stderr, tt.stderr)
			}
			if len(*waits) != 0 {
				t.Errorf("reconnected %d times after the stream was done", len(*waits))
			}
		})
	}
}

// A coordinator from before issue 16 dropped a slow viewer with an end
// event of reason slow_viewer; the CLI still reconnects after one. The
// fake is that older coordinator: today's never sends it (openapi.yaml's
// EndEvent), so it is off the contract on purpose.
func TestAttachSlowViewerReconnects(t *testing.T) {
	conn := 0
	srv := fakeAPIOffContract(t, func(w http.ResponseWriter, r *http.Request) {
		conn++
		startStream(w)
		if conn == 1 {
			writeEvent(t, w, "output", 1, output(1, "stdout", "a"))
			writeEvent(t, w, "end", 1, apitypes.End{Generation: 1, Reason: "slow_viewer"})
			return
		}
		if got := r.URL.Query().Get("from"); got != "2" {
			t.Errorf("from %q, want 2", got)
		}
		writeEvent(t, w, "notice", 1, apitypes.Notice{Kind: "not_live", State: "idle"})
	})
	a, stdout, stderr, waits := testAttacher(t, srv, false)
	if err := a.run(t.Context(), 0, false); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "a\n" || len(*waits) != 1 || !strings.Contains(stderr.String(), "-- reconnecting at seq 2\n") {
		t.Errorf("stdout %q, stderr %q, %d waits", stdout, stderr, len(*waits))
	}
}

// Issue 16: a coordinator drops a slow viewer by closing its stream
// without end (with a comment saying why), or answers 429 when too many
// attaches are open; either way the CLI reconnects at last+1.
func TestAttachDropAnd429Reconnect(t *testing.T) {
	conn := 0
	srv := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		conn++
		switch conn {
		case 1:
			startStream(w)
			writeEvent(t, w, "output", 1, output(1, "stdout", "a"))
			fmt.Fprint(w, ": dropped: this viewer read too slowly; reconnect with from=last+1\n\n")
		case 2:
			writeErr(w, http.StatusTooManyRequests, "too_many_attaches", "you have 128 attach streams open")
		default:
			if got := r.URL.Query().Get("from"); got != "2" {
				t.Errorf("from %q, want 2", got)
			}
			startStream(w)
			writeEvent(t, w, "notice", 1, apitypes.Notice{Kind: "not_live", State: "idle"})
		}
	})
	a, stdout, stderr, waits := testAttacher(t, srv, false)
	if err := a.run(t.Context(), 0, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-- stream dropped: the coordinator dropped this viewer for reading too slowly\n", "(too_many_attaches)", "-- reconnecting at seq 2\n"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q lacks %q", stderr, want)
		}
	}
	if stdout.String() != "a\n" || len(*waits) != 2 {
		t.Errorf("stdout %q, %d waits; want \"a\\n\", 2", stdout, len(*waits))
	}
}

// notifyWriter reports its first write on a channel.
type notifyWriter struct {
	once sync.Once
	ch   chan struct{}
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.ch) })
	return len(p), nil
}

func TestAttachInterrupted(t *testing.T) {
	srv := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		startStream(w)
		writeEvent(t, w, "output", 1, output(1, "stdout", "a\n"))
		<-r.Context().Done()
	})
	a, _, _, _ := testAttacher(t, srv, false)
	nw := &notifyWriter{ch: make(chan struct{})}
	a.stdout, a.rend.out = nw, nw
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.run(ctx, 0, false) }()
	select {
	case <-nw.ch:
	case <-time.After(30 * time.Second):
		t.Fatal("no output")
	}
	cancel() // Ctrl-C
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("got %v, want a clean exit", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("attach did not stop")
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		status int
		code   int
	}{
		{http.StatusOK, 0},
		{http.StatusBadRequest, 1},
		{http.StatusUnauthorized, 1},
		{http.StatusForbidden, 3},
		{http.StatusNotFound, 4},
		{http.StatusConflict, 5},
		{http.StatusUnprocessableEntity, 6},
		{http.StatusInternalServerError, 1},
		{http.StatusServiceUnavailable, 1},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			// Every status on one route, with a made-up code: off the
			// document on purpose.
			fakeAPIOffContract(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.status == http.StatusOK {
					writeJSON(w, 200, apitypes.Run{RunRef: "run_1", State: "running"})
					return
				}
				writeErr(w, tt.status, "some_code", "something is wrong")
			})
			// show, and attach, which reports a 4xx of its first connection
			// the same way.
			cmds := [][]string{{"session", "show", "run_1"}}
			if tt.status >= 400 && tt.status < 500 {
				cmds = append(cmds, []string{"session", "attach", "run_1"})
			}
			for _, args := range cmds {
				_, stderr, code := cli(t, args...)
				if code != tt.code {
					t.Errorf("%s: exit %d, want %d (stderr %q)", args[1], code, tt.code, stderr)
				}
				if want := "olivares: something is wrong (some_code)\n"; tt.status != 200 && stderr != want {
					t.Errorf("%s: stderr %q, want %q", args[1], stderr, want)
				}
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("usage error reached the API: %s %s", r.Method, r.URL)
	})
	for _, args := range [][]string{
		{"session"},
		{"session", "frob"},
		{"session", "show"},
		{"session", "show", "a", "b"},
		{"session", "list", "extra"},
		{"session", "start"},
		{"session", "input", "run_1"},
		{"session", "input", "run_1", "--text", "a", "--message", "b"},
		{"session", "input", "run_1", "--line", "{not json"},
		{"session", "stop", "run_1", "--bogus"},
		{"profile", "add", "--node", "n1", "--tool", "claude"},
		{"profile", "add", "--node", "n1", "--tool", "claude", "--name", "x", "--env", "NOEQUALS"},
		{"workspace", "add", "--node", "n1", "--name", "x"},
		{"session", "list", "--limit", "0"},
		{"audit", "list", "--limit", "-1"},
		{"session", "messages", "run_1", "--limit", "0"},
		{"session", "messages", "run_1", "--id", "0"},
		{"session", "messages", "run_1", "--cursor", "0"},
		{"principal", "create", "--name", "a"},
		{"principal", "show"},
		{"credential", "create", "--label", "x"},
		{"credential", "revoke", "a", "b"},
		{"logout", "--json"},
		{"tenant", "list", "x"},
		{"node", "forget"},
	} {
		if _, stderr, code := cli(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", args, code, stderr)
		}
	}
	// R-CLI-8: a missing flag is told before the login is read, so it is
	// told the same when not logged in.
	t.Setenv("OLIVARES_CONFIG_DIR", t.TempDir())
	for args, want := range map[string]string{
		"principal create --role admin": "olivares: principal create: --name and --role are required\n",
		"credential create":             "olivares: credential create: --principal is required\n",
	} {
		if _, stderr, code := cli(t, strings.Fields(args)...); code != 2 || stderr != want {
			t.Errorf("%s without a login: exit %d, stderr %q, want 2 and %q", args, code, stderr, want)
		}
	}
	if out, _, code := cli(t, "--help"); code != 0 || !strings.Contains(out, "olivares session attach REF") {
		t.Errorf("--help: exit %d, output %q", code, out)
	}
}

func TestSessionStartResolvesNames(t *testing.T) {
	var launched []apitypes.LaunchRequest
	lists := 0
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "GET /v1/m/sessions/profiles":
			lists++
			writeJSON(w, 200, apitypes.ProfileList{Items: []apitypes.Profile{
				{Ref: "prof_1", Name: "work", NodeID: "n1"},
				{Ref: "prof_2", Name: "home", NodeID: "n1"},
				{Ref: "prof_3", Name: "home", NodeID: "n2"},
				{Ref: "prof_4", Name: "Work", NodeID: "n2"},
			}})
		case "GET /v1/m/sessions/workspaces":
			writeJSON(w, 200, apitypes.WorkspaceList{Items: []apitypes.Workspace{{Ref: "ws_7", Name: "repo", NodeID: "n1"}}})
		case "POST /v1/m/sessions/runs":
			var req apitypes.LaunchRequest
			dec := json.NewDecoder(r.Body)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				t.Errorf("launch body: %v", err)
			}
			launched = append(launched, req)
			writeJSON(w, 201, apitypes.Run{RunRef: "run_9", State: "starting", ProviderProfileRef: req.ProviderProfileRef})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	})

	if _, stderr, code := cli(t, "session", "start", "--profile", "work", "--workspace", "repo", "--worktree", "--no-setup", "--name", "fix"); code != 0 {
		t.Fatalf("start by name: exit %d, %s", code, stderr)
	}
	yes := true
	want := apitypes.LaunchRequest{ProviderProfileRef: "prof_1", WorkspaceRef: "ws_7", Worktree: &yes, NoSetup: true, Name: "fix"}
	if len(launched) != 1 || !reflect.DeepEqual(launched[0], want) {
		t.Fatalf("launched %+v, want %+v", launched, want)
	}

	lists = 0
	if _, stderr, code := cli(t, "session", "start", "--profile", "prof_2", "--workspace", "ws_8", "--json"); code != 0 {
		t.Fatalf("start by ref: exit %d, %s", code, stderr)
	}
	if got := launched[1]; got.ProviderProfileRef != "prof_2" || got.WorkspaceRef != "ws_8" || got.Worktree != nil || lists != 0 {
		t.Errorf("start by ref: launched %+v after %d list calls", got, lists)
	}

	for _, tt := range []struct{ name, want string }{
		{"home", `2 profiles are named "home" (prof_2 on n1, prof_3 on n2)`},
		{"nope", `no profile is named "nope"`},
		{"wor", `no profile is named "wor"`},
	} {
		// An unknown name exits 4, as an unknown ref does (R-CLI-2);
		// an ambiguous one is not a 404.
		wantCode := 4
		if tt.name == "home" {
			wantCode = 1
		}
		_, stderr, code := cli(t, "session", "start", "--profile", tt.name)
		if code != wantCode || !strings.Contains(stderr, tt.want) {
			t.Errorf("--profile %s: exit %d, stderr %q, want it to say %q", tt.name, code, stderr, tt.want)
		}
	}
	if len(launched) != 2 {
		t.Errorf("%d launches, want 2", len(launched))
	}
}

func TestSessionInputBodies(t *testing.T) {
	var bodies []string
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/m/sessions/runs/run_1/input" {
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
		raw, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(raw))
		if string(raw) == `{"text":""}` {
			// The server's answer to an empty text (R-IN-2).
			writeErr(w, 400, "invalid_input", `"text" is empty`)
			return
		}
		writeJSON(w, 202, apitypes.Accepted{Accepted: true})
	})
	for _, tt := range []struct {
		args []string
		want string
		exit int
	}{
		{[]string{"--text", "hello"}, `{"text":"hello"}`, 0},
		// The CLI sends what it is given; the server judges it.
		{[]string{"--text", ""}, `{"text":""}`, 1},
		{[]string{"--message", `say "hi"`}, `{"message":"say \"hi\""}`, 0},
		{[]string{"--line", `{"type": "user", "message": {"role": "user"}}`}, `{"line":{"type":"user","message":{"role":"user"}}}`, 0},
	} {
		bodies = nil
		out, stderr, code := cli(t, append([]string{"session", "input", "run_1"}, tt.args...)...)
		if code != tt.exit || (tt.exit == 0 && out != "input accepted\n") {
			t.Errorf("%q: exit %d, out %q, stderr %q, want exit %d", tt.args, code, out, stderr, tt.exit)
		}
		if len(bodies) != 1 || bodies[0] != tt.want {
			t.Errorf("%q: body %q, want %q", tt.args, bodies, tt.want)
		}
	}
}

func TestSessionListAndEvents(t *testing.T) {
	no := false
	code := 1
	archived := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/m/sessions/runs":
			if got, want := r.URL.RawQuery, "limit=5&offset=10&state=running"; got != want {
				t.Errorf("list query %q, want %q", got, want)
			}
			writeJSON(w, 200, apitypes.RunList{Items: []apitypes.Run{
				{RunRef: "run_1", State: "running", Driver: "claude", Generation: 2, NodeID: "n1", NodeReachable: &no, Name: "fix",
					ProviderProfileRef: "prof_1", WorkspaceRef: "ws_1"},
				{RunRef: "run_2", State: "failed", Driver: "codex", Generation: 1, NodeID: "n1", ExitCode: &code},
				{RunRef: "run_3", State: "stopped", NodeID: "n1", ArchivedAt: &archived},
			}})
		case "/v1/m/sessions/runs/run_1/events":
			switch after := r.URL.Query().Get("after"); after {
			case "":
				writeJSON(w, 200, apitypes.EventList{Items: []apitypes.Event{{Seq: 1, Kind: "created"}, {Seq: 2, Kind: "started", PID: 42}}, Next: "2"})
			case "2":
				writeJSON(w, 200, apitypes.EventList{Items: []apitypes.Event{{Seq: 3, Kind: "exited", ExitCode: &code}}})
			default:
				t.Errorf("after=%q", after)
			}
		case "/v1/m/sessions/profiles":
			writeJSON(w, 200, apitypes.ProfileList{Items: []apitypes.Profile{{Ref: "prof_1", Name: "work"}}})
		case "/v1/m/sessions/workspaces":
			writeJSON(w, 200, apitypes.WorkspaceList{Items: []apitypes.Workspace{{Ref: "ws_1", Name: "repo"}}})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	})
	out, stderr, rc := cli(t, "session", "list", "--state", "running", "--limit", "5", "--offset", "10")
	if rc != 0 {
		t.Fatalf("list: exit %d, %s", rc, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 || lines[0] != "Sessions" || !strings.HasPrefix(lines[1], "RUN") || !strings.Contains(lines[2], "running (unreachable)") ||
		!strings.Contains(lines[2], " work ") || !strings.Contains(lines[2], " repo ") ||
		!strings.Contains(lines[3], "failed") || !strings.Contains(lines[3], " 1 ") || !strings.HasPrefix(lines[5], "1 archived run(s) hidden") {
		t.Errorf("list table:\n%s", out)
	}
	out, _, _ = cli(t, "session", "list", "--state", "running", "--limit", "5", "--offset", "10", "--archived", "--json")
	var res apitypes.RunList
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Items) != 3 {
		t.Errorf("list --archived --json: %d items, %v", len(res.Items), err)
	}

	out, stderr, rc = cli(t, "session", "events", "run_1", "--json")
	var evs apitypes.EventList
	if rc != 0 || json.Unmarshal([]byte(out), &evs) != nil {
		t.Fatalf("events: exit %d, %s %s", rc, out, stderr)
	}
	var seqs []uint64
	for _, e := range evs.Items {
		seqs = append(seqs, e.Seq)
	}
	if !reflect.DeepEqual(seqs, []uint64{1, 2, 3}) || evs.Next != "" {
		t.Errorf("events seqs %v next %q, want [1 2 3] and no next", seqs, evs.Next)
	}
}

func TestProfileAndWorkspaceAdd(t *testing.T) {
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		switch r.Method + " " + r.URL.Path {
		case "GET /v1/nodes":
			writeJSON(w, 200, apitypes.NodeList{Items: []apitypes.Node{{ID: "n1", Hostname: "box"}}})
		case "POST /v1/m/sessions/profiles":
			if want := `{"node_id":"n1","tool":"claude","name":"work","home":"/h","env":{"A":"1","B":"x=y"}}`; string(raw) != want {
				t.Errorf("profile body %s, want %s", raw, want)
			}
			writeJSON(w, 201, apitypes.Profile{Ref: "prof_1", NodeID: "n1", Tool: "claude", Name: "work", EnvKeys: []string{"A", "B"}})
		case "POST /v1/m/sessions/workspaces":
			// A relative path is the server's to refuse, not ours to rewrite.
			if want := `{"node_id":"n1","path":"src/repo","name":"repo"}`; string(raw) != want {
				t.Errorf("workspace body %s, want %s", raw, want)
			}
			writeErr(w, 400, "bad_path", "path must be absolute")
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	})
	out, stderr, code := cli(t, "profile", "add", "--node", "n1", "--tool", "claude", "--name", "work", "--home", "/h", "--env", "A=1", "--env", "B=x=y")
	if code != 0 || !strings.Contains(out, "prof_1") || !strings.Contains(out, "A, B") {
		t.Errorf("profile add: exit %d, out %q, stderr %q", code, out, stderr)
	}
	// --node may be left out when the tenant has one node (R-CLI-5).
	_, stderr, code = cli(t, "workspace", "add", "--path", "src/repo", "--name", "repo")
	if code != 1 || stderr != "olivares: path must be absolute (bad_path)\n" {
		t.Errorf("workspace add: exit %d, stderr %q", code, stderr)
	}
}

func TestStopAndResumeText(t *testing.T) {
	code := 143
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/m/sessions/runs/run_1/stop":
			writeJSON(w, 200, apitypes.Run{RunRef: "run_1", State: "stopped", ExitCode: &code})
		case "/v1/m/sessions/runs/run_2/stop":
			writeJSON(w, 200, apitypes.Run{RunRef: "run_2", State: "failed", Signal: "SIGKILL", Reason: "signal"})
		case "/v1/m/sessions/runs/run_1/resume":
			writeJSON(w, 200, apitypes.Run{RunRef: "run_1", State: "starting", Generation: 3})
		case "/v1/m/sessions/runs/run_1/interrupt":
			writeJSON(w, 202, apitypes.Accepted{Accepted: true})
		case "/v1/m/sessions/runs/run_2/interrupt":
			writeJSON(w, 202, apitypes.Accepted{Accepted: true, Noop: true})
		}
	})
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"session", "stop", "run_1"}, "run_1 stopped, exit code 143\n"},
		{[]string{"session", "stop", "run_2"}, "run_2 failed, signal SIGKILL (signal)\n"},
		{[]string{"session", "resume", "run_1"}, "run_1 starting, generation 3\n"},
		{[]string{"session", "interrupt", "run_1"}, "interrupt accepted\n"},
		{[]string{"session", "interrupt", "run_2"}, "no turn was running: nothing to interrupt\n"},
	} {
		if out, stderr, rc := cli(t, tt.args...); rc != 0 || out != tt.want {
			t.Errorf("%q: exit %d, out %q (stderr %q), want %q", tt.args, rc, out, stderr, tt.want)
		}
	}
}

// session list groups the caller's runs the way a console does: pinned
// first, snoozed hidden until due, done under "Earlier", archived hidden
// unless asked, and a pinned run the page repeats (R-LIST-3) shown once.
func TestSessionListGroups(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		// The list names profiles and workspaces: it reads them too.
		switch {
		case strings.HasSuffix(r.URL.Path, "/profiles"):
			writeJSON(w, 200, apitypes.ProfileList{Items: []apitypes.Profile{}})
			return
		case strings.HasSuffix(r.URL.Path, "/workspaces"):
			writeJSON(w, 200, apitypes.WorkspaceList{Items: []apitypes.Workspace{}})
			return
		}
		writeJSON(w, 200, apitypes.RunList{Items: []apitypes.Run{
			{RunRef: "run_a", State: "idle", NodeID: "n1"},
			{RunRef: "run_p", State: "idle", NodeID: "n1", Pinned: true, PinnedAt: &at},
			{RunRef: "run_d", State: "stopped", NodeID: "n1", Done: true},
			{RunRef: "run_s", State: "idle", NodeID: "n1", SnoozedUntil: &at},
			{RunRef: "run_x", State: "idle", NodeID: "n1", ArchivedAt: &at},
			{RunRef: "run_p", State: "idle", NodeID: "n1", Pinned: true, PinnedAt: &at},
		}})
	})
	out, stderr, rc := cli(t, "session", "list")
	if rc != 0 {
		t.Fatalf("exit %d: %s", rc, stderr)
	}
	order := []string{"Pinned", "run_p", "Sessions", "run_a", "Earlier", "run_d", "1 snoozed run(s) hidden", "1 archived run(s) hidden"}
	rest := out
	for _, w := range order {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("%q missing or out of order in:\n%s", w, out)
		}
		rest = rest[i+len(w):]
	}
	if strings.Count(out, "run_p") != 1 || strings.Contains(out, "run_s") || strings.Contains(out, "run_x") {
		t.Errorf("list:\n%s", out)
	}
	out, _, _ = cli(t, "session", "list", "--snoozed", "--archived")
	if !strings.Contains(out, "run_s") || !strings.Contains(out, "run_x  idle") && !strings.Contains(out, "(archived)") {
		t.Errorf("list --snoozed --archived:\n%s", out)
	}
}
