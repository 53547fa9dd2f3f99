package codexsup

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/proto"
)

// Catalog bounds.
const (
	// MaxSearchPages is R-CX-SRCH-4: native pages scanned per catalog page.
	MaxSearchPages = 5
	// searchPageSize is the native page size of a scan.
	searchPageSize = 100
	// MaxLimit and DefaultLimit are R-CX-CLI-5's, per host.
	MaxLimit     = 100
	DefaultLimit = 50
)

// catalogKinds are the interactive source kinds the catalog asks for
// (R-CX-CAT-1).
var catalogKinds = []string{"cli", "vscode"}

// thread is what the projection reads of a Codex Thread (schema v2).
type thread struct {
	ID        string          `json:"id"`
	Name      *string         `json:"name"`
	Cwd       string          `json:"cwd"`
	Status    threadStatus    `json:"status"`
	CreatedAt int64           `json:"createdAt"`
	UpdatedAt int64           `json:"updatedAt"`
	Source    json.RawMessage `json:"source"`
	Provider  string          `json:"modelProvider"`
	Version   string          `json:"cliVersion"`
	GitInfo   *struct {
		Branch *string `json:"branch"`
	} `json:"gitInfo"`
	// Path is read only to tell an archived rollout (never projected).
	Path *string `json:"path"`
}

type threadStatus struct {
	Type        string   `json:"type"`
	ActiveFlags []string `json:"activeFlags"`
}

// state maps Codex's status to a row state (R-CX-SCOPE-8).
func (t thread) state() string {
	switch t.Status.Type {
	case "idle":
		return apitypes.CodexStateIdle
	case "active":
		return apitypes.CodexStateActive
	case "systemError":
		return apitypes.CodexStateError
	}
	return apitypes.CodexStateNotLoaded
}

func (t thread) archived() bool {
	return t.Path != nil && strings.Contains(*t.Path, "/archived_sessions/")
}

// sourceName normalises Codex's SessionSource: a kind name, or "custom" /
// "subAgent" for its object forms.
func sourceName(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		for k := range obj {
			return k
		}
	}
	return "unknown"
}

// Project is R-CX-PROJ-1/2: the row of a Codex thread, with exactly the
// projected fields. state overrides Codex's process-local status when not
// empty (a thread this node's own run has loaded, R-CX-CONN-6).
func Project(raw json.RawMessage, state string) (apitypes.CodexThread, error) {
	var t thread
	if err := json.Unmarshal(raw, &t); err != nil {
		return apitypes.CodexThread{}, err
	}
	return t.project(state), nil
}

func (t thread) project(state string) apitypes.CodexThread {
	row := apitypes.CodexThread{
		ThreadID: t.ID, Cwd: t.Cwd, State: t.state(), ActiveFlags: []string{},
		CreatedAt: time.Unix(t.CreatedAt, 0).UTC(), UpdatedAt: time.Unix(t.UpdatedAt, 0).UTC(),
		Source: sourceName(t.Source), ModelProvider: t.Provider, CodexVersion: t.Version,
	}
	if t.Name != nil && *t.Name != "" {
		name := *t.Name
		row.Title = &name
	}
	if row.State == apitypes.CodexStateActive {
		for _, f := range t.Status.ActiveFlags {
			if f == "waitingOnApproval" || f == "waitingOnUserInput" {
				row.ActiveFlags = append(row.ActiveFlags, f)
			}
		}
	}
	if state != "" {
		row.State = state
		if state != apitypes.CodexStateActive {
			row.ActiveFlags = []string{}
		}
	}
	if t.GitInfo != nil && t.GitInfo.Branch != nil {
		row.GitBranch = *t.GitInfo.Branch
	}
	return row
}

// MatchTitle is R-CX-SRCH-1: the title only, case-insensitively.
func MatchTitle(title *string, search string) bool {
	if search == "" {
		return true
	}
	return title != nil && strings.Contains(strings.ToLower(*title), strings.ToLower(search))
}

// catalogCursor continues a host's scan (R-CX-SRCH-3): the native page it
// stopped in and how many of that page's threads were already scanned.
type catalogCursor struct {
	Native string `json:"n,omitempty"`
	Skip   int    `json:"k,omitempty"`
}

var errBadCursor = refusal.New(ErrBadCursor, "the cursor is not one this host issued; start again without it")

func encodeCursor(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string, v any) error {
	if s == "" {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 64<<10 {
		return errBadCursor
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if dec.Decode(v) != nil {
		return errBadCursor
	}
	return nil
}

type listParams struct {
	Archived         bool     `json:"archived"`
	SourceKinds      []string `json:"sourceKinds"`
	Limit            int      `json:"limit"`
	Cursor           *string  `json:"cursor,omitempty"`
	AncestorThreadID string   `json:"ancestorThreadId,omitempty"`
}

type listResult struct {
	Data       []json.RawMessage `json:"data"`
	NextCursor *string           `json:"nextCursor"`
}

// Threads is one catalog page of this node (R-CX-CAT-1): always
// archived:false and the cli and vscode source kinds. A search is matched
// here against titles and never sent to Codex; it scans at most
// MaxSearchPages native pages (R-CX-SRCH-2/4).
func (s *Service) Threads(ctx context.Context, p proto.CodexThreadsList) (apitypes.CodexHost, error) {
	if err := s.available(); err != nil {
		return apitypes.CodexHost{}, err
	}
	if p.Limit == 0 {
		p.Limit = DefaultLimit
	}
	if p.Limit < 1 || p.Limit > MaxLimit {
		return apitypes.CodexHost{}, refusal.New(ErrBadLimit, "limit must be 1..%d", MaxLimit)
	}
	var cur catalogCursor
	if err := decodeCursor(p.Cursor, &cur); err != nil || cur.Skip < 0 || cur.Skip >= searchPageSize {
		return apitypes.CodexHost{}, errBadCursor
	}
	pages, size := 1, p.Limit
	if p.Search != "" {
		pages = MaxSearchPages
	}
	if p.Search != "" || cur.Skip > 0 {
		// Positions in a page are counted from its start, whatever size.
		size = searchPageSize
	}
	overlay := s.overlay()
	supervised := map[string]string{}
	if bs, err := s.store.bindings(); err == nil {
		for _, b := range bs {
			supervised[b.Source] = b.RunRef
		}
	}
	holders := s.store.holders()
	out := apitypes.CodexHost{Rows: []apitypes.CodexThread{}}
	native, skip := cur.Native, cur.Skip
	for range pages {
		lp := listParams{Archived: false, SourceKinds: catalogKinds, Limit: size}
		if native != "" {
			lp.Cursor = &native
		}
		var res listResult
		if err := s.conn.Call(ctx, "thread/list", lp, &res); err != nil {
			return apitypes.CodexHost{}, s.codexErr("thread/list", err)
		}
		for i := skip; i < len(res.Data); i++ {
			var t thread
			if err := json.Unmarshal(res.Data[i], &t); err != nil || t.ID == "" {
				continue
			}
			row := t.project(overlay[t.ID])
			if !MatchTitle(row.Title, p.Search) {
				continue
			}
			row.SupervisedRun, row.LeaseHolder = supervised[t.ID], holders[t.ID]
			out.Rows = append(out.Rows, row)
			if len(out.Rows) == p.Limit {
				switch {
				case i+1 < len(res.Data):
					out.NextCursor = encodeCursor(catalogCursor{Native: native, Skip: i + 1})
				case res.NextCursor != nil && *res.NextCursor != "":
					out.NextCursor = encodeCursor(catalogCursor{Native: *res.NextCursor})
				}
				return out, nil
			}
		}
		skip = 0
		if res.NextCursor == nil || *res.NextCursor == "" {
			return out, nil
		}
		native = *res.NextCursor
	}
	// The scan budget ran out: the cursor goes on from here.
	out.NextCursor = encodeCursor(catalogCursor{Native: native})
	return out, nil
}

// overlay is the state of threads this node's own runs have loaded:
// Codex's status is process-local (R-CX-CONN-6), and the agent's process
// is the one that knows its runs.
func (s *Service) overlay() map[string]string {
	out := map[string]string{}
	runs, err := s.runtime()
	if err != nil {
		return out
	}
	bs, err := s.store.bindings()
	if err != nil {
		return out
	}
	for _, b := range bs {
		if b.Canonical == "" {
			continue
		}
		r, err := runs.Get(b.RunRef)
		if err != nil {
			continue
		}
		switch r.State {
		case apitypes.StateRunning:
			out[b.Canonical] = apitypes.CodexStateActive
		case apitypes.StateIdle, apitypes.StateStarting:
			out[b.Canonical] = apitypes.CodexStateIdle
		}
	}
	return out
}

// codexErr turns a connection or Codex error into what a client may see:
// a stable code and a sentence of ours; Codex's own text stays in the
// node's log (R-CX-PROJ-2).
func (s *Service) codexErr(method string, err error) error {
	var re *RPCError
	var rf *refusal.Error
	switch {
	case errors.As(err, &rf):
		return err
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return refusal.New(ErrAppServerTimeout, "the codex app-server on node %s did not answer %s in time", s.o.NodeID, method)
	case errors.As(err, &re):
		s.o.Log.Warn("app-server refused a call", "method", method, logging.Err(err))
		switch {
		case strings.HasPrefix(re.Message, "thread not loaded"), strings.HasPrefix(re.Message, "no rollout found"),
			strings.HasPrefix(re.Message, "invalid thread id"):
			return refusal.New(ErrThreadNotFound, "node %s has no such non-archived Codex thread", s.o.NodeID)
		case strings.HasPrefix(re.Message, "invalid cursor"):
			return errBadCursor
		}
		return refusal.New(ErrAppServerError, "the codex app-server on node %s refused %s; see the agent log", s.o.NodeID, method)
	}
	s.o.Log.Warn("app-server call failed", "method", method, logging.Err(err))
	return refusal.New(ErrAppServerUnavailable, "the codex app-server on node %s is unavailable; see the agent log", s.o.NodeID)
}
