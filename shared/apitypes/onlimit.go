package apitypes

import (
	"strings"
	"time"
)

// A profile's on_limit plan (docs/rules/usage.md, R-ONL-*): the steps tried,
// in order, when a run of the profile stops on a usage limit.
const (
	// OnLimitContinue continues the run at the limit's reset (R-CONT-*).
	OnLimitContinue = "continue_at_reset"
	// OnLimitMove ("move:PROFILE") moves a Claude Code run to another
	// account of the same tool and continues it there (R-MOVE-*).
	OnLimitMove = "move"
	// OnLimitHandoff ("handoff:PROFILE") hands the work off to another
	// profile, any tool, with the handoff summary (R-HOF-*).
	OnLimitHandoff = "handoff"
)

// MaxOnLimitSteps bounds a plan.
const MaxOnLimitSteps = 8

// ParseOnLimitStep splits a plan step into its kind and its profile (a ref
// or a name; "" for continue_at_reset). ok is false for anything else.
func ParseOnLimitStep(step string) (kind, profile string, ok bool) {
	if step == OnLimitContinue {
		return step, "", true
	}
	kind, profile, found := strings.Cut(step, ":")
	if !found || profile == "" || (kind != OnLimitMove && kind != OnLimitHandoff) {
		return "", "", false
	}
	return kind, profile, true
}

// What a step of the plan came to (OnLimitEntry.Outcome).
const (
	OnLimitLimited   = "limited"    // the run stopped on a limit; the plan starts
	OnLimitMoved     = "moved"      // moved to another account and continued there
	OnLimitHandedOff = "handed_off" // handed off to a new run
	OnLimitWaiting   = "waiting"    // continues at the limit's reset
	OnLimitSkipped   = "skipped"    // could not apply; Code and Reason say why
)

// OnLimitEntry is one line of a run's on_limit history (R-ONL-6): "limited
// on claude-a", "moved to claude-b", "skipped handoff:codex-b: ...".
type OnLimitEntry struct {
	At      time.Time `json:"at"`
	Outcome string    `json:"outcome"`
	// Step is the plan's step as written; absent on "limited".
	Step string `json:"step,omitempty"`
	// Profile is the run's profile when limited; To the profile a step
	// moved or handed the work to; both by name as well as by ref.
	ProfileRef  string `json:"profile_ref,omitempty"`
	ProfileName string `json:"profile_name,omitempty"`
	ToRef       string `json:"to_profile_ref,omitempty"`
	ToName      string `json:"to_profile_name,omitempty"`
	// NewRunRef is the run a handoff started.
	NewRunRef string `json:"new_run_ref,omitempty"`
	// ResetsAt is the limit's reset, on "limited" and "waiting".
	ResetsAt *time.Time `json:"resets_at,omitempty"`
	// By is "policy" when the profile's plan took the step, "person" when
	// someone ran it from the banner (POST /runs/{ref}/on-limit).
	By string `json:"by"`
	// Code and Reason say why a step was skipped: the stable code and the
	// sentence the same manual action answers.
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// OnLimitRequest is POST /runs/{ref}/on-limit: run one step now.
type OnLimitRequest struct {
	Step string `json:"step"`
}
