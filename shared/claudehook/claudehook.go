// Package claudehook is the engine's PreToolUse hook command for Claude
// Code (R-ED-4): Claude Code runs it before every tool use of a run that
// carries the engine's hooks, it asks the run's agent over the agent's
// local socket, and answers Claude Code with the agent's decision.
//
// It lives in shared because both sides speak it: the hook command (in the
// olivares, olivares-agent and olivares-coordinator binaries) and the
// agent's local API, which answers Request with Decision at Path.
//
// It fails closed: when the agent cannot be asked, the tool use is blocked
// (exit code 2), never allowed by default.
package claudehook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/olivares-dev/olivares/shared/localsock"
)

// Env names (set by the supervisor for the run's children).
const (
	EnvRun    = "OLIVARES_RUN_REF"
	EnvSocket = "OLIVARES_AGENT_SOCKET"
)

// Path is the local socket route the hook posts to.
const Path = "/claude-hook"

// Request is the hook's question to the agent.
type Request struct {
	RunRef string          `json:"run_ref"`
	Input  json.RawMessage `json:"input"`
}

// Decision is the agent's answer.
type Decision struct {
	// Decision is allow, deny or ask (the profile's policy decided: Claude
	// Code is told so), or pass (no rule decided: Claude Code's own
	// permission rules go on, and ask Olivares where they would ask a
	// person).
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
}

// The decisions.
const (
	Allow = "allow"
	Deny  = "deny"
	Ask   = "ask"
	Pass  = "pass"
)

// maxInput bounds what is read from Claude Code.
const maxInput = 1 << 20

// timeout bounds the question to the agent.
const timeout = 10 * time.Second

// Main runs the hook: Claude Code's hook input on stdin, the decision on
// stdout in Claude Code's hook output format, a reason on stderr and exit
// code 2 when the tool use is blocked for want of an answer.
func Main(stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	run, sock := getenv(EnvRun), getenv(EnvSocket)
	if run == "" || sock == "" {
		fmt.Fprintf(stderr, "olivares claude-hook: %s or %s is not set; this command runs as Claude Code's hook of an Olivares run. The tool use is blocked.\n", EnvRun, EnvSocket)
		return 2
	}
	in, err := io.ReadAll(io.LimitReader(stdin, maxInput+1))
	if err != nil || len(in) > maxInput || !json.Valid(in) {
		fmt.Fprintln(stderr, "olivares claude-hook: the hook input is not one JSON object of at most 1 MiB. The tool use is blocked.")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var d Decision
	if err := localsock.Do(ctx, sock, http.MethodPost, Path, Request{RunRef: run, Input: in}, &d); err != nil {
		fmt.Fprintf(stderr, "olivares claude-hook: the Olivares agent did not answer (%v). The tool use is blocked.\n", err)
		return 2
	}
	switch d.Decision {
	case Allow, Deny, Ask:
	default:
		// No rule decided: Claude Code's own permission rules go on, as
		// without the hook.
		return 0
	}
	out, _ := json.Marshal(map[string]any{"hookSpecificOutput": map[string]any{
		"hookEventName": "PreToolUse", "permissionDecision": d.Decision, "permissionDecisionReason": d.Reason,
	}})
	fmt.Fprintln(stdout, string(out))
	return 0
}
