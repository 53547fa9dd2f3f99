// Package ledger keeps each run's lifecycle evidence (R-EVT-1..4):
// an append-only, seq-ordered log in the agent's bbolt file, read by
// GET /runs/{ref}/events and by state derivation (R-STATE-1).
//
// It has no update API, and it must never hold prompt text, secrets or
// file contents (R-EVT-4): callers record facts (codes, counts, refs).
//
// Buckets (owned by this package; nothing else opens them):
//
//	ledger/<run_ref>/   8-byte big-endian seq -> event JSON; the bucket's
//	                    bbolt sequence is the last seq handed out
package ledger

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// Event kinds. R-EVT-2 names limit_reached, moved, handed_off and cleaned;
// R-EVT-3 adds the rest. Append accepts any snake_case kind, so a new kind
// needs only a constant here.
const (
	KindCreated           = "created"            // R-CRT-4
	KindApprovalRequested = "approval_requested" // R-CRT-4
	KindApproved          = "approved"           // R-CRT-4
	KindStarted           = "started"            // R-CRT-4: generation and pid
	KindInputAccepted     = "input_accepted"     // count only, never content
	KindInterrupted       = "interrupted"        // R-INT-2: detail.noop on an idle run
	KindStopRequested     = "stop_requested"
	KindExited            = "exited" // observed exit code or signal (R-EXIT-1, R-EXIT-3)
	// KindLost: the process vanished without an observed exit, e.g. found
	// gone after an agent restart. R-EVT-3 names this kind "lost"; the run's
	// reason is then "process_lost" (R-STATE-6, ReasonProcessLost).
	KindLost         = "lost"
	KindResumed      = "resumed" // R-RC-3: a new generation
	KindFailed       = "failed"
	KindLimitReached = "limit_reached" // R-LIM-7
	KindMoved        = "moved"         // R-MOVE-7
	KindHandedOff    = "handed_off"    // R-HOF-11, on the source run
	KindCleaned      = "cleaned"       // R-CLN-6
	// KindAdopted: an agent that started took over a live process from its
	// holder (issue 30); detail from and to are the agent versions.
	KindAdopted = "adopted"
	// KindResumedAfterLoss: at start, the agent resumed a lost run's
	// conversation because its profile says resume_after_loss (issue 30);
	// detail error says why it could not.
	KindResumedAfterLoss = "resumed_after_loss"
)

// ReasonProcessLost is the Reason recorded with KindLost (R-STATE-6).
const ReasonProcessLost = "process_lost"

// Limits on one event. The ledger is evidence, not content (R-EVT-4).
const (
	MaxRunRefLen = 512
	MaxReasonLen = 256
	MaxDetailLen = 16 << 10
)

// Validation errors; the message names the bad field.
var (
	ErrBadRunRef = errors.New("ledger: run ref must be 1..512 bytes")
	ErrBadEvent  = errors.New("ledger: bad event")
)

var (
	rootBucket = []byte("ledger")
	kindRE     = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	signalRE   = regexp.MustCompile(`^SIG[A-Z0-9+-]{1,16}$`)
)

// Event is one lifecycle fact. Seq and At are assigned by Append.
type Event struct {
	Seq        uint64          `json:"seq"`  // per run, dense from 1
	Kind       string          `json:"kind"` // one of the Kind constants
	At         time.Time       `json:"at"`   // UTC (R-API-5)
	Generation uint32          `json:"generation,omitempty"`
	PID        int             `json:"pid,omitempty"`
	ExitCode   *int            `json:"exit_code,omitempty"` // observed, never invented (R-EXIT-1)
	Signal     string          `json:"signal,omitempty"`    // e.g. "SIGKILL"; then ExitCode is nil (R-EXIT-3)
	Reason     string          `json:"reason,omitempty"`
	Detail     json.RawMessage `json:"detail,omitempty"` // optional JSON object
}

// Ledger is the lifecycle ledger of every run on this node.
type Ledger struct {
	db  *bbolt.DB
	now func() time.Time
}

// Open creates the ledger's bucket in db. The caller keeps owning db.
func Open(db *bbolt.DB) (*Ledger, error) {
	if db == nil {
		return nil, errors.New("ledger: nil db")
	}
	err := db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(rootBucket)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: create bucket: %w", err)
	}
	return &Ledger{db: db, now: time.Now}, nil
}

// Append records e for run in its own transaction and returns it with Seq
// (the next one for the run) and At (now, when zero; always UTC) set.
func (l *Ledger) Append(run string, e Event) (Event, error) {
	var out Event
	err := l.db.Update(func(tx *bbolt.Tx) error {
		var err error
		out, err = l.AppendTx(tx, run, e)
		return err
	})
	return out, err
}

// AppendTx is Append inside the caller's write transaction, so the event
// commits or rolls back with the state change it records (R-AUD-1). A
// rolled-back event does not consume its seq.
func (l *Ledger) AppendTx(tx *bbolt.Tx, run string, e Event) (Event, error) {
	if err := checkRun(run); err != nil {
		return Event{}, err
	}
	e, err := l.check(e)
	if err != nil {
		return Event{}, err
	}
	root, err := tx.CreateBucketIfNotExists(rootBucket)
	if err != nil {
		return Event{}, err
	}
	b, err := root.CreateBucketIfNotExists([]byte(run))
	if err != nil {
		return Event{}, err
	}
	if e.Seq, err = b.NextSequence(); err != nil {
		return Event{}, err
	}
	v, err := json.Marshal(e)
	if err != nil {
		return Event{}, err
	}
	if err := b.Put(seqKey(e.Seq), v); err != nil {
		return Event{}, err
	}
	return e, nil
}

// check validates e before anything is written and normalizes At and
// Detail.
func (l *Ledger) check(e Event) (Event, error) {
	bad := func(format string, a ...any) (Event, error) {
		return Event{}, fmt.Errorf("%w: "+format, append([]any{ErrBadEvent}, a...)...)
	}
	switch {
	case e.Seq != 0:
		return bad("seq %d given; Append assigns it (append-only)", e.Seq)
	case !kindRE.MatchString(e.Kind):
		return bad("kind %q is not snake_case of at most 64 characters", e.Kind)
	case e.PID < 0:
		return bad("pid %d is negative", e.PID)
	case e.Signal != "" && !signalRE.MatchString(e.Signal):
		return bad("signal %q is not a signal name like SIGKILL", e.Signal)
	case e.ExitCode != nil && e.Signal != "":
		// R-EXIT-3: a signal death has no exit code, and no 128+n is synthesized.
		return bad("exit_code and signal are both set")
	case e.Kind == KindExited && e.ExitCode == nil && e.Signal == "":
		return bad("exited needs the observed exit_code or signal") // R-EXIT-1
	case e.Kind == KindLost && (e.ExitCode != nil || e.Signal != ""):
		return bad("lost has no observed exit_code or signal") // R-EXIT-3
	case len(e.Reason) > MaxReasonLen:
		return bad("reason is %d bytes, more than %d", len(e.Reason), MaxReasonLen)
	case len(e.Detail) > MaxDetailLen:
		return bad("detail is %d bytes, more than %d", len(e.Detail), MaxDetailLen)
	}
	if len(e.Detail) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, e.Detail); err != nil || buf.Len() == 0 || buf.Bytes()[0] != '{' {
			return bad("detail is not a JSON object")
		}
		e.Detail = json.RawMessage(buf.Bytes())
	}
	if e.At.IsZero() {
		e.At = l.now()
	}
	e.At = e.At.UTC().Round(0) // as List will return it
	return e, nil
}

// List returns every event of run in seq order; none for an unknown run.
func (l *Ledger) List(run string) ([]Event, error) {
	events, _, err := l.Page(run, 0, 0)
	return events, err
}

// Page returns up to limit events of run with seq > after, in seq order,
// and the cursor for the next page (the last seq returned), or 0 when
// there is no more. limit <= 0 means all.
func (l *Ledger) Page(run string, after uint64, limit int) ([]Event, uint64, error) {
	if err := checkRun(run); err != nil {
		return nil, 0, err
	}
	var out []Event
	var next uint64
	err := l.db.View(func(tx *bbolt.Tx) error {
		b := runBucket(tx, run)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(seqKey(after + 1)); k != nil; k, v = c.Next() {
			if limit > 0 && len(out) == limit {
				next = out[len(out)-1].Seq
				break
			}
			e, err := decode(k, v)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return out, next, nil
}

// Last returns the most recent event of kind for run, and whether there is
// one.
func (l *Ledger) Last(run, kind string) (Event, bool, error) {
	if err := checkRun(run); err != nil {
		return Event{}, false, err
	}
	var out Event
	var found bool
	err := l.db.View(func(tx *bbolt.Tx) error {
		b := runBucket(tx, run)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			var head struct {
				Kind string `json:"kind"`
			}
			if err := json.Unmarshal(v, &head); err != nil {
				return fmt.Errorf("ledger: %s seq %x: %w", run, k, err)
			}
			if head.Kind != kind {
				continue
			}
			e, err := decode(k, v)
			if err != nil {
				return err
			}
			out, found = e, true
			return nil
		}
		return nil
	})
	return out, found, err
}

// Runs lists the runs that have a ledger.
func (l *Ledger) Runs() ([]string, error) {
	var runs []string
	err := l.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(rootBucket).ForEachBucket(func(k []byte) error {
			runs = append(runs, string(k))
			return nil
		})
	})
	return runs, err
}

// Delete removes run's ledger, when the run itself is deleted (R-CLN-9:
// kept until DELETE). Deleting an unknown run is not an error.
func (l *Ledger) Delete(run string) error {
	if err := checkRun(run); err != nil {
		return err
	}
	return l.db.Update(func(tx *bbolt.Tx) error {
		root := tx.Bucket(rootBucket)
		if root.Bucket([]byte(run)) == nil {
			return nil
		}
		return root.DeleteBucket([]byte(run))
	})
}

func checkRun(run string) error {
	if run == "" || len(run) > MaxRunRefLen {
		return ErrBadRunRef
	}
	return nil
}

func runBucket(tx *bbolt.Tx, run string) *bbolt.Bucket {
	root := tx.Bucket(rootBucket)
	if root == nil {
		return nil
	}
	return root.Bucket([]byte(run))
}

func seqKey(seq uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, seq)
	return k
}

func decode(k, v []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(v, &e); err != nil || len(k) != 8 || e.Seq != binary.BigEndian.Uint64(k) {
		return Event{}, fmt.Errorf("ledger: corrupt event at key %x: %v", k, err)
	}
	return e, nil
}
