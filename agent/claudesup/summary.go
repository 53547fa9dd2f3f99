package claudesup

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/olivares-dev/olivares/agent/transcript"
)

// Windows of a transcript read for its summary: the head holds the first
// prompt and the directory; Claude Code repeats its title records near the
// end of the file (real-clis.md §1.11), so the tail holds the newest title.
const (
	headBytes = 256 << 10
	tailBytes = 128 << 10
)

// summary is what the catalog shows of a transcript.
type summary struct {
	title, cwd string
	size       int64
	mtime      time.Time
}

// titleRecord is the part of a record the summary reads.
type titleRecord struct {
	Type        string `json:"type"`
	Cwd         string `json:"cwd"`
	CustomTitle string `json:"customTitle"`
	AITitle     string `json:"aiTitle"`
	Summary     string `json:"summary"`
	AgentName   string `json:"agentName"`
}

// readSummary reads the title and directory of a transcript as Claude Code
// names a session in its own picker (R-CL-PROJ-2): the agent name, else
// the custom title (/rename), else the generated title, else the summary
// (the last of each wins), else the first prompt's first line.
func readSummary(path string) summary {
	f, err := os.Open(path)
	if err != nil {
		return summary{}
	}
	defer f.Close()
	var titles [4]string // agent name, custom, ai, summary
	var prompt, cwd string
	scan := func(r io.Reader) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), headBytes)
		for sc.Scan() {
			line := sc.Bytes()
			var rec titleRecord
			if json.Unmarshal(line, &rec) != nil {
				continue // a line cut by the window, or not JSON
			}
			if cwd == "" && rec.Cwd != "" {
				cwd = rec.Cwd
			}
			switch rec.Type {
			case "agent-name":
				titles[0] = rec.AgentName
			case "custom-title":
				titles[1] = rec.CustomTitle
			case "ai-title":
				titles[2] = rec.AITitle
			case "summary":
				titles[3] = rec.Summary
			case "user":
				if prompt == "" {
					var cr transcript.ClaudeRecord
					if json.Unmarshal(line, &cr) == nil {
						prompt, _ = transcript.ClaudePrompt(&cr)
					}
				}
			}
		}
	}
	scan(io.LimitReader(f, headBytes))
	if fi, err := f.Stat(); err == nil && fi.Size() > headBytes {
		off := max(headBytes, fi.Size()-tailBytes)
		if _, err := f.Seek(off, io.SeekStart); err == nil {
			r := bufio.NewReader(f)
			if off > headBytes {
				r.ReadBytes('\n') // the cut line
			}
			scan(r)
		}
	}
	title := firstLine(prompt)
	for _, t := range titles {
		if t = firstLine(t); t != "" {
			title = t
			break
		}
	}
	return summary{title: title, cwd: cwd}
}

// firstLine is s's first non-empty line, trimmed and cut at maxTitle runes.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if utf8.RuneCountInString(l) > maxTitle {
				l = string([]rune(l)[:maxTitle-1]) + "…"
			}
			return l
		}
	}
	return ""
}

// liveSession is Claude Code's own record of a live process
// (<config>/sessions/<pid>.json, Claude Code 2.1; real-clis.md §1.11).
type liveSession struct {
	PID       int    `json:"pid"`
	SessionID string `json:"sessionId"`
	ProcStart string `json:"procStart"`
}

// runningSessions maps the session ids a live claude process of the home
// runs to its pid. A file whose process is gone (Claude Code removes it at
// exit, but not after a kill) or whose pid now names another process (its
// start time differs) is ignored.
func runningSessions(home string) map[string]int {
	out := map[string]int{}
	dir := home + "/.claude/sessions"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") || !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(dir + "/" + e.Name())
		if err != nil || len(b) > 256<<10 {
			continue
		}
		var ls liveSession
		if json.Unmarshal(b, &ls) != nil || ls.PID <= 0 || ls.SessionID == "" {
			continue
		}
		if alive(ls.PID, ls.ProcStart) {
			out[ls.SessionID] = ls.PID
		}
	}
	return out
}

// alive: the process exists and, where /proc tells, started when the file
// says (field 22 of /proc/<pid>/stat, in clock ticks, as Claude Code
// records it).
func alive(pid int, procStart string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return processExists(pid)
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return false
	}
	return procStart == "" || f[19] == procStart
}
