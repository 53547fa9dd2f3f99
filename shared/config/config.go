// Package config decodes the daemons' TOML files strictly: a syntax error, an
// unknown key or a value of the wrong type is an error that names the file,
// the line and the key.
//
// config only decodes. It never applies defaults or checks values; that is
// each config struct's CheckAndSetDefaults.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// ErrUnknownKey is wrapped by the *Error of every key in the file that has no
// field in the destination struct.
var ErrUnknownKey = errors.New("unknown key")

// Error is one problem in a config file. Decode joins several with
// errors.Join when there are several unknown keys.
type Error struct {
	File string // the name given to Decode, or the path given to DecodeFile
	Line int    // 1-based; 0 when not known
	Col  int    // 1-based; set for syntax errors only
	// Key is the full dotted key as TOML spells it (tunnel.transport,
	// tunnel."odd key"); empty for syntax errors.
	Key string
	Msg string // what is wrong, without the position
	Err error  // ErrUnknownKey, or the error from the TOML decoder

	syntax bool
}

// Error formats the problem as
//
//	agent.toml:3:7: expected a top-level item to end with a newline, comment, or EOF, but got 'x' instead
//	config agent.toml:7: unknown key "tunnel.transprot"
//	config agent.toml:4: key "port": incompatible types: TOML value has type string; destination has type integer
//
// A syntax error takes the compiler's file:line:col form that editors jump
// to. A key that itself contains a double quote is shown in backquotes.
func (e *Error) Error() string {
	var b strings.Builder
	if e.syntax {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
			if e.Col > 0 {
				fmt.Fprintf(&b, ":%d", e.Col)
			}
		}
		b.WriteString(": ")
		b.WriteString(e.Msg)
		return b.String()
	}
	b.WriteString("config ")
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	switch {
	case errors.Is(e.Err, ErrUnknownKey):
		fmt.Fprintf(&b, "unknown key %s", quoteKey(e.Key))
	case e.Key != "":
		fmt.Fprintf(&b, "key %s: %s", quoteKey(e.Key), e.Msg)
	default:
		b.WriteString(e.Msg)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

func quoteKey(k string) string {
	if strings.ContainsRune(k, '"') && strconv.CanBackquote(k) {
		return "`" + k + "`"
	}
	return strconv.Quote(k)
}

// DecodeFile decodes the TOML file at path into v, a pointer to a struct with
// `toml:"..."` tags, as strictly as Decode.
func DecodeFile(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return Decode(path, data, v)
}

// Decode decodes the TOML document data into v, a pointer to a struct with
// `toml:"..."` tags, strictly; name is the file name used in messages.
//
// The error is a *Error for a syntax error or a type mismatch (the decoder
// stops at the first), or the errors.Join of one *Error per unknown key, in
// file order. A key under an unknown table is not reported on its own: the
// table is. v may be partly filled when Decode fails.
func Decode(name string, data []byte, v any) error {
	src := string(data)
	// Parse once into nothing, so that every error of this pass is a syntax
	// error and every error of the next is a decoding one: both come back
	// as toml.ParseError.
	if _, err := toml.Decode(src, &struct{}{}); err != nil {
		return syntaxError(name, err)
	}
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(v)
	if err != nil {
		return decodeError(name, data, err)
	}
	undecoded := md.Undecoded()
	if len(undecoded) == 0 {
		return nil
	}
	return unknownKeys(name, data, md.Keys(), undecoded)
}

func syntaxError(name string, err error) error {
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		return &Error{File: name, Msg: err.Error(), Err: err, syntax: true}
	}
	return &Error{
		File:   name,
		Line:   pe.Position.Line,
		Col:    pe.Position.Col,
		Msg:    pe.Message,
		Err:    err,
		syntax: true,
	}
}

// lastKeyRe matches the decoder's type errors, which are plain errors:
//
//	toml: line 4 (last key "port"): incompatible types: ...
//
// TestDecodeTypeErrorFormat pins this against the toml version in go.mod.
var lastKeyRe = regexp.MustCompile(`(?s)^toml: (?:line (\d+) )?\(last key ("(?:[^"\\]|\\.)*")\): (.*)$`)

func decodeError(name string, data []byte, err error) error {
	e := &Error{File: name, Msg: err.Error(), Err: err}
	var pe toml.ParseError
	if errors.As(err, &pe) {
		// An UnmarshalText failure, such as a bad Duration.
		e.Line, e.Key, e.Msg = pe.Position.Line, pe.LastKey, pe.Message
	} else if m := lastKeyRe.FindStringSubmatch(err.Error()); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Key, _ = strconv.Unquote(m[2])
		e.Msg = m[3]
	} else {
		e.Msg = strings.TrimPrefix(e.Msg, "toml: ")
	}
	if e.Line == 0 && e.Key != "" {
		if lines := scanKeys(data)[e.Key]; len(lines) > 0 {
			e.Line = lines[len(lines)-1]
		}
	}
	return e
}

// unknownKeys builds one error per undecoded key. all is every key of the
// document in order (md.Keys), which is what lets the n-th occurrence of a
// key be matched to the n-th line the scanner found for it: a key inside
// [[array]] tables occurs once per element.
func unknownKeys(name string, data []byte, all, undecoded []toml.Key) error {
	count := make(map[string]int, len(all))
	for _, k := range all {
		count[k.String()]++
	}
	unknown := make(map[string]bool, len(undecoded))
	for _, k := range undecoded {
		unknown[k.String()] = true
	}
	lines := scanKeys(data)
	seen := make(map[string]int)
	var errs []error
	for _, k := range undecoded {
		ks := k.String()
		n := seen[ks]
		seen[ks]++
		if underUnknown(k, unknown) {
			continue
		}
		e := &Error{File: name, Key: ks, Msg: "unknown key", Err: ErrUnknownKey}
		// Trust the scanner only when it found this key exactly as often as
		// the decoder did; a wrong line is worse than none.
		if l := lines[ks]; len(l) == count[ks] && n < len(l) {
			e.Line = l[n]
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// underUnknown reports whether a proper prefix of k is itself unknown.
func underUnknown(k toml.Key, unknown map[string]bool) bool {
	for i := 1; i < len(k); i++ {
		if unknown[k[:i].String()] {
			return true
		}
	}
	return false
}

// Load is the first two steps of every daemon's config: defaults, then the
// file at path merged over them ("" = no file). Flags come after, in the
// command.
func Load[T any](path string, defaults T) (T, error) {
	if path == "" {
		return defaults, nil
	}
	if err := DecodeFile(path, &defaults); err != nil {
		var zero T
		return zero, err
	}
	return defaults, nil
}
