package main

import (
	"io"
	"os"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"
)

// termOut is what the CLI knows of where it prints (R-CLI-4): colour only on a
// terminal, and never when NO_COLOR is set to anything (no-color.org) or
// TERM is dumb. Piped output is plain text, the same bytes every time.
type termOut struct {
	color bool
}

// termOf tells whether w is a terminal that takes colour.
func termOf(w io.Writer) termOut {
	f, ok := w.(*os.File)
	if !ok || !isTerminal(f) {
		return termOut{}
	}
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return termOut{}
	}
	return termOut{color: true}
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// SGR colours.
const (
	sgrBold   = "1"
	sgrDim    = "2"
	sgrRed    = "31"
	sgrGreen  = "32"
	sgrYellow = "33"
	sgrBlue   = "34"
	sgrCyan   = "36"
)

// escapes matches the escape sequences a tool writes for a terminal: CSI
// (colours, cursor moves), OSC (titles, links) and the two-byte ones.
var escapes = regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]`)

// plain is s without a tool's own terminal escapes when colour is off
// (issue 32 finding 14: Codex colours its log lines, which a pipe or a
// file would keep as "\x1b[2m..."); on a colour terminal they pass.
func (t termOut) plain(s string) string {
	if t.color || !strings.Contains(s, "\x1b") {
		return s
	}
	return escapes.ReplaceAllString(s, "")
}

// paint wraps s in the SGR code when colour is on.
func (t termOut) paint(code, s string) string {
	if !t.color || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// sgrPlain is the default colour: a table cell wrapped in it is as wide,
// in bytes, as a coloured one, so tabwriter keeps the column aligned.
const sgrPlain = "39"

// cell wraps a table cell in code whenever colour is on (every code used
// in a column has two digits), so that each cell of the column carries the
// same number of escape bytes.
func (t termOut) cell(code, s string) string {
	if !t.color {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// state colours a run state, for a table cell.
func (t termOut) state(state, text string) string {
	code := sgrPlain
	switch state {
	case "running", "starting":
		code = sgrGreen
	case "idle":
		code = sgrCyan
	case "failed":
		code = sgrRed
	case "pending_approval":
		code = sgrYellow
	}
	return t.cell(code, text)
}

// sgrHeader is bold with two digits, for the header of a coloured column.
const sgrHeader = "01"

// nodeState colours a node state, for a table cell.
func (t termOut) nodeState(s string) string {
	code := sgrPlain
	switch s {
	case "connected":
		code = sgrGreen
	case "reconnecting":
		code = sgrYellow
	case "revoked":
		code = sgrRed
	}
	return t.cell(code, s)
}
