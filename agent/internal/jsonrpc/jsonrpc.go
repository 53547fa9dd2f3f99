// Package jsonrpc reads and writes the JSON-RPC lines of the Codex app-server
// and ACP drivers and of Codex supervision's connection (agent/codexsup): the
// one JSON-RPC codec of the agent. Reading is lenient (Codex omits "jsonrpc":"2.0",
// real-clis.md §2.1) and never fails on a hostile line: a line that is not a
// JSON object is simply not a message.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Message is one parsed line: a request (Method and ID), a notification
// (Method, no ID) or a response (ID, no Method).
type Message struct {
	ID     json.RawMessage // absent or null: no id
	Method string
	Params json.RawMessage
	Result json.RawMessage
	// HasError is set when the line carries a non-null "error" member;
	// ErrorCode is its code when that is an integer, else 0.
	HasError     bool
	ErrorCode    int
	ErrorMessage string
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// IsRequest: the peer asks us something and waits for a response.
func (m Message) IsRequest() bool { return m.Method != "" && m.ID != nil }

// IsNotification: the peer tells us something.
func (m Message) IsNotification() bool { return m.Method != "" && m.ID == nil }

// IsResponse: the peer answers one of our requests.
func (m Message) IsResponse() bool { return m.Method == "" && m.ID != nil }

// IntID is the response's id when it is an integer (ours always are).
func (m Message) IntID() (int64, bool) {
	n, err := strconv.ParseInt(string(bytes.TrimSpace(m.ID)), 10, 64)
	return n, err == nil
}

// Request is a request we send.
type Request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// Notification is a notification we send.
type Notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// Error is the error member of a response we send.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Response answers a request the peer sent; ID is echoed byte for byte.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// MethodNotFound is JSON-RPC's code for a method the receiver does not serve.
const MethodNotFound = -32601

// Line marshals v as one line ending in '\n'. HTML characters are not
// escaped, so user text reaches the tool as it was typed.
func Line(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only our own request types reach here; they always marshal.
		panic("jsonrpc: marshal: " + err.Error())
	}
	return b.Bytes()
}
