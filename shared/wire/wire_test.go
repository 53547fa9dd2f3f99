package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/shared/apierr"
)

// countingWriter records how many Write calls a frame took.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

func prefixed(n uint32, body string) []byte {
	b := binary.BigEndian.AppendUint32(nil, n)
	return append(b, body...)
}

func TestMessageRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	in := Header{Op: "attach", RunRef: "run_1", Params: json.RawMessage(`{"from":3}`)}
	if err := WriteMessage(&buf, in); err != nil {
		t.Fatal(err)
	}
	if got, want := binary.BigEndian.Uint32(buf.Bytes()), uint32(buf.Len()-4); got != want {
		t.Fatalf("length prefix = %d, want %d", got, want)
	}
	var out Header
	if err := ReadMessage(&buf, &out); err != nil {
		t.Fatal(err)
	}
	if out.Op != in.Op || out.RunRef != in.RunRef || string(out.Params) != string(in.Params) {
		t.Fatalf("got %+v, want %+v", out, in)
	}
	if err := ReadMessage(&buf, &out); err != io.EOF {
		t.Fatalf("read past the last message: got %v, want io.EOF", err)
	}
}

func TestReadMessageErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, io.EOF},
		{"short prefix", []byte{0, 0}, io.ErrUnexpectedEOF},
		{"short body", prefixed(10, `{"op"`), io.ErrUnexpectedEOF},
		{"prefix only", prefixed(2, ""), io.ErrUnexpectedEOF},
		{"too large", prefixed(MaxMessage+1, ""), ErrTooLarge},
		{"max uint32", prefixed(^uint32(0), ""), ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Header
			if err := ReadMessage(bytes.NewReader(tt.in), &h); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	t.Run("bad json", func(t *testing.T) {
		var h Header
		err := ReadMessage(bytes.NewReader(prefixed(3, "{x}")), &h)
		var se *json.SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("got %v, want a *json.SyntaxError", err)
		}
	})
}

func TestWriteMessageTooLarge(t *testing.T) {
	var buf bytes.Buffer
	err := WriteMessage(&buf, strings.Repeat("x", MaxMessage))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("refused message wrote %d bytes, want 0", buf.Len())
	}
}

func TestFrames(t *testing.T) {
	sizes := []int{0, 1, 64, coalesceMax, coalesceMax + 1, MaxFrame}
	for _, n := range sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			p := bytes.Repeat([]byte{byte(n)}, n)
			var w countingWriter
			if err := WriteFrame(&w, p); err != nil {
				t.Fatal(err)
			}
			if n <= coalesceMax && w.writes != 1 {
				t.Fatalf("frame of %d bytes took %d writes, want 1", n, w.writes)
			}
			got, err := ReadFrame(&w, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, p) {
				t.Fatalf("payload of %d bytes came back as %d bytes", n, len(got))
			}
			if _, err := ReadFrame(&w, nil); err != io.EOF {
				t.Fatalf("after the last frame: got %v, want io.EOF", err)
			}
		})
	}
}

func TestReadFrameReusesBuffer(t *testing.T) {
	var buf bytes.Buffer
	for _, s := range []string{"hello", "hi", "a longer frame than the buffer"} {
		if err := WriteFrame(&buf, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	scratch := make([]byte, 0, 16)
	for i, want := range []string{"hello", "hi"} {
		got, err := ReadFrame(&buf, scratch)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("frame %d = %q, want %q", i, got, want)
		}
		if &got[:1][0] != &scratch[:1][0] {
			t.Fatalf("frame %d did not reuse the buffer", i)
		}
	}
	got, err := ReadFrame(&buf, scratch)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "a longer frame than the buffer" {
		t.Fatalf("got %q", got)
	}
}

func TestReadFrameErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"short prefix", []byte{0}, io.ErrUnexpectedEOF},
		{"short payload", prefixed(5, "abc"), io.ErrUnexpectedEOF},
		{"too large", prefixed(MaxFrame+1, ""), ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ReadFrame(bytes.NewReader(tt.in), make([]byte, 0, 64)); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	var buf bytes.Buffer
	if err := WriteFrame(&buf, make([]byte, MaxFrame+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("WriteFrame over MaxFrame: got %v, want ErrTooLarge", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("refused frame wrote %d bytes, want 0", buf.Len())
	}
}

func TestReadFrameAllocs(t *testing.T) {
	var frame bytes.Buffer
	if err := WriteFrame(&frame, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	raw := frame.Bytes()
	r := bytes.NewReader(raw)
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(raw)
		if _, err := ReadFrame(r, buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("ReadFrame allocated %v times per frame, want 0", allocs)
	}
}

type params struct {
	N int `json:"n"`
}

// serve answers one call on conn with fn.
func serve(t *testing.T, conn net.Conn, fn func(Header) (any, error)) {
	t.Helper()
	go func() {
		defer conn.Close()
		var h Header
		if err := ReadMessage(conn, &h); err != nil {
			return
		}
		res, err := fn(h)
		Respond(conn, res, err)
	}()
}

func TestCall(t *testing.T) {
	tests := []struct {
		name    string
		handler func(Header) (any, error)
		want    params
		wantErr *Error
	}{
		{
			name: "ok",
			handler: func(h Header) (any, error) {
				var p params
				if err := json.Unmarshal(h.Params, &p); err != nil {
					return nil, err
				}
				return params{N: p.N + 1}, nil
			},
			want: params{N: 42},
		},
		{
			name: "wire error passes through",
			handler: func(Header) (any, error) {
				return nil, fmt.Errorf("lookup: %w", &Error{Status: http.StatusNotFound, Code: "run_not_found", Message: "no run run_1"})
			},
			wantErr: &Error{Status: http.StatusNotFound, Code: "run_not_found", Message: "no run run_1"},
		},
		{
			name:    "plain error becomes agent_error",
			handler: func(Header) (any, error) { return nil, errors.New("disk full") },
			wantErr: &Error{Status: http.StatusInternalServerError, Code: "agent_error", Message: "disk full"},
		},
		{
			name:    "unmarshallable result",
			handler: func(Header) (any, error) { return func() {}, nil },
			wantErr: &Error{Status: http.StatusInternalServerError, Code: "agent_error"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			serve(t, b, tt.handler)
			var got params
			err := Call(a, Header{Op: "inc"}, params{N: 41}, &got)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got != tt.want {
					t.Fatalf("got %+v, want %+v", got, tt.want)
				}
				return
			}
			var we *Error
			if !errors.As(err, &we) {
				t.Fatalf("got %v, want a *wire.Error", err)
			}
			if we.Status != tt.wantErr.Status || we.Code != tt.wantErr.Code || (tt.wantErr.Message != "" && we.Message != tt.wantErr.Message) {
				t.Fatalf("got %+v, want %+v", we, tt.wantErr)
			}
		})
	}
}

func TestCallWithoutReply(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		var h Header
		ReadMessage(b, &h)
		b.Close()
	}()
	err := Call(a, Header{Op: "hang_up"}, nil, nil)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestCallRefusedWithoutError(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		defer b.Close()
		var h Header
		ReadMessage(b, &h)
		WriteMessage(b, Reply{})
	}()
	var we *Error
	if err := Call(a, Header{Op: "x"}, nil, nil); !errors.As(err, &we) || we.Code != "bad_reply" {
		t.Fatalf("got %v, want a bad_reply *wire.Error", err)
	}
}

func FuzzReadMessage(f *testing.F) {
	f.Add(prefixed(0, ""))
	f.Add(prefixed(2, "{}"))
	f.Add(prefixed(13, `{"op":"ping"}`))
	f.Add(prefixed(45, `{"op":"attach","run_ref":"r1","params":{"a":1}}`))
	f.Add(prefixed(MaxMessage+1, ""))
	f.Add(prefixed(3, "{}"))
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		var h Header
		err := ReadMessage(bytes.NewReader(in), &h)
		if len(in) >= 4 && binary.BigEndian.Uint32(in) > MaxMessage && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("length over MaxMessage: got %v, want ErrTooLarge", err)
		}
		if err != nil {
			return
		}
		// What was read writes back and reads again to the same header.
		var buf bytes.Buffer
		if err := WriteMessage(&buf, h); err != nil {
			t.Fatal(err)
		}
		var again Header
		if err := ReadMessage(&buf, &again); err != nil {
			t.Fatal(err)
		}
		if again.Op != h.Op || again.RunRef != h.RunRef {
			t.Fatalf("got %+v, want %+v", again, h)
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	f.Add(prefixed(0, ""), 0)
	f.Add(prefixed(3, "abc"), 8)
	f.Add(prefixed(5, "abc"), 8)
	f.Add(append(prefixed(1, "a"), prefixed(2, "bc")...), 2)
	f.Add(prefixed(MaxFrame+1, ""), 64)
	f.Add([]byte{1}, 0)
	f.Fuzz(func(t *testing.T, in []byte, bufCap int) {
		if bufCap < 0 || bufCap > 1<<16 {
			bufCap = 0
		}
		r := bytes.NewReader(in)
		buf := make([]byte, 0, bufCap)
		consumed := 0
		for {
			p, err := ReadFrame(r, buf)
			if err == io.EOF {
				if consumed != len(in) {
					t.Fatalf("io.EOF after %d of %d bytes", consumed, len(in))
				}
				return
			}
			if err != nil {
				return
			}
			if want := binary.BigEndian.Uint32(in[consumed:]); uint32(len(p)) != want {
				t.Fatalf("frame of %d bytes, prefix says %d", len(p), want)
			}
			if !bytes.Equal(p, in[consumed+4:consumed+4+len(p)]) {
				t.Fatal("payload differs from the input")
			}
			consumed += 4 + len(p)
		}
	})
}

func BenchmarkWriteReadFrame(b *testing.B) {
	p := make([]byte, 32<<10)
	buf := make([]byte, 0, len(p))
	var w bytes.Buffer
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		w.Reset()
		if err := WriteFrame(&w, p); err != nil {
			b.Fatal(err)
		}
		if _, err := ReadFrame(&w, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// One envelope, two JSON forms (R-API-4): a tunnel reply's error carries
// its status; the same error as an API answer's body leaves the status to
// the status line and carries the request id (R-OBS-4).
func TestErrorEnvelope(t *testing.T) {
	we := &Error{Status: http.StatusNotFound, Code: "not_found", Message: `run "run_1" not found`}
	var b bytes.Buffer
	if err := Respond(&b, nil, we); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String()[prefixLen:], `{"ok":false,"error":{"status":404,"code":"not_found","message":"run \"run_1\" not found"}}`; got != want {
		t.Errorf("tunnel reply %s, want %s", got, want)
	}
	var r Reply
	if err := ReadMessage(&b, &r); err != nil || *r.Error != *we {
		t.Fatalf("read back %+v, %v; want %+v", r.Error, err, we)
	}
	body, _ := json.Marshal(apierr.BodyOf((*apierr.Error)(we), "req_1"))
	if got, want := string(body), `{"error":{"code":"not_found","message":"run \"run_1\" not found","request_id":"req_1"}}`; got != want {
		t.Errorf("API body %s, want %s", got, want)
	}
	if we.Error() != (*apierr.Error)(we).Error() || we.Status != http.StatusNotFound {
		t.Errorf("the conversion changed the error: %v", we)
	}
}
