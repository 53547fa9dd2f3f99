package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// printFileDiff shows a path's change from base to head (R-DIFF-3) as a
// unified diff, coloured on a terminal (R-CLI-4).
func printFileDiff(out io.Writer, fd apitypes.FileDiff, tty termOut) {
	if fd.Binary {
		fmt.Fprintf(out, "%s: binary content, not shown\n", fd.Path)
		return
	}
	for _, side := range []struct {
		name string
		cut  bool
	}{{"base", fd.OriginalTruncated}, {"head", fd.ModifiedTruncated}} {
		if side.cut {
			fmt.Fprintf(out, "(the %s side is cut at the workspace's read limit)\n", side.name)
		}
	}
	text := unifiedDiff("a/"+fd.Path, "b/"+fd.Path, fd.Original, fd.Modified, 3)
	if text == "" {
		fmt.Fprintf(out, "%s: no change\n", fd.Path)
		return
	}
	printPatch(out, text, tty)
}

// printUncommitted shows a run's uncommitted edits (R-DIFF-10): git's
// patch, or the paths alone when it is too large.
func printUncommitted(out io.Writer, u apitypes.UncommittedDiff, tty termOut) {
	switch {
	case len(u.Files) == 0:
		fmt.Fprintf(out, "nothing uncommitted: the folder matches its commit %s\n", u.Head)
		return
	case u.TooLarge:
		fmt.Fprintf(out, "the uncommitted edits are too large to print (over %d KiB of diff, or a new file over 16 MiB); the changed paths:\n", u.PatchLimit>>10)
		for _, f := range u.Files {
			fmt.Fprintf(out, "%-12s %s\n", f.Status, f.Path)
		}
	default:
		printPatch(out, u.Patch, tty)
	}
	if u.Truncated {
		fmt.Fprintf(out, "(more than %d paths: the list stops here)\n", len(u.Files))
	}
}

// printPatch prints a unified diff, coloured on a terminal (R-CLI-4).
func printPatch(out io.Writer, text string, tty termOut) {
	for _, l := range strings.SplitAfter(text, "\n") {
		if l == "" {
			continue
		}
		code := ""
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			code = sgrBold
		case strings.HasPrefix(l, "@@"):
			code = sgrCyan
		case strings.HasPrefix(l, "+"):
			code = sgrGreen
		case strings.HasPrefix(l, "-"):
			code = sgrRed
		}
		if code != "" {
			fmt.Fprint(out, tty.paint(code, strings.TrimSuffix(l, "\n"))+"\n")
		} else {
			fmt.Fprint(out, l)
		}
	}
}

// splitLines splits s into lines that keep their "\n"; a last line without
// one is marked as diff(1) does.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	ls := strings.SplitAfter(s, "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// maxDiffEdits bounds the edit distance searched for (the trace kept is
// about its square); beyond it the diff is the whole of a replaced by the
// whole of b, still correct.
const maxDiffEdits = 2000

// unifiedDiff is the unified diff of a and b with ctx lines of context,
// "" when they are equal.
func unifiedDiff(nameA, nameB, a, b string, ctx int) string {
	if a == b {
		return ""
	}
	al, bl := splitLines(a), splitLines(b)
	ops := diffOps(al, bl)
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", nameA, nameB)
	// Group the edits into hunks with ctx lines of context around them.
	i := 0
	for i < len(ops) {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-ctx, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			// a run of equal lines: does another edit come within 2*ctx?
			j := end
			for j < len(ops) && ops[j].kind == ' ' {
				j++
			}
			if j == len(ops) || j-end > 2*ctx {
				end = min(end+ctx, len(ops))
				break
			}
			end = j
		}
		aStart, bStart := ops[start].ai, ops[start].bi
		aN, bN := 0, 0
		for _, op := range ops[start:end] {
			if op.kind != '+' {
				aN++
			}
			if op.kind != '-' {
				bN++
			}
		}
		fmt.Fprintf(&sb, "@@ -%s +%s @@\n", hunkRange(aStart, aN), hunkRange(bStart, bN))
		for _, op := range ops[start:end] {
			sb.WriteByte(op.kind)
			sb.WriteString(op.line)
			if !strings.HasSuffix(op.line, "\n") {
				sb.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = end
	}
	return sb.String()
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprint(start + 1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// diffOp is one line of the edit script: ' ' kept, '-' only in a, '+' only
// in b; ai and bi are the 0-based line numbers where it stands.
type diffOp struct {
	kind   byte
	line   string
	ai, bi int
}

// diffOps is a shortest edit script of a into b (Myers' O(ND) algorithm).
func diffOps(a, b []string) []diffOp {
	n, m := len(a), len(b)
	maxD := min(n+m, maxDiffEdits)
	off := maxD + 1
	v := make([]int, 2*maxD+3)
	var trace [][]int
	found := false
	for d := 0; d <= maxD && !found; d++ {
		// Only the diagonals -d..d can be read back at step d.
		trace = append(trace, append([]int(nil), v[off-d:off+d+1]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				found = true
				break
			}
		}
	}
	if !found {
		var ops []diffOp
		for i, l := range a {
			ops = append(ops, diffOp{'-', l, i, 0})
		}
		for j, l := range b {
			ops = append(ops, diffOp{'+', l, n, j})
		}
		return ops
	}
	// Walk the trace back from (n, m).
	var rev []diffOp
	x, y := n, m
	for d := len(trace) - 1; d >= 0; d-- {
		td := trace[d]
		vd := func(k int) int { return td[k+d] } // v at step d-1, diagonal k
		k := x - y
		var prevK int
		if k == -d || (k != d && vd(k-1) < vd(k+1)) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := 0
		if d > 0 {
			prevX = vd(prevK)
		}
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			x--
			y--
			rev = append(rev, diffOp{' ', a[x], x, y})
		}
		if d > 0 {
			if x == prevX {
				y--
				rev = append(rev, diffOp{'+', b[y], x, y})
			} else {
				x--
				rev = append(rev, diffOp{'-', a[x], x, y})
			}
		}
	}
	ops := make([]diffOp, len(rev))
	for i, op := range rev {
		ops[len(rev)-1-i] = op
	}
	return ops
}
