package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// limitedRun indexes a stopped run that ended on a limit resetting at reset.
func limitedRun(t *testing.T, st store.Store, ref string, reset time.Time) apitypes.Run {
	t.Helper()
	r := apitypes.Run{RunRef: ref, Tenant: "t1", NodeID: "n1", State: apitypes.StateStopped, Driver: "claude", Generation: 1,
		Isolation: apitypes.IsolationNative, ProviderProfileRef: "p1", ConversationID: "conv-1", CreatedAt: time.Now().UTC(), Rev: 1,
		Limit: &apitypes.Limit{Kind: "usage", ResetsAt: &reset, AccountRef: "p1"}}
	if _, err := st.PutRun(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func auditEvents(t *testing.T, st store.Store, ref string) []string {
	t.Helper()
	l, _, err := st.ListAudit(t.Context(), store.AuditQuery{Tenant: "t1", RunRef: ref})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range l {
		var d map[string]any
		json.Unmarshal(e.Detail, &d)
		if r, ok := d["cancel_reason"]; ok {
			out = append(out, fmt.Sprintf("%s:%v", e.Event, r))
			continue
		}
		out = append(out, e.Event)
	}
	return out
}

// R-CONT-1, R-CONT-2, R-CONT-7: POST schedules at the reset plus at most
// the jitter, shown as scheduled_continue_at and audited; DELETE drops it
// once (a second DELETE is a 200 without audit); runs without a limit or a
// conversation, bad messages and released runs are refused.
func TestContinueAtResetSchedule(t *testing.T) {
	s, st := newTestServer(t)
	op := principal(t, st, "op", map[string]string{"t1": store.RoleOperator})
	viewer := principal(t, st, "viewer", map[string]string{"t1": store.RoleViewer})
	reset := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	limitedRun(t, st, "run_a", reset)
	path := Base + "/runs/run_a/continue-at-reset"

	rec := callBody(s, http.MethodPost, path, op, "t1", `{"message":"carry on"}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("POST: %d %s", rec.Code, rec.Body)
	}
	var r apitypes.Run
	json.Unmarshal(rec.Body.Bytes(), &r)
	if r.ScheduledContinueAt == nil || r.ScheduledContinueAt.Before(reset) || r.ScheduledContinueAt.After(reset.Add(time.Minute)) {
		t.Fatalf("scheduled_continue_at %v, want in [%v, %v]", r.ScheduledContinueAt, reset, reset.Add(time.Minute))
	}
	metas, _ := st.GetRunMeta(t.Context(), []string{"run_a"})
	if c := metas["run_a"].Continue; c == nil || c.Message != "carry on" || c.Generation != 1 || c.ProfileRef != "p1" || c.Live {
		t.Fatalf("stored schedule %+v", c)
	}
	// Every reader sees it (R-API-6).
	rec = call(s, http.MethodGet, Base+"/runs/run_a", viewer, "t1")
	json.Unmarshal(rec.Body.Bytes(), &r)
	if r.ScheduledContinueAt == nil {
		t.Errorf("GET /runs/run_a: no scheduled_continue_at")
	}
	if rec := callBody(s, http.MethodPost, path, viewer, "t1", `{}`); rec.Code != http.StatusForbidden {
		t.Errorf("viewer POST: %d, want 403", rec.Code)
	}
	for i := 0; i < 2; i++ {
		rec = call(s, http.MethodDelete, path, op, "t1")
		r = apitypes.Run{}
		json.Unmarshal(rec.Body.Bytes(), &r)
		if rec.Code != http.StatusOK || r.ScheduledContinueAt != nil {
			t.Fatalf("DELETE #%d: %d %s", i+1, rec.Code, rec.Body)
		}
	}
	if got, want := fmt.Sprint(auditEvents(t, st, "run_a")), "[sessions.run.continue_scheduled sessions.run.continue_cancelled:cancelled]"; got != want {
		t.Errorf("audit: got %s, want %s", got, want)
	}
	// The default message.
	callBody(s, http.MethodPost, path, op, "t1", ``)
	metas, _ = st.GetRunMeta(t.Context(), []string{"run_a"})
	if c := metas["run_a"].Continue; c == nil || c.Message != DefaultContinueMessage {
		t.Errorf("schedule without a message: %+v", c)
	}

	noLimit := limitedRun(t, st, "run_b", reset)
	noLimit.Limit, noLimit.Rev = nil, 2
	st.PutRun(t.Context(), noLimit)
	noConv := limitedRun(t, st, "run_c", reset)
	noConv.ConversationID, noConv.Rev = "", 2
	st.PutRun(t.Context(), noConv)
	limitedRun(t, st, "run_d", reset)
	if _, err := st.ReleaseRun(t.Context(), "run_d", time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref, body string
		status    int
		code      string
	}{
		{"run_b", `{}`, 409, "not_limited"},
		{"run_c", `{}`, 409, "no_conversation"},
		{"run_d", `{}`, 409, "released"},
		{"run_a", `{"message":"  "}`, 400, "bad_body"},
		{"run_a", `{"message":"x","when":"now"}`, 400, "bad_body"},
		{"run_zz", `{}`, 404, "not_found"},
	} {
		rec := callBody(s, http.MethodPost, Base+"/runs/"+tc.ref+"/continue-at-reset", op, "t1", tc.body)
		var e struct{ Error struct{ Code string } }
		json.Unmarshal(rec.Body.Bytes(), &e)
		if rec.Code != tc.status || e.Error.Code != tc.code {
			t.Errorf("POST %s %s: got %d %s, want %d %s", tc.ref, tc.body, rec.Code, e.Error.Code, tc.status, tc.code)
		}
	}
}

// R-CONT-4, R-CONT-5, R-CONT-6: a due schedule of a run that changed is
// dropped with its reason, never fired; one whose node is unreachable is
// put off by the backoff and audited as scheduled again; one not due is
// left alone and named as the next wake-up.
func TestContinueDueDecisions(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	past := now.Add(-time.Minute)
	sched := func(st store.Store, ref string, c store.ContinueSchedule) {
		t.Helper()
		if _, err := st.UpdateRunMeta(t.Context(), ref, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
			m.Continue = &c
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	base := store.ContinueSchedule{At: past, Message: "continue", Generation: 1, ProfileRef: "p1", NodeID: "n1",
		Actor: apitypes.AuditActor{CredentialID: "c1", Kind: apitypes.ActorHuman}}
	type change func(r *apitypes.Run, c *store.ContinueSchedule)
	for _, tc := range []struct {
		name   string
		change change
		want   string
	}{
		{"moved", func(r *apitypes.Run, c *store.ContinueSchedule) { r.ProviderProfileRef = "p2" }, "cancelled:moved"},
		{"reassigned", func(r *apitypes.Run, c *store.ContinueSchedule) { r.NodeID = "n2" }, "cancelled:moved"},
		{"resumed", func(r *apitypes.Run, c *store.ContinueSchedule) { r.Generation = 2 }, "cancelled:resumed_elsewhere"},
		{"stopped", func(r *apitypes.Run, c *store.ContinueSchedule) { c.Live = true }, "cancelled:stopped"},
		{"busy", func(r *apitypes.Run, c *store.ContinueSchedule) { r.State = apitypes.StateRunning }, "cancelled:busy"},
		{"cleared", func(r *apitypes.Run, c *store.ContinueSchedule) { r.Limit = nil }, "cancelled:limit_cleared"},
		{"unreachable", func(r *apitypes.Run, c *store.ContinueSchedule) { r.Limit.ResetsAt = &past }, "scheduled:1@12:01"},
		{"later reset", func(r *apitypes.Run, c *store.ContinueSchedule) { l := now.Add(time.Hour); r.Limit.ResetsAt = &l }, "scheduled:0@13:00"},
		{"not due", func(r *apitypes.Run, c *store.ContinueSchedule) { c.At = now.Add(time.Hour) }, "waiting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, st := newTestServer(t)
			s.o.Now = func() time.Time { return now }
			s.o.Continue = ContinueOptions{Jitter: -1, Backoff: time.Minute, MaxBackoff: time.Hour, Poll: time.Second}
			ref := "run_" + fmt.Sprint(len(tc.name)) + tc.name[:3]
			r := apitypes.Run{RunRef: ref, Tenant: "t1", NodeID: "n1", State: apitypes.StateStopped, Driver: "claude", Generation: 1,
				Isolation: apitypes.IsolationNative, ProviderProfileRef: "p1", ConversationID: "conv-1", CreatedAt: now, Rev: 1,
				Limit: &apitypes.Limit{Kind: "usage", AccountRef: "p1"}}
			c := base
			tc.change(&r, &c)
			if _, err := st.PutRun(t.Context(), r); err != nil {
				t.Fatal(err)
			}
			sched(st, ref, c)
			next := s.continues.continueTick(t.Context())
			metas, _ := st.GetRunMeta(t.Context(), []string{ref})
			got := "waiting"
			switch m := metas[ref].Continue; {
			case m == nil:
				evs := auditEvents(t, st, ref)
				got = "cancelled:" + fmt.Sprint(evs)
				if len(evs) == 1 {
					got = "cancelled:" + evs[0][len(apitypes.AuditRunContinueCancelled)+1:]
				}
			case m.At != c.At:
				got = fmt.Sprintf("scheduled:%d@%s", m.Attempts, m.At.Format("15:04"))
				if evs := auditEvents(t, st, ref); len(evs) != 1 || evs[0] != apitypes.AuditRunContinueScheduled {
					t.Errorf("audit %v, want one continue_scheduled", evs)
				}
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
			if tc.want == "waiting" && !next.Equal(c.At) {
				t.Errorf("next wake-up %v, want %v", next, c.At)
			}
		})
	}
}

// R-CONT-4: a handoff from the run drops its schedule, audited with
// cancel_reason handed_off; with nothing scheduled it writes nothing.
func TestContinueCancelledByHandoff(t *testing.T) {
	s, st := newTestServer(t)
	op := principal(t, st, "op", map[string]string{"t1": store.RoleOperator})
	limitedRun(t, st, "run_h", time.Now().Add(time.Hour))
	if rec := callBody(s, http.MethodPost, Base+"/runs/run_h/continue-at-reset", op, "t1", `{}`); rec.Code != http.StatusOK {
		t.Fatalf("POST: %d %s", rec.Code, rec.Body)
	}
	actor := apitypes.AuditActor{CredentialID: "c1", Kind: apitypes.ActorHuman}
	s.continues.CancelContinueFor(t.Context(), "run_h", cancelHandedOff, actor)
	s.continues.CancelContinueFor(t.Context(), "run_h", cancelHandedOff, actor)
	metas, _ := st.GetRunMeta(t.Context(), []string{"run_h"})
	if metas["run_h"].Continue != nil {
		t.Fatalf("schedule %+v after the handoff", metas["run_h"].Continue)
	}
	if got, want := fmt.Sprint(auditEvents(t, st, "run_h")), "[sessions.run.continue_scheduled sessions.run.continue_cancelled:handed_off]"; got != want {
		t.Errorf("audit: got %s, want %s", got, want)
	}
}
