package journeys

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// servedTokens sums what a fake model server reported to the tool, in
// R-USE-2's terms (input without cache reads and writes): the Messages
// API's usage as the fake sends it (11 input and 5 output tokens unless a
// reply says otherwise); the Responses API's fixed usage (1,234 input of
// which 1,000 cached, 56 output).
func servedTokens(reqs []fakemodel.Request, anthropic bool) apitypes.UsageTotals {
	var t apitypes.UsageTotals
	for _, r := range reqs {
		if r.Reply.Status != 0 && r.Reply.Status != http.StatusOK {
			continue
		}
		if anthropic {
			u := fakemodel.Usage{InputTokens: 11}
			if r.Reply.Usage != nil {
				u = *r.Reply.Usage
			}
			t.InputTokens += int64(u.InputTokens)
			t.CacheReadTokens += int64(u.CacheReadInputTokens)
			t.CacheWriteTokens += int64(u.CacheCreationInputTokens)
			t.OutputTokens += 5
			continue
		}
		t.InputTokens += 234
		t.CacheReadTokens += 1000
		t.OutputTokens += 56
	}
	return t
}

func tokensOnly(t apitypes.UsageTotals) string {
	return fmt.Sprintf("turns %d in %d out %d cache read %d write %d", t.Turns, t.InputTokens, t.OutputTokens, t.CacheReadTokens, t.CacheWriteTokens)
}

// R-USE-1..7 with the real Claude Code and Codex through the coordinator,
// on both stores: two turns each; the runs' usage, GET /usage by profile,
// tool and node, and the total equal what the fake model servers reported
// to the tools; Claude Code's turns carry its cost, Codex's none; each
// account has its latest report; the CLI prints the table.
func TestRealUsage(t *testing.T) {
	for _, storeKind := range []string{"bolt", "postgres"} {
		t.Run(storeKind, func(t *testing.T) {
			claudeBin, codexBin := realBin(t, "claude"), realBin(t, "codex")
			var eo integration.Options
			if storeKind == "postgres" {
				eo.Postgres = pgtest.NewDatabase(t)
			}
			f := setupEnv(t, "yamux", eo, integration.ProcOptions{Path: claudeBin + ":" + codexBin + ":" + cliruntime.DefaultPath})
			anth := fakemodel.NewAnthropic()
			defer anth.Close()
			oai := fakemodel.NewOpenAI()
			defer oai.Close()
			pc, px := f.realClaudeProfile(anth), f.realCodexProfile(t, oai)
			anth.Push(fakemodel.Reply{Text: "first", Usage: &fakemodel.Usage{InputTokens: 30, CacheReadInputTokens: 200, CacheCreationInputTokens: 50}})

			rc, rx := f.launch(pc), f.launch(px)
			for _, r := range []struct {
				ref   string
				input func(string) map[string]string
			}{{rc.RunRef, integration.Message}, {rx.RunRef, integration.Text}} {
				f.operator.AwaitRun(r.ref, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
				for i, text := range []string{"hello", "again"} {
					f.post(f.operator, http.StatusAccepted, r.ref, "input", r.input(text), nil)
					f.operator.AwaitRun(r.ref, wait, fmt.Sprintf("turn %d recorded", i+1), func(r apitypes.Run) bool {
						return r.State == apitypes.StateIdle && r.Usage != nil && r.Usage.Turns == int64(i+1)
					})
				}
			}
			wantC, wantX := servedTokens(anth.ModelRequests(), true), servedTokens(oai.ModelRequests(), false)
			wantC.Turns, wantX.Turns = 2, 2
			if wantC.CacheReadTokens != 200 || wantX.InputTokens == 0 {
				t.Fatalf("the fakes served %+v and %+v; want the pushed reply among them", wantC, wantX)
			}
			for _, tc := range []struct {
				ref  string
				want apitypes.UsageTotals
			}{{rc.RunRef, wantC}, {rx.RunRef, wantX}} {
				got := f.viewer.Run(tc.ref).Usage
				if got == nil || tokensOnly(*got) != tokensOnly(tc.want) {
					t.Errorf("run %s usage: got %+v, want %s", tc.ref, got, tokensOnly(tc.want))
				}
			}
			// R-USE-3: Claude Code reports a cost per turn, Codex none.
			if u := f.viewer.Run(rc.RunRef).Usage; u == nil || u.CostUSD <= 0 || u.CostTurnsUnknown != 0 {
				t.Errorf("claude run cost: got %+v, want a cost for each turn", u)
			}
			if u := f.viewer.Run(rx.RunRef).Usage; u == nil || u.CostUSD != 0 || u.CostTurnsUnknown != 2 {
				t.Errorf("codex run cost: got %+v, want none reported for 2 turns", u)
			}

			// The rows reach the index with the run rows (R-USE-6).
			var rep apitypes.UsageReport
			integration.Await(t, wait, "GET /usage sums four turns", func() bool {
				f.viewer.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/usage?group_by=profile", nil, &rep)
				return rep.Total.Turns == 4
			})
			byKey := func(r apitypes.UsageReport) map[string]string {
				m := map[string]string{}
				for _, g := range r.Groups {
					m[g.Key] = tokensOnly(g.UsageTotals)
				}
				return m
			}
			sum := wantC
			sum.InputTokens += wantX.InputTokens
			sum.OutputTokens += wantX.OutputTokens
			sum.CacheReadTokens += wantX.CacheReadTokens
			sum.CacheWriteTokens += wantX.CacheWriteTokens
			sum.Turns += wantX.Turns
			for _, tc := range []struct {
				by   string
				want map[string]string
			}{
				{"profile", map[string]string{pc.Ref: tokensOnly(wantC), px.Ref: tokensOnly(wantX)}},
				{"tool", map[string]string{"claude": tokensOnly(wantC), "codex": tokensOnly(wantX)}},
				{"node", map[string]string{f.agent.ID: tokensOnly(sum)}},
			} {
				f.viewer.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/usage?group_by="+tc.by, nil, &rep)
				if got := byKey(rep); fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("GET /usage?group_by=%s: got %v, want %v", tc.by, got, tc.want)
				}
				if tokensOnly(rep.Total) != tokensOnly(sum) || rep.Total.CostTurnsUnknown != 2 || rep.Total.CostUSD <= 0 {
					t.Errorf("GET /usage?group_by=%s total: got %+v, want %s, a cost and 2 turns without one", tc.by, rep.Total, tokensOnly(sum))
				}
			}
			if len(rep.Accounts) != 2 {
				t.Errorf("accounts: got %+v, want the two profiles' latest reports", rep.Accounts)
			}
			f.viewer.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/usage?group_by=day&from=2999-01-01", nil, &rep)
			if len(rep.Groups) != 0 || rep.Total.Turns != 0 {
				t.Errorf("a range with no turns: got %+v", rep)
			}
			f.viewer.Must(http.StatusBadRequest, http.MethodGet, "/v1/m/sessions/usage?group_by=week", nil, nil)

			out, code := f.cli("usage", "--by", "tool")
			if code != 0 || !strings.Contains(out, "claude") || !strings.Contains(out, "codex") ||
				!strings.Contains(out, fmt.Sprint(sum.CacheReadTokens)) {
				t.Errorf("olivares usage --by tool: exit %d\n%s", code, out)
			}
		})
	}
}
