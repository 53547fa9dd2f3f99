package agentd

import (
	"errors"
	"net/http"

	"github.com/olivares-dev/olivares/agent/claudeconv"
	"github.com/olivares-dev/olivares/agent/claudesup"
	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/codexsup"
	"github.com/olivares-dev/olivares/agent/handoff"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/runread"
	"github.com/olivares-dev/olivares/agent/signin"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/agent/taint"
	"github.com/olivares-dev/olivares/agent/transcript"
	"github.com/olivares-dev/olivares/agent/worktree"
	"github.com/olivares-dev/olivares/shared/wire"
)

// wireKind is how one domain refusal travels: its HTTP status (R-API-3's
// classes) and its stable code (R-API-4).
type wireKind struct {
	err    error
	status int
	code   string
}

// wireKinds is the one place where the agent's domain refusals become wire
// statuses and codes: the domain packages return sentinel errors and know
// nothing of HTTP. First match wins.
var wireKinds = []wireKind{
	// supervisor: the run lifecycle.
	{supervisor.ErrRunNotFound, http.StatusNotFound, "not_found"},
	{supervisor.ErrRunExists, http.StatusConflict, "exists"},
	{supervisor.ErrBadRequest, http.StatusBadRequest, "bad_request"},
	{supervisor.ErrBadIsolation, http.StatusBadRequest, "bad_isolation"},
	{supervisor.ErrBadGrant, http.StatusBadRequest, "bad_grant"},
	{supervisor.ErrBadProfile, http.StatusBadRequest, "bad_profile"},
	{supervisor.ErrBadHookInput, http.StatusBadRequest, "bad_hook_input"},
	{supervisor.ErrHookInputTooLarge, http.StatusRequestEntityTooLarge, "hook_input_too_large"},
	{supervisor.ErrUnknownTool, http.StatusUnprocessableEntity, "unknown_tool"},
	{supervisor.ErrBadWorkdir, http.StatusUnprocessableEntity, "bad_path"},
	{supervisor.ErrIsolationUnsupported, http.StatusUnprocessableEntity, "isolation_unsupported"},
	{supervisor.ErrTransportUnsupported, http.StatusUnprocessableEntity, "transport_unsupported"},
	{supervisor.ErrToolNotFound, http.StatusUnprocessableEntity, "tool_not_found"},
	{supervisor.ErrWorktreeNeedsWorkspace, http.StatusUnprocessableEntity, "worktree_needs_workspace"},
	{supervisor.ErrGrantFilesUnsupported, http.StatusUnprocessableEntity, "grant_files_unsupported"},
	{supervisor.ErrMoveUnsupported, http.StatusUnprocessableEntity, "move_unsupported"},
	{supervisor.ErrNotLive, http.StatusConflict, "not_live"},
	{supervisor.ErrRunLive, http.StatusConflict, "run_live"},
	{supervisor.ErrReleased, http.StatusConflict, "released"},
	{supervisor.ErrNotReleased, http.StatusConflict, "not_released"},
	{supervisor.ErrPendingApproval, http.StatusConflict, "pending_approval"},
	{supervisor.ErrNotPending, http.StatusConflict, "not_pending"},
	{supervisor.ErrRequestNotFound, http.StatusNotFound, "request_not_found"},
	{supervisor.ErrBadAnswer, http.StatusBadRequest, "bad_answer"},
	{supervisor.ErrRequestSettled, http.StatusConflict, "request_settled"},
	{supervisor.ErrRequestExpired, http.StatusConflict, "request_expired"},
	{supervisor.ErrProfileGone, http.StatusConflict, "profile_gone"},
	{supervisor.ErrIsolationBelowProfile, http.StatusConflict, "isolation_below_profile"},
	{supervisor.ErrConversationUnavailable, http.StatusConflict, "conversation_unavailable"},
	{supervisor.ErrSetupNotApproved, http.StatusConflict, "setup_not_approved"},
	{supervisor.ErrProjectConfig, http.StatusConflict, "project_config_not_approved"},
	{supervisor.ErrRunNotStopped, http.StatusConflict, "run_not_stopped"},
	{registry.ErrInUse, http.StatusConflict, "in_use"},
	{supervisor.ErrProfileOtherTool, http.StatusConflict, "profile_other_tool"},
	{supervisor.ErrConversationBound, http.StatusConflict, "conversation_bound"},
	{supervisor.ErrWorkspaceGone, http.StatusConflict, "workspace_gone"},
	{supervisor.ErrNotClaude, http.StatusConflict, "not_claude"},
	{supervisor.ErrOtherSession, http.StatusConflict, "other_session"},
	{supervisor.ErrInputQueueFull, http.StatusServiceUnavailable, "input_queue_full"},
	{supervisor.ErrWorkspaceUnreadable, http.StatusServiceUnavailable, "workspace_unreadable"},

	// signin: a profile's account sign-in (R-ACCT-*).
	{signin.ErrNotFound, http.StatusNotFound, "signin_not_found"},
	{signin.ErrBusy, http.StatusConflict, "signin_in_progress"},
	{signin.ErrUnsupported, http.StatusUnprocessableEntity, "signin_unsupported"},
	{signin.ErrNotWaiting, http.StatusConflict, "signin_not_waiting"},
	{signin.ErrBadCode, http.StatusBadRequest, "bad_code"},

	// The driver contract's input refusals (R-IN-2).
	{cliruntime.ErrWrongInputField, http.StatusBadRequest, "wrong_input_field"},
	{cliruntime.ErrInvalidInput, http.StatusBadRequest, "invalid_input"},

	// registry: profiles and workspaces.
	{registry.ErrNotFound, http.StatusNotFound, "not_found"},
	{registry.ErrExists, http.StatusConflict, "exists"},
	{registry.ErrBadRequest, http.StatusBadRequest, "bad_request"},
	{registry.ErrUnknownTool, http.StatusBadRequest, "unknown_tool"},
	{registry.ErrBadName, http.StatusBadRequest, "bad_name"},
	{registry.ErrBadPolicy, http.StatusBadRequest, "bad_policy"},
	{registry.ErrHomeRequired, http.StatusBadRequest, "home_required"},
	{registry.ErrBadHome, http.StatusBadRequest, "bad_home"},
	{registry.ErrBadEnv, http.StatusBadRequest, "bad_env"},
	{registry.ErrBadDLP, http.StatusBadRequest, "bad_dlp"},
	{registry.ErrBadMaxReadBytes, http.StatusBadRequest, "bad_max_read_bytes"},
	{registry.ErrBadSubpath, http.StatusBadRequest, "bad_subpath"},
	{registry.ErrBadPath, http.StatusBadRequest, "bad_path"},
	{registry.ErrHomeUnusable, http.StatusUnprocessableEntity, "bad_home"},
	{registry.ErrNotADirectory, http.StatusUnprocessableEntity, "bad_path"},
	{registry.ErrWorkspaceUnreadable, http.StatusServiceUnavailable, "workspace_unreadable"},
	{registry.ErrProfileInactive, http.StatusConflict, "profile_inactive"},
	{registry.ErrWorkspaceNotAllowed, http.StatusConflict, "workspace_not_allowed"},
	{registry.ErrHomeNotOwned, http.StatusConflict, "home_not_owned"},

	// taint and the read side.
	{taint.ErrTainted, http.StatusConflict, "tainted"},
	{runread.ErrUnsupportedTool, http.StatusUnprocessableEntity, "unsupported_tool"},
	{runread.ErrProfileGone, http.StatusConflict, "profile_gone"},
	{runread.ErrNoWorktree, http.StatusNotFound, "no_worktree"},
	{runread.ErrWorkspaceGone, http.StatusConflict, "workspace_gone"},
	{runread.ErrHandoffUnsupportedTool, http.StatusUnprocessableEntity, "handoff_unsupported_tool"},
	{runread.ErrNotStarted, http.StatusConflict, "not_started"},
	{runread.ErrConversationUnavailable, http.StatusConflict, "conversation_unavailable"},

	// claudeconv: carrying a conversation (move).
	{claudeconv.ErrLink, http.StatusUnprocessableEntity, "conversation_link"},
	{claudeconv.ErrSpecialFile, http.StatusUnprocessableEntity, "conversation_special_file"},
	{claudeconv.ErrHardLink, http.StatusUnprocessableEntity, "conversation_hard_link"},
	{claudeconv.ErrNotConversation, http.StatusConflict, "conversation_unavailable"},
	{claudeconv.ErrChanged, http.StatusConflict, "conversation_changed"},
	{claudeconv.ErrTargetDiffers, http.StatusConflict, "target_conversation_differs"},

	// transcript: activity and messages.
	{transcript.ErrInvalidParameter, http.StatusBadRequest, "invalid_parameter"},
	{transcript.ErrUnknownMessage, http.StatusNotFound, "unknown_message"},
	{transcript.ErrUnknownAgent, http.StatusNotFound, "unknown_agent"},
	{transcript.ErrUnsupportedTool, http.StatusUnprocessableEntity, "unsupported_tool"},
	{transcript.ErrTranscriptUnsafe, http.StatusUnprocessableEntity, "transcript_unsafe"},
	{transcript.ErrInvalidSource, http.StatusInternalServerError, "invalid_source"},

	// handoff: reading a conversation.
	{handoff.ErrUnsupportedTool, http.StatusUnprocessableEntity, "handoff_unsupported_tool"},
	{handoff.ErrConversationTooLarge, http.StatusUnprocessableEntity, "conversation_too_large"},
	{handoff.ErrRecordTooLarge, http.StatusUnprocessableEntity, "conversation_record_too_large"},
	{handoff.ErrNotRegularFile, http.StatusUnprocessableEntity, "conversation_not_regular_file"},
	{handoff.ErrConversationUnavailable, http.StatusConflict, "conversation_unavailable"},
	{handoff.ErrExportFailed, http.StatusBadGateway, "opencode_export_failed"},
	{handoff.ErrExportTimeout, http.StatusGatewayTimeout, "opencode_export_timeout"},
	{handoff.ErrBadSource, http.StatusBadRequest, "bad_handoff_source"},

	// worktree: git worktrees, diff and release.
	{worktree.ErrNotGitWorktree, http.StatusUnprocessableEntity, "not_git_worktree"},
	{worktree.ErrNotRepoRoot, http.StatusUnprocessableEntity, "not_repository_root"},
	{worktree.ErrNoCommit, http.StatusUnprocessableEntity, "no_commit"},
	{worktree.ErrReadOnly, http.StatusUnprocessableEntity, "workspace_read_only"},
	{worktree.ErrConfigFilter, http.StatusUnprocessableEntity, "git_config_filter_or_include"},
	{worktree.ErrConfigUnreadable, http.StatusUnprocessableEntity, "git_config_unreadable"},
	{worktree.ErrFromInvalid, http.StatusUnprocessableEntity, "worktree_from_invalid"},
	{worktree.ErrFromUnknown, http.StatusUnprocessableEntity, "worktree_from_unknown"},
	{worktree.ErrFromUnreachable, http.StatusUnprocessableEntity, "worktree_from_unreachable"},
	{worktree.ErrNoWorktreeDir, http.StatusServiceUnavailable, "no_worktree_dir"},
	{worktree.ErrBadName, http.StatusBadRequest, "bad_worktree_name"},
	{worktree.ErrWorktreeExists, http.StatusConflict, "worktree_exists"},
	{worktree.ErrPathRequired, http.StatusBadRequest, "path_required"},
	{worktree.ErrPathNotFound, http.StatusNotFound, "path_not_found"},
	{worktree.ErrDLPRefused, http.StatusForbidden, "dlp_refused"},
	{worktree.ErrFileTooLarge, http.StatusRequestEntityTooLarge, "file_too_large"},
	{worktree.ErrBranchGone, http.StatusConflict, "branch_gone"},
	{worktree.ErrFolderGone, http.StatusConflict, "folder_gone"},
	{worktree.ErrNoCommonHistory, http.StatusConflict, "no_common_history"},
	{worktree.ErrUnmergedWork, http.StatusConflict, "unmerged_work"},
	{worktree.ErrDetachedHead, http.StatusConflict, "detached_head"},
	{worktree.ErrUncommitted, http.StatusConflict, "uncommitted_files"},
	{worktree.ErrWorktreeUnreachable, http.StatusConflict, "worktree_unreachable"},

	// claudesup: Claude Code supervision.
	{claudesup.ErrBadCursor, http.StatusBadRequest, "bad_cursor"},
	{claudesup.ErrBadLimit, http.StatusBadRequest, "bad_limit"},
	{claudesup.ErrBadSessionID, http.StatusBadRequest, "bad_session_id"},
	{claudesup.ErrSessionNotFound, http.StatusNotFound, "session_not_found"},
	{claudesup.ErrSessionLeased, http.StatusConflict, "session_leased"},
	{claudesup.ErrSessionRunning, http.StatusConflict, "session_running"},
	{claudesup.ErrWorkdirMissing, http.StatusConflict, "workdir_missing"},
	{claudesup.ErrUnavailable, http.StatusConflict, "claude_supervision_unavailable"},

	// codexsup: Codex supervision.
	{codexsup.ErrBadCursor, http.StatusBadRequest, "bad_cursor"},
	{codexsup.ErrBadLimit, http.StatusBadRequest, "bad_limit"},
	{codexsup.ErrBadThreadId, http.StatusBadRequest, "bad_thread_id"},
	{codexsup.ErrConfirmationRequired, http.StatusBadRequest, "confirmation_required"},
	{codexsup.ErrNotFound, http.StatusNotFound, "not_found"},
	{codexsup.ErrThreadNotFound, http.StatusNotFound, "thread_not_found"},
	{codexsup.ErrBranchPending, http.StatusConflict, "branch_pending"},
	{codexsup.ErrBranchRace, http.StatusConflict, "branch_race"},
	{codexsup.ErrCodexSupervisionUnavailable, http.StatusConflict, "codex_supervision_unavailable"},
	{codexsup.ErrDescendantsUnknown, http.StatusConflict, "descendants_unknown"},
	{codexsup.ErrOwnerActive, http.StatusConflict, "owner_active"},
	{codexsup.ErrThreadActive, http.StatusConflict, "thread_active"},
	{codexsup.ErrThreadArchived, http.StatusConflict, "thread_archived"},
	{codexsup.ErrThreadError, http.StatusConflict, "thread_error"},
	{codexsup.ErrThreadLeased, http.StatusConflict, "thread_leased"},
	{codexsup.ErrAppServerError, http.StatusBadGateway, "app_server_error"},
	{codexsup.ErrAppServerUnavailable, http.StatusBadGateway, "app_server_unavailable"},
	{codexsup.ErrAppServerTimeout, http.StatusGatewayTimeout, "app_server_timeout"},
	{codexsup.ErrNotReady, http.StatusServiceUnavailable, "not_ready"},
}

// wireErr turns a domain error into the wire error the coordinator passes
// through: the kind's status and code, and the error's sentence. An error
// of no known kind stays as it is (the wire answers it as internal).
func wireErr(err error) error {
	if err == nil {
		return nil
	}
	var we *wire.Error
	if errors.As(err, &we) {
		return we
	}
	for _, k := range wireKinds {
		if errors.Is(err, k.err) {
			return &wire.Error{Status: k.status, Code: k.code, Message: err.Error()}
		}
	}
	return err
}
