// Package jsonscan steps over the top-level members of a JSON object
// without decoding their values: the drivers' way to learn what a line is
// (a method, a type) before deciding whether it is worth a decode. It sits
// on the output hot path, so it allocates nothing and jumps over strings
// with bytes.IndexByte.
package jsonscan

import "bytes"

// Members calls fn with each top-level member of the object in b, key
// without its quotes and value raw, until fn returns false. It reports
// whether b is an object as far as it scanned. Keys with escapes are
// passed raw (no tool writes them; Parse, which decodes, sees them right).
func Members(b []byte, fn func(key, val []byte) bool) bool {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		ke := skipString(b, i)
		if ke < 0 {
			return false
		}
		key := b[i+1 : ke-1]
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipWS(b, i+1)
		ve := skipValue(b, i)
		if ve < 0 {
			return false
		}
		if !fn(key, b[i:ve]) {
			return true
		}
		i = skipWS(b, ve)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return true
		default:
			return false
		}
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string that opens at b[i],
// or -1. It jumps from quote to quote (bytes.IndexByte), so a long string
// costs a memchr, not a loop over its bytes.
func skipString(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
}

// skipValue returns the index just past the JSON value at b[i], or -1. It
// checks the nesting, not the grammar of numbers and literals: a value a
// driver wants is decoded later, and that decode checks it.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := skipString(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if j == i {
				return -1
			}
			return j
		}
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// String returns the value of the top-level member key when it is a
// string: its text, aliasing b, and whether it holds escapes (then the
// text is raw). ok is false when b is not an object or has no such string
// member.
func String(b []byte, key string) (val []byte, escaped, ok bool) {
	Members(b, func(k, v []byte) bool {
		if string(k) != key {
			return true
		}
		if len(v) > 0 && v[0] == '"' {
			val, ok = v[1:len(v)-1], true
			escaped = bytes.IndexByte(val, '\\') >= 0
		}
		return false
	})
	return val, escaped, ok
}
