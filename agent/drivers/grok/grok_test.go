package grok_test

import (
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/cliruntime/cliruntimetest"
	"github.com/olivares-dev/olivares/agent/drivers/grok"
)

// TestCommands: `grok agent stdio` and the from-scratch env (R-TR-4, R-DRV-5).
func TestCommands(t *testing.T) {
	cliruntimetest.RunCommands(t, grok.New(), "testdata/command/*.txt")
}

// TestSessions: ACP messages → events; requests byte-exact (R-IN-2,
// R-INT-1/2, R-RES-1/2, R-HW-4).
func TestSessions(t *testing.T) {
	cliruntimetest.RunScripts(t, grok.New(), "testdata/session/*.txt")
}

func TestTransport(t *testing.T) {
	d := grok.New()
	if got, want := d.LaunchTransport(), cliruntime.TransportStdio; got != want {
		t.Errorf("LaunchTransport() = %q, want %q", got, want)
	}
	if got, want := d.Kind(), cliruntime.KindGrok; got != want {
		t.Errorf("Kind() = %q, want %q", got, want)
	}
}

func FuzzObserve(f *testing.F) {
	cliruntimetest.FuzzObserve(f, grok.New(), "60082747-aaaa-4bbb-8ccc-dddddddddddd", "testdata/session/*.txt")
}
