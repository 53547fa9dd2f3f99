package apitypes

import "time"

// Attention reasons (R-ATTN-1): why a run waits for a person. A run that
// needs nothing has attention null.
const (
	AttentionNeedsDecision = "needs_decision"
	AttentionNeedsApproval = "needs_approval"
	AttentionLimited       = "limited"
	AttentionFailed        = "failed"
	AttentionNeedsInput    = "needs_input"
	AttentionStalled       = "stalled"
)

// AttentionReasons lists the reasons in precedence order (R-ATTN-2): the
// first that applies is the run's.
var AttentionReasons = []string{AttentionNeedsDecision, AttentionNeedsApproval, AttentionLimited, AttentionFailed, AttentionStalled, AttentionNeedsInput}

// AttentionAny is the filter value that matches every non-null reason
// (R-ATTN-4).
const AttentionAny = "any"

// AttentionOf derives a run's attention from what the agent observed
// (R-ATTN-1, R-ATTN-2): its state, pending requests, limit and last error,
// at the instant now (a limit whose reset has passed is no longer in
// force), and whether its running turn stalled (R-ATTN-6). It is a pure
// function: the index never stores the result.
func AttentionOf(r Run, now time.Time) string {
	switch {
	case r.PendingRequests > 0 && r.State != StateReleased:
		return AttentionNeedsDecision
	case r.State == StatePendingApproval:
		return AttentionNeedsApproval
	case r.Limit != nil && r.State != StateReleased && (r.Limit.ResetsAt == nil || r.Limit.ResetsAt.After(now)):
		return AttentionLimited
	case r.State == StateFailed,
		r.LastError != nil && (r.State == StateIdle || r.State == StateStopped):
		return AttentionFailed
	case r.State == StateRunning && r.StalledSince != nil:
		return AttentionStalled
	case r.State == StateIdle:
		return AttentionNeedsInput
	}
	return ""
}

// WithAttention is r with its attention field set for the instant now.
func WithAttention(r Run, now time.Time) Run {
	r.Attention = nil
	if a := AttentionOf(r, now); a != "" {
		r.Attention = &a
	}
	return r
}

// AttentionMatches reports whether a run's reason a ("" for none) passes
// the filter f: "" passes everything, "any" every reason.
func AttentionMatches(f, a string) bool {
	switch f {
	case "":
		return true
	case AttentionAny:
		return a != ""
	}
	return a == f
}
