package transcript

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// firstLine is a message's first non-blank line, trimmed, at most
// MaxFirstLineRunes code points (R-MSG-14).
func firstLine(s string) string {
	for s != "" {
		line := s
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		n := 0
		for i := range line {
			if n == MaxFirstLineRunes {
				return strings.TrimRightFunc(line[:i], unicode.IsSpace)
			}
			n++
		}
		return strings.ToValidUTF8(line, "\uFFFD")
	}
	return ""
}

// clip keeps at most MaxTextBytes of s, cut on a UTF-8 boundary, and
// appends ClipMark when it cut (R-MSG-8, R-MSG-14).
func clip(s string) (string, bool) {
	if len(s) <= MaxTextBytes {
		return s, false
	}
	cut := MaxTextBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ClipMark, true
}

// containsFold reports whether s contains the phrase q, case-insensitively
// (R-MSG-4); q is already lower-cased.
func containsFold(s, lowerQ string) bool {
	if lowerQ == "" {
		return true
	}
	return strings.Contains(strings.ToLower(s), lowerQ)
}

// lineCount is the number of lines of a text, the last one with or
// without its newline.
func lineCount(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// parseTime reads a record's RFC 3339 timestamp as Unix milliseconds; 0
// when absent or unreadable.
func parseTime(s string) int64 {
	if s == "" {
		return 0
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0
	}
	return t.UnixMilli()
}

// formatTime writes Unix milliseconds as RFC 3339 UTC (R-API-5); "" for 0.
func formatTime(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// between returns the text between open and close in s, if both occur.
func between(s, open, close string) (string, bool) {
	i := strings.Index(s, open)
	if i < 0 {
		return "", false
	}
	s = s[i+len(open):]
	j := strings.Index(s, close)
	if j < 0 {
		return "", false
	}
	return s[:j], true
}

// exitCodeIn finds "exit code N" (any case) in a tool's output.
func exitCodeIn(s string) *int {
	ls := strings.ToLower(s)
	for _, marker := range []string{"exit code ", "exited with code ", "exit code: "} {
		if i := strings.Index(ls, marker); i >= 0 {
			rest := ls[i+len(marker):]
			j := 0
			for j < len(rest) && (rest[j] == '-' && j == 0 || '0' <= rest[j] && rest[j] <= '9') {
				j++
			}
			if n, err := strconv.Atoi(rest[:j]); err == nil {
				return &n
			}
		}
	}
	return nil
}

// short bounds a free text (a command line, a description) kept in the
// activity state.
func short(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
