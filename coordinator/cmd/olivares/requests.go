package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The tools' requests on a run (docs/rules/requests.md): what they wait on,
// and the answer a person gives.

func sessionRequests() *command {
	return &command{
		name: "session requests", arg: "run ref",
		usage: `olivares session requests REF [--json]
    The tool's requests waiting for a person, what each asks (the command and
    its directory, the files and the diff, the question), its options and the
    command that answers it; then the last settled ones and who settled them.
`,
		run: func(ctx context.Context, c *call) error {
			res, err := c.cl.Requests(ctx, c.arg)
			if err != nil {
				return err
			}
			return c.emit(res, func() { printRequests(c.out, c.arg, res.Items) })
		},
	}
}

type sessionAnswerOpts struct {
	deny, always bool
	option, text string
}

func sessionAnswer() *command {
	var o sessionAnswerOpts
	return &command{
		name: "session answer", arg: "run ref and request id", nargs: 2,
		usage: `olivares session answer REF ID [--deny] [--always] [--option ID] [--text T] [--json]
    Answer a request of the tool (olivares session requests REF lists them):
    allow once by default, --always for the rest of the tool's session,
    --deny (with --text, the reason the tool is told), --option one of the
    request's own options, --text a question's answer. The first answer
    wins; a later one is refused, naming who answered first.
`,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&o.deny, "deny", false, "deny the request (default: allow it once)")
			fs.BoolVar(&o.always, "always", false, "allow it for the rest of the tool's session (its \"allow for this session\" option)")
			fs.StringVar(&o.option, "option", "", "answer with this option id of the request (olivares session requests lists them)")
			fs.StringVar(&o.text, "text", "", "the answer to a question, or with --deny the reason the tool is told")
		},
		check: func(c *call) error {
			switch {
			case o.always && o.deny:
				return usageError{errors.New("session answer: --deny and --always contradict each other")}
			case o.always && c.set["option"]:
				return usageError{errors.New("session answer: give --always or --option, not both")}
			case o.deny && c.set["option"]:
				return usageError{errors.New("session answer: give --deny or --option, not both (an option says whether it denies)")}
			}
			return nil
		},
		run: func(ctx context.Context, c *call) error { return answerRequest(ctx, c, o) },
	}
}

// answerRequest sends the answer the flags mean: allow once unless told
// otherwise. The request is read first, so that --option and --always are
// checked against the options it offers.
func answerRequest(ctx context.Context, c *call, o sessionAnswerOpts) error {
	ref, id := c.pos[0], c.pos[1]
	list, err := c.cl.Requests(ctx, ref)
	if err != nil {
		return err
	}
	var req *apitypes.RunRequest
	for i := range list.Items {
		if list.Items[i].ID == id {
			req = &list.Items[i]
		}
	}
	if req == nil {
		return notFound{fmt.Errorf("run %s has no request %s; olivares session requests %s lists them", ref, id, ref)}
	}
	a := apitypes.RequestAnswer{Decision: apitypes.DecisionAllow, OptionID: o.option, Text: o.text}
	switch {
	case o.deny:
		a.Decision = apitypes.DecisionDeny
	case o.option != "":
		found := false
		for _, opt := range req.Options {
			if opt.ID == o.option {
				a.Decision, found = opt.Decision, true
			}
		}
		if !found {
			return usageError{fmt.Errorf("session answer: request %s has no option %q; olivares session requests %s lists its options", id, o.option, ref)}
		}
	case o.text != "":
		a.Decision = apitypes.DecisionAnswer
	case o.always:
		for _, opt := range req.Options {
			if opt.Decision == apitypes.DecisionAllow && opt.Session {
				a.OptionID = opt.ID
				break
			}
		}
		if a.OptionID == "" {
			return usageError{fmt.Errorf("session answer: request %s offers no \"allow for this session\"; answer it without --always", id)}
		}
	}
	got, err := c.cl.AnswerRequest(ctx, ref, id, a)
	if err != nil {
		return err
	}
	return c.emit(got, func() {
		opt := ""
		if got.OptionID != "" {
			opt = " (" + got.OptionID + ")"
		}
		fmt.Fprintf(c.out, "%s: %s%s by %s\n", got.ID, got.Decision, opt, got.By)
	})
}

// printRequests is `olivares session requests REF`: a table of them all,
// then each pending one with what it asks and the commands that answer it.
func printRequests(out io.Writer, ref string, items []apitypes.RunRequest) {
	if len(items) == 0 {
		fmt.Fprintln(out, "no requests")
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REQUEST\tKIND\tSTATE\tASKED\tTITLE")
	for _, r := range items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Kind, requestState(r), stamp(r.AskedAt), r.Title)
	}
	tw.Flush()
	for _, r := range items {
		if r.State == apitypes.RequestPending {
			fmt.Fprintln(out)
			for _, l := range requestLines(ref, r) {
				fmt.Fprintln(out, l)
			}
		}
	}
}

// requestState is "pending", "settled allow by prn_…", "expired".
func requestState(r apitypes.RunRequest) string {
	s := r.State
	if r.Decision != "" {
		s += " " + r.Decision
	}
	if r.By != "" {
		s += " by " + r.By
	}
	return s
}

// requestLines is what a person needs to decide on a pending request, and
// how to answer it (R-REQ-1, R-REQ-14), one line each.
func requestLines(ref string, r apitypes.RunRequest) []string {
	lines := []string{fmt.Sprintf("%s asks (%s, %s): %s", r.ID, r.Kind, dash(r.Tool), r.Title)}
	add := func(format string, a ...any) { lines = append(lines, fmt.Sprintf(format, a...)) }
	d := r.Detail
	if d.Command != "" {
		add("  command: %s", d.Command)
	}
	if d.Cwd != "" {
		add("  in:      %s", d.Cwd)
	}
	if len(d.Files) > 0 {
		add("  files:   %s", strings.Join(d.Files, ", "))
	}
	if d.Question != "" {
		add("  says:    %s", d.Question)
	}
	if d.Diff != "" {
		for _, l := range strings.Split(strings.TrimSuffix(d.Diff, "\n"), "\n") {
			add("  | %s", l)
		}
	}
	if r.ExpiresAt != nil {
		add("  denied at %s unless answered", stamp(*r.ExpiresAt))
	}
	var opts []string
	for _, o := range r.Options {
		opts = append(opts, fmt.Sprintf("%s (%s: %s)", o.ID, o.Decision, o.Label))
	}
	add("  options: %s", strings.Join(opts, "; "))
	for i, a := range answerCommands(ref, r) {
		if i == 0 {
			add("  answer:  %s", a)
		} else {
			add("           %s", a)
		}
	}
	return lines
}

// answerCommands is the commands that answer r, each with what it does.
func answerCommands(ref string, r apitypes.RunRequest) []string {
	base := "olivares session answer " + ref + " " + r.ID
	if r.Detail.Text || r.Kind == apitypes.RequestQuestion || r.Kind == apitypes.RequestElicitation {
		return []string{base + " --text '...'", base + " --option ID", base + " --deny"}
	}
	out := []string{base + "   (allow once)"}
	for _, o := range r.Options {
		if o.Decision == apitypes.DecisionAllow && o.Session {
			out = append(out, base+" --always")
			break
		}
	}
	return append(out, base+" --deny")
}

// answerHint is the commands that answer r, on one line.
func answerHint(ref string, r apitypes.RunRequest) string {
	return strings.Join(answerCommands(ref, r), "  |  ")
}

// settledLine is a request's settlement or expiry on one line.
func settledLine(r apitypes.RunRequest) string {
	if r.State == apitypes.RequestSettled {
		reason := ""
		if r.Reason != "" {
			reason = " (" + r.Reason + ")"
		}
		return fmt.Sprintf("request %s: %s by %s%s: %s", r.ID, r.Decision, dash(r.By), reason, r.Title)
	}
	return fmt.Sprintf("request %s %s: %s: %s", r.ID, r.State, dash(r.Reason), r.Title)
}
