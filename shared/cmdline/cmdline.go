// Package cmdline is what the command lines of the three binaries
// (olivares, olivares-coordinator, olivares-agent) tell alike: their
// version, a "did you mean" for a mistyped word, a flag error told once
// in the terms a person typed; and the command table of olivares-coordinator
// and olivares-agent, whose --help and each command's come from the
// table's usage fields. It prints only a help that was asked for: each
// binary decides where a message goes.
package cmdline

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
)

// Version is the release of the three binaries, set at build time
// (-ldflags "-X github.com/olivares-dev/olivares/shared/cmdline.Version=...").
var Version = "0.1.0-dev"

// IsVersion reports whether arg asks for the version (--version, -version).
func IsVersion(arg string) bool { return arg == "--version" || arg == "-version" }

// VersionLine is what bin --version prints: the release, the commit it was
// built from when the build recorded one, and the Go release.
func VersionLine(bin string) string {
	commit := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			commit = "commit " + rev + dirty + ", "
		}
	}
	return fmt.Sprintf("%s %s (%s%s)\n", bin, Version, commit, runtime.Version())
}

// Suggest is the word among words closest to typed, "" when none is close
// enough to be what was meant: a prefix either way (sess, sessions), or
// at most a third of its letters changed (sesion, tenants).
func Suggest(typed string, words []string) string {
	best, bestD := "", 0
	for _, w := range words {
		if w == typed || w == "" {
			continue
		}
		d := distance(typed, w)
		if strings.HasPrefix(w, typed) && len(typed) >= 3 || strings.HasPrefix(typed, w) && len(w) >= 3 {
			d = min(d, 1)
		}
		if d > max(1, len(w)/3) {
			continue
		}
		if best == "" || d < bestD {
			best, bestD = w, d
		}
	}
	return best
}

// DidYouMean is " (did you mean X?)" for Suggest's answer, "" for none.
func DidYouMean(typed string, words []string) string {
	if s := Suggest(typed, words); s != "" {
		return " (did you mean " + s + "?)"
	}
	return ""
}

// distance is the edit distance of a and b where swapping two neighbouring
// letters is one edit (acem, acme), as a typist makes it.
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+c)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// FlagError tells an error of fs.Parse as a person typed it: "unknown
// flag --bogus (did you mean --tenant?)" for the flag package's "flag
// provided but not defined: -bogus", with the -- the help shows. Other
// errors keep their text with the flag given as --name.
func FlagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		hint := ""
		if s := Suggest(strings.TrimLeft(name, "-"), names); s != "" {
			hint = " (did you mean --" + s + "?)"
		}
		return errors.New("unknown flag --" + strings.TrimLeft(name, "-") + hint)
	}
	// "invalid value "x" for flag -ttl: ..." and "flag needs an argument: -ttl".
	msg = strings.Replace(msg, "flag -", "flag --", 1)
	msg = strings.Replace(msg, "argument: -", "argument: --", 1)
	return errors.New(msg)
}

// UsageError is a mistake on the command line; the binaries exit 2 on it.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// ErrHelp is what a command's or a group's --help returns after printing
// it: the command runs nothing and the process exits 0 (R-CLI-3).
var ErrHelp = errors.New("help shown")

// IsHelp reports whether arg asks for help (help, -h, -help, --help).
func IsHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// Command is one entry of a binary's command table (R-CLI-3).
type Command struct {
	// Name is the words that select it: "serve", "ca init".
	Name string
	// Usage is its synopsis and help in the binary's --help, "bin name ..."
	// and the lines that tell of it indented by four.
	Usage string
	// Run defines the command's flags on c.Flags, parses them with c.Parse
	// and does the work.
	Run func(ctx context.Context, c *Call) error
}

// Call is what a command's Run gets: a flag set named for the command, the
// arguments after its name, and where to print.
type Call struct {
	Flags *flag.FlagSet
	Args  []string
	Out   io.Writer
	cmd   *Command
	bin   string
}

// Parse parses c.Args with the flags Run defined. --help prints the
// command's usage and its flags and returns ErrHelp; a bad flag or an
// argument left over is a UsageError, told once by the binary (the flag
// package prints nothing).
func (c *Call) Parse() error {
	fs := c.Flags
	fs.SetOutput(io.Discard)
	err := fs.Parse(c.Args)
	fs.SetOutput(c.Out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(c.Out, "Usage:\n", Indent(c.cmd.Usage), "\nFlags:\n")
		fs.PrintDefaults()
		return ErrHelp
	case err != nil:
		return UsageError{fmt.Errorf("%s: %w; see %s %s --help", c.cmd.Name, FlagError(fs, err), c.bin, c.cmd.Name)}
	case fs.NArg() > 0:
		return UsageError{fmt.Errorf("%s: unexpected argument %q", c.cmd.Name, fs.Arg(0))}
	}
	return nil
}

// Given reports whether the command line set the flag name.
func (c *Call) Given(name string) bool {
	given := false
	c.Flags.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// Table is a binary's commands, in the order its --help lists them.
type Table struct {
	Bin string
	// Head and Tail frame the commands' usage in the binary's --help.
	Head, Tail string
	Commands   []Command
}

// Usage is the binary's --help.
func (t *Table) Usage() string {
	var b strings.Builder
	b.WriteString(t.Head)
	for _, c := range t.Commands {
		b.WriteString(Indent(c.Usage))
	}
	b.WriteString(t.Tail)
	return b.String()
}

// Run runs the command args name. With no arguments or a help word it
// prints the binary's --help, with a group's first word and a help word
// the group's commands' usage; a word that names nothing is a UsageError
// that says what was meant.
func (t *Table) Run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || IsHelp(args[0]) {
		fmt.Fprint(out, t.Usage())
		return nil
	}
	if IsVersion(args[0]) {
		fmt.Fprint(out, VersionLine(t.Bin))
		return nil
	}
	var firsts, group []string
	var usage strings.Builder
	for i := range t.Commands {
		cmd := &t.Commands[i]
		words := strings.Fields(cmd.Name)
		if len(words) <= len(args) && slices.Equal(words, args[:len(words)]) {
			fs := flag.NewFlagSet(cmd.Name, flag.ContinueOnError)
			return cmd.Run(ctx, &Call{Flags: fs, Args: args[len(words):], Out: out, cmd: cmd, bin: t.Bin})
		}
		firsts = append(firsts, words[0])
		if len(words) > 1 && words[0] == args[0] {
			group = append(group, cmd.Name)
			usage.WriteString(Indent(cmd.Usage))
		}
	}
	switch {
	case group == nil:
		return UsageError{fmt.Errorf("unknown command %q%s; see %s --help", args[0], DidYouMean(args[0], firsts), t.Bin)}
	case len(args) > 1 && IsHelp(args[1]):
		fmt.Fprint(out, "Usage:\n", usage.String())
		return ErrHelp
	}
	return UsageError{fmt.Errorf("%s: want %s", args[0], OrList(group))}
}

// Indent indents each line of s that is not blank by two spaces: a
// command's usage as its binary's --help shows it.
func Indent(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if strings.TrimSpace(l) != "" {
			b.WriteString("  ")
		}
		b.WriteString(l)
	}
	return b.String()
}

// OrList is "a, b or c".
func OrList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
