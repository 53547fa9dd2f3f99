package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/refusal"
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

// ClaudeHook is the engine's PreToolUse policy point for a Claude Code run
// that carries the engine's hooks (R-ED-4): it records the tool use in the
// run's ledger (its name only, R-EVT-4) and refuses the tools the
// profile's policy denies. It observes and enforces; it is not a
// replacement CLI.
func (s *Supervisor) ClaudeHook(ctx context.Context, ref string, input []byte) (HookDecision, error) {
	if len(input) > maxHookInput {
		return HookDecision{}, refusal.New(ErrHookInputTooLarge, "the hook input is over %d bytes", maxHookInput)
	}
	r, err := s.get(ref)
	if err != nil {
		return HookDecision{}, err
	}
	var in struct {
		Event     string `json:"hook_event_name"`
		SessionID string `json:"session_id"`
		Tool      string `json:"tool_name"`
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
	prof, ok, err := s.o.Registry.Profile(rec.ProfileRef)
	if err != nil {
		return HookDecision{}, err
	}
	d := HookDecision{Decision: "allow"}
	if ok && (slices.Contains(prof.DeniedTools, in.Tool) || slices.Contains(prof.DeniedTools, "*")) {
		d = HookDecision{Decision: "deny", Reason: fmt.Sprintf("the Olivares profile %s does not allow the %s tool", prof.Ref, in.Tool)}
	}
	detail, _ := json.Marshal(map[string]string{"tool": in.Tool, "decision": d.Decision})
	if _, err := s.o.Ledger.Append(ref, ledger.Event{Kind: KindToolUse, Generation: g.n, Detail: detail}); err != nil {
		return HookDecision{}, err
	}
	return d, nil
}
