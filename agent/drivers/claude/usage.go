package claude

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
)

// modelTurn is one entry of a result frame's model_usage_since_last_result
// (real-clis.md §1.4: per turn, where modelUsage is cumulative across
// resumes).
type modelTurn struct {
	InputTokens              int64    `json:"inputTokens"`
	OutputTokens             int64    `json:"outputTokens"`
	CacheReadInputTokens     int64    `json:"cacheReadInputTokens"`
	CacheCreationInputTokens int64    `json:"cacheCreationInputTokens"`
	CostUSD                  *float64 `json:"costUSD"`
}

// usageLocked is R-USE-1 for Claude Code: the turn's figures from
// model_usage_since_last_result, one entry per model, with the tool's own
// costUSD (R-USE-3). A Claude Code that sends no such map gives the
// result's usage object under the model system/init named, without a cost:
// its total_cost_usd is the process's running total, not the turn's.
func (s *session) usageLocked(f *frame) *cliruntime.TurnUsage {
	u := &cliruntime.TurnUsage{Windows: s.windows}
	var per map[string]modelTurn
	if json.Unmarshal(f.ModelUsageSince, &per) == nil && per != nil {
		names := make([]string, 0, len(per))
		for k := range per {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			m := per[k]
			if m.InputTokens|m.OutputTokens|m.CacheReadInputTokens|m.CacheCreationInputTokens == 0 && (m.CostUSD == nil || *m.CostUSD == 0) {
				continue
			}
			u.Models = append(u.Models, cliruntime.ModelUsage{Model: k, InputTokens: m.InputTokens, OutputTokens: m.OutputTokens,
				CacheReadTokens: m.CacheReadInputTokens, CacheWriteTokens: m.CacheCreationInputTokens, CostUSD: m.CostUSD})
		}
	} else {
		var t struct {
			InputTokens              int64 `json:"input_tokens"`
			OutputTokens             int64 `json:"output_tokens"`
			CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
			CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		}
		if json.Unmarshal(f.Usage, &t) == nil && t.InputTokens|t.OutputTokens|t.CacheReadInputTokens|t.CacheCreationInputTokens != 0 {
			u.Models = append(u.Models, cliruntime.ModelUsage{Model: s.model, InputTokens: t.InputTokens, OutputTokens: t.OutputTokens,
				CacheReadTokens: t.CacheReadInputTokens, CacheWriteTokens: t.CacheCreationInputTokens})
		}
	}
	if u.Empty() {
		return nil
	}
	return u
}

// windowsOf reads a rate_limit_event's unifiedWindows (real-clis.md §1.10):
// utilization is a fraction, reported here as a percentage (R-USE-5).
func windowsOf(info json.RawMessage) []cliruntime.RateWindow {
	var ri struct {
		Windows map[string]struct {
			Utilization float64 `json:"utilization"`
			ResetsAt    float64 `json:"resetsAt"`
		} `json:"unifiedWindows"`
	}
	if json.Unmarshal(info, &ri) != nil || len(ri.Windows) == 0 {
		return nil
	}
	names := make([]string, 0, len(ri.Windows))
	for k := range ri.Windows {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]cliruntime.RateWindow, 0, len(names))
	for _, k := range names {
		w := ri.Windows[k]
		rw := cliruntime.RateWindow{Name: k, UsedPercent: w.Utilization * 100}
		if w.ResetsAt > 0 && w.ResetsAt < 1e11 {
			t := time.Unix(int64(w.ResetsAt), 0).UTC()
			rw.ResetsAt = &t
		}
		out = append(out, rw)
	}
	return out
}
