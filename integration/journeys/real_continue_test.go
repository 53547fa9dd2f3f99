package journeys

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/config"
)

// continueEnv is a coordinator whose continues wake at once (a jitter of
// 100 ms, a 1 s backoff, a 100 ms scan), so a reset 3 s ahead is met in
// real time.
func continueEnv() integration.Options {
	return integration.Options{Configure: func(c *coordd.Config) {
		c.API.ContinueJitter = config.Duration{Duration: 100 * time.Millisecond}
		c.API.ContinueBackoff = config.Duration{Duration: time.Second}
		c.API.ContinuePoll = config.Duration{Duration: 100 * time.Millisecond}
	}}
}

// continueAudit lists the run's continue audit rows as event:attempt.
func continueAudit(c *integration.Client, ref string) []string {
	var l apitypes.AuditList
	c.Must(http.StatusOK, http.MethodGet, "/v1/audit?run_ref="+ref, nil, &l)
	var out []string
	for _, e := range l.Items {
		if !strings.Contains(e.Event, "continue") {
			continue
		}
		var d map[string]any
		json.Unmarshal(e.Detail, &d)
		out = append(out, fmt.Sprintf("%s:%v", strings.TrimPrefix(e.Event, "sessions.run."), d["attempt"]))
	}
	return out
}

// lastPrompt awaits the fake's n-th model request and returns it.
func awaitRequest(t *testing.T, await func(context.Context, string, int) ([]fakemodel.Request, error), path string, n int) fakemodel.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	reqs, err := await(ctx, path, n)
	if err != nil {
		t.Fatalf("the fake's request %d: %v", n, err)
	}
	return reqs[n-1]
}

// R-CONT-1..5 with the real Claude Code under subscription auth (the auth
// whose 429s carry a reset, real-clis.md §1.10): a usage limit resetting
// in 3 s, the run stopped, a continue scheduled; at the reset the
// coordinator resumes the same conversation and sends the message, the
// limit is still there (a second 429), so it reschedules at the new reset;
// then the turn goes through. The fake sees the earlier history and the
// message, each try after its reset; the audit says scheduled, continued,
// scheduled again, continued.
func TestRealContinueAtResetClaude(t *testing.T) {
	bin := realBin(t, "claude")
	f := setupEnv(t, "yamux", continueEnv(), integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	var p apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{
		NodeID: f.agent.ID, Tool: "claude", Name: "claude-oauth", Home: f.env.ProfileHome(),
		Env: map[string]string{
			"ANTHROPIC_BASE_URL": fake.URL(), "CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-fake",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0",
		}}, &p)
	r := f.launch(p)
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("remember the word otter"), nil)
	f.operator.AwaitRun(r.RunRef, wait, "the first turn", func(r apitypes.Run) bool {
		return r.State == apitypes.StateIdle && r.ConversationID != "" && r.Usage != nil
	})
	n := len(fake.ModelRequests())

	reset1 := time.Now().Add(3 * time.Second).Truncate(time.Second)
	fake.Push(fakemodel.AnthropicUsageLimit(reset1))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("keep working"), nil)
	lim := f.operator.AwaitRun(r.RunRef, wait, "limited", func(r apitypes.Run) bool { return r.Limit != nil && r.State == apitypes.StateIdle })
	if lim.Limit.ResetsAt == nil || !lim.Limit.ResetsAt.Equal(reset1) {
		t.Fatalf("limit %+v, want a reset at %v", lim.Limit, reset1)
	}
	var stopped apitypes.Run
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, &stopped)

	var sched apitypes.Run
	f.post(f.operator, http.StatusOK, r.RunRef, "continue-at-reset", map[string]string{"message": "please go on"}, &sched)
	if sched.ScheduledContinueAt == nil || sched.ScheduledContinueAt.Before(reset1) {
		t.Fatalf("scheduled_continue_at %v, want at or after %v", sched.ScheduledContinueAt, reset1)
	}
	// The first try meets the limit again, with a reset later still.
	reset2 := time.Now().Add(6 * time.Second).Truncate(time.Second)
	fake.Push(fakemodel.AnthropicUsageLimit(reset2))
	first := awaitRequest(t, fake.Await, fakemodel.MessagesPath, n+2)
	if first.At.Before(reset1) || first.Prompt != "please go on" {
		t.Fatalf("first continue: at %v prompt %q, want after %v with the message", first.At, first.Prompt, reset1)
	}
	if !slices.ContainsFunc(first.Said(), func(s string) bool { return strings.Contains(s, "otter") }) {
		t.Fatalf("the continue's request holds no earlier turn: %q", first.Said())
	}
	re := f.operator.AwaitRun(r.RunRef, wait, "rescheduled at the new reset", func(r apitypes.Run) bool {
		return r.ScheduledContinueAt != nil && !r.ScheduledContinueAt.Before(reset2)
	})
	if re.Generation != 2 || re.ConversationID != lim.ConversationID {
		t.Fatalf("after the first continue: generation %d conversation %q, want 2 %q", re.Generation, re.ConversationID, lim.ConversationID)
	}
	second := awaitRequest(t, fake.Await, fakemodel.MessagesPath, n+3)
	if second.At.Before(reset2) || second.Prompt != "please go on" {
		t.Fatalf("second continue: at %v prompt %q, want after %v with the message", second.At, second.Prompt, reset2)
	}
	f.operator.AwaitRun(r.RunRef, wait, "continued: the limit cleared, nothing scheduled", func(r apitypes.Run) bool {
		return r.Limit == nil && r.ScheduledContinueAt == nil && r.State == apitypes.StateIdle &&
			len(continueAudit(f.admin, r.RunRef)) == 4
	})
	if got, want := fmt.Sprint(continueAudit(f.admin, r.RunRef)), "[continue_scheduled:0 continued:0 continue_scheduled:1 continued:1]"; got != want {
		t.Fatalf("audit %s, want %s", got, want)
	}
	if got := len(fake.ModelRequests()); got != n+3 {
		t.Fatalf("%d model requests, want %d: a continue fired twice", got, n+3)
	}
	// Claude Code writes to its home after a turn; stop it before the
	// home is removed.
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
}

// R-CONT-1, R-CONT-3, R-CONT-6 with the real Codex, on both stores: a usage limit
// resetting in 3 s, a continue scheduled, and the coordinator restarted
// before it is due; the restarted coordinator still continues, once, the
// live thread (no resume needed) with the default message, and the fake
// sees the earlier turn in its history.
func TestRealContinueAtResetCodexRestart(t *testing.T) {
	for _, storeKind := range []string{"bolt", "postgres"} {
		t.Run(storeKind, func(t *testing.T) { testContinueCodex(t, storeKind, false) })
	}
}

// R-CONT-6 with two coordinator replicas on one PostgreSQL, both scanning
// the schedules every 100 ms: the continue still fires once (one request
// at the fake, one sessions.run.continued), whichever replica claims it.
func TestRealContinueAtResetReplicas(t *testing.T) {
	testContinueCodex(t, "postgres", true)
}

func testContinueCodex(t *testing.T, storeKind string, replicas bool) {
	bin := realBin(t, "codex")
	eo := continueEnv()
	if storeKind == "postgres" {
		eo.Postgres = pgtest.NewDatabase(t)
	}
	f := setupEnv(t, "yamux", eo, integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	if replicas {
		f.env.StartReplica()
	}
	fake := fakemodel.NewOpenAI()
	defer fake.Close()
	p := f.realCodexProfile(t, fake)
	r := f.launch(p)
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("remember the word heron"), nil)
	f.operator.AwaitRun(r.RunRef, wait, "the first turn", func(r apitypes.Run) bool {
		return r.State == apitypes.StateIdle && r.Usage != nil
	})
	n := len(fake.ModelRequests())
	// The reset leaves the coordinator's restart and the agent's
	// reconnect time to finish before it: a continue due while the node
	// is away backs off as a new attempt (R-CONT-5), which this test does
	// not look at.
	reset := time.Now().Add(8 * time.Second).Truncate(time.Second)
	fake.Push(fakemodel.OpenAIUsageLimit(fakemodel.CodexWindows(&fakemodel.Window{UsedPercent: 100, Minutes: 300, ResetAt: reset}, nil)))
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("keep working"), nil)
	lim := f.operator.AwaitRun(r.RunRef, wait, "limited", func(r apitypes.Run) bool { return r.Limit != nil && r.State == apitypes.StateIdle })
	if lim.Limit.ResetsAt == nil || !lim.Limit.ResetsAt.Equal(reset) {
		t.Fatalf("limit %+v, want a reset at %v", lim.Limit, reset)
	}
	var sched apitypes.Run
	f.post(f.operator, http.StatusOK, r.RunRef, "continue-at-reset", nil, &sched)
	if sched.ScheduledContinueAt == nil || time.Now().After(*sched.ScheduledContinueAt) {
		t.Fatalf("scheduled_continue_at %v: want it ahead, to restart before it", sched.ScheduledContinueAt)
	}
	if !replicas {
		f.env.RestartCoordinator()
		f.agent.AwaitConnected(wait)
	}

	got := awaitRequest(t, fake.Await, fakemodel.ResponsesPath, n+2)
	if got.At.Before(reset) || got.Prompt != "continue" {
		t.Fatalf("the continue: at %v prompt %q, want after %v with \"continue\"", got.At, got.Prompt, reset)
	}
	if !slices.ContainsFunc(got.Said(), func(s string) bool { return strings.Contains(s, "heron") }) {
		t.Fatalf("the continue's request holds no earlier turn: %q", got.Said())
	}
	f.operator.AwaitRun(r.RunRef, wait, "continued: the limit cleared", func(r apitypes.Run) bool {
		return r.Limit == nil && r.ScheduledContinueAt == nil && r.State == apitypes.StateIdle
	})
	if got, want := fmt.Sprint(continueAudit(f.admin, r.RunRef)), "[continue_scheduled:0 continued:0]"; got != want {
		t.Fatalf("audit %s, want %s", got, want)
	}
	if got := f.operator.Run(r.RunRef); got.Generation != lim.Generation {
		t.Fatalf("generation %d, want %d: the live thread needs no resume", got.Generation, lim.Generation)
	}
	if got := len(fake.ModelRequests()); got != n+2 {
		t.Fatalf("%d model requests, want %d: the continue fired more than once", got, n+2)
	}
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
}
