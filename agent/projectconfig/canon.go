package projectconfig

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// envNames is the exact part of the environment-name list (R-PCS-4).
var envNames = map[string]bool{
	"NODE_OPTIONS": true, "NODE_EXTRA_CA_CERTS": true, "NODE_TLS_REJECT_UNAUTHORIZED": true,
	"LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "LD_AUDIT": true, "DYLD_INSERT_LIBRARIES": true,
	"BASH_ENV": true, "PATH": true, "PYTHONPATH": true, "GIT_SSH_COMMAND": true,
	"GIT_EXTERNAL_DIFF": true, "SSL_CERT_FILE": true, "CLAUDE_CODE_SHELL_PREFIX": true,
	"ANTHROPIC_CUSTOM_HEADERS": true,
}

// EnvListed reports whether an environment variable name is on the list of
// R-PCS-4, in ASCII case-insensitively (R-PCS-22): the exact names, any
// name starting with AWS_ENDPOINT_URL or ending in _BASE_URL, _API_BASE,
// _ENDPOINT or _PROXY, but never NO_PROXY, which only narrows a proxy.
func EnvListed(name string) bool {
	u := asciiUpper(name)
	switch {
	case u == "NO_PROXY":
		return false
	case envNames[u], strings.HasPrefix(u, "AWS_ENDPOINT_URL"):
		return true
	}
	for _, suffix := range []string{"_BASE_URL", "_API_BASE", "_ENDPOINT", "_PROXY"} {
		if strings.HasSuffix(u, suffix) {
			return true
		}
	}
	return false
}

// asciiUpper folds a-z only: a Unicode fold would let "ſ" or the Kelvin
// sign stand in for ASCII letters no tool treats as equal.
func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// empty reports a value that configures nothing (R-PCS-2): {}, [], "",
// false, null.
func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case bool:
		return !v
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	case []map[string]any:
		return len(v) == 0
	}
	return false
}

// keyPath joins key segments; see the package doc for the quoting.
func keyPath(segs ...string) string {
	var b []byte
	for i, s := range segs {
		if i > 0 {
			b = append(b, '.')
		}
		if bareSegment(s) {
			b = append(b, s...)
		} else {
			b = appendString(b, s)
		}
	}
	return string(b)
}

func bareSegment(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !bareKeyChar(s[i]) {
			return false
		}
	}
	return true
}

// canonical is the hash form of a value (package doc, R-PCS-21).
func canonical(v any) []byte { return appendValue(nil, v, false) }

// display is the output form: valid JSON, URL passwords masked (R-PCS-25).
func display(v any) json.RawMessage { return appendValue(nil, v, true) }

// appendValue encodes the values encoding/json (with UseNumber),
// BurntSushi/toml and parseDotenv produce.
func appendValue(b []byte, v any, out bool) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, v)
	case string:
		if out {
			v = MaskURLPasswords(v)
		}
		return appendString(b, v)
	case json.Number:
		return append(b, v...)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case float64:
		return appendFloat(b, v, out)
	case time.Time:
		t := tomlTime(v)
		if out {
			return appendString(b, t)
		}
		return append(b, t...)
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, e, out)
		}
		return append(b, ']')
	case []map[string]any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, e, out)
		}
		return append(b, ']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendValue(b, v[k], out)
		}
		return append(b, '}')
	}
	// The decoders above produce no other type; a future one is still
	// encoded deterministically rather than dropped from the hash.
	raw, err := json.Marshal(v)
	if err != nil {
		return appendString(b, "<unencodable>")
	}
	return append(b, raw...)
}

// appendFloat writes a TOML float so that it never reads as an integer;
// nan and ±inf are bare in the hash form and strings in the output.
func appendFloat(b []byte, f float64, out bool) []byte {
	var s string
	switch {
	case math.IsNaN(f):
		s = "nan"
	case math.IsInf(f, 1):
		s = "+inf"
	case math.IsInf(f, -1):
		s = "-inf"
	default:
		n := len(b)
		b = strconv.AppendFloat(b, f, 'g', -1, 64)
		if !strings.ContainsAny(string(b[n:]), ".e") {
			b = append(b, ".0"...)
		}
		return b
	}
	if out {
		return appendString(b, s)
	}
	return append(b, s...)
}

// tomlTime writes a TOML date-time in RFC 3339 form, keeping the local
// kinds (BurntSushi marks them with named fixed zones) apart.
func tomlTime(t time.Time) string {
	switch t.Location().String() {
	case "datetime-local":
		return t.Format("2006-01-02T15:04:05.999999999")
	case "date-local":
		return t.Format("2006-01-02")
	case "time-local":
		return t.Format("15:04:05.999999999")
	}
	return t.Format(time.RFC3339Nano)
}

// appendString writes a JSON string, escaping only what JSON requires. The
// form is fixed here rather than taken from encoding/json so that a Go
// upgrade can never change a stored approval's hash.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"', c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigit[c>>4], hexDigit[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

const hexDigit = "0123456789abcdef"

// MaskURLPasswords replaces the password of the userinfo of every URL in s
// (scheme://user:password@host) with *** (R-PCS-25). It finds URLs anywhere
// in the string, so a command line or a proxy setting is masked too. The
// user part is kept; a URL without a password is unchanged.
func MaskURLPasswords(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	last := 0
	for i := 0; ; {
		j := strings.Index(s[i:], "://")
		if j < 0 {
			break
		}
		j += i
		if !hasScheme(s[:j]) {
			i = j + 3
			continue
		}
		start := j + 3
		end := start
		for end < len(s) && !authorityEnd(s[end]) {
			end++
		}
		if at := strings.LastIndexByte(s[start:end], '@'); at >= 0 {
			userinfo := s[start : start+at]
			if colon := strings.IndexByte(userinfo, ':'); colon >= 0 && colon+1 < len(userinfo) {
				b.WriteString(s[last : start+colon+1])
				b.WriteString("***")
				last = start + at
			}
		}
		i = end
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// hasScheme reports whether prefix ends in a URL scheme (ALPHA *( ALPHA /
// DIGIT / "+" / "-" / "." )).
func hasScheme(prefix string) bool {
	k := len(prefix)
	for k > 0 {
		c := prefix[k-1]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || c == '+' || c == '-' || c == '.' {
			k--
			continue
		}
		break
	}
	for ; k < len(prefix); k++ {
		if c := prefix[k]; c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			return true
		}
	}
	return false
}

func authorityEnd(c byte) bool {
	switch c {
	case '/', '?', '#', ' ', '\t', '\n', '\r', '"', '\'', '`', '<', '>', '\\':
		return true
	}
	return false
}
