package worktree

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// The diff-tree -z --name-status parser against recorded git output
// (testdata/name-status/*.in, made by git 2.39 on a repository with a
// rename, a type change, a deletion and names holding a newline and a tab).
// Each .golden line is one change, Go-quoted, or the parse error.
func TestParseNameStatusGolden(t *testing.T) {
	t.Parallel()
	ins, err := filepath.Glob("testdata/name-status/*.in")
	if err != nil || len(ins) == 0 {
		t.Fatalf("got %v, %v, want recorded inputs", ins, err)
	}
	for _, in := range ins {
		raw, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		perr := parseNameStatus(bufio.NewReader(bytes.NewReader(raw)), func(c FileChange) error {
			fmt.Fprintf(&got, "%s %q %q\n", c.Status, c.Path, c.OldPath)
			return nil
		})
		if perr != nil {
			fmt.Fprintf(&got, "error: %v\n", perr)
		}
		golden := strings.TrimSuffix(in, ".in") + ".golden"
		if *update {
			if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want) {
			t.Errorf("%s: got\n%s\nwant\n%s", in, got.String(), want)
		}
	}
}
