package registry

import (
	"errors"
	"testing"
)

// TestIsolationPolicy: a profile's isolation is native, sandbox or
// container, its network host or none, and none needs an isolating runner
// (R-TR-7: a native run shares the node's network).
func TestIsolationPolicy(t *testing.T) {
	for _, tc := range []struct {
		iso, network string
		ok           bool
	}{
		{"", "", true},
		{"native", "host", true},
		{"sandbox", "", true},
		{"sandbox", "none", true},
		{"container", "none", true},
		{"", "none", false},
		{"native", "none", false},
		{"vm", "", false},
		{"sandbox", "lan", false},
	} {
		err := ProfilePolicy{Isolation: tc.iso, Network: tc.network}.check("codex")
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadPolicy)) {
			t.Errorf("isolation %q network %q: got %v, want ok=%v (else ErrBadPolicy)", tc.iso, tc.network, err, tc.ok)
		}
	}
}
