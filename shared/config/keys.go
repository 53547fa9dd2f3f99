package config

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// scanKeys finds where src defines its keys, because toml.MetaData knows the
// keys but not their lines. It maps each full dotted key, spelled as
// toml.Key.String spells it, to the lines that define it in file order: one
// per [table] or [[array]] header, key/value pair and key inside an inline
// table (whose keys extend the key of the table or array they sit in, as in
// the decoder).
//
// src must already have parsed: scanKeys is a position finder, not a
// validator. On input it does not understand it stops and returns what it
// has rather than guess, and it never loops without consuming input.
func scanKeys(src []byte) map[string][]int {
	s := &keyScanner{src: src, line: 1, out: make(map[string][]int)}
	s.document()
	return s.out
}

type keyScanner struct {
	src  []byte
	i    int
	line int
	out  map[string][]int
}

func (s *keyScanner) add(key []string, line int) {
	k := toml.Key(key).String()
	s.out[k] = append(s.out[k], line)
}

func (s *keyScanner) document() {
	var table []string
	for {
		s.skipBlank(true)
		if s.eof() {
			return
		}
		line := s.line
		if s.src[s.i] == '[' {
			array := s.has("[[")
			if array {
				s.i += 2
			} else {
				s.i++
			}
			key, ok := s.key()
			if !ok {
				return
			}
			s.skipBlank(false)
			if !s.eat("]") || array && !s.eat("]") {
				return
			}
			table = key
			s.add(table, line)
			continue
		}
		key, ok := s.key()
		if !ok {
			return
		}
		full := append(append([]string(nil), table...), key...)
		s.skipBlank(false)
		if !s.eat("=") {
			return
		}
		s.add(full, line)
		if !s.value(full) {
			return
		}
	}
}

// key reads a dotted key: bare, "basic" or 'literal' parts joined by dots,
// with blanks allowed around the dots.
func (s *keyScanner) key() ([]string, bool) {
	var parts []string
	for {
		s.skipBlank(false)
		part, ok := s.keyPart()
		if !ok {
			return nil, false
		}
		parts = append(parts, part)
		s.skipBlank(false)
		if !s.eat(".") {
			return parts, true
		}
	}
}

func (s *keyScanner) keyPart() (string, bool) {
	if s.eof() {
		return "", false
	}
	switch s.src[s.i] {
	case '"':
		return s.basicString()
	case '\'':
		return s.literalString()
	}
	start := s.i
	for !s.eof() && isBare(s.src[s.i]) {
		s.i++
	}
	return string(s.src[start:s.i]), s.i > start
}

func isBare(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// value skips one value. Keys of inline tables, also those inside arrays,
// are recorded under key.
func (s *keyScanner) value(key []string) bool {
	s.skipBlank(false)
	if s.eof() {
		return false
	}
	switch {
	case s.has(`"""`):
		return s.multiline(`"""`, true)
	case s.has(`'''`):
		return s.multiline(`'''`, false)
	case s.src[s.i] == '"':
		_, ok := s.basicString()
		return ok
	case s.src[s.i] == '\'':
		_, ok := s.literalString()
		return ok
	case s.src[s.i] == '[':
		s.i++
		for {
			s.skipBlank(true)
			switch {
			case s.eof():
				return false
			case s.eat("]"):
				return true
			case s.eat(","):
			case !s.value(key):
				return false
			}
		}
	case s.src[s.i] == '{':
		s.i++
		for {
			// TOML 1.1 allows newlines and comments in inline tables.
			s.skipBlank(true)
			switch {
			case s.eof():
				return false
			case s.eat("}"):
				return true
			case s.eat(","):
			default:
				line := s.line
				k, ok := s.key()
				if !ok {
					return false
				}
				s.skipBlank(false)
				if !s.eat("=") {
					return false
				}
				full := append(append([]string(nil), key...), k...)
				s.add(full, line)
				if !s.value(full) {
					return false
				}
			}
		}
	}
	// A number, boolean or date-time: runs to the next delimiter. Local
	// date-times may contain a space, so blanks do not end it.
	start := s.i
	for !s.eof() && !strings.ContainsRune(",]}#\n", rune(s.src[s.i])) {
		s.i++
	}
	return s.i > start
}

// basicString reads a one-line "..." string and returns it unescaped.
func (s *keyScanner) basicString() (string, bool) {
	s.i++ // opening quote
	var b strings.Builder
	for !s.eof() {
		c := s.src[s.i]
		switch c {
		case '"':
			s.i++
			return b.String(), true
		case '\n':
			return "", false
		case '\\':
			s.i++
			if !s.escape(&b) {
				return "", false
			}
		default:
			b.WriteByte(c)
			s.i++
		}
	}
	return "", false
}

var (
	// \e and \xHH are TOML 1.1, which the decoder accepts.
	simpleEscapes = map[byte]byte{'b': '\b', 't': '\t', 'n': '\n', 'f': '\f', 'r': '\r', 'e': 0x1b, '"': '"', '\\': '\\'}
	hexEscapes    = map[byte]int{'x': 2, 'u': 4, 'U': 8}
)

// escape decodes the escape sequence after a backslash.
func (s *keyScanner) escape(b *strings.Builder) bool {
	if s.eof() {
		return false
	}
	c := s.src[s.i]
	s.i++
	if r, ok := simpleEscapes[c]; ok {
		b.WriteByte(r)
		return true
	}
	n := hexEscapes[c]
	if n == 0 || s.i+n > len(s.src) {
		return false
	}
	r, err := strconv.ParseUint(string(s.src[s.i:s.i+n]), 16, 32)
	if err != nil || !utf8.ValidRune(rune(r)) {
		return false
	}
	s.i += n
	b.WriteRune(rune(r))
	return true
}

func (s *keyScanner) literalString() (string, bool) {
	s.i++ // opening quote
	start := s.i
	for !s.eof() {
		switch s.src[s.i] {
		case '\'':
			v := string(s.src[start:s.i])
			s.i++
			return v, true
		case '\n':
			return "", false
		}
		s.i++
	}
	return "", false
}

// multiline skips a multi-line string, basic or literal, counting its
// lines. Up to two quote characters may directly precede the closing
// delimiter and belong to the string.
func (s *keyScanner) multiline(delim string, escapes bool) bool {
	s.i += len(delim)
	for !s.eof() {
		switch {
		case escapes && s.src[s.i] == '\\':
			s.i++
			if !s.eof() && s.src[s.i] == '\n' {
				s.line++
			}
			s.i++
		case s.has(delim):
			s.i += len(delim)
			for k := 0; k < 2 && !s.eof() && s.src[s.i] == delim[0]; k++ {
				s.i++
			}
			return true
		default:
			if s.src[s.i] == '\n' {
				s.line++
			}
			s.i++
		}
	}
	return false
}

// skipBlank skips spaces, tabs and carriage returns, and also newlines and
// comments when newlines is set. A comment is always skipped up to, not past,
// its newline.
func (s *keyScanner) skipBlank(newlines bool) {
	for !s.eof() {
		switch s.src[s.i] {
		case ' ', '\t', '\r':
			s.i++
		case '\n':
			if !newlines {
				return
			}
			s.line++
			s.i++
		case '#':
			if !newlines {
				return
			}
			for !s.eof() && s.src[s.i] != '\n' {
				s.i++
			}
		default:
			return
		}
	}
}

func (s *keyScanner) eof() bool { return s.i >= len(s.src) }

func (s *keyScanner) has(p string) bool {
	return len(s.src)-s.i >= len(p) && string(s.src[s.i:s.i+len(p)]) == p
}

func (s *keyScanner) eat(p string) bool {
	if s.has(p) {
		s.i += len(p)
		return true
	}
	return false
}
