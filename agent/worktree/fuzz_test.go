package worktree

import (
	"bufio"
	"path"
	"strings"
	"testing"
)

// FuzzCheckFromSyntax: worktree_from is untrusted input. Whatever the
// value, the syntax check never panics, and what it lets through to git
// carries none of R-WTF-7's refused forms.
func FuzzCheckFromSyntax(f *testing.F) {
	for _, s := range []string{"main", "HEAD~1", "-b", "a..b", "x@{1}", "feature/x", strings.Repeat("a", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if checkFromSyntax(s) != nil {
			return
		}
		if strings.HasPrefix(s, "-") || strings.Contains(s, "..") || strings.Contains(s, "@{") ||
			strings.ContainsAny(s, "^~:?*[\\ \t\n\r\x00") || s == "HEAD" || s == "@" || len(s) > maxFromLen {
			t.Fatalf("checkFromSyntax(%q) accepted a refused form", s)
		}
	})
}

// FuzzCleanRelPath: a diff/file path is untrusted input. An accepted path
// is relative, clean and never climbs out of the tree.
func FuzzCleanRelPath(f *testing.F) {
	for _, s := range []string{"a/b.txt", "../x", "/etc/passwd", "a//b", "./a", "a/", "a/../../b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !cleanRelPath(s) {
			return
		}
		if path.IsAbs(s) || path.Clean(s) != s || s == ".." || strings.HasPrefix(s, "../") || strings.Contains(s, "/../") || strings.ContainsRune(s, 0) {
			t.Fatalf("cleanRelPath(%q) accepted an unsafe path", s)
		}
	})
}

// FuzzParseNameStatus: whatever diff-tree's output looks like, the parser
// never panics and reports only the five statuses of R-DIFF-8.
func FuzzParseNameStatus(f *testing.F) {
	f.Add([]byte("A\x00a.txt\x00M\x00b\x00R087\x00old\x00new\x00"))
	f.Add([]byte("D\x00x\x00T\x00y\x00C050\x00s\x00d\x00"))
	f.Add([]byte("R100\x00only-one\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = parseNameStatus(bufio.NewReader(strings.NewReader(string(b))), func(c FileChange) error {
			switch c.Status {
			case StatusAdded, StatusModified, StatusDeleted, StatusRenamed, StatusTypeChanged:
			default:
				t.Fatalf("status %q", c.Status)
			}
			if c.OldPath != "" && c.Status != StatusRenamed {
				t.Fatalf("old path on a %s", c.Status)
			}
			return nil
		})
	})
}
