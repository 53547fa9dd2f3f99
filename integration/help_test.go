package integration

import (
	"io/fs"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Finding 1 of issue 21 and R-CLI-3: --help on every subcommand of the
// three binaries prints its usage, exits 0 and does nothing else. Each runs
// with HOME, the config and state directories in an empty temporary
// directory that must stay empty (dev mode would create its state there,
// the agent its key, the CLI its credentials); the API and tunnel ports
// given to dev and run are held free by this test, and are free again after.
func TestHelpRunsNothing(t *testing.T) {
	t.Parallel()
	bin := binaries(t)
	home := t.TempDir()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "config"), "XDG_STATE_HOME=" + filepath.Join(home, "state"),
		"OLIVARES_CONFIG_DIR=" + filepath.Join(home, "olivares"), "OLIVARES_STATE_DIR=" + filepath.Join(home, "coordinator"),
		"OLIVARES_AGENT_STATE_DIR=" + filepath.Join(home, "agent")}
	// A free port for dev's API and tunnel: if --help started dev, it
	// would hold the port after the command returned... it must not have
	// been bound at all, which the free check after each command shows.
	port := freeAddr(t)

	// The subcommands are read from each binary's own --help, so that a new
	// one is covered without editing this test.
	subcommands := func(binName string) [][]string {
		out, code := runCmd(t, env, filepath.Join(bin, binName), "--help")
		if code != 0 {
			t.Fatalf("%s --help: exit %d\n%s", binName, code, out)
		}
		re := regexp.MustCompile(`(?m)^  ` + binName + `((?: [a-z][a-z-]*)+)`)
		seen := map[string]bool{}
		var cmds [][]string
		for _, m := range re.FindAllStringSubmatch(out, -1) {
			words := strings.Fields(m[1])
			// "ca rotate|promote" style alternatives are listed one a line.
			key := strings.Join(words, " ")
			if !seen[key] {
				seen[key] = true
				cmds = append(cmds, words)
				if len(words) > 1 && !seen[words[0]] {
					seen[words[0]] = true
					cmds = append(cmds, words[:1]) // the group itself
				}
			}
		}
		if len(cmds) < 3 {
			t.Fatalf("%s --help lists only %q", binName, cmds)
		}
		return cmds
	}
	for _, b := range []string{"olivares-coordinator", "olivares-agent", "olivares"} {
		for _, words := range subcommands(b) {
			for _, args := range [][]string{
				append(append([]string{}, words...), "--help"),
				append(append([]string{}, words...), "--http", port, "--tunnel", port, "-h"),
			} {
				if strings.Contains(strings.Join(args, " "), "--http") && (b != "olivares-coordinator" || words[0] != "dev") {
					continue
				}
				out, code := runCmd(t, env, filepath.Join(bin, b), args...)
				if code != 0 || !strings.Contains(out, "Usage") {
					t.Errorf("%s %q: exit %d, want 0 and the usage\n%s", b, args, code, out)
				}
				for _, bad := range []string{"dev mode is ready", "join token:", "token:", "enrolled as"} {
					if strings.Contains(out, bad) {
						t.Errorf("%s %q ran the command: %q\n%s", b, args, bad, out)
					}
				}
				if appeared := filesUnder(t, home); len(appeared) > 0 {
					t.Fatalf("%s %q left %q behind", b, args, appeared)
				}
				if l, err := net.Listen("tcp", port); err != nil {
					t.Fatalf("%s %q: port %s is not free after it: %v", b, args, port, err)
				} else {
					l.Close()
				}
			}
		}
	}
}

// R-CLI-8, issue 32 finding 10: every binary answers --version, a mistyped command
// or flag names what was meant, a flag error is printed once (not by the
// flag package and again by main), and serve without a config says to give
// one. None of them leaves anything behind.
func TestCommandLineMistakes(t *testing.T) {
	t.Parallel()
	bin := binaries(t)
	home := t.TempDir()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"OLIVARES_CONFIG_DIR=" + filepath.Join(home, "olivares"), "OLIVARES_STATE_DIR=" + filepath.Join(home, "coordinator"),
		"OLIVARES_AGENT_STATE_DIR=" + filepath.Join(home, "agent")}
	for _, tt := range []struct {
		bin  string
		args []string
		code int
		want string
	}{
		{"olivares", []string{"--version"}, 0, "olivares 0."},
		{"olivares-coordinator", []string{"--version"}, 0, "olivares-coordinator 0."},
		{"olivares-agent", []string{"--version"}, 0, "olivares-agent 0."},
		{"olivares-coordinator", []string{"srve"}, 2, `olivares-coordinator: unknown command "srve" (did you mean serve?); see olivares-coordinator --help`},
		{"olivares-agent", []string{"stauts"}, 2, `olivares-agent: unknown command "stauts" (did you mean status?)`},
		{"olivares", []string{"sesion"}, 2, `olivares: unknown command "sesion" (did you mean session?)`},
		{"olivares-coordinator", []string{"serve", "--bogus"}, 2, "olivares-coordinator: serve: unknown flag --bogus; see olivares-coordinator serve --help"},
		{"olivares-coordinator", []string{"token", "create", "--tenat", "a"}, 2, "unknown flag --tenat (did you mean --tenant?)"},
		{"olivares-agent", []string{"status", "--stat-dir", "x"}, 2, "olivares-agent: status: unknown flag --stat-dir (did you mean --state-dir?)"},
		{"olivares-coordinator", []string{"serve"}, 2, "olivares-coordinator: serve: --config FILE is required"},
	} {
		out, code := runCmd(t, env, filepath.Join(bin, tt.bin), tt.args...)
		if code != tt.code || !strings.Contains(out, tt.want) {
			t.Errorf("%s %q: exit %d\n%s\nwant %d and %q", tt.bin, tt.args, code, out, tt.code, tt.want)
		}
		if strings.Contains(out, "flag provided but not defined") || strings.Count(out, "\n") != 1 {
			t.Errorf("%s %q: want one line, got\n%s", tt.bin, tt.args, out)
		}
	}
	if appeared := filesUnder(t, home); len(appeared) > 0 {
		t.Errorf("left %q behind", appeared)
	}
	// Finding 12: a port another process holds is refused with the setting
	// that names it, before a CA or a store is written.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	state := filepath.Join(home, "dev")
	out, code := runCmd(t, env, filepath.Join(bin, "olivares-coordinator"), "dev", "--state-dir", state, "--http", busy.Addr().String())
	if code != 1 || !strings.Contains(out, "api listen "+busy.Addr().String()+": another process holds the port") || !strings.Contains(out, "--http in dev mode") {
		t.Errorf("dev on a busy port: exit %d\n%s", code, out)
	}
	if appeared := filesUnder(t, home); len(appeared) > 0 {
		t.Errorf("dev on a busy port left %q behind", appeared)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// filesUnder lists what exists under dir (dir itself excluded).
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != dir {
			found = append(found, p)
		}
		return nil
	})
	return found
}
