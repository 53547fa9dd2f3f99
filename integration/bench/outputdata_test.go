package bench

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// outputData appends the decoded bytes of an output event's data (an
// apitypes.Output: its "data" string, base64-decoded when "encoding" says
// so) to dst. It reads the one field it needs instead of running
// encoding/json over every 16 KiB piece of a flood; TestOutputData checks
// it against encoding/json.
func outputData(dst, event []byte) ([]byte, error) {
	const key = `"data":"`
	i := bytes.Index(event, []byte(key))
	if i < 0 {
		return dst, fmt.Errorf("output event without data: %.200s", event)
	}
	start := len(dst)
	dst, rest, err := appendJSONString(dst, event[i+len(key):])
	if err != nil {
		return dst, err
	}
	if bytes.Contains(rest, []byte(`"encoding":"base64"`)) {
		raw, err := base64.StdEncoding.AppendDecode(nil, dst[start:])
		if err != nil {
			return dst, err
		}
		dst = append(dst[:start], raw...)
	}
	return dst, nil
}

// appendJSONString decodes the JSON string body src (after its opening
// quote) onto dst and returns what follows the closing quote.
func appendJSONString(dst, src []byte) ([]byte, []byte, error) {
	for {
		q := bytes.IndexByte(src, '"')
		if q < 0 {
			return dst, nil, errors.New("unterminated JSON string")
		}
		b := bytes.IndexByte(src[:q], '\\')
		if b < 0 {
			return append(dst, src[:q]...), src[q+1:], nil
		}
		dst = append(dst, src[:b]...)
		src = src[b:]
		if len(src) < 2 {
			return dst, nil, errors.New("bad JSON escape")
		}
		switch c := src[1]; c {
		case '"', '\\', '/':
			dst, src = append(dst, c), src[2:]
		case 'b':
			dst, src = append(dst, '\b'), src[2:]
		case 'f':
			dst, src = append(dst, '\f'), src[2:]
		case 'n':
			dst, src = append(dst, '\n'), src[2:]
		case 'r':
			dst, src = append(dst, '\r'), src[2:]
		case 't':
			dst, src = append(dst, '\t'), src[2:]
		case 'u':
			r, n, err := jsonRune(src)
			if err != nil {
				return dst, nil, err
			}
			dst, src = utf8.AppendRune(dst, r), src[n:]
		default:
			return dst, nil, fmt.Errorf("bad JSON escape \\%c", c)
		}
	}
}

// jsonRune decodes \uXXXX, or a surrogate pair \uXXXX\uXXXX, at src.
func jsonRune(src []byte) (rune, int, error) {
	hex4 := func(b []byte) (rune, bool) {
		if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(b[2:6]), 16, 16)
		return rune(n), err == nil
	}
	r, ok := hex4(src)
	if !ok {
		return 0, 0, errors.New("bad \\u escape")
	}
	if utf16.IsSurrogate(r) {
		if r2, ok := hex4(src[6:]); ok {
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, 12, nil
			}
		}
		return utf8.RuneError, 6, nil
	}
	return r, 6, nil
}
