package registry

import (
	"time"

	"github.com/olivares-dev/olivares/agent/refusal"
)

// A profile's stall_after (R-ATTN-6): how long a running turn may write
// nothing before its run gets attention stalled.
const (
	DefaultStallAfter = 10 * time.Minute
	MinStallAfter     = time.Minute
	MaxStallAfter     = 24 * time.Hour
)

// checkStallAfter parses a stall_after as the API gives it ("" for the
// default).
func checkStallAfter(s string) (time.Duration, error) {
	if s == "" {
		return DefaultStallAfter, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < MinStallAfter || d > MaxStallAfter {
		return 0, refusal.New(ErrBadPolicy, "stall_after %q: give a duration from 1m to 24h, like 10m", s)
	}
	return d, nil
}

// StallAfter is the profile's stall_after, the default for a profile
// stored before it existed.
func (p Profile) StallAfter() time.Duration {
	if p.StallAfterSeconds <= 0 {
		return DefaultStallAfter
	}
	return time.Duration(p.StallAfterSeconds) * time.Second
}
