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
// one the document lists for the request's operation (x-sse-events) and
// its data must match that event's schema. A mismatch is reported to t and
// returned, which ends the stream.
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
// and checks each: Write hands it the bytes, close waits until every
// complete event was checked.
type eventTap struct {
	pw   *io.PipeWriter
	done sync.WaitGroup
}

func newEventTap(check func(sse.Event) []string, report func(string)) *eventTap {
	pr, pw := io.Pipe()
	tap := &eventTap{pw: pw}
	tap.done.Add(1)
	go func() {
		defer tap.done.Done()
		defer io.Copy(io.Discard, pr) // never leave a writer blocked
		rd := sse.NewReader(pr)
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

// write hands p to the reader; it returns once p was read.
func (t *eventTap) write(p []byte) { t.pw.Write(p) }

// close ends the stream and waits for the last events' checks.
func (t *eventTap) close() {
	t.pw.Close()
	t.done.Wait()
}
