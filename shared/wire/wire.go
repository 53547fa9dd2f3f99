// Package wire is the framing both daemons speak on every tunnel stream: a
// length-prefixed JSON header, a length-prefixed JSON reply, then binary
// length-prefixed frames.
//
// wire never puts JSON on the hot path: a frame is raw bytes behind a 4-byte
// big-endian length, and reading one allocates nothing once the caller's
// buffer is large enough.
package wire

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/olivares-dev/olivares/shared/apierr"
)

// Limits. A length above its cap is refused before anything is allocated,
// so a peer cannot make us reserve more than the cap.
const (
	// MaxMessage caps a JSON header or reply.
	MaxMessage = 1 << 20
	// MaxFrame caps one binary frame.
	MaxFrame = 4 << 20
)

// ErrTooLarge: a message or frame exceeds its cap (MaxMessage, MaxFrame).
// Reading stops at the length prefix; the stream is then out of step and
// must be closed.
var ErrTooLarge = errors.New("wire: message too large")

// Header opens a call.
type Header struct {
	Op     string          `json:"op"`
	RunRef string          `json:"run_ref,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	// RequestID is the id of the API request that made the call, so that
	// the agent's log lines about it name it (R-OBS-2). Empty for calls
	// no request made.
	RequestID string `json:"request_id,omitempty"`
}

// Error is an error that crosses the tunnel: the API's envelope,
// apierr.Error, with its HTTP status on the wire, so the coordinator can
// pass an agent's answer through (R-API-4). It is a type of its own so
// that errors.As tells a peer's answer from a local error.
type Error apierr.Error

func (e *Error) Error() string { return (*apierr.Error)(e).Error() }

// Reply answers a Header.
type Reply struct {
	OK     bool            `json:"ok"`
	Error  *Error          `json:"error,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
}

// prefixLen is the size of the big-endian length in front of every message
// and frame.
const prefixLen = 4

// coalesceMax: frames up to this size are copied behind their prefix and
// sent in one Write (one TLS record, one syscall); larger ones go as prefix
// and payload, where the copy would cost more than the extra small write.
const coalesceMax = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, prefixLen+coalesceMax); return &b }}

// WriteMessage writes v as JSON behind its length. It refuses (ErrTooLarge)
// a message over MaxMessage and then writes nothing.
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

// ReadMessage reads one length-prefixed JSON message into v. It returns
// io.EOF when the stream ends before the first byte, io.ErrUnexpectedEOF
// when it ends inside the message, and ErrTooLarge for a length over
// MaxMessage.
func ReadMessage(r io.Reader, v any) error {
	var p [prefixLen]byte
	if _, err := io.ReadFull(r, p[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(p[:])
	if n > MaxMessage {
		return ErrTooLarge
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return noEOF(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("wire: bad message: %w", err)
	}
	return nil
}

// WriteFrame writes p behind its length, in one Write when p is at most
// 64 KiB. It refuses (ErrTooLarge) a frame over MaxFrame and then writes
// nothing.
func WriteFrame(w io.Writer, p []byte) error {
	if len(p) > MaxFrame {
		return ErrTooLarge
	}
	return writePrefixed(w, p)
}

func writePrefixed(w io.Writer, p []byte) error {
	if len(p) > coalesceMax {
		var prefix [prefixLen]byte
		binary.BigEndian.PutUint32(prefix[:], uint32(len(p)))
		bufs := net.Buffers{prefix[:], p}
		_, err := bufs.WriteTo(w)
		return err
	}
	bp := bufPool.Get().(*[]byte)
	b := binary.BigEndian.AppendUint32((*bp)[:0], uint32(len(p)))
	b = append(b, p...)
	_, err := w.Write(b)
	*bp = b[:0]
	bufPool.Put(bp)
	return err
}

// ReadFrame reads one frame. The payload lands in buf when cap(buf) is large
// enough (then nothing is allocated), else in a new slice; either way the
// result is only valid until the next call with the same buf. It returns
// io.EOF on a clean end between frames, io.ErrUnexpectedEOF on an end inside
// one, and ErrTooLarge for a length over MaxFrame.
func ReadFrame(r io.Reader, buf []byte) ([]byte, error) {
	// The prefix is read into buf itself: a local array would escape to the
	// heap through the io.Reader call, one allocation per frame.
	var prefix []byte
	if cap(buf) >= prefixLen {
		prefix = buf[:prefixLen]
	} else {
		prefix = make([]byte, prefixLen)
	}
	if _, err := io.ReadFull(r, prefix); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(prefix))
	if n > MaxFrame {
		return nil, ErrTooLarge
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, noEOF(err)
	}
	return buf, nil
}

// noEOF: an end of stream after a length prefix is always a truncation.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Call writes h (with params marshalled into h.Params when non-nil), reads
// the Reply, and decodes its result into result when non-nil. A refused call
// returns the peer's *Error unwrapped, so errors.As finds its status; a
// stream that ends before the reply is io.ErrUnexpectedEOF.
func Call(s io.ReadWriter, h Header, params any, result any) error {
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("wire: call %q: marshal params: %w", h.Op, err)
		}
		h.Params = b
	}
	if err := WriteMessage(s, h); err != nil {
		return fmt.Errorf("wire: call %q: %w", h.Op, err)
	}
	var r Reply
	if err := ReadMessage(s, &r); err != nil {
		return fmt.Errorf("wire: call %q: reading reply: %w", h.Op, noEOF(err))
	}
	if !r.OK {
		if r.Error == nil {
			return &Error{Status: http.StatusBadGateway, Code: "bad_reply", Message: fmt.Sprintf("the peer refused %q without saying why", h.Op)}
		}
		return r.Error
	}
	if result != nil && len(r.Result) > 0 {
		if err := json.Unmarshal(r.Result, result); err != nil {
			return fmt.Errorf("wire: call %q: bad result: %w", h.Op, err)
		}
	}
	return nil
}

// Respond writes the Reply for result or err. An *Error (also wrapped) is
// sent as is; any other error becomes 500 agent_error with err's text. A
// result that cannot be marshalled is answered with 500 agent_error and the
// marshal error is returned.
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
			err = fmt.Errorf("wire: marshal result: %w", err)
			return errors.Join(err, WriteMessage(w, Reply{Error: &Error{Status: http.StatusInternalServerError, Code: "agent_error", Message: err.Error()}}))
		}
		r.Result = b
	}
	return WriteMessage(w, r)
}
