package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The Codex supervision commands (R-CX-CLI-1..10): thin clients of the
// catalog routes. No command has an archived option (R-CX-CLI-7).
func codexCommands() []*command {
	return []*command{
		codexCmd("codex sessions", "", `olivares codex sessions [--search T] [--host ID] [--limit N] [--cursor C] [--json]
    The fleet catalog of native Codex threads, grouped by host. Search is on
    titles only; --limit is per host (1..100, default 50); a --cursor
    continues one host's scan and needs --host.
`),
		codexCmd("codex continue", "thread id", `olivares codex continue THREAD [--host ID] [--json]
    Continue a stored or idle thread as a supervised codex run on its host
    (or open the run already continuing it).
`),
		codexCmd("codex archive", "thread id", `olivares codex archive THREAD --confirm-no-other-runner [--host ID] [--json]
    Archive a stored or idle thread, once no other Codex client runs it.
    Codex commands also take --url URL, --token T and --timeout MS (default
    75000 for sessions, 30000 for continue and archive). Their exit status
    is 0 on success, 1 for an API or host failure, 2 for a usage error.
`),
	}
}

func codexCmd(name, arg, usage string) *command {
	o := &codexOpts{cmd: name}
	return &command{
		name: name, arg: arg, usage: usage, noLogin: true,
		flags: o.define,
		check: func(c *call) error {
			o.jsonOut = c.json
			return o.check(c.pos, c.set)
		},
		run: func(ctx context.Context, c *call) error { return runCodex(ctx, o, c.pos, c.out) },
	}
}

// Default timeouts (R-CX-CLI-3).
const (
	codexSessionsTimeout = 75_000 * time.Millisecond
	codexActionTimeout   = 30_000 * time.Millisecond
)

type codexOpts struct {
	cmd                string
	url, token         string
	timeoutMS          int
	expectFinal        bool
	host               string
	search, cursor     string
	limit              int
	confirmNoOtherRun  bool
	jsonOut            bool
	explicitTimeoutSet bool
}

// define defines the flags of a codex command.
func (o *codexOpts) define(fs *flag.FlagSet) {
	fs.StringVar(&o.url, "url", "", "coordinator API URL (default: the saved login's)")
	fs.StringVar(&o.token, "token", "", "bearer token (default: the saved login's)")
	fs.IntVar(&o.timeoutMS, "timeout", 0, "timeout in milliseconds (default 75000 for sessions, 30000 otherwise)")
	// R-CX-CLI-3: accepted, with no effect on these calls.
	fs.BoolVar(&o.expectFinal, "expect-final", false, "accepted for compatibility; no effect on these calls")
	fs.StringVar(&o.host, "host", "", "host (node id)")
	switch o.cmd {
	case "codex sessions":
		fs.StringVar(&o.search, "search", "", "title text to look for, case-insensitively")
		fs.IntVar(&o.limit, "limit", 50, "rows per host, 1..100")
		fs.StringVar(&o.cursor, "cursor", "", "continue a host's scan (needs --host)")
	case "codex archive":
		fs.BoolVar(&o.confirmNoOtherRun, "confirm-no-other-runner", false, "confirm that no other Codex client runs this thread")
	}
}

// timeout is R-CX-CLI-3's default unless --timeout was given.
func (o *codexOpts) timeout() time.Duration {
	if o.explicitTimeoutSet {
		return time.Duration(o.timeoutMS) * time.Millisecond
	}
	if o.cmd == "codex sessions" {
		return codexSessionsTimeout
	}
	return codexActionTimeout
}

// check is R-CX-CLI-10's usage errors (exit 2).
func (o *codexOpts) check(pos []string, set map[string]bool) error {
	o.explicitTimeoutSet = set["timeout"]
	if o.explicitTimeoutSet && o.timeoutMS <= 0 {
		return usageError{errors.New(o.cmd + ": --timeout must be a positive number of milliseconds")}
	}
	switch o.cmd {
	case "codex sessions":
		switch {
		case len(pos) > 0:
			return usageError{errors.New("codex sessions takes no argument")}
		case o.limit < 1 || o.limit > 100:
			return usageError{fmt.Errorf("codex sessions: --limit %d: use 1..100", o.limit)}
		case o.cursor != "" && o.host == "":
			return usageError{errors.New("codex sessions: --cursor continues one host's scan; give --host too")}
		}
	default:
		if len(pos) != 1 {
			return usageError{fmt.Errorf("%s: want exactly one thread id", o.cmd)}
		}
		if o.cmd == "codex archive" && !o.confirmNoOtherRun {
			return usageError{errors.New("codex archive: --confirm-no-other-runner is required: confirm that no other Codex client runs this thread")}
		}
	}
	return nil
}

// hostFailure: the command printed its result, but a host failed.
type hostFailure struct{ n int }

func (e hostFailure) Error() string {
	return fmt.Sprintf("%d host(s) failed; see their errors above", e.n)
}

// failure makes an API error exit 1 (R-CX-CLI-10), whatever its status,
// told in the command's terms.
func failure(cmd string, err error) error {
	var ae *apiclient.Error
	if errors.As(err, &ae) {
		return errors.New(explainText(cmd, err))
	}
	return err
}

func runCodex(ctx context.Context, o *codexOpts, pos []string, out io.Writer) error {
	creds, err := loadCreds()
	if err != nil && (o.url == "" || o.token == "") {
		return err
	}
	if err != nil {
		creds = Credentials{Tenant: "default"}
	}
	if o.url != "" {
		creds.URL = o.url
	}
	if o.token != "" {
		creds.Token = o.token
	}
	timeout := o.timeout()
	cl, err := newClient(creds, timeout)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	emit := func(v any, text func()) error {
		if o.jsonOut {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		}
		text()
		return nil
	}
	switch o.cmd {
	case "codex sessions":
		cat, err := cl.CodexThreads(ctx, apiclient.CodexThreadsQuery{Search: o.search, Host: o.host, Limit: o.limit, Cursor: o.cursor})
		if err != nil {
			return failure(o.cmd, err)
		}
		if err := emit(cat, func() { printCatalog(out, cat, o.search) }); err != nil {
			return err
		}
		failed := 0
		for _, h := range cat.Hosts {
			if h.Error != nil {
				failed++
			}
		}
		if failed > 0 {
			return hostFailure{failed}
		}
		return nil
	case "codex continue", "codex archive":
		thread := pos[0]
		host := o.host
		if host == "" {
			if host, err = supervisedHost(ctx, cl, "codex_supervision", "Codex", "enable it in a node's agent config"); err != nil {
				return failure("codex", err)
			}
		}
		if o.cmd == "codex continue" {
			r, _, err := cl.CodexContinue(ctx, host, thread)
			if err != nil {
				return failure(o.cmd, err)
			}
			return emit(r, func() {
				state := "pending"
				if r.CodexBinding != nil {
					state = r.CodexBinding.State
				}
				fmt.Fprintf(out, "run %s on %s continues thread %s (branch %s, run %s)\n", r.RunRef, r.NodeID, thread, state, r.State)
			})
		}
		res, err := cl.CodexArchive(ctx, host, thread, true)
		if err != nil {
			return failure(o.cmd, err)
		}
		return emit(res, func() { fmt.Fprintf(out, "archived thread %s on %s\n", res.ThreadID, res.Host) })
	}
	return usageError{fmt.Errorf("unknown command %q", o.cmd)}
}

func printCatalog(out io.Writer, cat apitypes.CodexCatalog, search string) {
	if len(cat.Hosts) == 0 {
		fmt.Fprintln(out, "no host has Codex supervision")
		return
	}
	for i, h := range cat.Hosts {
		if i > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "host %s (%s)\n", h.Host, dash(h.Hostname))
		if h.Error != nil {
			fmt.Fprintf(out, "  error: %s (%s)\n", h.Error.Message, h.Error.Code)
			continue
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  THREAD\tSTATE\tTITLE\tCWD\tUPDATED")
		for _, r := range h.Rows {
			title := "-"
			if r.Title != nil {
				title = *r.Title
			}
			state := r.State
			if len(r.ActiveFlags) > 0 {
				state += " (" + strings.Join(r.ActiveFlags, ", ") + ")"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", r.ThreadID, state, title, dash(r.Cwd), r.UpdatedAt.Format(time.RFC3339))
		}
		tw.Flush()
		if len(h.Rows) == 0 {
			fmt.Fprintln(out, "  (no threads)")
		}
		if h.NextCursor != "" {
			more := ""
			if search != "" {
				more = fmt.Sprintf(" --search %q", search)
			}
			fmt.Fprintf(out, "  more: olivares codex sessions --host %s%s --cursor %s\n", h.Host, more, h.NextCursor)
		}
	}
}
