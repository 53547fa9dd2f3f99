package main

import (
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/link"
)

// Issue 32 finding 13: the link's line names a transport only while
// connected, and a link that is down says when it was last up.
func TestLinkText(t *testing.T) {
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		st   link.Status
		want string
	}{
		{link.Status{State: "connected", Transport: "quic", Configured: "auto", Since: at, Connects: 1}, "connected over quic (config auto) since 2026-12-05T10:00:00Z"},
		{link.Status{State: link.StateRevoked, Configured: "auto", Since: at}, "revoked since 2026-12-05T10:00:00Z: this node will not connect again (config auto)"},
		{link.Status{State: "backoff", Configured: "auto", Since: at, Connects: 2}, "backoff (config auto), last connected at 2026-12-05T10:00:00Z"},
		{link.Status{State: "connecting", Configured: "yamux", Since: at}, "connecting (config yamux), never connected since the agent started"},
	} {
		got := linkText(tt.st)
		if got != tt.want || strings.Contains(got, "over -") {
			t.Errorf("linkText(%+v) = %q, want %q", tt.st, got, tt.want)
		}
	}
}
