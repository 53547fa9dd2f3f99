package journeys

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// gitRun runs git in dir with a fixed identity and no user config.
func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRepo makes a git repository with two commits on main.
func newRepo(t *testing.T, dir string) {
	t.Helper()
	gitRun(t, dir, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(dir, "README.md"), "one\n")
	gitRun(t, dir, "add", "README.md")
	gitRun(t, dir, "commit", "-q", "-m", "one")
	writeFile(t, filepath.Join(dir, "README.md"), "two\n")
	gitRun(t, dir, "commit", "-q", "-am", "two")
}

func (f *fixture) workspacePath(ref string) string {
	return "/v1/m/sessions/workspaces/" + ref
}

// J05 — worktree lifecycle: setup approval, worktree_from, diff, cleanup,
// delete (R-WT-1..6, R-SETUP-1..13, R-WTF-1..7, R-DIFF-1..8, R-CLN-1..9,
// R-DEL-1..5), with real git repositories.
func TestJ05WorktreeLifecycle(t *testing.T) {
	byTransport(t, func(t *testing.T, transport string) {
		f := setup(t, transport, integration.ProcOptions{})
		newRepo(t, f.wsDir)
		gitRun(t, f.wsDir, "branch", "feature", "HEAD~1")
		worktrees := filepath.Join(f.agent.Dir, "worktrees")
		p := f.profile("codex")
		launch := func(body apitypes.LaunchRequest) integration.Response {
			body.ProviderProfileRef, body.WorkspaceRef = p.Ref, f.ws.Ref
			return f.operator.Call(http.MethodPost, runsPath, body)
		}
		yes := true

		// Setup command (R-SETUP-3..9): a worktree launch waits for its
		// approval, before any worktree exists.
		var w apitypes.Workspace
		f.admin.Must(http.StatusOK, http.MethodPut, f.workspacePath(f.ws.Ref)+"/setup-command", map[string]string{"command": "npm ci"}, &w)
		if w.SetupCommand == nil || *w.SetupCommand != "npm ci" || w.SetupCommandSHA256 == "" || *w.SetupApproved {
			t.Fatalf("setup command: %+v", w)
		}
		got := launch(apitypes.LaunchRequest{Worktree: &yes})
		if got.Status != http.StatusConflict || got.ErrorCode() != "setup_not_approved" ||
			!strings.Contains(string(got.Body), `npm ci`) || !strings.Contains(string(got.Body), "approve-setup") {
			t.Fatalf("worktree launch with an unapproved setup: %d %s", got.Status, got.Body)
		}
		if n := globCount(t, filepath.Join(worktrees, "*", "*")); n != 0 {
			t.Fatalf("a refused launch left %d worktrees", n)
		}
		// The CLI tells the refusal with its own flag (issue 17).
		if out, code := f.cli("session", "start", "--profile", p.Ref, "--workspace", f.ws.Ref, "--worktree"); code != 5 ||
			!strings.Contains(out, "start with --no-setup to skip it once") || strings.Contains(out, "no_setup") {
			t.Fatalf("olivares session start --worktree with an unapproved setup: exit %d %s", code, out)
		}
		approve := f.workspacePath(f.ws.Ref) + "/setup-command/approve"
		if got := f.admin.Call(http.MethodPost, approve, map[string]string{"sha256": strings.Repeat("a", 64)}); got.Status != http.StatusConflict {
			t.Fatalf("approve a stale hash: %d", got.Status)
		}
		sha := w.SetupCommandSHA256
		f.admin.Must(http.StatusOK, http.MethodPost, approve, map[string]string{"sha256": sha}, &w)
		if !*w.SetupApproved || w.SetupApproval == nil || w.SetupApproval.SHA256 != sha {
			t.Fatalf("approved: %+v", w)
		}
		if n := len(audit(t, f.admin, "event="+apitypes.AuditWorkspaceApproveSetup)); n != 1 {
			t.Fatalf("approve-setup audit entries: %d", n)
		}
		f.admin.Must(http.StatusOK, http.MethodPut, f.workspacePath(f.ws.Ref)+"/setup-command", map[string]string{"command": "npm ci "}, &w)
		if *w.SetupApproved || w.SetupApproval == nil {
			t.Fatalf("after one more space: approved %v, approval %+v (R-SETUP-6, R-SETUP-9)", *w.SetupApproved, w.SetupApproval)
		}
		if got := launch(apitypes.LaunchRequest{Worktree: &yes}); got.Status != http.StatusConflict {
			t.Fatalf("launch after the edit: %d", got.Status)
		}
		// no_setup skips it, once (R-CRT-3).
		var skipped apitypes.Run
		got = launch(apitypes.LaunchRequest{Worktree: &yes, NoSetup: true})
		if got.Status != http.StatusCreated {
			t.Fatalf("no_setup: %d %s", got.Status, got.Body)
		}
		got.JSON(t, &skipped)
		f.admin.Must(http.StatusOK, http.MethodPut, f.workspacePath(f.ws.Ref)+"/setup-command", map[string]string{"command": "npm ci"}, &w)
		if !*w.SetupApproved {
			t.Fatal("restoring the approved text did not apply the approval again (R-SETUP-9)")
		}

		// worktree_from (R-WTF-*): all refusals before anything exists.
		dangling := gitRun(t, f.wsDir, "commit-tree", "-m", "dangling", gitRun(t, f.wsDir, "rev-parse", "HEAD^{tree}"))
		for _, from := range []string{"HEAD~1", dangling, "nope", "--all", "main..feature"} {
			if got := launch(apitypes.LaunchRequest{Worktree: &yes, WorktreeFrom: from}); got.Status != http.StatusUnprocessableEntity {
				t.Fatalf("worktree_from %q: %d %s, want 422", from, got.Status, got.Body)
			}
		}
		if got := launch(apitypes.LaunchRequest{WorktreeFrom: "feature"}); got.Status != http.StatusUnprocessableEntity {
			t.Fatalf("worktree_from without worktree: %d", got.Status)
		}
		mainBefore, featureBefore := gitRun(t, f.wsDir, "rev-parse", "main"), gitRun(t, f.wsDir, "rev-parse", "feature")
		var r apitypes.Run
		got = launch(apitypes.LaunchRequest{Worktree: &yes, WorktreeFrom: "feature"})
		if got.Status != http.StatusCreated {
			t.Fatalf("worktree from a branch: %d %s", got.Status, got.Body)
		}
		got.JSON(t, &r)
		if r.WorktreeBranch != "olivares/"+r.RunRef || r.WorkspacePath != filepath.Join(worktrees, integration.Tenant, r.RunRef) {
			t.Fatalf("worktree run: branch %q path %q", r.WorktreeBranch, r.WorkspacePath)
		}
		if head := gitRun(t, r.WorkspacePath, "rev-parse", "HEAD"); head != featureBefore {
			t.Fatalf("the worktree starts at %s, want feature's %s (R-WTF-2)", head, featureBefore)
		}
		if gitRun(t, f.wsDir, "rev-parse", "main") != mainBefore || gitRun(t, f.wsDir, "rev-parse", "feature") != featureBefore || gitRun(t, f.wsDir, "symbolic-ref", "HEAD") != "refs/heads/main" {
			t.Fatal("the workspace checkout or the named branch moved (R-WTF-2)")
		}

		// The tool's work: a commit on the branch. diff shows it; diff/file
		// reads committed objects only (R-DIFF-1..4, R-DIFF-7).
		writeFile(t, filepath.Join(r.WorkspacePath, "new.txt"), strings.Repeat("x", 70<<10))
		gitRun(t, r.WorkspacePath, "add", "new.txt")
		gitRun(t, r.WorkspacePath, "commit", "-q", "-m", "new")
		writeFile(t, filepath.Join(r.WorkspacePath, "uncommitted.txt"), "not yet\n")
		var d apitypes.Diff
		f.viewer.Must(http.StatusOK, http.MethodGet, runURL(r.RunRef, "diff"), nil, &d)
		if d.Branch != r.WorktreeBranch || len(d.Base) != 40 || len(d.Head) != 40 || len(d.Files) != 1 || d.Files[0].Path != "new.txt" || d.Files[0].Status != "added" || d.Truncated {
			t.Fatalf("diff: %+v", d)
		}
		// R-DIFF-9: the uncommitted file is counted, not listed.
		if d.Uncommitted == nil || *d.Uncommitted != 1 {
			t.Fatalf("diff: uncommitted %v, want 1", d.Uncommitted)
		}
		var fd apitypes.FileDiff
		f.viewer.Must(http.StatusOK, http.MethodGet, runURL(r.RunRef, "diff", "file")+"?path=new.txt", nil, &fd)
		if fd.Original != "" || len(fd.Modified) != 64<<10 || !fd.ModifiedTruncated {
			t.Fatalf("diff/file: original %d bytes, modified %d bytes truncated %v", len(fd.Original), len(fd.Modified), fd.ModifiedTruncated)
		}
		for path, code := range map[string]int{"uncommitted.txt": 404, "../README.md": 404, "/etc/passwd": 404, "": 400} {
			if got := f.viewer.Call(http.MethodGet, runURL(r.RunRef, "diff", "file")+"?path="+path, nil); got.Status != code {
				t.Fatalf("diff/file %q: %d, want %d", path, got.Status, code)
			}
		}
		big := make([]byte, 17<<20)
		rand.Read(big)
		os.WriteFile(filepath.Join(r.WorkspacePath, "big.bin"), big, 0o600)
		gitRun(t, r.WorkspacePath, "add", "big.bin")
		gitRun(t, r.WorkspacePath, "commit", "-q", "-m", "big")
		if got := f.viewer.Call(http.MethodGet, runURL(r.RunRef, "diff", "file")+"?path=big.bin", nil); got.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("a 17 MiB blob: %d, want 413 (R-DIFF-5)", got.Status)
		}
		// Another tenant: 404 (R-DIFF-6, R-TEN-3); a run without a worktree: 404.
		other := f.env.Client(f.env.Principal("other", "admin", "human"))
		other.Tenant = "other"
		if got := other.Call(http.MethodGet, runURL(r.RunRef, "diff"), nil); got.Status != http.StatusNotFound {
			t.Fatalf("diff of another tenant's run: %d", got.Status)
		}
		plain := f.launch(p)
		if got := f.viewer.Call(http.MethodGet, runURL(plain.RunRef, "diff"), nil); got.Status != http.StatusNotFound || got.ErrorCode() != "no_worktree" {
			t.Fatalf("diff of a run without a worktree: %d %s", got.Status, got.Body)
		}
		f.post(f.operator, http.StatusOK, plain.RunRef, "stop", nil, nil)

		// DLP deny on a second registration of the repository: 403, audited
		// like a workspace file read (R-DIFF-5).
		var denied apitypes.Workspace
		f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/workspaces", apitypes.WorkspaceCreate{NodeID: f.agent.ID, Path: f.wsDir, Name: "w-dlp", DLP: apitypes.DLPDeny}, &denied)
		var dr apitypes.Run
		f.operator.Must(http.StatusCreated, http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: denied.Ref, Worktree: &yes}, &dr)
		if got := f.viewer.Call(http.MethodGet, runURL(dr.RunRef, "diff", "file")+"?path=README.md", nil); got.Status != http.StatusForbidden {
			t.Fatalf("diff/file under DLP deny: %d, want 403", got.Status)
		}
		reads := audit(t, f.admin, "event="+apitypes.AuditWorkspaceFileRead+"&run_ref="+dr.RunRef)
		if len(reads) != 1 || !strings.Contains(string(reads[0].Detail), `"refused":true`) {
			t.Fatalf("DLP refusal audit: %+v", reads)
		}
		f.post(f.operator, http.StatusOK, dr.RunRef, "stop", nil, nil)

		// Resume goes back into the same worktree (R-WT-5, R-RES-3).
		f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
		f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("hello"), nil)
		f.operator.AwaitRun(r.RunRef, wait, "a conversation", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle && r.ConversationID != "" })
		f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
		var res apitypes.Run
		f.post(f.operator, http.StatusOK, r.RunRef, "resume", nil, &res)
		if res.WorkspacePath != r.WorkspacePath || res.WorktreeBranch != r.WorktreeBranch {
			t.Fatalf("resume: path %q branch %q", res.WorkspacePath, res.WorktreeBranch)
		}
		f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)

		// Cleanup (R-CLN-*) and delete (R-DEL-*).
		got = f.admin.Call(http.MethodDelete, runURL(r.RunRef), nil)
		if got.Status != http.StatusConflict || !strings.Contains(string(got.Body), "session must be cleaned before delete (state=stopped)") {
			t.Fatalf("delete before cleanup: %d %s", got.Status, got.Body)
		}
		os.Remove(filepath.Join(r.WorkspacePath, "uncommitted.txt"))
		for _, body := range [][]byte{nil, []byte(`{"discard_worktree":"true"}`), []byte(`{"discard_worktree":1}`), []byte(`nonsense`)} {
			got := f.admin.Call(http.MethodPost, runURL(r.RunRef, "cleanup"), body)
			if got.Status != http.StatusConflict || got.ErrorCode() != "unmerged_work" {
				t.Fatalf("cleanup %q with unmerged work: %d %s", body, got.Status, got.Body)
			}
		}
		if out, code := f.cli("session", "cleanup", r.RunRef); code != 5 || !strings.Contains(out, "repeat with --discard-worktree") || strings.Contains(out, "discard_worktree") {
			t.Fatalf("olivares session cleanup with unmerged work: exit %d %s", code, out)
		}
		if now := f.viewer.Run(r.RunRef); now.State != apitypes.StateStopped {
			t.Fatalf("a refused cleanup changed the run: %s", now.State)
		}
		tip := gitRun(t, f.wsDir, "rev-parse", r.WorktreeBranch)
		var rel apitypes.Run
		f.admin.Must(http.StatusOK, http.MethodPost, runURL(r.RunRef, "cleanup"), []byte(`{"discard_worktree":true}`), &rel)
		if rel.State != apitypes.StateReleased {
			t.Fatalf("cleanup with discard: %s", rel.State)
		}
		evs := f.viewer.Events(r.RunRef)
		var cd map[string]string
		json.Unmarshal(evs[len(evs)-1].Detail, &cd)
		if evs[len(evs)-1].Kind != "cleaned" || cd["worktree"] != "discarded" || cd["branch_tip"] != tip {
			t.Fatalf("cleaned event: %s %v, want discarded at %s", evs[len(evs)-1].Kind, cd, tip)
		}
		if _, err := os.Stat(r.WorkspacePath); !os.IsNotExist(err) {
			t.Fatalf("the worktree is still there: %v", err)
		}
		f.admin.Must(http.StatusNoContent, http.MethodDelete, runURL(r.RunRef), nil, nil)
		if n := len(audit(t, f.admin, "event=sessions.run.deleted&run_ref="+r.RunRef)); n != 1 {
			t.Fatalf("deleted audit entries: %d", n)
		}

		// A merged branch releases without discard (R-CLN-3).
		var m apitypes.Run
		f.operator.Must(http.StatusCreated, http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: f.ws.Ref, Worktree: &yes}, &m)
		writeFile(t, filepath.Join(m.WorkspacePath, "merged.txt"), "m\n")
		gitRun(t, m.WorkspacePath, "add", "merged.txt")
		gitRun(t, m.WorkspacePath, "commit", "-q", "-m", "merged")
		f.post(f.operator, http.StatusOK, m.RunRef, "stop", nil, nil)
		gitRun(t, f.wsDir, "merge", "-q", "--ff-only", m.WorktreeBranch)
		f.admin.Must(http.StatusOK, http.MethodPost, runURL(m.RunRef, "cleanup"), nil, &rel)
		evs = f.viewer.Events(m.RunRef)
		json.Unmarshal(evs[len(evs)-1].Detail, &cd)
		if rel.State != apitypes.StateReleased || cd["worktree"] != "merged_removed" {
			t.Fatalf("cleanup of a merged branch: %s %v", rel.State, cd)
		}
		if _, err := os.Stat(filepath.Join(f.wsDir, "merged.txt")); err != nil {
			t.Fatal("the merged work is gone from the workspace")
		}
		f.post(f.operator, http.StatusOK, skipped.RunRef, "stop", nil, nil)
	})
}

// R-WT-4: a node without a worktree directory answers 503; R-WT-3: a
// workspace that is not a repository root is 422; concurrent worktree
// launches on one workspace get distinct branches.
func TestWorktreeRefusalsAndConcurrency(t *testing.T) {
	env := integration.NewEnv(t)
	a := env.StartAgentProcess(integration.ProcOptions{Transport: "yamux", NoWorktreeDir: true})
	a.AwaitConnected(wait)
	b := env.StartAgentProcess(integration.ProcOptions{Transport: "yamux"})
	b.AwaitConnected(wait)
	admin := env.Client(env.AdminToken)
	yes := true
	for i, node := range []*integration.AgentProc{a, b} {
		dir := t.TempDir()
		newRepo(t, dir)
		var ws, sub apitypes.Workspace
		admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/workspaces", apitypes.WorkspaceCreate{NodeID: node.ID, Path: dir, Name: "repo" + string(rune('a'+i))}, &ws)
		os.MkdirAll(filepath.Join(dir, "sub"), 0o700)
		admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/workspaces", apitypes.WorkspaceCreate{NodeID: node.ID, Path: filepath.Join(dir, "sub"), Name: "sub" + string(rune('a'+i))}, &sub)
		var p apitypes.Profile
		admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{NodeID: node.ID, Tool: "codex", Name: "codex" + string(rune('a'+i)), Home: filepath.Join(t.TempDir(), "home")}, &p)
		if got := admin.Call(http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: sub.Ref, Worktree: &yes}); got.Status != http.StatusUnprocessableEntity || got.ErrorCode() != "not_repository_root" {
			t.Fatalf("worktree launch below the root: %d %s", got.Status, got.Body)
		}
		if node == a {
			if got := admin.Call(http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: ws.Ref, Worktree: &yes}); got.Status != http.StatusServiceUnavailable {
				t.Fatalf("worktree launch on a node without a worktree dir: %d %s, want 503", got.Status, got.Body)
			}
			continue
		}
		var mu sync.Mutex
		branches := map[string]bool{}
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body, _ := json.Marshal(apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: ws.Ref, Worktree: &yes})
				got := admin.Call(http.MethodPost, runsPath, body)
				var r apitypes.Run
				json.NewDecoder(bytes.NewReader(got.Body)).Decode(&r)
				mu.Lock()
				defer mu.Unlock()
				if got.Status != http.StatusCreated || r.WorktreeBranch == "" {
					t.Errorf("concurrent worktree launch: %d %s", got.Status, got.Body)
					return
				}
				branches[r.WorktreeBranch] = true
			}()
		}
		wg.Wait()
		if len(branches) != 4 {
			t.Fatalf("4 concurrent launches got %d distinct branches", len(branches))
		}
		var l apitypes.RunList
		admin.Must(http.StatusOK, http.MethodGet, runsPath, nil, &l)
		for _, r := range l.Items {
			admin.Must(http.StatusOK, http.MethodPost, runURL(r.RunRef, "stop"), nil, nil)
		}
	}
}
