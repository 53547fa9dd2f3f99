package opencode_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/cliruntime/cliruntimetest"
	"github.com/olivares-dev/olivares/agent/drivers/opencode"
)

// TestCommands: `opencode acp` and the from-scratch env under the profile
// home (R-DRV-5, Q-36).
func TestCommands(t *testing.T) {
	cliruntimetest.RunCommands(t, opencode.New(), "testdata/command/*.txt")
}

// TestSessions: ACP as OpenCode 1.18.33 speaks it → events; requests
// byte-exact (R-IN-2, R-INT-1/2, R-RES-1/2, R-HW-4). The recv lines are
// trimmed copies of what the real binary printed.
func TestSessions(t *testing.T) {
	cliruntimetest.RunScripts(t, opencode.New(), "testdata/session/*.txt")
}

func TestTransport(t *testing.T) {
	d := opencode.New()
	if got, want := d.LaunchTransport(), cliruntime.TransportStdio; got != want {
		t.Errorf("LaunchTransport() = %q, want %q", got, want)
	}
	if got, want := d.Kind(), cliruntime.KindOpenCode; got != want {
		t.Errorf("Kind() = %q, want %q", got, want)
	}
}

func FuzzObserve(f *testing.F) {
	cliruntimetest.FuzzObserve(f, opencode.New(), "ses_dc537faa3ffecqHIie204Atr7P", "testdata/session/*.txt")
}

// TestCheckID: OpenCode ids are ses_ and letters and digits (real-clis.md
// §4); anything else is refused before a process starts (R-RES-2).
func TestCheckID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want error
	}{
		{"ses_dc537faa3ffecqHIie204Atr7P", nil},
		{"ses_1", nil},
		{"", cliruntime.ErrNoConversation},
		{"ses_", cliruntime.ErrBadConversationID},
		{"ses", cliruntime.ErrBadConversationID},
		{"be3ea9ed-a9f7-43af-82cb-e395911bdc26", cliruntime.ErrBadConversationID},
		{"ses_a-b", cliruntime.ErrBadConversationID},
		{"ses_a/../b", cliruntime.ErrBadConversationID},
		{"ses_ab\n", cliruntime.ErrBadConversationID},
		{"-ses_ab", cliruntime.ErrBadConversationID},
		{"ses_" + strings.Repeat("a", 128), nil},
		{"ses_" + strings.Repeat("a", 129), cliruntime.ErrBadConversationID},
	} {
		if err := opencode.CheckID(tc.id); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("CheckID(%q) = %v, want %v", tc.id, err, tc.want)
		}
	}
}
