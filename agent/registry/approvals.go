package registry

import (
	"strings"
	"time"

	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Defaults of a new profile's approval policy (R-REQ-10): a person is
// asked, and a request nobody answers in ten minutes is denied. "ask"
// because people drive the tools through Olivares to decide what they do;
// "allow" would let a tool run any command unseen, "deny" makes most
// coding turns fail. Ten minutes is long enough to answer from a phone,
// short enough that a forgotten turn does not hold its process for hours.
const (
	DefaultApprovals  = apitypes.ApprovalsAsk
	DefaultAskTimeout = 10 * time.Minute
)

// Bounds of the approval policy.
const (
	MinAskTimeout   = time.Second
	MaxAskTimeout   = 24 * time.Hour
	MaxApprovalRule = 64  // rules per profile
	maxRulePattern  = 512 // bytes of a rule's pattern
)

// Approvals is a profile's approval policy (R-REQ-10..12), as a run's
// process starts with it.
type Approvals struct {
	Default    string
	Rules      []apitypes.ApprovalRule
	AskTimeout time.Duration
}

// ApprovalPolicy returns p's approval policy. A profile stored before
// approvals existed (no Approvals) keeps that release's behaviour: every
// request is denied.
func (p Profile) ApprovalPolicy() Approvals {
	a := Approvals{Default: p.Approvals, Rules: p.ApprovalRules, AskTimeout: time.Duration(p.AskTimeoutSeconds) * time.Second}
	if a.Default == "" {
		a.Default = apitypes.ApprovalsDeny
	}
	if a.AskTimeout <= 0 {
		a.AskTimeout = DefaultAskTimeout
	}
	return a
}

// Subject is what a rule is matched against: the request's tool and kind,
// and its command or the paths it touches.
type Subject struct {
	Tool, Kind string
	Command    string
	Paths      []string
}

// Decide is the policy's answer to a request: allow, deny or ask, and the
// rule (1-based) that decided it, 0 for the default (R-REQ-11). Rules are
// tried in order; the first that matches decides.
func (a Approvals) Decide(s Subject) (action string, rule int) {
	for i, r := range a.Rules {
		if ruleMatches(r, s) {
			return r.Action, i + 1
		}
	}
	return a.Default, 0
}

// shellControl are the characters that chain or redirect shell commands.
const shellControl = ";&|`$<>\n\r()"

func ruleMatches(r apitypes.ApprovalRule, s Subject) bool {
	if r.Tool != "" && !strings.EqualFold(r.Tool, s.Tool) {
		return false
	}
	if r.Kind != "" && r.Kind != s.Kind {
		return false
	}
	if r.Pattern == "" {
		return true
	}
	if s.Command != "" {
		// An allow never reaches past what its pattern says: "git
		// status*" does not allow "git status; rm -rf ~" (R-REQ-11).
		if r.Action == apitypes.ApprovalsAllow && strings.ContainsAny(s.Command, shellControl) && !strings.ContainsAny(r.Pattern, shellControl) {
			return false
		}
		if Glob(r.Pattern, strings.TrimSpace(s.Command)) {
			return true
		}
	}
	if len(s.Paths) == 0 {
		return false
	}
	for _, p := range s.Paths {
		// Every path must match: an allow of "src/*" does not cover a
		// change that also touches ../.ssh.
		if !Glob(r.Pattern, p) {
			return false
		}
	}
	return true
}

// Glob reports whether s matches pattern, where * matches any run of
// characters (spaces and slashes included) and ? any one character;
// everything else is literal.
func Glob(pattern, s string) bool {
	p := []rune(pattern)
	t := []rune(s)
	// Iterative wildcard match with one backtrack point.
	pi, ti, star, mark := 0, 0, -1, 0
	for ti < len(t) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == t[ti]):
			pi++
			ti++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ti
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ti = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// checkApprovals validates an approval policy as the API gives it.
func checkApprovals(def string, rules []apitypes.ApprovalRule, timeout string) (time.Duration, error) {
	switch def {
	case apitypes.ApprovalsAsk, apitypes.ApprovalsDeny, apitypes.ApprovalsAllow:
	default:
		return 0, refusal.New(ErrBadPolicy, "approvals %q: use ask, deny or allow", def)
	}
	if len(rules) > MaxApprovalRule {
		return 0, refusal.New(ErrBadPolicy, "%d approval rules: at most %d", len(rules), MaxApprovalRule)
	}
	for i, r := range rules {
		switch r.Action {
		case apitypes.ApprovalsAsk, apitypes.ApprovalsDeny, apitypes.ApprovalsAllow:
		default:
			return 0, refusal.New(ErrBadPolicy, "approval rule %d: action %q; use allow, deny or ask", i+1, r.Action)
		}
		switch r.Kind {
		case "", apitypes.RequestCommand, apitypes.RequestFileChange, apitypes.RequestPermission, apitypes.RequestQuestion, apitypes.RequestElicitation:
		default:
			return 0, refusal.New(ErrBadPolicy, "approval rule %d: kind %q; use command, file_change, permission, question or elicitation", i+1, r.Kind)
		}
		if len(r.Pattern) > maxRulePattern || len(r.Tool) > 128 || strings.ContainsAny(r.Tool, " \t\n") {
			return 0, refusal.New(ErrBadPolicy, "approval rule %d: the tool is one name and the pattern at most %d bytes", i+1, maxRulePattern)
		}
		if r.Action == apitypes.ApprovalsAllow && r.Tool == "" && r.Kind == "" && (r.Pattern == "" || strings.Trim(r.Pattern, "*") == "") {
			return 0, refusal.New(ErrBadPolicy, "approval rule %d allows everything; set approvals to allow instead, so that it shows", i+1)
		}
	}
	d := DefaultAskTimeout
	if timeout != "" {
		var err error
		d, err = time.ParseDuration(timeout)
		if err != nil || d < MinAskTimeout || d > MaxAskTimeout {
			return 0, refusal.New(ErrBadPolicy, "ask_timeout %q: give a duration from 1s to 24h, like 10m", timeout)
		}
	}
	return d, nil
}
