package codexsup

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
)

// archiveServer serves thread/read of target (with status), descendants
// from desc(page, cursor), and thread/archive.
type archiveServer struct {
	status  map[string]any
	path    string
	desc    func(cursor *string) (data []map[string]any, next any, rpcErr string)
	archErr string
	readErr string
}

func (a *archiveServer) handle(method string, params json.RawMessage) (any, string) {
	var p struct {
		ThreadID string  `json:"threadId"`
		Ancestor string  `json:"ancestorThreadId"`
		Cursor   *string `json:"cursor"`
	}
	json.Unmarshal(params, &p)
	switch method {
	case "thread/read":
		if a.readErr != "" {
			return nil, a.readErr
		}
		t := threadJSON(p.ThreadID, "target")
		if a.status != nil {
			t["status"] = a.status
		}
		if a.path != "" {
			t["path"] = a.path
		}
		return map[string]any{"thread": t}, ""
	case "thread/list":
		if p.Ancestor == "" {
			return nil, "descendant enumeration without ancestorThreadId"
		}
		if a.desc == nil {
			return map[string]any{"data": []any{}, "nextCursor": nil}, ""
		}
		data, next, e := a.desc(p.Cursor)
		if e != "" {
			return nil, e
		}
		return map[string]any{"data": data, "nextCursor": next}, ""
	case "thread/archive":
		if a.archErr != "" {
			return nil, a.archErr
		}
		return map[string]any{}, ""
	}
	return nil, "unexpected " + method
}

// TestArchiveRefusals is R-CX-ARC-1..6 and R-CX-ARC-11: each unsafe case is
// refused with its code and thread/archive is never called; the safe case
// archives only once Codex accepted it.
func TestArchiveRefusals(t *testing.T) {
	target := uuid(1)
	pages := func(n int) func(*string) ([]map[string]any, any, string) {
		return func(c *string) ([]map[string]any, any, string) {
			i := 0
			if c != nil {
				fmt.Sscanf(*c, "d%d", &i)
			}
			var next any
			if i+1 < n {
				next = fmt.Sprintf("d%d", i+1)
			}
			return []map[string]any{threadJSON(uuid(1000+i), "")}, next, ""
		}
	}
	tests := []struct {
		name    string
		confirm bool
		srv     archiveServer
		setup   func(s *Service, runs *fakeRuns)
		code    string
	}{
		{"no confirmation", false, archiveServer{}, nil, "confirmation_required"},
		{"active", true, archiveServer{status: map[string]any{"type": "active", "activeFlags": []any{}}}, nil, "thread_active"},
		{"system error", true, archiveServer{status: map[string]any{"type": "systemError"}}, nil, "thread_error"},
		{"already archived", true, archiveServer{path: "/h/.codex/archived_sessions/rollout-x.jsonl"}, nil, "thread_archived"},
		{"not found", true, archiveServer{readErr: "thread not loaded: x"}, nil, "thread_not_found"},
		{"pending branch", true, archiveServer{}, func(s *Service, runs *fakeRuns) {
			s.store.create(binding{RunRef: "run_pend", Source: target, State: apitypes.CodexBranchPending})
			runs.set("run_pend", apitypes.StateStopped) // pending, even with no process
		}, "branch_pending"},
		{"live owner of the target", true, archiveServer{}, func(s *Service, runs *fakeRuns) {
			s.store.create(binding{RunRef: "run_own1", Source: uuid(7), State: apitypes.CodexBranchCommitted, Canonical: target})
			runs.set("run_own1", apitypes.StateIdle)
		}, "owner_active"},
		{"this node's run is in a turn", true, archiveServer{}, func(s *Service, runs *fakeRuns) {
			s.store.create(binding{RunRef: "run_turn", Source: uuid(7), State: apitypes.CodexBranchCommitted, Canonical: target})
			runs.set("run_turn", apitypes.StateRunning)
		}, "thread_active"},
		{"live owner of a descendant", true, archiveServer{desc: pages(2)}, func(s *Service, runs *fakeRuns) {
			s.store.create(binding{RunRef: "run_desc", Source: uuid(7), State: apitypes.CodexBranchCommitted, Canonical: uuid(1001)})
			runs.set("run_desc", apitypes.StateIdle)
		}, "owner_active"},
		{"descendant error", true, archiveServer{desc: func(*string) ([]map[string]any, any, string) { return nil, nil, "boom" }}, nil, "descendants_unknown"},
		{"cursor cycle", true, archiveServer{desc: func(*string) ([]map[string]any, any, string) {
			return []map[string]any{}, "same", ""
		}}, nil, "descendants_unknown"},
		{"thread cycle", true, archiveServer{desc: func(c *string) ([]map[string]any, any, string) {
			if c == nil {
				return []map[string]any{threadJSON(uuid(5), "")}, "d1", ""
			}
			return []map[string]any{threadJSON(uuid(5), "")}, nil, ""
		}}, nil, "descendants_unknown"},
		{"the target among its descendants", true, archiveServer{desc: func(*string) ([]map[string]any, any, string) {
			return []map[string]any{threadJSON(target, "")}, nil, ""
		}}, nil, "descendants_unknown"},
		{"past 50 pages", true, archiveServer{desc: pages(51)}, nil, "descendants_unknown"},
		{"past 5,000 threads", true, archiveServer{desc: func(c *string) ([]map[string]any, any, string) {
			i := 0
			if c != nil {
				fmt.Sscanf(*c, "d%d", &i)
			}
			var data []map[string]any
			for j := range 101 {
				data = append(data, threadJSON(uuid(10000+i*101+j), ""))
			}
			return data, fmt.Sprintf("d%d", i+1), ""
		}}, nil, "descendants_unknown"},
		{"lease held by a live run", true, archiveServer{}, func(s *Service, runs *fakeRuns) {
			s.store.acquire(target, "run_lease", nil)
			runs.set("run_lease", apitypes.StateStarting)
		}, "thread_leased"},
		{"Codex refuses", true, archiveServer{archErr: "no rollout found for thread id x"}, nil, "thread_not_found"},
		{"safe: 49 pages of descendants, none owned live", true, archiveServer{desc: pages(49)}, func(s *Service, runs *fakeRuns) {
			s.store.create(binding{RunRef: "run_old1", Source: uuid(7), State: apitypes.CodexBranchCommitted, Canonical: uuid(1003)})
			runs.set("run_old1", apitypes.StateStopped)
		}, ""},
		{"safe: fences out a stopped run's lease", true, archiveServer{}, func(s *Service, runs *fakeRuns) {
			s.store.acquire(target, "run_stop", nil)
			runs.set("run_stop", apitypes.StateStopped)
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := tt.srv
			f := &fakeServer{handle: srv.handle}
			s, runs, _ := newTestService(t, f)
			if tt.setup != nil {
				tt.setup(s, runs)
			}
			out, err := s.Archive(ctx(t), proto.CodexThreadRef{ThreadID: target, ConfirmNoOtherRunner: tt.confirm})
			archives := len(f.callsOf("thread/archive"))
			if tt.code != "" {
				if !isCode(err, tt.code) {
					t.Fatalf("got %v, want %s", err, tt.code)
				}
				if archives != 0 && tt.code != "thread_not_found" {
					t.Fatalf("thread/archive was called %d times on a refusal", archives)
				}
				return
			}
			if err != nil || !out.Archived || archives != 1 {
				t.Fatalf("got %+v %v with %d archive calls, want archived once", out, err, archives)
			}
			if h := s.store.holder(target); h != "" {
				t.Errorf("the archive left its lease held by %q", h)
			}
		})
	}
}
