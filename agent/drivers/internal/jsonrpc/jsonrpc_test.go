package jsonrpc

import (
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
