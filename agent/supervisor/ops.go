package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
)

// Input writes one input to the live process through its driver (R-IN-1,
// R-IN-2). Validation (cliruntime.ErrWrongInputField, ErrInvalidInput)
// comes before the live check (ErrNotLive), R-API-3; a full stdin queue is
// ErrInputQueueFull.
func (s *Supervisor) Input(ctx context.Context, ref string, in cliruntime.Input) error {
	r, err := s.Runs.get(ref)
	if err != nil {
		return err
	}
	rec, _ := r.current()
	d := s.o.Drivers[rec.Driver]
	if d == nil {
		return refusal.New(ErrUnknownTool, "no driver %q", rec.Driver)
	}
	if err := d.CheckInput(in); err != nil {
		return err
	}
	g, err := r.liveGen()
	if err != nil {
		return err
	}
	if err := g.encode(in, inputFrame(in)); err != nil {
		return inputErr(err)
	}
	r.countInput()
	r.touch()
	return nil
}

// inputFrame is the record of in in the run's output (R-ATT-11): its text
// and who sent it, cut to fit one ring frame. A stream-json line that is
// not a user message (a control request) is no one's words: nil.
func inputFrame(in cliruntime.Input) []byte {
	f := apitypes.InputFrame{By: in.By, Name: in.Name, Text: in.Text}
	switch {
	case in.Message != nil:
		f.Text = contentText(in.Message)
	case in.Line != nil:
		var m struct {
			Type    string `json:"type"`
			Message struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal(in.Line, &m) != nil || m.Type != "user" {
			return nil
		}
		f.Text = contentText(m.Message.Content)
	}
	for {
		b, err := json.Marshal(f)
		if err != nil {
			return nil
		}
		if len(b) <= ring.MaxFrameData {
			return b
		}
		// Escapes can make the JSON longer than the text: cut by the
		// ratio, with room to spare, until it fits.
		n := len(f.Text) * (ring.MaxFrameData - 1024) / len(b)
		for n > 0 && !utf8.RuneStart(f.Text[n]) {
			n--
		}
		f.Text, f.Clipped = f.Text[:n], true
	}
}

// contentText is the text of user content as stream-json carries it: a
// string, or the text blocks of an array, one a line.
func contentText(c json.RawMessage) string {
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(c, &blocks)
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// inputErr gives a driver's refusal of a live input the supervisor's kind.
func inputErr(err error) error {
	switch {
	case errors.Is(err, cliruntime.ErrHandshakeFailed), errors.Is(err, errStdinClosed):
		return refusal.New(ErrNotLive, "%v", err)
	case errors.Is(err, cliruntime.ErrInputQueueFull):
		return refusal.New(ErrInputQueueFull, "%v; wait for the running turn to end", err)
	}
	return err
}

// countInput records accepted inputs in the ledger as counts, never content
// (R-EVT-3, R-EVT-4). The write is off the request path and coalesced: a
// burst of inputs costs one row {count: n}.
func (r *run) countInput() {
	r.mu.Lock()
	r.inputs++
	if r.inputsBusy {
		r.mu.Unlock()
		return
	}
	r.inputsBusy = true
	r.mu.Unlock()
	r.s.wg.Add(1)
	go func() {
		defer r.s.wg.Done()
		for r.flushInputs(true) {
		}
	}()
}

// flushInputs writes the pending input count, if any, and reports whether
// it wrote one. The writer goroutine stops being busy once nothing is
// pending; a stop or an exit calls it to put the count before its own row
// (R-EVT-3's order).
func (r *run) flushInputs(writer bool) bool {
	r.inputsMu.Lock()
	defer r.inputsMu.Unlock()
	r.mu.Lock()
	n, gen := r.inputs, r.rec.Generation
	r.inputs = 0
	if n == 0 {
		if writer {
			r.inputsBusy = false
		}
		r.mu.Unlock()
		return false
	}
	r.mu.Unlock()
	detail, _ := json.Marshal(map[string]int{"count": n})
	if _, err := r.s.o.Ledger.Append(r.ref, ledger.Event{Kind: ledger.KindInputAccepted, Generation: gen, Detail: detail}); err != nil {
		r.s.o.Log.Error("ledger append failed", logging.KeyRunRef, r.ref, logging.Err(err))
	}
	return true
}

// Interrupt cancels the active turn; the process stays (R-INT-1). An idle
// run is an accepted no-op recorded with noop=true, and noop says so
// (R-INT-2).
func (s *Supervisor) Interrupt(ctx context.Context, ref string) (noop bool, err error) {
	r, err := s.Runs.get(ref)
	if err != nil {
		return false, err
	}
	g, err := r.liveGen()
	if err != nil {
		return false, err
	}
	active := g.interrupt()
	detail, _ := json.Marshal(map[string]bool{"noop": !active})
	return !active, r.update(ledger.Event{Kind: ledger.KindInterrupted, Generation: g.n, Detail: detail}, nil)
}

// Stop sends SIGTERM to the process group, waits the grace, then SIGKILLs
// the group (R-STOP-1, R-STOP-3), and returns the row once the exit is
// recorded (R-STOP-2). A run that is not live is returned as it is, with
// nothing signalled and no ledger row (R-STOP-4). Once the signal is sent
// the stop goes on whatever ctx does: ctx only stops the waiting, and the
// exit reaches the index through the row push. grace 0 is the configured
// one.
func (s *Supervisor) Stop(ctx context.Context, ref string, grace time.Duration) (apitypes.Run, error) {
	r, err := s.Runs.get(ref)
	if err != nil {
		return apitypes.Run{}, err
	}
	if grace == 0 {
		grace = s.o.StopGrace
	}
	// A setup command before the tool ends now; r.op is free once its
	// stop is recorded (R-SETUP-2).
	r.mu.Lock()
	if r.stopSetup != nil {
		r.stopSetup(errSetupStopped)
	}
	r.mu.Unlock()
	r.op.Lock()
	defer r.op.Unlock()
	r.mu.Lock()
	g := r.gen
	r.mu.Unlock()
	if g == nil {
		return r.snapshot(), nil
	}
	select {
	case <-g.proc.Done():
		// The child already exited on its own; its end is being recorded.
		// That exit is the tool's, not an operator stop (R-STATE-3), and
		// nothing is signalled or written (R-STOP-4).
		<-g.ended
		return r.snapshot(), nil
	default:
	}
	r.flushInputs(false)
	if err := r.update(ledger.Event{Kind: ledger.KindStopRequested, Generation: g.n}, func(rec *record) { rec.StopRequested = true }); err != nil {
		return apitypes.Run{}, err
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); g.proc.Stop(grace) }()
	select {
	case <-g.ended:
	case <-ctx.Done():
		return r.snapshot(), ctx.Err()
	}
	return r.snapshot(), nil
}
