package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// root is the repository root: this package lives in docs/.
const root = ".."

func loadRules(t *testing.T) map[string]Rule {
	t.Helper()
	rules, err := LoadRules(".")
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]Rule{}
	for _, r := range rules {
		if prev, ok := defined[r.ID]; ok {
			t.Errorf("%s:%d: %s is defined again (first at %s:%d)", r.File, r.Line, r.ID, prev.File, prev.Line)
			continue
		}
		defined[r.ID] = r
	}
	if len(defined) == 0 {
		t.Fatal("docs define no rule")
	}
	return defined
}

var (
	scanOnce  sync.Once
	scanned   []Citation
	scanError error
)

// scanRepo scans the repository once for all the tests of this package.
func scanRepo(t *testing.T) []Citation {
	t.Helper()
	scanOnce.Do(func() { scanned, scanError = ScanRepo(root) })
	if scanError != nil {
		t.Fatal(scanError)
	}
	return scanned
}

// TestCitationsAreDefined: every rule ID cited in code, tests, scripts, the
// README, the API document and the docs themselves is defined in docs/
// (a range cites each member; a wildcard needs one rule of its family).
func TestCitationsAreDefined(t *testing.T) {
	defined := loadRules(t)
	// A wildcard names every rule under its prefix: R-WT-* the R-WT
	// family, R-CX-* all of Codex supervision.
	families := map[string]bool{}
	for id := range defined {
		for i := strings.IndexByte(id, '-'); i > 0; {
			families[id[:i]] = true
			j := strings.IndexByte(id[i+1:], '-')
			if j < 0 {
				break
			}
			i += 1 + j
		}
	}
	for _, c := range scanRepo(t) {
		if c.Err != nil {
			t.Errorf("%s:%d: %v", c.File, c.Line, c.Err)
			continue
		}
		if c.Family != "" {
			if !families[c.Family] {
				t.Errorf("%s:%d: %s cites family %s, which docs/ does not define", c.File, c.Line, c.Text, c.Family)
			}
			continue
		}
		for _, id := range c.IDs {
			if _, ok := defined[id]; !ok {
				t.Errorf("%s:%d: %s cites %s, which docs/ does not define", c.File, c.Line, c.Text, id)
			}
		}
	}
}

// TestRuleCoverage prints the rules no test cites. It never fails on them:
// a rule may be proven by a test that names it only through a wildcard, or
// not be testable here; the list says where to look.
func TestRuleCoverage(t *testing.T) {
	defined := loadRules(t)
	cited := map[string]bool{}
	for _, c := range scanRepo(t) {
		if c.Test() {
			for _, id := range c.IDs {
				cited[id] = true
			}
		}
	}
	var rules, uncited []string
	for id, r := range defined {
		if r.Decision() {
			continue
		}
		rules = append(rules, id)
		if !cited[id] {
			uncited = append(uncited, id)
		}
	}
	sort.Slice(uncited, func(i, j int) bool { return idLess(uncited[i], uncited[j]) })
	for _, id := range uncited {
		r := defined[id]
		t.Logf("not cited by any test: %s (%s:%d)", id, r.File, r.Line)
	}
	t.Logf("rule coverage: %d rules in docs/, %d cited by a test, %d cited by none", len(rules), len(rules)-len(uncited), len(uncited))
}

// idLess orders IDs by family, then number.
func idLess(a, b string) bool {
	fa, na := splitID(a)
	fb, nb := splitID(b)
	if fa != fb {
		return fa < fb
	}
	return na < nb
}

func splitID(id string) (string, int) {
	i := strings.LastIndexAny(id, "-J")
	n, _ := strconv.Atoi(id[i+1:])
	return id[:i+1], n
}

// cliPending are the rule IDs the operator CLI still quotes in what it
// prints; its messages are being rewritten with the one API client (issue
// 17). Remove an entry when its ID is gone: a stale one is only logged.
var cliPending = map[string][]string{}

// messageExempt reports whether a Go file is test code, whose strings may
// quote rules: tests, test helper packages, the integration harness, and
// this package.
func messageExempt(rel string) bool {
	c := Citation{File: rel}
	return c.Test() || strings.HasPrefix(rel, "docs/")
}

// TestNoRuleIDsInMessages: no string literal of product code quotes a rule
// ID. Errors, API messages, logs and printed output speak to people; rule
// IDs live in comments, tests and docs.
func TestNoRuleIDsInMessages(t *testing.T) {
	used := map[string]bool{}
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
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if !strings.HasSuffix(rel, ".go") || messageExempt(rel) {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			for _, r := range Cites(lit.Value) {
				if pendingCLI(rel, r.Text) {
					used[rel+" "+r.Text] = true
					t.Logf("%s:%d: the CLI still prints %s (its messages are being rewritten)", rel, fset.Position(lit.Pos()).Line, r.Text)
					continue
				}
				t.Errorf("%s:%d: a message quotes %s; keep the rule ID in a comment beside it", rel, fset.Position(lit.Pos()).Line, r.Text)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for file, ids := range cliPending {
		for _, id := range ids {
			if !used[file+" "+id] {
				t.Logf("cliPending: %s no longer quotes %s; drop the entry", file, id)
			}
		}
	}
}

func pendingCLI(rel, text string) bool {
	for _, id := range cliPending[rel] {
		if strings.HasPrefix(text, id) {
			return true
		}
	}
	return false
}

// outsideRE finds pointers to documents that are not in the repository:
// the requirements catalogue and architecture page that lived beside it,
// and section numbers (§2.21) of that catalogue.
var outsideRE = regexp.MustCompile(`REQUIREMENTS|shared/spec|\.\./shared/|/work/shared|ARCHITECTURE\.md|§\s?[0-9]`)

// outsideHint is a cheap test that rules out what outsideRE cannot match.
func outsideHint(s string) bool {
	for _, h := range []string{"REQUIREMENTS", "shared/spec", "../shared/", "/work/shared", "ARCHITECTURE.md", "§"} {
		if strings.Contains(s, h) {
			return true
		}
	}
	return false
}

// sectionOK are the documents whose sections a line may cite with §: they
// are in docs/. A file that names real-clis.md may cite its sections bare.
var sectionOK = regexp.MustCompile(`real-clis\.md|docs/`)

// outsidePending are the pointers the operator CLI still has (see
// cliPending); a stale entry is only logged.
var outsidePending = map[string][]string{}

// TestNoPointersOutsideRepo: code, scripts and READMEs send the reader to
// docs/, never to a document beside the repository.
func TestNoPointersOutsideRepo(t *testing.T) {
	used := map[string]bool{}
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
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if !Scanned(rel) || strings.HasPrefix(rel, "docs/") || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sectionsOK := sectionOK.Match(b)
		if !outsideHint(string(b)) {
			return nil
		}
		for i, line := range strings.Split(string(b), "\n") {
			if !outsideHint(line) {
				continue
			}
			for _, m := range outsideRE.FindAllString(line, -1) {
				if strings.HasPrefix(m, "§") && (sectionsOK || sectionOK.MatchString(line)) {
					continue
				}
				if s := pendingOutside(rel, line); s != "" {
					used[rel+" "+s] = true
					t.Logf("%s:%d: the CLI still has %q (its messages are being rewritten)", rel, i+1, m)
					continue
				}
				t.Errorf("%s:%d: %q points outside the repository; point to docs/ instead", rel, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for file, subs := range outsidePending {
		for _, s := range subs {
			if !used[file+" "+s] {
				t.Logf("outsidePending: %s no longer has %s; drop the entry", file, s)
			}
		}
	}
}

func pendingOutside(rel, line string) string {
	for _, s := range outsidePending[rel] {
		if strings.Contains(line, s) {
			return s
		}
	}
	return ""
}

// TestDocsIndex: docs/README.md links every docs file, and every link it
// has points to a file that exists.
func TestDocsIndex(t *testing.T) {
	idx, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	linkRE := regexp.MustCompile(`\]\(([^)#]+\.md)\)`)
	linked := map[string]bool{}
	for _, m := range linkRE.FindAllStringSubmatch(string(idx), -1) {
		linked[m[1]] = true
		if _, err := os.Stat(m[1]); err != nil {
			t.Errorf("docs/README.md links %s: %v", m[1], err)
		}
	}
	err = filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") || p == "README.md" {
			return err
		}
		if !linked[filepath.ToSlash(p)] {
			t.Errorf("docs/README.md does not link %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
