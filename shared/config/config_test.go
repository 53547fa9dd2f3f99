package config

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

var update = flag.Bool("update", false, "rewrite the want sections of testdata/decode/*.txt")

// testConfig stands in for a daemon's config struct.
type testConfig struct {
	Name    string   `toml:"name"`
	Port    int      `toml:"port"`
	Timeout Duration `toml:"timeout"`
	Tunnel  struct {
		Transport string   `toml:"transport"`
		Keepalive Duration `toml:"keepalive"`
		TLS       struct {
			CA   string `toml:"ca"`
			Cert string `toml:"cert"`
		} `toml:"tls"`
	} `toml:"tunnel"`
	Labels    map[string]string `toml:"labels"`
	Workspace []struct {
		ID   string `toml:"id"`
		Path string `toml:"path"`
	} `toml:"workspace"`
}

// golden is one testdata/decode/*.txt file: a description, then
//
//	-- <file name> --
//	<TOML input>
//	-- want --
//	<the error text, or "ok" and the decoded value encoded as TOML>
type golden struct {
	path        string
	description string
	name        string
	input       []byte
	want        string
}

func readGolden(t *testing.T, path string) golden {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g := golden{path: path}
	head, rest, ok := strings.Cut(string(data), "\n-- ")
	if !ok {
		t.Fatalf("%s: no input section", path)
	}
	g.description = head
	name, rest, ok := strings.Cut(rest, " --\n")
	if !ok {
		t.Fatalf("%s: bad input separator", path)
	}
	g.name = name
	input, want, ok := strings.Cut(rest, "-- want --\n")
	if !ok {
		t.Fatalf("%s: no want section", path)
	}
	g.input, g.want = []byte(input), want
	return g
}

func (g golden) write(t *testing.T, got string) {
	t.Helper()
	out := g.description + "\n-- " + g.name + " --\n" + string(g.input) + "-- want --\n" + got
	if err := os.WriteFile(g.path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}

// result is what a golden file's want section holds for input.
func result(name string, input []byte) string {
	var cfg testConfig
	if err := Decode(name, input, &cfg); err != nil {
		return err.Error() + "\n"
	}
	var b bytes.Buffer
	b.WriteString("ok\n")
	if err := toml.NewEncoder(&b).Encode(cfg); err != nil {
		return "encode: " + err.Error() + "\n"
	}
	return b.String()
}

func TestDecodeGolden(t *testing.T) {
	paths, err := filepath.Glob("testdata/decode/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			g := readGolden(t, path)
			got := result(g.name, g.input)
			if *update {
				g.write(t, got)
				return
			}
			if got != g.want {
				t.Errorf("%s\ngot:\n%s\nwant:\n%s", g.description, got, g.want)
			}
		})
	}
}

// TestScanKeysMatchesDecoder checks the scanner against the decoder on every
// golden input that parses: the same keys, as often.
func TestScanKeysMatchesDecoder(t *testing.T) {
	paths, _ := filepath.Glob("testdata/decode/*.txt")
	for _, path := range paths {
		g := readGolden(t, path)
		checkScanKeys(t, g.path, g.input)
	}
}

func checkScanKeys(t *testing.T, what string, input []byte) {
	t.Helper()
	var m map[string]any
	md, err := toml.Decode(string(input), &m)
	if err != nil {
		return
	}
	want := make(map[string]int)
	for _, k := range md.Keys() {
		want[k.String()]++
	}
	got := make(map[string]int)
	for k, lines := range scanKeys(input) {
		got[k] = len(lines)
		if !slices.IsSorted(lines) {
			t.Errorf("%s: lines of %s out of order: %v", what, k, lines)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: scanned keys\ngot  %v\nwant %v", what, got, want)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []Error // File is always "a.toml"; Msg and Err not compared
	}{
		{
			name:  "unknown keys",
			input: "prot = 1\n[tunnel]\ntransprot = 2\n",
			want:  []Error{{Line: 1, Key: "prot"}, {Line: 3, Key: "tunnel.transprot"}},
		},
		{
			name:  "CRLF line endings",
			input: "name = \"x\"\r\n\r\n[tunnel]\r\ntransprot = 2\r\n",
			want:  []Error{{Line: 4, Key: "tunnel.transprot"}},
		},
		{
			name:  "no trailing newline",
			input: "[tunnel.tls]\nca = \"x\"\ncrt = \"y\"",
			want:  []Error{{Line: 3, Key: "tunnel.tls.crt"}},
		},
		{
			name:  "syntax",
			input: "name = \"x\"\nport = = 1\n",
			want:  []Error{{Line: 2, Col: 8, syntax: true}},
		},
		{
			name:  "type",
			input: "name = \"x\"\nport = \"80\"\n",
			want:  []Error{{Line: 2, Key: "port"}},
		},
		{
			name:  "bad duration",
			input: "\n[tunnel]\nkeepalive = \"soon\"\n",
			want:  []Error{{Line: 3, Key: "tunnel.keepalive"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg testConfig
			err := Decode("a.toml", []byte(tt.input), &cfg)
			var got []Error
			for _, e := range flatten(err) {
				var ce *Error
				if !errors.As(e, &ce) {
					t.Fatalf("got %T %v, want *Error", e, e)
				}
				if ce.File != "a.toml" {
					t.Errorf("File: got %q, want %q", ce.File, "a.toml")
				}
				got = append(got, Error{Line: ce.Line, Col: ce.Col, Key: ce.Key, syntax: ce.syntax})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v (error %v)", got, tt.want, err)
			}
		})
	}
}

// flatten undoes errors.Join.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestUnknownKeyIs(t *testing.T) {
	var cfg testConfig
	err := Decode("a.toml", []byte("a = 1\nb = 2\n"), &cfg)
	if !errors.Is(err, ErrUnknownKey) {
		t.Errorf("got %v, want an error wrapping ErrUnknownKey", err)
	}
	if n := len(flatten(err)); n != 2 {
		t.Errorf("got %d errors, want 2", n)
	}
}

// TestDecodeTypeErrorFormat pins the toml decoder's plain-error format that
// lastKeyRe parses. If a toml upgrade changes it, this fails instead of the
// messages silently losing their line and key.
func TestDecodeTypeErrorFormat(t *testing.T) {
	var cfg testConfig
	_, err := toml.Decode("\n[tunnel]\ntransport = 5\n", &cfg)
	if err == nil {
		t.Fatal("got nil error")
	}
	m := lastKeyRe.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("toml type error %q does not match %v", err, lastKeyRe)
	}
	if m[1] != "3" || m[2] != `"tunnel.transport"` {
		t.Errorf("got line %q key %s, want line 3 key \"tunnel.transport\"", m[1], m[2])
	}
}

func TestDecodeFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(path, []byte("name = \"x\"\n\n[tunnel]\ntransprot = \"quic\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg testConfig
	err := DecodeFile(path, &cfg)
	want := "config " + path + `:4: unknown key "tunnel.transprot"`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	if cfg.Name != "x" {
		t.Errorf("Name: got %q, want %q", cfg.Name, "x")
	}

	missing := filepath.Join(dir, "missing.toml")
	err = DecodeFile(missing, &cfg)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: got %v, want a not-exist error naming %s", err, missing)
	}
}

func TestErrorWithoutLine(t *testing.T) {
	e := &Error{File: "file.toml", Key: "x", Err: ErrUnknownKey}
	if got, want := e.Error(), `config file.toml: unknown key "x"`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	e = &Error{File: "file.toml", Key: `tunnel."a b"`, Line: 2, Err: ErrUnknownKey}
	if got, want := e.Error(), "config file.toml:2: unknown key `tunnel.\"a b\"`"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		text    string
		want    time.Duration
		wantErr bool
	}{
		{"30s", 30 * time.Second, false},
		{"10m", 10 * time.Minute, false},
		{"1h30m", 90 * time.Minute, false},
		{"250ms", 250 * time.Millisecond, false},
		{"0", 0, false},
		{"-5s", -5 * time.Second, false},
		{"", 0, true},
		{"30", 0, true},
		{"10 minutes", 0, true},
		{"1d", 0, true},
	}
	for _, tt := range tests {
		var d Duration
		err := d.UnmarshalText([]byte(tt.text))
		if (err != nil) != tt.wantErr {
			t.Errorf("UnmarshalText(%q): got error %v, want error %v", tt.text, err, tt.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if d.Duration != tt.want {
			t.Errorf("UnmarshalText(%q): got %v, want %v", tt.text, d.Duration, tt.want)
		}
		text, err := d.MarshalText()
		if err != nil {
			t.Fatalf("MarshalText(%v): %v", d.Duration, err)
		}
		var back Duration
		if err := back.UnmarshalText(text); err != nil || back != d {
			t.Errorf("round trip of %v through %q: got %v, %v", d.Duration, text, back.Duration, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	paths, _ := filepath.Glob("testdata/decode/*.txt")
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		_, rest, _ := strings.Cut(string(data), " --\n")
		input, _, _ := strings.Cut(rest, "-- want --\n")
		f.Add([]byte(input))
	}
	for _, s := range []string{
		"", "=", "[", "[[a]]\n[[a]]\nb=1", "a = {b = {c = [1, {d = 2}]}}",
		"a = \"\"\"\n\\\n  x\"\"\"\"\"\nb = 1", "'a'.\"b\".c = 1", "\"\\u00e9\" = 1", "a = 1979-05-27 07:32:00Z\nb = 2",
		"a = [[1, 2], [3]]\nb = [{c = 1}, {c = 2}]", "[a]\nb = {c.d = 1, e = {f = [{g = 1}]}}", "\"\" = 1\n[x]\n\"\" = 2",
		"[[a]]\n[[a.b]]\nc = 1\n[[a]]\n[[a.b]]\nc = 2", "a = \"\"\"\"\"\"\"\nb = '\nc = 1", "a=1#c\nb='#'#d\nc = \"\\\"#\"",
		"a = {\n  b = 1, # one\n  c = 2,\n}\nd = 3", "a = \"\\e\\x41\"\n\"\\x41\" = 2", "[ a . 'b c' ]\nd = 1",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var cfg testConfig
		err := Decode("fuzz.toml", data, &cfg)
		if err != nil && err.Error() == "" {
			t.Error("empty error message")
		}
		var m map[string]any
		_ = Decode("fuzz.toml", data, &m)
		checkScanKeys(t, "fuzz input", data)
	})
}
