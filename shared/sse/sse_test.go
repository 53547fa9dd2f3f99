package sse

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// ev is an event as the tables write it.
type ev struct{ typ, id, data string }

// readAll reads every event of in, in chunks of one byte when oneByte, and
// returns them with the error that ended the stream (nil for io.EOF).
func readAll(in string, max int, oneByte bool) ([]ev, *Reader, error) {
	var src io.Reader = strings.NewReader(in)
	if oneByte {
		src = iotest.OneByteReader(src)
	}
	r := NewReaderSize(src, max)
	var out []ev
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, r, nil
		}
		if err != nil {
			return out, r, err
		}
		out = append(out, ev{e.Type, e.ID, string(e.Data)})
	}
}

func TestReader(t *testing.T) {
	long := strings.Repeat("x", 2048)
	for _, tc := range []struct {
		name string
		in   string
		want []ev
	}{
		// The standard's examples (the HTML Living Standard's server-sent
		// events section: its stock, id and empty-data streams).
		{"stock example: multi-line data", "data: YHOO\ndata: +2\ndata: 10\n\n", []ev{{"message", "", "YHOO\n+2\n10"}}},
		{"ids: set, reset by an empty id, kept", ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n",
			[]ev{{"message", "1", "first event"}, {"message", "", "second event"}, {"message", "", " third event"}}},
		{"empty data fields", "data\n\ndata\ndata\n\ndata:", []ev{{"message", "", ""}, {"message", "", "\n"}}},
		{"one space dropped, not two", "data:test\n\ndata: test\n\ndata:  test\n\n",
			[]ev{{"message", "", "test"}, {"message", "", "test"}, {"message", "", " test"}}},
		{"event type", "event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\nevent: add\ndata: 113411\n\n",
			[]ev{{"add", "", "73857293"}, {"remove", "", "2153"}, {"add", "", "113411"}}},
		// Line ends.
		{"CRLF", "event: x\r\nid: 9\r\ndata: y\r\n\r\n", []ev{{"x", "9", "y"}}},
		{"CR", "data: a\rdata: b\r\rdata: c\r\r", []ev{{"message", "", "a\nb"}, {"message", "", "c"}}},
		{"mixed ends", "data: a\r\ndata: b\rdata: c\n\r\n", []ev{{"message", "", "a\nb\nc"}}},
		{"CR then LF is one end, LF then CR two", "data: a\n\rdata: b\r\n\n", []ev{{"message", "", "a"}, {"message", "", "b"}}},
		// The WPT comment fest, with its line ends.
		{"comments", "data:1\r:\x00\n:\r\ndata:2\n:" + long + "\rdata:3\n:data:fail\r:" + long + "\ndata:4\n\n",
			[]ev{{"message", "", "1\n2\n3\n4"}}},
		// BOM: one leading BOM is dropped; a second one is part of the
		// field name (WPT format-bom, format-bom-2).
		{"BOM", "\uFEFFdata: 1\n\n\uFEFFdata: 2\n\ndata: 3\n\n", []ev{{"message", "", "1"}, {"message", "", "3"}}},
		{"double BOM", "\uFEFF\uFEFFdata: 1\n\ndata: 2\n\n", []ev{{"message", "", "2"}}},
		{"BOM-like start", "\xEF\xBBdata: 1\n\ndata: 2\n\n", []ev{{"message", "", "2"}}},
		// Dispatch rules.
		{"no dispatch without data, type does not leak", "event: lag\n\ndata: a\n\n", []ev{{"message", "", "a"}}},
		{"cut-off event dropped", "data: a\n\nevent: output\ndata: b\n", []ev{{"message", "", "a"}}},
		{"cut-off line dropped", "data: a\n\ndata: b", []ev{{"message", "", "a"}}},
		{"type resets after dispatch", "event: x\ndata: 1\n\ndata: 2\n\n", []ev{{"x", "", "1"}, {"message", "", "2"}}},
		{"last event field wins", "event: a\nevent: b\ndata: 1\n\n", []ev{{"b", "", "1"}}},
		{"empty event field is message", "event\ndata: 1\n\n", []ev{{"message", "", "1"}}},
		// Fields.
		{"colon in value", "data: {\"k\":\"v: w\"}\n\n", []ev{{"message", "", `{"k":"v: w"}`}}},
		{"unknown fields and case", "foo: bar\nData: no\nDATA: no\ndata: z\n\n", []ev{{"message", "", "z"}}},
		{"field without colon", "data\n\n", []ev{{"message", "", ""}}},
		{"space before colon is part of the name", "data : x\ndata: y\n\n", []ev{{"message", "", "y"}}},
		{"id persists and changes", "id: 3\ndata: a\n\ndata: b\n\nid: 4\ndata: c\n\n",
			[]ev{{"message", "3", "a"}, {"message", "3", "b"}, {"message", "4", "c"}}},
		{"id with NUL ignored", "id: 5\ndata: a\n\nid: 6\x00\ndata: b\n\n", []ev{{"message", "5", "a"}, {"message", "5", "b"}}},
		{"id on an event without data still counts", "id: 7\n\ndata: a\n\n", []ev{{"message", "7", "a"}}},
		{"id keeps its spaces after the first", "id:  8 \ndata: a\n\n", []ev{{"message", " 8 ", "a"}}},
		// UTF-8: ill-formed bytes become U+FFFD, one per maximal subpart.
		{"ill-formed UTF-8", "data: a\xFFb\xE2\x82c\xF0\x9F\x98\n\n", []ev{{"message", "", "a\uFFFDb\uFFFDc\uFFFD"}}},
		{"surrogate bytes", "data: \xED\xA0\x80\n\n", []ev{{"message", "", "\uFFFD\uFFFD\uFFFD"}}},
		{"nothing", "", nil},
		{"only comments", ": a\n: b\n\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, oneByte := range []bool{false, true} {
				got, _, err := readAll(tc.in, 0, oneByte)
				if err != nil {
					t.Fatalf("oneByte=%v: %v", oneByte, err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("oneByte=%v: got %q, want %q", oneByte, got, tc.want)
				}
			}
		})
	}
}

func TestLastEventIDAndRetry(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        string
		lastID    string
		retry     time.Duration
		haveRetry bool
	}{
		{"id then blank line", "id: 9\n\n", "9", 0, false},
		{"id without a blank line is not yet the last", "id: 1\n\nid: 2\n", "1", 0, false},
		{"retry digits", "retry: 1500\n\n", "", 1500 * time.Millisecond, true},
		{"retry not digits ignored", "retry: 15s\nretry: -1\nretry: 1.5\nretry:\n\n", "", 0, false},
		{"retry with a space twice", "retry:  10\n\n", "", 0, false},
		{"last retry wins", "retry: 10\nretry: 20\n", "", 20 * time.Millisecond, true},
		{"huge retry saturates", "retry: 99999999999999999999999\n", "", time.Duration(1<<63-1) / time.Millisecond * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, r, err := readAll(tc.in, 0, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.LastEventID(); got != tc.lastID {
				t.Errorf("LastEventID() = %q, want %q", got, tc.lastID)
			}
			d, ok := r.Retry()
			if d != tc.retry || ok != tc.haveRetry {
				t.Errorf("Retry() = %v, %v, want %v, %v", d, ok, tc.retry, tc.haveRetry)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	const max = 1 << 10
	big := strings.Repeat("x", max)
	for _, tc := range []struct {
		name    string
		in      string
		want    []ev
		tooLong bool
	}{
		{"data at the limit", "data: " + big + "\n\n", []ev{{"message", "", big}}, false},
		{"data over the limit in one line", "data: " + big + "x\n\n", nil, true},
		{"data over the limit over lines", "data: " + big[:max/2] + "\ndata: " + big[:max/2] + "\n\n", nil, true},
		{"joined data at the limit", "data: " + big[:max/2] + "\ndata: " + big[:max/2-1] + "\n\n", []ev{{"message", "", big[:max/2] + "\n" + big[:max/2-1]}}, false},
		{"long comment line", ": " + big + big + "\n\ndata: a\n\n", nil, true},
		{"event before the long one is read", "data: a\n\ndata: " + big + big + "\n\n", []ev{{"message", "", "a"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, oneByte := range []bool{false, true} {
				got, r, err := readAll(tc.in, max, oneByte)
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("oneByte=%v: got %q, want %q", oneByte, got, tc.want)
				}
				if tc.tooLong != errors.Is(err, ErrTooLarge) {
					t.Errorf("oneByte=%v: err %v, want ErrTooLarge %v", oneByte, err, tc.tooLong)
				}
				if tc.tooLong {
					if _, again := r.Next(); !errors.Is(again, ErrTooLarge) {
						t.Errorf("oneByte=%v: second Next: %v, want the same error", oneByte, again)
					}
				}
			}
		})
	}
}

// A reader error other than EOF is returned as is, after the events before it.
func TestReadError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom)))
	e, err := r.Next()
	if err != nil || string(e.Data) != "a" {
		t.Fatalf("got %q, %v, want a, nil", e.Data, err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("got %v, want %v", err, boom)
	}
}

// An event is dispatched as soon as its blank line arrives: the reader never
// waits for bytes after it, even after a CR that a LF might follow.
func TestNoReadAhead(t *testing.T) {
	for _, in := range []string{"data: a\n\n", "data: a\r\r", "data: a\r\n\r\n", ": c\r\rdata: a\r\r"} {
		pr, pw := io.Pipe()
		go func() { pw.Write([]byte(in)) }() // then blocks until the test ends
		r := NewReader(pr)
		done := make(chan error, 1)
		go func() {
			e, err := r.Next()
			if err == nil && string(e.Data) != "a" {
				err = errors.New("data " + string(e.Data))
			}
			done <- err
		}()
		if err := <-done; err != nil {
			t.Errorf("%q: %v", in, err)
		}
		pw.Close()
	}
}

// reference is the standard's algorithm written as plainly as possible, on
// the whole stream at once: the fuzzer's oracle.
func reference(in []byte, max int) (events []ev, lastID string, tooLarge bool) {
	s := string(in)
	s = strings.TrimPrefix(s, "\uFEFF")
	var data strings.Builder
	var typ, idBuf string
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			// A line without an end is dropped; one over the limit was
			// already too long to keep.
			return events, lastID, len(s) > max+lineSlack
		}
		if i > max+lineSlack {
			return events, lastID, true
		}
		// CR and LF are never inside a UTF-8 sequence: decoding line by
		// line is decoding the stream.
		line := string(appendUTF8(nil, []byte(s[:i])))
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
		switch {
		case line == "":
			lastID = idBuf
			if data.Len() == 0 {
				typ = ""
				continue
			}
			d := strings.TrimSuffix(data.String(), "\n")
			t := typ
			if t == "" {
				t = "message"
			}
			events = append(events, ev{t, lastID, d})
			data.Reset()
			typ = ""
			continue
		case line[0] == ':':
			continue
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			typ = value
		case "data":
			if data.Len()+len(value) > max {
				return events, lastID, true
			}
			data.WriteString(value)
			data.WriteByte('\n')
		case "id":
			if !strings.ContainsRune(value, 0) {
				idBuf = value
			}
		}
	}
}

// FuzzReader checks the Reader against the reference on any input, read
// whole and one byte at a time, with a small limit so that the limits are
// reached too. The seed corpus is in testdata/fuzz/FuzzReader.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"event: output\nid: 1\ndata: {\"seq\":1}\n\n",
		"data: a\ndata: b\n\n: c\n\nid\n\ndata\n\n",
		"data: a\r\ndata: b\rdata: c\n\r\n",
		"\uFEFF\uFEFFdata: x\n\n",
		"retry: 10\nid: \x00\ndata: \xE2\x82\n\n",
	} {
		f.Add([]byte(s))
	}
	const max = 64
	f.Fuzz(func(t *testing.T, in []byte) {
		want, wantID, wantLarge := reference(in, max)
		for _, oneByte := range []bool{false, true} {
			got, r, err := readAll(string(in), max, oneByte)
			if err != nil && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("oneByte=%v: %v", oneByte, err)
			}
			if errors.Is(err, ErrTooLarge) != wantLarge {
				t.Fatalf("oneByte=%v: err %v, reference too large %v", oneByte, err, wantLarge)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("oneByte=%v: got %q, reference %q", oneByte, got, want)
			}
			if !wantLarge && r.LastEventID() != wantID {
				t.Fatalf("oneByte=%v: LastEventID %q, reference %q", oneByte, r.LastEventID(), wantID)
			}
			for _, e := range got {
				if len(e.data) > max {
					t.Fatalf("an event of %d bytes passed the limit of %d", len(e.data), max)
				}
			}
		}
	})
}

// BenchmarkReader reads attach-like events of 16 KiB.
func BenchmarkReader(b *testing.B) {
	var buf bytes.Buffer
	payload := strings.Repeat("y", 16<<10)
	for i := range 256 {
		buf.WriteString("id: ")
		buf.WriteString(strings.Repeat("1", 1+i%6))
		buf.WriteString("\nevent: output\ndata: {\"data\":\"" + payload + "\"}\n\n")
	}
	in := buf.Bytes()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		r := NewReader(bytes.NewReader(in))
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}

// LastComment keeps the last comment line's text: the coordinator says why
// it drops a viewer in one before it ends the stream (R-ATT-7).
func TestLastComment(t *testing.T) {
	r := NewReader(strings.NewReader(":\n\nid: 1\ndata: x\n\n: dropped: this viewer read too slowly\n\n"))
	if got := r.LastComment(); got != "" {
		t.Fatalf("before any line: got %q, want \"\"", got)
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if got := r.LastComment(); got != "" {
		t.Fatalf("after a keep-alive: got %q, want \"\"", got)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("got %v, want EOF", err)
	}
	if got, want := r.LastComment(), "dropped: this viewer read too slowly"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
