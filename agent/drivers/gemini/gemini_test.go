package gemini_test

import (
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/cliruntime/cliruntimetest"
	"github.com/olivares-dev/olivares/agent/drivers/gemini"
)

// TestCommands: `gemini --acp` and the from-scratch env under the profile
// home (R-DRV-5, Q-36).
func TestCommands(t *testing.T) {
	cliruntimetest.RunCommands(t, gemini.New(), "testdata/command/*.txt")
}

// TestSessions: ACP as Gemini CLI 0.61.0 speaks it → events; requests
// byte-exact (R-IN-2, R-INT-1/2, R-RES-1/2, R-HW-4). The recv lines are
// trimmed copies of what the real binary printed.
func TestSessions(t *testing.T) {
	cliruntimetest.RunScripts(t, gemini.New(), "testdata/session/*.txt")
}

func TestTransport(t *testing.T) {
	d := gemini.New()
	if got, want := d.LaunchTransport(), cliruntime.TransportStdio; got != want {
		t.Errorf("LaunchTransport() = %q, want %q", got, want)
	}
	if got, want := d.Kind(), cliruntime.KindGemini; got != want {
		t.Errorf("Kind() = %q, want %q", got, want)
	}
}

func FuzzObserve(f *testing.F) {
	cliruntimetest.FuzzObserve(f, gemini.New(), "be3ea9ed-a9f7-43af-82cb-e395911bdc26", "testdata/session/*.txt")
}
