// Package sse reads a text/event-stream body the way the HTML Living
// Standard's "event stream interpretation" says a browser does: UTF-8 with
// one leading BOM ignored; lines ended by CRLF, LF or CR; comments; the
// event, data, id and retry fields (others ignored); "data:" with or without
// its one leading space; data lines joined with "\n"; an event dispatched at
// a blank line, never at the end of the stream, and only when it has data;
// the last event ID kept across events until an id field changes it.
//
// sse never buffers without bound: a line or an event's data longer than
// the Reader's limit is ErrTooLarge, not memory. It does no I/O of its own
// beyond reading the body it is given, and never reconnects (that is the
// caller's business: shared/apiclient's attach stream).
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// DefaultMaxEvent is the limit of NewReader: the bytes of one event's data
// (its data fields and the "\n" between them). The coordinator's attach
// events carry one output frame of at most 1 MiB as JSON, which escaping
// can make several times larger.
const DefaultMaxEvent = 16 << 20

// lineSlack is what a line may hold beyond the limit: a field name, its
// colon and space.
const lineSlack = 64

// ErrTooLarge means a line or an event's data was longer than the Reader's
// limit. The stream cannot be read on past it, and reading it again from
// the same point would meet the same event.
var ErrTooLarge = errors.New("sse: event over the size limit")

// Event is one dispatched event.
type Event struct {
	// Type is the event field's value, or "message" when the event had
	// none.
	Type string
	// ID is the stream's last event ID when the event was dispatched: the
	// value of this event's id field or, without one, of the last earlier
	// event that had one. It is what a reconnect sends as Last-Event-ID.
	ID string
	// Data is the event's data fields joined with "\n". The caller owns it.
	Data []byte
}

// Reader reads events from a stream. It is not safe for concurrent use.
type Reader struct {
	br      *bufio.Reader
	max     int
	maxLine int
	err     error // sticky

	bomDone bool // the leading BOM, if any, was dropped
	skipLF  bool // the last line ended in CR: a LF right after it belongs to it
	line    []byte

	// The event being read, as the standard's buffers.
	data     []byte // each data value followed by "\n"
	typ      []byte
	idBuf    string // the last event ID buffer
	lastID   string // the last event ID string, set at each blank line
	prevType string // the last dispatched type, reused to spare an allocation
	retry    time.Duration
	hasRetry bool
	comment  string // the text of the last comment line
}

// NewReader returns a Reader of r with DefaultMaxEvent as its limit.
func NewReader(r io.Reader) *Reader { return NewReaderSize(r, DefaultMaxEvent) }

// NewReaderSize returns a Reader of r whose events' data may hold at most
// max bytes (when max <= 0, DefaultMaxEvent), and whose lines at most max
// plus a field name.
func NewReaderSize(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = DefaultMaxEvent
	}
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), max: max, maxLine: max + lineSlack, prevType: "message"}
}

// LastEventID is the stream's last event ID string: what the last
// dispatched event, or a later blank line after an id field, set. A client
// reconnecting sends it as Last-Event-ID.
func (r *Reader) LastEventID() string { return r.lastID }

// LastComment is the text of the stream's last comment line (after the
// colon and one space), "" before any. The coordinator says why it drops a
// viewer in one (": dropped: ...") before it ends the stream.
func (r *Reader) LastComment() string { return r.comment }

// Retry is the reconnection time the stream last asked for with a retry
// field, and whether it asked at all.
func (r *Reader) Retry() (time.Duration, bool) { return r.retry, r.hasRetry }

// Next returns the next event. It returns io.EOF when the stream ends (an
// event not closed by a blank line is dropped, as the standard says),
// ErrTooLarge (wrapped) for a line or event over the limit, or the read
// error. Every error is returned again by later calls.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	ev, err := r.next()
	if err != nil {
		r.err = err
	}
	return ev, err
}

func (r *Reader) next() (Event, error) {
	if !r.bomDone {
		if err := r.dropBOM(); err != nil {
			return Event{}, err
		}
	}
	for {
		line, err := r.readLine()
		if err != nil {
			return Event{}, err
		}
		if !utf8.Valid(line) {
			line = appendUTF8(r.line[len(r.line):], line)
		}
		if len(line) == 0 {
			// Dispatch (the standard's "dispatch the event" steps).
			r.lastID = r.idBuf
			if len(r.data) == 0 {
				r.typ = r.typ[:0]
				continue
			}
			// The buffer becomes the event's: one copy of the data, not two.
			data := r.data[: len(r.data)-1 : len(r.data)-1]
			typ := "message"
			if len(r.typ) > 0 {
				if string(r.typ) != r.prevType {
					r.prevType = string(r.typ)
				}
				typ = r.prevType
			}
			r.data, r.typ = nil, r.typ[:0]
			return Event{Type: typ, ID: r.lastID, Data: data}, nil
		}
		if line[0] == ':' {
			// A comment: a keep-alive, or a word to the person reading.
			r.comment = string(bytes.TrimPrefix(line[1:], []byte(" ")))
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			r.typ = append(r.typ[:0], value...)
		case "data":
			if len(r.data)+len(value)+1 > r.max+1 {
				return Event{}, fmt.Errorf("%w: an event's data is over %d bytes", ErrTooLarge, r.max)
			}
			r.data = append(append(r.data, value...), '\n')
		case "id":
			if bytes.IndexByte(value, 0) < 0 && string(value) != r.idBuf {
				r.idBuf = string(value)
			}
		case "retry":
			if ms, ok := digits(value); ok {
				r.retry, r.hasRetry = time.Duration(ms)*time.Millisecond, true
			}
		}
	}
}

// digits reads a retry value: only ASCII digits, at least one; a value
// too large for a Duration saturates.
func digits(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	const maxMS = math.MaxInt64 / int64(time.Millisecond)
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n > maxMS {
		n = maxMS
	}
	return n, true
}

var bom = []byte{0xEF, 0xBB, 0xBF}

// dropBOM drops one leading U+FEFF. It waits for more bytes only while
// what arrived so far is a prefix of one.
func (r *Reader) dropBOM() error {
	for n := 1; n <= len(bom); n++ {
		b, err := r.br.Peek(n)
		switch {
		case len(b) == n && b[n-1] == bom[n-1]:
			continue
		case len(b) == n, errors.Is(err, io.EOF):
			// Not a BOM, or a stream too short to hold one: readLine
			// reads what is there.
			r.bomDone = true
			return nil
		default:
			return err
		}
	}
	r.br.Discard(len(bom))
	r.bomDone = true
	return nil
}

// readLine returns the next line without its end. The slice is valid until
// the next call. At the end of the stream a line without an end is
// dropped and io.EOF returned.
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		if _, err := r.br.Peek(1); err != nil {
			return nil, err
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				r.br.Discard(1)
				continue
			}
		}
		end := bytes.IndexByte(buf, '\n')
		seg := buf
		if end >= 0 {
			seg = buf[:end]
		}
		if cr := bytes.IndexByte(seg, '\r'); cr >= 0 {
			end = cr
			r.skipLF = true
		}
		if end < 0 {
			if len(r.line)+len(buf) > r.maxLine {
				return nil, fmt.Errorf("%w: a line is over %d bytes", ErrTooLarge, r.maxLine)
			}
			r.line = append(r.line, buf...)
			r.br.Discard(len(buf))
			continue
		}
		if len(r.line)+end > r.maxLine {
			return nil, fmt.Errorf("%w: a line is over %d bytes", ErrTooLarge, r.maxLine)
		}
		var line []byte
		if len(r.line) == 0 {
			// Valid until the next read: Discard leaves the bytes in place.
			line = buf[:end:end]
		} else {
			r.line = append(r.line, buf[:end]...)
			line = r.line
		}
		r.br.Discard(end + 1)
		return line, nil
	}
}

// appendUTF8 appends src to dst with every ill-formed sequence replaced by
// one U+FFFD per maximal subpart, as the Encoding standard's UTF-8 decoder
// does (Go's own replacement differs on cut-off sequences).
func appendUTF8(dst, src []byte) []byte {
	for len(src) > 0 {
		c, size := utf8.DecodeRune(src)
		if c != utf8.RuneError || size > 1 {
			dst = append(dst, src[:size]...)
			src = src[size:]
			continue
		}
		dst = append(dst, "\uFFFD"...)
		src = src[maximalSubpart(src):]
	}
	return dst
}

// maximalSubpart is the length of the ill-formed sequence at the start of
// src that the decoder replaces with one U+FFFD.
func maximalSubpart(src []byte) int {
	b := src[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case b >= 0xC2 && b <= 0xDF:
		need = 1
	case b == 0xE0:
		need, lo = 2, 0xA0
	case b >= 0xE1 && b <= 0xEC, b == 0xEE, b == 0xEF:
		need = 2
	case b == 0xED:
		need, hi = 2, 0x9F
	case b == 0xF0:
		need, lo = 3, 0x90
	case b >= 0xF1 && b <= 0xF3:
		need = 3
	case b == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(src); n++ {
		if src[n] < lo || src[n] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}
