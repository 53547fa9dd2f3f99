package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-ATTN-1, R-ATTN-2, R-ATTN-4: every run answer carries the derived
// attention (null when nothing is needed), GET /runs filters on it, a
// limit whose reset passes stops counting without a write, and a bad value
// is 400 bad_query.
func TestRunAttention(t *testing.T) {
	s, st := newTestServer(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := now
	s.o.Now = func() time.Time { return clock }
	admin := principal(t, st, "admin", map[string]string{"t1": store.RoleAdmin})
	reset := now.Add(time.Hour)
	rows := []apitypes.Run{
		{RunRef: "run_idle", State: apitypes.StateIdle},
		{RunRef: "run_ask", State: apitypes.StateRunning, PendingRequests: 1},
		{RunRef: "run_held", State: apitypes.StatePendingApproval},
		{RunRef: "run_limit", State: apitypes.StateFailed, Limit: &apitypes.Limit{Kind: "usage", ResetsAt: &reset, AccountRef: "pp"}},
		{RunRef: "run_err", State: apitypes.StateStopped, LastError: &apitypes.LastError{Kind: "auth", Message: "401", At: now}},
		{RunRef: "run_busy", State: apitypes.StateRunning},
	}
	for i, r := range rows {
		r.Tenant, r.NodeID, r.Driver, r.Generation, r.Isolation, r.ProviderProfileRef = "t1", "n1", "claude", 1, apitypes.IsolationNative, "pp"
		r.CreatedAt, r.Rev = now.Add(time.Duration(i)*time.Minute), 1
		if _, err := st.PutRun(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	list := func(q string) map[string]string {
		t.Helper()
		rec := call(s, http.MethodGet, Base+"/runs?"+q, admin, "t1")
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /runs?%s: %d %s", q, rec.Code, rec.Body)
		}
		var l struct {
			Items []map[string]any `json:"items"`
		}
		json.Unmarshal(rec.Body.Bytes(), &l)
		out := map[string]string{}
		for _, r := range l.Items {
			a, present := r["attention"]
			if !present {
				t.Errorf("GET /runs?%s: %s has no attention field, want it (null when none)", q, r["run_ref"])
			}
			s, _ := a.(string)
			out[r["run_ref"].(string)] = s
		}
		return out
	}
	want := map[string]string{"run_idle": "needs_input", "run_ask": "needs_decision", "run_held": "needs_approval",
		"run_limit": "limited", "run_err": "failed", "run_busy": ""}
	if got := list(""); !mapsEqual(got, want) {
		t.Errorf("GET /runs: got %v, want %v", got, want)
	}
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"attention=any", []string{"run_ask", "run_err", "run_held", "run_idle", "run_limit"}},
		{"attention=needs_input", []string{"run_idle"}},
		{"attention=limited", []string{"run_limit"}},
		{"attention=needs_decision&state=running", []string{"run_ask"}},
		{"attention=failed&pagination=cursor&limit=1", []string{"run_err"}},
	} {
		got := keys(list(tc.q))
		if !slices.Equal(got, tc.want) {
			t.Errorf("GET /runs?%s: got %v, want %v", tc.q, got, tc.want)
		}
	}
	// GET /runs/{ref} answers the same field.
	rec := call(s, http.MethodGet, Base+"/runs/run_held", admin, "t1")
	var one apitypes.Run
	json.Unmarshal(rec.Body.Bytes(), &one)
	if one.Attention == nil || *one.Attention != apitypes.AttentionNeedsApproval {
		t.Errorf("GET /runs/run_held: got attention %v, want needs_approval (%s)", one.Attention, rec.Body)
	}
	// The reset passes: the failed run is failed, not limited, with no write.
	clock = reset.Add(time.Second)
	if got := list("attention=limited"); len(got) != 0 {
		t.Errorf("after the reset, GET /runs?attention=limited: got %v, want none", got)
	}
	if got := list("")["run_limit"]; got != "failed" {
		t.Errorf("after the reset, run_limit: got %q, want failed", got)
	}
	for _, q := range []string{"attention=bored", "attention=", "attention=ANY"} {
		rec := call(s, http.MethodGet, Base+"/runs?"+q, admin, "t1")
		if rec.Code != http.StatusBadRequest || errCode(rec) != "bad_query" {
			t.Errorf("GET /runs?%s: got %d %s, want 400 bad_query", q, rec.Code, rec.Body)
		}
	}
}

// errCode is an error answer's code.
func errCode(rec *httptest.ResponseRecorder) string {
	var b struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(rec.Body.Bytes(), &b)
	return b.Error.Code
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
