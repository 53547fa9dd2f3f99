package projectconfig

import (
	"bytes"
	"fmt"
	"strings"
)

// envEntry is one KEY=VALUE line of a .env file.
type envEntry struct {
	name, value string
}

// parseDotenv reads a .env file by R-PCS-24: KEY=VALUE lines with an
// optional "export " prefix, blank lines and # comments, values bare, in
// single quotes (verbatim) or in double quotes (\n and \r expanded, the rest
// verbatim, as the dotenv package Gemini CLI uses). A bare value ends at the
// first # and loses surrounding blanks. Any other line, an unterminated
// quote or text after a closing quote fails the whole file: dotenv would
// skip such a line silently, and the scan cannot show what it means.
// A name given twice keeps its last value, as dotenv does.
func parseDotenv(data []byte) ([]envEntry, error) {
	var out []envEntry
	seen := map[string]int{}
	for n, line := range bytes.Split(data, []byte{'\n'}) {
		e, ok, err := parseEnvLine(string(bytes.TrimSuffix(line, []byte{'\r'})))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		if !ok {
			continue
		}
		if i, dup := seen[e.name]; dup {
			out[i] = e
			continue
		}
		seen[e.name] = len(out)
		out = append(out, e)
	}
	return out, nil
}

// parseEnvLine returns ok=false for a blank or comment line.
func parseEnvLine(line string) (envEntry, bool, error) {
	s := strings.TrimLeft(line, " \t")
	if s == "" || s[0] == '#' {
		return envEntry{}, false, nil
	}
	if rest, ok := strings.CutPrefix(s, "export"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
		s = strings.TrimLeft(rest, " \t")
	}
	i := 0
	for i < len(s) && envNameChar(s[i]) {
		i++
	}
	if i == 0 {
		return envEntry{}, false, fmt.Errorf("%w: expected a variable name", errSyntax)
	}
	name := s[:i]
	s = strings.TrimLeft(s[i:], " \t")
	if s == "" || s[0] != '=' {
		return envEntry{}, false, fmt.Errorf("%w: expected = after the name %q", errSyntax, name)
	}
	s = strings.TrimLeft(s[1:], " \t")
	var value, rest string
	switch {
	case s == "":
	case s[0] == '\'':
		j := strings.IndexByte(s[1:], '\'')
		if j < 0 {
			return envEntry{}, false, fmt.Errorf("%w: unterminated single quote in the value of %s", errSyntax, name)
		}
		value, rest = s[1:1+j], s[2+j:]
	case s[0] == '"':
		j := 1
		for ; j < len(s) && s[j] != '"'; j++ {
			if s[j] == '\\' {
				j++
			}
		}
		if j >= len(s) {
			return envEntry{}, false, fmt.Errorf("%w: unterminated double quote in the value of %s", errSyntax, name)
		}
		value = strings.ReplaceAll(strings.ReplaceAll(s[1:j], `\n`, "\n"), `\r`, "\r")
		rest = s[j+1:]
	default:
		if j := strings.IndexByte(s, '#'); j >= 0 {
			s = s[:j]
		}
		value = strings.TrimRight(s, " \t")
	}
	if rest = strings.TrimLeft(rest, " \t"); rest != "" && rest[0] != '#' {
		return envEntry{}, false, fmt.Errorf("%w: unexpected text after the closing quote of %s", errSyntax, name)
	}
	return envEntry{name: name, value: value}, true, nil
}

// envNameChar: the characters dotenv accepts in a name (\w . -).
func envNameChar(c byte) bool {
	return bareKeyChar(c) || c == '.'
}
