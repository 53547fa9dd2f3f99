package journeys

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// oauthClaude creates a Claude Code profile under subscription auth (whose
// 429s carry a reset, real-clis.md §1.10) with its own token, so that the
// fake tells the accounts apart by the Authorization header.
func (f *fixture) oauthClaude(fake *fakemodel.Anthropic, name, token string, pc apitypes.ProfileCreate) apitypes.Profile {
	f.t.Helper()
	pc.NodeID, pc.Tool, pc.Name, pc.Home = f.agent.ID, "claude", name, f.env.ProfileHome()
	pc.Env = map[string]string{
		"ANTHROPIC_BASE_URL": fake.URL(), "CLAUDE_CODE_OAUTH_TOKEN": token,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0",
	}
	var p apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", pc, &p)
	return p
}

// onLimitLines is the run's on_limit history as outcome[:step][:code].
func onLimitLines(r apitypes.Run) []string {
	var out []string
	for _, e := range r.OnLimit {
		s := e.Outcome
		if e.Step != "" {
			s += ":" + e.Step
		}
		if e.Code != "" {
			s += ":" + e.Code
		}
		out = append(out, s)
	}
	return out
}

// auditCount counts the run's audit rows of event.
func auditCount(c *integration.Client, ref, event string) int {
	var l apitypes.AuditList
	c.Must(http.StatusOK, http.MethodGet, "/v1/audit?run_ref="+ref+"&event="+event, nil, &l)
	return len(l.Items)
}

// limitRun launches a run on p, has it remember a word, then makes its
// next turn meet a usage limit resetting in an hour; it returns the run as
// limited and the fake's request count before the limited turn.
func (f *fixture) limitRun(fake *fakemodel.Anthropic, p apitypes.Profile) (apitypes.Run, int) {
	f.t.Helper()
	r := f.launch(p)
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("remember the word otter"), nil)
	f.operator.AwaitRun(r.RunRef, wait, "the first turn", func(r apitypes.Run) bool {
		return r.State == apitypes.StateIdle && r.ConversationID != "" && r.Usage != nil
	})
	n := len(fake.ModelRequests())
	fake.Push(fakemodel.AnthropicUsageLimit(time.Now().Add(time.Hour).Truncate(time.Second)))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("keep working"), nil)
	return r, n
}

// R-ONL-1..6 with the real Claude Code on both stores, and with two
// coordinator replicas scanning: account A meets its usage limit; A's plan
// is [move:claude-c, move:claude-b]; claude-c is inactive, so that step is
// skipped with the move's own refusal (profile_inactive), and the run
// moves to claude-b, resumes its exact conversation there and is sent
// "continue": the fake sees B's token, the earlier history and the
// message, once.
func TestRealOnLimitMoveClaude(t *testing.T) {
	for _, tc := range []struct {
		name             string
		postgres, second bool
	}{{"bolt", false, false}, {"postgres", true, false}, {"replicas", true, true}} {
		t.Run(tc.name, func(t *testing.T) { testOnLimitMove(t, tc.postgres, tc.second) })
	}
}

func testOnLimitMove(t *testing.T, postgres, replicas bool) {
	bin := realBin(t, "claude")
	eo := continueEnv()
	if postgres {
		eo.Postgres = pgtest.NewDatabase(t)
	}
	f := setupEnv(t, "yamux", eo, integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	if replicas {
		f.env.StartReplica()
	}
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	off := false
	b := f.oauthClaude(fake, "claude-b", "sk-ant-oat01-fake-b", apitypes.ProfileCreate{})
	f.oauthClaude(fake, "claude-c", "sk-ant-oat01-fake-c", apitypes.ProfileCreate{Active: &off})
	a := f.oauthClaude(fake, "claude-a", "sk-ant-oat01-fake-a", apitypes.ProfileCreate{OnLimit: []string{"move:claude-c", "move:" + b.Ref}})
	if got := fmt.Sprint(a.OnLimit); got != "[move:claude-c move:claude-b]" {
		t.Fatalf("on_limit %s: want the names", got)
	}

	r, n := f.limitRun(fake, a)
	// A stop, a move, a resume (Claude Code starting) and a turn: twice
	// the usual deadline on a loaded machine.
	done := f.operator.AwaitRun(r.RunRef, 2*wait, "moved to claude-b and continued", func(r apitypes.Run) bool {
		return r.ProviderProfileRef == b.Ref && r.Limit == nil && r.State == apitypes.StateIdle && r.ScheduledContinueAt == nil &&
			len(fake.ModelRequests()) >= n+2
	})
	if got, want := fmt.Sprint(onLimitLines(done)), "[limited skipped:move:claude-c:profile_inactive moved:move:claude-b]"; got != want {
		t.Fatalf("on_limit %s, want %s", got, want)
	}
	if e := done.OnLimit[0]; e.ProfileName != "claude-a" || e.ResetsAt == nil || e.By != "policy" {
		t.Fatalf("limited entry %+v", e)
	}
	if e := done.OnLimit[1]; e.Reason == "" {
		t.Fatalf("the skipped step says no reason: %+v", e)
	}
	got := awaitRequest(t, fake.Await, fakemodel.MessagesPath, n+2)
	if got.Prompt != "continue" || got.Header.Get("Authorization") != "Bearer sk-ant-oat01-fake-b" {
		t.Fatalf("the continue: prompt %q auth %q, want \"continue\" on account B", got.Prompt, got.Header.Get("Authorization"))
	}
	if !slices.ContainsFunc(got.Said(), func(s string) bool { return strings.Contains(s, "otter") }) {
		t.Fatalf("the continue's request holds no earlier turn: %q", got.Said())
	}
	if done.ConversationID != r.ConversationID && r.ConversationID != "" {
		t.Fatalf("conversation %q, want %q kept", done.ConversationID, r.ConversationID)
	}
	// Once, however many replicas scan.
	f.operator.AwaitRun(r.RunRef, wait, "the audit", func(apitypes.Run) bool {
		return auditCount(f.admin, r.RunRef, apitypes.AuditRunContinued) == 1
	})
	if c := auditCount(f.admin, r.RunRef, apitypes.AuditRunOnLimit); c != 3 {
		t.Fatalf("%d sessions.run.on_limit rows, want 3", c)
	}
	if got := len(fake.ModelRequests()); got != n+2 {
		t.Fatalf("%d model requests, want %d: the plan fired twice", got, n+2)
	}
	// session show renders it.
	out, code := f.cli("session", "show", r.RunRef)
	if code != 0 || !strings.Contains(out, "limited on claude-a") || !strings.Contains(out, "moved to claude-b") ||
		!strings.Contains(out, "skipped move:claude-c") {
		t.Fatalf("session show (%d):\n%s", code, out)
	}
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
}

// R-ONL-3 with a handoff: A's plan is [handoff:codex-real]; at the limit
// the Claude Code run is handed off to the real Codex with the handoff
// summary, and the source's on_limit names the new run.
func TestRealOnLimitHandoffToCodex(t *testing.T) {
	claude, codex := realBin(t, "claude"), realBin(t, "codex")
	f := setupEnv(t, "yamux", continueEnv(), integration.ProcOptions{Path: claude + ":" + codex + ":" + cliruntime.DefaultPath})
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	oai := fakemodel.NewOpenAI()
	defer oai.Close()
	cx := f.realCodexProfile(t, oai)
	a := f.oauthClaude(fake, "claude-a", "sk-ant-oat01-fake-a", apitypes.ProfileCreate{OnLimit: []string{"handoff:codex-real"}})

	r, _ := f.limitRun(fake, a)
	src := f.operator.AwaitRun(r.RunRef, wait, "handed off", func(r apitypes.Run) bool {
		return slices.ContainsFunc(r.OnLimit, func(e apitypes.OnLimitEntry) bool { return e.Outcome == apitypes.OnLimitHandedOff })
	})
	e := src.OnLimit[len(src.OnLimit)-1]
	if e.NewRunRef == "" || e.ToRef != cx.Ref {
		t.Fatalf("handoff entry %+v", e)
	}
	var nr apitypes.Run
	f.operator.Must(http.StatusOK, http.MethodGet, runURL(e.NewRunRef), nil, &nr)
	if nr.HandoffOf != r.RunRef || nr.ProviderProfileRef != cx.Ref {
		t.Fatalf("new run %+v", nr)
	}
	first := awaitRequest(t, oai.Await, fakemodel.ResponsesPath, 1)
	if !strings.Contains(strings.Join(first.Said(), "\n"), "otter") {
		t.Fatalf("codex's first turn holds no summary of the earlier work: %q", first.Said())
	}
	f.post(f.operator, http.StatusOK, nr.RunRef, "stop", nil, nil)
}

// R-ONL-1: a plan is checked when it is set: an unknown step, a profile
// that does not exist, the profile itself, a move to another tool or of a
// tool that does not move, each 422 with its code; PATCH sets and clears
// it without the node, audited with the field name.
func TestOnLimitValidation(t *testing.T) {
	f := setup(t, "yamux", integration.ProcOptions{})
	create := func(name, tool string, plan ...string) integration.Response {
		return f.admin.Call(http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{
			NodeID: f.agent.ID, Tool: tool, Name: name, Home: f.env.ProfileHome(), OnLimit: plan})
	}
	var cx, b apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "codex", Name: "codex-b", Home: f.env.ProfileHome()}, &cx)
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "claude", Name: "claude-b", Home: f.env.ProfileHome()}, &b)
	for _, tc := range []struct {
		tool, code string
		plan       []string
	}{
		{"claude", "bad_on_limit", []string{"rotate:claude-b"}},
		{"claude", "bad_on_limit", []string{"continue_at_reset", "move:claude-b"}},
		{"claude", "on_limit_profile_unknown", []string{"move:nobody"}},
		{"claude", "on_limit_profile_self", []string{"move:claude-new"}},
		{"claude", "on_limit_profile_other_tool", []string{"move:codex-b"}},
		{"codex", "on_limit_move_unsupported", []string{"move:claude-b"}},
	} {
		got := create("claude-new", tc.tool, tc.plan...)
		if got.Status != http.StatusUnprocessableEntity || !strings.Contains(string(got.Body), `"`+tc.code+`"`) {
			t.Fatalf("plan %v: %d %s, want 422 %s", tc.plan, got.Status, got.Body, tc.code)
		}
	}
	var p apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "claude", Name: "claude-a",
		Home: f.env.ProfileHome(), OnLimit: []string{"move:" + b.Ref, "handoff:codex-b", "continue_at_reset"}}, &p)
	if got := fmt.Sprint(p.OnLimit); got != "[move:claude-b handoff:codex-b continue_at_reset]" || p.OnLimitSetBy == nil {
		t.Fatalf("created with %s by %v", got, p.OnLimitSetBy)
	}
	// The node can be away: the plan is the coordinator's.
	f.agent.Terminate()
	f.agent.AwaitDisconnectedFrom(f.env, wait)
	plan := []string{"continue_at_reset"}
	f.admin.Must(http.StatusOK, http.MethodPatch, "/v1/m/sessions/profiles/"+p.Ref, apitypes.ProfileUpdate{OnLimit: &plan}, &p)
	if fmt.Sprint(p.OnLimit) != "[continue_at_reset]" {
		t.Fatalf("updated: %v", p.OnLimit)
	}
	bad := []string{"handoff:nobody"}
	if got := f.admin.Call(http.MethodPatch, "/v1/m/sessions/profiles/"+p.Ref, apitypes.ProfileUpdate{OnLimit: &bad}); got.Status != http.StatusUnprocessableEntity {
		t.Fatalf("bad update: %d %s", got.Status, got.Body)
	}
	none := []string{}
	var cleared apitypes.Profile
	f.admin.Must(http.StatusOK, http.MethodPatch, "/v1/m/sessions/profiles/"+p.Ref, apitypes.ProfileUpdate{OnLimit: &none}, &cleared)
	if cleared.OnLimit != nil || cleared.OnLimitSetBy != nil || cleared.Ref != p.Ref {
		t.Fatalf("cleared: %+v", cleared)
	}
}
