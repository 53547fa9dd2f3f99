package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// sessionContinueAtReset: continue a run by itself once its limit resets
// (docs/rules/usage.md).
func sessionContinueAtReset() *command {
	var message string
	var cancel bool
	return &command{
		name: "session continue-at-reset", arg: "run ref",
		usage: `olivares session continue-at-reset REF [--message TEXT] [--cancel] [--json]
    Continue a session stopped on a limit by itself once the limit resets: the
    coordinator resumes its conversation and sends TEXT (default "continue"),
    and tries again later if the limit is still there. --cancel drops it.
`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&message, "message", "", `what to send once the conversation is back (default "continue")`)
			fs.BoolVar(&cancel, "cancel", false, "cancel the scheduled continue")
		},
		check: func(c *call) error {
			if cancel && message != "" {
				return usageError{fmt.Errorf("session continue-at-reset: --cancel takes no --message")}
			}
			return nil
		},
		run: func(ctx context.Context, c *call) error {
			var r apitypes.Run
			var err error
			if cancel {
				r, err = c.cl.CancelContinueAtReset(ctx, c.arg)
			} else {
				r, err = c.cl.ContinueAtReset(ctx, c.arg, message)
			}
			if err != nil {
				return err
			}
			return c.emit(r, func() {
				if r.ScheduledContinueAt == nil {
					fmt.Fprintf(c.out, "%s: nothing scheduled\n", r.RunRef)
					return
				}
				fmt.Fprintf(c.out, "%s continues at %s\n", r.RunRef, stamp(*r.ScheduledContinueAt))
			})
		},
	}
}

// sessionOnLimit runs one step of an on_limit plan now (R-ONL-7).
func sessionOnLimit() *command {
	return &command{
		name: "session on-limit", arg: "run ref and step", nargs: 2,
		usage: `olivares session on-limit REF STEP [--json]
    Run one step for a session stopped on a usage limit, now, as its
    profile's on_limit plan would: move:PROFILE (stop, move the Claude Code
    conversation to that account, resume it and send "continue"),
    handoff:PROFILE (hand the work off with the handoff summary) or
    continue_at_reset. A step that cannot apply says why and changes nothing.
`,
		run: func(ctx context.Context, c *call) error {
			r, err := c.cl.OnLimitStep(ctx, c.arg, c.pos[1])
			if err != nil {
				return err
			}
			return c.emit(r, func() {
				if n := len(r.OnLimit); n > 0 {
					fmt.Fprintf(c.out, "%s: %s\n", r.RunRef, onLimitLine(r.OnLimit[n-1]))
					return
				}
				fmt.Fprintf(c.out, "%s %s\n", r.RunRef, runState(r))
			})
		},
	}
}

// onLimitLine is one entry of a run's on_limit history as a person reads
// it: "limited on claude-a (resets 14:00) at 13:02".
func onLimitLine(e apitypes.OnLimitEntry) string {
	var s string
	switch e.Outcome {
	case apitypes.OnLimitLimited:
		s = "limited on " + e.ProfileName
		if e.ResetsAt != nil {
			s += " (resets " + stamp(*e.ResetsAt) + ")"
		}
	case apitypes.OnLimitMoved:
		s = "moved to " + e.ToName
	case apitypes.OnLimitHandedOff:
		s = "handed off to " + e.ToName + " as " + e.NewRunRef
	case apitypes.OnLimitWaiting:
		s = "waits for the reset"
		if e.ResetsAt != nil {
			s += ", continues at " + stamp(*e.ResetsAt)
		}
	case apitypes.OnLimitSkipped:
		s = "skipped " + e.Step + ": " + e.Reason
	default:
		s = e.Outcome
	}
	if e.By == "person" {
		s += ", by a person"
	}
	return s + " at " + stamp(e.At)
}
