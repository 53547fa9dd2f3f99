// Package cmdline is what the command lines of the three binaries
// (olivares, olivares-coordinator, olivares-agent) tell alike: their
// version, a "did you mean" for a mistyped word, a flag error told once
// in the terms a person typed, and a command's help cut from its binary's
// usage text. It prints only a help that was asked for, to the flag set's
// output: each binary decides where a message goes.
package cmdline

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
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

// ErrHelp is what Parse returns after printing a command's help: the
// command runs nothing and the process exits 0 (R-CLI-3).
var ErrHelp = errors.New("help shown")

// Help is what usage, the whole --help of bin, tells of the command or
// group name: its lines "  bin name ..." and the deeper-indented lines
// after each.
func Help(usage, bin, name string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(usage, "\n") {
		switch {
		case strings.HasPrefix(l, "  "+bin+" "+name+" ") || l == "  "+bin+" "+name:
			in = true
		case !strings.HasPrefix(l, "    "):
			in = false
		}
		if in {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// Parse parses args with fs, the flags of bin's command fs.Name() that
// usage tells of. --help prints the command's Help and its flags to the
// flag set's output and returns ErrHelp; a bad flag or an argument left
// over is a UsageError, told once by the binary (the flag package prints
// nothing).
func Parse(fs *flag.FlagSet, args []string, bin, usage string) error {
	out := fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(out, "Usage:\n", Help(usage, bin, fs.Name()), "\nFlags:\n")
		fs.PrintDefaults()
		return ErrHelp
	case err != nil:
		return UsageError{fmt.Errorf("%s: %w; see %s %s --help", fs.Name(), FlagError(fs, err), bin, fs.Name())}
	case fs.NArg() > 0:
		return UsageError{fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
	}
	return nil
}
