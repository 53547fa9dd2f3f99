package jsonrpc

import (
	"bytes"
	"encoding/json"

	"github.com/olivares-dev/olivares/agent/internal/jsonscan"
)

// Head is what a line says about itself before its body is decoded: its
// method and whether it carries an id. Peek finds it by scanning the
// top-level members and stepping over their values without decoding them,
// so that the many lines a driver does not want (Codex's
// item/agentMessage/delta, 16 KiB each under load) cost a byte scan, not a
// decode (issue 18: the full decode of every delta was a quarter of the
// agent's CPU).
type Head struct {
	// Method is the method's text (it aliases the line), nil for none.
	Method []byte
	// Escaped: the method is written with escapes, so Method is not its
	// text; decode the line with Parse to learn it.
	Escaped bool
	// HasID: the line carries a non-null id (a request or a response).
	HasID bool
}

// Peek reads the head of one line without decoding it. ok is false when
// the line is not a JSON object as far as the scan can tell; a line Peek
// accepts may still be malformed inside a value, which Parse finds.
func Peek(line []byte) (h Head, ok bool) {
	ok = jsonscan.Members(line, func(key, val []byte) bool {
		switch string(key) {
		case "method":
			if len(val) > 0 && val[0] == '"' {
				h.Method = val[1 : len(val)-1]
				h.Escaped = bytes.IndexByte(h.Method, '\\') >= 0
			}
		case "id":
			h.HasID = string(val) != "null"
		}
		return true
	})
	return h, ok
}

// Parse reads one line. ok is false when the line is not a JSON object.
// The raw members of m alias line: a caller that keeps one copies it.
func Parse(line []byte) (m Message, ok bool) {
	if !json.Valid(line) {
		return Message{}, false
	}
	var method, errRaw []byte
	ok = jsonscan.Members(line, func(key, val []byte) bool {
		k := string(key)
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &s) != nil {
				return true
			}
			k = s
		}
		switch k {
		case "id":
			if !isNull(val) {
				m.ID = val
			}
		case "method":
			method = val
		case "params":
			m.Params = val
		case "result":
			m.Result = val
		case "error":
			errRaw = val
		}
		return true
	})
	if !ok {
		return Message{}, false
	}
	if method != nil {
		_ = json.Unmarshal(method, &m.Method)
	}
	if errRaw != nil && !isNull(errRaw) {
		m.HasError = true
		var body struct {
			Code    json.RawMessage `json:"code"`
			Message json.RawMessage `json:"message"`
		}
		if json.Unmarshal(errRaw, &body) == nil {
			_ = json.Unmarshal(body.Code, &m.ErrorCode)
			if json.Unmarshal(body.Message, &m.ErrorMessage) != nil {
				m.ErrorMessage = string(body.Message)
			}
		} else {
			m.ErrorMessage = string(errRaw)
		}
		if m.ErrorMessage == "" {
			m.ErrorMessage = "error without a message"
		}
	}
	return m, true
}
