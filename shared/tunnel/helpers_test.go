package tunnel_test

// Test helpers of the tunnel package that tunneltest does not have. The
// PKI, listeners, sessions and the echo peer come from tunneltest.

import (
	"context"
	"testing"
	"time"
)

// testContext is bounded so that a hang fails the test instead of the run.
func testContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
