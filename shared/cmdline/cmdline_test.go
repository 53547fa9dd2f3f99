package cmdline

import (
	"errors"
	"flag"
	"strings"
	"testing"
)

// R-CLI-8, issue 32 finding 10: a mistyped command or flag names what was meant.
func TestSuggest(t *testing.T) {
	words := []string{"session", "profile", "node", "tenant", "login", "logout", "serve", "dev", "acme"}
	for _, tt := range []struct{ typed, want string }{
		{"sesion", "session"},
		{"sessions", "session"},
		{"nodes", "node"},
		{"tenants", "tenant"},
		{"sess", "session"},
		{"srve", "serve"},
		{"lgoin", "login"},
		{"acem", "acme"},
		{"frob", ""},
		{"x", ""},
		{"session", ""}, // not a typo
	} {
		if got := Suggest(tt.typed, words); got != tt.want {
			t.Errorf("Suggest(%q) = %q, want %q", tt.typed, got, tt.want)
		}
	}
}

func TestFlagError(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("tenant", "", "")
	fs.Duration("ttl", 0, "")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--tenat", "a"}, "unknown flag --tenat (did you mean --tenant?)"},
		{[]string{"-frob"}, "unknown flag --frob"},
		{[]string{"--ttl"}, "flag needs an argument: --ttl"},
		{[]string{"--ttl", "x"}, `invalid value "x" for flag --ttl`},
	} {
		fs.SetOutput(new(strings.Builder))
		err := fs.Parse(tt.args)
		if err == nil {
			t.Fatalf("%q parsed", tt.args)
		}
		if got := FlagError(fs, err).Error(); !strings.HasPrefix(got, tt.want) || strings.Contains(got, "(did you mean") != strings.Contains(tt.want, "did you mean") {
			t.Errorf("%q: %q, want %q", tt.args, got, tt.want)
		}
	}
	if got := FlagError(fs, errors.New("other")).Error(); got != "other" {
		t.Errorf("other error: %q", got)
	}
}

func TestVersionLine(t *testing.T) {
	got := VersionLine("olivares")
	if !strings.HasPrefix(got, "olivares "+Version+" (") || !strings.Contains(got, "go") || !strings.HasSuffix(got, ")\n") {
		t.Errorf("VersionLine = %q", got)
	}
}

// R-CLI-3: a command's --help is its lines of the binary's usage, with the
// lines that tell of it, and its flags; a mistake is one usage error.
func TestParse(t *testing.T) {
	const usage = `b: a binary.

Usage:
  b grp one --x N       the first
  b grp two
  b grp two --all
      The second,
      told at length.
  b other
`
	var out strings.Builder
	fs := flag.NewFlagSet("grp two", flag.ContinueOnError)
	fs.SetOutput(&out)
	fs.Bool("all", false, "all of it")
	if err := Parse(fs, []string{"--help"}, "b", usage); !errors.Is(err, ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	want := "Usage:\n  b grp two\n  b grp two --all\n      The second,\n      told at length.\n\nFlags:\n  -all\n    \tall of it\n"
	if out.String() != want {
		t.Errorf("--help printed %q, want %q", out.String(), want)
	}
	if got := Help(usage, "b", "grp"); !strings.HasPrefix(got, "  b grp one") || !strings.HasSuffix(got, "told at length.\n") {
		t.Errorf("Help of the group: %q", got)
	}
	var ue UsageError
	if err := Parse(fs, []string{"--al"}, "b", usage); !errors.As(err, &ue) || err.Error() != "grp two: unknown flag --al (did you mean --all?); see b grp two --help" {
		t.Errorf("--al: %v", err)
	}
	if err := Parse(fs, []string{"x"}, "b", usage); !errors.As(err, &ue) || err.Error() != `grp two: unexpected argument "x"` {
		t.Errorf("x: %v", err)
	}
	if strings.Contains(out.String(), "provided but not defined") {
		t.Errorf("the flag package printed: %q", out.String())
	}
}
