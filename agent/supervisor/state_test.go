package supervisor

import (
	"testing"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

func code(n int) *int { return &n }

// TestDerive is R-STATE-8: the R-STATE-3 table, row by row, with the
// precedence between rows.
func TestDerive(t *testing.T) {
	tests := []struct {
		name          string
		f             Facts
		state, reason string
	}{
		{"released wins over everything", Facts{Released: true, PendingApproval: true, Started: true, Live: true}, apitypes.StateReleased, ""},
		{"pending approval", Facts{PendingApproval: true}, apitypes.StatePendingApproval, ""},
		{"created, not spawned yet", Facts{}, apitypes.StateStarting, ""},
		{"spawned, handshake pending", Facts{Started: true, Live: true}, apitypes.StateStarting, ""},
		{"handshake pending wins over a queued turn", Facts{Started: true, Live: true, TurnActive: true}, apitypes.StateStarting, ""},
		{"turn in progress", Facts{Started: true, Live: true, Handshaken: true, TurnActive: true}, apitypes.StateRunning, ""},
		{"idle", Facts{Started: true, Live: true, Handshaken: true}, apitypes.StateIdle, ""},
		{"live wins over an old exit", Facts{Started: true, Live: true, Handshaken: true, ExitCode: code(1)}, apitypes.StateIdle, ""},
		{"exit 0", Facts{Started: true, ExitCode: code(0)}, apitypes.StateStopped, ""},
		{"operator stop, 143", Facts{Started: true, StopRequested: true, ExitCode: code(143)}, apitypes.StateStopped, ""},
		{"operator stop, SIGKILL after grace", Facts{Started: true, StopRequested: true, Signal: "SIGKILL"}, apitypes.StateStopped, ""},
		{"non-zero exit (R-EXIT-5)", Facts{Started: true, ExitCode: code(1)}, apitypes.StateFailed, apitypes.ReasonExitNonZero},
		{"unrequested signal", Facts{Started: true, Signal: "SIGSEGV"}, apitypes.StateFailed, apitypes.ReasonSignal},
		{"lost (R-STATE-6)", Facts{Started: true, FailReason: apitypes.ReasonProcessLost}, apitypes.StateFailed, apitypes.ReasonProcessLost},
		{"lost during a stop is still lost", Facts{Started: true, StopRequested: true, FailReason: apitypes.ReasonProcessLost}, apitypes.StateFailed, apitypes.ReasonProcessLost},
		{"spawn failed", Facts{Started: true, FailReason: apitypes.ReasonSpawnFailed}, apitypes.StateFailed, apitypes.ReasonSpawnFailed},
		{"ended without any fact", Facts{Started: true}, apitypes.StateFailed, apitypes.ReasonProcessLost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, reason := Derive(tt.f)
			if state != tt.state || reason != tt.reason {
				t.Errorf("Derive(%+v) = %q, %q; want %q, %q", tt.f, state, reason, tt.state, tt.reason)
			}
		})
	}
}
