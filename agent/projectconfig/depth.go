package projectconfig

import (
	"bytes"
	"fmt"
)

// MaxDepth is the deepest level a node may sit at; a deeper file is
// unreadable (R-PCS-5).
const MaxDepth = 64

// depthError is a reader error with the line it was found on.
type depthError struct {
	err   error // errTooDeep or errSyntax
	line  int
	depth int // for errTooDeep: the first level seen above MaxDepth
	msg   string
}

func (e *depthError) Error() string {
	if e.err == errTooDeep {
		return fmt.Sprintf("line %d: %v (level %d)", e.line, errTooDeep, e.depth)
	}
	return fmt.Sprintf("line %d: %s", e.line, e.msg)
}

func (e *depthError) Unwrap() error { return e.err }

func lineAt(data []byte, pos int) int {
	if pos > len(data) {
		pos = len(data)
	}
	return 1 + bytes.Count(data[:pos], []byte{'\n'})
}

// jsonDepth returns the depth of a JSON document by R-PCS-20: a node's level
// is the number of object keys and array indices from the root to it, so
// the level of any value (or key) is the number of containers open when its
// first byte is read. It works on the bytes alone, keeps no stack and stops
// at the first level above MaxDepth, so hostile nesting costs one linear
// pass and never reaches a decoder. It checks only what it needs to count
// (strings terminated, brackets balanced); the decoder that runs afterwards
// checks the rest.
func jsonDepth(data []byte) (int, error) {
	depth, open := 0, 0
	fail := func(pos int, msg string) (int, error) {
		return depth, &depthError{err: errSyntax, line: lineAt(data, pos), msg: msg}
	}
	node := func(pos int) error {
		if open > depth {
			depth = open
		}
		if open > MaxDepth {
			return &depthError{err: errTooDeep, line: lineAt(data, pos), depth: open}
		}
		return nil
	}
	for i := 0; i < len(data); {
		switch c := data[i]; c {
		case ' ', '\t', '\n', '\r', ',', ':':
			i++
		case '[', '{':
			if err := node(i); err != nil {
				return depth, err
			}
			open++
			i++
		case ']', '}':
			if open == 0 {
				return fail(i, fmt.Sprintf("unexpected %q", c))
			}
			open--
			i++
		case '"':
			if err := node(i); err != nil {
				return depth, err
			}
			start := i
			for i++; ; i++ {
				if i >= len(data) || data[i] == '\n' {
					return fail(start, "unterminated string")
				}
				if data[i] == '\\' {
					i++
					continue
				}
				if data[i] == '"' {
					i++
					break
				}
			}
		default:
			if err := node(i); err != nil {
				return depth, err
			}
			for i < len(data) && !jsonDelim(data[i]) {
				i++
			}
		}
	}
	if open != 0 {
		return fail(len(data), "unexpected end of input")
	}
	return depth, nil
}

func jsonDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ':', '[', ']', '{', '}', '"':
		return true
	}
	return false
}

// tomlDepth returns the depth of a TOML document by R-PCS-20: a node's level
// is its table header's segments (counted twice once the file has any
// [[array]] header, R-PCS-7), plus the dotted-key segments of its key/value
// line, plus one per inline-table key segment or array index inside the
// value. It tokenizes just enough to count (strings, comments, brackets,
// dotted keys), recursing at most MaxDepth+1 deep because it stops at the
// first level that exceeds MaxDepth even when counted once; BurntSushi/toml
// decodes the document only after this returns without error.
func tomlDepth(data []byte) (int, error) {
	s := tomlScanner{data: data}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		s.pos = 3
	}
	if err := s.document(); err != nil {
		if s.aot {
			return s.deep2, err
		}
		return s.deep1, err
	}
	if s.aot {
		if s.deep2 > MaxDepth {
			return s.deep2, &depthError{err: errTooDeep, line: lineAt(data, s.pos2), depth: s.deep2}
		}
		return s.deep2, nil
	}
	return s.deep1, nil
}

type tomlScanner struct {
	data []byte
	pos  int
	hseg int  // segments of the current table header
	aot  bool // the file has a [[...]] header so far

	deep1, deep2 int // deepest level counting header segments once, twice
	pos2         int // where deep2 was reached
}

func (s *tomlScanner) fail(msg string) error {
	return &depthError{err: errSyntax, line: lineAt(s.data, s.pos), msg: msg}
}

// node records a node at rest levels below the current header.
func (s *tomlScanner) node(rest int) error {
	l1, l2 := s.hseg+rest, 2*s.hseg+rest
	if l1 > s.deep1 {
		s.deep1 = l1
	}
	if l2 > s.deep2 {
		s.deep2, s.pos2 = l2, s.pos
	}
	switch {
	case l1 > MaxDepth:
		return &depthError{err: errTooDeep, line: lineAt(s.data, s.pos), depth: l1}
	case s.aot && l2 > MaxDepth:
		return &depthError{err: errTooDeep, line: lineAt(s.data, s.pos), depth: l2}
	}
	return nil
}

func (s *tomlScanner) eof() bool { return s.pos >= len(s.data) }
func (s *tomlScanner) peek() byte {
	if s.eof() {
		return 0
	}
	return s.data[s.pos]
}

func (s *tomlScanner) skipSpace() {
	for !s.eof() && (s.data[s.pos] == ' ' || s.data[s.pos] == '\t') {
		s.pos++
	}
}

func (s *tomlScanner) skipComment() {
	if s.peek() != '#' {
		return
	}
	for !s.eof() && s.data[s.pos] != '\n' && s.data[s.pos] != '\r' {
		s.pos++
	}
}

// skipBlank skips spaces, newlines and comments: between top-level items,
// inside arrays and (TOML 1.1) inside inline tables.
func (s *tomlScanner) skipBlank() {
	for !s.eof() {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		case '#':
			s.skipComment()
		default:
			return
		}
	}
}

// endOfLine accepts spaces, a comment, then a newline or the end.
func (s *tomlScanner) endOfLine() error {
	s.skipSpace()
	s.skipComment()
	if s.eof() || s.data[s.pos] == '\n' || s.data[s.pos] == '\r' {
		return nil
	}
	return s.fail(fmt.Sprintf("unexpected %q after a value or header", s.data[s.pos]))
}

func (s *tomlScanner) document() error {
	for {
		s.skipBlank()
		if s.eof() {
			return nil
		}
		if s.data[s.pos] == '[' {
			if err := s.header(); err != nil {
				return err
			}
		} else if err := s.keyValue(0); err != nil {
			return err
		}
		if err := s.endOfLine(); err != nil {
			return err
		}
	}
}

func (s *tomlScanner) header() error {
	s.pos++ // [
	double := s.peek() == '['
	if double {
		s.pos++
		s.aot = true
	}
	s.skipSpace()
	n, err := s.dottedKey()
	if err != nil {
		return err
	}
	s.skipSpace()
	closing := "]"
	if double {
		closing = "]]"
	}
	if !bytes.HasPrefix(s.data[s.pos:], []byte(closing)) {
		return s.fail("expected " + closing + " to close the table header")
	}
	s.pos += len(closing)
	s.hseg = n
	return s.node(0)
}

// keyValue reads `key.path = value` whose key sits rest levels below the
// current header.
func (s *tomlScanner) keyValue(rest int) error {
	n, err := s.dottedKey()
	if err != nil {
		return err
	}
	if err := s.node(rest + n); err != nil {
		return err
	}
	s.skipSpace()
	if s.peek() != '=' {
		return s.fail("expected = after a key")
	}
	s.pos++
	s.skipSpace()
	return s.value(rest + n)
}

// dottedKey counts the segments of a (possibly dotted, possibly quoted) key.
func (s *tomlScanner) dottedKey() (int, error) {
	n := 0
	for {
		s.skipSpace()
		switch c := s.peek(); {
		case c == '"' || c == '\'':
			if err := s.singleLineString(c); err != nil {
				return n, err
			}
		case bareKeyChar(c):
			for !s.eof() && bareKeyChar(s.data[s.pos]) {
				s.pos++
			}
		default:
			return n, s.fail("expected a key")
		}
		n++
		s.skipSpace()
		if s.peek() != '.' {
			return n, nil
		}
		s.pos++
	}
}

func bareKeyChar(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// value reads the value of a node at level lvl (below the header).
func (s *tomlScanner) value(lvl int) error {
	switch c := s.peek(); c {
	case '"', '\'':
		if bytes.HasPrefix(s.data[s.pos:], []byte{c, c, c}) {
			return s.multiLineString(c)
		}
		return s.singleLineString(c)
	case '[':
		s.pos++
		for {
			s.skipBlank()
			if s.peek() == ']' {
				s.pos++
				return nil
			}
			if err := s.node(lvl + 1); err != nil {
				return err
			}
			if err := s.value(lvl + 1); err != nil {
				return err
			}
			s.skipBlank()
			switch s.peek() {
			case ',':
				s.pos++
			case ']':
				s.pos++
				return nil
			default:
				return s.fail("expected , or ] in an array")
			}
		}
	case '{':
		s.pos++
		for {
			s.skipBlank()
			if s.peek() == '}' {
				s.pos++
				return nil
			}
			if err := s.keyValue(lvl); err != nil {
				return err
			}
			s.skipBlank()
			switch s.peek() {
			case ',':
				s.pos++
			case '}':
				s.pos++
				return nil
			default:
				return s.fail("expected , or } in an inline table")
			}
		}
	}
	return s.scalar()
}

// scalar skips a bare value: number, boolean, inf/nan or date-time (whose
// date and time may be separated by one space).
func (s *tomlScanner) scalar() error {
	start := s.pos
	for {
		for !s.eof() && !scalarEnd(s.data[s.pos]) {
			s.pos++
		}
		tok := s.data[start:s.pos]
		if len(tok) == 10 && tok[4] == '-' && tok[7] == '-' &&
			s.pos+1 < len(s.data) && s.data[s.pos] == ' ' && isDigit(s.data[s.pos+1]) {
			s.pos++ // 1979-05-27 07:32:00
			continue
		}
		break
	}
	if s.pos == start {
		return s.fail("expected a value")
	}
	return nil
}

func scalarEnd(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ']', '}', '#', '[', '{', '"', '\'', '=':
		return true
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (s *tomlScanner) singleLineString(q byte) error {
	start := s.pos
	for s.pos++; ; s.pos++ {
		if s.eof() || s.data[s.pos] == '\n' {
			s.pos = start
			return s.fail("unterminated string")
		}
		switch s.data[s.pos] {
		case '\\':
			if q == '"' {
				s.pos++
			}
		case q:
			s.pos++
			return nil
		}
	}
}

// multiLineString skips a multi-line string (three double or three single
// quotes), whose closing delimiter may be preceded by one or two more quotes
// that belong to the content.
func (s *tomlScanner) multiLineString(q byte) error {
	start := s.pos
	for s.pos += 3; !s.eof(); s.pos++ {
		switch s.data[s.pos] {
		case '\\':
			if q == '"' {
				s.pos++
			}
		case q:
			n := 0
			for !s.eof() && s.data[s.pos] == q && n < 5 {
				s.pos++
				n++
			}
			if n >= 3 {
				return nil
			}
			s.pos--
		}
	}
	s.pos = start
	return s.fail("unterminated multi-line string")
}
