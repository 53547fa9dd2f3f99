package supervisor

import (
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/taint"
	"github.com/olivares-dev/olivares/agent/transcript"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Buckets (owned by this package; nothing else opens them). Values are the
// JSON of record, keyed by run ref; moves holds the manifests move.go
// keeps.
var (
	bucketRuns = []byte("runs")
)

// record is a run's persisted facts. State is not among them: it is
// derived (R-STATE-1) from these and the live process.
type record struct {
	RunRef        string `json:"run_ref"`
	Tenant        string `json:"tenant"`
	Driver        string `json:"driver"`
	ProfileRef    string `json:"profile_ref"`
	WorkspaceRef  string `json:"workspace_ref,omitempty"`
	WorkspacePath string `json:"workspace_path"`
	// WorktreeBranch is the branch of a worktree run (R-WT-1); its
	// worktree is WorkspacePath.
	WorktreeBranch string `json:"worktree_branch,omitempty"`
	Isolation      string `json:"isolation"`
	// Network is the profile's at launch for an isolated run (R-TR-7).
	Network     string `json:"network,omitempty"`
	TemplateRef string `json:"template_ref,omitempty"`
	HandoffOf   string `json:"handoff_of,omitempty"`
	// Setup is the approved setup command a sandboxed worktree launch
	// runs before its tool (R-SETUP-2), kept until the first generation.
	Setup string `json:"setup,omitempty"`

	ConversationID string `json:"conversation_id,omitempty"`
	// Generation is the last generation spawned (0 before the first).
	Generation uint32 `json:"generation"`
	PID        int    `json:"pid,omitempty"`
	// Handshaken: the last generation completed its handshake.
	Handshaken bool `json:"handshaken,omitempty"`
	// Ended: the last generation's end was recorded.
	Ended         bool   `json:"ended"`
	StopRequested bool   `json:"stop_requested,omitempty"`
	ExitCode      *int   `json:"exit_code,omitempty"`
	Signal        string `json:"signal,omitempty"`
	FailReason    string `json:"fail_reason,omitempty"`

	Limit *apitypes.Limit `json:"limit,omitempty"`
	// LastError is the tool's last failure the driver observed, cleared
	// by the next turn that ends well (R-LERR-1).
	LastError *apitypes.LastError `json:"last_error,omitempty"`
	// StalledSince: the running turn wrote nothing for stall_after
	// (stall.go, R-ATTN-6).
	StalledSince *time.Time `json:"stalled_since,omitempty"`
	// LastMessage is the preview of the last turn's assistant text
	// (R-LIST-8), at most PreviewRunes runes on one line.
	LastMessage string `json:"last_message,omitempty"`
	// Window is Claude Code's last window report (its result frame's
	// modelUsage), kept across a stop and cleared by a new launch
	// (R-ACT-7).
	Window *transcript.WindowReport `json:"window,omitempty"`

	// Usage sums the run's usage rows (R-USE-4); UsageSeq is the last
	// row's seq; UsageOutbox holds the rows the coordinator has not
	// acknowledged yet (usage.go, R-USE-6).
	Usage       *apitypes.UsageTotals `json:"usage,omitempty"`
	UsageSeq    uint64                `json:"usage_seq,omitempty"`
	UsageOutbox []apitypes.UsageTurn  `json:"usage_outbox,omitempty"`

	// Released: cleanup succeeded (R-CLN-3/5, R-CLN-9); the run takes no
	// new generation and may be deleted.
	Released bool `json:"released,omitempty"`
	// PendingApproval: the profile's policy holds the launch (or, with
	// PendingResume, the resume) for a person.
	PendingApproval bool `json:"pending_approval,omitempty"`
	PendingResume   bool `json:"pending_resume,omitempty"`

	// Taint is the grant kinds ever given (sorted, never cleared,
	// R-CRED-1); PGeneration the first generation given a
	// package-registry token (R-CRED-3).
	Taint       []string `json:"taint,omitempty"`
	PGeneration uint32   `json:"p_generation,omitempty"`

	CreatedAt time.Time `json:"created_at"`
	StartedAt time.Time `json:"started_at,omitempty"`
	EndedAt   time.Time `json:"ended_at,omitempty"`
	Rev       uint64    `json:"rev"`
}

func putJSON(tx *bbolt.Tx, bucket []byte, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Bucket(bucket).Put([]byte(key), b)
}

func getJSON(tx *bbolt.Tx, bucket []byte, key string, v any) (bool, error) {
	raw := tx.Bucket(bucket).Get([]byte(key))
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("supervisor: %s/%s: %w", bucket, key, err)
	}
	return true, nil
}

func createBuckets(db *bbolt.DB) error {
	return db.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketRuns, bucketMoves, bucketRequests} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
}

func loadAll[T any](db *bbolt.DB, bucket []byte) ([]T, error) {
	var out []T
	err := db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			var x T
			if err := json.Unmarshal(v, &x); err != nil {
				return fmt.Errorf("supervisor: %s/%s: %w", bucket, k, err)
			}
			out = append(out, x)
			return nil
		})
	})
	return out, err
}

// taint returns the record's taint kinds (docs/rules/taint-audit.md).
func (rec *record) taint() taint.Kinds {
	return taint.Kinds{Kinds: rec.Taint, PGeneration: rec.PGeneration}
}
