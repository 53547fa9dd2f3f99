package registry

import (
	"errors"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"git status", "git status", true},
		{"git status", "git status -s", false},
		{"git status*", "git status -s", true},
		{"rm *", "rm -rf /", true},
		{"rm *", "rmdir x", false},
		{"*.go", "a/b/c.go", true},
		{"src/*", "src/a/b.txt", true},
		{"?at", "cat", true},
		{"?at", "at", false},
		{"", "", true},
		{"*", "", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"é*", "été", true},
	} {
		if got := Glob(tc.pattern, tc.s); got != tc.want {
			t.Errorf("Glob(%q, %q): got %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

// R-REQ-10, R-REQ-11: rules in order, the first match decides; an allow
// never covers a chained command or a path outside its pattern; the
// default decides the rest.
func TestDecide(t *testing.T) {
	a := Approvals{Default: apitypes.ApprovalsAsk, Rules: []apitypes.ApprovalRule{
		{Tool: "bash", Pattern: "git status*", Action: apitypes.ApprovalsAllow},
		{Kind: apitypes.RequestCommand, Pattern: "rm *", Action: apitypes.ApprovalsDeny},
		{Kind: apitypes.RequestFileChange, Pattern: "/w/src/*", Action: apitypes.ApprovalsAllow},
		{Tool: "WebFetch", Action: apitypes.ApprovalsDeny},
	}}
	for _, tc := range []struct {
		s          Subject
		want       string
		wantRuleNo int
	}{
		{Subject{Tool: "Bash", Kind: "command", Command: "git status"}, "allow", 1},
		{Subject{Tool: "Bash", Kind: "command", Command: "git status; rm -rf ~"}, "ask", 0},
		{Subject{Tool: "Bash", Kind: "command", Command: "git status > /etc/x"}, "ask", 0},
		{Subject{Tool: "Bash", Kind: "command", Command: "git status $(curl x)"}, "ask", 0},
		{Subject{Tool: "shell", Kind: "command", Command: "rm -rf build"}, "deny", 2},
		{Subject{Tool: "shell", Kind: "command", Command: "rm -rf build && ls"}, "deny", 2},
		{Subject{Tool: "Edit", Kind: "file_change", Paths: []string{"/w/src/a.go"}}, "allow", 3},
		{Subject{Tool: "Edit", Kind: "file_change", Paths: []string{"/w/src/a.go", "/home/u/.ssh/config"}}, "ask", 0},
		{Subject{Tool: "Edit", Kind: "file_change"}, "ask", 0},
		{Subject{Tool: "WebFetch", Kind: "permission"}, "deny", 4},
		{Subject{Tool: "Bash", Kind: "command", Command: "make"}, "ask", 0},
	} {
		got, n := a.Decide(tc.s)
		if got != tc.want || n != tc.wantRuleNo {
			t.Errorf("Decide(%+v): got %s by rule %d, want %s by rule %d", tc.s, got, n, tc.want, tc.wantRuleNo)
		}
	}
}

// R-REQ-10..12: what a profile may hold, and the defaults.
func TestCheckApprovals(t *testing.T) {
	for _, tc := range []struct {
		def     string
		rules   []apitypes.ApprovalRule
		timeout string
		want    time.Duration
		ok      bool
	}{
		{"ask", nil, "", DefaultAskTimeout, true},
		{"deny", nil, "30s", 30 * time.Second, true},
		{"allow", []apitypes.ApprovalRule{{Kind: "command", Pattern: "ls", Action: "allow"}}, "2h", 2 * time.Hour, true},
		{"maybe", nil, "", 0, false},
		{"ask", nil, "0s", 0, false},
		{"ask", nil, "25h", 0, false},
		{"ask", nil, "ten minutes", 0, false},
		{"ask", []apitypes.ApprovalRule{{Action: "yes"}}, "", 0, false},
		{"ask", []apitypes.ApprovalRule{{Kind: "shell", Action: "deny"}}, "", 0, false},
		{"ask", []apitypes.ApprovalRule{{Pattern: "*", Action: "allow"}}, "", 0, false},
		{"ask", []apitypes.ApprovalRule{{Tool: "two words", Action: "deny"}}, "", 0, false},
	} {
		got, err := checkApprovals(tc.def, tc.rules, tc.timeout)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("checkApprovals(%q, %v, %q): got %v, %v; want %v ok=%v", tc.def, tc.rules, tc.timeout, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadPolicy) {
			t.Errorf("checkApprovals(%q, %v, %q): got %v, want ErrBadPolicy", tc.def, tc.rules, tc.timeout, err)
		}
	}
	// A profile stored before approvals existed denies (R-REQ-10).
	if a := (Profile{}).ApprovalPolicy(); a.Default != apitypes.ApprovalsDeny || a.AskTimeout != DefaultAskTimeout {
		t.Errorf("an old profile's policy: %+v, want deny and the default timeout", a)
	}
}

func FuzzGlob(f *testing.F) {
	f.Add("git status*", "git status -s")
	f.Add("*a*b*", "aaabbb")
	f.Fuzz(func(t *testing.T, p, s string) {
		if Glob(p, s) && p == "" && s != "" {
			t.Fatalf("the empty pattern matched %q", s)
		}
		if !Glob(s, s) && !containsWild(s) {
			t.Fatalf("%q does not match itself", s)
		}
	})
}

func containsWild(s string) bool {
	for _, r := range s {
		if r == '*' || r == '?' {
			return true
		}
	}
	return false
}
