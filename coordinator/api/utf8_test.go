package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

func TestInvalidUTF8At(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{`{"name":"ok"}`, -1},
		{`{"name":"é✓😀"}`, -1},
		{"{\"name\":\"a\xffb\"}", 10},
		{"{\"name\":\"\xc3\"}", 9},
		{`{"name":"\ud83d\ude00"}`, -1}, // a pair: one rune
		{`{"name":"\ud83d"}`, 9},        // a lone high half
		{`{"name":"x\ude00"}`, 10},      // a lone low half
		{`{"name":"\ud83d\u0041"}`, 9},  // a high half and no low one
		{`{"name":"\\ud83d"}`, -1},      // an escaped backslash, then text
		{`{"name":"\"\ud800"}`, 11},     // after an escaped quote
		{`{"a":"\u00e9","b":"\uDBFF\uDFFF"}`, -1},
		{`{"text":"\ud800`, 9}, // cut short
		{`\ud800`, -1},         // not in a string: JSON's business
	} {
		if got := invalidUTF8At([]byte(tc.in)); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.in, got, tc.want)
		}
	}
}

// FuzzInvalidUTF8At: a body it accepts decodes without any replacement
// character that the body did not spell out, and an offset it reports is
// inside the body.
func FuzzInvalidUTF8At(f *testing.F) {
	for _, s := range []string{`{"name":"ok"}`, "{\"t\":\"\xff\"}", `{"t":"\ud800"}`, `{"t":"\ud83d\ude00"}`, `["\\", "\\\ud800"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		off := invalidUTF8At(b)
		if off >= len(b) || off < -1 {
			t.Fatalf("offset %d of %d bytes", off, len(b))
		}
		if off >= 0 {
			return
		}
		if !utf8.Valid(b) {
			t.Fatalf("accepted invalid UTF-8 %q", b)
		}
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		spelled := strings.Count(string(b), "\uFFFD") + strings.Count(strings.ToLower(string(b)), `\ufffd`)
		if got := countFFFD(v); got > spelled {
			t.Fatalf("accepted %q, which decodes with %d replacement characters (spelled %d)", b, got, spelled)
		}
	})
}

func countFFFD(v any) int {
	n := 0
	switch v := v.(type) {
	case string:
		n += strings.Count(v, "\uFFFD")
	case []any:
		for _, e := range v {
			n += countFFFD(e)
		}
	case map[string]any:
		for k, e := range v {
			n += strings.Count(k, "\uFFFD") + countFFFD(e)
		}
	}
	return n
}

// R-API-12 (issue 16): a run name or an input text that is not UTF-8 is
// refused with 400 invalid_utf8 naming the byte, instead of being stored
// with U+FFFD.
func TestInvalidUTF8IsRefused(t *testing.T) {
	s, st := newTestServer(t)
	enrollNode(t, st, "node-1", "t1", `{}`)
	op := principal(t, st, "op", map[string]string{"t1": store.RoleOperator})
	if _, err := st.PutRun(context.Background(), apitypes.Run{RunRef: "run_1", Tenant: "t1", NodeID: "node-1", State: apitypes.StateIdle, Driver: "codex", Isolation: apitypes.IsolationNative}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path, body string
		offset             string
	}{
		{"PUT", Base + "/runs/run_1/name", "{\"name\":\"caf\xe9\"}", "byte 12"},
		{"POST", Base + "/runs/run_1/input", "{\"text\":\"hi \xff\"}", "byte 12"},
		{"POST", Base + "/runs/run_1/input", `{"message":"\udc00"}`, "byte 12"},
		{"POST", Base + "/runs", "{\"provider_profile_ref\":\"prof_1\",\"name\":\"\xc0\xaf\"}", "byte 41"},
		{"POST", Base + "/runs/run_1/snooze", "{\"until\":\"\xff\"}", "byte 10"},
	} {
		rec := callBody(s, tc.method, tc.path, op, "t1", tc.body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"invalid_utf8"`) || !strings.Contains(rec.Body.String(), tc.offset) {
			t.Errorf("%s %s %q: got %d %s, want 400 invalid_utf8 at %s", tc.method, tc.path, tc.body, rec.Code, rec.Body, tc.offset)
		}
	}
	// A surrogate pair is one valid rune.
	rec := callBody(s, "PUT", Base+"/runs/run_1/name", op, "t1", `{"name":"ok \ud83d\ude00"}`)
	if rec.Code != http.StatusOK {
		t.Errorf("rename with a surrogate pair: got %d %s, want 200", rec.Code, rec.Body)
	}
}
