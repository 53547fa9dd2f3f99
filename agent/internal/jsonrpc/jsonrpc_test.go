package jsonrpc

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		line                 string
		ok, req, notif, resp bool
		method, errMsg       string
	}{
		// Codex server messages carry no "jsonrpc" member (real-clis.md §2.1).
		{line: `{"id":1,"result":{}}`, ok: true, resp: true},
		{line: `{"error":{"code":-32600,"message":"Not initialized"},"id":1}`, ok: true, resp: true, errMsg: "Not initialized"},
		{line: `{"method":"turn/started","params":{},"emittedAtMs":1}`, ok: true, notif: true, method: "turn/started"},
		{line: `{"jsonrpc":"2.0","id":"a","method":"session/request_permission"}`, ok: true, req: true, method: "session/request_permission"},
		{line: `{"id":null,"error":{"code":-32700,"message":"Parse error"}}`, ok: true, errMsg: "Parse error"},
		{line: `{"id":2,"error":{"code":1,"message":7}}`, ok: true, resp: true, errMsg: "7"},
		{line: `{"id":2,"error":"boom"}`, ok: true, resp: true, errMsg: `"boom"`},
		{line: `{"method":5}`, ok: true},
		{line: `[1]`},
		{line: `null`},
		{line: `nope`},
	} {
		m, ok := Parse([]byte(tc.line))
		if ok != tc.ok || m.IsRequest() != tc.req || m.IsNotification() != tc.notif || m.IsResponse() != tc.resp ||
			m.Method != tc.method || m.ErrorMessage != tc.errMsg {
			t.Errorf("Parse(%s) = %+v ok=%t req=%t notif=%t resp=%t", tc.line, m, ok, m.IsRequest(), m.IsNotification(), m.IsResponse())
		}
	}
}

func TestLineKeepsHTML(t *testing.T) {
	got := string(Line(Request{JSONRPC: "2.0", ID: 3, Method: "x", Params: map[string]string{"text": "<a&b>"}}))
	want := `{"jsonrpc":"2.0","id":3,"method":"x","params":{"text":"<a&b>"}}` + "\n"
	if got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
}

func TestPeek(t *testing.T) {
	for _, tc := range []struct {
		line    string
		ok, id  bool
		method  string
		escaped bool
	}{
		{line: `{"method":"item/agentMessage/delta","params":{"delta":"a \"quoted\" {brace} \\"}}`, ok: true, method: "item/agentMessage/delta"},
		{line: `{"method":"x","params":{"a":[1,{"b":"]"}]},"id":7}`, ok: true, id: true, method: "x"},
		{line: `{"id":null,"method":"y"}`, ok: true, method: "y"},
		{line: `{"id":1,"result":{}}`, ok: true, id: true},
		{line: `{"method":"a\/b"}`, ok: true, method: `a\/b`, escaped: true},
		{line: ` { } `, ok: true},
		{line: `{"method":"x",}`},
		{line: `{"method":"x"`},
		{line: `[1]`},
		{line: `nope`},
	} {
		h, ok := Peek([]byte(tc.line))
		if !ok {
			h = Head{}
		}
		if ok != tc.ok || h.HasID != tc.id || string(h.Method) != tc.method || h.Escaped != tc.escaped {
			t.Errorf("Peek(%s) = %+v (method %q) ok=%t, want ok=%t id=%t method %q escaped=%t", tc.line, h, h.Method, ok, tc.ok, tc.id, tc.method, tc.escaped)
		}
	}
}

// FuzzPeek: on every line Parse accepts, Peek agrees about the id and,
// unless it says the method is escaped, about the method.
func FuzzPeek(f *testing.F) {
	for _, s := range []string{`{"method":"turn/started","params":{}}`, `{"id":1,"result":{"a":"\"}"}}`, `{"id":null}`, `{"method":"\u0061"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		h, pok := Peek(line)
		m, ok := Parse(line)
		if !ok {
			return
		}
		if !pok {
			t.Fatalf("Parse accepts %q, Peek does not", line)
		}
		if h.HasID != (m.ID != nil) {
			t.Fatalf("%q: Peek HasID %t, Parse id %q", line, h.HasID, m.ID)
		}
		if !h.Escaped && h.Method != nil && string(h.Method) != m.Method {
			t.Fatalf("%q: Peek method %q, Parse %q", line, h.Method, m.Method)
		}
	})
}

// BenchmarkPeekDelta: what a Codex delta line costs the driver now (Peek)
// beside what it cost (a full decode, Parse) and json.Valid, on a 16 KiB
// item/agentMessage/delta line.
func BenchmarkPeekDelta(b *testing.B) {
	line := []byte(`{"method":"item/agentMessage/delta","params":{"threadId":"0199a7f2-2f3c-7d31-8c5e-1234567890ab","turnId":"1","itemId":"msg_1","delta":"` +
		strings.Repeat("lorem ipsum dolor sit amet, ", 16<<10/28) + `"}}`)
	b.Run("peek", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			Peek(line)
		}
	})
	b.Run("parse", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			Parse(line)
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			json.Valid(line)
		}
	})
}

// TestParseErrorCode: an error answer's integer code is kept (Codex
// supervision's RPCError carries it); any other code is 0.
func TestParseErrorCode(t *testing.T) {
	for line, want := range map[string]int{
		`{"error":{"code":-32600,"message":"Not initialized"},"id":1}`: -32600,
		`{"id":2,"error":{"code":"x","message":"m"}}`:                  0,
		`{"id":2,"error":{"code":1.5,"message":"m"}}`:                  0,
		`{"id":2,"error":"boom"}`:                                      0,
	} {
		m, ok := Parse([]byte(line))
		if !ok || !m.HasError || m.ErrorCode != want {
			t.Errorf("Parse(%s) = %+v ok=%t, want an error with code %d", line, m, ok, want)
		}
	}
}
