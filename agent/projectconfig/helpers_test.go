package projectconfig

import (
	"os"
	"path/filepath"
	"testing"
)

// writeRepo writes files (relative path → content) under a new directory.
func writeRepo(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, files)
	return dir
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func mustScan(t testing.TB, dir string) Report {
	t.Helper()
	r, err := Scan(dir)
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return r
}
