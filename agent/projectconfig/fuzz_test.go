package projectconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// Fuzz targets for every reader of untrusted bytes. Seeds are in
// testdata/fuzz/<FuzzName>; run one with
//
//	go test -run '^$' -fuzz '^FuzzTOMLDepth$' -fuzztime 30s ./agent/projectconfig

// treeDepth is the level of the deepest node of a decoded document, by
// R-PCS-20: object keys and array indices from the root.
func treeDepth(v any) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			d = max(d, 1+treeDepth(e))
		}
	case []any:
		for _, e := range v {
			d = max(d, 1+treeDepth(e))
		}
	case []map[string]any:
		for _, e := range v {
			d = max(d, 1+treeDepth(e))
		}
	}
	return d
}

// FuzzJSONDepth: the token-stream depth equals the decoded document's
// depth, and the scanner never rejects valid JSON except for depth.
func FuzzJSONDepth(f *testing.F) {
	f.Add([]byte(`{"a": [1, {"b": "]]"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := jsonDepth(data)
		if !json.Valid(data) {
			return
		}
		if err != nil {
			if !errors.Is(err, errTooDeep) {
				t.Fatalf("valid JSON refused: %v", err)
			}
			if d <= MaxDepth {
				t.Fatalf("too deep at level %d", d)
			}
			return
		}
		if want := tokenDepth(data); d != want {
			t.Fatalf("depth: got %v, want %v from encoding/json's tokens", d, want)
		}
		// A key given twice keeps one value in the decoded tree, so the
		// tree can only be shallower than the token stream.
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		if tree := treeDepth(v); tree > d {
			t.Fatalf("depth: got %v, below the decoded tree's %v", d, tree)
		}
	})
}

// tokenDepth is a reference for jsonDepth built on encoding/json's token
// stream: every token that is not a closing delimiter is a node (a key
// stands at the level of its value).
func tokenDepth(data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	open, depth := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return depth
		}
		switch tok {
		case json.Delim(']'), json.Delim('}'):
			open--
			continue
		}
		depth = max(depth, open)
		if tok == json.Delim('[') || tok == json.Delim('{') {
			open++
		}
	}
}

// FuzzTOMLDepth: the scanner accepts what the decoder accepts, never
// counts less than the decoded document's depth, and counts exactly that
// depth when the file has no [[array]] header.
func FuzzTOMLDepth(f *testing.F) {
	f.Add([]byte("[a.b]\nc = {d = [1, 2]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := tomlDepth(data)
		if errors.Is(err, errTooDeep) {
			if d <= MaxDepth {
				t.Fatalf("too deep at level %d", d)
			}
			return // never hand hostile nesting to the decoder
		}
		doc := map[string]any{}
		if _, derr := toml.Decode(string(data), &doc); derr != nil || !utf8.Valid(data) {
			return // decodeTOML refuses non-UTF-8 (a UTF-16 BOM) before the scan
		}
		if err != nil {
			t.Fatalf("valid TOML refused: %v", err)
		}
		want := treeDepth(doc)
		s := tomlScanner{data: data}
		_ = s.document()
		if d < want || (!s.aot && d != want) {
			t.Fatalf("depth: got %v, want %v (array headers: %v)", d, want, s.aot)
		}
	})
}

// FuzzDotenv: the parser never panics, keeps only valid names, and a
// value written back in single quotes reads back the same.
func FuzzDotenv(f *testing.F) {
	f.Add([]byte("export A='x' # c\nB=\"y\\n\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := parseDotenv(data)
		if err != nil {
			return
		}
		for _, e := range entries {
			if e.name == "" || strings.IndexFunc(e.name, func(r rune) bool { return r > 0x7f || !envNameChar(byte(r)) }) >= 0 {
				t.Fatalf("bad name %q", e.name)
			}
			if strings.ContainsAny(e.value, "'\n") {
				continue
			}
			back, err := parseDotenv([]byte(e.name + "='" + e.value + "'"))
			if err != nil || len(back) != 1 || back[0] != e {
				t.Fatalf("round trip of %+v: got %+v, %v", e, back, err)
			}
		}
	})
}

// FuzzReadFormat: no input makes a reader panic; a readable file's flagged
// values are valid JSON in the output, and the hash form is stable.
func FuzzReadFormat(f *testing.F) {
	f.Add(uint8(formatCodex), []byte("notify = [\"x\"]\n"))
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		ft := format(kind % uint8(formatEnv+1))
		keys, reason, _ := readFormat(ft, data)
		if reason != "" {
			if len(keys) != 0 {
				t.Fatalf("unreadable (%s) with keys", reason)
			}
			return
		}
		again, _, _ := readFormat(ft, data)
		if len(again) != len(keys) {
			t.Fatalf("keys: got %d then %d", len(keys), len(again))
		}
		for _, k := range keys {
			if empty(k.value) {
				t.Fatalf("%s: empty value flagged (R-PCS-2)", k.path)
			}
			if out := display(k.value); !json.Valid(out) {
				t.Fatalf("%s: output is not JSON: %s", k.path, out)
			}
			if !bytes.Equal(canonical(k.value), canonical(k.value)) {
				t.Fatalf("%s: canonical form not stable", k.path)
			}
		}
	})
}

// FuzzMaskURLPasswords: masking never panics, is idempotent, and leaves a
// string without "://" alone.
func FuzzMaskURLPasswords(f *testing.F) {
	f.Add("x https://u:p@h/ y")
	f.Fuzz(func(t *testing.T, s string) {
		m := MaskURLPasswords(s)
		if MaskURLPasswords(m) != m {
			t.Fatalf("not idempotent: %q → %q → %q", s, m, MaskURLPasswords(m))
		}
		if !strings.Contains(s, "://") && m != s {
			t.Fatalf("changed a string without a URL: %q → %q", s, m)
		}
	})
}
