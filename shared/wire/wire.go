// Package wire is the framing both daemons speak on every tunnel stream: a
// length-prefixed JSON header, a length-prefixed JSON reply, then binary
// length-prefixed frames.
//
// wire puts no JSON on the hot path: frames are raw bytes behind a 4-byte
// big-endian length.
package wire

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Limits.
const (
	// MaxMessage caps a JSON header or reply.
	MaxMessage = 1 << 20
	// MaxFrame caps one binary frame.
	MaxFrame = 4 << 20
)

// ErrTooLarge: a message or frame exceeds its cap.
var ErrTooLarge = errors.New("wire: message too large")

// Header opens a call.
type Header struct {
	Op     string          `json:"op"`
	RunRef string          `json:"run_ref,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
}

// Error is an error that crosses the tunnel with its HTTP status, so the
// coordinator can pass an agent's answer through (R-API-4).
type Error struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Reply answers a Header.
type Reply struct {
	OK     bool            `json:"ok"`
	Error  *Error          `json:"error,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// WriteMessage writes v as JSON behind its length.
func WriteMessage(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("wire: marshal: %w", err)
	}
	if len(b) > MaxMessage {
		return ErrTooLarge
	}
	return writePrefixed(w, b)
}

// ReadMessage reads one length-prefixed JSON message into v.
func ReadMessage(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxMessage {
		return ErrTooLarge
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("wire: bad message: %w", err)
	}
	return nil
}

// WriteFrame writes p behind its length, in one Write.
func WriteFrame(w io.Writer, p []byte) error {
	if len(p) > MaxFrame {
		return ErrTooLarge
	}
	return writePrefixed(w, p)
}

func writePrefixed(w io.Writer, p []byte) error {
	bp := bufPool.Get().(*[]byte)
	b := append((*bp)[:0], 0, 0, 0, 0)
	binary.BigEndian.PutUint32(b, uint32(len(p)))
	b = append(b, p...)
	_, err := w.Write(b)
	if cap(b) <= 1<<20 {
		*bp = b[:0]
		bufPool.Put(bp)
	}
	return err
}

// ReadFrame reads one frame, into buf when it is large enough. io.EOF on a
// clean end between frames.
func ReadFrame(r io.Reader, buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n > MaxFrame {
		return nil, ErrTooLarge
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// Call writes h (with params marshalled into h.Params when non-nil), reads
// the Reply, and decodes its result into result when non-nil. A refused call
// returns its *Error.
func Call(s io.ReadWriter, h Header, params any, result any) error {
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("wire: marshal params: %w", err)
		}
		h.Params = b
	}
	if err := WriteMessage(s, h); err != nil {
		return err
	}
	var r Reply
	if err := ReadMessage(s, &r); err != nil {
		return err
	}
	if !r.OK {
		if r.Error == nil {
			return &Error{Status: http.StatusBadGateway, Code: "bad_reply", Message: "the peer refused the call without saying why"}
		}
		return r.Error
	}
	if result != nil && len(r.Result) > 0 {
		if err := json.Unmarshal(r.Result, result); err != nil {
			return fmt.Errorf("wire: bad result: %w", err)
		}
	}
	return nil
}

// Respond writes the Reply for result or err. An *Error is kept as is; any
// other error becomes a 500 agent_error.
func Respond(w io.Writer, result any, err error) error {
	if err != nil {
		var we *Error
		if !errors.As(err, &we) {
			we = &Error{Status: http.StatusInternalServerError, Code: "agent_error", Message: err.Error()}
		}
		return WriteMessage(w, Reply{Error: we})
	}
	r := Reply{OK: true}
	if result != nil {
		b, err := json.Marshal(result)
		if err != nil {
			return WriteMessage(w, Reply{Error: &Error{Status: 500, Code: "agent_error", Message: err.Error()}})
		}
		r.Result = b
	}
	return WriteMessage(w, r)
}
