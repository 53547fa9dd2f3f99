package proto

import (
	"errors"
	"fmt"
	"io"

	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Codex supervision ops (docs/rules/codex-supervision.md), coordinator→agent. The two
// read commands keep the node command names of R-CX-CAT-2 and Q-50.
const (
	// OpCodexThreads lists one page of the node's non-archived threads:
	// CodexThreadsList → CodexPayload, then the apitypes.CodexHost JSON in
	// chunk frames.
	OpCodexThreads = "codex.appServer.threads.list.v1"
	// OpCodexTurns reads one transcript page: CodexTurnsList →
	// CodexPayload, then the apitypes.CodexTurnsPage JSON in chunk frames.
	// A page over MaxCodexPage is never sent (R-CX-TRN-5): the reply then
	// carries TooLarge and no frames follow.
	OpCodexTurns = "codex.appServer.thread.turns.list.v1"
	// OpCodexContinue: CodexThreadRef (with RunRef and Tenant) →
	// CodexContinued.
	OpCodexContinue = "codex.appServer.thread.continue.v1"
	// OpCodexArchive: CodexThreadRef → apitypes.CodexArchived.
	OpCodexArchive = "codex.appServer.thread.archive.v1"
	// OpCodexBranch: header RunRef → apitypes.CodexBranch.
	OpCodexBranch = "codex.branch.read"
)

// MaxCodexPage is R-CX-TRN-5's bound on a serialized turn page (20 MiB).
const MaxCodexPage = 20 << 20

// CodexSupervision is the node capability (R-CX-PERM-1, R-CX-CONN-7): set
// only when the node's own config enables supervision with a supported
// connection (stdio, homeScope user) and the codex binary is found.
type CodexSupervision struct {
	Transport string `json:"transport"`  // stdio
	HomeScope string `json:"home_scope"` // user
}

// CodexThreadsList asks for one catalog page of the node (R-CX-CAT-1).
type CodexThreadsList struct {
	// Search is matched against titles here, never sent to Codex
	// (R-CX-SRCH-2).
	Search string `json:"search,omitempty"`
	// Limit is 1..100 rows (R-CX-CLI-5).
	Limit  int    `json:"limit"`
	Cursor string `json:"cursor,omitempty"`
}

// CodexTurnsList asks for one transcript page.
type CodexTurnsList struct {
	ThreadID string `json:"thread_id"`
	Cursor   string `json:"cursor,omitempty"`
}

// CodexThreadRef names a native thread of the node, for continue and
// archive. RunRef and Tenant are the run continue creates when the source
// has none yet (R-CX-CONT-2).
type CodexThreadRef struct {
	ThreadID             string `json:"thread_id"`
	RunRef               string `json:"run_ref,omitempty"`
	Tenant               string `json:"tenant,omitempty"`
	ConfirmNoOtherRunner bool   `json:"confirm_no_other_runner,omitempty"`
}

// CodexPayload precedes a payload sent as chunk frames: its size. TooLarge,
// when set, replaces the payload (no frame follows).
type CodexPayload struct {
	Bytes    int                    `json:"bytes"`
	TooLarge *CodexPageTooLargeInfo `json:"too_large,omitempty"`
}

// CodexPageTooLargeInfo describes a refused page (R-CX-TRN-6).
type CodexPageTooLargeInfo struct {
	Bytes           int64  `json:"bytes"`
	NextCursor      string `json:"next_cursor,omitempty"`
	BackwardsCursor string `json:"backwards_cursor,omitempty"`
}

// CodexContinued answers OpCodexContinue: the supervised run, and whether
// this call created it (false: the run already bound to the source,
// R-CX-CONT-2).
type CodexContinued struct {
	Created bool         `json:"created"`
	Run     apitypes.Run `json:"run"`
}

// WriteChunks writes p as frames of at most wire.MaxFrame bytes: a reply
// larger than wire.MaxMessage crosses the tunnel this way.
func WriteChunks(w io.Writer, p []byte) error {
	for len(p) > 0 {
		n := min(len(p), wire.MaxFrame)
		if err := wire.WriteFrame(w, p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// ErrChunks: chunk frames that do not add up to the announced size.
var ErrChunks = errors.New("proto: chunk frames do not match the announced size")

// ReadChunks reads the n bytes WriteChunks sent. It refuses an n over max
// before reading anything.
func ReadChunks(r io.Reader, n, max int) ([]byte, error) {
	if n < 0 || n > max {
		return nil, fmt.Errorf("%w: %d bytes announced, at most %d", ErrChunks, n, max)
	}
	out := make([]byte, 0, n)
	buf := make([]byte, 0, min(n, wire.MaxFrame))
	for len(out) < n {
		p, err := wire.ReadFrame(r, buf)
		if err != nil {
			return nil, err
		}
		if len(out)+len(p) > n {
			return nil, ErrChunks
		}
		out = append(out, p...)
	}
	return out, nil
}
