package codex_test

import (
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/cliruntime/cliruntimetest"
	"github.com/olivares-dev/olivares/agent/drivers/codex"
)

// TestCommands: `codex app-server` and the from-scratch env (R-TR-4, R-DRV-5).
func TestCommands(t *testing.T) {
	cliruntimetest.RunCommands(t, codex.New(), "testdata/command/*.txt")
}

// TestSessions: messages recorded in real-clis.md §2 → events; the JSON-RPC
// requests byte-exact (R-IN-2, R-INT-1/2, R-RES-1/2, R-LIM-6/9); a turn that
// ends well carries its last agent message, the list's preview (R-LIST-8).
func TestSessions(t *testing.T) {
	cliruntimetest.RunScripts(t, codex.New(), "testdata/session/*.txt")
}

func TestTransport(t *testing.T) {
	d := codex.New()
	if got, want := d.LaunchTransport(), cliruntime.TransportStdio; got != want {
		t.Errorf("LaunchTransport() = %q, want %q", got, want)
	}
	if got, want := d.Kind(), cliruntime.KindCodex; got != want {
		t.Errorf("Kind() = %q, want %q", got, want)
	}
}

func FuzzObserve(f *testing.F) {
	cliruntimetest.FuzzObserve(f, codex.New(), "01a23643-8a79-7b72-93b2-655098698f6d", "testdata/session/*.txt")
}
