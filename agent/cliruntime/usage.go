package cliruntime

import "time"

// TurnUsage is what a tool reported about one turn's consumption, carried
// on that turn's EventTurnEnded (R-USE-1). A driver sets it only from the
// tool's own numbers; it never estimates.
type TurnUsage struct {
	// Models holds one entry per model the turn used, in the tool's order.
	Models []ModelUsage `json:"models,omitempty"`
	// Windows are the account's rate-limit windows as the tool last
	// reported them (Codex account/rateLimits/updated, Claude Code's
	// rate_limit_event), nil when it reported none (R-USE-5).
	Windows []RateWindow `json:"windows,omitempty"`
}

// ModelUsage is one model's tokens in a turn. InputTokens excludes cache
// reads and writes (R-USE-2): a tool that counts cached input inside its
// input total (Codex) has it subtracted by its driver.
type ModelUsage struct {
	Model            string `json:"model,omitempty"`
	InputTokens      int64  `json:"input_tokens"`
	OutputTokens     int64  `json:"output_tokens"`
	CacheReadTokens  int64  `json:"cache_read_tokens"`
	CacheWriteTokens int64  `json:"cache_write_tokens"`
	// CostUSD is the tool's own cost figure, nil when it reports none
	// (R-USE-3).
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// RateWindow is one rate-limit window of an account.
type RateWindow struct {
	// Name is the tool's name of the window (Codex primary/secondary,
	// Claude Code five_hour/seven_day).
	Name string `json:"name"`
	// UsedPercent is 0–100.
	UsedPercent float64 `json:"used_percent"`
	// WindowMinutes is the window's length when the tool says it, else 0.
	WindowMinutes int        `json:"window_minutes,omitempty"`
	ResetsAt      *time.Time `json:"resets_at,omitempty"`
}

// Empty reports whether u carries nothing worth recording.
func (u *TurnUsage) Empty() bool {
	return u == nil || (len(u.Models) == 0 && len(u.Windows) == 0)
}
