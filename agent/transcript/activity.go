package transcript

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// emptyActivity is an Activity with every list present.
func emptyActivity(state State) apitypes.Activity {
	return apitypes.Activity{Agents: []apitypes.ActivityAgent{}, Tasks: []apitypes.ActivityTask{}, Files: []apitypes.FileChange{}, Todos: []apitypes.Todo{}, Skills: []apitypes.Skill{},
		MCPServers: []apitypes.MCPServer{}, Transcript: state}
}

// Activity reads what src's run is doing (GET /runs/{ref}/activity,
// R-ACT-1..9, R-WF-1..10). live is what the run's Live observer saw (nil
// when none); window, when not nil, is the Claude Code window report to use
// instead of live's (a persisted one).
func (c *Cache) Activity(src Source, live *LiveSnapshot, window *WindowReport) (apitypes.Activity, error) {
	of, ix, state, err := c.open(src)
	if err != nil {
		return apitypes.Activity{}, err
	}
	if window == nil && live != nil {
		window = live.Window
	}
	a := emptyActivity(state)
	b := &builder{c: c, src: src, live: live, a: &a}
	if ix == nil {
		b.liveOnly()
		b.finish()
		return a, nil
	}
	defer of.f.Close()
	defer ix.mu.Unlock()
	a.Unreadable += ix.skipped
	switch src.Tool {
	case ToolClaude:
		b.claude(of, ix, window)
	case ToolCodex:
		b.codex(ix)
	}
	b.finish()
	return a, nil
}

// builder assembles one Activity response.
type builder struct {
	c        *Cache
	src      Source
	live     *LiveSnapshot
	a        *apitypes.Activity
	budget   int64 // workflow summary bytes left in this request (R-WF-8)
	subFiles int   // sub-agent transcripts opened in this request
	files    map[string]*apitypes.FileChange
	skills   counter
	mcp      counter
	cwds     []string // the run's cwd, as given and physical
	// sessionDir is <project>/<session id>/ below the home, which holds
	// sub-agent transcripts and workflow summaries.
	sessionDir []string
}

// resolve turns a stored state into the reported one: work without an
// outcome runs while the run is live and was stopped with it otherwise.
func (b *builder) resolve(state string) string {
	switch state {
	case "", StateRunning:
		if b.src.Live {
			return StateRunning
		}
		return StateStopped
	case StateScheduled:
		if b.src.Live {
			return StateScheduled
		}
		return StateStopped
	}
	return state
}

// relPath shows a changed file relative to the run's working directory
// (as given, or its physical path).
func (b *builder) relPath(p string) string {
	if b.src.Cwd == "" || !filepath.IsAbs(p) {
		return p
	}
	if b.cwds == nil {
		b.cwds = []string{filepath.Clean(b.src.Cwd)}
		if phys, err := filepath.EvalSymlinks(b.src.Cwd); err == nil && phys != b.cwds[0] {
			b.cwds = append(b.cwds, phys)
		}
	}
	for _, cwd := range b.cwds {
		if r, err := filepath.Rel(cwd, p); err == nil && r != "." && r != ".." && !strings.HasPrefix(r, "../") {
			return r
		}
	}
	return p
}

func (b *builder) addFile(fc *apitypes.FileChange) {
	if b.files == nil {
		b.files = map[string]*apitypes.FileChange{}
	}
	p := b.relPath(fc.Path)
	if have := b.files[p]; have != nil {
		have.Added += fc.Added
		have.Removed += fc.Removed
		have.Created = have.Created || fc.Created
		return
	}
	c := *fc
	c.Path = p
	b.files[p] = &c
	b.a.Files = append(b.a.Files, c)
}

func (b *builder) addCounts(skills, mcp *counter) {
	if skills != nil {
		for _, n := range skills.order {
			for i := 0; i < skills.n[n]; i++ {
				b.skills.add(n)
			}
		}
	}
	if mcp != nil {
		for _, n := range mcp.order {
			for i := 0; i < mcp.n[n]; i++ {
				b.mcp.add(n)
			}
		}
	}
}

// finish fills the lists that merge several sources.
func (b *builder) finish() {
	a := b.a
	for i := range a.Files {
		a.Files[i] = *b.files[a.Files[i].Path]
	}
	for _, n := range b.skills.order {
		a.Skills = append(a.Skills, apitypes.Skill{Name: n, Uses: b.skills.n[n]})
	}
	seen := map[string]bool{}
	if b.live != nil {
		for _, s := range b.live.MCPServers {
			seen[s.Name] = true
			a.MCPServers = append(a.MCPServers, apitypes.MCPServer{Name: s.Name, Status: s.Status, Calls: b.mcp.n[s.Name]})
		}
	}
	for _, n := range b.mcp.order {
		if !seen[n] {
			a.MCPServers = append(a.MCPServers, apitypes.MCPServer{Name: n, Calls: b.mcp.n[n]})
		}
	}
	// By start; work whose start is unknown (seen only live) last.
	sort.SliceStable(a.Tasks, func(i, j int) bool {
		si, sj := a.Tasks[i].StartedAt, a.Tasks[j].StartedAt
		if si == "" || sj == "" {
			return si != "" && sj == ""
		}
		return si < sj
	})
}

// liveOnly fills what the live observer knows when no record was read.
func (b *builder) liveOnly() {
	if b.live == nil {
		return
	}
	if b.src.Tool == ToolCodex && b.live.Plan != nil {
		b.a.Todos = append(b.a.Todos, b.live.Plan.Steps...)
	}
	if b.src.Tool == ToolClaude {
		b.liveWorkflows(nil)
	}
}

// percent is 100 × tokens / window, rounded to one decimal (R-ACT-9).
func percent(tokens, window int64) *float64 {
	if window <= 0 || tokens < 0 {
		return nil
	}
	p := math.Round(1000*float64(tokens)/float64(window)) / 10
	return &p
}

// claudeWindow picks the window of the model of the last request from a
// report: only when exactly one entry is for that model (R-ACT-9). An entry
// is for the model when its key is the model, the model as requested, or
// the model with a bracketed variant ("claude-sonnet-4-5[1m]").
func claudeWindow(w *WindowReport, model, requested string) (int64, bool) {
	if w == nil || model == "" {
		return 0, false
	}
	var found int64
	n := 0
	for key, mw := range w.ModelUsage {
		base := key
		if i := strings.IndexByte(key, '['); i > 0 {
			base = key[:i]
		}
		if key == model || (requested != "" && key == requested) || base == model {
			n++
			found = mw.ContextWindow
		}
	}
	if n != 1 || found <= 0 {
		return 0, false
	}
	return found, true
}

// claude builds the activity of a Claude Code session.
func (b *builder) claude(of *openedFile, ix *fileIndex, window *WindowReport) {
	st := ix.claude
	a := b.a
	if st.model != "" {
		m := st.model
		a.Model = &m
	}
	if st.usage != nil {
		t := st.usage.InputTokens + st.usage.CacheReadInputTokens + st.usage.CacheCreationInputTokens
		a.ContextTokens = &t
		if w, ok := claudeWindow(window, st.model, st.requested); ok {
			a.ContextWindow = &w
			a.ContextPercent = percent(t, w)
		}
	}
	a.Compactions = st.compactions
	a.AgentsOmitted = st.omitted[kindAgent]
	a.TasksOmitted = st.omitted[kindCommand] + st.omitted[kindWorkflow] + st.omitted[kindScheduled]
	a.FilesOmitted = st.filesOver
	// The session's directory: <project>/<session id>/ holds sub-agent
	// transcripts and workflow summaries.
	sessionDir := append(append([]string(nil), of.rel[:len(of.rel)-1]...), strings.TrimSuffix(of.rel[len(of.rel)-1], ".jsonl"))
	b.sessionDir = sessionDir
	b.budget = maxSummaryRequestBytes

	for _, p := range st.fileOrder {
		b.addFile(st.files[p])
	}
	b.addCounts(&st.skills, &st.mcp)
	switch {
	case st.tasksSeq > st.todosSeq:
		a.Todos = append(a.Todos, st.tasks...)
	default:
		a.Todos = append(a.Todos, st.todos...)
	}

	matched := map[int]bool{} // live snapshots used by a workflow of the transcript
	var metas map[string]string
	for _, u := range st.order {
		switch u.kind {
		case kindAgent:
			id := u.agentID
			if id == "" {
				// Running, or ended without reporting its id (an error):
				// the agent's meta file names its tool use.
				if metas == nil {
					metas = b.subagentMetas()
				}
				id = metas[u.id]
			}
			if id != "" {
				b.subTranscript(append(append([]string(nil), sessionDir...), "subagents", "agent-"+id+".jsonl"), id)
			} else {
				id = u.id
			}
			a.Agents = append(a.Agents, apitypes.ActivityAgent{ID: id, Type: u.subagentType, Description: u.description, State: b.resolve(u.state),
				Background: u.background, StartedAt: formatTime(u.start), EndedAt: formatTime(u.end)})
		case kindCommand:
			a.Tasks = append(a.Tasks, b.commandTask(u, ""))
		case kindScheduled:
			a.Tasks = append(a.Tasks, apitypes.ActivityTask{ID: u.id, Kind: apitypes.TaskScheduled, Description: u.description,
				State: b.resolve(scheduledState(u.state)), StartedAt: formatTime(u.start), EndedAt: formatTime(u.end)})
		case kindWorkflow:
			a.Tasks = append(a.Tasks, b.workflowTask(u, sessionDir, matched))
		}
	}
	b.liveWorkflows(matched)
}

// subagentMetas maps tool_use ids to agent ids from the sub-agents'
// agent-<id>.meta.json files ({"toolUseId": …}), which Claude Code writes
// when an agent starts.
func (b *builder) subagentMetas() map[string]string {
	out := map[string]string{}
	dir := append(append([]string(nil), b.sessionDir...), "subagents")
	ents, err := os.ReadDir(filepath.Join(append([]string{b.src.Home}, dir...)...))
	if err != nil {
		return out
	}
	n := 0
	for _, e := range ents {
		name := e.Name()
		id, ok := strings.CutSuffix(strings.TrimPrefix(name, "agent-"), ".meta.json")
		if !ok || !strings.HasPrefix(name, "agent-") || !safeName(id) || n >= maxSubagentFiles {
			continue
		}
		n++
		of, err := openInHome(b.src.Home, append(dir, name)...)
		if err != nil {
			continue
		}
		var meta struct {
			ToolUseID string `json:"toolUseId"`
		}
		data, err := io.ReadAll(io.LimitReader(of.f, 64<<10))
		of.f.Close()
		if err == nil && json.Unmarshal(data, &meta) == nil && meta.ToolUseID != "" {
			out[meta.ToolUseID] = id
		}
	}
	return out
}

// scheduledState: a scheduled job without an outcome is scheduled.
func scheduledState(s string) string {
	if s == "" {
		return StateScheduled
	}
	return s
}

func (b *builder) commandTask(u *workUse, agent string) apitypes.ActivityTask {
	kind := apitypes.TaskCommand
	if u.background {
		kind = apitypes.TaskBackgroundCommand
	}
	return apitypes.ActivityTask{ID: u.id, Kind: kind, Description: u.description, Command: u.command, State: b.resolve(u.state),
		ExitCode: u.exitCode, Agent: agent, StartedAt: formatTime(u.start), EndedAt: formatTime(u.end)}
}

// subTranscript merges a sub-agent transcript's commands, files, skills
// and MCP calls into the activity.
func (b *builder) subTranscript(rel []string, agent string) {
	if b.subFiles >= maxSubagentFiles {
		b.a.Unreadable++
		return
	}
	b.subFiles++
	of, err := openInHome(b.src.Home, rel...)
	if err == errNotFound {
		return // not written yet
	}
	if err != nil {
		b.a.Unreadable++
		return
	}
	defer of.f.Close()
	ix, err := b.c.indexOf(of, kindClaudeSub)
	if err != nil {
		b.a.Unreadable++
		return
	}
	defer ix.mu.Unlock()
	st := ix.claude
	b.a.Unreadable += ix.skipped
	for _, u := range st.order {
		if u.kind == kindCommand {
			b.a.Tasks = append(b.a.Tasks, b.commandTask(u, agent))
		}
	}
	for _, p := range st.fileOrder {
		b.addFile(st.files[p])
	}
	b.addCounts(&st.skills, &st.mcp)
}

// codex builds the activity of a Codex thread from its rollout (R-ACT-4),
// with the live plan when it is newer (R-ACT-5).
func (b *builder) codex(ix *fileIndex) {
	st := ix.codex
	a := b.a
	if st.model != "" {
		m := st.model
		a.Model = &m
	}
	if st.last != nil {
		t := st.last.TotalTokens
		if t == 0 {
			t = st.last.InputTokens + st.last.OutputTokens
		}
		a.ContextTokens = &t
		if st.window > 0 {
			w := st.window
			a.ContextWindow = &w
			a.ContextPercent = percent(t, w)
		}
	}
	a.Compactions = max(st.compactions, st.contextCompacted)
	a.TasksOmitted = st.omitted[kindCommand]
	a.FilesOmitted = st.filesOver
	for _, id := range st.agentOrder {
		ag := st.agents[id]
		state := ag.state
		if state == StateRunning || state == "" {
			state = b.resolve(state)
		} else if state == StateScheduled && !b.src.Live {
			state = StateStopped
		}
		a.Agents = append(a.Agents, apitypes.ActivityAgent{ID: ag.id, Name: ag.nickname, Description: ag.prompt, State: state,
			StartedAt: formatTime(ag.start), EndedAt: formatTime(ag.end)})
	}
	for _, u := range st.order {
		a.Tasks = append(a.Tasks, b.commandTask(u, ""))
	}
	for _, p := range st.fileOrder {
		b.addFile(st.files[p])
	}
	b.addCounts(nil, &st.mcp)
	a.Todos = append(a.Todos, st.plan...)
	if b.live != nil && b.live.Plan != nil && b.live.Plan.At.UnixMilli() > st.planAt {
		a.Todos = append(a.Todos[:0], b.live.Plan.Steps...)
	}
}
