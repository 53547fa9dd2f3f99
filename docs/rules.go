// Package docs holds the repository's own statement of the rules the
// product implements (docs/rules/*.md, indexed by docs/README.md), and what
// keeps code and docs in step: a parser of the rule files and a scanner of
// the rule citations in code, tests, scripts and the API document.
//
// The tests of this package fail on a citation the docs do not define and
// on a rule ID quoted in a message a person reads; they report, without
// failing, the rules no test cites.
package docs

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Rule is one rule of the docs: its stable ID, its tag and its text.
type Rule struct {
	ID string
	// Tag is S (stated by the seeds), I (inferred from them) or P (a
	// decision of this project).
	Tag  string
	Text string
	File string
	Line int
}

// Decision reports whether the rule is a decision note (Q-nn, D-nn)
// rather than a rule of behaviour: a test has nothing to cite it for.
func (r Rule) Decision() bool {
	return strings.HasPrefix(r.ID, "Q-") || strings.HasPrefix(r.ID, "D-")
}

// idPattern is one rule ID as the docs define it: R-FAMILY-N (the family
// may have several parts, R-CX-ARC-11), AT-CX-NN, Q-NN, D-NN and JNN.
const idPattern = `R(?:-[A-Z]+)+-[0-9]+|AT-CX-[0-9]{2}|Q-[0-9]{2}|D-[0-9]{2}|J[0-9]{2}`

// defRE is a definition line: "- **ID** [T] text".
var defRE = regexp.MustCompile(`^\s*[-*]\s+\*\*(` + idPattern + `)\*\*\s+\[([A-Z])\]\s*(.*)$`)

// defLikeRE is a line that looks like a definition; one that defRE does
// not accept (a bad tag, a missing one) is an error, so that a typo never
// drops a rule silently.
var defLikeRE = regexp.MustCompile(`^\s*[-*]\s+\*\*(` + idPattern + `)\*\*`)

// ParseRules reads the rule definitions of one docs file. A definition is a
// list item that starts with the ID in bold, then the tag in brackets:
//
//   - **R-PIN-3** [S] One person holds at most 20 pins; ...
func ParseRules(file string, r io.Reader) ([]Rule, error) {
	var out []Rule
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		m := defRE.FindStringSubmatch(line)
		if m == nil {
			if d := defLikeRE.FindStringSubmatch(line); d != nil {
				return nil, fmt.Errorf("%s:%d: rule %s has no tag: write - **%s** [S|I|P] text", file, n, d[1], d[1])
			}
			continue
		}
		switch m[2] {
		case "S", "I", "P":
		default:
			return nil, fmt.Errorf("%s:%d: rule %s has tag [%s]; use [S], [I] or [P]", file, n, m[1], m[2])
		}
		if strings.TrimSpace(m[3]) == "" {
			return nil, fmt.Errorf("%s:%d: rule %s has no text", file, n, m[1])
		}
		out = append(out, Rule{ID: m[1], Tag: m[2], Text: m[3], File: file, Line: n})
	}
	return out, sc.Err()
}

// Ref is one citation found in a line: the text as written, the rule IDs
// it names (a range names each member), or, for a wildcard such as
// R-WT-*, the family it names.
type Ref struct {
	Text   string
	IDs    []string
	Family string
	// Err is set for a citation that cannot be read (a range that runs
	// backwards).
	Err error
}

// citeRE finds citations. Alternatives, in order:
//
//	R-FAMILY-N[x] with more members: ..M (a range), /M (a list), –M (a
//	  range); a trailing letter (R-MOVE-11b) names a clause of the rule
//	R-FAMILY-*                   a whole family
//	AT-CX-NN, Q-NN, D-NN         with ..MM, /MM or –MM as above
//	JNN, JNN..JMM, JNN–JMM       journeys
var citeRE = regexp.MustCompile(
	`\b(R(?:-[A-Z]+)+)-([0-9]+)[a-z]?((?:(?:\.\.|/|–)[0-9]+[a-z]?)*)\b` +
		`|\b(R(?:-[A-Z]+)+)-\*` +
		`|\b(AT-CX|Q|D)-([0-9]{2})((?:(?:\.\.|/|–)[0-9]{2})*)\b` +
		`|\bJ([0-9]{2})((?:(?:\.\.|–)J[0-9]{2})?)\b`)

// memberRE splits the tail of a citation into its members.
var memberRE = regexp.MustCompile(`(\.\.|/|–)J?([0-9]+)`)

// Cites returns the citations of one line.
func Cites(line string) []Ref {
	if !maybeCites(line) {
		return nil
	}
	var out []Ref
	for _, m := range citeRE.FindAllStringSubmatch(line, -1) {
		switch {
		case m[1] != "":
			out = append(out, expand(m[0], m[1]+"-", m[2], m[3], 0))
		case m[4] != "":
			out = append(out, Ref{Text: m[0], Family: m[4]})
		case m[5] != "":
			out = append(out, expand(m[0], m[5]+"-", m[6], m[7], 2))
		default:
			out = append(out, expand(m[0], "J", m[8], m[9], 2))
		}
	}
	return out
}

// expand turns prefix+first and its tail ("..8", "/13/14") into IDs;
// width pads the numbers (AT-CX-04).
func expand(text, prefix, first, tail string, width int) Ref {
	ref := Ref{Text: text}
	id := func(n int) string { return fmt.Sprintf("%s%0*d", prefix, width, n) }
	last, _ := strconv.Atoi(first)
	ref.IDs = append(ref.IDs, id(last))
	for _, mm := range memberRE.FindAllStringSubmatch(tail, -1) {
		n, _ := strconv.Atoi(mm[2])
		if mm[1] == "/" {
			ref.IDs = append(ref.IDs, id(n))
			last = n
			continue
		}
		if n <= last || n-last > 100 {
			ref.Err = fmt.Errorf("%s: the range runs from %d to %d", text, last, n)
			return ref
		}
		for k := last + 1; k <= n; k++ {
			ref.IDs = append(ref.IDs, id(k))
		}
		last = n
	}
	return ref
}

// maybeCites is a cheap test that rules out most lines before the regexp
// runs: every citation holds "R-", "AT-CX-", "Q-", "D-" or a J and a digit.
func maybeCites(line string) bool {
	for i := 0; i+1 < len(line); i++ {
		switch line[i] {
		case 'R', 'Q', 'D', 'X':
			if line[i+1] == '-' {
				return true
			}
		case 'J':
			if line[i+1] >= '0' && line[i+1] <= '9' {
				return true
			}
		}
	}
	return false
}
