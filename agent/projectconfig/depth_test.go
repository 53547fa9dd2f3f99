package projectconfig

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func segments(prefix string, n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return strings.Join(s, ".")
}

func nestedInline(n int) string {
	s := "{}"
	for i := n; i > 1; i-- {
		s = fmt.Sprintf("{k%d = %s}", i, s)
	}
	return "k1 = " + s
}

func nestedArrays(n int) string {
	return strings.Repeat("[", n) + "1" + strings.Repeat("]", n)
}

// TestDepthVectors is the table of R-PCS-20, row by row.
func TestDepthVectors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		json  bool
		in    string
		depth int
		deep  bool
	}{
		{"toml 30-segment header above 35 nested inline tables", false,
			"[" + segments("s", 30) + "]\n" + nestedInline(35) + "\n", 65, true},
		{"toml same with 34 nested inline tables", false,
			"[" + segments("s", 30) + "]\n" + nestedInline(34) + "\n", 64, false},
		{"toml a.b.c = 1", false, "a.b.c = 1\n", 3, false},
		{"toml [[x]] and a 32-segment header then v = 1", false,
			"[[x]]\n[" + segments("s", 32) + "]\nv = 1\n", 65, true},
		{"toml [[x]] and a 31-segment header then v = 1", false,
			"[[x]]\n[" + segments("s", 31) + "]\nv = 1\n", 63, false},
		{"toml a = 64 nested arrays around 1", false, "a = " + nestedArrays(64) + "\n", 65, true},
		{"json 64 nested arrays around 1", true, nestedArrays(64), 64, false},
		{"json 65 nested arrays around 1", true, nestedArrays(65), 65, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			depthFn := tomlDepth
			if tt.json {
				depthFn = jsonDepth
			}
			got, err := depthFn([]byte(tt.in))
			if got != tt.depth {
				t.Errorf("depth: got %v, want %v", got, tt.depth)
			}
			if deep := errors.Is(err, errTooDeep); deep != tt.deep || (err != nil && !deep) {
				t.Errorf("error: got %v, want too deep %v", err, tt.deep)
			}
			// Through the readers too: too deep is unreadable (R-PCS-5).
			f := formatCodex
			if tt.json {
				f = formatMCP
				tt.in = `{"mcpServers": ` + tt.in + `}`
				if !tt.deep && tt.depth == 64 {
					return // one level more inside the object; the golden cases cover it
				}
			}
			_, reason, _ := readFormat(f, []byte(tt.in))
			if (reason == ReasonTooDeep) != tt.deep {
				t.Errorf("reason: got %q, want too deep %v", reason, tt.deep)
			}
		})
	}
}

// TestTOMLDepthCounting covers how each construct adds levels (R-PCS-6,
// R-PCS-7, R-PCS-20) and what the tokenizer must not count.
func TestTOMLDepthCounting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		depth int
	}{
		{"empty", "", 0},
		{"comment only", "# [[[[a]]]] {{{\n", 0},
		{"one key", "a = 1", 1},
		{"header alone", "[a.b.c]\n", 3},
		{"header then key", "[a.b]\nc = 1\n", 3},
		{"header with spaces and quotes", "[ a . \"b.c\" . 'd' ]\ne = 1\n", 4},
		{"dotted key with spaces", "a . b . c = 1\n", 3},
		{"inline table keys add", "a = {b = {c = 1}}\n", 3},
		{"dotted key in inline table", "a = {b.c.d = 1}\n", 4},
		{"array index adds", "a = [1]\n", 2},
		{"empty containers", "a = [[]]\nb = {}\n", 2},
		{"array of inline tables", "a = [{b = [1]}]\n", 4},
		{"aot header doubles", "[[a]]\nb = 1\n", 3},
		{"aot doubles headers before it", "[a.b.c]\n[[x]]\n", 6},
		{"aot nested header", "[[a.b]]\n", 4},
		{"brackets in strings", "a = \"[[[{{\"\nb = '[[['\n", 1},
		{"escaped quote in string", "a = \"x\\\"[[[\"\n", 1},
		{"multi-line basic with brackets", "a = \"\"\"\n[[[\n\\\"\"\"\n[ \"\"\"\nb = 1\n", 1},
		{"multi-line literal with quotes before the close", "a = '''x'''''\n", 1},
		{"multi-line basic with quotes before the close", "a = \"\"\"x\"\"\"\"\"\n", 1},
		{"comments inside an array", "a = [ # [[[\n 1, # ]\n [2],\n]\n", 3},
		{"multi-line inline table (TOML 1.1)", "a = {\n  b = [1], # c\n  d = 2,\n}\n", 3},
		{"date-time with a space", "a = 1979-05-27 07:32:00Z\nb = [1979-05-27 07:32:00]\n", 2},
		{"CRLF", "[a]\r\nb = [1]\r\n", 3},
		{"BOM", "\xef\xbb\xbfa.b = 1\n", 2},
		{"numbers and specials", "a = [1_000, 0x1f, -inf, nan, 1e5, true]\n", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tomlDepth([]byte(tt.in))
			if err != nil {
				t.Fatalf("error: got %v, want nil", err)
			}
			if got != tt.depth {
				t.Errorf("depth: got %v, want %v", got, tt.depth)
			}
		})
	}
}

func TestTOMLDepthSyntax(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"a = [1, 2\n",
		"a = {b = 1\n",
		"a = \"unterminated\n",
		"a = '''never closed\n",
		"[a\n",
		"[[a]\n",
		"a = 1 2\n",
		"= 1\n",
		"a 1\n",
		"a =\n",
		"a = [1 2]\n",
	} {
		if _, err := tomlDepth([]byte(in)); !errors.Is(err, errSyntax) {
			t.Errorf("%q: got %v, want a syntax error", in, err)
		}
	}
}

func TestJSONDepthCounting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		depth int
		ok    bool
	}{
		{`1`, 0, true},
		{`{}`, 0, true},
		{`{"a":1}`, 1, true},
		{`{"a":{}}`, 1, true},
		{`{"a":{"b":[1]}}`, 3, true},
		{`[[]]`, 1, true},
		{`{"[[[": "]]]{{"}`, 1, true},
		{`{"a\"[": "\\"}`, 1, true},
		{`]`, 0, false},
		{`[[1]`, 2, false},
		{`{"a": "x`, 1, false},
	}
	for _, tt := range tests {
		got, err := jsonDepth([]byte(tt.in))
		if got != tt.depth || (err == nil) != tt.ok {
			t.Errorf("%s: got %v, %v, want %v, ok %v", tt.in, got, err, tt.depth, tt.ok)
		}
	}
}

// TestDepthHostileNesting: a full 1 MiB of brackets stops at level 65
// without recursing past it or reaching a decoder (R-PCS-20).
func TestDepthHostileNesting(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		f    format
		in   string
	}{
		{"json arrays", formatMCP, strings.Repeat("[", MaxFileSize)},
		{"json objects", formatGemini, strings.Repeat(`{"a":`, MaxFileSize/5)},
		{"toml arrays", formatCodex, "a = " + strings.Repeat("[", MaxFileSize-4)},
		{"toml inline tables", formatCodex, "a = " + strings.Repeat("{b = ", (MaxFileSize-4)/5)},
		{"toml dotted key", formatCodex, strings.Repeat("a.", MaxFileSize/2-2) + "a = 1"},
		{"toml header", formatCodex, "[" + strings.Repeat("a.", MaxFileSize/2-2) + "a]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, reason, _ := readFormat(tt.f, []byte(tt.in)); reason != ReasonTooDeep {
				t.Errorf("reason: got %q, want %q", reason, ReasonTooDeep)
			}
		})
	}
}
