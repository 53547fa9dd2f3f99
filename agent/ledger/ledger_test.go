package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
)

func openDB(t *testing.T, path string) *bbolt.DB {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func newLedger(t *testing.T) (*Ledger, *bbolt.DB) {
	t.Helper()
	db := openDB(t, filepath.Join(t.TempDir(), "agent.db"))
	t.Cleanup(func() { db.Close() })
	l, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	return l, db
}

func intp(i int) *int { return &i }

func mustAppend(t *testing.T, l *Ledger, run string, e Event) Event {
	t.Helper()
	got, err := l.Append(run, e)
	if err != nil {
		t.Fatalf("Append(%s, %s): %v", run, e.Kind, err)
	}
	return got
}

// J01's /events: created -> started -> stop_requested -> exited, seq from 1,
// persisted across an agent restart (R-ARCH-3).
func TestAppendListAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	db := openDB(t, path)
	l, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	fixed := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	l.now = func() time.Time { return fixed }
	in := []Event{
		{Kind: KindCreated},
		{Kind: KindStarted, Generation: 1, PID: 4242},
		{Kind: KindStopRequested, Generation: 1},
		{Kind: KindExited, Generation: 1, PID: 4242, ExitCode: intp(0)},
		{Kind: KindResumed, Generation: 2, At: fixed.Add(time.Minute)},
		{Kind: KindExited, Generation: 2, Signal: "SIGKILL"},
		{Kind: KindInterrupted, Generation: 2, Detail: json.RawMessage(`{ "noop": true }`)},
	}
	var want []Event
	for i, e := range in {
		got := mustAppend(t, l, "run_1", e)
		if got.Seq != uint64(i+1) {
			t.Fatalf("event %d: got seq %d, want %d", i, got.Seq, i+1)
		}
		if got.At.Location() != time.UTC {
			t.Errorf("event %d: At %v is not UTC (R-API-5)", i, got.At)
		}
		want = append(want, got)
	}
	if want[0].At != fixed.UTC() || want[4].At != fixed.Add(time.Minute).UTC() {
		t.Errorf("At: got %v and %v, want now and the given time, in UTC", want[0].At, want[4].At)
	}
	if string(want[6].Detail) != `{"noop":true}` {
		t.Errorf("detail: got %s, want compacted JSON", want[6].Detail)
	}
	mustAppend(t, l, "run_2", Event{Kind: KindCreated})

	db.Close()
	db = openDB(t, path)
	defer db.Close()
	l, err = Open(db)
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.List("run_1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("List after restart:\ngot  %+v\nwant %+v", got, want)
	}
	if e := mustAppend(t, l, "run_1", Event{Kind: KindLost, Reason: ReasonProcessLost}); e.Seq != 8 {
		t.Errorf("Append after restart: seq %d, want 8", e.Seq)
	}
	if other, _ := l.List("run_2"); len(other) != 1 || other[0].Seq != 1 {
		t.Errorf("run_2: got %+v, want its own seq line from 1", other)
	}
	if none, err := l.List("run_unknown"); err != nil || len(none) != 0 {
		t.Errorf("List of an unknown run: got %v, %v, want nothing", none, err)
	}
}

// R-EVT-4: append-only, seq-ordered: concurrent appends to one run keep a
// dense seq, and each writer's events keep their order.
func TestConcurrentAppendsDense(t *testing.T) {
	const writers, per = 16, 25
	l, _ := newLedger(t)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				d := json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
				if _, err := l.Append("run_1", Event{Kind: KindInputAccepted, Detail: d}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	got, err := l.List("run_1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != writers*per {
		t.Fatalf("got %d events, want %d", len(got), writers*per)
	}
	next := make(map[int]int)
	for i, e := range got {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d: seq %d, want %d", i, e.Seq, i+1)
		}
		var d struct{ W, I int }
		if err := json.Unmarshal(e.Detail, &d); err != nil {
			t.Fatal(err)
		}
		if d.I != next[d.W] {
			t.Fatalf("writer %d: event %d came before %d", d.W, d.I, next[d.W])
		}
		next[d.W]++
	}
}

func TestValidation(t *testing.T) {
	l, _ := newLedger(t)
	for _, tc := range []struct {
		name  string
		run   string
		e     Event
		field string
	}{
		{"empty run", "", Event{Kind: KindCreated}, ""},
		{"long run", strings.Repeat("r", MaxRunRefLen+1), Event{Kind: KindCreated}, ""},
		{"seq given", "run_1", Event{Seq: 3, Kind: KindCreated}, "seq"},
		{"no kind", "run_1", Event{}, "kind"},
		{"kind case", "run_1", Event{Kind: "Exited"}, "kind"},
		{"kind dot", "run_1", Event{Kind: "sessions.run.renamed"}, "kind"},
		{"negative pid", "run_1", Event{Kind: KindStarted, PID: -1}, "pid"},
		{"code and signal", "run_1", Event{Kind: KindExited, ExitCode: intp(137), Signal: "SIGKILL"}, "signal"},
		{"exited without either", "run_1", Event{Kind: KindExited}, "exit_code"},
		{"lost with code", "run_1", Event{Kind: KindLost, ExitCode: intp(1)}, "lost"},
		{"bad signal", "run_1", Event{Kind: KindExited, Signal: "9"}, "signal"},
		{"detail not json", "run_1", Event{Kind: KindMoved, Detail: json.RawMessage(`{`)}, "detail"},
		{"detail not object", "run_1", Event{Kind: KindMoved, Detail: json.RawMessage(`[1]`)}, "detail"},
		{"detail too big", "run_1", Event{Kind: KindMoved, Detail: json.RawMessage(`{"x":"` + strings.Repeat("a", MaxDetailLen) + `"}`)}, "detail"},
		{"reason too long", "run_1", Event{Kind: KindFailed, Reason: strings.Repeat("a", MaxReasonLen+1)}, "reason"},
	} {
		_, err := l.Append(tc.run, tc.e)
		switch {
		case tc.field == "" && !errors.Is(err, ErrBadRunRef):
			t.Errorf("%s: got %v, want ErrBadRunRef", tc.name, err)
		case tc.field != "" && (!errors.Is(err, ErrBadEvent) || !strings.Contains(err.Error(), tc.field)):
			t.Errorf("%s: got %v, want ErrBadEvent naming %q", tc.name, err, tc.field)
		}
	}
	// Nothing was half-written.
	if got, _ := l.List("run_1"); len(got) != 0 {
		t.Fatalf("after rejected appends: %d events, want 0", len(got))
	}
	if e := mustAppend(t, l, "run_1", Event{Kind: KindCreated}); e.Seq != 1 {
		t.Fatalf("first valid append: seq %d, want 1", e.Seq)
	}
}

// R-AUD-1: AppendTx commits or rolls back with the caller's change, and a
// rolled-back event does not use up its seq.
func TestAppendTx(t *testing.T) {
	l, db := newLedger(t)
	mustAppend(t, l, "run_1", Event{Kind: KindCreated})
	boom := errors.New("boom")
	err := db.Update(func(tx *bbolt.Tx) error {
		if _, err := l.AppendTx(tx, "run_1", Event{Kind: KindMoved}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update: %v", err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		e, err := l.AppendTx(tx, "run_1", Event{Kind: KindMoved, Detail: json.RawMessage(`{"files":3}`)})
		if err == nil && e.Seq != 2 {
			t.Errorf("AppendTx after a rollback: seq %d, want 2", e.Seq)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := l.List("run_1")
	if len(got) != 2 || got[1].Kind != KindMoved || string(got[1].Detail) != `{"files":3}` {
		t.Fatalf("got %+v, want created then moved", got)
	}
}

func TestLastPageDelete(t *testing.T) {
	l, _ := newLedger(t)
	for i, e := range []Event{
		{Kind: KindCreated},
		{Kind: KindStarted, Generation: 1, PID: 10},
		{Kind: KindExited, Generation: 1, ExitCode: intp(1)},
		{Kind: KindResumed, Generation: 2},
		{Kind: KindStarted, Generation: 2, PID: 11},
		{Kind: KindLost, Generation: 2, Reason: ReasonProcessLost},
	} {
		if got := mustAppend(t, l, "run_1", e); got.Seq != uint64(i+1) {
			t.Fatalf("seq %d, want %d", got.Seq, i+1)
		}
	}
	e, ok, err := l.Last("run_1", KindStarted)
	if err != nil || !ok || e.Seq != 5 || e.PID != 11 || e.Generation != 2 {
		t.Errorf("Last(started): got %+v %v %v, want seq 5 pid 11", e, ok, err)
	}
	e, ok, err = l.Last("run_1", KindExited)
	if err != nil || !ok || e.ExitCode == nil || *e.ExitCode != 1 {
		t.Errorf("Last(exited): got %+v %v %v, want exit_code 1", e, ok, err)
	}
	if _, ok, err := l.Last("run_1", KindCleaned); ok || err != nil {
		t.Errorf("Last(cleaned): got %v %v, want none", ok, err)
	}
	if _, ok, err := l.Last("run_unknown", KindCreated); ok || err != nil {
		t.Errorf("Last on an unknown run: got %v %v, want none", ok, err)
	}

	var seqs []uint64
	var after uint64
	for pages := 0; ; pages++ {
		page, next, err := l.Page("run_1", after, 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			seqs = append(seqs, e.Seq)
		}
		if next == 0 {
			if pages != 1 {
				t.Errorf("got %d full pages before the last, want 1", pages)
			}
			break
		}
		after = next
	}
	if !reflect.DeepEqual(seqs, []uint64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("paged seqs: got %v", seqs)
	}

	mustAppend(t, l, "run_2", Event{Kind: KindCreated})
	if err := l.Delete("run_1"); err != nil {
		t.Fatal(err)
	}
	if err := l.Delete("run_unknown"); err != nil {
		t.Errorf("Delete of an unknown run: %v", err)
	}
	if runs, err := l.Runs(); err != nil || !reflect.DeepEqual(runs, []string{"run_2"}) {
		t.Errorf("Runs after Delete: got %v %v, want [run_2]", runs, err)
	}
	if got, _ := l.List("run_1"); len(got) != 0 {
		t.Errorf("List after Delete: got %d events", len(got))
	}
}
