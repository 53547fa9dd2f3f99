package docs

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestCites covers every citation style the code uses.
func TestCites(t *testing.T) {
	tests := []struct {
		line string
		want []Ref
	}{
		{"// R-PIN-3: at most 20 pins", []Ref{{Text: "R-PIN-3", IDs: []string{"R-PIN-3"}}}},
		{"(R-CX-ARC-11)", []Ref{{Text: "R-CX-ARC-11", IDs: []string{"R-CX-ARC-11"}}}},
		{"Rules: R-PIN-1..8, R-SNZ-1..3", []Ref{
			{Text: "R-PIN-1..8", IDs: []string{"R-PIN-1", "R-PIN-2", "R-PIN-3", "R-PIN-4", "R-PIN-5", "R-PIN-6", "R-PIN-7", "R-PIN-8"}},
			{Text: "R-SNZ-1..3", IDs: []string{"R-SNZ-1", "R-SNZ-2", "R-SNZ-3"}}}},
		{"R-MSG-12/13", []Ref{{Text: "R-MSG-12/13", IDs: []string{"R-MSG-12", "R-MSG-13"}}}},
		{"R-LIM-1/3/6/7/8", []Ref{{Text: "R-LIM-1/3/6/7/8", IDs: []string{"R-LIM-1", "R-LIM-3", "R-LIM-6", "R-LIM-7", "R-LIM-8"}}}},
		{"R-ATT-1/5..6", []Ref{{Text: "R-ATT-1/5..6", IDs: []string{"R-ATT-1", "R-ATT-5", "R-ATT-6"}}}},
		{"R-ED-2/R-ED-3", []Ref{{Text: "R-ED-2", IDs: []string{"R-ED-2"}}, {Text: "R-ED-3", IDs: []string{"R-ED-3"}}}},
		{"R-PIN-1–3", []Ref{{Text: "R-PIN-1–3", IDs: []string{"R-PIN-1", "R-PIN-2", "R-PIN-3"}}}},
		{"R-MOVE-11b: a tainted run", []Ref{{Text: "R-MOVE-11b", IDs: []string{"R-MOVE-11"}}}},
		{"R-HOF-15's bound", []Ref{{Text: "R-HOF-15", IDs: []string{"R-HOF-15"}}}},
		{"(R-WT-*, R-WTF-*)", []Ref{{Text: "R-WT-*", Family: "R-WT"}, {Text: "R-WTF-*", Family: "R-WTF"}}},
		{"AT-CX-04/05 and AT-CX-01", []Ref{{Text: "AT-CX-04/05", IDs: []string{"AT-CX-04", "AT-CX-05"}}, {Text: "AT-CX-01", IDs: []string{"AT-CX-01"}}}},
		{"AT-CX-12..14", []Ref{{Text: "AT-CX-12..14", IDs: []string{"AT-CX-12", "AT-CX-13", "AT-CX-14"}}}},
		{"Q-23: the home rules; D-01", []Ref{{Text: "Q-23", IDs: []string{"Q-23"}}, {Text: "D-01", IDs: []string{"D-01"}}}},
		{"J05 and J01–J03", []Ref{{Text: "J05", IDs: []string{"J05"}}, {Text: "J01–J03", IDs: []string{"J01", "J02", "J03"}}}},
		{"J07..J08", []Ref{{Text: "J07..J08", IDs: []string{"J07", "J08"}}}},
		{"R-PIN-1..8.", []Ref{{Text: "R-PIN-1..8", IDs: []string{"R-PIN-1", "R-PIN-2", "R-PIN-3", "R-PIN-4", "R-PIN-5", "R-PIN-6", "R-PIN-7", "R-PIN-8"}}}},
		// Not citations.
		{"UTF-8, SHA-256, P-256 and AES-256", nil},
		{"ERR-12, xR-PIN-3, TestJ01, j01_launch_test.go, Q-1, D-123", nil},
		{"an ellipsis R-X-1... is one rule", []Ref{{Text: "R-X-1", IDs: []string{"R-X-1"}}}},
	}
	for _, tc := range tests {
		got := Cites(tc.line)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Cites(%q): got %+v, want %+v", tc.line, got, tc.want)
		}
	}
}

func TestCitesBackwardRange(t *testing.T) {
	for _, line := range []string{"R-PIN-8..3", "R-PIN-3..3", "AT-CX-05..01", "R-PIN-1..900"} {
		rs := Cites(line)
		if len(rs) != 1 || rs[0].Err == nil {
			t.Errorf("Cites(%q): got %+v, want one citation with an error", line, rs)
		}
	}
}

func TestParseRules(t *testing.T) {
	doc := strings.Join([]string{
		"# Marks",
		"",
		"Prose that cites R-PIN-9 is not a definition.",
		"- **R-PIN-3** [S] One person holds at most 20 pins.",
		"  - a sub-item",
		"* **AT-CX-04** [P] A stored row can be continued.",
		"- **Q-09** [P] Filters and row fields.",
		"- **J01** [P] Launch, attach, stop.",
		"- **R-CX-ARC-11** [I] 50 pages or 5,000 threads.",
		"| R-PIN-4 | a table row is not a definition |",
	}, "\n")
	got, err := ParseRules("marks.md", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{
		{ID: "R-PIN-3", Tag: "S", Text: "One person holds at most 20 pins.", File: "marks.md", Line: 4},
		{ID: "AT-CX-04", Tag: "P", Text: "A stored row can be continued.", File: "marks.md", Line: 6},
		{ID: "Q-09", Tag: "P", Text: "Filters and row fields.", File: "marks.md", Line: 7},
		{ID: "J01", Tag: "P", Text: "Launch, attach, stop.", File: "marks.md", Line: 8},
		{ID: "R-CX-ARC-11", Tag: "I", Text: "50 pages or 5,000 threads.", File: "marks.md", Line: 9},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if !got[2].Decision() || got[0].Decision() || got[3].Decision() {
		t.Error("Decision: Q-nn and D-nn are decisions, rules and journeys are not")
	}
}

func TestParseRulesRefusesMalformed(t *testing.T) {
	for _, line := range []string{
		"- **R-PIN-3** One person holds at most 20 pins.",
		"- **R-PIN-3** [X] One person holds at most 20 pins.",
		"- **R-PIN-3** [S]",
	} {
		if _, err := ParseRules("marks.md", strings.NewReader(line)); err == nil {
			t.Errorf("ParseRules(%q): got no error, want one", line)
		}
	}
}

func TestCitationTest(t *testing.T) {
	tests := []struct {
		file string
		want bool
	}{
		{"agent/ring/ring_test.go", true},
		{"coordinator/store/storetest/marks.go", true},
		{"agent/cliruntime/cliruntimetest/cliruntimetest.go", true},
		{"integration/env.go", true},
		{"agent/ring/ring.go", false},
		{"README.md", false},
		{"openapi.yaml", false},
		{"scripts/test", false},
	}
	for _, tc := range tests {
		if got := (Citation{File: tc.file}).Test(); got != tc.want {
			t.Errorf("Test(%s): got %v, want %v", tc.file, got, tc.want)
		}
	}
}

func TestScanned(t *testing.T) {
	tests := []struct {
		file string
		want bool
	}{
		{"agent/ring/ring.go", true},
		{"openapi.yaml", true},
		{"coordinator/console/assets/list.js", true},
		{"coordinator/api/openapi.json", true},
		{"README.md", true},
		{"scripts/bench", true},
		{".ci/run", true},
		{"docs/rules/marks.md", true},
		{"docs/rules_test.go", false},
		{"go.sum", false},
		{"agent/transcript/testdata/claude.jsonl", false},
	}
	for _, tc := range tests {
		if got := Scanned(tc.file); got != tc.want {
			t.Errorf("Scanned(%s): got %v, want %v", tc.file, got, tc.want)
		}
	}
}

var idRE = regexp.MustCompile(`^(?:` + idPattern + `)$`)

// FuzzCites: any line gives well-formed IDs or a range error, never a panic.
func FuzzCites(f *testing.F) {
	for _, s := range []string{"R-PIN-1..8", "AT-CX-04/05", "J01–J08", "R-MOVE-11b", "R-WT-*", "R-A-1/2..9/3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		for _, r := range Cites(line) {
			if r.Err != nil || r.Family != "" {
				continue
			}
			if len(r.IDs) == 0 {
				t.Fatalf("Cites(%q): a citation without IDs", line)
			}
			for _, id := range r.IDs {
				if !idRE.MatchString(id) {
					t.Fatalf("Cites(%q): ID %q is not well formed", line, id)
				}
			}
		}
	})
}

func TestScanSkipsNoCite(t *testing.T) {
	dir := t.TempDir()
	src := "package x\n\n// R-PIN-3: cited\nvar name = \"R-DEV-1\" // docs:nocite: a name that looks like a rule\n"
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cs, err := ScanRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Line != 3 || !reflect.DeepEqual(cs[0].IDs, []string{"R-PIN-3"}) {
		t.Errorf("got %+v, want only R-PIN-3 on line 3", cs)
	}
}
