package projectconfig

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// TestEnvListed: R-PCS-4 with R-PCS-22's case rule.
func TestEnvListed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want bool
	}{
		{"NO_PROXY", false}, {"no_proxy", false}, {"No_Proxy", false},
		{"HTTPS_PROXY", true}, {"http_proxy", true}, {"ALL_PROXY", true}, {"X_NO_PROXY", true},
		{"PROXY", false}, {"X_PROXY_HOST", false},
		{"ANTHROPIC_BASE_URL", true}, {"openai_base_url", true}, {"BASE_URL", false},
		{"AZURE_API_BASE", true}, {"API_BASE", false},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", true}, {"ENDPOINT", false},
		{"AWS_ENDPOINT_URL", true}, {"aws_endpoint_url_s3", true}, {"X_AWS_ENDPOINT_URL", false},
		{"NODE_OPTIONS", true}, {"NODE_EXTRA_CA_CERTS", true}, {"NODE_TLS_REJECT_UNAUTHORIZED", true},
		{"LD_PRELOAD", true}, {"LD_LIBRARY_PATH", true}, {"LD_AUDIT", true}, {"DYLD_INSERT_LIBRARIES", true},
		{"BASH_ENV", true}, {"PATH", true}, {"path", true}, {"PYTHONPATH", true},
		{"GIT_SSH_COMMAND", true}, {"GIT_EXTERNAL_DIFF", true}, {"SSL_CERT_FILE", true},
		{"CLAUDE_CODE_SHELL_PREFIX", true}, {"ANTHROPIC_CUSTOM_HEADERS", true},
		{"HOME", false}, {"PATHS", false}, {"MY_PATH", false}, {"", false},
		{"HTTPS_PROXſ", false}, // no Unicode fold: ſ is not s
	}
	for _, tt := range tests {
		if got := EnvListed(tt.name); got != tt.want {
			t.Errorf("%q: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestMaskURLPasswords: R-PCS-25.
func TestMaskURLPasswords(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"http://user:pass@host:1/p", "http://user:***@host:1/p"},
		{"http://user@host/p", "http://user@host/p"},
		{"http://user:@host", "http://user:@host"},
		{"http://:pw@host", "http://:***@host"},
		{"http://host/p?u=a:b@c", "http://host/p?u=a:b@c"},
		{"https://a:b@c@d/x", "https://a:***@d/x"},
		{"curl https://a:b@h/x && wget ftp://c:d@i", "curl https://a:***@h/x && wget ftp://c:***@i"},
		{`{"u":"socks5h://x:y@z"}`, `{"u":"socks5h://x:***@z"}`},
		{"git+ssh://git:tok@host:repo", "git+ssh://git:***@host:repo"},
		{"://a:b@c", "://a:b@c"},
		{"1://a:b@c", "1://a:b@c"},
		{"no url here a:b@c", "no url here a:b@c"},
		{"http://a:b@", "http://a:***@"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := MaskURLPasswords(tt.in); got != tt.want {
			t.Errorf("%q: got %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestKeyPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		segs []string
		want string
	}{
		{[]string{"notify"}, "notify"},
		{[]string{"env", "HTTPS_PROXY"}, "env.HTTPS_PROXY"},
		{[]string{"profiles", "a.b", "notify"}, `profiles."a.b".notify`},
		{[]string{"profiles", "a", "b", "notify"}, `profiles.a.b.notify`},
		{[]string{"", "x y", "q\"", "é"}, `"".` + `"x y".` + `"q\"".` + `"é"`},
		{[]string{"!unreadable"}, `"!unreadable"`},
	}
	for _, tt := range tests {
		if got := keyPath(tt.segs...); got != tt.want {
			t.Errorf("%q: got %s, want %s", tt.segs, got, tt.want)
		}
	}
}

// TestCanonical: the hash form of values (package doc, R-PCS-21).
func TestCanonical(t *testing.T) {
	t.Parallel()
	local := func(s string) time.Time {
		var doc map[string]any
		if _, err := toml.Decode("v = "+s, &doc); err != nil {
			t.Fatal(err)
		}
		return doc["v"].(time.Time)
	}
	tests := []struct {
		name          string
		in            any
		hash, display string
	}{
		{"null", nil, `null`, `null`},
		{"string escapes", "a\"b\\c\nd\re\tf\x01g\u2028é", `"a\"b\\c\nd\re\tf\u0001g` + "\u2028é\"", ""},
		{"html is literal", "<a&b>", `"<a&b>"`, ""},
		{"json number as written", json.Number("1.50e+2"), `1.50e+2`, ""},
		{"int", int64(-7), `-7`, ""},
		{"float keeps a point", 1.0, `1.0`, ""},
		{"float exponent", 1e300, `1e+300`, ""},
		{"nan bare, string in output", math.NaN(), `nan`, `"nan"`},
		{"+inf", math.Inf(1), `+inf`, `"+inf"`},
		{"-inf", math.Inf(-1), `-inf`, `"-inf"`},
		{"offset date-time bare", local("1979-05-27T07:32:00Z"), `1979-05-27T07:32:00Z`, `"1979-05-27T07:32:00Z"`},
		{"local date-time", local("1979-05-27T07:32:00.5"), `1979-05-27T07:32:00.5`, `"1979-05-27T07:32:00.5"`},
		{"local date", local("1979-05-27"), `1979-05-27`, `"1979-05-27"`},
		{"local time", local("07:32:00"), `07:32:00`, `"07:32:00"`},
		{"sorted keys", map[string]any{"b": true, "a": []any{false, "x"}}, `{"a":[false,"x"],"b":true}`, ""},
		{"array of tables", []map[string]any{{"z": int64(1)}}, `[{"z":1}]`, ""},
		{"masked only in output", "http://u:pw@h", `"http://u:pw@h"`, `"http://u:***@h"`},
	}
	for _, tt := range tests {
		if tt.display == "" {
			tt.display = tt.hash
		}
		if got := string(canonical(tt.in)); got != tt.hash {
			t.Errorf("%s hash form: got %s, want %s", tt.name, got, tt.hash)
		}
		got := display(tt.in)
		if string(got) != tt.display {
			t.Errorf("%s output form: got %s, want %s", tt.name, got, tt.display)
		}
		if !json.Valid(got) {
			t.Errorf("%s output form is not valid JSON: %s", tt.name, got)
		}
	}
}
