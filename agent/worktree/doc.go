// Package worktree gives each worktree run its own git worktree and branch,
// shows people what the branch changed, and releases it without losing work
// (R-WT-*, R-WTF-*, R-DIFF-*, R-CLN-*). It is a library over the real git
// CLI; the agent calls it from its launch, resume, diff and cleanup paths.
//
// It must never run a shell, let a repository hook or filter run, pass a
// caller's value to git as a bare argument (only a fully qualified ref or a
// resolved full object id reaches git), read unbounded output, or remove a
// commit that is not merged unless the caller explicitly asked to discard.
//
// Every git call is an exec with an argv, a context deadline and bounded
// output, run with GIT_CONFIG_NOSYSTEM=1, GIT_CONFIG_GLOBAL=/dev/null and no
// inherited GIT_* variable, and with core.hooksPath=/dev/null and
// core.fsmonitor=false on its command line. Calls that touch a working tree
// (worktree add, status, worktree remove) also override every filter driver
// the repository's config names, so that no clean, smudge or process command
// runs; a launch is refused outright when the workspace names one (R-WT-3).
//
// Errors a person can act on are *Error values with a stable snake_case code
// and the HTTP status the agent answers with; anything else (a git failure
// this package does not expect) is an internal error.
package worktree
