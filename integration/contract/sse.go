package contract

import (
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/olivares-dev/olivares/shared/sse"
)

// EventCheck returns the check of one SSE event that a client reads (the
// harness hands it to shared/apiclient as Config.CheckEvent, which calls
// it for every event before the caller sees it): the event's name must be
// one the document lists for the request's operation (a member of its
// text/event-stream union) and the event must match that member. A
// mismatch is reported to t and returned, which ends the stream.
func EventCheck(t T) func(*http.Request, sse.Event) error {
	c, err := Load()
	if err != nil {
		t.Errorf("contract: openapi.yaml: %v", err)
		return nil
	}
	return func(req *http.Request, ev sse.Event) error {
		ex := c.begin(req, nil)
		msgs := ex.checkEvent(http.StatusOK, ev)
		for _, m := range msgs {
			t.Errorf("%s", m)
		}
		if len(msgs) > 0 {
			return fmt.Errorf("%s", msgs[0])
		}
		return nil
	}
}

// eventTap reads the events of a stream a server writes, with shared/sse,
// and checks each: write hands it the bytes and returns once every
// complete event among them was checked, so that a mismatch is reported
// before the client can read the bytes (and the test go on); close waits
// for the last events' checks.
type eventTap struct {
	mu   sync.Mutex
	cond *sync.Cond
	buf  []byte // written, not yet read
	// idle: the reader waits for bytes with none left, so every complete
	// event written so far was checked. ended: the reader stopped (a
	// malformed stream); what follows is not read.
	idle, closed, ended bool
	done                sync.WaitGroup
}

func newEventTap(check func(sse.Event) []string, report func(string)) *eventTap {
	tap := &eventTap{}
	tap.cond = sync.NewCond(&tap.mu)
	tap.done.Add(1)
	go func() {
		defer tap.done.Done()
		defer func() {
			tap.mu.Lock()
			tap.ended = true
			tap.cond.Broadcast()
			tap.mu.Unlock()
		}()
		rd := sse.NewReader(tap)
		for {
			ev, err := rd.Next()
			if err != nil {
				return
			}
			for _, m := range check(ev) {
				report(m)
			}
		}
	}()
	return tap
}

// Read is the reader's side: it blocks until bytes are written or the
// stream is closed.
func (t *eventTap) Read(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.buf) == 0 && !t.closed {
		t.idle = true
		t.cond.Broadcast()
		t.cond.Wait()
	}
	t.idle = false
	if len(t.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, t.buf)
	t.buf = t.buf[n:]
	return n, nil
}

// write hands p to the reader; it returns once p was read and the events
// it completed were checked.
func (t *eventTap) write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return
	}
	t.buf = append(t.buf, p...)
	t.idle = false
	t.cond.Broadcast()
	for !t.ended && !(t.idle && len(t.buf) == 0) {
		t.cond.Wait()
	}
}

// close ends the stream and waits for the last events' checks.
func (t *eventTap) close() {
	t.mu.Lock()
	t.closed = true
	t.cond.Broadcast()
	t.mu.Unlock()
	t.done.Wait()
}
