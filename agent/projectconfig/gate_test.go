package projectconfig

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestFilesFor: R-PCS-19, R-PCS-15, Q-35.
func TestFilesFor(t *testing.T) {
	t.Parallel()
	claude := []string{".claude/settings.json", ".claude/settings.local.json", ".mcp.json"}
	tests := []struct {
		tool  string
		hooks bool
		want  []string
	}{
		{ToolClaude, false, claude},
		{ToolClaude, true, nil},
		{ToolCodex, false, []string{".codex/config.toml"}},
		{ToolCodex, true, []string{".codex/config.toml"}},
		{ToolGemini, false, []string{".gemini/settings.json", ".gemini/.env", ".env"}},
		{ToolGrok, false, nil},
		{ToolOpenCode, false, nil},
		{"aider", false, Paths()}, // unknown: every file (R-PCS-14)
		{"", true, Paths()},
	}
	for _, tt := range tests {
		if got := FilesFor(tt.tool, tt.hooks); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s hooks=%v: got %v, want %v", tt.tool, tt.hooks, got, tt.want)
		}
	}
}

// TestCheck: the launch/resume gate of R-PCS-12 on a directory where the
// Claude settings and the Codex config are flagged.
func TestCheck(t *testing.T) {
	t.Parallel()
	rep := mustScan(t, writeRepo(t, map[string]string{
		".claude/settings.json": `{"hooks": {"Stop": "x"}}`,
		".codex/config.toml":    "notify = [\"x\"]\n",
		".gemini/settings.json": `{"theme": "dark"}`,
	}))
	claudeOnly := mustScan(t, writeRepo(t, map[string]string{".claude/settings.json": `{"hooks": {"Stop": "x"}}`}))
	tests := []struct {
		name     string
		rep      Report
		tool     string
		hooks    bool
		approved string
		files    []string // nil: allowed
	}{
		{"codex not approved", rep, ToolCodex, false, "", []string{".codex/config.toml"}},
		{"codex stale approval", rep, ToolCodex, false, claudeOnly.SHA256, []string{".codex/config.toml"}},
		{"codex approved", rep, ToolCodex, false, rep.SHA256, nil},
		{"codex approval in upper case is not the hash", rep, ToolCodex, false, strings.ToUpper(rep.SHA256), []string{".codex/config.toml"}},
		{"claude without engine hooks", rep, ToolClaude, false, "", []string{".claude/settings.json"}},
		{"claude with engine hooks reads none", rep, ToolClaude, true, "", nil},
		{"gemini reads nothing flagged", rep, ToolGemini, false, "", nil},
		{"grok", rep, ToolGrok, false, "", nil},
		{"opencode", rep, ToolOpenCode, false, "", nil},
		{"unknown tool gated on every file", rep, "newtool", false, "", []string{".claude/settings.json", ".codex/config.toml"}},
		{"nothing flagged", Report{}, ToolCodex, false, "", nil},
		{"codex in a folder where only claude is flagged", claudeOnly, ToolCodex, false, "", nil},
		{"flagged report without a hash never matches an empty approval", Report{Files: []File{{Path: ".env"}}}, ToolGemini, false, "", []string{".env"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ref := Check(tt.rep, tt.tool, tt.hooks, tt.approved)
			if tt.files == nil {
				if ref != nil {
					t.Fatalf("got refusal %v, want allowed", ref)
				}
				return
			}
			if ref == nil {
				t.Fatalf("got allowed, want a refusal naming %v", tt.files)
			}
			if !reflect.DeepEqual(ref.Files, tt.files) {
				t.Errorf("files: got %v, want %v", ref.Files, tt.files)
			}
			// The hash to review is the directory's, over every tool's
			// files, the one GET project-config shows (R-PCS-10).
			if ref.SHA256 != tt.rep.SHA256 {
				t.Errorf("sha256: got %v, want %v", ref.SHA256, tt.rep.SHA256)
			}
			if !errors.Is(ref, ErrNotApproved) {
				t.Errorf("errors.Is(refusal, ErrNotApproved): got false, want true")
			}
		})
	}
}

func TestRefusalMessage(t *testing.T) {
	t.Parallel()
	ref := &Refusal{Tool: ToolClaude, Files: []string{".claude/settings.json", ".mcp.json"}, SHA256: "ab12"}
	msg := ref.Message("ws_1")
	for _, want := range []string{
		".claude/settings.json, .mcp.json",
		"sha256 ab12",
		"olivares agent workspace project-config ws_1",
		"olivares agent workspace approve-project-config ws_1 --sha256 ab12",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q: got no %q, want it", msg, want)
		}
	}
	if Code != "project_config_not_approved" {
		t.Errorf("code: got %v, want project_config_not_approved", Code)
	}
}

// TestJourneyJ06Library walks J06 on the library: notify → refused,
// approved → allowed, unflagged edit → still allowed, one character of
// notify → refused again; a claude launch with engine hooks is allowed and
// without is refused.
func TestJourneyJ06Library(t *testing.T) {
	t.Parallel()
	dir := writeRepo(t, map[string]string{".codex/config.toml": "model = \"a\"\nnotify = [\"x\"]\n"})
	rep := mustScan(t, dir)
	if ref := Check(rep, ToolCodex, false, ""); ref == nil || rep.Files[0].Keys[0].Path != "notify" {
		t.Fatalf("first launch: got %v, %v, want refused on notify", ref, rep.Files)
	}
	approved := rep.SHA256
	if ref := Check(rep, ToolCodex, false, approved); ref != nil {
		t.Fatalf("after approval: got %v, want allowed", ref)
	}
	writeFiles(t, dir, map[string]string{".codex/config.toml": "model = \"b\"\nnotify = [\"x\"]\n"})
	if ref := Check(mustScan(t, dir), ToolCodex, false, approved); ref != nil {
		t.Fatalf("after an unflagged edit: got %v, want allowed", ref)
	}
	writeFiles(t, dir, map[string]string{".codex/config.toml": "model = \"b\"\nnotify = [\"y\"]\n"})
	rep = mustScan(t, dir)
	ref := Check(rep, ToolCodex, false, approved)
	if ref == nil || ref.SHA256 != rep.SHA256 || ref.SHA256 == approved {
		t.Fatalf("after a flagged edit: got %v, want refused with the new hash", ref)
	}

	writeFiles(t, dir, map[string]string{".claude/settings.json": `{"hooks": {"Stop": "x"}}`})
	rep = mustScan(t, dir)
	if ref := Check(rep, ToolClaude, true, ""); ref != nil {
		t.Errorf("claude with engine hooks: got %v, want allowed", ref)
	}
	if ref := Check(rep, ToolClaude, false, ""); ref == nil {
		t.Error("claude without engine hooks: got allowed, want refused")
	}
}
