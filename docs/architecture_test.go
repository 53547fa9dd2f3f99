package docs

import (
	"bufio"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// goPackages lists the directories of the repository that hold Go files,
// relative to the root ("." for the root itself), skipping what the
// citation scan skips (fixtures, node_modules, hidden directories).
func goPackages(t *testing.T) map[string]bool {
	t.Helper()
	pkgs := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (skipDirs[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && d.Type().IsRegular() {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			pkgs[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// mapLineRE is one line of the map's package list: "- `path`: what it holds".
var mapLineRE = regexp.MustCompile("^- `([^`]+)`")

// mappedPackages reads the package list of docs/architecture.md: the
// "- `path`" lines of its "## Packages" section, with their line numbers.
func mappedPackages(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	named := map[string]int{}
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Packages"
			continue
		}
		m := mapLineRE.FindStringSubmatch(line)
		if !in || m == nil {
			continue
		}
		if prev, ok := named[m[1]]; ok {
			t.Errorf("docs/architecture.md:%d names %s again (first at line %d); keep one line", n, m[1], prev)
			continue
		}
		named[m[1]] = n
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(named) == 0 {
		t.Fatal(`docs/architecture.md has no "## Packages" section with "- ` + "`path`" + `: ..." lines`)
	}
	return named
}

// packageSynopsis is the first sentence of a package's doc comment, for
// the line the failure message proposes; "" when it has none.
func packageSynopsis(dir string) string {
	entries, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		return ""
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(root, dir, e.Name()), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil || f.Doc == nil {
			continue
		}
		var p doc.Package
		return p.Synopsis(f.Doc.Text())
	}
	return ""
}

// TestArchitectureNamesEveryPackage: the map in docs/architecture.md names
// every Go package of the repository, one line each, and no package that
// is gone, so that a newcomer finds the room of any code from the map.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	pkgs := goPackages(t)
	named := mappedPackages(t)
	var missing []string
	for p := range pkgs {
		if _, ok := named[p]; !ok {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	for _, p := range missing {
		what := packageSynopsis(p)
		if what == "" {
			what = "<what it holds, in one line>"
		}
		t.Errorf("docs/architecture.md does not name the Go package %s; add this line to its group under \"## Packages\" (### %s):\n- `%s`: %s",
			p, group(p), p, what)
	}
	var gone []string
	for p := range named {
		if !pkgs[p] {
			gone = append(gone, p)
		}
	}
	sort.Strings(gone)
	for _, p := range gone {
		t.Errorf("docs/architecture.md:%d names %s, which is no Go package of the repository; remove the line (or fix the path)", named[p], p)
	}
}

// group names the heading of the map's package list a path belongs under.
func group(p string) string {
	switch top, _, _ := strings.Cut(p, "/"); top {
	case "agent":
		return "The agent (agent/)"
	case "coordinator":
		return "The coordinator (coordinator/)"
	case "shared":
		return "Both sides (shared/)"
	case "integration":
		return "Tests and their harness (integration/)"
	}
	return "Repository root and docs"
}

// mdLinkRE is a relative link of a Markdown page to another file.
var mdLinkRE = regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`)

// TestDocLinksResolve: every relative link of docs/*.md and
// docs/rules/*.md points to a file of the repository.
func TestDocLinksResolve(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	rules, _ := filepath.Glob("rules/*.md")
	for _, page := range append(pages, rules...) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range mdLinkRE.FindAllStringSubmatch(line, -1) {
				target := path.Join(path.Dir(filepath.ToSlash(page)), m[1])
				if _, err := os.Stat(filepath.FromSlash(target)); err != nil {
					t.Errorf("docs/%s:%d links %s, which does not exist", filepath.ToSlash(page), i+1, m[1])
				}
			}
		}
	}
}
