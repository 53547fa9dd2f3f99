//go:build linux

package main

import (
	"strings"
	"testing"
)

// TestClaudeSlug: the project-directory rule of real-clis.md §1.3, on its
// recorded examples.
func TestClaudeSlug(t *testing.T) {
	for _, tc := range []struct{ cwd, want string }{
		{"/srv/scratch/work/c1", "-srv-scratch-work-c1"},
		{"/srv/scratch/work/a.b_c d+e~f@g", "-srv-scratch-work-a-b-c-d-e-f-g"},
		{"/srv/scratch/work/Üñí", "-srv-scratch-work----"},
		{"/x/\U0001F600", "-x---"}, // one '-' per UTF-16 unit: a surrogate pair is two
	} {
		if got := claudeSlug(tc.cwd); got != tc.want {
			t.Errorf("claudeSlug(%q) = %q, want %q", tc.cwd, got, tc.want)
		}
	}
	long := "/" + strings.Repeat("a", 256) // 257 characters
	got := claudeSlug(long)
	if len(got) <= 201 || got[:200] != "-"+strings.Repeat("a", 199) || got[200] != '-' {
		t.Errorf("claudeSlug(257 chars) = %q, want 200 characters, '-', then the hash", got)
	}
}

func TestParseSpecial(t *testing.T) {
	for _, tc := range []struct {
		text string
		want special
	}{
		{"flood 10", special{kind: "flood", n: 10}},
		{"flood x", special{}},
		{"exit 3", special{kind: "exit", n: 3}},
		{"stderr a b", special{kind: "stderr", arg: "a b"}},
		{"slow", special{kind: "slow"}},
		{"slow down", special{}},
		{"hello", special{}},
	} {
		if got := parseSpecial(tc.text); got != tc.want {
			t.Errorf("parseSpecial(%q) = %+v, want %+v", tc.text, got, tc.want)
		}
	}
}
