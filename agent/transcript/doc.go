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
package transcript
