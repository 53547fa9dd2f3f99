package supervisor_test

import (
	"fmt"
	"testing"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

func seqs(rows []apitypes.UsageTurn) string {
	out := ""
	for _, u := range rows {
		out += fmt.Sprintf("#%d/%d %s %s in %d out %d; ", u.Seq, u.Turn, u.Tool, u.Model, u.InputTokens, u.OutputTokens)
	}
	return out
}

// R-USE-1, R-USE-4, R-USE-6: a turn that reports usage adds a row to the
// run's outbox and its totals to the run's row, committed with the record:
// both survive an agent restart; an acknowledged row leaves the outbox
// (and stays gone after a restart) while the totals keep it.
func TestUsageOutbox(t *testing.T) {
	e, _ := fakeEnv(t)
	r := e.launchIdle("run_usage1")
	e.input(r.RunRef, "tokens 7 3")
	e.await("the first turn's usage", func() bool {
		u := e.get(r.RunRef).Usage
		return u != nil && u.Turns == 1
	})
	if got, want := seqs(e.sup.Usage.Pending(r.RunRef)), "#1/1 fake fake in 7 out 3; "; got != want {
		t.Fatalf("outbox: got %q, want %q", got, want)
	}
	if u := e.sup.Usage.Pending(r.RunRef)[0]; u.Tenant != tenant || u.ProfileRef != "prof_usage1" || u.Generation != 1 || u.At.IsZero() {
		t.Fatalf("row %+v: want the run's tenant, profile, generation and a time", u)
	}
	e.shut()
	e.open()
	if got, want := seqs(e.sup.Usage.Pending(r.RunRef)), "#1/1 fake fake in 7 out 3; "; got != want {
		t.Fatalf("outbox after a restart: got %q, want %q", got, want)
	}
	e.sup.Usage.Ack(r.RunRef, 1)
	if got := e.sup.Usage.Pending(r.RunRef); len(got) != 0 {
		t.Fatalf("outbox after the ack: %q", seqs(got))
	}
	if _, err := e.sup.Resume(t.Context(), r.RunRef, nil, ""); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	e.awaitState(r.RunRef, apitypes.StateIdle)
	e.input(r.RunRef, "tokens 1 2")
	e.await("the second turn's usage", func() bool {
		u := e.get(r.RunRef).Usage
		return u != nil && u.Turns == 2
	})
	e.shut()
	e.open()
	if got, want := seqs(e.sup.Usage.Pending(r.RunRef)), "#2/2 fake fake in 1 out 2; "; got != want {
		t.Fatalf("outbox after the ack and a restart: got %q, want %q", got, want)
	}
	u := e.get(r.RunRef).Usage
	if u == nil || u.Turns != 2 || u.InputTokens != 8 || u.OutputTokens != 5 || u.CostTurnsUnknown != 2 {
		t.Fatalf("run usage %+v, want 2 turns, 8 in, 5 out, no cost reported", u)
	}
}
