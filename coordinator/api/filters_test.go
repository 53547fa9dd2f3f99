package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// GET /runs?node_id= keeps one node's runs (the console's node page), with
// the other filters and in both paging modes; GET /v1/audit?until= bounds
// the ledger's time range from above, with since from below.
func TestRunNodeAndAuditTimeFilters(t *testing.T) {
	s, st := newTestServer(t)
	admin := principal(t, st, "admin", map[string]string{"t1": store.RoleAdmin})
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for i, r := range []struct{ ref, node, state string }{
		{"run_a", "n1", apitypes.StateIdle}, {"run_b", "n2", apitypes.StateIdle},
		{"run_c", "n2", apitypes.StateStopped}, {"run_d", "n1", apitypes.StateStopped},
	} {
		if _, err := st.PutRun(t.Context(), apitypes.Run{RunRef: r.ref, Tenant: "t1", NodeID: r.node, State: r.state, Driver: "codex",
			Generation: 1, Isolation: apitypes.IsolationNative, ProviderProfileRef: "pp", CreatedAt: t0.Add(time.Duration(i) * time.Minute), Rev: 1}); err != nil {
			t.Fatal(err)
		}
	}
	runs := func(q string) []string {
		t.Helper()
		rec := call(s, http.MethodGet, Base+"/runs?"+q, admin, "t1")
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /runs?%s: %d %s", q, rec.Code, rec.Body)
		}
		var l apitypes.RunList
		json.Unmarshal(rec.Body.Bytes(), &l)
		var out []string
		for _, r := range l.Items {
			out = append(out, r.RunRef)
		}
		return out
	}
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"node_id=n2", []string{"run_c", "run_b"}},
		{"node_id=n1&state=stopped", []string{"run_d"}},
		{"node_id=n2&pagination=cursor&limit=1", []string{"run_c"}},
		{"node_id=n9", nil},
	} {
		if got := runs(tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("GET /runs?%s: got %v, want %v", tc.q, got, tc.want)
		}
	}

	for i, ev := range []string{apitypes.AuditRunRenamed, apitypes.AuditRunArchived, apitypes.AuditRunRenamed} {
		if _, err := st.AppendAudit(t.Context(), apitypes.AuditEntry{At: t0.Add(time.Duration(i) * time.Hour), Tenant: "t1",
			Actor: apitypes.AuditActor{CredentialID: "c", Kind: apitypes.ActorHuman}, Event: ev, Target: apitypes.AuditTarget{RunRef: "run_a"}}); err != nil {
			t.Fatal(err)
		}
	}
	audit := func(q string) (int, []uint64) {
		rec := call(s, http.MethodGet, "/v1/audit?"+q, admin, "t1")
		var l apitypes.AuditList
		json.Unmarshal(rec.Body.Bytes(), &l)
		var out []uint64
		for _, e := range l.Items {
			out = append(out, e.Seq)
		}
		return rec.Code, out
	}
	for _, tc := range []struct {
		q      string
		status int
		want   []uint64
	}{
		{"until=2026-03-01T11:00:00Z", 200, []uint64{1}},
		{"since=2026-03-01T11:00:00Z&until=2026-03-01T12:00:01Z", 200, []uint64{2, 3}},
		{"event=sessions.run.renamed&until=2026-03-01T13:00:00Z", 200, []uint64{1, 3}},
		{"until=yesterday", 400, nil},
	} {
		code, got := audit(tc.q)
		if code != tc.status || !slices.Equal(got, tc.want) {
			t.Errorf("GET /v1/audit?%s: got %d %v, want %d %v", tc.q, code, got, tc.status, tc.want)
		}
	}
}
