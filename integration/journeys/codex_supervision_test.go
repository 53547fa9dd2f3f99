package journeys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Codex supervision end to end (docs/rules/codex-supervision.md, issue 10): real
// olivares-agent processes whose supervision connection is the real
// `codex app-server` 0.169.0 in a Codex home the test made, with native
// threads created by real turns against the fake Responses API.

const catalogPath = "/v1/m/sessions/catalog/codex/threads"

type cxFixture struct {
	t         *testing.T
	env       *integration.Env
	transport string
	bin       string
	fake      *fakemodel.OpenAI
	operator  *integration.Client
	viewer    *integration.Client
	robot     *integration.Client // an agent identity with write
}

type cxNode struct {
	*integration.AgentProc
	codexHome string
}

func newCX(t *testing.T, transport string) *cxFixture {
	t.Helper()
	bin := realBin(t, "codex")
	env := integration.NewEnv(t, integration.Options{Heartbeat: 2 * time.Second})
	fake := fakemodel.NewOpenAI()
	t.Cleanup(fake.Close)
	return &cxFixture{t: t, env: env, transport: transport, bin: bin, fake: fake,
		operator: env.Client(env.Principal(integration.Tenant, store.RoleOperator, store.KindHuman)),
		viewer:   env.Client(env.Principal(integration.Tenant, store.RoleViewer, store.KindHuman)),
		robot:    env.Client(env.Principal(integration.Tenant, store.RoleOperator, store.KindAgent)),
	}
}

// cli runs the olivares binary with --url and --token of the operator and
// no saved login; it returns stdout and the exit code.
func (f *cxFixture) cli(args ...string) (string, int) {
	f.t.Helper()
	cmd := exec.Command(filepath.Join(integration.Binaries(f.t), "olivares"), append(args, "--url", f.env.CheckedURL(), "--token", f.operator.Token)...)
	cmd.Env = []string{"PATH=" + cliruntime.DefaultPath, "HOME=" + f.t.TempDir(), "OLIVARES_CONFIG_DIR=" + f.t.TempDir()}
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	}
	f.t.Fatal(err)
	return "", -1
}

func supervisionTOML(codexHome string, enabled bool) string {
	return fmt.Sprintf("\n[codex_supervision]\nenabled = %v\ncodex_home = %q\n[codex_supervision.env]\nFAKE_OPENAI_KEY = \"test\"\n", enabled, codexHome)
}

// node starts an agent process whose user's Codex home is a fresh one with
// the fake provider; enabled is the node's own consent (R-CX-PERM-1).
func (f *cxFixture) node(enabled bool) *cxNode {
	f.t.Helper()
	codexHome := filepath.Join(f.t.TempDir(), "user", ".codex")
	writeCodexConfig(f.t, codexHome, f.fake, "fake-model")
	a := f.env.StartAgentProcess(integration.ProcOptions{Transport: f.transport, Path: f.bin + ":" + cliruntime.DefaultPath,
		Config: supervisionTOML(codexHome, enabled)})
	a.AwaitConnected(wait)
	// Before the homes are removed: SIGTERM, so that the agent stops its
	// codex children and waits for them (SIGKILL would leave them writing
	// into the home while it is removed).
	f.t.Cleanup(func() { stopAgent(f.t, a) })
	return &cxNode{AgentProc: a, codexHome: codexHome}
}

// stopAgent ends the agent process gracefully and waits until it is gone.
func stopAgent(t *testing.T, a *integration.AgentProc) {
	pid := a.Pid()
	if syscall.Kill(pid, syscall.SIGTERM) != nil {
		return
	}
	integration.Await(t, wait, "the agent to exit", func() bool { return syscall.Kill(pid, 0) != nil })
}

func (f *cxFixture) catalog(c *integration.Client, q string) (apitypes.CodexCatalog, []byte) {
	f.t.Helper()
	var out apitypes.CodexCatalog
	r := c.Must(http.StatusOK, http.MethodGet, catalogPath+q, nil, &out)
	return out, r.Body
}

func hostOf(t *testing.T, c apitypes.CodexCatalog, id string) apitypes.CodexHost {
	t.Helper()
	for _, h := range c.Hosts {
		if h.Host == id {
			return h
		}
	}
	t.Fatalf("host %s not in the catalog %+v", id, c)
	return apitypes.CodexHost{}
}

func ids(rows []apitypes.CodexThread) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ThreadID
	}
	slices.Sort(out)
	return out
}

func sorted(s ...string) []string { slices.Sort(s); return s }

func expectCode(t *testing.T, r integration.Response, status int, code string) {
	t.Helper()
	if r.Status != status || r.ErrorCode() != code {
		t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, status, code)
	}
}

func threadPath(host, thread, action string) string {
	return catalogPath + "/" + host + "/" + thread + "/" + action
}

var confirm = map[string]bool{"confirmNoOtherRunner": true}

// rollout returns the bytes of a thread's rollout file.
func rollout(t *testing.T, codexHome, thread string) []byte {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(codexHome, "sessions", "*", "*", "*", "rollout-*"+thread+".jsonl"))
	if len(m) != 1 {
		t.Fatalf("rollout of %s: %v", thread, m)
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// forkAnswer finds the thread/fork answer in a run's stdout.
func forkAnswer(t *testing.T, outs []apitypes.Output, source string) (fork, model, provider string) {
	t.Helper()
	var all strings.Builder
	for _, o := range outs {
		if o.Stream == "stdout" {
			all.WriteString(o.Data)
		}
	}
	for _, line := range strings.Split(all.String(), "\n") {
		if !strings.Contains(line, `"forkedFromId":"`+source+`"`) || !strings.Contains(line, `"result"`) {
			continue
		}
		var m struct {
			Result struct {
				Thread struct {
					ID string `json:"id"`
				} `json:"thread"`
				Model         string `json:"model"`
				ModelProvider string `json:"modelProvider"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.Result.Thread.ID != "" {
			return m.Result.Thread.ID, m.Result.Model, m.Result.ModelProvider
		}
	}
	t.Fatalf("no thread/fork answer for %s in the run's output", source)
	return
}

// TestCodexSupervision is the journey on both tunnel transports: the fleet
// catalog over two opted-in nodes (a third did not consent), search and
// paging, a transcript page, continue with its fork-then-canonical first
// turn, the source untouched, resume without a model override, archive
// and its refusals, continue and archive on the second node, and host
// isolation with that node down.
func TestCodexSupervision(t *testing.T) {
	realBin(t, "codex")
	byTransport(t, func(t *testing.T, transport string) {
		f := newCX(t, transport)
		a, b, off := f.node(true), f.node(true), f.node(false)
		work := t.TempDir()

		na := startNative(t, f.bin, a.codexHome)
		s1 := na.thread(work, "Alpha source", "first question", "second question")
		s2 := na.thread(work, "beta", "b1")
		s3 := na.thread(work, "", "unnamed one")
		gone := na.thread(work, "Archived alpha", "old")
		na.call("thread/archive", map[string]any{"threadId": gone})
		na.close()
		nb := startNative(t, f.bin, b.codexHome)
		t1 := nb.thread(work, "Gamma on B", "g1")
		nb.close()
		// AT-CX-19, R-CX-PASS-1, R-CX-SRC-1: from here on nothing of
		// Olivares writes the source: listing, transcript reads, continue,
		// the branch's turns.
		source := rollout(t, a.codexHome, s1)

		// AT-CX-01, AT-CX-02, R-CX-SCOPE-2, R-CX-PERM-1: both opted-in hosts,
		// each under its node id, non-archived rows only; the node that
		// did not consent is not a host.
		cat, raw := f.catalog(f.operator, "")
		if len(cat.Hosts) != 2 {
			t.Fatalf("hosts %+v, want the two opted-in nodes", cat.Hosts)
		}
		ha := hostOf(t, cat, a.ID)
		if got, want := ids(ha.Rows), sorted(s1, s2, s3); !slices.Equal(got, want) || ha.Error != nil {
			t.Fatalf("host A rows %v (error %+v), want %v", got, ha.Error, want)
		}
		if got := ids(hostOf(t, cat, b.ID).Rows); !slices.Equal(got, []string{t1}) {
			t.Fatalf("host B rows %v, want %v", got, t1)
		}
		for _, row := range ha.Rows {
			if row.State != apitypes.CodexStateNotLoaded || row.Source != "vscode" || row.ModelProvider != "fake" ||
				row.CodexVersion != "0.169.0" || row.Cwd != work || row.CreatedAt.IsZero() {
				t.Fatalf("row %+v", row)
			}
		}
		// R-CX-PROJ-2: no preview, rollout or home path in the page.
		for _, leak := range []string{"first question", "preview", "rollout", ".codex", "sessions/"} {
			if bytes.Contains(raw, []byte(leak)) {
				t.Fatalf("the catalog carries %q: %s", leak, raw)
			}
		}

		// R-CX-SRCH-1: titles only, case-insensitively; a preview's text
		// finds nothing.
		cat, _ = f.catalog(f.operator, "?search=ALPHA")
		if got := ids(hostOf(t, cat, a.ID).Rows); !slices.Equal(got, []string{s1}) || len(hostOf(t, cat, b.ID).Rows) != 0 {
			t.Fatalf("search ALPHA: %+v", cat)
		}
		cat, _ = f.catalog(f.operator, "?search="+url.QueryEscape("first question"))
		if len(hostOf(t, cat, a.ID).Rows) != 0 {
			t.Fatalf("a preview's text matched: %+v", cat)
		}
		// R-CX-CLI-5/6, Q-48: limit per host, cursors per host.
		var paged []string
		cursor := ""
		for range 5 {
			q := "?host=" + a.ID + "&limit=1"
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			cat, _ = f.catalog(f.operator, q)
			if len(cat.Hosts) != 1 || len(cat.Hosts[0].Rows) > 1 {
				t.Fatalf("limit 1 on host A: %+v", cat)
			}
			paged = append(paged, ids(cat.Hosts[0].Rows)...)
			if cursor = cat.Hosts[0].NextCursor; cursor == "" {
				break
			}
		}
		if slices.Sort(paged); !slices.Equal(paged, sorted(s1, s2, s3)) {
			t.Fatalf("paged %v", paged)
		}
		for _, c := range []struct {
			q, code string
			status  int
		}{
			{"?cursor=abc", "cursor_needs_host", 400},
			{"?limit=0", "bad_limit", 400},
			{"?limit=101", "bad_limit", 400},
			{"?limit=x", "bad_limit", 400},
			{"?archived=true", "bad_query", 400},
			{"?host=" + a.ID + "&cursor=forged", "bad_cursor", 400},
			{"?host=node_nope", "not_found", 404},
			{"?host=" + off.ID, "not_found", 404},
		} {
			expectCode(t, f.operator.Call(http.MethodGet, catalogPath+c.q, nil), c.status, c.code)
		}
		// The CLI, logged in nowhere, with --url and --token (R-CX-CLI-2).
		cliOut, code := f.cli("codex", "sessions", "--json", "--search", "alpha")
		var viaCLI apitypes.CodexCatalog
		if json.Unmarshal([]byte(cliOut), &viaCLI); code != 0 || len(viaCLI.Hosts) != 2 || !slices.Equal(ids(hostOf(t, viaCLI, a.ID).Rows), []string{s1}) {
			t.Fatalf("olivares codex sessions: exit %d %s", code, cliOut)
		}
		if _, code := f.cli("codex", "archive", s2, "--host", a.ID); code != 2 {
			t.Fatalf("archive without --confirm-no-other-runner: exit %d, want 2", code)
		}
		if _, code := f.cli("codex", "continue", "01a23643-0000-7000-8000-000000000000", "--host", a.ID); code != 1 {
			t.Fatalf("continue of an unknown thread: exit %d, want 1", code)
		}
		// R-CX-PERM-2/6: listing needs sessions:run:write.
		expectCode(t, f.viewer.Call(http.MethodGet, catalogPath, nil), 403, "permission_denied")

		// R-CX-TRN-1..3: one transcript page, newest first.
		var page apitypes.CodexTurnsPage
		f.operator.Must(http.StatusOK, http.MethodGet, threadPath(a.ID, s1, "turns"), nil, &page)
		var turns []struct {
			Status string `json:"status"`
			Items  []struct {
				Type    string `json:"type"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"items"`
		}
		json.Unmarshal(page.Turns, &turns)
		if len(turns) != 2 || turns[0].Items[0].Content[0].Text != "second question" || page.Host != a.ID || page.ThreadID != s1 {
			t.Fatalf("turns page %s", page.Turns)
		}
		expectCode(t, f.operator.Call(http.MethodGet, threadPath(a.ID, "01a23643-0000-7000-8000-000000000000", "turns"), nil), 404, "thread_not_found")
		expectCode(t, f.operator.Call(http.MethodGet, threadPath(a.ID, "not-a-thread", "turns"), nil), 400, "bad_thread_id")
		expectCode(t, f.viewer.Call(http.MethodGet, threadPath(a.ID, s1, "turns"), nil), 403, "permission_denied")

		// AT-CX-04/05: continue makes a pending, model-locked branch. Codex's
		// current model changes first, so the fork's pair differs from the
		// source's last recorded model.
		writeCodexConfig(t, a.codexHome, f.fake, "fake-new")
		expectCode(t, f.robot.Call(http.MethodPost, threadPath(a.ID, s1, "continue"), nil), 403, "agent_identity_refused")
		expectCode(t, f.operator.Call(http.MethodPost, threadPath(a.ID, s1, "continue"), []byte(`{"model":"gpt"}`)), 400, "bad_body")
		expectCode(t, f.operator.Call(http.MethodPost, threadPath(a.ID, "01a23643-0000-7000-8000-000000000000", "continue"), nil), 404, "thread_not_found")
		expectCode(t, f.operator.Call(http.MethodPost, threadPath(off.ID, s1, "continue"), nil), 404, "not_found")
		var run apitypes.Run
		f.operator.Must(http.StatusCreated, http.MethodPost, threadPath(a.ID, s1, "continue"), nil, &run)
		if bd := run.CodexBinding; bd == nil || bd.State != apitypes.CodexBranchPending || !bd.ModelLocked ||
			bd.SourceThreadID != s1 || bd.SourceHost != a.ID || run.Driver != "codex" || run.NodeID != a.ID {
			t.Fatalf("continue: %+v binding %+v", run, run.CodexBinding)
		}
		var again apitypes.Run
		f.operator.Must(http.StatusOK, http.MethodPost, threadPath(a.ID, s1, "continue"), nil, &again)
		if again.RunRef != run.RunRef {
			t.Fatalf("continue again made run %s, want %s (R-CX-CONT-2)", again.RunRef, run.RunRef)
		}
		var list apitypes.RunList
		f.operator.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs", nil, &list)
		if !slices.ContainsFunc(list.Items, func(r apitypes.Run) bool { return r.RunRef == run.RunRef && r.CodexBinding != nil }) {
			t.Fatalf("GET /runs does not list the supervised run: %+v", list.Items)
		}
		var branch apitypes.CodexBranch
		f.operator.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs/"+run.RunRef+"/codex-branch", nil, &branch)
		wantHist := []apitypes.CodexMessage{{Role: "user", Text: "first question"}, {Role: "assistant", Text: "pong: first question"},
			{Role: "user", Text: "second question"}, {Role: "assistant", Text: "pong: second question"}}
		if !slices.Equal(branch.History, wantHist) {
			t.Fatalf("visible history %+v, want %+v", branch.History, wantHist)
		}
		f.operator.AwaitRun(run.RunRef, wait, "the pending branch ready", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
		// AT-CX-15: no archive of a source with a pending branch.
		expectCode(t, f.operator.Call(http.MethodPost, threadPath(a.ID, s1, "archive"), confirm), 409, "branch_pending")

		// The first turn: fork (no override), canonical start with the
		// fork's pair and threadSource appServer, history injected, turn,
		// fork archived (R-CX-FT-1..4).
		s := f.viewer.Attach(run.RunRef, "from=0")
		f.operator.Must(http.StatusAccepted, http.MethodPost, "/v1/m/sessions/runs/"+run.RunRef+"/input", integration.Text("third question"), nil)
		outs := s.UntilOutput("pong: third question", wait)
		fork, forkModel, forkProvider := forkAnswer(t, outs, s1)
		if forkModel != "fake-new" || forkProvider != "fake" {
			t.Fatalf("fork pair %s/%s, want Codex's current fake-new/fake", forkModel, forkProvider)
		}
		committed := f.operator.AwaitRun(run.RunRef, wait, "committed", func(r apitypes.Run) bool {
			return r.CodexBinding != nil && r.CodexBinding.State == apitypes.CodexBranchCommitted && r.State == apitypes.StateIdle
		})
		canon := committed.CodexBinding.CanonicalThreadID
		if canon == "" || canon == s1 || committed.ConversationID != canon || committed.CodexBinding.Model != "fake-new" || committed.CodexBinding.ModelProvider != "fake" {
			t.Fatalf("committed %+v binding %+v", committed, committed.CodexBinding)
		}
		reqs := f.fake.ModelRequests()
		first := reqs[len(reqs)-1]
		said := first.Said()
		if first.Model != "fake-new" || !slices.Contains(said, "user: first question") || !slices.Contains(said, "assistant: pong: second question") || first.Prompt != "third question" {
			t.Fatalf("the first branch turn asked %s with %q", first.Model, said)
		}
		nat := startNative(t, f.bin, a.codexHome)
		c := nat.read(canon)
		if c["threadSource"] != "appServer" || c["model"] != "fake-new" || c["modelProvider"] != "fake" || c["forkedFromId"] != nil {
			t.Fatalf("canonical thread %v %v %v %v", c["threadSource"], c["model"], c["modelProvider"], c["forkedFromId"])
		}
		Await(t, "the fork archived", func() bool {
			p, _ := nat.read(fork)["path"].(string)
			return strings.Contains(p, "/archived_sessions/")
		})
		nat.close()
		// AT-CX-11, R-CX-SRC-1: the source was never resumed or written.
		if !bytes.Equal(source, rollout(t, a.codexHome, s1)) {
			t.Fatal("the source rollout changed")
		}

		// AT-CX-12/13: the source stays listed; the canonical branch is a
		// native thread of the home whose state is its run's; while it
		// runs it is active, cannot be archived, and continue opens the
		// existing run.
		g := fakemodel.NewGate()
		defer g.Release()
		f.fake.Push(fakemodel.Held(g))
		f.operator.Must(http.StatusAccepted, http.MethodPost, "/v1/m/sessions/runs/"+run.RunRef+"/input", integration.Text("hold"), nil)
		<-g.Arrived()
		cat, _ = f.catalog(f.operator, "?host="+a.ID)
		states := map[string]string{}
		for _, r := range cat.Hosts[0].Rows {
			states[r.ThreadID] = r.State
		}
		if states[s1] != apitypes.CodexStateNotLoaded || states[canon] != apitypes.CodexStateActive {
			t.Fatalf("states %v: want the source listed and the canonical %s active", states, canon)
		}
		expectCode(t, f.operator.Call(http.MethodPost, threadPath(a.ID, canon, "archive"), confirm), 409, "thread_active")
		f.operator.Must(http.StatusOK, http.MethodPost, threadPath(a.ID, canon, "continue"), nil, &again)
		if again.RunRef != run.RunRef {
			t.Fatalf("continue of the active canonical thread: %s, want the existing %s", again.RunRef, run.RunRef)
		}
		// Interrupt, like any run's (R-INT-1).
		f.operator.Must(http.StatusAccepted, http.MethodPost, "/v1/m/sessions/runs/"+run.RunRef+"/interrupt", nil, nil)
		closedWithin(t, g.Gone(), "the interrupt did not cancel the model request")
		f.operator.AwaitRun(run.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
		// R-CX-ARC-5: a live binding owner blocks the archive of its thread.
		expectCode(t, f.operator.Call(http.MethodPost, threadPath(a.ID, canon, "archive"), confirm), 409, "owner_active")

		// AT-CX-07, R-CX-MOD-2: a later resume sends no override; Codex
		// keeps the canonical thread's persisted pair although its current
		// model changed again.
		writeCodexConfig(t, a.codexHome, f.fake, "fake-newer")
		f.operator.Must(http.StatusOK, http.MethodPost, "/v1/m/sessions/runs/"+run.RunRef+"/stop", nil, nil)
		var res apitypes.Run
		f.operator.Must(http.StatusOK, http.MethodPost, "/v1/m/sessions/runs/"+run.RunRef+"/resume", nil, &res)
		if res.ConversationID != canon || res.Generation != 2 {
			t.Fatalf("resume: %+v", res)
		}
		s = f.viewer.Attach(run.RunRef, "")
		f.operator.Must(http.StatusAccepted, http.MethodPost, "/v1/m/sessions/runs/"+run.RunRef+"/input", integration.Text("fourth"), nil)
		s.UntilOutput("pong: fourth", wait)
		reqs = f.fake.ModelRequests()
		if last := reqs[len(reqs)-1]; last.Model != "fake-new" || !slices.Contains(last.Said(), "user: third question") {
			t.Fatalf("resumed turn asked %s with %q, want the persisted fake-new and the thread's history", last.Model, last.Said())
		}
		if !bytes.Equal(source, rollout(t, a.codexHome, s1)) {
			t.Fatal("the source rollout changed")
		}

		// AT-CX-14/17, R-CX-ARC-1/2: a stored row archives only with the
		// confirmation, and leaves the catalog once Codex accepted it; so
		// does a source whose branch is committed (AT-CX-15).
		expectCode(t, f.operator.Call(http.MethodPost, threadPath(a.ID, s3, "archive"), nil), 400, "confirmation_required")
		expectCode(t, f.operator.Call(http.MethodPost, threadPath(a.ID, s3, "archive"), map[string]bool{"confirmNoOtherRunner": false}), 400, "confirmation_required")
		expectCode(t, f.robot.Call(http.MethodPost, threadPath(a.ID, s3, "archive"), confirm), 403, "agent_identity_refused")
		var arch apitypes.CodexArchived
		f.operator.Must(http.StatusOK, http.MethodPost, threadPath(a.ID, s3, "archive"), confirm, &arch)
		f.operator.Must(http.StatusOK, http.MethodPost, threadPath(a.ID, s1, "archive"), confirm, &arch)
		if !arch.Archived || arch.Host != a.ID || arch.ThreadID != s1 {
			t.Fatalf("archive: %+v", arch)
		}
		cat, _ = f.catalog(f.operator, "?host="+a.ID)
		if got := ids(cat.Hosts[0].Rows); !slices.Equal(got, sorted(s2, canon)) {
			t.Fatalf("after archiving: rows %v, want %v", got, sorted(s2, canon))
		}
		expectCode(t, f.operator.Call(http.MethodPost, threadPath(a.ID, s3, "archive"), confirm), 409, "thread_archived")
		expectCode(t, f.operator.Call(http.MethodPost, threadPath(a.ID, s3, "continue"), nil), 409, "thread_archived")
		f.operator.Must(http.StatusOK, http.MethodPost, "/v1/m/sessions/runs/"+run.RunRef+"/stop", nil, nil)

		// Beyond the seed (R-CX-NODE-2 lifted by the lease): continue and
		// archive on the second node.
		var rb apitypes.Run
		f.operator.Must(http.StatusCreated, http.MethodPost, threadPath(b.ID, t1, "continue"), nil, &rb)
		if rb.NodeID != b.ID || rb.CodexBinding == nil || rb.CodexBinding.SourceHost != b.ID {
			t.Fatalf("continue on B: %+v", rb)
		}
		f.operator.AwaitRun(rb.RunRef, wait, "ready", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
		sb := f.viewer.Attach(rb.RunRef, "from=0")
		f.operator.Must(http.StatusAccepted, http.MethodPost, "/v1/m/sessions/runs/"+rb.RunRef+"/input", integration.Text("on b"), nil)
		sb.UntilOutput("pong: on b", wait)
		f.operator.AwaitRun(rb.RunRef, wait, "committed on B", func(r apitypes.Run) bool {
			return r.CodexBinding != nil && r.CodexBinding.State == apitypes.CodexBranchCommitted
		})
		f.operator.Must(http.StatusOK, http.MethodPost, threadPath(b.ID, t1, "archive"), confirm, &arch)
		if arch.Host != b.ID || !arch.Archived {
			t.Fatalf("archive on B: %+v", arch)
		}

		// AT-CX-03, R-CX-HOST-1/2: with node B down, A's rows stay and B is
		// a host result with an error and no rows, no thread marked offline.
		b.Kill()
		b.AwaitDisconnectedFrom(f.env, wait)
		cat, raw = f.catalog(f.operator, "")
		hb := hostOf(t, cat, b.ID)
		if hb.Error == nil || hb.Error.Code != "node_unreachable" || len(hb.Rows) != 0 {
			t.Fatalf("host B while down: %+v", hb)
		}
		if ha = hostOf(t, cat, a.ID); ha.Error != nil || len(ha.Rows) != 2 {
			t.Fatalf("host A while B is down: %+v", ha)
		}
		if bytes.Contains(raw, []byte("offline")) {
			t.Fatalf("a row was marked offline: %s", raw)
		}
		expectCode(t, f.operator.Call(http.MethodGet, threadPath(b.ID, t1, "turns"), nil), 503, "node_unreachable")
	})
}

// Await polls cond every few milliseconds until it holds, or fails after
// wait.
func Await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	integration.Await(t, wait, what, cond)
}

// TestCodexSupervisionNode is one node's limits and failures: 20-turn
// transcript pages and the 20 MiB refusal, the history bounds of a branch,
// ordinary codex runs staying in their profile homes, a branch whose
// process died staying retryable, and supervision disabled failing closed.
func TestCodexSupervisionNode(t *testing.T) {
	f := newCX(t, "yamux")
	a := f.node(true)
	work := t.TempDir()
	na := startNative(t, f.bin, a.codexHome)

	// R-CX-TRN-2/3: 21 turns read as a page of 20, newest first, then one;
	// the cursors go both ways.
	var prompts []string
	for i := range 21 {
		prompts = append(prompts, fmt.Sprintf("q%02d", i))
	}
	p := na.thread(work, "paged", prompts...)
	turnTexts := func(page apitypes.CodexTurnsPage) []string {
		var turns []struct {
			Items []struct {
				Type    string `json:"type"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"items"`
		}
		json.Unmarshal(page.Turns, &turns)
		var out []string
		for _, tr := range turns {
			out = append(out, tr.Items[0].Content[0].Text)
		}
		return out
	}
	var p1, p2, back apitypes.CodexTurnsPage
	f.operator.Must(http.StatusOK, http.MethodGet, threadPath(a.ID, p, "turns"), nil, &p1)
	if got := turnTexts(p1); len(got) != 20 || got[0] != "q20" || got[19] != "q01" || p1.NextCursor == "" {
		t.Fatalf("page 1: %v next %q", got, p1.NextCursor)
	}
	f.operator.Must(http.StatusOK, http.MethodGet, threadPath(a.ID, p, "turns")+"?cursor="+url.QueryEscape(p1.NextCursor), nil, &p2)
	if got := turnTexts(p2); !slices.Equal(got, []string{"q00"}) || p2.NextCursor != "" || p2.BackwardsCursor == "" {
		t.Fatalf("page 2: %v next %q back %q", got, p2.NextCursor, p2.BackwardsCursor)
	}
	f.operator.Must(http.StatusOK, http.MethodGet, threadPath(a.ID, p, "turns")+"?cursor="+url.QueryEscape(p2.BackwardsCursor), nil, &back)
	if got := turnTexts(back); len(got) == 0 || len(got) > 20 || got[len(got)-1] != "q00" || got[0] <= got[len(got)-1] {
		t.Fatalf("back from page 2: %v, want newer turns, newest first, down to the anchor", got)
	}
	expectCode(t, f.operator.Call(http.MethodGet, threadPath(a.ID, p, "turns")+"?cursor=forged", nil), 400, "bad_cursor")

	// R-CX-TRN-5/6: a page over 20 MiB (one real turn whose answer is
	// 21 MiB) is refused on the node with page_too_large; the same cursor
	// asks again with the same answer.
	z := na.thread(work, "huge", "small one")
	f.fake.Push(fakemodel.Text(strings.Repeat("Z", 21<<20)))
	na.turn(z, "big one")
	for range 2 {
		r := f.operator.Call(http.MethodGet, threadPath(a.ID, z, "turns"), nil)
		var big apitypes.CodexPageTooLarge
		json.Unmarshal(r.Body, &big)
		if r.Status != http.StatusUnprocessableEntity || big.Error == nil || big.Error.Code != "page_too_large" || len(r.Body) > 4096 {
			t.Fatalf("a 21 MiB page: %d %.300s", r.Status, r.Body)
		}
	}

	// AT-CX-10, R-CX-HIST-*: oldest, eight answers of 100 KiB; then a tool
	// call; newest, an image. The branch keeps the newest messages, each at
	// most 64 KiB and 512 KiB in all, the image as a placeholder, and no
	// tool call, tool output or image payload.
	h := na.thread(work, "history")
	for i := range 8 {
		f.fake.Push(fakemodel.Text(fmt.Sprintf("answer %d ", i) + strings.Repeat("y", 100<<10)))
		na.turn(h, fmt.Sprintf("ask %d", i))
	}
	f.fake.Push(fakemodel.Tool("exec_command", `{"cmd":"echo hi-from-tool"}`))
	na.turn(h, "run it")
	const png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	na.turnWith(h, textIn("look at this"), map[string]any{"type": "image", "url": png})
	na.close()
	var hr apitypes.Run
	f.operator.Must(http.StatusCreated, http.MethodPost, threadPath(a.ID, h, "continue"), nil, &hr)
	var br apitypes.CodexBranch
	f.operator.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs/"+hr.RunRef+"/codex-branch", nil, &br)
	total := 0
	for _, m := range br.History {
		total += len(m.Text)
		if len(m.Text) > 64<<10 || (m.Role != "user" && m.Role != "assistant") {
			t.Fatalf("message %s of %d bytes", m.Role, len(m.Text))
		}
	}
	n := len(br.History)
	if total > 512<<10 || n < 4 || n > 200 {
		t.Fatalf("history of %d messages, %d bytes", n, total)
	}
	if last := br.History[n-2:]; last[0] != (apitypes.CodexMessage{Role: "user", Text: "look at this\n[Image attachment]"}) || last[1].Role != "assistant" {
		t.Fatalf("newest messages %+v", last)
	}
	if tool := br.History[n-4:]; tool[0].Text != "run it" || tool[1].Text != "pong: run it" {
		t.Fatalf("the tool turn's visible messages %+v, want its question and answer only", tool[:2])
	}
	// Seven answers cut to 64 KiB and the small messages make 458,854
	// bytes; the eighth answer would pass 512 KiB, so the walk stops there.
	if n != 18 || br.History[0] != (apitypes.CodexMessage{Role: "user", Text: "ask 1"}) || len(br.History[1].Text) != 64<<10 {
		t.Fatalf("%d messages from %q: want 18 from ask 1, the oldest turn dropped by the 512 KiB bound", n, br.History[0].Text[:min(10, len(br.History[0].Text))])
	}
	all, _ := json.Marshal(br.History)
	for _, leak := range []string{"hi-from-tool", "echo", "base64", "iVBOR"} {
		if bytes.Contains(all, []byte(leak)) {
			t.Fatalf("the history carries %q", leak)
		}
	}

	// AT-CX-06: an ordinary codex run keeps its profile home; the branch's
	// threads live in the supervision home.
	var prof apitypes.Profile
	f.env.Client(f.env.AdminToken).Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{NodeID: a.ID, Tool: "codex",
		Name: "ordinary", Home: filepath.Join(t.TempDir(), "home"), Env: map[string]string{"FAKE_OPENAI_KEY": "test"}}, &prof)
	writeCodexConfig(t, filepath.Join(prof.Home, ".codex"), f.fake, "fake-model")
	var ord apitypes.Run
	f.operator.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/runs", apitypes.LaunchRequest{ProviderProfileRef: prof.Ref}, &ord)
	ord = f.operator.AwaitRun(ord.RunRef, wait, "the ordinary run", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle && r.ConversationID != "" })
	f.operator.Must(http.StatusAccepted, http.MethodPost, "/v1/m/sessions/runs/"+ord.RunRef+"/input", integration.Text("plain"), nil)
	so := f.viewer.Attach(ord.RunRef, "from=0")
	so.UntilOutput("pong: plain", wait)
	rollout(t, filepath.Join(prof.Home, ".codex"), ord.ConversationID)
	if m, _ := filepath.Glob(filepath.Join(a.codexHome, "sessions", "*", "*", "*", "*"+ord.ConversationID+".jsonl")); len(m) != 0 || ord.CodexBinding != nil {
		t.Fatalf("the ordinary run wrote in the supervision home: %v", m)
	}

	// R-CX-FT-7, AT-CX-08: the pending branch's process dies before its
	// first turn: input fails closed (409), resume starts it again as a
	// pending branch, and the first turn then commits in the supervision
	// home.
	hr = f.operator.AwaitRun(hr.RunRef, wait, "ready", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	killGroup(t, hr.PID)
	f.operator.AwaitRun(hr.RunRef, wait, "ended", func(r apitypes.Run) bool { return !apitypes.Live(r.State) })
	expectCode(t, f.operator.Call(http.MethodPost, "/v1/m/sessions/runs/"+hr.RunRef+"/input", integration.Text("lost")), 409, "not_live")
	var re apitypes.Run
	f.operator.Must(http.StatusOK, http.MethodPost, "/v1/m/sessions/runs/"+hr.RunRef+"/resume", nil, &re)
	if re.Generation != 2 || re.CodexBinding == nil || re.CodexBinding.State != apitypes.CodexBranchPending {
		t.Fatalf("relaunch of the pending branch: %+v %+v", re, re.CodexBinding)
	}
	f.operator.AwaitRun(hr.RunRef, wait, "ready again", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	sh := f.viewer.Attach(hr.RunRef, "")
	f.operator.Must(http.StatusAccepted, http.MethodPost, "/v1/m/sessions/runs/"+hr.RunRef+"/input", integration.Text("go on"), nil)
	sh.UntilOutput("pong: go on", wait)
	done := f.operator.AwaitRun(hr.RunRef, wait, "committed", func(r apitypes.Run) bool {
		return r.CodexBinding != nil && r.CodexBinding.State == apitypes.CodexBranchCommitted
	})
	rollout(t, a.codexHome, done.CodexBinding.CanonicalThreadID)
	reqs := f.fake.ModelRequests()
	if said := reqs[len(reqs)-1].Said(); !slices.Contains(said, "user: look at this\n[Image attachment]") {
		t.Fatalf("the first turn's request lacks the injected history: %q", said)
	}
	f.operator.Must(http.StatusOK, http.MethodPost, "/v1/m/sessions/runs/"+hr.RunRef+"/stop", nil, nil)

	// AT-CX-08, R-CX-FT-8, R-CX-CONN-7: with supervision disabled in the
	// node's config, the node advertises nothing, the catalog has no host,
	// and the supervised run refuses to start instead of running as an
	// ordinary codex run.
	cfgPath := filepath.Join(a.Dir, "agent.toml")
	raw, _ := os.ReadFile(cfgPath)
	os.WriteFile(cfgPath, bytes.Replace(raw, []byte("enabled = true"), []byte("enabled = false"), 1), 0o600)
	a.Kill()
	a.Start()
	a.AwaitConnected(wait)
	Await(t, "the capability withdrawn", func() bool {
		cat, _ := f.catalog(f.operator, "")
		return len(cat.Hosts) == 0
	})
	expectCode(t, f.operator.Call(http.MethodPost, "/v1/m/sessions/runs/"+hr.RunRef+"/resume", nil), 409, "codex_supervision_unavailable")
	if r := f.operator.Run(hr.RunRef); r.Generation != 3-1 || apitypes.Live(r.State) {
		t.Fatalf("the refused resume started something: %+v", r)
	}
	expectCode(t, f.operator.Call(http.MethodPost, threadPath(a.ID, h, "continue"), nil), 404, "not_found")
	expectCode(t, f.operator.Call(http.MethodGet, threadPath(a.ID, h, "turns"), nil), 404, "not_found")
}

// killGroup ends a run's process group as if its app-server crashed: the
// connection is lost (the agent started it; the test only takes its pid
// from the run row).
func killGroup(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		t.Fatal("no pid to kill")
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}
