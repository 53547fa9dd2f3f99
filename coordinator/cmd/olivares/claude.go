package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The Claude Code supervision commands (docs/rules/claude-supervision.md,
// R-CL-CLI-1): thin clients of the catalog routes, with the saved login.
func claudeCommands() []*command {
	var q apiclient.CodexThreadsQuery
	var host string
	var all bool
	var cursor int
	hostFlag := func(fs *flag.FlagSet) {
		fs.StringVar(&host, "host", "", "host (node id); needed when several nodes have Claude Code supervision")
	}
	return []*command{{
		name: "claude sessions",
		usage: `olivares claude sessions [--search T] [--host ID] [--limit N] [--cursor C] [--json]
    The Claude Code conversations stored on the nodes that opted in, newest
    first, grouped by host. Search is on titles and directories; --limit is
    per host (1..100, default 50); a --cursor continues one host's list and
    needs --host.
`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&q.Search, "search", "", "title or directory text to look for, case-insensitively")
			fs.StringVar(&q.Host, "host", "", "one host (node id)")
			fs.IntVar(&q.Limit, "limit", 50, "rows per host, 1..100")
			fs.StringVar(&q.Cursor, "cursor", "", "continue a host's list (needs --host)")
		},
		check: func(c *call) error {
			switch {
			case q.Limit < 1 || q.Limit > 100:
				return usageError{fmt.Errorf("claude sessions: --limit %d: use 1..100", q.Limit)}
			case q.Cursor != "" && q.Host == "":
				return usageError{errors.New("claude sessions: --cursor continues one host's list; give --host too")}
			}
			return nil
		},
		run: func(ctx context.Context, c *call) error {
			cat, err := c.cl.ClaudeSessions(ctx, q)
			if err != nil {
				return err
			}
			page := catalog{cmd: "claude", tool: "Claude Code", id: "SESSION", noun: "conversations"}
			for _, h := range cat.Hosts {
				ch := catalogHost{host: h.Host, hostname: h.Hostname, next: h.NextCursor, err: h.Error}
				for _, r := range h.Rows {
					state := "stored"
					switch {
					case r.LeaseHolder != "":
						state = "run " + r.LeaseHolder
					case r.RunningPID != 0:
						state = fmt.Sprintf("running (pid %d)", r.RunningPID)
					}
					ch.rows = append(ch.rows, catalogRow{r.SessionID, state, r.Title, r.Cwd, r.UpdatedAt})
				}
				page.hosts = append(page.hosts, ch)
			}
			return page.print(c, cat)
		},
	}, {
		name: "claude show", arg: "session id",
		usage: `olivares claude show SESSION [--host ID] [--all] [--cursor N] [--json]
    One page of a stored conversation: what the person sent, or with --all
    Claude's replies too; --cursor N starts at message N (a page's next).
`,
		flags: func(fs *flag.FlagSet) {
			hostFlag(fs)
			fs.BoolVar(&all, "all", false, "Claude's replies too")
			fs.IntVar(&cursor, "cursor", 0, "the message id the page starts from")
		},
		run: func(ctx context.Context, c *call) error {
			h, err := claudeHostOf(ctx, c.cl, host)
			if err != nil {
				return err
			}
			mq := apiclient.MessagesQuery{Cursor: cursor, Text: true}
			if all {
				mq.Role = apitypes.RoleAll
			}
			p, err := c.cl.ClaudeMessages(ctx, h, c.arg, mq)
			if err != nil {
				return err
			}
			return c.emit(p, func() { printMessages(c.out, p, true) })
		},
	}, {
		name: "claude continue", arg: "session id",
		usage: `olivares claude continue SESSION [--host ID] [--json]
    Continue a stored conversation as a supervised Claude Code run: the exact
    conversation, resumed in its directory. Refused while another run holds
    it or a claude process still runs it.
`,
		flags: hostFlag,
		run: func(ctx context.Context, c *call) error {
			h, err := claudeHostOf(ctx, c.cl, host)
			if err != nil {
				return err
			}
			r, err := c.cl.ClaudeContinue(ctx, h, c.arg)
			if err != nil {
				return err
			}
			return c.emit(r, func() {
				fmt.Fprintf(c.out, "run %s on %s continues conversation %s (%s); attach with: olivares session attach %s\n", r.RunRef, r.NodeID, c.arg, r.State, r.RunRef)
			})
		},
	}}
}

// claudeHostOf is host, or without it the one connected node with Claude
// Code supervision.
func claudeHostOf(ctx context.Context, cl *apiclient.Client, host string) (string, error) {
	if host != "" {
		return host, nil
	}
	return supervisedHost(ctx, cl, "claude_supervision", "Claude Code", "set [claude_supervision] enabled = true in a node's agent config")
}

// supervisedHost is the one connected node whose capabilities hold key,
// a tool's supervision (the host of a continue or archive without
// --host); with none or several, an error that says what to do.
func supervisedHost(ctx context.Context, cl *apiclient.Client, key, tool, enable string) (string, error) {
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		return "", err
	}
	var hosts []string
	for _, n := range nodes.Items {
		var caps map[string]json.RawMessage
		if json.Unmarshal(n.Capabilities, &caps) == nil && len(caps[key]) > 0 && string(caps[key]) != "null" && n.Connected {
			hosts = append(hosts, n.ID)
		}
	}
	switch len(hosts) {
	case 1:
		return hosts[0], nil
	case 0:
		return "", fmt.Errorf("no connected node has %s supervision; %s", tool, enable)
	}
	return "", usageError{fmt.Errorf("several hosts have %s supervision (%s); pass --host", tool, strings.Join(hosts, ", "))}
}
