package api

import (
	"unicode/utf16"
	"unicode/utf8"

	"github.com/olivares-dev/olivares/shared/apierr"
)

// checkUTF8 refuses a JSON body that is not valid UTF-8, or that escapes a
// lone UTF-16 surrogate (\ud800 with no low half after it): encoding/json
// would replace either with U+FFFD without a word, so a run name or an
// input text would change silently (issue 16). The error names the byte
// offset in the body.
func checkUTF8(body []byte) error {
	if off := invalidUTF8At(body); off >= 0 {
		return apierr.BadRequest("invalid_utf8", "the request body is not valid UTF-8 at byte %d; names, input text and every other string must be UTF-8 (no lone \\u surrogate escapes)", off)
	}
	return nil
}

// invalidUTF8At returns the offset of the first invalid UTF-8 byte of b,
// or of the backslash of a \u escape of a lone surrogate inside a JSON
// string; -1 when there is none.
func invalidUTF8At(b []byte) int {
	inString := false
	for i := 0; i < len(b); {
		c := b[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return i
			}
			i += size
			continue
		}
		switch {
		case c == '"':
			inString = !inString
		case c == '\\' && inString:
			if i+1 < len(b) && b[i+1] == 'u' {
				r, ok := hex4(b, i+2)
				if ok && utf16.IsSurrogate(r) {
					// A high half followed by a low half is one rune.
					lo, lok := rune(0), false
					if r < 0xdc00 && i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
						lo, lok = hex4(b, i+8)
					}
					if !lok || utf16.DecodeRune(r, lo) == utf8.RuneError {
						return i
					}
					i += 12
					continue
				}
			}
			// Skip the escaped character; a non-ASCII one is checked as
			// UTF-8 by the loop.
			i++
			if i < len(b) && b[i] < utf8.RuneSelf {
				i++
			}
			continue
		}
		i++
	}
	return -1
}

// hex4 reads four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
