package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/creack/pty"
)

// R-CLI-4: colour on a terminal only, and not when NO_COLOR is set or TERM
// is dumb; a pipe or a file is plain.
func TestColourOnlyOnATerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, tt := range []struct {
		name     string
		out      any
		noColor  string
		term     string
		wantTerm bool
	}{
		{"terminal", tty, "", "xterm-256color", true},
		{"terminal with NO_COLOR", tty, "1", "xterm-256color", false},
		{"dumb terminal", tty, "", "dumb", false},
		{"pipe", w, "", "xterm-256color", false},
		{"buffer", &bytes.Buffer{}, "", "xterm-256color", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NO_COLOR", tt.noColor)
			t.Setenv("TERM", tt.term)
			var got termOut
			switch o := tt.out.(type) {
			case *os.File:
				got = termOf(o)
			case *bytes.Buffer:
				got = termOf(o)
			}
			if got.color != tt.wantTerm {
				t.Errorf("colour %v, want %v", got.color, tt.wantTerm)
			}
			if s := got.paint(sgrRed, "x"); (s != "x") == !tt.wantTerm {
				t.Errorf("paint gives %q", s)
			}
		})
	}
}
