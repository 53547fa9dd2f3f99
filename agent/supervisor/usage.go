package supervisor

import (
	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"

	"time"
)

// maxUsageOutbox bounds a run's usage rows waiting for the coordinator
// (R-USE-6): a node offline for a very long time drops its oldest rows
// rather than grow its record without end.
const maxUsageOutbox = 4096

// recordUsage turns a turn's usage report into the run's usage rows (one
// per model, R-USE-1), adds them to the run's totals (R-USE-4) and queues
// them for the coordinator, in the record's one commit. lim is the limit
// the turn ended on, if any.
func (r *run) recordUsage(gen uint32, u *cliruntime.TurnUsage, lim *apitypes.Limit, now time.Time) {
	var windows []apitypes.RateWindow
	for _, w := range u.Windows {
		windows = append(windows, apitypes.RateWindow{Name: w.Name, UsedPercent: w.UsedPercent, WindowMinutes: w.WindowMinutes, ResetsAt: w.ResetsAt})
	}
	models := u.Models
	if len(models) == 0 {
		// A report of windows alone (a turn refused on a limit) is still
		// the account's latest rate-limit report (R-USE-5).
		models = []cliruntime.ModelUsage{{}}
	}
	dropped := 0
	r.updateAsync(ledger.Event{}, func(rec *record) {
		// Copy on write: a snapshot or the saver may hold the old totals
		// outside the run's lock.
		totals := apitypes.UsageTotals{}
		if rec.Usage != nil {
			totals = *rec.Usage
		}
		rec.Usage = &totals
		turn := rec.UsageSeq + 1
		for _, m := range models {
			rec.UsageSeq++
			row := apitypes.UsageTurn{RunRef: rec.RunRef, Seq: rec.UsageSeq, Turn: turn, Tenant: rec.Tenant, Tool: rec.Driver,
				ProfileRef: rec.ProfileRef, Model: m.Model, Generation: gen, At: now.UTC(),
				InputTokens: m.InputTokens, OutputTokens: m.OutputTokens, CacheReadTokens: m.CacheReadTokens,
				CacheWriteTokens: m.CacheWriteTokens, CostUSD: m.CostUSD, RateLimits: windows, Limit: lim}
			rec.Usage.Add(row)
			rec.UsageOutbox = append(rec.UsageOutbox, row)
		}
		if n := len(rec.UsageOutbox) - maxUsageOutbox; n > 0 {
			dropped = n
			rec.UsageOutbox = append([]apitypes.UsageTurn(nil), rec.UsageOutbox[n:]...)
		}
	})
	if dropped > 0 {
		r.s.o.Log.Warn("usage rows dropped: the coordinator has not taken them for too long", logging.KeyRunRef, r.ref, "rows", dropped)
	}
}

// Usage is the runs' usage rows the coordinator has not acknowledged
// (R-USE-6): every push of a run's row carries them.
type Usage struct {
	runs  *Table
	saver *saver
}

// Pending returns the usage rows of run ref the coordinator has not
// acknowledged, oldest first (R-USE-6).
func (u *Usage) Pending(ref string) []apitypes.UsageTurn {
	r, err := u.runs.get(ref)
	if err != nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]apitypes.UsageTurn(nil), r.rec.UsageOutbox...)
}

// Ack drops run ref's queued usage rows up to seq, once the coordinator
// stored them. It changes no fact of the run's row, so it neither bumps
// its rev nor notifies a change.
func (u *Usage) Ack(ref string, seq uint64) {
	r, err := u.runs.get(ref)
	if err != nil {
		return
	}
	r.mu.Lock()
	i := 0
	for i < len(r.rec.UsageOutbox) && r.rec.UsageOutbox[i].Seq <= seq {
		i++
	}
	if i == 0 {
		r.mu.Unlock()
		return
	}
	r.rec.UsageOutbox = append([]apitypes.UsageTurn(nil), r.rec.UsageOutbox[i:]...)
	r.dirty = true
	r.mu.Unlock()
	u.saver.mark(r)
}
