// Package realcli finds the pinned vendor CLIs (scripts/install-clis) for
// the real-binary tests of every package, so that each skips or fails the
// same way (R-DRV-8).
package realcli

import (
	"os"
	"path/filepath"
	"testing"
)

const (
	// BinEnv names the folder of the pinned CLIs; scripts/test exports it
	// after scripts/install-clis.
	BinEnv = "OLIVARES_CLIS_BIN"
	// RequireEnv, set to 1, turns a missing CLI into a failure instead of a
	// skip (scripts/test sets it).
	RequireEnv = "OLIVARES_REAL_CLI"
)

// BinDir returns the folder holding the named CLIs. When it is unset or a
// binary is absent it skips t with the reason, or fails it under
// OLIVARES_REAL_CLI=1.
func BinDir(t testing.TB, names ...string) string {
	t.Helper()
	miss := func(format string, args ...any) {
		t.Helper()
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf(format+" (%s=1 makes that a failure)", append(args, RequireEnv)...)
		}
		t.Skipf(format, args...)
	}
	dir := os.Getenv(BinEnv)
	if dir == "" {
		miss("%s is not set: run bash scripts/install-clis and export %s=<repo>/.clis/node_modules/.bin (scripts/test does both)", BinEnv, BinEnv)
		return ""
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			miss("no %s binary at %s (%v): run bash scripts/install-clis", n, p, err)
		}
	}
	return dir
}

// HomeDir returns a fresh profile home outside the system temp directory,
// removed when t ends. Codex 0.169 refuses to create its helper aliases
// (codex-linux-sandbox) in a home under the temp dir, and on a host with
// bubblewrap its command sandbox then fails to exec them ("bwrap: execvp
// codex-linux-sandbox", real-clis.md §2.6); a node's profile homes live
// in its state directory, never in /tmp, so the tests' must not either.
func HomeDir(t testing.TB) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err == nil {
		base = filepath.Join(base, "olivares-test-homes")
		err = os.MkdirAll(base, 0o700)
	}
	if err != nil {
		t.Fatalf("a profile home outside the temp dir: %v", err)
	}
	dir, err := os.MkdirTemp(base, "home-")
	if err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err != nil {
		t.Fatalf("a profile home outside the temp dir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
