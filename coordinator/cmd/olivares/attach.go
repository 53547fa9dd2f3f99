package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/sse"
)

type sessionAttachOpts struct {
	from uint64
	raw  bool
}

func sessionAttach() *command {
	var o sessionAttachOpts
	return &command{
		name: "session attach", arg: "run ref", noJSON: true, // a stream; --raw is its JSON
		usage: `olivares session attach REF [--from N] [--raw]
    Show the run's conversation as it streams: what was sent (> ...), the
    assistant's text, reasoning (~ ...), tool calls and their results in
    short (→ and ✓/✗), errors and refusals (✗ ...) and turn boundaries
    (── completed ...), the same for every tool; the tool's stderr goes to
    stderr, each line marked "stderr│". A request of the tool (to run a
    command, change files, a question) shows where it was asked (? ...),
    with what it asks, its options and the command that answers it, and its
    settlement when someone or something answers it. Reconnects by itself
    at the next seq after a dropped stream; exits after the run ends or when
    it is not live. --raw prints every event as one JSON line
    {"event","id","data"} instead, and each request's answer command on
    stderr.
`,
		flags: func(fs *flag.FlagSet) {
			fs.Uint64Var(&o.from, "from", 0, "first seq to stream (default: the oldest retained frame)")
			fs.BoolVar(&o.raw, "raw", false, "print each event as one JSON line instead of the output")
		},
		run: func(ctx context.Context, c *call) error {
			a := newAttacher(c.cl, c.arg, o.raw, c.out, c.err)
			if !o.raw {
				// The conversation is read in the run's tool's protocol.
				r, err := c.cl.Run(ctx, c.arg)
				if err != nil {
					return err
				}
				a.rend = newRenderer(r.Driver, c.out, c.err, c.tty)
			}
			return a.run(ctx, o.from, c.set["from"])
		},
	}
}

// attacher prints one run's output (GET /runs/{ref}/attach). The client's
// stream reconnects by itself after a drop, at the seq after the last
// frame (R-RC-1, R-RC-8), and never hands a frame over twice (R-RC-6);
// the attacher says so on stderr and prints what arrives.
type attacher struct {
	cl     *apiclient.Client
	ref    string
	raw    bool
	stdout io.Writer
	stderr io.Writer
	// rend prints the conversation (not with raw); lastSeq is the seq of
	// the last frame it was given.
	rend    *renderer
	lastSeq uint64
	// wait pauses before a reconnect; it returns an error when ctx ends.
	// Tests replace it so that they never sleep.
	wait func(ctx context.Context, d time.Duration) error
}

// newAttacher returns an attacher that reads the output as text lines
// (no tool's protocol) until rend is set to the run's tool's renderer.
func newAttacher(cl *apiclient.Client, ref string, raw bool, stdout, stderr io.Writer) *attacher {
	return &attacher{cl: cl, ref: ref, raw: raw, stdout: stdout, stderr: stderr,
		rend: newRenderer("", stdout, stderr, termOut{})}
}

// run attaches from seq from (when haveFrom, else from the oldest retained
// frame) until the stream is done, ctx ends (Ctrl-C: a clean exit), or an
// error that a reconnect cannot fix.
func (a *attacher) run(ctx context.Context, from uint64, haveFrom bool) error {
	s, err := a.cl.Attach(ctx, a.ref, apiclient.AttachOptions{From: from, HaveFrom: haveFrom,
		Reconnect: true, OnReconnect: a.reconnecting, Wait: a.wait})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer s.Close()
	defer a.flush()
	for {
		ev, err := s.Next()
		if ctx.Err() != nil || errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := a.handle(ev); err != nil {
			return err
		}
	}
}

// flush prints what the conversation holds unfinished, before a line on
// stderr that tells of the stream, or at its end.
func (a *attacher) flush() {
	if !a.raw {
		a.rend.flush(a.lastSeq)
		a.rend.endStderr()
	}
}

// reconnecting says why the stream dropped and where it picks up.
func (a *attacher) reconnecting(cause error, next uint64, have bool) {
	a.flush()
	if cause != nil {
		fmt.Fprintf(a.stderr, "-- stream dropped: %s\n", explainText("session attach", cause))
	}
	if have {
		fmt.Fprintf(a.stderr, "-- reconnecting at seq %d\n", next)
	} else {
		fmt.Fprintln(a.stderr, "-- reconnecting from the oldest retained frame")
	}
}

// handle prints one event.
func (a *attacher) handle(ev sse.Event) error {
	bad := func(err error) error { return fmt.Errorf("bad %s event from the coordinator: %w", ev.Type, err) }
	switch ev.Type {
	case apitypes.SSEOutput:
		var o apitypes.Output
		if err := json.Unmarshal(ev.Data, &o); err != nil {
			return bad(err)
		}
		return a.printOutput(ev, o)
	case apitypes.SSELag:
		var l apitypes.Lag
		if err := json.Unmarshal(ev.Data, &l); err != nil {
			return bad(err)
		}
		if a.raw {
			return a.printRaw(ev)
		}
		a.flush()
		if l.ResumedFrom > l.RequestedFrom {
			fmt.Fprintf(a.stderr, "-- lag: frames %d..%d were evicted; resuming at %d\n", l.RequestedFrom, l.ResumedFrom-1, l.ResumedFrom)
		} else {
			fmt.Fprintf(a.stderr, "-- lag: resuming at %d\n", l.ResumedFrom)
		}
	case apitypes.SSEEnd:
		var e apitypes.End
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return bad(err)
		}
		if a.raw {
			return a.printRaw(ev)
		}
		// A viewer dropped for being slow is not the run ending: the
		// stream picks up where it was.
		if e.Reason != "slow_viewer" {
			a.flush()
			fmt.Fprintln(a.stderr, "-- ended: "+endText(e))
		}
	case apitypes.SSENotice:
		var n apitypes.Notice
		if err := json.Unmarshal(ev.Data, &n); err != nil {
			return bad(err)
		}
		if a.raw {
			return a.printRaw(ev)
		}
		a.flush()
		fmt.Fprintf(a.stderr, "-- session is not live (state=%s)\n", n.State)
	case apitypes.SSERequest, apitypes.SSERequestSettled:
		var r apitypes.RunRequest
		if err := json.Unmarshal(ev.Data, &r); err != nil {
			return bad(err)
		}
		// R-REQ-4, R-REQ-14: each request at its place in the
		// conversation, with the command that answers it.
		if a.raw {
			// stdout stays one JSON event a line; the answer goes to stderr.
			if err := a.printRaw(ev); err != nil {
				return err
			}
			if r.State == apitypes.RequestPending {
				fmt.Fprintf(a.stderr, "-- request %s (%s, %s): %s; answer: %s\n", r.ID, r.Kind, dash(r.Tool), r.Title, answerHint(a.ref, r))
			} else {
				fmt.Fprintf(a.stderr, "-- %s\n", settledLine(r))
			}
			return nil
		}
		a.flush()
		a.rend.request(a.ref, r)
	case apitypes.SSEOlivaresNotice:
		var n struct{ Kind, Message string }
		if err := json.Unmarshal(ev.Data, &n); err != nil {
			return bad(err)
		}
		if a.raw {
			return a.printRaw(ev)
		}
		a.flush()
		if n.Message != "" {
			fmt.Fprintf(a.stderr, "-- notice: %s: %s\n", n.Kind, n.Message)
		} else {
			fmt.Fprintf(a.stderr, "-- notice: %s\n", n.Kind)
		}
	}
	return nil
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

// printOutput adds a frame to the conversation, which prints what it
// makes of it.
func (a *attacher) printOutput(ev sse.Event, o apitypes.Output) error {
	if a.raw {
		return a.printRaw(ev)
	}
	if o.Encoding == "base64" {
		if _, err := base64.StdEncoding.DecodeString(o.Data); err != nil {
			return fmt.Errorf("bad output frame %d from the coordinator: %w", o.Seq, err)
		}
	}
	a.lastSeq = o.Seq
	return a.rend.feed(o)
}

// printRaw writes the event as one JSON line on stdout (--raw).
func (a *attacher) printRaw(ev sse.Event) error {
	line, err := json.Marshal(struct {
		Event string          `json:"event"`
		ID    string          `json:"id,omitempty"`
		Data  json.RawMessage `json:"data"`
	}{ev.Type, ev.ID, json.RawMessage(ev.Data)})
	if err != nil {
		return err
	}
	_, err = a.stdout.Write(append(line, '\n'))
	return err
}
