package claude_test

import (
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/cliruntime/cliruntimetest"
	"github.com/olivares-dev/olivares/agent/drivers/claude"
)

// TestCommands: launch and resume command lines and the from-scratch env
// (R-TR-3, R-RES-1/2, R-PCS-15, R-DRV-5).
func TestCommands(t *testing.T) {
	cliruntimetest.RunCommands(t, claude.New(), "testdata/command/*.txt")
}

// TestSessions: frames recorded in real-clis.md §1 → events; Encode and
// Interrupt byte-exact (R-IN-2, R-INT-1/2, R-RES-2, R-LIM-5/9); a turn that
// ends well carries its result text, the list's preview (R-LIST-8).
func TestSessions(t *testing.T) {
	cliruntimetest.RunScripts(t, claude.New(), "testdata/session/*.txt")
}

// TestTransport: the --print form never runs on a PTY (R-TR-3).
func TestTransport(t *testing.T) {
	d := claude.New()
	if got, want := d.LaunchTransport(), cliruntime.TransportStdio; got != want {
		t.Errorf("LaunchTransport() = %q, want %q", got, want)
	}
	if got, want := d.Kind(), cliruntime.KindClaude; got != want {
		t.Errorf("Kind() = %q, want %q", got, want)
	}
}

func FuzzObserve(f *testing.F) {
	cliruntimetest.FuzzObserve(f, claude.New(), "678b5e91-2a3b-4c5d-8e9f-0a1b2c3d4e5f", "testdata/session/*.txt")
}
