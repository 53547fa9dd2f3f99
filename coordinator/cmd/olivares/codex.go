package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The Codex supervision commands (R-CX-CLI-1..10): thin clients of the
// catalog routes. No command has an archived option (R-CX-CLI-7). Each has
// options of its own: its codexConn, and sessions its query, archive its
// confirmation.
func codexCommands() []*command {
	sess := codexConn{wait: codexSessionsTimeout}
	var q apiclient.CodexThreadsQuery
	cont, arch := codexConn{wait: codexActionTimeout}, codexConn{wait: codexActionTimeout}
	var confirmed bool
	return []*command{{
		name: "codex sessions", noLogin: true,
		usage: `olivares codex sessions [--search T] [--host ID] [--limit N] [--cursor C] [--json]
    The fleet catalog of native Codex threads, grouped by host. Search is on
    titles only; --limit is per host (1..100, default 50); a --cursor
    continues one host's scan and needs --host.
`,
		flags: func(fs *flag.FlagSet) {
			sess.define(fs)
			fs.StringVar(&q.Search, "search", "", "title text to look for, case-insensitively")
			fs.IntVar(&q.Limit, "limit", 50, "rows per host, 1..100")
			fs.StringVar(&q.Cursor, "cursor", "", "continue a host's scan (needs --host)")
		},
		check: func(c *call) error {
			switch err := sess.check(c); {
			case err != nil:
				return err
			case q.Limit < 1 || q.Limit > 100:
				return usageError{fmt.Errorf("codex sessions: --limit %d: use 1..100", q.Limit)}
			case q.Cursor != "" && sess.host == "":
				return usageError{errors.New("codex sessions: --cursor continues one host's scan; give --host too")}
			}
			return nil
		},
		run: sess.run(func(ctx context.Context, c *call, cl *apiclient.Client) error {
			q.Host = sess.host
			cat, err := cl.CodexThreads(ctx, q)
			if err != nil {
				return failure(c.cmd.name, err)
			}
			page := catalog{cmd: "codex", tool: "Codex", id: "THREAD", noun: "threads"}
			if q.Search != "" {
				page.more = fmt.Sprintf(" --search %q", q.Search)
			}
			for _, h := range cat.Hosts {
				ch := catalogHost{host: h.Host, hostname: h.Hostname, next: h.NextCursor, err: h.Error}
				for _, r := range h.Rows {
					state := r.State
					if len(r.ActiveFlags) > 0 {
						state += " (" + strings.Join(r.ActiveFlags, ", ") + ")"
					}
					ch.rows = append(ch.rows, catalogRow{r.ThreadID, state, r.Title, r.Cwd, r.UpdatedAt})
				}
				page.hosts = append(page.hosts, ch)
			}
			return page.print(c, cat)
		}),
	}, {
		name: "codex continue", arg: "thread id", noLogin: true,
		usage: `olivares codex continue THREAD [--host ID] [--json]
    Continue a stored or idle thread as a supervised codex run on its host
    (or open the run already continuing it).
`,
		flags: cont.define,
		check: cont.check,
		run: cont.run(func(ctx context.Context, c *call, cl *apiclient.Client) error {
			host, err := cont.hostOf(ctx, cl)
			if err != nil {
				return err
			}
			r, _, err := cl.CodexContinue(ctx, host, c.arg)
			if err != nil {
				return failure(c.cmd.name, err)
			}
			return c.emit(r, func() {
				state := "pending"
				if r.CodexBinding != nil {
					state = r.CodexBinding.State
				}
				fmt.Fprintf(c.out, "run %s on %s continues thread %s (branch %s, run %s)\n", r.RunRef, r.NodeID, c.arg, state, r.State)
			})
		}),
	}, {
		name: "codex archive", arg: "thread id", noLogin: true,
		usage: `olivares codex archive THREAD --confirm-no-other-runner [--host ID] [--json]
    Archive a stored or idle thread, once no other Codex client runs it.
    Codex commands also take --url URL, --token T and --timeout MS (default
    75000 for sessions, 30000 for continue and archive). Their exit status
    is 0 on success, 1 for an API or host failure, 2 for a usage error.
`,
		flags: func(fs *flag.FlagSet) {
			arch.define(fs)
			fs.BoolVar(&confirmed, "confirm-no-other-runner", false, "confirm that no other Codex client runs this thread")
		},
		check: func(c *call) error {
			if err := arch.check(c); err != nil || confirmed {
				return err
			}
			return usageError{errors.New("codex archive: --confirm-no-other-runner is required: confirm that no other Codex client runs this thread")}
		},
		run: arch.run(func(ctx context.Context, c *call, cl *apiclient.Client) error {
			host, err := arch.hostOf(ctx, cl)
			if err != nil {
				return err
			}
			res, err := cl.CodexArchive(ctx, host, c.arg, true)
			if err != nil {
				return failure(c.cmd.name, err)
			}
			return c.emit(res, func() { fmt.Fprintf(c.out, "archived thread %s on %s\n", res.ThreadID, res.Host) })
		}),
	}}
}

// Default timeouts (R-CX-CLI-3).
const (
	codexSessionsTimeout = 75_000 * time.Millisecond
	codexActionTimeout   = 30_000 * time.Millisecond
)

// codexConn is what every codex command takes besides its own options:
// whom to call and for how long, and on which host.
type codexConn struct {
	url, token  string
	timeoutMS   int
	expectFinal bool
	host        string
	// wait is the command's timeout: R-CX-CLI-3's default, or --timeout.
	wait time.Duration
}

// define defines the flags every codex command takes.
func (o *codexConn) define(fs *flag.FlagSet) {
	fs.StringVar(&o.url, "url", "", "coordinator API URL (default: the saved login's)")
	fs.StringVar(&o.token, "token", "", "bearer token (default: the saved login's)")
	fs.IntVar(&o.timeoutMS, "timeout", 0, "timeout in milliseconds (default 75000 for sessions, 30000 otherwise)")
	// R-CX-CLI-3: accepted, with no effect on these calls.
	fs.BoolVar(&o.expectFinal, "expect-final", false, "accepted for compatibility; no effect on these calls")
	fs.StringVar(&o.host, "host", "", "host (node id)")
}

// check takes --timeout when it was given; a timeout that is not positive
// is a usage error (R-CX-CLI-10, exit 2).
func (o *codexConn) check(c *call) error {
	if !c.set["timeout"] {
		return nil
	}
	if o.timeoutMS <= 0 {
		return usageError{errors.New(c.cmd.name + ": --timeout must be a positive number of milliseconds")}
	}
	o.wait = time.Duration(o.timeoutMS) * time.Millisecond
	return nil
}

// run is a codex command's run: do, with the API client of --url and
// --token (else the saved login's), within the command's timeout.
func (o *codexConn) run(do func(ctx context.Context, c *call, cl *apiclient.Client) error) func(context.Context, *call) error {
	return func(ctx context.Context, c *call) error {
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
		cl, err := newClient(creds, o.wait)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, o.wait)
		defer cancel()
		return do(ctx, c, cl)
	}
}

// hostOf is --host, or without it the one connected node with Codex
// supervision.
func (o *codexConn) hostOf(ctx context.Context, cl *apiclient.Client) (string, error) {
	if o.host != "" {
		return o.host, nil
	}
	host, err := supervisedHost(ctx, cl, "codex_supervision", "Codex", "enable it in a node's agent config")
	if err != nil {
		return "", failure("codex", err)
	}
	return host, nil
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

// catalog is a page of the Codex or the Claude Code catalog as codex
// sessions and claude sessions print it.
type catalog struct {
	cmd, tool string // "codex", "Codex"
	id, noun  string // the first column's name, what a row is: "THREAD", "threads"
	more      string // the flags a host's more line repeats before --cursor
	hosts     []catalogHost
}

type catalogHost struct {
	host, hostname, next string
	err                  *apitypes.CodexHostError
	rows                 []catalogRow
}

type catalogRow struct {
	id, state string
	title     *string
	cwd       string
	updated   time.Time
}

// print prints v, the page as the API answered it, with --json, else each
// host's table; once the page is printed, a host that failed makes the
// command fail (R-CX-CLI-10).
func (p catalog) print(c *call, v any) error {
	err := c.emit(v, func() {
		if len(p.hosts) == 0 {
			fmt.Fprintf(c.out, "no host has %s supervision\n", p.tool)
		}
		for i, h := range p.hosts {
			if i > 0 {
				fmt.Fprintln(c.out)
			}
			fmt.Fprintf(c.out, "host %s (%s)\n", h.host, dash(h.hostname))
			if h.err != nil {
				fmt.Fprintf(c.out, "  error: %s (%s)\n", h.err.Message, h.err.Code)
				continue
			}
			tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "  %s\tSTATE\tTITLE\tCWD\tUPDATED\n", p.id)
			for _, r := range h.rows {
				title := "-"
				if r.title != nil {
					title = *r.title
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", r.id, r.state, title, dash(r.cwd), r.updated.Format(time.RFC3339))
			}
			tw.Flush()
			if len(h.rows) == 0 {
				fmt.Fprintf(c.out, "  (no %s)\n", p.noun)
			}
			if h.next != "" {
				fmt.Fprintf(c.out, "  more: olivares %s sessions --host %s%s --cursor %s\n", p.cmd, h.host, p.more, h.next)
			}
		}
	})
	failed := 0
	for _, h := range p.hosts {
		if h.err != nil {
			failed++
		}
	}
	if err == nil && failed > 0 {
		return hostFailure{failed}
	}
	return err
}
