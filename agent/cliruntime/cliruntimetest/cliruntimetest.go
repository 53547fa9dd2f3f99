// Package cliruntimetest runs a driver's golden files and fuzz targets, the
// same way for every driver. It is imported by tests only.
//
// A golden file is input, a separator line, and the expected output
// (STYLE.md, after Caddy's adapt tests). Run `go test -update` to rewrite the
// expected part from what the driver does now; review the diff.
//
// # Session scripts (RunScripts)
//
// One directive per input line; '#' starts a comment line:
//
//	spec {"home":"/h","workdir":"/w","conversation_id":"…"}   (first, optional)
//	start                      Session.Start
//	recv <stdout line>         Session.Observe
//	text <plain text>          Session.Encode(Input{Text})
//	message <JSON>             Session.Encode(Input{Message})
//	line <JSON line>           Session.Encode(Input{Line})
//	input <Input as JSON>      Session.Encode(any Input)
//	interrupt                  Session.Interrupt
//	state                      ConversationID and TurnActive
//
// The output repeats each directive as "#<n> <verb>", followed by what it
// gave: "write <line>" (byte-exact, without the newline), "event <JSON>"
// (Raw left out; it is checked to be the observed line instead), "error
// <sentinel>", "active <bool>", "conversation <id> turn_active <bool>".
//
// # Command lines (RunCommands)
//
// Input: "launch" or "resume", then the LaunchSpec as JSON. Output: "path",
// one "arg" per argument (quoted), one "env" per variable, "dir"; or "error
// <sentinel>". Every run sets a canary variable in the test's environment and
// fails if it reaches the child's (R-DRV-5).
package cliruntimetest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
)

var update = flag.Bool("update", false, "rewrite the expected part of golden files")

// Separator divides a golden file's input from its expected output.
const Separator = "----------"

// DefaultSpec is the spec of a script without a spec line.
var DefaultSpec = cliruntime.LaunchSpec{Home: "/home/p", Workdir: "/work/w"}

var sentinels = []struct {
	name string
	err  error
}{
	{"ErrBadHome", cliruntime.ErrBadHome},
	{"ErrBadWorkdir", cliruntime.ErrBadWorkdir},
	{"ErrBadEnv", cliruntime.ErrBadEnv},
	{"ErrReservedEnv", cliruntime.ErrReservedEnv},
	{"ErrNoConversation", cliruntime.ErrNoConversation},
	{"ErrUnexpectedConversation", cliruntime.ErrUnexpectedConversation},
	{"ErrBadConversationID", cliruntime.ErrBadConversationID},
	{"ErrWrongInputField", cliruntime.ErrWrongInputField},
	{"ErrInvalidInput", cliruntime.ErrInvalidInput},
	{"ErrInputQueueFull", cliruntime.ErrInputQueueFull},
	{"ErrHandshakeFailed", cliruntime.ErrHandshakeFailed},
	{"ErrNoSuchRequest", cliruntime.ErrNoSuchRequest},
	{"ErrBadAnswer", cliruntime.ErrBadAnswer},
}

// ErrorName is the name of the cliruntime sentinel err wraps, or its text.
func ErrorName(err error) string {
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return "unknown: " + err.Error()
}

// readGolden splits a golden file.
func readGolden(t *testing.T, path string) (input []string, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	in, out, ok := strings.Cut(string(b), "\n"+Separator+"\n")
	if !ok {
		t.Fatalf("%s: no %q separator line", path, Separator)
	}
	for _, l := range strings.Split(in, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		input = append(input, l)
	}
	return input, out
}

func check(t *testing.T, path, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	if *update {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		in, _, _ := strings.Cut(string(b), "\n"+Separator+"\n")
		if err := os.WriteFile(path, []byte(in+"\n"+Separator+"\n"+got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: output differs (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", path, got, want)
}

func files(t *testing.T, glob string) []string {
	t.Helper()
	paths, err := filepath.Glob(glob)
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden files match %s (%v)", glob, err)
	}
	return paths
}

// RunScripts runs every session script matching glob against d.
func RunScripts(t *testing.T, d cliruntime.Driver, glob string) {
	for _, path := range files(t, glob) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			input, want := readGolden(t, path)
			check(t, path, runScript(t, d, input), want)
		})
	}
}

func runScript(t *testing.T, d cliruntime.Driver, input []string) string {
	t.Helper()
	spec := DefaultSpec
	if len(input) > 0 && strings.HasPrefix(input[0], "spec ") {
		spec = cliruntime.LaunchSpec{}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(input[0], "spec ")), &spec); err != nil {
			t.Fatalf("spec: %v", err)
		}
		input = input[1:]
	}
	s := d.NewSession(spec)
	var out strings.Builder
	for i, l := range input {
		verb, arg, _ := strings.Cut(l, " ")
		fmt.Fprintf(&out, "#%d %s\n", i+1, verb)
		var st cliruntime.Step
		var err error
		var observed []byte
		switch verb {
		case "start":
			st = s.Start()
		case "recv":
			observed = []byte(arg)
			st = s.Observe([]byte(arg + "\n"))
		case "text":
			st, err = s.Encode(cliruntime.Input{Text: arg})
		case "message":
			st, err = s.Encode(cliruntime.Input{Message: json.RawMessage(arg)})
		case "line":
			st, err = s.Encode(cliruntime.Input{Line: json.RawMessage(arg)})
		case "input":
			var in cliruntime.Input
			if e := json.Unmarshal([]byte(arg), &in); e != nil {
				t.Fatalf("line %d: input: %v", i+1, e)
			}
			st, err = s.Encode(in)
		case "interrupt":
			var active bool
			st, active = s.Interrupt()
			fmt.Fprintf(&out, "active %t\n", active)
		case "state":
			fmt.Fprintf(&out, "conversation %q turn_active %t\n", s.ConversationID(), s.TurnActive())
		case "answer":
			// answer <request id> <option id> [message]
			f := strings.SplitN(arg, " ", 3)
			a := cliruntime.Answer{}
			if len(f) > 1 {
				a.OptionID = f[1]
			}
			if len(f) > 2 {
				a.Message, a.Text = f[2], f[2]
			}
			st, err = s.Answer(f[0], a)
		default:
			t.Fatalf("line %d: unknown directive %q", i+1, verb)
		}
		if err != nil {
			fmt.Fprintf(&out, "error %s\n", ErrorName(err))
			if len(st.Write) > 0 || len(st.Events) > 0 {
				t.Errorf("line %d: an error came with a step: %+v", i+1, st)
			}
		}
		writeStep(t, &out, st, observed)
	}
	return out.String()
}

func writeStep(t *testing.T, out *strings.Builder, st cliruntime.Step, observed []byte) {
	t.Helper()
	for _, w := range st.Write {
		if !bytes.HasSuffix(w, []byte("\n")) || bytes.Count(w, []byte("\n")) != 1 {
			t.Errorf("write %q is not one line ending in a newline", w)
		}
		fmt.Fprintf(out, "write %s\n", bytes.TrimSuffix(w, []byte("\n")))
	}
	for _, ev := range st.Events {
		if ev.Raw != nil && !bytes.Equal(ev.Raw, observed) {
			t.Errorf("event %s: Raw = %s, want the observed line %s", ev.Kind, ev.Raw, observed)
		}
		ev.Raw = nil
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(out, "event %s\n", b)
	}
}

// Canary is the variable RunCommands sets in the test process; it must never
// reach a child.
const Canary = "OLIVARES_CANARY_LEAK"

// RunCommands runs every command-line golden file matching glob against d.
func RunCommands(t *testing.T, d cliruntime.Driver, glob string) {
	t.Setenv(Canary, "canary-value")
	for _, path := range files(t, glob) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			input, want := readGolden(t, path)
			if len(input) != 2 {
				t.Fatalf("want two input lines (launch|resume, spec), got %d", len(input))
			}
			var spec cliruntime.LaunchSpec
			if err := json.Unmarshal([]byte(input[1]), &spec); err != nil {
				t.Fatalf("spec: %v", err)
			}
			var cmd cliruntime.Command
			var err error
			switch input[0] {
			case "launch":
				cmd, err = d.Launch(spec)
			case "resume":
				cmd, err = d.Resume(spec)
			default:
				t.Fatalf("unknown op %q", input[0])
			}
			var out strings.Builder
			if err != nil {
				fmt.Fprintf(&out, "error %s\n", ErrorName(err))
			} else {
				fmt.Fprintf(&out, "path %s\n", cmd.Path)
				for _, a := range cmd.Args {
					fmt.Fprintf(&out, "arg %s\n", strconv.Quote(a))
				}
				for _, e := range cmd.Env {
					if strings.Contains(e, Canary) || strings.Contains(e, "canary-value") {
						t.Errorf("the test process's environment leaked into the child's: %q", e)
					}
					fmt.Fprintf(&out, "env %s\n", e)
				}
				fmt.Fprintf(&out, "dir %s\n", cmd.Dir)
				checkEnvComplete(t, cmd.Env)
			}
			check(t, path, out.String(), want)
		})
	}
}

// checkEnvComplete: every entry is KEY=VALUE, each key once; HOME and PATH
// are there.
func checkEnvComplete(t *testing.T, env []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, e := range env {
		k, _, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			t.Errorf("env entry %q is not KEY=VALUE", e)
		}
		if seen[k] {
			t.Errorf("env key %s appears twice", k)
		}
		seen[k] = true
	}
	for _, k := range []string{"PATH", "HOME"} {
		if !seen[k] {
			t.Errorf("env has no %s", k)
		}
	}
}

// SeedLines returns, for each script matching glob, its recv lines joined
// by newlines: fuzz seeds that walk a whole conversation.
func SeedLines(t testing.TB, glob string) [][]byte {
	paths, _ := filepath.Glob(glob)
	var seeds [][]byte
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		var seed []byte
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if sc.Text() == Separator {
				break
			}
			if l, ok := strings.CutPrefix(sc.Text(), "recv "); ok {
				seed = append(append(seed, l...), '\n')
			}
		}
		f.Close()
		if len(seed) > 0 {
			seeds = append(seeds, seed)
		}
	}
	return seeds
}

// FuzzObserve feeds arbitrary stdout lines to fresh launch and resume
// sessions of d, with an input and an interrupt between lines, and checks that
// nothing panics and every write is one line.
func FuzzObserve(f *testing.F, d cliruntime.Driver, resumeID string, seedGlob string) {
	for _, s := range SeedLines(f, seedGlob) {
		f.Add(s)
	}
	f.Add([]byte("{}\n[]\nnull\n{\"id\":1}\n{\"type\":1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, conv := range []string{"", resumeID} {
			spec := DefaultSpec
			spec.ConversationID = conv
			s := d.NewSession(spec)
			steps := []cliruntime.Step{s.Start()}
			for _, l := range bytes.Split(data, []byte("\n")) {
				steps = append(steps, s.Observe(l))
				if st, err := s.Encode(cliruntime.Input{Text: "x", Message: json.RawMessage(`"x"`)}); err == nil {
					steps = append(steps, st)
				}
				if st, err := s.Encode(cliruntime.Input{Text: "x"}); err == nil {
					steps = append(steps, st)
				}
				if st, err := s.Encode(cliruntime.Input{Message: json.RawMessage(`"x"`)}); err == nil {
					steps = append(steps, st)
				}
				st, _ := s.Interrupt()
				steps = append(steps, st)
				_, _ = s.ConversationID(), s.TurnActive()
			}
			// Every request reported is well formed and takes each of its
			// options once (R-REQ-1); a bogus option or a second answer
			// is refused.
			for _, st := range append([]cliruntime.Step(nil), steps...) {
				for _, ev := range st.Events {
					if ev.Kind != cliruntime.EventRequest {
						continue
					}
					r := ev.Request
					if r == nil || r.ID == "" || r.Kind == "" || len(r.Options) == 0 {
						t.Fatalf("a malformed request: %+v", r)
					}
					if _, err := s.Answer(r.ID, cliruntime.Answer{OptionID: "\x00bogus"}); err == nil {
						t.Fatalf("request %s took a bogus option", r.ID)
					}
					o := r.Options[len(r.Options)-1]
					if o.ID == "" || (o.Decision != cliruntime.DecisionAllow && o.Decision != cliruntime.DecisionDeny && o.Decision != cliruntime.DecisionAnswer) {
						t.Fatalf("request %s: a malformed option %+v", r.ID, o)
					}
					if st, err := s.Answer(r.ID, cliruntime.Answer{OptionID: o.ID, Text: "{}", Message: "no"}); err == nil {
						steps = append(steps, st)
						if _, err := s.Answer(r.ID, cliruntime.Answer{OptionID: o.ID}); err == nil {
							t.Fatalf("request %s was answered twice", r.ID)
						}
					}
				}
			}
			for _, st := range steps {
				for _, w := range st.Write {
					if !bytes.HasSuffix(w, []byte("\n")) || bytes.Count(w, []byte("\n")) != 1 {
						t.Fatalf("write %q is not one line", w)
					}
				}
				for _, ev := range st.Events {
					if ev.Kind == "" {
						t.Fatalf("event without a kind: %+v", ev)
					}
				}
			}
		}
	})
}
