package handoff

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Source names a session's stored conversation.
type Source struct {
	// Tool is ToolClaude, ToolCodex, ToolGemini or ToolOpenCode; "grok"
	// and anything else is ErrUnsupportedTool (R-HOF-1).
	Tool string
	// Home is the session's profile home (absolute). Claude Code keeps its
	// transcripts under Home/.claude, Codex under Home/.codex, Gemini CLI
	// under Home/.gemini, as the agent's drivers launch them.
	Home string
	// ConversationID is the tool's session id (thread id for Codex,
	// ses_… for OpenCode).
	ConversationID string
	// Cwd is the session's working directory, when known: it picks the
	// Claude Code project folder and the Gemini CLI project first. Without
	// it every project folder of the home is searched.
	Cwd string
	// Env is the session's profile environment (HOME, XDG_* …), for
	// `opencode export`; HOME=Home is added when it has none.
	Env []string
	// OpenCodeBin is the opencode binary (absolute); empty: opencode on
	// Env's PATH.
	OpenCodeBin string
	// Timeout bounds `opencode export`; zero means DefaultExportTimeout.
	Timeout time.Duration

	lim *limits // tests only: lower bounds
}

// Read reads the session's stored conversation as it is now, without a
// model and without stopping anything (R-HOF-3, R-HOF-6). Refusals are
// *Error values matching the sentinels of this package.
func Read(ctx context.Context, src Source) (Conversation, error) {
	lim := defaultLimits
	if src.lim != nil {
		lim = *src.lim
	}
	switch src.Tool {
	case ToolClaude:
		return readClaude(ctx, src, lim)
	case ToolCodex:
		return readCodex(ctx, src, lim)
	case ToolGemini:
		return readGemini(ctx, src, lim)
	case ToolOpenCode:
		return readOpenCode(ctx, src, lim)
	case "grok":
		return Conversation{}, refuse(ErrUnsupportedTool, "a Grok session keeps no conversation a handoff can read") // R-HOF-1
	}
	return Conversation{}, refuse(ErrUnsupportedTool, "no handoff reader for tool %q; handoff reads claude, codex, gemini and opencode sessions", src.Tool)
}

// unavailable turns a lookup that found nothing into
// ErrConversationUnavailable; refusals and other errors pass.
func unavailable(err error, src Source) error {
	if errors.Is(err, errNotExist) {
		return refuse(ErrConversationUnavailable, "no stored %s conversation %s under the profile home %s", toolTitle(src.Tool), src.ConversationID, src.Home)
	}
	return err
}

// sizeText writes a byte count for people: "256 MiB", "1.5 KiB", "12 bytes".
func sizeText(n int64) string {
	switch {
	case n >= 1<<20:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<20))) + " MiB"
	case n >= 1<<10:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<10))) + " KiB"
	}
	return fmt.Sprintf("%d bytes", n)
}

func trimZero(s string) string {
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		return s[:len(s)-2]
	}
	return s
}
