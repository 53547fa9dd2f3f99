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

// R-USE-4, R-USE-5, R-USE-7: GET /usage sums the tenant's rows by the key
// asked for, over the range asked for, with each account's latest
// rate-limit report; bad parameters are 400 bad_query.
func TestUsageReport(t *testing.T) {
	s, st := newTestServer(t)
	viewer := principal(t, st, "viewer", map[string]string{"t1": store.RoleViewer})
	t0 := time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)
	cost := 0.5
	reset := t0.Add(5 * time.Hour)
	row := func(run string, seq, turn uint64, tenant, node, tool, profile, model string, at time.Time, in int64, c *float64) apitypes.UsageTurn {
		return apitypes.UsageTurn{RunRef: run, Seq: seq, Turn: turn, Tenant: tenant, NodeID: node, Tool: tool, ProfileRef: profile,
			Model: model, At: at, InputTokens: in, OutputTokens: 10, CacheReadTokens: 100, CacheWriteTokens: 1000, CostUSD: c}
	}
	limited := row("r3", 1, 1, "t1", "n2", "codex", "p2", "gpt", t0.Add(3*time.Hour), 0, nil)
	limited.RateLimits = []apitypes.RateWindow{{Name: "primary", UsedPercent: 100, WindowMinutes: 300, ResetsAt: &reset}}
	limited.Limit = &apitypes.Limit{Kind: "usage", ResetsAt: &reset, AccountRef: "p2"}
	if err := st.PutUsage(t.Context(), []apitypes.UsageTurn{
		row("r1", 1, 1, "t1", "n1", "claude", "p1", "opus", t0, 1, &cost),
		// One turn, two models: two rows, one turn.
		row("r1", 2, 2, "t1", "n1", "claude", "p1", "opus", t0.Add(2*time.Hour), 2, &cost),
		row("r1", 3, 2, "t1", "n1", "claude", "p1", "haiku", t0.Add(2*time.Hour), 4, &cost),
		row("r2", 1, 1, "t1", "n2", "codex", "p2", "gpt", t0.Add(time.Hour), 8, nil),
		limited,
		row("rx", 1, 1, "t2", "n9", "claude", "p9", "opus", t0, 1000, &cost),
	}); err != nil {
		t.Fatal(err)
	}
	get := func(q string) (int, apitypes.UsageReport, string) {
		t.Helper()
		rec := call(s, http.MethodGet, Base+"/usage?"+q, viewer, "t1")
		var r apitypes.UsageReport
		json.Unmarshal(rec.Body.Bytes(), &r)
		return rec.Code, r, rec.Body.String()
	}
	groups := func(r apitypes.UsageReport) string {
		out := ""
		for _, g := range r.Groups {
			out += fmt.Sprintf("%s:%d/%d/%.1f/%d ", g.Key, g.Turns, g.InputTokens, g.CostUSD, g.CostTurnsUnknown)
		}
		return out
	}
	for _, tc := range []struct{ q, want string }{
		{"", "p1:2/7/1.5/0 p2:2/8/0.0/2 "},
		{"group_by=profile", "p1:2/7/1.5/0 p2:2/8/0.0/2 "},
		{"group_by=node", "n1:2/7/1.5/0 n2:2/8/0.0/2 "},
		{"group_by=tool", "claude:2/7/1.5/0 codex:2/8/0.0/2 "},
		{"group_by=model", "gpt:2/8/0.0/2 haiku:0/4/0.5/0 opus:2/3/1.0/0 "},
		{"group_by=day", "2026-12-01:1/1/0.5/0 2026-12-02:3/14/1.0/2 "},
		{"group_by=day&from=2026-12-02", "2026-12-02:3/14/1.0/2 "},
		{"group_by=day&to=2026-12-02T00:00:00Z", "2026-12-01:1/1/0.5/0 "},
		{"from=2026-12-02T00:30:00%2B00:00&to=2026-12-02T01:30:00Z", "p1:1/6/1.0/0 "},
		{"from=2027-01-01", ""},
	} {
		code, r, body := get(tc.q)
		if code != http.StatusOK {
			t.Fatalf("GET /usage?%s: %d %s", tc.q, code, body)
		}
		if got := groups(r); got != tc.want {
			t.Errorf("GET /usage?%s: got %q, want %q", tc.q, got, tc.want)
		}
	}
	_, r, _ := get("")
	if want := (apitypes.UsageTotals{Turns: 4, InputTokens: 15, OutputTokens: 50, CacheReadTokens: 500, CacheWriteTokens: 5000, CostUSD: 1.5, CostTurnsUnknown: 2}); r.Total != want {
		t.Errorf("total: got %+v, want %+v", r.Total, want)
	}
	// Each account's latest report, whatever the range; the other tenant's
	// rows are not seen.
	_, r, _ = get("from=2027-01-01")
	if len(r.Accounts) != 2 || r.Accounts[0].ProfileRef != "p1" || r.Accounts[1].ProfileRef != "p2" {
		t.Fatalf("accounts: got %+v, want p1 and p2", r.Accounts)
	}
	if a := r.Accounts[1]; a.Limit == nil || !a.Limit.ResetsAt.Equal(reset) || len(a.RateLimits) != 1 || a.RateLimits[0].UsedPercent != 100 {
		t.Errorf("account p2: got %+v, want the limited turn's report", a)
	}
	for _, q := range []string{"group_by=week", "from=yesterday", "to=2026-13-01", "from=2026-12-02&to=2026-12-01",
		"from=2026-12-01&to=2026-12-01", "bogus=1", "group_by=node&group_by=tool"} {
		code, _, body := get(q)
		if code != http.StatusBadRequest || !json.Valid([]byte(body)) {
			t.Errorf("GET /usage?%s: got %d %s, want 400", q, code, body)
			continue
		}
		var e struct{ Error struct{ Code string } }
		json.Unmarshal([]byte(body), &e)
		if e.Error.Code != "bad_query" {
			t.Errorf("GET /usage?%s: code %q, want bad_query", q, e.Error.Code)
		}
	}
}
