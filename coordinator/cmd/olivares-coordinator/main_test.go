package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 32 finding 12: Ctrl-C while dev mode starts says it stopped, not
// "context canceled"; dev mode interrupted before it was ready leaves no
// dev.json (R-DEV-5).
func TestInterruptedStart(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var errb bytes.Buffer
	if code := report(ctx, fmt.Errorf("dev: %w", context.Canceled), &errb); code != 1 || strings.Contains(errb.String(), "context canceled") ||
		!strings.Contains(errb.String(), "stopped while starting") {
		t.Errorf("report of an interrupted start: %d %q", code, errb.String())
	}
	errb.Reset()
	if code := report(t.Context(), fmt.Errorf("dev: %w", context.Canceled), &errb); code != 1 || !strings.Contains(errb.String(), "context canceled") {
		t.Errorf("a cancel that is no interrupt is told as it is: %d %q", code, errb.String())
	}
	dir := t.TempDir()
	var out bytes.Buffer
	err := commands.Run(ctx, []string{"dev", "--state-dir", dir, "--http", "127.0.0.1:0", "--log-level", "error"}, &out)
	errb.Reset()
	if code := report(ctx, err, &errb); code != 1 || strings.Contains(errb.String(), "context canceled") {
		t.Errorf("dev interrupted at once: %v, report %d %q", err, code, errb.String())
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "dev.json")); len(m) != 0 {
		t.Errorf("dev.json written by a dev mode that never was ready")
	}
}

// R-CLI-3: every command's --help shows its own lines of the usage (tenant
// list's once showed none) and runs nothing.
func TestEveryCommandHelp(t *testing.T) {
	t.Setenv("OLIVARES_STATE_DIR", filepath.Join(t.TempDir(), "none"))
	n := 0
	for _, l := range strings.Split(commands.Usage(), "\n") {
		rest, ok := strings.CutPrefix(l, "  olivares-coordinator ")
		if !ok {
			continue
		}
		var words []string
		for _, w := range strings.Fields(rest) {
			if w != strings.ToLower(w) || strings.HasPrefix(w, "-") || strings.HasPrefix(w, "[") {
				break
			}
			words = append(words, w)
		}
		var out bytes.Buffer
		err := commands.Run(context.Background(), append(words, "--help"), &out)
		if err != nil && err != errHelp || !strings.Contains(out.String(), "\n"+l+"\n") {
			t.Errorf("%q --help: %v\n%s", words, err, out.String())
		}
		n++
	}
	if n < 10 {
		t.Errorf("only %d commands in the usage", n)
	}
}
