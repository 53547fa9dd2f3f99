package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-ONL-2, R-ONL-3, R-ONL-5, R-ONL-6: a limited run's plan starts once per
// limit; each step that cannot apply is skipped with the manual action's
// code (the target account at its own limit: profile_limited; a handoff
// target on another node: profile_other_node, the handoff route's own
// refusal); with none left the run waits for the reset, scheduled as a
// continue; the run shows every line and each is audited.
func TestOnLimitPlanSkipsToTheReset(t *testing.T) {
	s, st := newTestServer(t)
	s.o.Continue = ContinueOptions{Jitter: -1, Backoff: time.Minute, MaxBackoff: time.Hour, Poll: time.Second}
	op := principal(t, st, "op", map[string]string{"t1": store.RoleOperator})
	ctx := t.Context()
	now := time.Now().UTC()
	reset := now.Add(time.Hour).Truncate(time.Second)
	actor := apitypes.AuditActor{CredentialID: "c1", Kind: apitypes.ActorHuman}
	for _, p := range []apitypes.Profile{
		{Ref: "p1", Tenant: "t1", NodeID: "n1", Tool: "claude", Name: "claude-a", Active: true, Approvals: "ask", CreatedAt: now,
			OnLimit: []string{"move:claude-b", "handoff:codex-x", "continue_at_reset"}, OnLimitSetBy: &actor},
		{Ref: "p2", Tenant: "t1", NodeID: "n1", Tool: "claude", Name: "claude-b", Active: true, Approvals: "ask", CreatedAt: now},
		{Ref: "p3", Tenant: "t1", NodeID: "n2", Tool: "codex", Name: "codex-x", Active: true, Approvals: "ask", CreatedAt: now},
	} {
		if err := st.CreateProfile(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// claude-b's account is at its own limit.
	if err := st.PutUsage(ctx, []apitypes.UsageTurn{{RunRef: "run_other", Seq: 1, Turn: 1, Tenant: "t1", NodeID: "n1", Tool: "claude",
		ProfileRef: "p2", At: now, Limit: &apitypes.Limit{Kind: "usage", ResetsAt: &reset, AccountRef: "p2"}}}); err != nil {
		t.Fatal(err)
	}
	r := limitedRun(t, st, "run_l", reset)
	seen := now.Add(-time.Second)
	r.Limit.SeenAt, r.Rev = &seen, 2
	if _, err := st.PutRun(ctx, r); err != nil {
		t.Fatal(err)
	}

	s.limitSeen(r)
	s.limitSeen(r) // a second push of the same limit
	s.continues.continueTick(ctx)
	s.limitSeen(r)
	s.continues.continueTick(ctx)

	metas, _ := st.GetRunMeta(ctx, []string{"run_l"})
	m := metas["run_l"]
	var lines []string
	for _, e := range m.OnLimit {
		lines = append(lines, fmt.Sprintf("%s:%s:%s", e.Outcome, e.Step, e.Code))
	}
	if got, want := fmt.Sprint(lines), "[limited:: skipped:move:claude-b:profile_limited skipped:handoff:codex-x:profile_other_node waiting:continue_at_reset:]"; got != want {
		t.Fatalf("on_limit %s, want %s", got, want)
	}
	if m.Continue == nil || len(m.Continue.Plan) != 0 || m.Continue.At.Before(reset) || m.Continue.Actor != actor {
		t.Fatalf("schedule %+v: want a continue at the reset, as the plan's owner", m.Continue)
	}
	want := "[sessions.run.on_limit sessions.run.on_limit sessions.run.on_limit sessions.run.continue_scheduled]"
	if got := fmt.Sprint(auditEvents(t, st, "run_l")); got != want {
		t.Fatalf("audit %s, want %s", got, want)
	}

	// The run shows them (and the document describes them).
	rec := call(s, http.MethodGet, Base+"/runs/run_l", op, "t1")
	var got apitypes.Run
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &got) != nil || len(got.OnLimit) != 4 || got.OnLimit[1].Reason == "" {
		t.Fatalf("GET: %d %s", rec.Code, rec.Body)
	}

	// A newer limit while the continue waits does not start the plan
	// again: the continue is under way.
	later := now
	r.Limit.SeenAt, r.Rev = &later, 3
	if _, err := st.PutRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	s.limitSeen(r)
	s.continues.continueTick(ctx)
	metas, _ = st.GetRunMeta(ctx, []string{"run_l"})
	if n := len(metas["run_l"].OnLimit); n != 4 {
		t.Fatalf("%d on_limit lines after a newer limit with a continue scheduled, want 4", n)
	}
}

// R-ONL-7: POST /runs/{ref}/on-limit refuses a run without a limit and an
// unknown step; a step whose target is refused answers the handoff
// route's own error.
func TestOnLimitNowRefusals(t *testing.T) {
	s, st := newTestServer(t)
	op := principal(t, st, "op", map[string]string{"t1": store.RoleOperator})
	now := time.Now().UTC()
	if err := st.CreateProfile(t.Context(), apitypes.Profile{Ref: "p3", Tenant: "t1", NodeID: "n2", Tool: "codex", Name: "codex-x",
		Active: true, Approvals: "ask", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	limitedRun(t, st, "run_n", now.Add(time.Hour))
	path := Base + "/runs/run_n/on-limit"
	for _, tc := range []struct {
		body string
		code int
		want string
	}{
		{`{"step":"rotate"}`, http.StatusBadRequest, "bad_on_limit"},
		{`{"step":"handoff:nobody"}`, http.StatusNotFound, "not_found"},
		{`{"step":"handoff:codex-x"}`, http.StatusConflict, "profile_other_node"},
	} {
		rec := callBody(s, http.MethodPost, path, op, "t1", tc.body)
		if rec.Code != tc.code || !json.Valid(rec.Body.Bytes()) || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: %d %s, want %d %s", tc.body, rec.Code, rec.Body, tc.code, tc.want)
		}
	}
	r := limitedRun(t, st, "run_free", now.Add(time.Hour))
	r.Limit, r.Rev = nil, 2
	if _, err := st.PutRun(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if rec := callBody(s, http.MethodPost, Base+"/runs/run_free/on-limit", op, "t1", `{"step":"continue_at_reset"}`); rec.Code != http.StatusConflict {
		t.Errorf("a run without a limit: %d %s, want 409 not_limited", rec.Code, rec.Body)
	}
}

// R-ONL-2: a limit the index took just before the coordinator stopped
// (its queue of limited runs is memory) starts its plan when a
// coordinator's continuer starts; a plan started already is not started
// again.
func TestOnLimitAfterARestart(t *testing.T) {
	s, st := newTestServer(t)
	s.o.Continue = ContinueOptions{Jitter: -1, Backoff: time.Minute, MaxBackoff: time.Hour, Poll: time.Second}
	ctx := t.Context()
	if err := st.PutTenant(ctx, store.Tenant{ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	reset := now.Add(time.Hour).Truncate(time.Second)
	actor := apitypes.AuditActor{CredentialID: "c1", Kind: apitypes.ActorHuman}
	if err := st.CreateProfile(ctx, apitypes.Profile{Ref: "p1", Tenant: "t1", NodeID: "n1", Tool: "claude", Name: "claude-a", Active: true,
		Approvals: "ask", CreatedAt: now, OnLimit: []string{"continue_at_reset"}, OnLimitSetBy: &actor}); err != nil {
		t.Fatal(err)
	}
	r := limitedRun(t, st, "run_l", reset)
	seen := now.Add(-time.Second)
	r.Limit.SeenAt, r.Rev = &seen, 2
	if _, err := st.PutRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	lines := func() int {
		metas, _ := st.GetRunMeta(ctx, []string{"run_l"})
		return len(metas["run_l"].OnLimit)
	}
	// The index holds the limited row; no push of it reached this
	// coordinator's queue.
	s.continues.continueTick(ctx)
	if n := lines(); n != 0 {
		t.Fatalf("%d on_limit lines before the continuer started, want 0", n)
	}
	s.continues.onLimit.requeueLimited(ctx)
	s.continues.continueTick(ctx)
	if n := lines(); n != 2 {
		t.Fatalf("%d on_limit lines after the start, want 2 (limited, waiting)", n)
	}
	s.continues.onLimit.requeueLimited(ctx) // another replica's start
	s.continues.continueTick(ctx)
	if n := lines(); n != 2 {
		t.Fatalf("%d on_limit lines after a second start, want 2", n)
	}
}
