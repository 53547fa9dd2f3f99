package supervisor

import "github.com/olivares-dev/olivares/shared/apitypes"

// Facts are the observations a run's state is derived from (R-STATE-1): the
// agent's process facts and the lifecycle record. Nothing in them is a
// state a client wrote.
type Facts struct {
	Released        bool // cleanup succeeded (R-CLN-3/5)
	PendingApproval bool // the launch waits for a person
	// Started: a generation was spawned (or its spawn was attempted).
	Started bool
	// Live: the current generation's process runs under this agent.
	Live bool
	// Handshaken: the live generation completed its protocol handshake.
	Handshaken bool
	// TurnActive: the live generation has a turn running or queued.
	TurnActive bool
	// StopRequested: an operator stop was asked of the last generation.
	StopRequested bool
	// ExitCode and Signal are the last generation's observed exit.
	ExitCode *int
	Signal   string
	// FailReason is set when the last generation ended without a normal
	// exit: process_lost, spawn_failed, conversation_unavailable,
	// handshake_failed.
	FailReason string
}

// Derive is R-STATE-3's table, first match wins. It is a pure function
// (R-STATE-8); reason is set only for failed.
func Derive(f Facts) (state, reason string) {
	switch {
	case f.Released:
		return apitypes.StateReleased, ""
	case f.PendingApproval:
		return apitypes.StatePendingApproval, ""
	case f.Live && !f.Handshaken:
		return apitypes.StateStarting, ""
	case f.Live && f.TurnActive:
		return apitypes.StateRunning, ""
	case f.Live:
		return apitypes.StateIdle, ""
	case !f.Started:
		// Created, spawn not attempted yet.
		return apitypes.StateStarting, ""
	case f.FailReason != "":
		return apitypes.StateFailed, f.FailReason
	case f.StopRequested:
		// An operator stop: whatever the exit (143, SIGKILL after the
		// grace), the run stopped as asked (R-STATE-3 row 7).
		return apitypes.StateStopped, ""
	case f.ExitCode != nil && *f.ExitCode == 0:
		return apitypes.StateStopped, ""
	case f.ExitCode != nil:
		return apitypes.StateFailed, apitypes.ReasonExitNonZero
	case f.Signal != "":
		return apitypes.StateFailed, apitypes.ReasonSignal
	default:
		// Ended with neither an exit nor a reason: lost (R-STATE-6).
		return apitypes.StateFailed, apitypes.ReasonProcessLost
	}
}
