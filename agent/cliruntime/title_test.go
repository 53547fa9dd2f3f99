package cliruntime

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A request's title is one line of at most 200 bytes plus the ellipsis,
// never cut inside a rune; Lines drops only a final empty line.
func TestTitleAndLines(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"  git\tstatus \n --short ", "git status --short"},
		{strings.Repeat("a", 200), strings.Repeat("a", 200)},
		{strings.Repeat("a", 201), strings.Repeat("a", 200) + "…"},
		{strings.Repeat("a", 199) + "é", strings.Repeat("a", 199) + "…"},
	} {
		if got := Title(tc.in); got != tc.want || !utf8.ValidString(got) {
			t.Errorf("Title(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := Lines(""); got != nil {
		t.Errorf("Lines(\"\") = %q, want nil", got)
	}
	if got := Lines("a\nb\n"); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("Lines(\"a\\nb\\n\") = %q, want [a b]", got)
	}
}
