package contract

import (
	"bytes"
	"io"
	"sync"
)

// Event is one dispatched server-sent event.
type Event struct {
	Name string // "message" when the stream names none
	ID   string
	Data []byte
}

// sseSplitter turns the bytes of a text/event-stream, fed as they arrive,
// into events by the WHATWG rules the validator needs: lines end in CRLF,
// LF or CR; a line starting with ':' is a comment; "field: value" loses one
// space after the colon; data lines join with LF; an empty line dispatches
// an event that has data, and an event without data is dropped.
type sseSplitter struct {
	line    []byte
	lastCR  bool
	name    string
	id      string
	data    []byte
	hasData bool
}

// feed consumes p and returns the events it completed.
func (s *sseSplitter) feed(p []byte) []Event {
	var out []Event
	for _, b := range p {
		if s.lastCR {
			s.lastCR = false
			if b == '\n' {
				continue // the LF of a CRLF
			}
		}
		switch b {
		case '\r':
			s.lastCR = true
			fallthrough
		case '\n':
			if ev, ok := s.endLine(); ok {
				out = append(out, ev)
			}
		default:
			s.line = append(s.line, b)
		}
	}
	return out
}

func (s *sseSplitter) endLine() (Event, bool) {
	line := s.line
	s.line = s.line[:0]
	if len(line) == 0 {
		if !s.hasData {
			s.name = ""
			return Event{}, false
		}
		ev := Event{Name: s.name, ID: s.id, Data: bytes.Clone(s.data)}
		if ev.Name == "" {
			ev.Name = "message"
		}
		s.name, s.data, s.hasData = "", s.data[:0], false
		return ev, true
	}
	if line[0] == ':' {
		return Event{}, false
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "event":
		s.name = string(value)
	case "data":
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.hasData = true
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			s.id = string(value)
		}
	}
	return Event{}, false
}

// sseBody validates the events of a stream as its reader reads them, and
// reports nothing once it is closed (the test may be over by then).
type sseBody struct {
	rc     io.ReadCloser
	split  sseSplitter
	check  func(Event) []string
	report func(string)

	mu     sync.Mutex
	closed bool
}

func (b *sseBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.mu.Lock()
		if !b.closed {
			for _, ev := range b.split.feed(p[:n]) {
				for _, msg := range b.check(ev) {
					b.report(msg)
				}
			}
		}
		b.mu.Unlock()
	}
	return n, err
}

func (b *sseBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return b.rc.Close()
}
