package api

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
)

// The SSE encoding of attach frames (R-ATT-4), by hand: an output event is
// appended to a reused buffer in one pass over its data (UTF-8 check and
// JSON escaping together), with no reflection and no allocation per event
// (issue 18). Its bytes are exactly what encoding/json makes of
// apitypes.Output; FuzzAppendOutputEvent holds it to that.

// jsonWork marks the bytes a JSON string cannot copy as they are: control
// characters, the quote and backslash, what encoding/json escapes for HTML
// (<, >, &), and every non-ASCII byte (checked as UTF-8).
var jsonWork = func() (t [256]bool) {
	for b := range 0x20 {
		t[b] = true
	}
	for _, b := range []byte{'"', '\\', '<', '>', '&'} {
		t[b] = true
	}
	for b := 0x80; b < 0x100; b++ {
		t[b] = true
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// Byte-parallel tests on a word of 8 bytes.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// hasZeroByte reports whether some byte of v is 0.
func hasZeroByte(v uint64) bool { return (v-ones)&^v&highs != 0 }

// wordNeedsWork reports whether some byte of w is one jsonWork marks.
func wordNeedsWork(w uint64) bool {
	if w&highs != 0 {
		return true // non-ASCII
	}
	// With every byte below 0x80, a byte below 0x20 borrows into its high
	// bit when 0x20 is taken from each.
	if (w-0x20*ones)&^w&highs != 0 {
		return true
	}
	return hasZeroByte(w^('"'*ones)) || hasZeroByte(w^('\\'*ones)) ||
		hasZeroByte(w^('<'*ones)) || hasZeroByte(w^('>'*ones)) || hasZeroByte(w^('&'*ones))
}

// appendJSONText appends src as a JSON string, escaped as encoding/json
// escapes it. ok is false when src is not valid UTF-8; b is then returned
// as it was given.
func appendJSONText(b, src []byte) (_ []byte, ok bool) {
	mark := len(b)
	b = append(b, '"')
	start := 0
	for i := 0; i < len(src); {
		// Eight plain bytes at a time: the common case of program output.
		for i+8 <= len(src) && !wordNeedsWork(binary.LittleEndian.Uint64(src[i:])) {
			i += 8
		}
		if i == len(src) {
			break
		}
		c := src[i]
		if !jsonWork[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, src[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && size == 1 {
			return b[:mark], false
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, src[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			start = i + size
		}
		i += size
	}
	b = append(b, src[start:]...)
	return append(b, '"'), true
}

// appendOutputData appends the "data" and "encoding" members of an output
// event: the bytes as text when they are UTF-8, else as base64.
func appendOutputData(b, data []byte) []byte {
	b = append(b, `"data":`...)
	if s, ok := appendJSONText(b, data); ok {
		return append(s, `,"encoding":"utf8"`...)
	}
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, data)
	return append(b, `","encoding":"base64"`...)
}

// appendJSONTime appends t as encoding/json does (RFC 3339 with
// nanoseconds). encoding/json refuses a year outside 0..9999; such a
// stamp, which no agent clock makes, is written as the zero time.
func appendJSONTime(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		t = time.Time{}
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendOutputEvent appends one output event (R-ATT-4): id is the seq.
func appendOutputEvent(b []byte, f proto.AttachFrame) []byte {
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, f.Seq, 10)
	b = append(b, "\nevent: "+apitypes.SSEOutput+"\ndata: "...)
	b = appendOutputJSON(b, f)
	return append(b, '\n', '\n')
}

// appendOutputJSON appends the apitypes.Output JSON of f.
func appendOutputJSON(b []byte, f proto.AttachFrame) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, f.Seq, 10)
	b = append(b, `,"generation":`...)
	b = strconv.AppendUint(b, uint64(f.Generation), 10)
	b = append(b, `,"stream":`...)
	// Stream names are plain ASCII words.
	b = append(b, '"')
	b = append(b, proto.StreamName(f.Stream)...)
	b = append(b, `","at":`...)
	b = appendJSONTime(b, f.At)
	b = append(b, ',')
	b = appendOutputData(b, f.Data)
	return append(b, '}')
}

// appendEvent appends one SSE event for f (R-ATT-4). The rare kinds carry
// the agent's JSON as it came.
func appendEvent(b []byte, f proto.AttachFrame) []byte {
	switch f.Type {
	case proto.AttachOutput:
		if f.Stream == proto.StreamRequest {
			// R-REQ-4: a request or its settlement, at its seq, as an
			// event of its own.
			ev := apitypes.SSERequestSettled
			var st struct {
				State string `json:"state"`
			}
			if json.Unmarshal(f.Data, &st) == nil && st.State == apitypes.RequestPending {
				ev = apitypes.SSERequest
			}
			b = append(b, "id: "...)
			b = strconv.AppendUint(b, f.Seq, 10)
			b = append(b, "\nevent: "+ev+"\ndata: "...)
			b = append(b, f.Data...)
			return append(b, '\n', '\n')
		}
		if f.Stream == proto.StreamNotice {
			// R-ATT-4: the agent's notice at its seq, e.g. history_withheld.
			b = append(b, "id: "...)
			b = strconv.AppendUint(b, f.Seq, 10)
			b = append(b, "\nevent: "+apitypes.SSEOlivaresNotice+"\ndata: "...)
			b = append(b, f.Data...)
			return append(b, '\n', '\n')
		}
		return appendOutputEvent(b, f)
	case proto.AttachLag:
		b = append(b, "event: "+apitypes.SSELag+"\ndata: "...)
	case proto.AttachNotice:
		b = append(b, "event: "+apitypes.SSENotice+"\ndata: "...)
	case proto.AttachEnd:
		b = append(b, "event: "+apitypes.SSEEnd+"\ndata: "...)
	default:
		return b
	}
	b = append(b, f.Data...)
	return append(b, '\n', '\n')
}
