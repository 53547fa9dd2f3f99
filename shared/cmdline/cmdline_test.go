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
