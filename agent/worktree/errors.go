package worktree

import (
	"fmt"
	"strings"
)

// Error is a refusal a person can act on: a stable snake_case code and a sentence saying what to do (R-API-4).
// errors.Is matches an *Error against the sentinels below by Code.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Is reports whether target is an *Error with the same Code, so that
// errors.Is(err, ErrUnmergedWork) matches every unmerged-work refusal.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// refuse returns an error of kind's code and status with a formatted message.
func refuse(kind *Error, format string, args ...any) *Error {
	return &Error{Code: kind.Code, Msg: fmt.Sprintf(format, args...)}
}

func sentinel(code, msg string) *Error {
	return &Error{Code: code, Msg: msg}
}

// Workspace checks before a worktree launch (R-WT-3, R-WT-6): 422, all
// checked before anything is created.
var (
	// ErrNotGitWorktree: the workspace is not inside a git working tree
	// (no repository, a bare repository, or the inside of a .git folder).
	ErrNotGitWorktree = sentinel("not_git_worktree", "the workspace is not a git working tree")
	// ErrNotRepoRoot: the workspace is a folder below the repository root.
	ErrNotRepoRoot = sentinel("not_repository_root", "the workspace is not the root of its git repository")
	// ErrNoCommit: the repository's HEAD has no commit yet.
	ErrNoCommit = sentinel("no_commit", "the workspace repository has no commit")
	// ErrReadOnly: the workspace is registered read-only, or the folder or
	// one of the repository folders a worktree writes to is not writable.
	ErrReadOnly = sentinel("workspace_read_only", "the workspace or one of its repository folders is read-only")
	// ErrConfigFilter: the repository's local config names a filter driver
	// or includes another file (filter.*.*, include.path, includeIf.*.path).
	ErrConfigFilter = sentinel("git_config_filter_or_include", "the repository's git config names a filter or includes a file")
	// ErrConfigUnreadable: git could not read the repository's config.
	ErrConfigUnreadable = sentinel("git_config_unreadable", "git cannot read the repository's config")
)

// worktree_from refusals (R-WTF-3, R-WTF-4, R-WTF-7): 422, before anything
// is created.
var (
	// ErrFromInvalid: the value is an option, a revision expression, a range
	// or otherwise not a full commit id nor a valid branch name.
	ErrFromInvalid = sentinel("worktree_from_invalid", "worktree_from must be a full commit id or a local branch name")
	// ErrFromUnknown: the repository has no such commit or local branch.
	ErrFromUnknown = sentinel("worktree_from_unknown", "the repository has no such commit or local branch")
	// ErrFromUnreachable: the commit exists but no branch, tag or
	// remote-tracking branch keeps it reachable.
	ErrFromUnreachable = sentinel("worktree_from_unreachable", "no branch, tag or remote-tracking branch holds that commit")
)

// Node configuration and caller errors.
var (
	// ErrNoWorktreeDir: the node has no usable worktree directory (R-WT-4).
	ErrNoWorktreeDir = sentinel("no_worktree_dir", "this node has no worktree directory configured")
	// ErrBadName: a tenant, run ref, branch or path handed to this package
	// cannot name a worktree safely.
	ErrBadName = sentinel("bad_worktree_name", "the tenant, run ref or branch cannot name a worktree")
	// ErrWorktreeExists: the worktree's directory or branch already exists.
	ErrWorktreeExists = sentinel("worktree_exists", "the run's worktree directory or branch already exists")
)

// Diff refusals (R-DIFF-5, R-DIFF-6).
var (
	// ErrPathRequired: diff/file without a path (400).
	ErrPathRequired = sentinel("path_required", "the path query parameter is required")
	// ErrPathNotFound: the path is outside the allowed sub-paths, is not a
	// clean relative path, goes through a symlink or out of the tree, or is
	// not a file at either end of the diff (404). The same answer for all of
	// them, so a refusal never tells whether a hidden file exists.
	ErrPathNotFound = sentinel("path_not_found", "no readable file at that path in the run's diff")
	// ErrDLPRefused: the workspace's DLP posture refuses file reads (403);
	// the caller audits it like a workspace file read.
	ErrDLPRefused = sentinel("dlp_refused", "the workspace's data-loss-prevention posture refuses reading its files")
	// ErrFileTooLarge: a blob at base or head is over 16 MiB (413).
	ErrFileTooLarge = sentinel("file_too_large", "the file is larger than 16 MiB")
	// ErrFolderGone: the run's worktree or workspace folder no longer
	// exists, so it has no uncommitted edits to show (409, R-DIFF-10).
	ErrFolderGone = sentinel("folder_gone", "the run's folder is gone")
	// ErrBranchGone: the run's branch no longer exists (409).
	ErrBranchGone = sentinel("branch_gone", "the run's worktree branch no longer exists")
	// ErrNoCommonHistory: the branch and the workspace's current commit
	// share no history (409).
	ErrNoCommonHistory = sentinel("no_common_history", "the run's branch has no common history with the workspace")
)

// Release refusals (R-CLN-4, Q-29): 409, nothing changed, so the call can be
// repeated with discard.
var (
	// ErrUnmergedWork: the branch has commits the workspace's current branch
	// does not contain.
	ErrUnmergedWork = sentinel("unmerged_work", "the run's branch has commits that are not merged")
	// ErrDetachedHead: the worktree's HEAD is not refs/heads/<its branch>.
	ErrDetachedHead = sentinel("detached_head", "the worktree is not on its branch")
	// ErrUncommitted: the worktree has uncommitted changes or untracked
	// files that are not ignored.
	ErrUncommitted = sentinel("uncommitted_files", "the worktree has uncommitted files")
	// ErrWorktreeUnreachable: the node cannot reach the worktree (missing,
	// inaccessible, or no longer a worktree of this repository).
	ErrWorktreeUnreachable = sentinel("worktree_unreachable", "the worktree cannot be reached from this node")
)

// GitError is a git call that failed in a way this package does not turn
// into a refusal: the agent answers it as an internal error.
type GitError struct {
	Command  string // the git subcommand, e.g. "worktree add"
	ExitCode int    // -1 when git did not exit (killed, deadline)
	Stderr   string // git's diagnostics, bounded
	Err      error  // the exec error, or the output bound
}

func (e *GitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("worktree: git %s (exit %d): %s", e.Command, e.ExitCode, msg)
}

func (e *GitError) Unwrap() error { return e.Err }

// firstLine is the first line of git's stderr, for a refusal's message.
func (e *GitError) firstLine() string {
	msg := strings.TrimSpace(e.Stderr)
	msg = strings.TrimPrefix(msg, "fatal: ")
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}
