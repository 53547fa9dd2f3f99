package handoff

import (
	"fmt"
	"slices"
	"strings"
)

// Summary bounds: the summary stays a few KiB whatever the conversation
// (R-HOF-7: a person reads and edits it before the POST).
const (
	summaryFirstBytes  = 600
	summaryFirstLines  = 12
	summaryRecent      = 3
	summaryRecentBytes = 300
	summaryRecentLines = 6
	summaryAnswerBytes = 1500
	summaryAnswerLines = 20
	summaryTools       = 12
	summaryFiles       = 10
	summaryPathBytes   = 120
	// MaxSummaryBytes is the most Summary returns.
	MaxSummaryBytes = 8 << 10
)

// Summary is the handoff summary of c, generated without any model
// (R-HOF-2, R-HOF-7): deterministic, plain text a person can read and edit.
// It gives the source tool and session, the number of turns, the first user
// request, the latest few, the last assistant answer (each clipped), the
// tools used with their counts, the files that file tools named, and the
// number of records that could not be read. It is at most MaxSummaryBytes.
func Summary(c Conversation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Handoff of %s session %s: %s.\n", toolTitle(c.Tool), c.ID, plural(c.Turns, "turn"))
	if c.Cwd != "" {
		p, _ := clip(c.Cwd, summaryPathBytes)
		fmt.Fprintf(&b, "Working directory: %s\n", oneLine(p))
	}
	var users []Record
	var answer *Record
	tools := map[string]int{}
	changed, read := newFileList(c.Cwd), newFileList(c.Cwd)
	for i, r := range c.Records {
		switch r.Kind {
		case KindUser:
			users = append(users, r)
		case KindAssistant:
			answer = &c.Records[i]
		case KindToolCall:
			name := r.Tool
			if name == "" {
				name = "(unnamed)"
			}
			tools[name]++
			for _, f := range r.Files {
				if r.Writes {
					changed.add(f)
				} else {
					read.add(f)
				}
			}
		}
	}
	if len(users) == 0 && answer == nil {
		b.WriteString("\nNo messages were read from the stored conversation.\n")
	}
	if len(users) > 0 {
		b.WriteString("\nFirst request:\n")
		b.WriteString(quote(users[0].Text, summaryFirstBytes, summaryFirstLines))
		recent := users[1:]
		if len(recent) > summaryRecent {
			recent = recent[len(recent)-summaryRecent:]
		}
		if len(recent) > 0 {
			fmt.Fprintf(&b, "\nLatest requests (%d of %d):\n", len(recent), len(users))
			for _, u := range recent {
				b.WriteString(quote(u.Text, summaryRecentBytes, summaryRecentLines))
			}
		}
	}
	if answer != nil {
		b.WriteString("\nLast answer:\n")
		b.WriteString(quote(answer.Text, summaryAnswerBytes, summaryAnswerLines))
	}
	if len(tools) > 0 {
		names := make([]string, 0, len(tools))
		for n := range tools {
			names = append(names, n)
		}
		// Most used first, then by name: the same conversation always gives
		// the same line.
		slices.SortFunc(names, func(a, b string) int {
			if tools[a] != tools[b] {
				return tools[b] - tools[a]
			}
			return strings.Compare(a, b)
		})
		var parts []string
		for i, n := range names {
			if i == summaryTools {
				parts = append(parts, fmt.Sprintf("and %d more", len(names)-i))
				break
			}
			short, _ := clip(oneLine(n), 60)
			parts = append(parts, fmt.Sprintf("%s ×%d", short, tools[n]))
		}
		fmt.Fprintf(&b, "\nTools used: %s\n", strings.Join(parts, ", "))
	}
	if s := changed.String(); s != "" {
		fmt.Fprintf(&b, "Files changed: %s\n", s)
	}
	if s := read.String(); s != "" {
		fmt.Fprintf(&b, "Files read: %s\n", s)
	}
	if c.Unreadable > 0 {
		fmt.Fprintf(&b, "\nNote: %s of the stored conversation could not be read and %s left out.\n",
			plural(c.Unreadable, "record"), map[bool]string{true: "is", false: "are"}[c.Unreadable == 1])
	}
	out, _ := clip(b.String(), MaxSummaryBytes)
	return out
}

// quote is text clipped to max bytes and lines, each line prefixed "> ".
func quote(text string, max, lines int) string {
	t := strings.TrimSpace(text)
	cut := false
	if ls := strings.Split(t, "\n"); len(ls) > lines {
		t, cut = strings.Join(ls[:lines], "\n"), true
	}
	if len(t) > max {
		t, _ = clip(t, max)
		cut = true
	}
	t = strings.TrimRight(t, " \t\r\n")
	if cut {
		t += " […]"
	}
	var b strings.Builder
	for _, l := range strings.Split(t, "\n") {
		b.WriteString(strings.TrimRight("> "+strings.TrimRight(l, "\r"), " "))
		b.WriteByte('\n')
	}
	return b.String()
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// fileList keeps distinct paths in first-seen order.
type fileList struct {
	cwd   string
	seen  map[string]bool
	paths []string
}

func newFileList(cwd string) *fileList { return &fileList{cwd: cwd, seen: map[string]bool{}} }

func (l *fileList) add(p string) {
	p = relPath(l.cwd, p)
	if p == "" || l.seen[p] {
		return
	}
	l.seen[p] = true
	l.paths = append(l.paths, p)
}

func (l *fileList) String() string {
	var parts []string
	for i, p := range l.paths {
		if i == summaryFiles {
			parts = append(parts, fmt.Sprintf("and %d more", len(l.paths)-i))
			break
		}
		short, _ := clip(oneLine(p), summaryPathBytes)
		parts = append(parts, short)
	}
	return strings.Join(parts, ", ")
}

// FirstTurn is the new session's first turn (R-HOF-8): the reviewed
// summary, then one line telling the tool to read the transcript file for
// the full history.
func FirstTurn(summary, transcriptPath string) string {
	s := strings.TrimRight(summary, " \t\r\n")
	line := "Read the file " + transcriptPath + " for the full history of that session before you continue."
	if s == "" {
		return line
	}
	return s + "\n\n" + line
}
