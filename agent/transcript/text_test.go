package transcript

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestFirstLine: the first non-blank line, trimmed, at most 200 code
// points (R-MSG-14).
func TestFirstLine(t *testing.T) {
	long := strings.Repeat("ü", 250)
	for _, tc := range []struct{ in, want string }{
		{"hello", "hello"},
		{"\n\n   \t\n  second line \nthird", "second line"},
		{"\r\n  crlf\r\nnext", "crlf"},
		{"   ", ""},
		{"", ""},
		{long, strings.Repeat("ü", 200)},
		{strings.Repeat("a", 199) + " b", strings.Repeat("a", 199)}, // the cut leaves no trailing space
		{"bad \xff byte", "bad \uFFFD byte"},
	} {
		if got := firstLine(tc.in); got != tc.want {
			t.Errorf("firstLine(%.40q) = %.40q, want %.40q", tc.in, got, tc.want)
		}
	}
	if n := utf8.RuneCountInString(firstLine(long)); n != MaxFirstLineRunes {
		t.Errorf("first line of %d runes: %d runes, want %d", 250, n, MaxFirstLineRunes)
	}
}

// TestClip: at most 65,536 bytes, cut on a UTF-8 boundary, then "[...]"
// (R-MSG-8, R-MSG-14).
func TestClip(t *testing.T) {
	exact := strings.Repeat("a", MaxTextBytes)
	if got, clipped := clip(exact); got != exact || clipped {
		t.Errorf("64 KiB exactly: clipped %t, want untouched", clipped)
	}
	over := strings.Repeat("a", MaxTextBytes+1)
	if got, clipped := clip(over); !clipped || got != strings.Repeat("a", MaxTextBytes)+ClipMark {
		t.Errorf("64 KiB + 1: got %d bytes, clipped %t; want 65536 bytes and [...]", len(got), clipped)
	}
	// "é" is 2 bytes and "€" 3: the cut must not split them.
	for _, r := range []string{"é", "€", "😀"} {
		s := "x" + strings.Repeat(r, MaxTextBytes)
		got, clipped := clip(s)
		body := strings.TrimSuffix(got, ClipMark)
		if !clipped || !strings.HasSuffix(got, ClipMark) || len(body) > MaxTextBytes || !utf8.ValidString(body) || len(body) < MaxTextBytes-3 {
			t.Errorf("%s: %d bytes kept, valid %t, clipped %t", r, len(body), utf8.ValidString(body), clipped)
		}
	}
}

func TestExitCodeIn(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"Exit code 3", 3, true},
		{"Process exited with code 0\nOutput:", 0, true},
		{"Exit code: 2", 2, true},
		{"Error: Exit code -1", -1, true},
		{"no code here", 0, false},
	} {
		got := exitCodeIn(tc.in)
		if (got != nil) != tc.ok || (got != nil && *got != tc.want) {
			t.Errorf("exitCodeIn(%q) = %v, want %d (%t)", tc.in, got, tc.want, tc.ok)
		}
	}
}
