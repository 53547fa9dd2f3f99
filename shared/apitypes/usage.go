package apitypes

import "time"

// UsageTurn is one turn's consumption by one model, as the agent recorded
// it at the turn's end (docs/rules/usage.md, R-USE-1). A turn that used
// two models is two rows with one Turn.
type UsageTurn struct {
	RunRef string `json:"run_ref"`
	// Seq numbers the run's usage rows from 1; (run_ref, seq) is the row's
	// identity, so a repeated push stores it once (R-USE-6).
	Seq uint64 `json:"seq"`
	// Turn is the seq of its turn's first row: the rows of one turn (one
	// per model) share it.
	Turn       uint64    `json:"turn"`
	Tenant     string    `json:"tenant"`
	NodeID     string    `json:"node_id"`
	Tool       string    `json:"tool"`
	ProfileRef string    `json:"profile_ref"`
	Model      string    `json:"model,omitempty"`
	Generation uint32    `json:"generation"`
	At         time.Time `json:"at"`
	// InputTokens excludes cache reads and writes (R-USE-2).
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	// CostUSD is the tool's own figure, absent when it reports none
	// (R-USE-3).
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// RateLimits are the account's windows as the tool reported them by
	// this turn's end (R-USE-5).
	RateLimits []RateWindow `json:"rate_limits,omitempty"`
	// Limit is the limit the turn ended on, if any (R-LIM-1).
	Limit *Limit `json:"limit,omitempty"`
}

// RateWindow is one rate-limit window of an account (R-USE-5).
type RateWindow struct {
	Name          string     `json:"name"`
	UsedPercent   float64    `json:"used_percent"`
	WindowMinutes int        `json:"window_minutes,omitempty"`
	ResetsAt      *time.Time `json:"resets_at,omitempty"`
}

// UsageTotals sums usage rows: a run's usage in its row, and each group of
// GET /usage (R-USE-4).
type UsageTotals struct {
	// Turns counts the turns that reported usage.
	Turns            int64 `json:"turns"`
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	// CostUSD sums the costs reported; CostTurnsUnknown counts the turns
	// whose tool reported none, so a reader knows the sum is partial.
	CostUSD          float64 `json:"cost_usd"`
	CostTurnsUnknown int64   `json:"cost_turns_unknown"`
}

// Add adds one row; a turn's first row (Seq == Turn) counts the turn, so
// a turn of two models is two rows and one turn.
func (t *UsageTotals) Add(u UsageTurn) {
	if u.Seq == u.Turn {
		t.Turns++
		if u.CostUSD == nil {
			t.CostTurnsUnknown++
		}
	}
	t.InputTokens += u.InputTokens
	t.OutputTokens += u.OutputTokens
	t.CacheReadTokens += u.CacheReadTokens
	t.CacheWriteTokens += u.CacheWriteTokens
	if u.CostUSD != nil {
		t.CostUSD += *u.CostUSD
	}
}

// UsageGroup is one row of GET /usage: the totals of one key.
type UsageGroup struct {
	// Key is the profile ref, node id, tool, model, or the UTC day
	// (YYYY-MM-DD) the rows are grouped by.
	Key string `json:"key"`
	UsageTotals
}

// UsageAccount is one account's (provider profile's) latest rate-limit
// report (R-USE-5).
type UsageAccount struct {
	ProfileRef string       `json:"profile_ref"`
	Tool       string       `json:"tool"`
	At         time.Time    `json:"at"`
	RateLimits []RateWindow `json:"rate_limits"`
	// Limit is set when the account's latest turn ended on a limit.
	Limit *Limit `json:"limit,omitempty"`
}

// UsageReport is GET /usage.
type UsageReport struct {
	GroupBy  string         `json:"group_by"`
	From     *time.Time     `json:"from,omitempty"`
	To       *time.Time     `json:"to,omitempty"`
	Groups   []UsageGroup   `json:"groups"`
	Total    UsageTotals    `json:"total"`
	Accounts []UsageAccount `json:"accounts"`
}
