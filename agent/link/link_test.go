package link

import "testing"

// Exponential backoff with full jitter and a 30 s cap (R-TUN-4).
func TestBackoff(t *testing.T) {
	for attempt := 0; attempt < 40; attempt++ {
		max := BackoffBase << min(attempt, 10)
		if max > BackoffCap {
			max = BackoffCap
		}
		for range 200 {
			d := backoff(attempt)
			if d <= 0 || d > max {
				t.Fatalf("attempt %d: got %v, want (0, %v]", attempt, d, max)
			}
		}
	}
	// Full jitter: early attempts are short.
	if d := backoff(0); d > BackoffBase {
		t.Fatalf("first retry %v > %v", d, BackoffBase)
	}
}
