package supervisor

import "time"

// SetInTx sets Options.inTx for the tests of package supervisor_test: a
// function run inside every record commit's transaction, with the run's
// ref (a place to stall the disk).
func SetInTx(o *Options, f func(runRef string)) { o.inTx = f }

// SetAfter sets Options.after for the tests: the ask timeout's clock.
func SetAfter(o *Options, f func(d time.Duration, fn func()) func() bool) { o.after = f }

// SetStallClock sets the stall check's timer and the clock of
// stalled_since for the tests.
func SetStallClock(o *Options, after func(d time.Duration, fn func()) func() bool, now func() time.Time) {
	o.stallAfter, o.now = after, now
}
