package codexsup

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
)

func sp(s string) *string { return &s }

// TestProject is R-CX-PROJ-1/2: each row has exactly the projected fields;
// the preview, rollout path, remote and SHA never appear.
func TestProject(t *testing.T) {
	created, updated := time.Unix(1796206725, 0).UTC(), time.Unix(1796206800, 0).UTC()
	active := threadJSON(uuid(2), "")
	active["status"] = map[string]any{"type": "active", "activeFlags": []string{"waitingOnApproval"}}
	sysErr := threadJSON(uuid(3), "x")
	sysErr["status"] = map[string]any{"type": "systemError"}
	sub := threadJSON(uuid(4), "y")
	sub["source"] = map[string]any{"subAgent": map[string]any{"thread_spawn": map[string]any{}}}
	sub["gitInfo"] = nil
	tests := []struct {
		name    string
		in      map[string]any
		overlay string
		want    apitypes.CodexThread
	}{
		{"stored named", threadJSON(uuid(1), "Fix the parser"), "", apitypes.CodexThread{ThreadID: uuid(1), Title: sp("Fix the parser"),
			Cwd: "/work/x", State: "notLoaded", ActiveFlags: []string{}, CreatedAt: created, UpdatedAt: updated,
			Source: "cli", ModelProvider: "fake", CodexVersion: "0.169.0", GitBranch: "main"}},
		{"active unnamed", active, "", apitypes.CodexThread{ThreadID: uuid(2), Cwd: "/work/x", State: "active",
			ActiveFlags: []string{"waitingOnApproval"}, CreatedAt: created, UpdatedAt: updated,
			Source: "cli", ModelProvider: "fake", CodexVersion: "0.169.0", GitBranch: "main"}},
		{"system error", sysErr, "", apitypes.CodexThread{ThreadID: uuid(3), Title: sp("x"), Cwd: "/work/x", State: "error",
			ActiveFlags: []string{}, CreatedAt: created, UpdatedAt: updated, Source: "cli", ModelProvider: "fake",
			CodexVersion: "0.169.0", GitBranch: "main"}},
		{"sub-agent source, no git", sub, "", apitypes.CodexThread{ThreadID: uuid(4), Title: sp("y"), Cwd: "/work/x",
			State: "notLoaded", ActiveFlags: []string{}, CreatedAt: created, UpdatedAt: updated, Source: "subAgent",
			ModelProvider: "fake", CodexVersion: "0.169.0"}},
		{"this node's run has it loaded", threadJSON(uuid(5), ""), "active", apitypes.CodexThread{ThreadID: uuid(5), Cwd: "/work/x",
			State: "active", ActiveFlags: []string{}, CreatedAt: created, UpdatedAt: updated, Source: "cli",
			ModelProvider: "fake", CodexVersion: "0.169.0", GitBranch: "main"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, _ := json.Marshal(tt.in)
			got, err := Project(raw, tt.overlay)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			out, _ := json.Marshal(got)
			for _, leak := range []string{"secret first message", "rollout-", ".codex", "0123abcd", "example.com", "preview", "path", "originator"} {
				if strings.Contains(string(out), leak) {
					t.Errorf("row %s carries %q", out, leak)
				}
			}
			var keys map[string]any
			json.Unmarshal(out, &keys)
			allowed := map[string]bool{"thread_id": true, "title": true, "cwd": true, "state": true, "active_flags": true,
				"created_at": true, "updated_at": true, "source": true, "model_provider": true, "codex_version": true, "git_branch": true}
			for k := range keys {
				if !allowed[k] {
					t.Errorf("row field %q is not in the projection", k)
				}
			}
		})
	}
}

// TestMatchTitle is R-CX-SRCH-1: the title only, case-insensitively; an
// unnamed thread never matches a search (its preview is not looked at).
func TestMatchTitle(t *testing.T) {
	tests := []struct {
		title  *string
		search string
		want   bool
	}{
		{sp("Fix the Parser"), "parser", true},
		{sp("Fix the Parser"), "PARSER", true},
		{sp("Élan vital"), "élan", true},
		{sp("Fix the Parser"), "lexer", false},
		{nil, "secret", false},
		{nil, "", true},
	}
	for _, tt := range tests {
		if got := MatchTitle(tt.title, tt.search); got != tt.want {
			t.Errorf("MatchTitle(%v, %q) got %v, want %v", tt.title, tt.search, got, tt.want)
		}
	}
}

// pagedThreads serves thread/list from pages of threads; cursors are "p<n>".
func pagedThreads(pages [][]map[string]any) func(string, json.RawMessage) (any, string) {
	return func(method string, params json.RawMessage) (any, string) {
		if method != "thread/list" {
			return nil, "unexpected " + method
		}
		var p struct {
			Cursor *string `json:"cursor"`
		}
		json.Unmarshal(params, &p)
		i := 0
		if p.Cursor != nil {
			if _, err := fmtSscanf(*p.Cursor, &i); err != nil {
				return nil, "invalid cursor: " + *p.Cursor
			}
		}
		res := map[string]any{"data": pages[i], "nextCursor": nil, "backwardsCursor": nil}
		if i+1 < len(pages) {
			res["nextCursor"] = "p" + itoa(i+1)
		}
		return res, ""
	}
}

// TestSearchScansFivePages is R-CX-SRCH-2..4: a search scans at most five
// native pages per catalog page, never sends the query to Codex, always
// asks for non-archived cli and vscode threads, and returns a cursor that
// goes on with the scan.
func TestSearchScansFivePages(t *testing.T) {
	var pages [][]map[string]any
	for p := range 7 {
		var page []map[string]any
		for i := range 100 {
			name := "other"
			if p == 6 && i == 42 {
				name = "The Needle"
			}
			page = append(page, threadJSON(uuid(p*100+i), name))
		}
		pages = append(pages, page)
	}
	f := &fakeServer{handle: pagedThreads(pages)}
	s, _, _ := newTestService(t, f)
	first, err := s.Threads(ctx(t), proto.CodexThreadsList{Search: "needle", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	lists := f.callsOf("thread/list")
	if len(first.Rows) != 0 || first.NextCursor == "" || len(lists) != MaxSearchPages {
		t.Fatalf("first page: %d rows, cursor %q, %d native pages; want 0 rows, a cursor, %d pages", len(first.Rows), first.NextCursor, len(lists), MaxSearchPages)
	}
	for _, c := range lists {
		var p map[string]any
		json.Unmarshal(c.Params, &p)
		if _, ok := p["searchTerm"]; ok {
			t.Errorf("the query went to Codex: %s", c.Params)
		}
		if p["archived"] != false || !reflect.DeepEqual(p["sourceKinds"], []any{"cli", "vscode"}) {
			t.Errorf("thread/list params %s, want archived false and sourceKinds [cli vscode]", c.Params)
		}
	}
	second, err := s.Threads(ctx(t), proto.CodexThreadsList{Search: "needle", Limit: 10, Cursor: first.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Rows) != 1 || second.Rows[0].ThreadID != uuid(642) || second.NextCursor != "" {
		t.Fatalf("second page: %+v, want the needle and no cursor", second)
	}
}

// TestCatalogCursorResumesMidPage: a full page that stops inside a native
// page goes on from the next thread of it, never skipping or repeating one.
func TestCatalogCursorResumesMidPage(t *testing.T) {
	var page []map[string]any
	for i := range 7 {
		page = append(page, threadJSON(uuid(i), "match "+itoa(i)))
	}
	f := &fakeServer{handle: pagedThreads([][]map[string]any{page, {threadJSON(uuid(99), "match 99")}})}
	s, _, _ := newTestService(t, f)
	var got []string
	cursor := ""
	for range 10 {
		h, err := s.Threads(ctx(t), proto.CodexThreadsList{Search: "MATCH", Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range h.Rows {
			got = append(got, r.ThreadID)
		}
		if cursor = h.NextCursor; cursor == "" {
			break
		}
	}
	want := []string{uuid(0), uuid(1), uuid(2), uuid(3), uuid(4), uuid(5), uuid(6), uuid(99)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := s.Threads(ctx(t), proto.CodexThreadsList{Limit: 3, Cursor: "not-a-cursor"}); !isCode(err, "bad_cursor") {
		t.Errorf("a forged cursor: got %v, want bad_cursor", err)
	}
	if _, err := s.Threads(ctx(t), proto.CodexThreadsList{Limit: 101}); !isCode(err, "bad_limit") {
		t.Errorf("limit 101: got %v, want bad_limit", err)
	}
}

// kinds are the refusals by the wire code agentd gives them.
var kinds = map[string]error{
	"app_server_error":              ErrAppServerError,
	"app_server_unavailable":        ErrAppServerUnavailable,
	"bad_cursor":                    ErrBadCursor,
	"bad_limit":                     ErrBadLimit,
	"bad_thread_id":                 ErrBadThreadId,
	"confirmation_required":         ErrConfirmationRequired,
	"branch_pending":                ErrBranchPending,
	"branch_race":                   ErrBranchRace,
	"codex_supervision_unavailable": ErrCodexSupervisionUnavailable,
	"descendants_unknown":           ErrDescendantsUnknown,
	"owner_active":                  ErrOwnerActive,
	"thread_active":                 ErrThreadActive,
	"thread_archived":               ErrThreadArchived,
	"thread_error":                  ErrThreadError,
	"thread_leased":                 ErrThreadLeased,
	"app_server_timeout":            ErrAppServerTimeout,
	"not_found":                     ErrNotFound,
	"thread_not_found":              ErrThreadNotFound,
	"not_ready":                     ErrNotReady,
}

func isCode(err error, code string) bool {
	return kinds[code] != nil && errors.Is(err, kinds[code])
}

// TestCatalogNamesSupervisionAndLease: a row says which run of this node
// continues the thread (so continue opens it again, R-CX-SCOPE-5) and who
// holds the thread's write lease while it is busy; other rows say neither.
func TestCatalogNamesSupervisionAndLease(t *testing.T) {
	f := &fakeServer{handle: pagedThreads([][]map[string]any{{threadJSON(uuid(1), "a"), threadJSON(uuid(2), "b"), threadJSON(uuid(3), "c")}})}
	s, _, _ := newTestService(t, f)
	if _, ok, err := s.store.create(binding{RunRef: "run_sup", Tenant: "t1", Source: uuid(1), State: apitypes.CodexBranchPending}); err != nil || !ok {
		t.Fatalf("create binding: %v %v", ok, err)
	}
	if _, err := s.store.acquire(uuid(2), transientPrefix+"op", nil); err != nil {
		t.Fatal(err)
	}
	h, err := s.Threads(ctx(t), proto.CodexThreadsList{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]string{}
	for _, r := range h.Rows {
		got[r.ThreadID] = [2]string{r.SupervisedRun, r.LeaseHolder}
	}
	want := map[string][2]string{uuid(1): {"run_sup", ""}, uuid(2): {"", transientPrefix + "op"}, uuid(3): {"", ""}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
