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
