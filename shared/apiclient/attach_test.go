package apiclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/sse"
)

func startStream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

// frame writes an output event at seq (its id).
func frame(w http.ResponseWriter, seq uint64, text string) {
	o, _ := json.Marshal(apitypes.Output{Seq: seq, Generation: 1, Stream: "stdout", Data: text, Encoding: "utf8"})
	fmt.Fprintf(w, "id: %d\nevent: output\ndata: %s\n\n", seq, o)
	w.(http.Flusher).Flush()
}

func event(w http.ResponseWriter, typ string, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
	w.(http.Flusher).Flush()
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// connLog records each connection's from= (or "-") and Last-Event-ID.
type connLog struct {
	mu    sync.Mutex
	froms []string
	lasts []string
}

func (l *connLog) add(r *http.Request) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	from := "-"
	if r.URL.Query().Has("from") {
		from = r.URL.Query().Get("from")
	}
	l.froms = append(l.froms, from)
	l.lasts = append(l.lasts, r.Header.Get("Last-Event-ID"))
	return len(l.froms)
}

// outputs reads s to its end and returns the seqs of its output events, the
// types of the others, and the error that ended it.
func drain(s *apiclient.Stream) (seqs []string, others []string, err error) {
	for {
		ev, err := s.Next()
		if err != nil {
			return seqs, others, err
		}
		if ev.Type == apitypes.SSEOutput {
			seqs = append(seqs, ev.ID)
		} else {
			others = append(others, ev.Type)
		}
	}
}

// A reconnecting stream picks up at the seq after the last frame it
// returned, skips what the server replays, retries a 5xx with a doubling
// pause that starts over after progress, and ends after the end event.
func TestAttachReconnects(t *testing.T) {
	var log connLog
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		switch log.add(r) {
		case 1:
			startStream(w)
			frame(w, 1, "a")
			frame(w, 2, "b")
			fmt.Fprint(w, "id: 3\nevent: output\ndata: {\"seq\":3,\"da") // cut off
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		case 2:
			startStream(w) // a clean end without end or notice is a drop too
			frame(w, 2, "b again")
			frame(w, 3, "c")
		case 3, 4:
			writeErr(w, http.StatusServiceUnavailable, "node_unreachable", "the node has no tunnel")
		case 5:
			startStream(w)
			event(w, apitypes.SSELag, apitypes.Lag{RequestedFrom: 4, ResumedFrom: 6})
			frame(w, 6, "f")
			event(w, apitypes.SSEEnd, apitypes.End{Generation: 1, Reason: "slow_viewer"})
		default:
			startStream(w)
			frame(w, 7, "g")
			code := 0
			event(w, apitypes.SSEEnd, apitypes.End{Generation: 1, ExitCode: &code})
			frame(w, 8, "after the end")
		}
	})
	var waits []time.Duration
	var causes []string
	c := apiclient.New(apiclient.Config{URL: srv.URL})
	s, err := c.Attach(context.Background(), "run_1", apiclient.AttachOptions{Reconnect: true,
		Wait: func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return ctx.Err() },
		OnReconnect: func(cause error, next uint64, have bool) {
			causes = append(causes, fmt.Sprintf("%v@%d/%v", cause, next, have))
		}})
	if err != nil {
		t.Fatal(err)
	}
	seqs, others, err := drain(s)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("ended with %v, want io.EOF", err)
	}
	if want := []string{"1", "2", "3", "6", "7"}; !reflect.DeepEqual(seqs, want) {
		t.Errorf("frames %q, want %q", seqs, want)
	}
	if want := []string{"lag", "end", "end"}; !reflect.DeepEqual(others, want) {
		t.Errorf("other events %q, want %q", others, want)
	}
	if want := []string{"-", "3", "4", "4", "4", "7"}; !reflect.DeepEqual(log.froms, want) {
		t.Errorf("from per connection %q, want %q", log.froms, want)
	}
	ms := time.Millisecond
	if want := []time.Duration{100 * ms, 100 * ms, 200 * ms, 400 * ms, 100 * ms}; !reflect.DeepEqual(waits, want) {
		t.Errorf("pauses %v, want %v", waits, want)
	}
	unreach := "the node has no tunnel (node_unreachable)"
	if want := []string{"unexpected EOF@3/true", "<nil>@4/true", unreach + "@4/true", unreach + "@4/true", apiclient.ErrSlowViewer.Error() + "@7/true"}; !reflect.DeepEqual(causes, want) {
		t.Errorf("reconnects %q, want %q", causes, want)
	}
}

// Without Reconnect the stream is the one connection: it ends when the
// server closes it, after whatever it sent (even past an end event).
func TestAttachOnce(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		startStream(w)
		frame(w, 1, "a")
		event(w, apitypes.SSEEnd, apitypes.End{Generation: 1})
		frame(w, 2, "b")
	})
	s, err := apiclient.New(apiclient.Config{URL: srv.URL}).Attach(context.Background(), "run_1", apiclient.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seqs, others, err := drain(s)
	if !errors.Is(err, io.EOF) || !reflect.DeepEqual(seqs, []string{"1", "2"}) || !reflect.DeepEqual(others, []string{"end"}) {
		t.Fatalf("got %q %q %v", seqs, others, err)
	}
	if _, err := s.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the end: %v, want io.EOF again", err)
	}
	if ct := s.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
}

// An error answer is the attach's error: a 4xx at once, whatever the
// options; a 5xx at once without Reconnect.
func TestAttachRefused(t *testing.T) {
	status := http.StatusNotFound
	srv := server(t, func(w http.ResponseWriter, r *http.Request) { writeErr(w, status, "not_found", `run "x" not found`) })
	c := apiclient.New(apiclient.Config{URL: srv.URL})
	for _, tt := range []struct {
		status    int
		reconnect bool
	}{{404, true}, {404, false}, {503, false}} {
		status = tt.status
		_, err := c.Attach(context.Background(), "x", apiclient.AttachOptions{Reconnect: tt.reconnect})
		if apiclient.StatusOf(err) != tt.status || apiclient.CodeOf(err) != "not_found" {
			t.Errorf("status %d, reconnect %v: got %v", tt.status, tt.reconnect, err)
		}
	}
}

// Last-Event-ID goes on the first connection only; from= on the next ones.
func TestAttachLastEventID(t *testing.T) {
	var log connLog
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		n := log.add(r)
		startStream(w)
		if n == 1 {
			frame(w, 8, "x")
			return
		}
		event(w, apitypes.SSENotice, apitypes.Notice{Kind: "not_live", State: "stopped"})
	})
	s, err := apiclient.New(apiclient.Config{URL: srv.URL}).Attach(context.Background(), "run_1", apiclient.AttachOptions{
		LastEventID: "7", Reconnect: true, Wait: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := drain(s); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(log.lasts, []string{"7", ""}) || !reflect.DeepEqual(log.froms, []string{"-", "9"}) {
		t.Errorf("Last-Event-ID %q, from %q", log.lasts, log.froms)
	}
}

// CheckEvent sees every event with its request, and its error ends the
// stream.
func TestAttachCheckEvent(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		startStream(w)
		frame(w, 1, "a")
		event(w, "bogus", map[string]int{})
		frame(w, 2, "b")
	})
	bad := errors.New("undocumented event")
	var seen []string
	c := apiclient.New(apiclient.Config{URL: srv.URL, CheckEvent: func(req *http.Request, ev sse.Event) error {
		seen = append(seen, req.URL.Path+" "+ev.Type)
		if ev.Type == "bogus" {
			return bad
		}
		return nil
	}})
	s, err := c.Attach(context.Background(), "run_1", apiclient.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seqs, _, err := drain(s)
	if !errors.Is(err, bad) || !reflect.DeepEqual(seqs, []string{"1"}) {
		t.Fatalf("got %q, %v", seqs, err)
	}
	if want := []string{"/v1/m/sessions/runs/run_1/attach output", "/v1/m/sessions/runs/run_1/attach bogus"}; !reflect.DeepEqual(seen, want) {
		t.Errorf("checked %q, want %q", seen, want)
	}
}

// Close ends a stream that waits for the server, and a reconnecting
// stream's first connection may fail and be retried.
func TestAttachCloseAndFirstRetry(t *testing.T) {
	var log connLog
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		if log.add(r) == 1 {
			writeErr(w, http.StatusBadGateway, "node_call_failed", "the tunnel broke")
			return
		}
		startStream(w)
		frame(w, 1, "a")
		<-r.Context().Done()
	})
	s, err := apiclient.New(apiclient.Config{URL: srv.URL}).Attach(context.Background(), "run_1", apiclient.AttachOptions{
		Reconnect: true, Wait: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := s.Next(); err != nil || ev.ID != "1" {
		t.Fatalf("got %+v, %v", ev, err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.Next(); done <- err }()
	s.Close()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("after Close: %v, want context.Canceled", err)
	}
	if !strings.HasPrefix(strings.Join(log.froms, ","), "-,-") {
		t.Errorf("from per connection %q, want the first retried from the start", log.froms)
	}
}
