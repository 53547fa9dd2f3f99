package caps

import (
	"context"
	"os"
	"path/filepath"
	"strings"
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

// The version is read from standard output: a warning a tool prints on
// stderr first (Codex 0.169 with its home in the system temp dir) is not
// its version (issue 21).
func TestVersionIgnoresStderrWarnings(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\necho 'WARNING: proceeding, even though we could not create PATH aliases: Refusing to create helper binaries under temporary dir' >&2\necho 'codex-cli 0.169.0'\n"
	if err := os.WriteFile(filepath.Join(bin, "codex"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := Detect(context.Background(), bin, "")
	if len(c.CLIs) != 1 || c.CLIs[0].Version != "codex-cli 0.169.0" || c.CLIs[0].Error != "" {
		t.Fatalf("codex: got %+v, want version codex-cli 0.169.0 and no error", c.CLIs)
	}
}

// The real Codex, when the pinned CLIs are installed (scripts/test sets
// OLIVARES_CLIS_BIN): its version is its version, whatever it warns.
func TestRealCodexVersion(t *testing.T) {
	dir := os.Getenv("OLIVARES_CLIS_BIN")
	if dir == "" {
		t.Skip("OLIVARES_CLIS_BIN is not set (scripts/test sets it)")
	}
	if _, err := os.Stat(filepath.Join(dir, "codex")); err != nil {
		t.Skipf("no codex in %s", dir)
	}
	c := Detect(context.Background(), dir+":/usr/bin:/bin", "")
	for _, cli := range c.CLIs {
		if cli.Name == "codex" {
			if !strings.HasPrefix(cli.Version, "codex-cli ") || strings.Contains(cli.Version, "WARNING") {
				t.Fatalf("codex version: got %q, want codex-cli X.Y.Z", cli.Version)
			}
			return
		}
	}
	t.Fatalf("codex not detected in %s: %+v", dir, c.CLIs)
}
