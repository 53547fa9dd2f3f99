package journeys

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// requestsOf is GET /runs/{ref}/requests.
func (f *fixture) requestsOf(c *integration.Client, ref string) []apitypes.RunRequest {
	f.t.Helper()
	var l apitypes.RequestList
	c.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs/"+ref+"/requests", nil, &l)
	return l.Items
}

// awaitRequest waits until the run has a request matching cond.
func (f *fixture) awaitRequest(ref, what string, cond func(apitypes.RunRequest) bool) apitypes.RunRequest {
	f.t.Helper()
	var got apitypes.RunRequest
	f.operator.AwaitRun(ref, wait, what, func(apitypes.Run) bool {
		for _, r := range f.requestsOf(f.viewer, ref) {
			if cond(r) {
				got = r
				return true
			}
		}
		return false
	})
	return got
}

// untilRequestEvent reads the attach stream up to the next request event
// of name and decodes it.
func untilRequestEvent(t *testing.T, s *integration.Stream, name string) apitypes.RunRequest {
	t.Helper()
	ev, _ := s.Until(name, wait)
	var r apitypes.RunRequest
	if err := json.Unmarshal(ev.Data, &r); err != nil || ev.ID == "" {
		t.Fatalf("%s event %q (id %q): %v", name, ev.Data, ev.ID, err)
	}
	return r
}

// resumeAttach resumes the run and attaches after what it already output.
func (f *fixture) resumeAttach(ref string) *integration.Stream {
	f.t.Helper()
	var res apitypes.Run
	f.post(f.operator, http.StatusOK, ref, "resume", nil, &res)
	return f.viewer.Attach(ref, fmt.Sprintf("from=%d", res.RingLast+1))
}

// toolOutputs are the tool results the fake model received, in order.
func toolOutputs(fake *fakemodel.Anthropic) []string {
	var out []string
	reqs := fake.ModelRequests()
	if len(reqs) == 0 {
		return nil
	}
	for _, m := range reqs[len(reqs)-1].History {
		out = append(out, m.Outputs...)
	}
	return out
}

func bash(cmd string) fakemodel.Reply {
	b, _ := json.Marshal(map[string]string{"command": cmd, "description": "probe"})
	return fakemodel.Tool("Bash", string(b))
}

// People in the loop with the real Claude Code (2.1.328, launched with
// --permission-prompt-tool stdio) through the coordinator: the model asks to
// run a command; the request is on the API, counted on the run and streamed
// on attach; allow runs it and the model gets its output; two people
// answer at once and one wins; deny leaves no file and the model gets the
// denial; the profile's rules allow git status and deny rm without a
// person; the ask timeout denies; an agent restart expires a pending
// request (R-REQ-1..13).
func TestRealClaudeRequests(t *testing.T) {
	bin := realBin(t, "claude")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	f := setup(t, "yamux", integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	var p apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{
		NodeID: f.agent.ID, Tool: "claude", Name: "claude-asks", Home: f.env.ProfileHome(),
		Env: map[string]string{"ANTHROPIC_BASE_URL": fake.URL(), "ANTHROPIC_API_KEY": "test",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0"},
		ApprovalRules: []apitypes.ApprovalRule{
			{Tool: "Bash", Pattern: "git status", Action: apitypes.ApprovalsAllow},
			{Tool: "Bash", Pattern: "touch ruled-*.txt", Action: apitypes.ApprovalsAllow},
			{Tool: "Bash", Pattern: "rm *", Action: apitypes.ApprovalsDeny},
		}}, &p)
	if p.Approvals != apitypes.ApprovalsAsk || p.AskTimeout != "10m0s" {
		t.Fatalf("a new profile's policy: approvals %q ask_timeout %q, want ask and 10m0s (R-REQ-10)", p.Approvals, p.AskTimeout)
	}
	r := f.launch(p)
	s := f.viewer.Attach(r.RunRef, "from=0")

	// Allow: the file is written and the model gets the command's output.
	fake.Push(bash("echo allowed > probe.txt && echo wrote-probe"), fakemodel.Text("done-allow"))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("write the probe"), nil)
	asked := untilRequestEvent(t, s, apitypes.SSERequest)
	if asked.Kind != apitypes.RequestCommand || asked.Tool != "Bash" || asked.Detail.Command != "echo allowed > probe.txt && echo wrote-probe" ||
		asked.Detail.Cwd == "" || asked.State != apitypes.RequestPending || asked.ExpiresAt == nil {
		t.Fatalf("the request on attach: %+v", asked)
	}
	listed := f.requestsOf(f.viewer, r.RunRef)
	if len(listed) != 1 || listed[0].ID != asked.ID {
		t.Fatalf("GET requests: %+v, want %s", listed, asked.ID)
	}
	if got := f.operator.Run(r.RunRef); got.PendingRequests != 1 {
		t.Fatalf("pending_requests %d, want 1 (R-REQ-3)", got.PendingRequests)
	}
	var list apitypes.RunList
	f.viewer.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs", nil, &list)
	if len(list.Items) != 1 || list.Items[0].PendingRequests != 1 {
		t.Fatalf("GET /runs: %+v, want the run with one pending request", list.Items)
	}
	// A viewer may read but not answer; an option the request does not
	// offer is 400.
	f.viewer.Must(http.StatusForbidden, http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/requests/"+asked.ID, apitypes.RequestAnswer{Decision: "allow"}, nil)
	f.operator.Must(http.StatusBadRequest, http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/requests/"+asked.ID, apitypes.RequestAnswer{Decision: "allow", OptionID: "proceed_always"}, nil)
	var settled apitypes.RunRequest
	f.operator.Must(http.StatusOK, http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/requests/"+asked.ID, apitypes.RequestAnswer{Decision: "allow"}, &settled)
	if settled.State != apitypes.RequestSettled || settled.Decision != apitypes.DecisionAllow || settled.By == "" || settled.OptionID != cliruntime.OptionAllowOnce {
		t.Fatalf("the answer: %+v", settled)
	}
	if ev := untilRequestEvent(t, s, apitypes.SSERequestSettled); ev.ID != asked.ID || ev.By != settled.By {
		t.Fatalf("the settlement on attach: %+v", ev)
	}
	s.UntilOutput(`"result":"done-allow"`, wait)
	if b, err := os.ReadFile(filepath.Join(f.wsDir, "probe.txt")); err != nil || string(b) != "allowed\n" {
		t.Fatalf("probe.txt: %q %v, want the allowed command's file", b, err)
	}
	if outs := toolOutputs(fake); len(outs) == 0 || !strings.Contains(outs[len(outs)-1], "wrote-probe") {
		t.Fatalf("the model got %q, want the command's output", outs)
	}
	audit := f.admin.Must(http.StatusOK, http.MethodGet, "/v1/audit", nil, nil)
	if !strings.Contains(string(audit.Body), `"sessions.run.request.answered"`) || strings.Contains(string(audit.Body), "probe.txt") {
		t.Fatalf("audit: %s, want sessions.run.request.answered without the command (R-REQ-13)", audit.Body)
	}

	// Two people answer at once: one wins, the other is told who.
	fake.Push(bash("echo second > probe2.txt"), fakemodel.Text("done-race"))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("again"), nil)
	race := untilRequestEvent(t, s, apitypes.SSERequest)
	var wg sync.WaitGroup
	resps := make([]integration.Response, 2)
	for i, c := range []*integration.Client{f.operator, f.admin} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i] = c.Call(http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/requests/"+race.ID, apitypes.RequestAnswer{Decision: "allow"})
		}()
	}
	wg.Wait()
	won, lost := resps[0], resps[1]
	if won.Status != http.StatusOK {
		won, lost = lost, won
	}
	var winner apitypes.RunRequest
	json.Unmarshal(won.Body, &winner)
	if won.Status != http.StatusOK || lost.Status != http.StatusConflict || !strings.Contains(string(lost.Body), `"request_settled"`) ||
		!strings.Contains(string(lost.Body), winner.ByName) {
		t.Fatalf("two answers: %d %s and %d %s, want one 200 and one 409 request_settled naming the winner", won.Status, won.Body, lost.Status, lost.Body)
	}
	s.UntilOutput(`"result":"done-race"`, wait)

	// Deny: no file, and the model gets the denial.
	fake.Push(bash("echo denied > probe3.txt"), fakemodel.Text("done-deny"))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("once more"), nil)
	denied := untilRequestEvent(t, s, apitypes.SSERequest)
	f.operator.Must(http.StatusOK, http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/requests/"+denied.ID, apitypes.RequestAnswer{Decision: "deny"}, nil)
	s.UntilOutput(`"result":"done-deny"`, wait)
	if _, err := os.Stat(filepath.Join(f.wsDir, "probe3.txt")); err == nil {
		t.Fatal("the denied command ran")
	}
	if outs := toolOutputs(fake); len(outs) == 0 || !strings.Contains(outs[len(outs)-1], "denied") {
		t.Fatalf("the model got %q, want the denial", outs)
	}
	f.post(f.operator, http.StatusConflict, r.RunRef, "requests/"+denied.ID, apitypes.RequestAnswer{Decision: "allow"}, nil)

	// A question the model asks: answered in the person's words.
	fake.Push(fakemodel.Tool("AskUserQuestion", `{"questions":[{"question":"Which colour?","header":"Colour","options":[{"label":"red","description":"warm"},{"label":"blue","description":"cold"}],"multiSelect":false}]}`),
		fakemodel.Text("done-question"))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("ask me"), nil)
	q := untilRequestEvent(t, s, apitypes.SSERequest)
	if q.Kind != apitypes.RequestQuestion || q.Detail.Question != "Which colour?" || !q.Detail.Text {
		t.Fatalf("the question: %+v", q)
	}
	f.post(f.operator, http.StatusOK, r.RunRef, "requests/"+q.ID, apitypes.RequestAnswer{Decision: "answer", Text: "green, in fact"}, nil)
	s.UntilOutput(`"result":"done-question"`, wait)
	if outs := toolOutputs(fake); len(outs) == 0 || !strings.Contains(outs[len(outs)-1], "green, in fact") {
		t.Fatalf("the model got %q, want the person's answer", outs)
	}

	// The profile's rules, on the agent: git status runs (Claude Code
	// itself counts it read-only and does not ask: measured on 2.1.328),
	// touch ruled-1.txt is allowed and rm denied by a rule, recorded by
	// policy; nobody was asked.
	if out, err := exec.Command("git", "-C", f.wsDir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	fake.Push(bash("git status"), fakemodel.Text("done-status"))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("status"), nil)
	s.UntilOutput(`"result":"done-status"`, wait)
	if outs := toolOutputs(fake); len(outs) == 0 || !strings.Contains(outs[len(outs)-1], "On branch") {
		t.Fatalf("the model got %q, want git status's output", outs)
	}
	fake.Push(bash("touch ruled-1.txt"), bash("rm -f probe.txt"), fakemodel.Text("done-rules"))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("tidy up"), nil)
	s.UntilOutput(`"result":"done-rules"`, wait)
	byCmd := map[string]apitypes.RunRequest{}
	for _, q := range f.requestsOf(f.viewer, r.RunRef) {
		byCmd[q.Detail.Command] = q
	}
	if q := byCmd["touch ruled-1.txt"]; q.By != apitypes.ByPolicy || q.Decision != apitypes.DecisionAllow {
		t.Fatalf("touch ruled-1.txt: %+v, want allowed by policy", q)
	}
	if _, err := os.Stat(filepath.Join(f.wsDir, "ruled-1.txt")); err != nil {
		t.Fatalf("the command a rule allowed did not run: %v", err)
	}
	if q := byCmd["rm -f probe.txt"]; q.By != apitypes.ByPolicy || q.Decision != apitypes.DecisionDeny {
		t.Fatalf("rm: %+v, want denied by policy", q)
	}
	if _, err := os.Stat(filepath.Join(f.wsDir, "probe.txt")); err != nil {
		t.Fatal("the rm the policy denied ran")
	}

	// The ask timeout denies, and the tool is told why.
	f.admin.Must(http.StatusOK, http.MethodPatch, "/v1/m/sessions/profiles/"+p.Ref, map[string]any{"ask_timeout": "1s"}, nil)
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
	s = f.resumeAttach(r.RunRef)
	fake.Push(bash("echo late > late.txt"), fakemodel.Text("done-late"))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("late"), nil)
	late := untilRequestEvent(t, s, apitypes.SSERequest)
	timedOut := untilRequestEvent(t, s, apitypes.SSERequestSettled)
	if timedOut.ID != late.ID || timedOut.By != apitypes.ByTimeout || timedOut.Decision != apitypes.DecisionDeny {
		t.Fatalf("after the ask timeout: %+v, want %s denied by timeout", timedOut, late.ID)
	}
	s.UntilOutput(`"result":"done-late"`, wait)
	if outs := toolOutputs(fake); len(outs) == 0 || !strings.Contains(outs[len(outs)-1], "nobody answered") {
		t.Fatalf("the model got %q, want the timeout's reason", outs)
	}

	// An agent restart while a request waits: expired, and the run says
	// why.
	f.admin.Must(http.StatusOK, http.MethodPatch, "/v1/m/sessions/profiles/"+p.Ref, map[string]any{"ask_timeout": "10m"}, nil)
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
	s = f.resumeAttach(r.RunRef)
	fake.Push(bash("echo gone > gone.txt"))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("then crash"), nil)
	pending := untilRequestEvent(t, s, apitypes.SSERequest)
	f.operator.AwaitRun(r.RunRef, wait, "the request committed", func(apitypes.Run) bool {
		for _, e := range f.operator.Events(r.RunRef) {
			if e.Kind == "request_asked" && strings.Contains(string(e.Detail), pending.ID) {
				return true
			}
		}
		return false
	})
	f.agent.Kill()
	f.agent.Start()
	f.agent.AwaitConnected(wait)
	gone := f.awaitRequest(r.RunRef, "the request expired", func(q apitypes.RunRequest) bool { return q.ID == pending.ID && q.State == apitypes.RequestExpired })
	if !strings.Contains(gone.Reason, "agent restarted") {
		t.Fatalf("expired request %+v, want the reason", gone)
	}
	run := f.operator.AwaitRun(r.RunRef, wait, "failed, no pending request", func(r apitypes.Run) bool {
		return r.State == apitypes.StateFailed && r.PendingRequests == 0
	})
	if run.Reason != apitypes.ReasonProcessLost {
		t.Fatalf("after the restart: %+v", run)
	}
	resp := f.operator.Call(http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/requests/"+pending.ID, apitypes.RequestAnswer{Decision: "allow"})
	if resp.Status != http.StatusConflict || !strings.Contains(string(resp.Body), "request_expired") {
		t.Fatalf("answering the expired request: %d %s, want 409 request_expired", resp.Status, resp.Body)
	}
}

// escalated is a Codex exec_command that asks to leave the read-only
// sandbox: with approval_policy on-request Codex 0.169.0 sends
// item/commandExecution/requestApproval for it (measured).
func escalated(cmd string) fakemodel.Reply {
	b, _ := json.Marshal(map[string]string{"cmd": cmd, "sandbox_permissions": "require_escalated", "justification": "write the probe"})
	return fakemodel.Tool("exec_command", string(b))
}

// patch is a Codex apply_patch through exec_command, which Codex asks
// about as item/fileChange/requestApproval (measured on 0.169.0).
func patch(body string) fakemodel.Reply {
	b, _ := json.Marshal(map[string]string{"cmd": "apply_patch <<'EOF'\n*** Begin Patch\n" + body + "*** End Patch\nEOF\n"})
	return fakemodel.Tool("exec_command", string(b))
}

// codexOutputs are the function call outputs the fake model received in
// its last request.
func codexOutputs(fake *fakemodel.OpenAI) []string {
	var out []string
	reqs := fake.ModelRequests()
	if len(reqs) == 0 {
		return nil
	}
	for _, m := range reqs[len(reqs)-1].History {
		out = append(out, m.Outputs...)
	}
	return out
}

// People in the loop with the real Codex (0.169.0, approval_policy
// on-request, read-only sandbox) through the coordinator: Codex's command
// approval is a request (the command as the model wrote it, its cwd and
// reason) with Codex's own decisions; allow runs it and the model gets its
// output; a file change shows its files and diff and deny leaves no file;
// a rule denies rm without a person; the ask timeout denies (R-REQ-6).
func TestRealCodexRequests(t *testing.T) {
	bin := realBin(t, "codex")
	fake := fakemodel.NewOpenAI()
	defer fake.Close()
	f := setup(t, "yamux", integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	p := f.realCodexProfileWith(t, fake, apitypes.ProfileCreate{Name: "codex-asks",
		ApprovalRules: []apitypes.ApprovalRule{{Kind: apitypes.RequestCommand, Pattern: "rm *", Action: apitypes.ApprovalsDeny}}}, "on-request")
	r := f.launch(p)
	f.operator.AwaitRun(r.RunRef, wait, "the handshake", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	s := f.viewer.Attach(r.RunRef, "from=0")

	// A command: allowed, run, its output to the model.
	fake.Push(escalated("echo allowed > probe.txt && echo wrote-probe"), fakemodel.Text("done-allow"))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("write the probe"), nil)
	asked := untilRequestEvent(t, s, apitypes.SSERequest)
	if asked.Kind != apitypes.RequestCommand || asked.Detail.Command != "echo allowed > probe.txt && echo wrote-probe" || asked.Detail.Cwd == "" ||
		asked.Detail.Question != "write the probe" {
		t.Fatalf("the command request: %+v", asked)
	}
	var ids []string
	for _, o := range asked.Options {
		ids = append(ids, o.ID+":"+o.Decision)
	}
	if !slices.Contains(ids, "accept:allow") || !slices.Contains(ids, "decline:deny") {
		t.Fatalf("options %v, want Codex's accept and decline", ids)
	}
	f.post(f.operator, http.StatusOK, r.RunRef, "requests/"+asked.ID, apitypes.RequestAnswer{Decision: "allow"}, nil)
	s.UntilOutput("done-allow", wait)
	if b, err := os.ReadFile(filepath.Join(f.wsDir, "probe.txt")); err != nil || string(b) != "allowed\n" {
		t.Fatalf("probe.txt: %q %v", b, err)
	}
	if outs := codexOutputs(fake); len(outs) == 0 || !strings.Contains(strings.Join(outs, "|"), "wrote-probe") {
		t.Fatalf("the model got %q, want the command's output", outs)
	}

	// A file change: its files and diff; denied, no file, the model told.
	fake.Push(patch("*** Add File: added.txt\n+hello\n"), fakemodel.Text("done-patch"))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("add a file"), nil)
	change := untilRequestEvent(t, s, apitypes.SSERequest)
	if change.Kind != apitypes.RequestFileChange || len(change.Detail.Files) != 1 || !strings.HasSuffix(change.Detail.Files[0], "added.txt") ||
		!strings.Contains(change.Detail.Diff, "hello") {
		t.Fatalf("the file-change request: %+v", change)
	}
	f.post(f.operator, http.StatusOK, r.RunRef, "requests/"+change.ID, apitypes.RequestAnswer{Decision: "deny"}, nil)
	s.UntilOutput("done-patch", wait)
	if _, err := os.Stat(filepath.Join(f.wsDir, "added.txt")); err == nil {
		t.Fatal("the denied patch was applied")
	}
	if outs := codexOutputs(fake); !strings.Contains(strings.Join(outs, "|"), "rejected") {
		t.Fatalf("the model got %q, want the rejection", outs)
	}

	// A rule denies rm on the agent; nobody is asked.
	fake.Push(escalated("rm -f probe.txt"), fakemodel.Text("done-rm"))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("remove it"), nil)
	s.UntilOutput("done-rm", wait)
	if _, err := os.Stat(filepath.Join(f.wsDir, "probe.txt")); err != nil {
		t.Fatal("the rm a rule denied ran")
	}
	var rm apitypes.RunRequest
	for _, q := range f.requestsOf(f.viewer, r.RunRef) {
		if q.Detail.Command == "rm -f probe.txt" {
			rm = q
		}
	}
	if rm.By != apitypes.ByPolicy || rm.Decision != apitypes.DecisionDeny {
		t.Fatalf("rm: %+v, want denied by policy", rm)
	}

	// The ask timeout denies.
	f.admin.Must(http.StatusOK, http.MethodPatch, "/v1/m/sessions/profiles/"+p.Ref, map[string]any{"ask_timeout": "1s"}, nil)
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
	s = f.resumeAttach(r.RunRef)
	fake.Push(escalated("echo late > late.txt"), fakemodel.Text("done-late"))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("late"), nil)
	late := untilRequestEvent(t, s, apitypes.SSERequest)
	if got := untilRequestEvent(t, s, apitypes.SSERequestSettled); got.ID != late.ID || got.By != apitypes.ByTimeout {
		t.Fatalf("after the ask timeout: %+v", got)
	}
	s.UntilOutput("done-late", wait)
	if _, err := os.Stat(filepath.Join(f.wsDir, "late.txt")); err == nil {
		t.Fatal("the command nobody answered ran")
	}
}
