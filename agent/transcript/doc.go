// Package transcript reads what a Claude Code or Codex run is doing, and what
// was said in it, from the tool's own native record: Claude Code's session
// JSONL (and its sub-agent and workflow files) and Codex's rollout
// (R-ACT-2, R-ACT-4, R-MSG-1). It also watches a run's stdout for the few
// frames that never reach those files (Claude's result window report and
// task_progress snapshots, Codex's turn/plan/updated) (R-ACT-5..7, R-WF-6).
//
// It is a library the agent calls on each request: it never starts a tool
// process, never writes into a profile home, and never follows a symlink or
// reads a hard-linked or special file out of one. Routes, audit and
// taint checks belong to the caller.
//
// Where Claude Code 2.1.328 keeps things, below the profile home's .claude
// (CLAUDE_CONFIG_DIR): projects/<slug>/<session>.jsonl (ClaudeSlug), and in
// projects/<slug>/<session>/ the sub-agent transcripts
// subagents/agent-<id>.jsonl (with agent-<id>.meta.json naming the tool use),
// a workflow's agents in subagents/workflows/<runId>/agent-<id>.jsonl, and
// the finished workflow summaries workflows/<runId>.json. Codex 0.169.0:
// .codex/sessions/YYYY/MM/DD/rollout-*-<thread>.jsonl, or
// .codex/archived_sessions/ once archived.
//
// Caveats:
//   - The first request for a transcript indexes all of it (linear in its
//     size); later ones parse only what was appended. A rewrite is seen when
//     the file shrinks, changes inode, changes its last indexed bytes, or
//     changes its modification time at the same size; a rewrite that grows
//     the file and keeps those bytes is not (the tools only append).
//   - A record over MaxRecordBytes is passed over and counted as unreadable.
//   - Codex rollouts keep no record of skill use: Skills is empty for Codex.
//   - Codex gets a context_percent too, since its rollout states the window
//     unambiguously (model_context_window); R-ACT-7's window report rule is
//     Claude Code's.
package transcript
