package codex

import (
	"encoding/json"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
)

// turnTokens sums the thread/tokenUsage/updated reports of one turn
// (real-clis.md §2.4). Each report's "last" is the one model request it
// follows, so the sum over a turn is the turn's use whatever the thread's
// running total did at a resume.
type turnTokens struct {
	model                             string // the thread's model (thread/start, thread/resume)
	input, cached, cacheWrite, output int64
	seen                              bool
}

func (t *turnTokens) add(params json.RawMessage) {
	var p struct {
		TokenUsage struct {
			Last struct {
				InputTokens           int64 `json:"inputTokens"`
				CachedInputTokens     int64 `json:"cachedInputTokens"`
				CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
				OutputTokens          int64 `json:"outputTokens"`
			} `json:"last"`
		} `json:"tokenUsage"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	l := p.TokenUsage.Last
	t.input += l.InputTokens
	t.cached += l.CachedInputTokens
	t.cacheWrite += l.CacheWriteInputTokens
	t.output += l.OutputTokens
	t.seen = true
}

// turn is the ended turn's usage (R-USE-1) and starts the next one's sum.
// Codex counts cached input inside inputTokens; R-USE-2 reports input
// without it. Codex reports no cost (R-USE-3).
func (t *turnTokens) turn(windows []cliruntime.RateWindow) *cliruntime.TurnUsage {
	u := &cliruntime.TurnUsage{Windows: windows}
	if t.seen && t.input|t.cached|t.cacheWrite|t.output != 0 {
		in := t.input - t.cached - t.cacheWrite
		if in < 0 {
			in = 0
		}
		u.Models = []cliruntime.ModelUsage{{Model: t.model, InputTokens: in, OutputTokens: t.output,
			CacheReadTokens: t.cached, CacheWriteTokens: t.cacheWrite}}
	}
	t.input, t.cached, t.cacheWrite, t.output, t.seen = 0, 0, 0, 0, false
	if u.Empty() {
		return nil
	}
	return u
}

// list is the last windows report as rate windows (R-USE-5), nil when it
// named none.
func (w *rateWindows) list() []cliruntime.RateWindow {
	var out []cliruntime.RateWindow
	for _, x := range []struct {
		name string
		w    *window
	}{{"primary", w.primary}, {"secondary", w.secondary}} {
		if x.w == nil {
			continue
		}
		rw := cliruntime.RateWindow{Name: x.name, UsedPercent: x.w.UsedPercent, WindowMinutes: x.w.WindowDurationMins}
		if x.w.ResetsAt > 0 && x.w.ResetsAt < 1e11 {
			r := time.Unix(int64(x.w.ResetsAt), 0).UTC()
			rw.ResetsAt = &r
		}
		out = append(out, rw)
	}
	return out
}
