// Package handoff reads the stored conversation of a Claude Code, Codex,
// Gemini CLI or OpenCode session without any model, and turns it into what a
// handoff to another tool needs (R-HOF-1..20): a neutral Conversation, a short
// summary a person can review and edit, the Markdown transcript file the new
// session's first turn points at, and that first turn's text.
//
// It must never start a model, never write to the source session's files,
// never follow a symbolic link or read a hard-linked or special file as a
// conversation, and never hold a whole conversation file in memory:
// files are streamed line by line and refused past R-HOF-15's bounds. It
// keeps no state (no HTTP, no bbolt); the agent calls it for GET and POST
// /runs/{ref}/handoff and does the routes, the stop and the new run.
//
// # Sources (R-HOF-6)
//
//	claude    <home>/.claude/projects/<slug>/<session>.jsonl: user and
//	          assistant records, bookkeeping record types ignored
//	codex     <home>/.codex/sessions/YYYY/MM/DD/rollout-*-<thread>.jsonl (or
//	          archived_sessions/): response_item messages, function and custom
//	          tool calls and their outputs; developer instructions and the
//	          <environment_context> user item left out
//	gemini    <home>/.gemini/tmp/<project>/chats/session-*-<first 8 hex>.jsonl,
//	          <project> from <home>/.gemini/projects.json: header, $set,
//	          $rewindTo and message records replayed as Gemini CLI does
//	opencode  `opencode export <id>`, run once, offline, under the profile's
//	          environment, with a deadline and its output bounded
//
// A running session is read as it is (R-HOF-3): a last line that does not
// parse is taken as still being written and skipped without being counted;
// any other line that does not parse counts in Conversation.Unreadable.
//
// # Bounds (R-HOF-15)
//
// A conversation over MaxConversationBytes, or holding one record (a JSONL
// line, an exported message) over MaxRecordBytes, is refused with a 422
// *Error, decided from the file size and while streaming. Each message keeps
// at most MaxMessageBytes of text (R-HOF-10); tool inputs and results keep
// ToolInputBytes and ToolResultBytes.
package handoff
