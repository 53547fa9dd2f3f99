package transcript

import "encoding/json"

// topString returns the value of key among the top-level members of the
// JSON object in b, when that value is a string without escapes. It scans
// only as far as the key, without allocating, so that the records and
// frames nobody needs (api-request blobs, stream deltas) are passed over at
// the cost of a byte scan instead of a decode. ok is false when b is not an
// object, the key is absent or its value is not a plain string.
func topString(b []byte, key string) (val []byte, ok bool) { return topStringN(b, key, -1) }

// topStringN is topString looking at no more than the first n members (all
// of them when n < 0): a frame's kind sits in its first members, and a
// frame that is not wanted is then left after a few bytes.
func topStringN(b []byte, key string, n int) (val []byte, ok bool) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i++
	for ; n != 0; n-- {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		ks0 := i + 1
		ke, esc := scanString(b, i)
		if ke < 0 {
			return nil, false
		}
		k := b[ks0:ke]
		i = skipWS(b, ke+1)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipWS(b, i+1)
		match := string(k) == key
		if esc {
			// A key written with escapes (no tool does): decode it.
			var ks string
			match = json.Unmarshal(b[ks0-1:ke+1], &ks) == nil && ks == key
		}
		if match {
			if i < len(b) && b[i] == '"' {
				ve, vesc := scanString(b, i)
				if ve < 0 || vesc {
					return nil, false
				}
				return b[i+1 : ve], true
			}
			return nil, false
		}
		i = skipValue(b, i)
		if i < 0 {
			return nil, false
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i++
		default: // '}' or garbage: the key is not there
			return nil, false
		}
	}
	return nil, false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the index of the closing quote of the string that
// opens at b[i], and whether it holds an escape; -1 when it does not end.
func scanString(b []byte, i int) (end int, esc bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			esc = true
			j++
		case '"':
			return j, esc
		}
	}
	return -1, esc
}

// skipValue returns the index just past the JSON value at b[i], or -1. It
// checks nesting but not the grammar of literals: the caller decodes the
// records it keeps with encoding/json, which does.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		e, _ := scanString(b, i)
		if e < 0 {
			return -1
		}
		return e + 1
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e, _ := scanString(b, j)
				if e < 0 {
					return -1
				}
				j = e
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
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// firstMember returns the key of the first member of the JSON object in b
// and, when it is a plain string, its value.
func firstMember(b []byte) (key, val []byte, ok bool) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, nil, false
	}
	i = skipWS(b, i+1)
	if i >= len(b) || b[i] != '"' {
		return nil, nil, false
	}
	ke, _ := scanString(b, i)
	if ke < 0 {
		return nil, nil, false
	}
	key = b[i+1 : ke]
	i = skipWS(b, ke+1)
	if i >= len(b) || b[i] != ':' {
		return nil, nil, false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '"' {
		if ve, esc := scanString(b, i); ve >= 0 && !esc {
			val = b[i+1 : ve]
		}
	}
	return key, val, true
}
