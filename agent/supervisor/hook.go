package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/claudehook"
)

// HookEndpoint is where the engine's PreToolUse hook reports (R-ED-4):
// Command is what Claude Code runs (`olivares-agent claude-hook`, quoted
// for its shell), Socket the agent's local socket it posts to.
type HookEndpoint struct {
	Command string
	Socket  string
}

// KindToolUse is the ledger event of a tool use the engine's hook saw:
// the tool's name and the decision, never its input (R-EVT-4).
const KindToolUse = "tool_use"

// HookDecision is the engine's answer to one PreToolUse hook.
type HookDecision = claudehook.Decision

// maxHookInput bounds the hook input the agent reads.
const maxHookInput = 1 << 20

// ClaudeHook is the engine's PreToolUse policy point for the Claude Code
// runs that carry the engine's hooks (R-ED-4).
type ClaudeHook struct {
	runs *Table
	o    *Options
}

// Decide records the tool use of run ref in its ledger (its name only,
// R-EVT-4) and refuses the tools the profile's policy denies. It observes
// and enforces; it is not a replacement CLI.
func (h *ClaudeHook) Decide(ctx context.Context, ref string, input []byte) (HookDecision, error) {
	if len(input) > maxHookInput {
		return HookDecision{}, refusal.New(ErrHookInputTooLarge, "the hook input is over %d bytes", maxHookInput)
	}
	r, err := h.runs.get(ref)
	if err != nil {
		return HookDecision{}, err
	}
	var in struct {
		Event     string `json:"hook_event_name"`
		SessionID string `json:"session_id"`
		Tool      string `json:"tool_name"`
		ToolUseID string `json:"tool_use_id"`
		Input     struct {
			Command  string `json:"command"`
			FilePath string `json:"file_path"`
		} `json:"tool_input"`
	}
	if err := json.Unmarshal(input, &in); err != nil || in.Tool == "" {
		return HookDecision{}, refusal.New(ErrBadHookInput, "the hook input is not a PreToolUse event with a tool_name")
	}
	r.mu.Lock()
	rec, g := r.rec, r.gen
	r.mu.Unlock()
	switch {
	case rec.Driver != string(cliruntime.KindClaude):
		return HookDecision{}, refusal.New(ErrNotClaude, "run %s is not a Claude Code run", ref)
	case g == nil:
		return HookDecision{}, refusal.New(ErrNotLive, "run %s is not live", ref)
	case rec.ConversationID != "" && in.SessionID != "" && in.SessionID != rec.ConversationID:
		return HookDecision{}, refusal.New(ErrOtherSession, "the hook is for session %s, not run %s's", in.SessionID, ref)
	}
	prof, ok, err := h.o.Registry.Profile(rec.ProfileRef)
	if err != nil {
		return HookDecision{}, err
	}
	// The same policy as the process's requests (R-HOOK-5): a rule of the
	// profile decides here; with none, Claude Code's own permission rules
	// go on and ask Olivares (a request) where they would ask a person. So
	// the ledger never says "allow" for a use the tool then refuses.
	d := HookDecision{Decision: claudehook.Pass}
	subj := registry.Subject{Tool: in.Tool, Kind: apitypes.RequestPermission}
	switch in.Tool {
	case "Bash":
		subj.Kind, subj.Command = apitypes.RequestCommand, in.Input.Command
	case "Edit", "MultiEdit", "Write", "NotebookEdit":
		subj.Kind = apitypes.RequestFileChange
		if in.Input.FilePath != "" {
			subj.Paths = []string{in.Input.FilePath}
		}
	}
	if action, rule := g.policy.Decide(subj); rule > 0 {
		d = HookDecision{Decision: action, Reason: fmt.Sprintf("approval rule %d of the Olivares profile %s", rule, rec.ProfileRef)}
	}
	if ok && (slices.Contains(prof.DeniedTools, in.Tool) || slices.Contains(prof.DeniedTools, "*")) {
		d = HookDecision{Decision: claudehook.Deny, Reason: fmt.Sprintf("the Olivares profile %s does not allow the %s tool", prof.Ref, in.Tool)}
	}
	detail, _ := json.Marshal(map[string]string{"tool": in.Tool, "decision": d.Decision})
	if _, err := h.o.Ledger.Append(ref, ledger.Event{Kind: KindToolUse, Generation: g.n, Detail: detail}); err != nil {
		return HookDecision{}, err
	}
	if d.Decision == claudehook.Deny {
		// Every refusal is on the run (R-REQ-9): as a request the policy
		// settled, which the tool's permission_denials then match.
		g.denied(&cliruntime.Denial{Tool: in.Tool, ToolUseID: in.ToolUseID, Command: cliruntime.Clip(in.Input.Command), Message: d.Reason}, apitypes.ByPolicy)
	}
	return d, nil
}
