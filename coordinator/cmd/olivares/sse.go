package main

import (
	"bufio"
	"errors"
	"io"
	"strings"
)

// maxSSELine bounds one line of an attach stream. A data line carries one
// output frame as JSON, up to 1 MiB; the slack covers the "data: " prefix.
const maxSSELine = 1<<20 + 1<<10

// errSSELineTooLong means a line exceeded maxSSELine. Reconnecting would
// read the same frame again, so attach gives up on it.
var errSSELineTooLong = errors.New("an attach stream line is over 1 MiB")

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	Event string // "message" when the stream names none
	ID    string // the last event id seen on the stream, "" before any
	Data  string // data lines joined with "\n"
}

// sseReader reads events from a text/event-stream body, following the
// WHATWG parsing rules that matter here: "event:", "id:", "data:" (one
// leading space dropped), comments, and dispatch on a blank line. An event
// cut off by the end of the stream is dropped, never half-delivered.
type sseReader struct {
	sc     *bufio.Scanner
	lastID string
	// lastComment is the text of the last comment line, without its ':'.
	lastComment string
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	return &sseReader{sc: sc}
}

// next returns the next event, or io.EOF at a clean end of the stream, or
// the read error.
func (r *sseReader) next() (sseEvent, error) {
	var (
		event   string
		data    strings.Builder
		hasData bool
	)
	for r.sc.Scan() {
		line := r.sc.Text()
		if line == "" {
			if !hasData {
				// An event with no data line is not dispatched.
				event = ""
				continue
			}
			if event == "" {
				event = "message"
			}
			return sseEvent{Event: event, ID: r.lastID, Data: strings.TrimSuffix(data.String(), "\n")}, nil
		}
		if line[0] == ':' {
			// A comment: a keep-alive, or why the coordinator dropped us.
			r.lastComment = strings.TrimPrefix(line[1:], " ")
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			event = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
			hasData = true
		case "id":
			if !strings.ContainsRune(value, 0) {
				r.lastID = value
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return sseEvent{}, errSSELineTooLong
		}
		return sseEvent{}, err
	}
	return sseEvent{}, io.EOF
}
