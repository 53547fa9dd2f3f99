package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Shell completion (R-CLI-6): olivares completion SHELL prints a script
// that asks the CLI itself (olivares __complete WORDS...) for the words
// that may come next, so the scripts never fall behind the command table.
func completionCommands() []*command {
	return []*command{{
		name: "completion", arg: "shell (bash, zsh or fish)", noLogin: true, noJSON: true,
		usage: `olivares completion bash|zsh|fish
    Print the shell completion script: commands, subcommands and flags.
    bash: source <(olivares completion bash)
    zsh:  source <(olivares completion zsh)
    fish: olivares completion fish | source
`,
		run: func(ctx context.Context, c *call) error {
			script, ok := completionScripts[c.arg]
			if !ok {
				return usageError{fmt.Errorf("completion: want bash, zsh or fish, not %q", c.arg)}
			}
			_, err := io.WriteString(c.out, script)
			return err
		},
	}}
}

// complete prints the candidates for the last of words (the word being
// typed, possibly ""), one a line.
func complete(tab []*command, words []string, out io.Writer) {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, before := words[len(words)-1], words[:len(words)-1]
	var cands []string
	cmd, rest, _ := lookup(tab, before)
	switch {
	case cmd != nil && strings.HasPrefix(cur, "-"):
		var j bool
		fs := cmd.flagSet(io.Discard, &j)
		fs.VisitAll(func(f *flag.Flag) { cands = append(cands, "--"+f.Name) })
		cands = append(cands, "--help")
	case cmd != nil && cmd.name == "completion" && len(rest) == 0:
		cands = []string{"bash", "zsh", "fish"}
	case cmd == nil:
		prefix := strings.Join(before, " ")
		if prefix == "" {
			seen := map[string]bool{}
			for _, c := range tab {
				w, _, _ := strings.Cut(c.name, " ")
				if !seen[w] {
					seen[w] = true
					cands = append(cands, w)
				}
			}
		} else {
			cands, _ = under(tab, prefix)
		}
	}
	sort.Strings(cands)
	for _, c := range cands {
		if strings.HasPrefix(c, cur) {
			fmt.Fprintln(out, c)
		}
	}
}

var completionScripts = map[string]string{
	"bash": `# olivares bash completion: source <(olivares completion bash)
_olivares() {
    local IFS=$'\n'
    COMPREPLY=($(olivares __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _olivares olivares
`,
	"zsh": `#compdef olivares
# olivares zsh completion: source <(olivares completion zsh)
_olivares() {
    local -a cands
    cands=("${(@f)$(olivares __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    compadd -a cands
}
if (( $+functions[compdef] )); then
    compdef _olivares olivares
else
    autoload -Uz compinit && compinit && compdef _olivares olivares
fi
`,
	"fish": `# olivares fish completion: olivares completion fish | source
function __olivares_complete
    set -l words (commandline -opc) (commandline -ct)
    olivares __complete $words[2..-1] 2>/dev/null
end
complete -c olivares -f -a '(__olivares_complete)'
`,
}
