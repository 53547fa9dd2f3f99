package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The read-side commands of issue 8: what a run is doing (R-ACT-1, R-AGT-1)
// and what was said in it (R-MSG-2), both read on the node from the tool's own
// transcript (shared/apitypes holds the bodies the node answers with).

// maxMessagePages bounds session messages --all.
const maxMessagePages = 1000

// messagesFlags are the flags of session messages, each one query
// parameter of GET /runs/{ref}/messages.
type messagesFlags struct {
	role, q, at, order string
	limit, cursor, id  int
	text, all          bool
}

// query is the messages query; the node validates it (R-MSG-16).
func (m messagesFlags) query() apiclient.MessagesQuery {
	return apiclient.MessagesQuery{Role: m.role, Q: m.q, At: m.at, Order: m.order, Limit: m.limit, Cursor: m.cursor, Text: m.text}
}

func activityCommands() []*command {
	var agent string
	var m messagesFlags
	return []*command{{
		name: "session activity", arg: "run ref",
		usage: `olivares session activity REF [--agent ID] [--json]
    What the run is doing, read on its node from the tool's own transcript
    (Claude Code, Codex): sub-agents, tasks, todos, files, the model and how
    full its context is. --agent prints one Claude Code sub-agent's turns.
`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&agent, "agent", "", "show this sub-agent's turns (an id from the AGENTS list) instead")
		},
		run: func(ctx context.Context, c *call) error {
			if agent != "" {
				t, err := c.cl.SubAgent(ctx, c.arg, agent)
				if err != nil {
					return err
				}
				return c.emit(t, func() { printTurns(c.out, t) })
			}
			a, err := c.cl.Activity(ctx, c.arg)
			if err != nil {
				return err
			}
			return c.emit(a, func() { printActivity(c.out, a) })
		},
	}, {
		name: "session messages", arg: "run ref",
		usage: `olivares session messages REF [--role user|all] [--q TEXT] [--at T] [--order asc|desc]
                          [--limit N] [--cursor ID] [--text] [--all] [--json]
olivares session messages REF --id N [--json]
    What was said in the run: what people sent (--role all adds the tool's
    replies), first lines, or texts with --text (clipped at 64 KiB).
`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&m.role, "role", "", "user (default: what people sent) or all")
			fs.StringVar(&m.q, "q", "", "only messages containing this text, any case (at most 256 bytes)")
			fs.StringVar(&m.at, "at", "", "only messages at or after this RFC 3339 instant")
			fs.StringVar(&m.order, "order", "", "asc (default) or desc")
			fs.IntVar(&m.limit, "limit", 0, "page size, 1..200 (default 50; at most 50 with --text)")
			fs.IntVar(&m.cursor, "cursor", 0, "the message id the page starts from (a previous page's next)")
			fs.IntVar(&m.id, "id", 0, "print this one message whole (up to its 64 KiB clip)")
			fs.BoolVar(&m.text, "text", false, "print each message's text, not only its first line")
			fs.BoolVar(&m.all, "all", false, "read every page")
		},
		check: func(c *call) error {
			for _, f := range []struct {
				name string
				v    int
			}{{"limit", m.limit}, {"cursor", m.cursor}, {"id", m.id}} {
				if err := c.atLeastOne(f.name, f.v); err != nil {
					return err
				}
			}
			return nil
		},
		run: func(ctx context.Context, c *call) error {
			q := m.query()
			if c.set["id"] {
				msg, err := c.cl.Message(ctx, c.arg, m.id)
				if err != nil {
					return err
				}
				return c.emit(msg, func() { printMessage(c.out, msg) })
			}
			all := apitypes.MessagesPage{Items: []apitypes.MessageItem{}}
			for range maxMessagePages {
				page, err := c.cl.Messages(ctx, c.arg, q)
				if err != nil {
					return err
				}
				all.Items = append(all.Items, page.Items...)
				all.Total, all.Next, all.Transcript = page.Total, page.Next, page.Transcript
				if page.Next == nil || !m.all {
					break
				}
				if q.Cursor == *page.Next {
					return fmt.Errorf("the node returned the same messages cursor %d twice", *page.Next)
				}
				q.Cursor = *page.Next
			}
			return c.emit(all, func() { printMessages(c.out, all, m.text) })
		},
	}}
}

// printActivity shows the activity: the context meter first, then each
// list that has entries.
func printActivity(out io.Writer, a apitypes.Activity) {
	fmt.Fprintf(out, "transcript   %s\n", a.Transcript)
	if a.Model != nil {
		fmt.Fprintf(out, "model        %s\n", *a.Model)
	}
	fmt.Fprintf(out, "context      %s\n", contextLine(a))
	if a.Compactions > 0 {
		fmt.Fprintf(out, "compactions  %d\n", a.Compactions)
	}
	if a.Unreadable > 0 {
		fmt.Fprintf(out, "unreadable   %d record(s) could not be read\n", a.Unreadable)
	}
	section := func(title string, n, omitted int, rows func(tw *tabwriter.Writer)) {
		if n == 0 && omitted == 0 {
			return
		}
		fmt.Fprintf(out, "\n%s (%d)\n", title, n)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		rows(tw)
		tw.Flush()
		if omitted > 0 {
			fmt.Fprintf(out, "  (%d older finished entries not listed)\n", omitted)
		}
	}
	section("AGENTS", len(a.Agents), a.AgentsOmitted, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "  ID\tTYPE\tSTATE\tDESCRIPTION")
		for _, ag := range a.Agents {
			kind := ag.Type
			if ag.Name != "" {
				kind = ag.Name
			}
			if ag.Background {
				kind += " (background)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", ag.ID, dash(kind), ag.State, oneLine(ag.Description))
		}
	})
	section("TASKS", len(a.Tasks), a.TasksOmitted, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "  ID\tKIND\tSTATE\tEXIT\tWHAT")
		for _, t := range a.Tasks {
			what := t.Description
			if what == "" {
				what = t.Command
			}
			if w := t.Workflow; w != nil {
				what = fmt.Sprintf("%s: %d/%d agents done, %d failed", w.Name, w.AgentsDone, w.AgentsTotal, w.AgentsFailed)
			}
			exit := "-"
			if t.ExitCode != nil {
				exit = strconv.Itoa(*t.ExitCode)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, t.State, exit, oneLine(what))
		}
	})
	section("TODOS", len(a.Todos), 0, func(tw *tabwriter.Writer) {
		for _, t := range a.Todos {
			box := "[ ]"
			switch t.Status {
			case "completed":
				box = "[x]"
			case "in_progress":
				box = "[>]"
			}
			fmt.Fprintf(tw, "  %s %s\n", box, oneLine(t.Content))
		}
	})
	section("FILES", len(a.Files), a.FilesOmitted, func(tw *tabwriter.Writer) {
		for _, f := range a.Files {
			created := ""
			if f.Created {
				created = "\tnew"
			}
			fmt.Fprintf(tw, "  %s\t+%d\t-%d%s\n", f.Path, f.Added, f.Removed, created)
		}
	})
	section("SKILLS", len(a.Skills), 0, func(tw *tabwriter.Writer) {
		for _, s := range a.Skills {
			fmt.Fprintf(tw, "  %s\t%d use(s)\n", s.Name, s.Uses)
		}
	})
	section("MCP SERVERS", len(a.MCPServers), 0, func(tw *tabwriter.Writer) {
		for _, m := range a.MCPServers {
			fmt.Fprintf(tw, "  %s\t%s\t%d call(s)\n", m.Name, dash(m.Status), m.Calls)
		}
	})
}

// contextLine is the context meter: tokens against the window with a bar,
// or, when the window is not known, the token count and an "unknown
// window" notice (R-CLI-1, R-ACT-7).
func contextLine(a apitypes.Activity) string {
	if a.ContextTokens == nil {
		return "no turn has reported its tokens yet"
	}
	tokens := *a.ContextTokens
	if a.ContextPercent == nil || a.ContextWindow == nil {
		return fmt.Sprintf("%d tokens (unknown window: the tool has not reported one context window for this run)", tokens)
	}
	p := *a.ContextPercent
	const width = 20
	filled := int(p / 100 * width)
	filled = min(max(filled, 0), width)
	return fmt.Sprintf("[%s%s] %.1f%%  %d / %d tokens", strings.Repeat("#", filled), strings.Repeat(".", width-filled), p, tokens, *a.ContextWindow)
}

func printTurns(out io.Writer, t apitypes.SubAgentTurns) {
	if t.Omitted > 0 {
		fmt.Fprintf(out, "(%d older turns not shown)\n", t.Omitted)
	}
	if len(t.Turns) == 0 {
		fmt.Fprintf(out, "agent %s has not written a turn yet\n", t.Agent)
	}
	for i, turn := range t.Turns {
		if i > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "--- %s\n%s\n", turn.Role, strings.TrimRight(turn.Text, "\n"))
	}
}

func printMessages(out io.Writer, p apitypes.MessagesPage, text bool) {
	if len(p.Items) == 0 {
		fmt.Fprintf(out, "no message matches (transcript %s)\n", p.Transcript)
		return
	}
	if text {
		for i, m := range p.Items {
			if i > 0 {
				fmt.Fprintln(out)
			}
			fmt.Fprintf(out, "--- #%d %s %s\n", m.ID, m.Role, m.At)
			if m.Text != nil {
				fmt.Fprintln(out, strings.TrimRight(*m.Text, "\n"))
			}
		}
	} else {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tROLE\tAT\tFIRST LINE")
		for _, m := range p.Items {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", m.ID, m.Role, dash(m.At), m.FirstLine)
		}
		tw.Flush()
	}
	fmt.Fprintf(out, "(%d shown of %d matching; transcript %s)\n", len(p.Items), p.Total, p.Transcript)
	if p.Next != nil {
		fmt.Fprintf(out, "more: --cursor %d, or --all for every page\n", *p.Next)
	}
}

func printMessage(out io.Writer, m apitypes.MessageRead) {
	fmt.Fprintf(out, "--- #%d of %d, %s %s\n%s\n", m.ID, m.Total, m.Role, m.At, strings.TrimRight(m.Text, "\n"))
	if m.Clipped {
		fmt.Fprintf(out, "(clipped at %d bytes)\n", apitypes.MaxMessageText)
	}
	if m.LaterSame > 0 {
		fmt.Fprintf(out, "(%d later %s message(s) start with the same line)\n", m.LaterSame, m.Role)
	}
}

// oneLine keeps a list cell on one line.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > 80 {
		s = string(r[:79]) + "…"
	}
	return dash(s)
}
