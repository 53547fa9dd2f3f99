package projectconfig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

var update = flag.Bool("update", false, "rewrite the expected part of testdata/scan/*.txt")

// goldenSep separates a case's input files from its expected report
// (Caddy's adapt tests: input, separator, expected).
const goldenSep = "----------"

// goldenFile is one input file of a golden case. The header line is
// "-- <path> [directive] --" with directive one of:
//
//	symlink  the path is a symlink whose target is the content's first line
//	fifo     the path is a named pipe
//	dir      the path is a directory
//	pad=N    the content, then spaces up to exactly N bytes
//	noeol    the content without its final newline
type goldenFile struct {
	path, directive string
	content         []byte
}

func parseGolden(t *testing.T, data []byte) (files []goldenFile, expected string) {
	t.Helper()
	head, exp, ok := strings.Cut(string(data), "\n"+goldenSep+"\n")
	if !ok {
		t.Fatalf("no %q separator line", goldenSep)
	}
	var cur *goldenFile
	for _, line := range strings.SplitAfter(head, "\n") {
		if strings.HasPrefix(line, "-- ") && strings.HasSuffix(strings.TrimRight(line, "\n"), " --") {
			fields := strings.Fields(strings.TrimSuffix(strings.TrimPrefix(strings.TrimRight(line, "\n"), "-- "), " --"))
			f := goldenFile{path: fields[0]}
			if len(fields) > 1 {
				f.directive = fields[1]
			}
			files = append(files, f)
			cur = &files[len(files)-1]
			continue
		}
		if cur == nil {
			continue // the case's comment
		}
		cur.content = append(cur.content, line...)
	}
	if !strings.HasSuffix(head, "\n") && cur != nil {
		cur.content = append(cur.content, '\n')
	}
	return files, exp
}

func materialize(t *testing.T, dir string, files []goldenFile) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch d := f.directive; {
		case d == "symlink":
			target, _, _ := strings.Cut(string(f.content), "\n")
			err = os.Symlink(target, p)
		case d == "fifo":
			err = unix.Mkfifo(p, 0o644)
		case d == "dir":
			err = os.Mkdir(p, 0o755)
		case strings.HasPrefix(d, "pad="):
			n, perr := strconv.Atoi(strings.TrimPrefix(d, "pad="))
			if perr != nil || n < len(f.content) {
				t.Fatalf("%s: bad %s", f.path, d)
			}
			err = os.WriteFile(p, append(f.content, bytes.Repeat([]byte{' '}, n-len(f.content))...), 0o644)
		case d == "noeol":
			err = os.WriteFile(p, bytes.TrimSuffix(f.content, []byte{'\n'}), 0o644)
		case d == "":
			err = os.WriteFile(p, f.content, 0o644)
		default:
			t.Fatalf("%s: unknown directive %q", f.path, d)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// renderReport is the expected-output form of a report: exact value bytes,
// one line per key.
func renderReport(r Report) string {
	var b strings.Builder
	if r.SHA256 == "" {
		b.WriteString("sha256: (none)\n")
	} else {
		fmt.Fprintf(&b, "sha256: %s\n", r.SHA256)
	}
	for _, f := range r.Files {
		fmt.Fprintf(&b, "%s (%s)", f.Path, strings.Join(f.Tools, ","))
		if f.Unreadable != "" {
			fmt.Fprintf(&b, " unreadable: %s, content sha256 %s\n  # %s\n", f.Unreadable, f.ContentSHA256, f.Detail)
			continue
		}
		b.WriteString("\n")
		for _, k := range f.Keys {
			fmt.Fprintf(&b, "  %s = %s\n", k.Path, k.Value)
		}
	}
	return b.String()
}

// TestGolden scans each case of testdata/scan and compares the report:
// every row of R-PCS-3, the environment rules (R-PCS-4, R-PCS-22), each
// empty value (R-PCS-2), each unreadable reason (R-PCS-5, R-PCS-23,
// R-PCS-24), the depth vectors of R-PCS-20 and masking (R-PCS-25).
func TestGolden(t *testing.T) {
	paths, err := filepath.Glob("testdata/scan/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			files, want := parseGolden(t, data)
			dir := t.TempDir()
			materialize(t, dir, files)
			rep, err := Scan(dir)
			if err != nil {
				t.Fatal(err)
			}
			got := renderReport(rep)
			if *update {
				i := bytes.Index(data, []byte("\n"+goldenSep+"\n"))
				out := append(data[:i+len(goldenSep)+2:i+len(goldenSep)+2], got...)
				if err := os.WriteFile(path, out, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != want {
				t.Errorf("report:\ngot:\n%s\nwant:\n%s", got, want)
			}
			// The hash is the R-PCS-21 stream of what the report shows,
			// recomputed from the raw values independently of Scan.
			if h := streamHash(t, dir, rep, bytes.Contains(data[:bytes.Index(data, []byte("\n"+goldenSep+"\n"))], []byte("display differs"))); h != rep.SHA256 {
				t.Errorf("sha256 from the R-PCS-21 stream: got %v, want %v", rep.SHA256, h)
			}
		})
	}
}

// streamHash recomputes a report's hash from the R-PCS-21 stream written
// out by hand: the displayed values stand in for the canonical ones (equal
// when nothing is masked), and each unreadable file's content hash is taken
// again from the disk. A case whose values differ between the two forms
// (a masked password, or a case marked "display differs" such as TOML
// date-times) returns the report's own hash.
func streamHash(t *testing.T, dir string, rep Report, differs bool) string {
	t.Helper()
	if differs {
		return rep.SHA256
	}
	if len(rep.Files) == 0 {
		return ""
	}
	var stream bytes.Buffer
	for _, f := range rep.Files {
		if f.Unreadable == "" {
			for _, k := range f.Keys {
				if bytes.Contains(k.Value, []byte("***")) {
					return rep.SHA256
				}
				fmt.Fprintf(&stream, "%s\x00%s\x00%s\n", f.Path, k.Path, k.Value)
			}
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		var content []byte
		switch f.Unreadable {
		case ReasonSymlink:
			target, err := os.Readlink(p)
			if err != nil {
				t.Fatal(err)
			}
			content = []byte(target)
		case ReasonParentSymlink:
			target, err := os.Readlink(filepath.Dir(p))
			if err != nil {
				t.Fatal(err)
			}
			content = []byte(target)
		case ReasonDirectory, ReasonFIFO, ReasonDevice, ReasonSocket, ReasonReadError:
		default:
			var err error
			if content, err = os.ReadFile(p); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Fprintf(&stream, "%s\x00!unreadable\x00%s\x00%s\n", f.Path, f.Unreadable, sha256Hex(content))
	}
	return sha256Hex(stream.Bytes())
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
