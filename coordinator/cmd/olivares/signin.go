package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

type profileLoginOpts struct {
	code    string
	timeout time.Duration
}

// apiKeyWay is the alternative to a sign-in (R-ACCT-7), in CLI terms.
func apiKeyWay(name string) string {
	return fmt.Sprintf("or give it an API key: olivares vault add KEYNAME, then olivares profile update %s --api-key KEYNAME", name)
}

// profileLogin is R-ACCT-5: the tool's own sign-in, run on the profile's
// node and relayed here.
func profileLogin() *command {
	var o profileLoginOpts
	return &command{
		name: "profile login", arg: "profile ref or name",
		usage: `olivares profile login REF|NAME [--code CODE] [--timeout 10m] [--json]
    Sign the profile's account in with its tool's own sign-in, run on the
    profile's node under its home (no shell there needed). Claude Code: open
    the URL printed, sign in, and paste the code the page shows when asked
    (or pass it with --code). Codex: open the URL in any browser and enter
    the code printed; this command follows until Codex says it is done.
    Gemini CLI, Grok and OpenCode have no sign-in to relay: give them an API
    key (olivares vault add, then profile update --api-key). Exits 0 once
    the account is signed in. Ctrl-C cancels the sign-in on the node.
`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.code, "code", "", "the code the sign-in page showed (Claude Code); asked for on the input when not given")
			fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up (and cancel the sign-in) after this long")
		},
		check: func(c *call) error {
			if o.timeout <= 0 {
				return usageError{errors.New("profile login: --timeout must be positive")}
			}
			return nil
		},
		run: func(ctx context.Context, c *call) error {
			ref, err := resolveProfile(ctx, c, c.arg)
			if err != nil {
				return err
			}
			p, err := c.cl.Profile(ctx, ref)
			if err != nil {
				return err
			}
			a, err := c.cl.StartSignin(ctx, ref)
			if err != nil {
				return err
			}
			// say goes to the output, or to the error stream with --json,
			// whose output is the final attempt alone.
			say := func(format string, args ...any) {
				w := c.out
				if c.json {
					w = c.err
				}
				fmt.Fprintf(w, format+"\n", args...)
			}
			say("sign-in %s of profile %s (%s) started on node %s", a.ID, p.Name, p.Tool, p.NodeID)
			wctx, cancel := context.WithTimeout(ctx, o.timeout)
			defer cancel()
			defer func() {
				if !a.Done() {
					// Ctrl-C or the timeout: nothing is left running on the node.
					cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer ccancel()
					c.cl.CancelSignin(cctx, ref, a.ID)
				}
			}()
			in := bufio.NewReader(c.in)
			shown, sent := "", false
			tick := time.NewTicker(waitPoll)
			defer tick.Stop()
			for !a.Done() {
				switch {
				case a.State == apitypes.SigninWaitingForCode && !sent:
					if shown != a.URL {
						say("Open this URL, sign in, and copy the code the page shows:\n\n  %s\n", a.URL)
						shown = a.URL
					}
					code := o.code
					if code == "" {
						say("Paste the code, then Enter:")
						line, rerr := in.ReadString('\n')
						code = strings.TrimSpace(line)
						if code == "" && rerr != nil {
							return fmt.Errorf("profile login: no code on the input; run it again in a terminal, or pass --code")
						}
					}
					got, err := c.cl.SigninCode(wctx, ref, a.ID, code)
					if err != nil {
						return err
					}
					a = got
					sent = true
					continue
				case a.State == apitypes.SigninWaitingForBrowser && shown != a.URL+a.UserCode:
					say("Open this URL in any browser, sign in, and enter the code %s:\n\n  %s\n\nWaiting for the sign-in to complete…", a.UserCode, a.URL)
					shown = a.URL + a.UserCode
				}
				select {
				case <-wctx.Done():
					return fmt.Errorf("the sign-in of profile %s did not finish within %s; it is cancelled; run olivares profile login %s again", p.Name, o.timeout, p.Name)
				case <-tick.C:
				}
				got, err := c.cl.Signin(wctx, ref, a.ID)
				switch {
				case err == nil:
					a = got
				case wctx.Err() == nil:
					return err
				}
			}
			if a.State != apitypes.SigninSignedIn {
				return fmt.Errorf("the sign-in of profile %s %s: %s; run olivares profile login %s again, %s", p.Name, a.State, a.Message, p.Name, apiKeyWay(p.Name))
			}
			return c.emit(a, func() {
				who := ""
				if a.Account != nil && a.Account.Email != "" {
					who = " as " + a.Account.Email
					if a.Account.Plan != "" {
						who += " (" + a.Account.Plan + ")"
					}
				}
				fmt.Fprintf(c.out, "profile %s is signed in%s; %s\n", p.Name, who, a.Message)
			})
		},
	}
}
