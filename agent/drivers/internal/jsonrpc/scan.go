package jsonrpc

import (
	"bytes"
	"encoding/json"
)

// Head is what a line says about itself before its body is decoded: its
// method and whether it carries an id. Peek finds it by scanning the
// top-level members and stepping over their values without decoding them,
// so that the many lines a driver does not want (Codex's
// item/agentMessage/delta, 16 KiB each under load) cost a byte scan, not a
// decode (issue 18: the full decode of every delta was a quarter of the
// agent's CPU).
type Head struct {
	// Method is the method's text (it aliases the line), nil for none.
	Method []byte
	// Escaped: the method is written with escapes, so Method is not its
	// text; decode the line with Parse to learn it.
	Escaped bool
	// HasID: the line carries a non-null id (a request or a response).
	HasID bool
}

// Peek reads the head of one line without decoding it. ok is false when
// the line is not a JSON object as far as the scan can tell; a line Peek
// accepts may still be malformed inside a value, which Parse finds.
func Peek(line []byte) (h Head, ok bool) {
	ok = members(line, func(key, val []byte) bool {
		switch string(key) {
		case "method":
			if len(val) > 0 && val[0] == '"' {
				h.Method = val[1 : len(val)-1]
				h.Escaped = bytes.IndexByte(h.Method, '\\') >= 0
			}
		case "id":
			h.HasID = string(val) != "null"
		}
		return true
	})
	return h, ok
}

// members calls fn with each top-level member of the object in b, key
// without its quotes and value raw, until fn returns false. It reports
// whether b is an object as far as it scanned. Keys with escapes are
// passed raw (no tool writes them; Parse, which decodes, sees them right).
func members(b []byte, fn func(key, val []byte) bool) bool {
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

// Parse reads one line. ok is false when the line is not a JSON object.
// The raw members of m alias line: a caller that keeps one copies it.
func Parse(line []byte) (m Message, ok bool) {
	if !json.Valid(line) {
		return Message{}, false
	}
	var method, errRaw []byte
	ok = members(line, func(key, val []byte) bool {
		k := string(key)
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &s) != nil {
				return true
			}
			k = s
		}
		switch k {
		case "id":
			if !isNull(val) {
				m.ID = val
			}
		case "method":
			method = val
		case "params":
			m.Params = val
		case "result":
			m.Result = val
		case "error":
			errRaw = val
		}
		return true
	})
	if !ok {
		return Message{}, false
	}
	if method != nil {
		_ = json.Unmarshal(method, &m.Method)
	}
	if errRaw != nil && !isNull(errRaw) {
		m.HasError = true
		var body struct {
			Message json.RawMessage `json:"message"`
		}
		if json.Unmarshal(errRaw, &body) == nil {
			if json.Unmarshal(body.Message, &m.ErrorMessage) != nil {
				m.ErrorMessage = string(body.Message)
			}
		} else {
			m.ErrorMessage = string(errRaw)
		}
		if m.ErrorMessage == "" {
			m.ErrorMessage = "error without a message"
		}
	}
	return m, true
}
