package projectconfig

import (
	"fmt"
	"slices"
	"strings"
)

// Code is the API error code of a refused launch or resume (R-PCS-12).
const Code = "project_config_not_approved"

// FilesFor returns the listed files a tool reads when it starts
// (R-PCS-19): claude without the engine's hooks reads the three Claude
// files, claude with them none (it is launched with --setting-sources "",
// R-PCS-15); codex reads .codex/config.toml; gemini its settings and both
// .env files; grok and opencode none. A tool this package does not
// know is checked against every file, so a new driver is gated until
// someone decides what it reads (R-PCS-14).
func FilesFor(tool string, engineHooks bool) []string {
	switch tool {
	case ToolClaude:
		if engineHooks {
			return nil
		}
	case ToolGrok, ToolOpenCode:
		return nil
	case ToolCodex, ToolGemini:
	default:
		return Paths()
	}
	var out []string
	for _, f := range files {
		if f.tool == tool {
			out = append(out, f.path)
		}
	}
	return out
}

// FlaggedFor returns the flagged files that tool reads when it starts.
func (r Report) FlaggedFor(tool string, engineHooks bool) []File {
	reads := FilesFor(tool, engineHooks)
	var out []File
	for _, f := range r.Files {
		if slices.Contains(reads, f.Path) {
			out = append(out, f)
		}
	}
	return out
}

// Refusal is a launch or resume refused because the tool reads a flagged
// file and the stored approval is not the current hash (R-PCS-12). It is an
// error matching ErrNotApproved; the agent answers 409 with Code and
// Message.
type Refusal struct {
	Tool string
	// Files are the flagged files this tool reads, in R-PCS-3 order.
	Files []string
	// SHA256 is the hash to review and approve: the directory's current
	// hash over all files of all tools, the one GET project-config shows.
	SHA256 string
	// Approved is the stored approval it was compared with ("" for none).
	Approved string
}

func (r *Refusal) Error() string { return r.Message("<ref>") }

// Is makes errors.Is(refusal, ErrNotApproved) true.
func (r *Refusal) Is(target error) bool { return target == ErrNotApproved }

// Message is the sentence a person can act on: the files, the hash, and
// the approval command (R-PCS-18).
func (r *Refusal) Message(workspaceRef string) string {
	return fmt.Sprintf("%s reads repository configuration that is not approved: %s (sha256 %s); "+
		"review it with olivares agent workspace project-config %s, then run "+
		"olivares agent workspace approve-project-config %s --sha256 %s",
		r.Tool, strings.Join(r.Files, ", "), r.SHA256, workspaceRef, workspaceRef, r.SHA256)
}

// Check is the gate the agent applies at launch and resume on the
// directory the process will start in (R-PCS-12, R-PCS-19): nil when the
// tool reads no flagged file, or when approved equals the report's hash;
// otherwise the refusal. There is no way to skip it (R-PCS-14): an empty
// approval never matches.
func Check(r Report, tool string, engineHooks bool, approved string) *Refusal {
	flagged := r.FlaggedFor(tool, engineHooks)
	if len(flagged) == 0 {
		return nil
	}
	if approved != "" && approved == r.SHA256 {
		return nil
	}
	ref := &Refusal{Tool: tool, SHA256: r.SHA256, Approved: approved}
	for _, f := range flagged {
		ref.Files = append(ref.Files, f.Path)
	}
	return ref
}
