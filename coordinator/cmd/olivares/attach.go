package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	neturl "net/url"
	"strconv"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Reconnect backoff of attach: doubles from the first to the cap, and starts
// over once a connection has delivered a frame.
const (
	attachMinBackoff = 100 * time.Millisecond
	attachMaxBackoff = 5 * time.Second
)

// attacher streams one run's output (GET /runs/{ref}/attach) and reconnects
// by itself after a stream that was dropped without an end or a notice, at
// the seq after the last frame it printed (R-RC-1, R-RC-8). It prints every
// frame at most once, whatever the server replays.
type attacher struct {
	cl     *client
	ref    string
	raw    bool
	stdout io.Writer
	stderr io.Writer
	// wait pauses before a reconnect; it returns an error when ctx ends.
	// Tests replace it so that they never sleep.
	wait       func(ctx context.Context, d time.Duration) error
	minBackoff time.Duration
	maxBackoff time.Duration

	next uint64 // the seq to ask for on the next connection
	have bool   // next is known: a --from was given or a frame was seen
}

func newAttacher(cl *client, ref string, raw bool, stdout, stderr io.Writer) *attacher {
	return &attacher{
		cl: cl, ref: ref, raw: raw, stdout: stdout, stderr: stderr,
		wait:       sleepCtx,
		minBackoff: attachMinBackoff,
		maxBackoff: attachMaxBackoff,
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// streamOutcome says how one connection ended.
type streamOutcome int

const (
	streamDone    streamOutcome = iota // end or notice: the run has nothing more for us
	streamDropped                      // cut off; reconnect
	streamFailed                       // an error reconnecting cannot fix
)

// run attaches from seq from (when haveFrom, else from the oldest retained
// frame) until the stream is done, ctx ends (Ctrl-C: a clean exit), or an
// error that a reconnect cannot fix.
func (a *attacher) run(ctx context.Context, from uint64, haveFrom bool) error {
	a.next, a.have = from, haveFrom
	backoff := a.minBackoff
	for {
		outcome, progressed, err := a.once(ctx)
		if ctx.Err() != nil {
			return nil
		}
		switch outcome {
		case streamDone:
			return nil
		case streamFailed:
			return err
		}
		if progressed {
			backoff = a.minBackoff
		}
		if err != nil {
			fmt.Fprintf(a.stderr, "-- stream dropped: %v\n", err)
		}
		if a.have {
			fmt.Fprintf(a.stderr, "-- reconnecting at seq %d\n", a.next)
		} else {
			fmt.Fprintln(a.stderr, "-- reconnecting from the oldest retained frame")
		}
		if a.wait(ctx, backoff) != nil {
			return nil
		}
		backoff = min(backoff*2, a.maxBackoff)
	}
}

// once makes one connection and consumes its stream. progressed reports
// whether it delivered a frame; err is the cause of a drop (nil for a plain
// end of stream) or of a failure.
func (a *attacher) once(ctx context.Context) (outcome streamOutcome, progressed bool, err error) {
	path := runPath(a.ref, "attach")
	if a.have {
		path += "?" + neturl.Values{"from": {strconv.FormatUint(a.next, 10)}}.Encode()
	}
	req, err := a.cl.newRequest(ctx, "GET", path, nil)
	if err != nil {
		return streamFailed, false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := a.cl.stream.Do(req)
	if err != nil {
		return streamDropped, false, fmt.Errorf("cannot reach the coordinator at %s: %w", a.cl.c.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		err := readAPIError(resp, raw)
		// A 5xx is the coordinator restarting or the node's tunnel being
		// down (R-RC-8): worth another try. A 4xx will not change.
		if resp.StatusCode >= 500 {
			return streamDropped, false, err
		}
		return streamFailed, false, err
	}
	sr := newSSEReader(resp.Body)
	for {
		ev, err := sr.next()
		if errors.Is(err, io.EOF) {
			return streamDropped, progressed, nil
		}
		if errors.Is(err, errSSELineTooLong) {
			return streamFailed, progressed, err
		}
		if err != nil {
			return streamDropped, progressed, err
		}
		outcome, delivered, err := a.handle(ev)
		progressed = progressed || delivered
		if err != nil || outcome != streamDropped {
			return outcome, progressed, err
		}
	}
}

// handle prints one event. It answers streamDropped to mean "keep reading".
func (a *attacher) handle(ev sseEvent) (outcome streamOutcome, delivered bool, err error) {
	bad := func(err error) (streamOutcome, bool, error) {
		return streamFailed, false, fmt.Errorf("bad %s event from the coordinator: %w", ev.Event, err)
	}
	switch ev.Event {
	case apitypes.SSEOutput:
		var o apitypes.Output
		if err := json.Unmarshal([]byte(ev.Data), &o); err != nil {
			return bad(err)
		}
		if a.have && o.Seq < a.next {
			return streamDropped, false, nil // already printed (R-RC-6)
		}
		if err := a.printOutput(ev, o); err != nil {
			return streamFailed, false, err
		}
		a.next, a.have = o.Seq+1, true
		return streamDropped, true, nil
	case apitypes.SSELag:
		var l apitypes.Lag
		if err := json.Unmarshal([]byte(ev.Data), &l); err != nil {
			return bad(err)
		}
		if !a.have || l.ResumedFrom > a.next {
			a.next, a.have = l.ResumedFrom, true
		}
		if a.raw {
			return streamDropped, false, a.printRaw(ev)
		}
		if l.ResumedFrom > l.RequestedFrom {
			fmt.Fprintf(a.stderr, "-- lag: frames %d..%d were evicted; resuming at %d\n", l.RequestedFrom, l.ResumedFrom-1, l.ResumedFrom)
		} else {
			fmt.Fprintf(a.stderr, "-- lag: resuming at %d\n", l.ResumedFrom)
		}
		return streamDropped, false, nil
	case apitypes.SSEEnd:
		var e apitypes.End
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			return bad(err)
		}
		if a.raw {
			if err := a.printRaw(ev); err != nil {
				return streamFailed, false, err
			}
		}
		// A viewer dropped for being slow is not the run ending: the process
		// still lives, so pick up where we were.
		if e.Reason == "slow_viewer" {
			return streamDropped, false, errors.New("the coordinator dropped this viewer for reading too slowly")
		}
		if !a.raw {
			fmt.Fprintln(a.stderr, "-- ended: "+endText(e))
		}
		return streamDone, false, nil
	case apitypes.SSENotice:
		var n apitypes.Notice
		if err := json.Unmarshal([]byte(ev.Data), &n); err != nil {
			return bad(err)
		}
		if a.raw {
			return streamDone, false, a.printRaw(ev)
		}
		fmt.Fprintf(a.stderr, "-- session is not live (state=%s)\n", n.State)
		return streamDone, false, nil
	case apitypes.SSEOlivaresNotice:
		var n struct{ Kind, Message string }
		if err := json.Unmarshal([]byte(ev.Data), &n); err != nil {
			return bad(err)
		}
		if a.raw {
			return streamDropped, false, a.printRaw(ev)
		}
		if n.Message != "" {
			fmt.Fprintf(a.stderr, "-- notice: %s: %s\n", n.Kind, n.Message)
		} else {
			fmt.Fprintf(a.stderr, "-- notice: %s\n", n.Kind)
		}
	}
	return streamDropped, false, nil
}

func endText(e apitypes.End) string {
	s := fmt.Sprintf("generation %d", e.Generation)
	switch {
	case e.ExitCode != nil:
		s += fmt.Sprintf(", exit code %d", *e.ExitCode)
	case e.Signal != "":
		s += ", signal " + e.Signal
	}
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s
}

// printOutput writes a frame's bytes: stderr frames to our stderr, stdout
// and pty frames to our stdout.
func (a *attacher) printOutput(ev sseEvent, o apitypes.Output) error {
	if a.raw {
		return a.printRaw(ev)
	}
	data := []byte(o.Data)
	if o.Encoding == "base64" {
		var err error
		if data, err = base64.StdEncoding.DecodeString(o.Data); err != nil {
			return fmt.Errorf("bad output frame %d from the coordinator: %w", o.Seq, err)
		}
	}
	w := a.stdout
	if o.Stream == "stderr" {
		w = a.stderr
	}
	_, err := w.Write(data)
	return err
}

// printRaw writes the event as one JSON line on stdout (--raw).
func (a *attacher) printRaw(ev sseEvent) error {
	line, err := json.Marshal(struct {
		Event string          `json:"event"`
		ID    string          `json:"id,omitempty"`
		Data  json.RawMessage `json:"data"`
	}{ev.Event, ev.ID, json.RawMessage(ev.Data)})
	if err != nil {
		return err
	}
	_, err = a.stdout.Write(append(line, '\n'))
	return err
}
