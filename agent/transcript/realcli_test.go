//go:build linux

package transcript

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// workflowScript is a two-phase Claude Code workflow with one agent per
// phase (the Workflow tool's script form: meta first, then phase()/agent()).
const workflowScript = `export const meta = { name: 'probe', description: 'two phases', phases: [{ title: 'Gather' }, { title: 'Report' }] }
phase('Gather')
const a = await agent('say one', { label: 'one' })
phase('Report')
const b = await agent('say two', { label: 'two' })
return 'ok'`

// realClaudePrompt documents the turns of TestRealClaudeActivity in the
// fixture it writes.
const realClaudePrompt = `claude 2.1.328 --print stream-json against fakemodel.Anthropic, --allowedTools Bash,Write,Edit,Read,Agent,TaskCreate,TaskUpdate,Workflow.
Turn "go": the fake answers Agent (foreground general-purpose sub-agent "look around", which answers "sub-agent says hi"),
Write b.txt "x\ny\n", Edit b.txt x -> "x1\nx2", Bash "echo bg-out" in the background, Bash "exit 3", TaskCreate "first task",
TaskUpdate 1 in_progress, Workflow (two phases Gather/Report, one agent each), then text. The workflow's agents and the
notification turn get the fake's echo. Then "/compact" (a real compaction, the fake's echo as summary), then "what changed?".`

// TestRealClaudeActivity drives Claude Code through sub-agents, commands,
// file edits, tasks, a workflow and a compaction, then checks what
// Activity, Messages and SubAgent read from the transcript it wrote
// (R-ACT-1..9, R-WF-1..10, R-MSG-1..9, R-AGT-1).
func TestRealClaudeActivity(t *testing.T) {
	bin := realBinDir(t, "claude")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	home, work := realDirs(t)
	b := filepath.Join(work, "b.txt")
	fake.Push(
		fakemodel.Tool("Agent", toolArgs(map[string]any{"description": "look around", "prompt": "say hi", "subagent_type": "general-purpose", "run_in_background": false})),
		fakemodel.Text("sub-agent says hi"),
		fakemodel.Tool("Write", toolArgs(map[string]any{"file_path": b, "content": "x\ny\n"})),
		fakemodel.Tool("Edit", toolArgs(map[string]any{"file_path": b, "old_string": "x", "new_string": "x1\nx2"})),
		fakemodel.Tool("Bash", toolArgs(map[string]any{"command": "echo bg-out", "description": "bg echo", "run_in_background": true})),
		fakemodel.Tool("Bash", toolArgs(map[string]any{"command": "exit 3", "description": "fail on purpose"})),
		fakemodel.Tool("TaskCreate", toolArgs(map[string]any{"subject": "first task", "description": "do it", "activeForm": "Doing it"})),
		fakemodel.Tool("TaskUpdate", toolArgs(map[string]any{"taskId": "1", "status": "in_progress"})),
		fakemodel.Tool("Workflow", toolArgs(map[string]any{"script": workflowScript})),
		fakemodel.Text("launched it"),
	)
	p := startClaude(t, bin, fake, home, work, nil, "--allowedTools", "Bash,Write,Edit,Read,Agent,TaskCreate,TaskUpdate,Workflow")
	p.send(userLine("go"))
	init := p.await("system/init", func(m map[string]any) bool { return m["subtype"] == "init" })
	sid, _ := init["session_id"].(string)
	wfStart := p.await("workflow task_started", func(m map[string]any) bool {
		return m["subtype"] == "task_started" && m["task_type"] == "local_workflow"
	})
	p.await("workflow task_notification", func(m map[string]any) bool {
		return m["subtype"] == "task_notification" && m["task_id"] == wfStart["task_id"]
	})
	p.await("the result after the workflow", isResult)
	p.send(userLine("/compact"))
	p.await("/compact result", isResult)
	p.send(userLine("what changed?"))
	p.await("last result", isResult)
	p.finish()

	src := Source{Tool: ToolClaude, Home: home, ConversationID: sid, Cwd: work}
	snap := p.live.Snapshot()
	c := NewCache(0, 0)
	a, err := c.Activity(src, &snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Transcript != StateRead || a.Unreadable != 0 {
		t.Errorf("transcript %q unreadable %d, want read and 0", a.Transcript, a.Unreadable)
	}
	// The foreground sub-agent and the two workflow agents, all completed.
	var ids []string
	for _, ag := range a.Agents {
		if ag.State != StateCompleted {
			t.Errorf("agent %+v: state %q, want completed", ag, ag.State)
		}
		ids = append(ids, ag.ID)
	}
	if len(a.Agents) != 3 || a.Agents[0].Type != "general-purpose" || a.Agents[0].Description != "look around" {
		t.Fatalf("agents %+v, want the sub-agent and two workflow agents", a.Agents)
	}
	// Commands: the background echo completed, "exit 3" failed with 3.
	var bg, failed, wf *apitypes.ActivityTask
	for i := range a.Tasks {
		switch tk := &a.Tasks[i]; {
		case tk.Command == "echo bg-out":
			bg = tk
		case tk.Command == "exit 3":
			failed = tk
		case tk.Kind == apitypes.TaskWorkflow:
			wf = tk
		}
	}
	if bg == nil || bg.Kind != apitypes.TaskBackgroundCommand || bg.State != StateCompleted {
		t.Errorf("background command %+v, want a completed background_command", bg)
	}
	if failed == nil || failed.State != StateFailed || failed.ExitCode == nil || *failed.ExitCode != 3 {
		t.Errorf("failing command %+v, want failed with exit code 3", failed)
	}
	if wf == nil || wf.State != StateCompleted || wf.Workflow == nil {
		t.Fatalf("workflow task %+v, want a completed workflow", wf)
	}
	w := wf.Workflow
	if !strings.HasPrefix(w.RunID, "wf_") || w.Name != "probe" || w.AgentsTotal != 2 || w.AgentsDone != 2 || w.AgentsFailed != 0 || len(w.Phases) != 2 {
		t.Errorf("workflow %+v, want run wf_…, probe, 2 agents done, 2 phases", w)
	}
	for i, ph := range w.Phases {
		if ph.Index != i+1 || ph.State != StateCompleted || ph.AgentsTotal != 1 || ph.AgentsDone != 1 {
			t.Errorf("phase %+v, want index %d completed with its one agent done", ph, i+1)
		}
	}
	if !slices.Equal(a.Files, []apitypes.FileChange{{Path: "b.txt", Added: 4, Removed: 1, Created: true}}) {
		t.Errorf("files %+v, want b.txt created, +4 -1", a.Files)
	}
	if !slices.Equal(a.Todos, []apitypes.Todo{{Content: "first task", Status: "in_progress", ActiveForm: "Doing it"}}) {
		t.Errorf("todos %+v, want the TaskCreate task in progress", a.Todos)
	}
	if a.Compactions != 1 {
		t.Errorf("compactions %d, want 1", a.Compactions)
	}
	// R-ACT-7/9: the result frames report one window for the model.
	if a.Model == nil || a.ContextTokens == nil || a.ContextWindow == nil || a.ContextPercent == nil {
		t.Fatalf("model %v tokens %v window %v percent %v, want all known", a.Model, a.ContextTokens, a.ContextWindow, a.ContextPercent)
	}
	if want := snap.Window.ModelUsage[*a.Model].ContextWindow; *a.ContextWindow != want || want == 0 {
		t.Errorf("context_window %d, want %d from modelUsage[%s]", *a.ContextWindow, want, *a.Model)
	}

	// Messages: the person's three prompts, and the replies with role=all.
	page, err := c.Messages(src, DefaultMessagesQuery())
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, it := range page.Items {
		said = append(said, it.FirstLine)
	}
	if !slices.Equal(said, []string{"go", "/compact", "what changed?"}) || page.Total != 3 || page.Next != nil {
		t.Errorf("user messages %q (total %d), want go, /compact, what changed?", said, page.Total)
	}
	all, err := c.Messages(src, MessagesQuery{Role: RoleAll, Text: true})
	if err != nil {
		t.Fatal(err)
	}
	if all.Total <= page.Total || all.Items[0].Text == nil || *all.Items[0].Text != "go" {
		t.Errorf("role=all: total %d, first %+v", all.Total, all.Items[0])
	}
	// The sub-agent's transcript as turns (R-AGT-1), and an unknown one (R-AGT-3).
	turns, err := c.SubAgent(src, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(turns.Turns) != 2 || turns.Turns[0] != (apitypes.SubAgentTurn{Role: RoleUser, Text: "say hi"}) || turns.Turns[1] != (apitypes.SubAgentTurn{Role: RoleAssistant, Text: "sub-agent says hi"}) {
		t.Errorf("sub-agent turns %+v, want the prompt and its answer", turns.Turns)
	}
	if _, err := c.SubAgent(src, "a0000000000000000"); err == nil || !isErr(err, ErrUnknownAgent) {
		t.Errorf("unknown agent: %v, want ErrUnknownAgent", err)
	}
	saveFixture(t, "real-claude-tools", goldenCase{Prompt: realClaudePrompt, Tool: ToolClaude, ConversationID: sid, Cwd: work,
		Queries: []string{"", "role=all", "role=all&text=1&limit=3", "role=all&order=desc&limit=2", "q=COMPACT", "id=1", "id=999"},
		Agents:  ids}, home, p.stdout())
}

const realInterruptPrompt = `claude 2.1.328 --print stream-json --session-id <fixed>, CLAUDE_CODE_ENABLE_TASKS=false, --allowedTools Bash,Agent,TodoWrite,CronCreate.
Turn "start": TodoWrite (2 todos), Agent "will fail" whose request the fake answers 500, CronCreate, text.
Turn "second": Bash that waits until the transcript records "typed while busy", which the test sends meanwhile (a queued_command); text.
Turn "stop the agent": Agent "held" whose request the fake holds; the test sends an interrupt control_request.`

// TestRealClaudeInterrupts covers a failed and an interrupted (stopped)
// sub-agent, TodoWrite todos, a scheduled job and a message the person
// sent while a turn ran (delivered as a queued_command).
func TestRealClaudeInterrupts(t *testing.T) {
	bin := realBinDir(t, "claude")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	home, work := realDirs(t)
	// The session id is fixed so that the Bash call of turn "second" can
	// wait for the transcript to record the queued message: claude has
	// then read it, and delivers it with the Bash result (no sleep here;
	// the JSON-escaped pattern in the tool_use record never matches).
	sid := "6f1d3c2a-5b4e-4f60-8a71-9c0d1e2f3a4b"
	transcript := filepath.Join(home, ".claude", "projects", ClaudeSlug(work), sid+".jsonl")
	gate := fakemodel.NewGate()
	defer gate.Release()
	fake.Push(
		fakemodel.Tool("TodoWrite", toolArgs(map[string]any{"todos": []any{
			map[string]any{"content": "write file", "status": "in_progress", "activeForm": "Writing file"},
			map[string]any{"content": "run ls", "status": "pending", "activeForm": "Running ls"}}})),
		fakemodel.Tool("Agent", toolArgs(map[string]any{"description": "will fail", "prompt": "fail please", "subagent_type": "general-purpose", "run_in_background": false})),
		fakemodel.AnthropicServerError(),
		fakemodel.Tool("CronCreate", toolArgs(map[string]any{"cron": "*/5 * * * *", "prompt": "check the build", "recurring": true})),
		fakemodel.Text("the agent failed"),
		fakemodel.Tool("Bash", toolArgs(map[string]any{"command": "for i in $(seq 1 900); do grep -qF '\"content\":\"typed while busy\"' " + transcript + " && exit 0; sleep 0.1; done; exit 1", "description": "wait for the queued message"})),
		fakemodel.Text("saw your note"),
		fakemodel.Tool("Agent", toolArgs(map[string]any{"description": "held", "prompt": "take your time", "subagent_type": "general-purpose", "run_in_background": false})),
		fakemodel.Held(gate),
	)
	p := startClaude(t, bin, fake, home, work, []string{"CLAUDE_CODE_ENABLE_TASKS=false"},
		"--session-id", sid, "--allowedTools", "Bash,Agent,TodoWrite,CronCreate")
	p.send(userLine("start"))
	p.await("first result", isResult)

	p.send(userLine("second"))
	p.await("the Bash call", func(m map[string]any) bool {
		return m["type"] == "assistant" && strings.Contains(toJSON(m), `"name":"Bash"`)
	})
	p.send(userLine("typed while busy"))
	end := p.await("second result", isResult)
	if end["is_error"] != false {
		t.Fatalf("turn second: %v", end)
	}

	p.send(userLine("stop the agent"))
	wait(t, gate.Arrived(), "the held sub-agent request")
	p.send(`{"type":"control_request","request_id":"int-1","request":{"subtype":"interrupt"}}`)
	p.await("interrupted result", isResult)
	p.finish()

	src := Source{Tool: ToolClaude, Home: home, ConversationID: sid, Cwd: work}
	c := NewCache(0, 0)
	snap := p.live.Snapshot()
	a, err := c.Activity(src, &snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, ag := range a.Agents {
		states = append(states, ag.Description+":"+ag.State)
	}
	if !slices.Equal(states, []string{"will fail:failed", "held:stopped"}) {
		t.Errorf("agents %q, want will fail:failed, held:stopped", states)
	}
	if len(a.Todos) != 2 || a.Todos[0] != (apitypes.Todo{Content: "write file", Status: "in_progress", ActiveForm: "Writing file"}) {
		t.Errorf("todos %+v, want the TodoWrite list", a.Todos)
	}
	var sched *apitypes.ActivityTask
	for i := range a.Tasks {
		if a.Tasks[i].Kind == apitypes.TaskScheduled {
			sched = &a.Tasks[i]
		}
	}
	// The run is over (Live false): a job that was scheduled is stopped
	// with it, unless the tool refused it.
	if sched == nil || (sched.State != StateStopped && sched.State != StateFailed) {
		t.Errorf("scheduled task %+v, want stopped (or failed when refused)", sched)
	}
	page, err := c.Messages(src, DefaultMessagesQuery())
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, it := range page.Items {
		said = append(said, it.FirstLine)
	}
	if !slices.Equal(said, []string{"start", "second", "typed while busy", "stop the agent"}) {
		t.Errorf("user messages %q, want start, second, typed while busy, stop the agent", said)
	}
	var agentIDs []string
	for _, ag := range a.Agents {
		agentIDs = append(agentIDs, ag.ID)
	}
	saveFixture(t, "real-claude-interrupts", goldenCase{Prompt: realInterruptPrompt, Tool: ToolClaude, ConversationID: sid, Cwd: work,
		Queries: []string{"", "role=all", "role=all&order=desc&cursor=4&limit=2", "id=3"}, Agents: agentIDs}, home, p.stdout())
}

const realCodexPrompt = `codex 0.169.0 app-server against fakemodel.OpenAI (through a proxy that adds the namespace of multi_agent_v1 calls),
sandbox danger-full-access, [tools.update_plan] enabled. Turn "do the work": exec_command "echo hi", exec_command "exit 3",
apply_patch adding a.txt (2 lines), apply_patch updating a.txt (-1 +2), update_plan (look: completed, fix: in_progress),
spawn_agent "child say hi", then text (the child answers with text too). After the child's turn completes, turn "status?"
(the fake's echo).`

// TestRealCodexActivity drives Codex through commands, patches, a plan and
// a child agent, then checks what Activity and Messages read from the
// rollout alone (R-ACT-4) and from the live plan notification (R-ACT-5).
func TestRealCodexActivity(t *testing.T) {
	bin := realBinDir(t, "codex")
	fake := fakemodel.NewOpenAI()
	defer fake.Close()
	home, work := realDirs(t)
	patch := func(body string) string {
		return toolArgs(map[string]any{"cmd": "apply_patch <<'EOF'\n*** Begin Patch\n" + body + "*** End Patch\nEOF\n"})
	}
	fake.Push(
		fakemodel.Tool("exec_command", toolArgs(map[string]any{"cmd": "echo hi"})),
		fakemodel.Tool("exec_command", toolArgs(map[string]any{"cmd": "exit 3"})),
		fakemodel.Tool("exec_command", patch("*** Add File: a.txt\n+hello\n+world\n")),
		fakemodel.Tool("exec_command", patch("*** Update File: a.txt\n@@\n-hello\n+hi\n+there\n")),
		fakemodel.Tool("update_plan", toolArgs(map[string]any{"explanation": "two steps", "plan": []any{
			map[string]any{"step": "look", "status": "completed"}, map[string]any{"step": "fix", "status": "in_progress"}}})),
		fakemodel.Tool("multi_agent_v1.spawn_agent", toolArgs(map[string]any{"message": "child say hi"})),
		fakemodel.Text("child reply"),
		fakemodel.Text("parent done"),
	)
	p := startCodex(t, bin, namespaceProxy(t, fake.URL()), home, work, "[tools.update_plan]\nenabled = true\n")
	thread := p.codexThread(work)
	p.rpc(10, "turn/start", map[string]any{"threadId": thread, "input": []any{map[string]any{"type": "text", "text": "do the work", "text_elements": []any{}}}})
	done := 0
	p.await("the parent's and the child's turn/completed", func(m map[string]any) bool {
		if m["method"] == "turn/completed" {
			done++
		}
		return done == 2
	})
	p.rpc(11, "turn/start", map[string]any{"threadId": thread, "input": []any{map[string]any{"type": "text", "text": "status?", "text_elements": []any{}}}})
	p.await("turn/completed of status?", func(m map[string]any) bool {
		params, _ := m["params"].(map[string]any)
		return m["method"] == "turn/completed" && params["threadId"] == thread
	})
	p.finish()

	src := Source{Tool: ToolCodex, Home: home, ConversationID: thread, Cwd: work}
	c := NewCache(0, 0)
	a, err := c.Activity(src, nil, nil) // the rollout alone
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, tk := range a.Tasks {
		code := "-"
		if tk.ExitCode != nil {
			code = string(rune('0' + *tk.ExitCode))
		}
		cmds = append(cmds, tk.State+":"+code)
	}
	if len(a.Tasks) != 4 || cmds[0] != "completed:0" || cmds[1] != "failed:3" {
		t.Errorf("tasks %q (%+v), want echo completed:0, exit 3 failed:3, and the two patches", cmds, a.Tasks)
	}
	if !slices.Equal(a.Files, []apitypes.FileChange{{Path: "a.txt", Added: 4, Removed: 1, Created: true}}) {
		t.Errorf("files %+v, want a.txt created, +4 -1", a.Files)
	}
	if !slices.Equal(a.Todos, []apitypes.Todo{{Content: "look", Status: "completed"}, {Content: "fix", Status: "in_progress"}}) {
		t.Errorf("todos %+v, want the update_plan steps", a.Todos)
	}
	if len(a.Agents) != 1 || a.Agents[0].State != StateCompleted || a.Agents[0].Description != "child say hi" {
		t.Errorf("agents %+v, want the completed child", a.Agents)
	}
	// R-ACT-4: the last request's tokens, not the thread's total.
	if a.ContextTokens == nil || *a.ContextTokens != 1290 || a.ContextWindow == nil || *a.ContextWindow != 258400 || a.Model == nil || *a.Model != "fake-model" {
		t.Errorf("context %v/%v model %v, want 1290 of 258400 for fake-model", a.ContextTokens, a.ContextWindow, a.Model)
	}
	// R-ACT-5: the live bridge saw the same plan; a newer one wins.
	snap := p.live.Snapshot()
	if snap.Plan == nil || len(snap.Plan.Steps) != 2 {
		t.Fatalf("live plan %+v, want the turn/plan/updated steps", snap.Plan)
	}
	newer := snap
	np := *snap.Plan
	np.At = np.At.Add(3600e9)
	np.Steps = []apitypes.Todo{{Content: "code-mode step", Status: "pending"}}
	newer.Plan = &np
	if a2, err := c.Activity(src, &newer, nil); err != nil || !slices.Equal(a2.Todos, np.Steps) {
		t.Errorf("activity with a newer live plan: todos %+v (%v), want %+v", a2.Todos, err, np.Steps)
	}
	if _, err := c.SubAgent(src, a.Agents[0].ID); !isErr(err, ErrUnsupportedTool) {
		t.Errorf("codex child transcript: %v, want ErrUnsupportedTool (R-AGT-4)", err)
	}
	page, err := c.Messages(src, MessagesQuery{Role: RoleAll})
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, it := range page.Items {
		said = append(said, it.Role+": "+it.FirstLine)
	}
	if len(said) < 3 || said[0] != "user: do the work" || !slices.Contains(said, "user: status?") {
		t.Errorf("messages %q, want the person's two prompts and the replies, never the environment context", said)
	}
	saveFixture(t, "real-codex-work", goldenCase{Prompt: realCodexPrompt, Tool: ToolCodex, ConversationID: thread, Cwd: work,
		Queries: []string{"", "role=all", "role=all&text=1&order=desc&limit=2", "id=2"}, Agents: []string{a.Agents[0].ID}}, home, p.stdout())
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestRealClaudeSlug: Claude Code files a session under the slug of its
// physical cwd, hash suffix included past 200 units (real-clis.md §1.3):
// run it in a long non-ASCII directory reached through a symlink, and find
// the transcript exactly where ClaudeSlug says.
func TestRealClaudeSlug(t *testing.T) {
	bin := realBinDir(t, "claude")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	home, work := realDirs(t)
	physical := filepath.Join(work, strings.Repeat("d", 120), "Üñí 😀-"+strings.Repeat("e", 100))
	must(t, os.MkdirAll(physical, 0o700))
	link := filepath.Join(work, "link")
	must(t, os.Symlink(physical, link))
	if n := len(utf16Units(physical)); n <= 200 {
		t.Fatalf("cwd of %d UTF-16 units, want over 200", n)
	}
	p := startClaude(t, bin, fake, home, link, []string{"PWD=" + link})
	p.send(userLine("where am I"))
	init := p.await("system/init", func(m map[string]any) bool { return m["subtype"] == "init" })
	p.await("result", isResult)
	p.finish()
	sid, _ := init["session_id"].(string)
	want := filepath.Join(home, ".claude", "projects", ClaudeSlug(physical), sid+".jsonl")
	if _, err := os.Stat(want); err != nil {
		dirs, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*"))
		t.Fatalf("no transcript at %s (%v); project dirs: %v", want, err, dirs)
	}
	page, err := NewCache(0, 0).Messages(Source{Tool: ToolClaude, Home: home, ConversationID: sid, Cwd: link}, DefaultMessagesQuery())
	if err != nil || page.Total != 1 || page.Items[0].FirstLine != "where am I" {
		t.Errorf("messages through the symlinked cwd: %+v, %v", page, err)
	}
}

func utf16Units(s string) []uint16 { return utf16.Encode([]rune(s)) }

// TestRealClaudeResume: a resumed session appends to the same transcript
// (real-clis.md §1.4); the messages read before keep their ids and the new
// ones follow (R-MSG-9), with no message read twice.
func TestRealClaudeResume(t *testing.T) {
	bin := realBinDir(t, "claude")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	home, work := realDirs(t)
	p := startClaude(t, bin, fake, home, work, nil)
	p.send(userLine("first"))
	init := p.await("system/init", func(m map[string]any) bool { return m["subtype"] == "init" })
	p.await("result", isResult)
	p.finish()
	sid, _ := init["session_id"].(string)
	src := Source{Tool: ToolClaude, Home: home, ConversationID: sid, Cwd: work}
	c := NewCache(0, 0)
	said := func() []string {
		t.Helper()
		page, err := c.Messages(src, MessagesQuery{Role: RoleAll})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range page.Items {
			out = append(out, fmt.Sprintf("%d %s: %s", it.ID, it.Role, it.FirstLine))
		}
		return out
	}
	before := said()
	if !slices.Equal(before, []string{"1 user: first", "2 assistant: pong: first"}) {
		t.Fatalf("before the resume: %q", before)
	}
	p = startClaude(t, bin, fake, home, work, nil, "--resume", sid)
	p.send(userLine("second"))
	p.await("resumed result", isResult)
	p.finish()
	if got := said(); !slices.Equal(got, append(before, "3 user: second", "4 assistant: pong: second")) {
		t.Errorf("after the resume: %q", got)
	}
}
