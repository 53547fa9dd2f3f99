package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// R-CLI-3: --help on the CLI, on every group and on every command prints
// its usage and exits 0, with no API call and nothing written.
func TestHelpEverywhere(t *testing.T) {
	calls := 0
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		calls++
		t.Errorf("--help reached the API: %s %s", r.Method, r.URL)
	})
	dir := os.Getenv("OLIVARES_CONFIG_DIR")
	before, _ := os.ReadDir(dir)
	groups := map[string]bool{}
	for _, c := range table() {
		if g := groupOf(c.name); g != "" {
			groups[g] = true
			if words := strings.Fields(c.name); len(words) == 3 {
				groups[words[0]+" "+words[1]] = true
			}
		}
		for _, help := range []string{"--help", "-h"} {
			args := append(strings.Fields(c.name), help)
			out, stderr, code := cli(t, args...)
			if code != 0 || stderr != "" {
				t.Errorf("%q: exit %d, stderr %q, want 0 and nothing", args, code, stderr)
			}
			if !strings.Contains(out, "olivares "+c.name) {
				t.Errorf("%q: the help does not show the command's usage:\n%s", args, out)
			}
		}
		// With its argument and flags before --help, too: nothing runs.
		args := append(strings.Fields(c.name), "x", "--help")
		if _, _, code := cli(t, args...); code != 0 {
			t.Errorf("%q: exit %d, want 0", args, code)
		}
	}
	for g := range groups {
		args := append(strings.Fields(g), "--help")
		out, _, code := cli(t, args...)
		if code != 0 || !strings.Contains(out, "olivares "+g+" ") {
			t.Errorf("%q: exit %d, output %q", args, code, out)
		}
	}
	after, _ := os.ReadDir(dir)
	if len(after) != len(before) || calls != 0 {
		t.Errorf("--help wrote %d files in the config dir and made %d calls", len(after)-len(before), calls)
	}
	// Not logged in at all: help still answers.
	t.Setenv("OLIVARES_CONFIG_DIR", filepath.Join(t.TempDir(), "none"))
	if _, _, code := cli(t, "session", "start", "--help"); code != 0 {
		t.Errorf("session start --help without a login: exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("--help created the config dir")
	}
}

// R-CLI-3: the table itself: unique names, each with usage text that names
// it, and a group's commands together (built in the group's own file), so
// olivares --help shows each group in one piece.
func TestCommandTable(t *testing.T) {
	seen, done := map[string]bool{}, map[string]bool{}
	group := ""
	for _, c := range table() {
		if seen[c.name] {
			t.Errorf("%s is in the table twice", c.name)
		}
		seen[c.name] = true
		if g := strings.Fields(c.name)[0]; g != group {
			if done[g] {
				t.Errorf("%s stands apart from the other %s commands", c.name, g)
			}
			done[group], group = true, g
		}
		if !strings.HasPrefix(c.usage, "olivares "+c.name) {
			t.Errorf("%s: usage %q does not start with its name", c.name, c.usage)
		}
		if c.run == nil {
			t.Errorf("%s has no run", c.name)
		}
	}
}

// R-CLI-8, issue 32 finding 10: a mistyped command or flag names what was meant,
// and a flag error is one line.
func TestUnknownCommands(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"frob"}, `unknown command "frob"`},
		{[]string{"session"}, "session: want start, list,"},
		{[]string{"session", "frob"}, `unknown command "session frob"; session takes start, list,`},
		{[]string{"agent", "workspace"}, "agent workspace: want setup, approve-setup, project-config or approve-project-config"},
		{[]string{"sesion", "list"}, `unknown command "sesion" (did you mean session?); see olivares --help`},
		{[]string{"session", "lst"}, `unknown command "session lst" (did you mean list?); session takes start`},
		{[]string{"session", "show", "r", "--bogus"}, "session show: unknown flag --bogus; see olivares session show --help"},
		{[]string{"session", "list", "--nod", "n"}, "session list: unknown flag --nod (did you mean --node?)"},
	} {
		_, stderr, code := cli(t, tt.args...)
		if code != 2 || !strings.Contains(stderr, tt.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q, want 2 and %q on one line", tt.args, code, stderr, tt.want)
		}
	}
}

// R-CLI-8, issue 32 finding 10: olivares --version says which build it is.
func TestVersion(t *testing.T) {
	out, _, code := cli(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "olivares 0.") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
}

func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		out, _, code := cli(t, "completion", sh)
		if code != 0 || !strings.Contains(out, "olivares __complete") {
			t.Errorf("completion %s: exit %d, %q", sh, code, out)
		}
	}
	if _, _, code := cli(t, "completion", "tcsh"); code != 2 {
		t.Errorf("completion tcsh: exit %d, want 2", code)
	}
	for _, tt := range []struct {
		words []string
		want  string
	}{
		{[]string{""}, "agent\naudit\nclaude\nclaude-hook\ncodex\ncompletion\n"},
		{[]string{"ses"}, "session\n"},
		{[]string{"session", "at"}, "attach\n"},
		{[]string{"session", "attach", "--r"}, "--raw\n"},
		{[]string{"agent", "workspace", "approve-"}, "approve-project-config\napprove-setup\n"},
		{[]string{"completion", ""}, "bash\nfish\nzsh\n"},
	} {
		out, _, code := cli(t, append([]string{"__complete"}, tt.words...)...)
		if code != 0 || !strings.HasPrefix(out, tt.want) {
			t.Errorf("__complete %q: %q, want it to start with %q", tt.words, out, tt.want)
		}
	}
}
