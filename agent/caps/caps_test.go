package caps

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// Each vendor CLI found on PATH is listed with the first line its
// --version printed; a missing one is absent; the worktree dir counts only
// when it exists.
func TestDetect(t *testing.T) {
	bin := t.TempDir()
	write := func(name, script string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("claude", `[ "$1" = --version ] && echo "2.1.328 (Claude Code)" && echo extra`)
	write("codex", `echo "codex-cli 0.169.0"`)
	write("grok", `echo broken >&2; exit 3`)
	wt := t.TempDir()
	c := Detect(context.Background(), bin, wt)
	if !c.WorktreeDirReady || c.WorktreeDir != wt {
		t.Errorf("worktree: %+v", c)
	}
	got := map[string]string{}
	errs := map[string]string{}
	for _, cli := range c.CLIs {
		got[cli.Name] = cli.Version
		errs[cli.Name] = cli.Error
	}
	if got["claude"] != "2.1.328 (Claude Code)" || got["codex"] != "codex-cli 0.169.0" {
		t.Errorf("versions: %v", got)
	}
	if _, ok := got["gemini"]; ok {
		t.Error("gemini listed but not on PATH")
	}
	if errs["grok"] == "" || got["grok"] != "broken" {
		t.Errorf("grok: version %q error %q, want the output and an error", got["grok"], errs["grok"])
	}
	if len(c.CLIs) != 3 || c.CLIs[0].Name != "claude" || c.CLIs[1].Name != "codex" {
		t.Errorf("order: %+v", c.CLIs)
	}
	if c2 := Detect(context.Background(), bin, filepath.Join(wt, "missing")); c2.WorktreeDirReady {
		t.Error("missing worktree dir counted as configured")
	}
}
