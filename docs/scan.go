package docs

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// NoCite on a line says that what looks like a rule ID there is not a
// citation (test data that imitates one, say); the scan skips the line.
const NoCite = "docs:nocite"

// Citation is a Ref found at a place in the repository.
type Citation struct {
	Ref
	File string // slash-separated, relative to the repository root
	Line int
}

// Test reports whether the citation is in test code: a _test.go file, a
// package of test helpers (storetest, cliruntimetest, tunneltest) or the
// integration harness and journeys.
func (c Citation) Test() bool {
	if strings.HasSuffix(c.File, "_test.go") {
		return true
	}
	if !strings.HasSuffix(c.File, ".go") {
		return false
	}
	if strings.HasPrefix(c.File, "integration/") {
		return true
	}
	for _, dir := range strings.Split(filepath.ToSlash(filepath.Dir(c.File)), "/") {
		if strings.HasSuffix(dir, "test") {
			return true
		}
	}
	return false
}

// skipDirs are never scanned: fixtures quote what tools wrote, not rules.
var skipDirs = map[string]bool{".git": true, ".clis": true, "node_modules": true, "testdata": true, "vendor": true}

// Scanned reports whether a repository file is read for citations: Go code
// and tests, the console's assets, the API document, scripts, READMEs and
// the docs themselves.
// This package's own Go files are not: their examples are not citations.
func Scanned(rel string) bool {
	rel = filepath.ToSlash(rel)
	base := pathBase(rel)
	switch {
	case strings.HasPrefix(rel, "docs/") && strings.HasSuffix(base, ".go"):
		return false
	case strings.HasSuffix(base, ".go"):
		return true
	case strings.HasSuffix(base, ".js") || strings.HasSuffix(base, ".mjs") || strings.HasSuffix(base, ".html") || strings.HasSuffix(base, ".css"):
		return true
	case base == "openapi.yaml" || base == "openapi.yml" || base == "openapi.json":
		return true
	case base == "README.md" || base == "Taskfile.yml":
		return true
	case strings.HasPrefix(rel, "scripts/") || strings.HasPrefix(rel, ".ci/"):
		return true
	case strings.HasPrefix(rel, "docs/") && strings.HasSuffix(base, ".md"):
		return true
	}
	return false
}

func pathBase(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[i+1:]
	}
	return rel
}

// ScanRepo returns every citation in the files Scanned accepts under root.
func ScanRepo(root string) ([]Citation, error) {
	var out []Citation
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !Scanned(rel) {
			return nil
		}
		cs, err := scanFile(p, rel)
		out = append(out, cs...)
		return err
	})
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		return out[i].Line < out[j].Line
	})
	return out, err
}

func scanFile(path, rel string) ([]Citation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Citation
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		if strings.Contains(sc.Text(), NoCite) {
			continue
		}
		for _, r := range Cites(sc.Text()) {
			out = append(out, Citation{Ref: r, File: rel, Line: n})
		}
	}
	return out, sc.Err()
}

// LoadRules parses every .md file under dir (docs/).
func LoadRules(dir string) ([]Rule, error) {
	var out []Rule
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		rel, _ := filepath.Rel(filepath.Dir(dir), p)
		rs, err := ParseRules(filepath.ToSlash(rel), f)
		out = append(out, rs...)
		return err
	})
	return out, err
}
