package transcript

import (
	"os"
	"path/filepath"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// MaxTurns bounds the turns of one sub-agent read; the oldest beyond it
// are left out and counted in SubAgentTurns.Omitted.
const MaxTurns = 1000

// SubAgent reads the transcript of one Claude Code sub-agent as plain
// turns (R-AGT-1): the prompt it got and the texts it wrote, from
// <project>/<session>/subagents/agent-<id>.jsonl, or
// subagents/workflows/<runId>/agent-<id>.jsonl for a workflow's agent
// (where Claude Code 2.1.328 writes them). An agent the session never
// started is ErrUnknownAgent (R-AGT-3); a known agent that has not written
// its transcript yet has no turns. Codex children are only reported inside
// Activity (R-AGT-4): ErrUnsupportedTool.
func (c *Cache) SubAgent(src Source, agent string) (apitypes.SubAgentTurns, error) {
	if err := checkSource(src); err != nil {
		return apitypes.SubAgentTurns{}, err
	}
	if src.Tool == ToolCodex {
		return apitypes.SubAgentTurns{}, errf(ErrUnsupportedTool, "Codex child agents are reported in the activity only; their transcripts are not offered") // R-AGT-4
	}
	unknown := errf(ErrUnknownAgent, "agent %q is not a sub-agent of this session", agent)
	if !safeName(agent) {
		return apitypes.SubAgentTurns{}, unknown
	}
	of, ix, _, err := c.open(src)
	if err != nil {
		return apitypes.SubAgentTurns{}, err
	}
	if ix == nil {
		return apitypes.SubAgentTurns{}, unknown
	}
	sessionDir := append(append([]string(nil), of.rel[:len(of.rel)-1]...), trimExt(of.rel[len(of.rel)-1]))
	// Where the agent's transcript may be: a Task/Agent sub-agent, or an
	// agent of one of the session's workflows.
	known := false
	candidates := [][]string{append(append([]string(nil), sessionDir...), "subagents", "agent-"+agent+".jsonl")}
	runs := map[string]bool{}
	for _, u := range ix.claude.order {
		if u.kind == kindAgent && (u.agentID == agent || u.id == agent) {
			known = true
		}
		if u.kind == kindWorkflow && safeName(u.runID) {
			runs[u.runID] = true
		}
	}
	ix.mu.Unlock()
	of.f.Close()
	if ents, err := os.ReadDir(filepath.Join(append([]string{src.Home}, append(sessionDir, "subagents", "workflows")...)...)); err == nil {
		for _, e := range ents {
			if safeName(e.Name()) {
				runs[e.Name()] = true
			}
		}
	}
	for run := range runs {
		candidates = append(candidates, append(append([]string(nil), sessionDir...), "subagents", "workflows", run, "agent-"+agent+".jsonl"))
	}
	out := apitypes.SubAgentTurns{Agent: agent, Turns: []apitypes.SubAgentTurn{}}
	for _, rel := range candidates {
		sof, err := openInHome(src.Home, rel...)
		if err == errNotFound {
			continue
		}
		if err != nil {
			return apitypes.SubAgentTurns{}, err
		}
		defer sof.f.Close()
		six, err := c.indexOf(sof, kindClaudeSub)
		if err != nil {
			return apitypes.SubAgentTurns{}, err
		}
		defer six.mu.Unlock()
		r := reader{of: sof, ix: six}
		msgs := six.msgs
		if len(msgs) > MaxTurns {
			out.Omitted = len(msgs) - MaxTurns
			msgs = msgs[len(msgs)-MaxTurns:]
		}
		for i := range msgs {
			t, clipped := clip(r.text(&msgs[i]))
			out.Turns = append(out.Turns, apitypes.SubAgentTurn{Role: roleName(msgs[i].role), Text: t, Clipped: clipped})
		}
		return out, nil
	}
	if known {
		return out, nil
	}
	return apitypes.SubAgentTurns{}, unknown
}

func trimExt(name string) string { return name[:len(name)-len(filepath.Ext(name))] }
