package cmdline

import (
	"context"
	"errors"
	"flag"
	"fmt"
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

// R-CLI-3: the binary's --help, a group's and a command's come from the
// table's usage fields; a mistake is one usage error.
func TestTable(t *testing.T) {
	ran := ""
	var all *bool
	tab := &Table{Bin: "b", Head: "b: a binary.\n\nUsage:\n", Tail: "\nThe end.\n", Commands: []Command{
		{Name: "grp one", Usage: "b grp one --x N       the first\n", Run: func(ctx context.Context, c *Call) error {
			ran = "one"
			return c.Parse()
		}},
		{Name: "grp two", Usage: "b grp two\nb grp two --all\n    The second,\n    told at length.\n", Run: func(ctx context.Context, c *Call) error {
			all = c.Flags.Bool("all", false, "all of it")
			if err := c.Parse(); err != nil {
				return err
			}
			ran = fmt.Sprint("two ", *all, " ", c.Given("all"))
			return nil
		}},
		{Name: "other", Usage: "b other\n", Run: func(ctx context.Context, c *Call) error { return c.Parse() }},
	}}
	whole := "b: a binary.\n\nUsage:\n  b grp one --x N       the first\n  b grp two\n  b grp two --all\n      The second,\n      told at length.\n  b other\n\nThe end.\n"
	for _, tt := range []struct {
		args     []string
		out, err string
		ran      string
	}{
		{nil, whole, "", ""},
		{[]string{"-help"}, whole, "", ""},
		{[]string{"grp", "two", "--help"}, "Usage:\n  b grp two\n  b grp two --all\n      The second,\n      told at length.\n\nFlags:\n  -all\n    \tall of it\n", ErrHelp.Error(), ""},
		{[]string{"grp", "help"}, "Usage:\n  b grp one --x N       the first\n  b grp two\n  b grp two --all\n      The second,\n      told at length.\n", ErrHelp.Error(), ""},
		{[]string{"grp", "two", "--all"}, "", "", "two true true"},
		{[]string{"grp", "two"}, "", "", "two false false"},
		{[]string{"grp", "two", "--al"}, "", "grp two: unknown flag --al (did you mean --all?); see b grp two --help", ""},
		{[]string{"grp", "two", "x"}, "", `grp two: unexpected argument "x"`, ""},
		{[]string{"grp"}, "", "grp: want grp one or grp two", ""},
		{[]string{"grp", "three"}, "", "grp: want grp one or grp two", ""},
		{[]string{"gpr"}, "", `unknown command "gpr" (did you mean grp?); see b --help`, ""},
		{[]string{"--version"}, VersionLine("b"), "", ""},
	} {
		var out strings.Builder
		ran = ""
		err := tab.Run(context.Background(), tt.args, &out)
		var ue UsageError
		if got := fmt.Sprint(err); err != nil && got != tt.err || err == nil && tt.err != "" ||
			out.String() != tt.out || ran != tt.ran || strings.Contains(out.String(), "provided but not defined") {
			t.Errorf("%q: %v, printed %q, ran %q; want %q, %q, %q", tt.args, err, out.String(), ran, tt.err, tt.out, tt.ran)
		}
		if err != nil && err != ErrHelp && !errors.As(err, &ue) {
			t.Errorf("%q: %v is no usage error", tt.args, err)
		}
	}
}
