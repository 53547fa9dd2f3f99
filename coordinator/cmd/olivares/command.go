package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/cmdline"
)

// command is one entry of the CLI's command table (R-CLI-3). Each command
// group builds its commands in its own file (node.go, session.go, ...):
// a command's options live in one struct of its own, captured by its flags
// and run functions, so a flag that another command takes is a usage error
// here.
type command struct {
	// name is the words that select it: "session start", "agent workspace setup".
	name string
	// arg names the positional argument ("run ref"), "" for none.
	arg string
	// nargs is how many positional arguments arg names when more than one
	// ("run ref and request id": 2).
	nargs int
	// usage is the synopsis and help in the text of olivares --help, each
	// line starting with "olivares ".
	usage string
	// noJSON leaves out the --json flag (a stream, or no output to speak of).
	noJSON bool
	// noLogin runs without the saved credentials (login, completion, the
	// Codex commands that take --url and --token).
	noLogin bool
	// flags defines the command's own flags.
	flags func(fs *flag.FlagSet)
	// check validates what the server cannot (arity is checked before it);
	// it runs before the credentials are read, so a typo says so even when
	// not logged in.
	check func(c *call) error
	// run does the work.
	run func(ctx context.Context, c *call) error
}

// call is what a command's run gets: its arguments, the flags given, where
// to print, and (unless noLogin) the API client of the saved login.
type call struct {
	cmd   *command
	pos   []string
	arg   string // pos[0] when the command takes one or more arguments
	set   map[string]bool
	json  bool
	in    io.Reader
	out   io.Writer
	err   io.Writer
	cl    *apiclient.Client
	creds Credentials
	tty   termOut // what out is: a terminal, colour
}

// emit prints v as indented JSON with --json, else calls text.
func (c *call) emit(v any, text func()) error {
	if c.json {
		enc := json.NewEncoder(c.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	text()
	return nil
}

// required is a usage error naming the flags among names not given.
func (c *call) required(names ...string) error {
	var missing []string
	for _, n := range names {
		if !c.set[n] {
			missing = append(missing, "--"+n)
		}
	}
	if len(missing) > 0 {
		return usageError{fmt.Errorf("%s: %s required", c.cmd.name, strings.Join(missing, ", "))}
	}
	return nil
}

// atLeastOne is a usage error when a count flag that was given is below 1:
// the API takes a count only when it is positive, and 0 would be sent as
// nothing, the server's default used instead of what was asked.
func (c *call) atLeastOne(name string, v int) error {
	if c.set[name] && v < 1 {
		return usageError{fmt.Errorf("%s: --%s must be at least 1", c.cmd.name, name)}
	}
	return nil
}

// table is every command, in the order olivares --help shows them: each
// group's commands stand together, built in the group's own file. It is
// built anew for each run, so no options outlive a command line.
func table() []*command {
	var all []*command
	for _, g := range [][]*command{
		loginCommands(), nodeCommands(), profileCommands(), workspaceCommands(),
		sessionCommands(), markCommands(), activityCommands(), lifecycleCommands(), vaultCommands(), auditCommands(), webhookCommands(), usageCommands(),
		hookCommands(), codexCommands(), claudeCommands(), completionCommands(),
	} {
		all = append(all, g...)
	}
	return all
}

// groupOf is the first word of a command name, "" for a one-word command.
func groupOf(name string) string {
	g, _, ok := strings.Cut(name, " ")
	if !ok {
		return ""
	}
	return g
}

// lookup finds the command whose name is the longest prefix of args, and
// returns it with the arguments after its name. prefix is the words that
// matched a group when no command did ("session", "agent workspace").
func lookup(tab []*command, args []string) (cmd *command, rest []string, prefix []string) {
	best := 0
	for _, c := range tab {
		words := strings.Fields(c.name)
		if len(words) > len(args) || len(words) <= best {
			continue
		}
		match := true
		for i, w := range words {
			if args[i] != w {
				match = false
				break
			}
		}
		if match {
			cmd, best = c, len(words)
		}
	}
	if cmd != nil {
		return cmd, args[best:], nil
	}
	// The longest run of words that starts some command's name.
	for n := len(args); n > 0; n-- {
		p := strings.Join(args[:n], " ") + " "
		for _, c := range tab {
			if strings.HasPrefix(c.name, p) {
				return nil, args[n:], args[:n]
			}
		}
	}
	return nil, args, nil
}

// under lists the next words after prefix among the command names, for
// "session: want start, list, ..." and a group's --help.
func under(tab []*command, prefix string) (words []string, cmds []*command) {
	seen := map[string]bool{}
	for _, c := range tab {
		if !strings.HasPrefix(c.name, prefix+" ") {
			continue
		}
		cmds = append(cmds, c)
		w, _, _ := strings.Cut(strings.TrimPrefix(c.name, prefix+" "), " ")
		if !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	return words, cmds
}

// flagSet is the command's flag set with its own flags and --json.
func (c *command) flagSet(out io.Writer, jsonOut *bool) *flag.FlagSet {
	fs := flag.NewFlagSet("olivares "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if !c.noJSON {
		fs.BoolVar(jsonOut, "json", false, "print JSON")
	}
	if c.flags != nil {
		c.flags(fs)
	}
	fs.Usage = func() {}
	return fs
}

// printHelp is a command's --help: its usage text and its flags.
func (c *command) printHelp(out io.Writer) {
	fmt.Fprint(out, "Usage:\n", cmdline.Indent(c.usage))
	var j bool
	fs := c.flagSet(out, &j)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(out, "\nFlags:")
		fs.SetOutput(out)
		fs.PrintDefaults()
	}
}

// printGroupHelp is the usage of every command under prefix.
func printGroupHelp(out io.Writer, tab []*command, prefix string) {
	_, cmds := under(tab, prefix)
	fmt.Fprint(out, "Usage:\n")
	for _, c := range cmds {
		fmt.Fprint(out, cmdline.Indent(c.usage))
	}
	fmt.Fprintf(out, "\nolivares %s COMMAND --help shows a command's flags.\n", prefix)
}

// dispatch runs the command args name, or prints help.
func dispatch(ctx context.Context, tab []*command, args []string, in io.Reader, out, errOut io.Writer) error {
	cmd, rest, prefix := lookup(tab, args)
	if cmd == nil {
		if prefix == nil {
			var groups []string
			for _, c := range tab {
				groups = append(groups, strings.Fields(c.name)[0])
			}
			return usageError{fmt.Errorf("unknown command %q%s; see olivares --help", args[0], cmdline.DidYouMean(args[0], groups))}
		}
		p := strings.Join(prefix, " ")
		if len(rest) > 0 && cmdline.IsHelp(rest[0]) {
			printGroupHelp(out, tab, p)
			return nil
		}
		words, _ := under(tab, p)
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			return usageError{fmt.Errorf("%s: want %s", p, cmdline.OrList(words))}
		}
		return usageError{fmt.Errorf("unknown command %q%s; %s takes %s (see olivares %s --help)", p+" "+rest[0], cmdline.DidYouMean(rest[0], words), p, cmdline.OrList(words), p)}
	}
	c := &call{cmd: cmd, in: in, out: out, err: errOut, set: map[string]bool{}, tty: termOf(out)}
	fs := cmd.flagSet(out, &c.json)
	// Flags may come after the positional argument (olivares node show ID --json).
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				cmd.printHelp(out)
				return nil
			}
			return usageError{fmt.Errorf("%s: %w; see olivares %s --help", cmd.name, cmdline.FlagError(fs, err), cmd.name)}
		}
		if fs.NArg() == 0 {
			break
		}
		if before := len(rest) - fs.NArg() - 1; before >= 0 && optionalWord(fs, rest[before], fs.Arg(0)) {
			// --attention needs_input: the word is the flag's value.
			rest = fs.Args()[1:]
			continue
		}
		c.pos = append(c.pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
	switch {
	case cmd.nargs > 1 && len(c.pos) != cmd.nargs:
		return usageError{fmt.Errorf("%s: want a %s", cmd.name, cmd.arg)}
	case cmd.nargs <= 1 && cmd.arg != "" && len(c.pos) != 1:
		return usageError{fmt.Errorf("%s: want exactly one %s", cmd.name, cmd.arg)}
	case cmd.arg == "" && len(c.pos) > 0:
		return usageError{fmt.Errorf("%s takes no argument", cmd.name)}
	}
	if len(c.pos) > 0 {
		c.arg = c.pos[0]
	}
	if cmd.check != nil {
		if err := cmd.check(c); err != nil {
			return err
		}
	}
	if !cmd.noLogin {
		creds, err := loadCreds()
		if err != nil {
			return err
		}
		cl, err := newClient(creds, callTimeout)
		if err != nil {
			return err
		}
		c.creds, c.cl = creds, cl
	}
	return cmd.run(ctx, c)
}

// optionalFlag is a flag whose value may be left out (--attention, or
// --attention REASON, or --attention=REASON): alone it takes def; a
// following word is its value when takes accepts it.
type optionalFlag struct {
	v     *string
	def   string
	takes func(string) bool
}

func (o optionalFlag) String() string {
	if o.v == nil {
		return ""
	}
	return *o.v
}

func (o optionalFlag) Set(s string) error {
	if s == "true" {
		s = o.def
	}
	*o.v = s
	return nil
}

func (o optionalFlag) IsBoolFlag() bool { return true }

// optionalWord sets an optionalFlag given as tok to word when tok names one
// alone (no =value) and the flag takes word.
func optionalWord(fs *flag.FlagSet, tok, word string) bool {
	name, ok := strings.CutPrefix(tok, "--")
	if !ok {
		name, ok = strings.CutPrefix(tok, "-")
	}
	if !ok || strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	o, ok := f.Value.(optionalFlag)
	if !ok || !o.takes(word) {
		return false
	}
	return o.Set(word) == nil
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// envFlag collects repeated --env K=V.
type envFlag map[string]string

func (e *envFlag) String() string {
	keys := make([]string, 0, len(*e))
	for k := range *e {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func (e *envFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want K=V, got %q", s)
	}
	if *e == nil {
		*e = envFlag{}
	}
	if _, dup := (*e)[k]; dup {
		return fmt.Errorf("%s given twice", k)
	}
	(*e)[k] = v
	return nil
}

// stdin is the process's standard input; tests replace it.
var stdin io.Reader = os.Stdin
