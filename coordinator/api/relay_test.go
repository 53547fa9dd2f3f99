package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// testStream is a tunnel stream fed by the test: what the agent writes
// comes out of Read; Close is recorded and ends pending reads.
type testStream struct {
	r      *io.PipeReader
	w      *io.PipeWriter
	closed atomic.Bool
}

func newTestStream() *testStream {
	r, w := io.Pipe()
	return &testStream{r: r, w: w}
}

func (s *testStream) Read(p []byte) (int, error) { return s.r.Read(p) }
func (s *testStream) Close() error {
	s.closed.Store(true)
	s.r.CloseWithError(net.ErrClosed)
	return nil
}

// frame writes one attach frame as the agent does; false once the relay
// closed the stream.
func (s *testStream) frame(p []byte) bool { return wire.WriteFrame(s.w, p) == nil }

// pipeSink is the client side as a net.Pipe: deadlines work, and a client
// that reads nothing blocks every write.
type pipeSink struct{ net.Conn }

func (pipeSink) Flush() error { return nil }

func output(seq uint64, data string) []byte {
	return proto.AppendOutput(nil, seq, 0, 1, time.Unix(1700000000, 5).UTC(), []byte(data))
}

func endFrame(e apitypes.End) []byte { return proto.AppendJSONFrame(nil, proto.AttachEnd, e) }

// readEvents reads SSE events and comments from r until it ends.
func readEvents(r io.Reader) (names []string, comments []string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		switch l := sc.Text(); {
		case strings.HasPrefix(l, "event: "):
			names = append(names, l[len("event: "):])
		case strings.HasPrefix(l, ":"):
			comments = append(comments, l)
		}
	}
	return names, comments
}

func testAttachOptions() AttachOptions {
	o := AttachOptions{}
	o.setDefaults()
	return o
}

// A client that reads every event gets them in order, and the relay stops
// at end (R-RC-9), which it passes on.
func TestRelayDeliversUntilEnd(t *testing.T) {
	st := newTestStream()
	client, server := net.Pipe()
	var names []string
	done := make(chan struct{})
	go func() { names, _ = readEvents(client); close(done) }()
	go func() {
		for i := range 100 {
			st.frame(output(uint64(i), "line\n"))
		}
		st.frame(endFrame(apitypes.End{Generation: 0}))
	}()
	if got := relay(context.Background(), st, pipeSink{server}, testAttachOptions()); got != relayFinal {
		t.Fatalf("relay: got %v, want final", got)
	}
	server.Close()
	<-done
	if len(names) != 101 || names[100] != apitypes.SSEEnd {
		t.Fatalf("events: got %d (%v...), want 100 outputs then end", len(names), names[max(0, len(names)-2):])
	}
	if !st.closed.Load() {
		t.Fatal("the tunnel stream was left open")
	}
}

// R-ATT-7 (issue 16): a viewer whose client stops reading is dropped once
// its queue is full. Its tunnel stream is closed at once — while the client's
// write is still blocked — so it holds no tunnel window; the client gets no
// end event (R-RC-9: end is the generation's exit only).
func TestRelayDropsAViewerWhoseQueueFills(t *testing.T) {
	st := newTestStream()
	client, server := net.Pipe()
	o := testAttachOptions()
	o.WriteTimeout = time.Hour // only the queue can drop it
	res := make(chan relayEnd, 1)
	go func() { res <- relay(context.Background(), st, pipeSink{server}, o) }()
	chunk := strings.Repeat("x", 60<<10)
	sent := 0
	for seq := uint64(0); st.frame(output(seq, chunk)); seq++ {
		sent += len(chunk)
		if sent > 4*o.Buffer {
			t.Fatalf("sent %d bytes to a client that reads nothing and the stream is still open", sent)
		}
	}
	if !st.closed.Load() {
		t.Fatal("the stream's writes failed but the relay did not close it")
	}
	// Now the client reads: what was written, the drop comment, no end.
	names, comments := readEvents(readAll(t, client, res))
	for _, n := range names {
		if n != apitypes.SSEOutput {
			t.Fatalf("dropped viewer got event %q", n)
		}
	}
	if len(comments) == 0 || !strings.Contains(comments[len(comments)-1], "read too slowly") {
		t.Fatalf("comments: got %q, want the drop's", comments)
	}
}

// readAll reads the client side until the relay returned and closed its
// end; it checks the relay's verdict was a drop.
func readAll(t *testing.T, client net.Conn, res chan relayEnd) io.Reader {
	t.Helper()
	var buf bytes.Buffer
	done := make(chan error, 1)
	go func() { _, err := io.Copy(&buf, client); done <- err }()
	if got := <-res; got != relaySlow {
		t.Fatalf("relay: got %v, want slow", got)
	}
	client.Close()
	<-done
	return &buf
}

// Issue 18: a client that takes no bytes within the write deadline is
// dropped and its tunnel stream closed, even when the agent sends little
// (the queue never fills).
func TestRelayWriteDeadlineDropsAStuckClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newTestStream()
		client, server := net.Pipe()
		defer client.Close()
		o := testAttachOptions()
		res := make(chan relayEnd, 1)
		go func() { res <- relay(context.Background(), st, pipeSink{server}, o) }()
		go st.frame(output(0, "one small frame"))
		synctest.Wait()
		select {
		case got := <-res:
			t.Fatalf("relay ended before the deadline: %v", got)
		default:
		}
		time.Sleep(o.WriteTimeout) // the bubble's clock: no real wait
		synctest.Wait()
		if got := <-res; got != relayGone {
			t.Fatalf("relay: got %v, want gone", got)
		}
		if !st.closed.Load() {
			t.Fatal("the tunnel stream of a stuck client was left open")
		}
	})
}

// R-ATT-9 (issue 18): an idle stream gets a ":" comment every KeepAlive.
func TestRelayKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newTestStream()
		client, server := net.Pipe()
		o := testAttachOptions()
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan relayEnd, 1)
		go func() { res <- relay(ctx, st, pipeSink{server}, o) }()
		var mu sync.Mutex
		var got bytes.Buffer
		go func() {
			b := make([]byte, 1024)
			for {
				n, err := client.Read(b)
				mu.Lock()
				got.Write(b[:n])
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
		time.Sleep(3*o.KeepAlive + time.Second)
		synctest.Wait()
		mu.Lock()
		if n := strings.Count(got.String(), keepAliveComment); n != 3 {
			t.Errorf("keep-alives after 3 intervals: got %d, want 3 (%q)", n, got.String())
		}
		mu.Unlock()
		cancel()
		if end := <-res; end != relayGone {
			t.Errorf("relay after the client went: got %v, want gone", end)
		}
		client.Close()
	})
}

// An agent that drops the viewer itself (end with reason slow_viewer) is
// passed on as a drop, not as end (issue 16).
func TestRelayAgentSlowViewerEndIsADrop(t *testing.T) {
	st := newTestStream()
	client, server := net.Pipe()
	res := make(chan relayEnd, 1)
	go func() { res <- relay(context.Background(), st, pipeSink{server}, testAttachOptions()) }()
	go func() {
		st.frame(output(7, "a"))
		st.frame(endFrame(apitypes.End{Reason: reasonSlowViewer}))
	}()
	names, comments := readEvents(readAll(t, client, res))
	if len(names) != 1 || names[0] != apitypes.SSEOutput {
		t.Fatalf("events: got %v, want one output and no end", names)
	}
	if len(comments) != 1 {
		t.Fatalf("comments: got %q, want the drop's", comments)
	}
}

// Frames split anywhere between reads (straddling the queue's chunks) come
// out whole and in order; a stream that ends without end is lost (R-RC-8).
func TestRelayReassemblesSplitFrames(t *testing.T) {
	var in bytes.Buffer
	var want []byte
	for i := range 40 {
		data := strings.Repeat(string(rune('a'+i%26)), (i*7919)%(150<<10))
		p := output(uint64(i), data)
		wire.WriteFrame(&in, p)
		f, _ := proto.ParseAttachFrame(p)
		want = appendEvent(want, f)
	}
	o := testAttachOptions()
	o.Buffer = 64 << 20 // the test's stream is faster than its client
	for _, step := range []int{5, 4096, 65536 + 5, 200000} {
		client, server := net.Pipe()
		var got bytes.Buffer
		done := make(chan struct{})
		go func() { io.Copy(&got, client); close(done) }()
		st := &chunkedStream{data: in.Bytes(), step: step}
		if end := relay(context.Background(), st, pipeSink{server}, o); end != relayLost {
			t.Fatalf("step %d: relay: got %v, want lost", step, end)
		}
		server.Close()
		<-done
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("step %d: got %d bytes, want %d", step, got.Len(), len(want))
		}
	}
}

// chunkedStream returns data at most step bytes per Read, then EOF.
type chunkedStream struct {
	data []byte
	step int
}

func (s *chunkedStream) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), s.step)], s.data)
	s.data = s.data[n:]
	return n, nil
}
func (s *chunkedStream) Close() error { return nil }

// A frame whose length is over wire.MaxFrame ends the relay as a lost
// stream instead of buffering it.
func TestRelayRefusesAnOversizedFrame(t *testing.T) {
	client, server := net.Pipe()
	go io.Copy(io.Discard, client)
	bad := []byte{0x7f, 0xff, 0xff, 0xff, 1}
	if end := relay(context.Background(), &chunkedStream{data: bad, step: 1}, pipeSink{server}, testAttachOptions()); end != relayLost {
		t.Fatalf("relay: got %v, want lost", end)
	}
}

// The attach cap: a principal's slots run out at max, another principal
// keeps its own, and a released slot can be taken again; with a total, the
// total runs out for everyone (R-CHG-6).
func TestStreamSlots(t *testing.T) {
	var a streamSlots
	var rels []func()
	for range 3 {
		rel, _, ok := a.acquire("p1", 3, 0)
		if !ok {
			t.Fatal("a free slot was refused")
		}
		rels = append(rels, rel)
	}
	if _, n, ok := a.acquire("p1", 3, 0); ok || n != 3 {
		t.Fatalf("4th attach: got %v %d, want refused with 3 held", ok, n)
	}
	if _, _, ok := a.acquire("p2", 3, 0); !ok {
		t.Fatal("another principal was refused")
	}
	rels[0]()
	rels[0]() // twice is once
	if _, _, ok := a.acquire("p1", 3, 0); !ok {
		t.Fatal("refused after a release")
	}
	if _, _, ok := a.acquire("p1", 3, 0); ok {
		t.Fatal("a double release freed two slots")
	}
	if _, n, ok := a.acquire("p3", 3, 4); ok || n != -1 { // 4 open
		t.Fatalf("past the total: got %v %d, want refused with -1", ok, n)
	}
}

// FuzzAppendOutputEvent: the hand encoder writes exactly what
// encoding/json writes for apitypes.Output, for any bytes (UTF-8 or not)
// and any stream and time.
func FuzzAppendOutputEvent(f *testing.F) {
	for _, s := range []string{"", "hello\n", "<a&b>\"\\\x00\x1f\x7f", "\u2028\u2029é", "\xff\xfe", "ok\xc3", "\t\b\f\r"} {
		f.Add([]byte(s), uint64(1), uint32(0), byte(1), int64(1700000000123456789))
	}
	f.Fuzz(func(t *testing.T, data []byte, seq uint64, gen uint32, stream byte, at int64) {
		fr := proto.AttachFrame{Type: proto.AttachOutput, Seq: seq, Generation: gen, Stream: stream, At: time.Unix(0, at).UTC(), Data: data}
		o := apitypes.Output{Seq: seq, Generation: gen, Stream: proto.StreamName(stream), At: fr.At, Data: string(data), Encoding: "utf8"}
		if !utf8Valid(data) {
			o.Data, o.Encoding = b64(data), "base64"
		}
		want, err := json.Marshal(o)
		if err != nil {
			t.Skip(err) // a year encoding/json refuses
		}
		got := appendOutputJSON([]byte("prefix"), fr)
		if !bytes.Equal(got[6:], want) {
			t.Fatalf("got  %s\nwant %s", got[6:], want)
		}
		var back apitypes.Output
		if err := json.Unmarshal(got[6:], &back); err != nil {
			t.Fatal(err)
		}
	})
}

func TestAppendEventKinds(t *testing.T) {
	at := time.Unix(1, 0).UTC()
	for _, tc := range []struct {
		f    proto.AttachFrame
		want string
	}{
		{proto.AttachFrame{Type: proto.AttachOutput, Seq: 3, Stream: 2, At: at, Data: []byte("e")}, "id: 3\nevent: output\ndata: {\"seq\":3,\"generation\":0,\"stream\":\"stderr\",\"at\":\"1970-01-01T00:00:01Z\",\"data\":\"e\",\"encoding\":\"utf8\"}\n\n"},
		{proto.AttachFrame{Type: proto.AttachOutput, Seq: 4, Stream: proto.StreamNotice, Data: []byte(`{"kind":"history_withheld"}`)}, "id: 4\nevent: olivares_notice\ndata: {\"kind\":\"history_withheld\"}\n\n"},
		{proto.AttachFrame{Type: proto.AttachLag, Data: []byte(`{"requested_from":0,"resumed_from":9}`)}, "event: lag\ndata: {\"requested_from\":0,\"resumed_from\":9}\n\n"},
		{proto.AttachFrame{Type: proto.AttachNotice, Data: []byte(`{"kind":"not_live","state":"stopped"}`)}, "event: notice\ndata: {\"kind\":\"not_live\",\"state\":\"stopped\"}\n\n"},
		{proto.AttachFrame{Type: proto.AttachEnd, Data: []byte(`{"generation":1}`)}, "event: end\ndata: {\"generation\":1}\n\n"},
	} {
		if got := string(appendEvent(nil, tc.f)); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func utf8Valid(b []byte) bool { return utf8.Valid(b) }
func b64(b []byte) string     { return base64.StdEncoding.EncodeToString(b) }
