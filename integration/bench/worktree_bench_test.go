package bench

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Sizes of TestWorktreeReport (issue 6's benchmark).
const (
	worktreeFiles   = 10_000
	worktreeLaunchN = 7
	diffChanged     = 200
	diffSamples     = 30
)

func benchGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=B", "GIT_AUTHOR_EMAIL=b@example.com", "GIT_COMMITTER_NAME=B", "GIT_COMMITTER_EMAIL=b@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestWorktreeReport measures, through the API and a real agent process on
// a repository of 10,000 files: POST /runs with worktree:true against
// without, in the same run (ratio and absolute medians), and GET
// /runs/{ref}/diff of a branch that changed 200 files (p50). It runs only
// with OLIVARES_BENCH=1 and never fails on a figure.
func TestWorktreeReport(t *testing.T) {
	if os.Getenv("OLIVARES_BENCH") != "1" {
		t.Skip("set OLIVARES_BENCH=1 (or run scripts/bench) to measure worktree launches")
	}
	env := integration.NewEnv(t, integration.Options{Unchecked: true}) // the contract check would be timed too
	a := env.StartAgentProcess(integration.ProcOptions{Transport: "quic"})
	a.AwaitConnected(30 * time.Second)
	repo := t.TempDir()
	benchGit(t, repo, "init", "-q", "-b", "main")
	for i := range worktreeFiles {
		dir := filepath.Join(repo, fmt.Sprintf("d%02d", i%100))
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644)
	}
	benchGit(t, repo, "add", "-A")
	benchGit(t, repo, "commit", "-q", "-m", "10k files")
	admin := env.Client(env.AdminToken)
	var ws apitypes.Workspace
	admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/workspaces", apitypes.WorkspaceCreate{NodeID: a.ID, Path: repo, Name: "big"}, &ws)
	var p apitypes.Profile
	admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{NodeID: a.ID, Tool: "codex", Name: "codex", Home: filepath.Join(t.TempDir(), "home")}, &p)

	yes := true
	var plain, wt []time.Duration
	var last apitypes.Run
	for i := range 2 * worktreeLaunchN {
		req := apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: ws.Ref}
		withWT := i%2 == 1
		if withWT {
			req.Worktree = &yes
		}
		start := time.Now()
		var r apitypes.Run
		admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/runs", req, &r)
		d := time.Since(start)
		if withWT {
			wt = append(wt, d)
			last = r
		} else {
			plain = append(plain, d)
		}
		admin.Must(http.StatusOK, http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/stop", nil, nil)
	}
	mp, mw := percentile(plain, 50), percentile(wt, 50)
	t.Logf("POST /runs on a %d-file repository: median %v with worktree, %v without: %.1fx (overhead %v)", worktreeFiles, mw, mp, float64(mw)/float64(mp), mw-mp)

	for i := range diffChanged {
		f := filepath.Join(last.WorkspacePath, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d.txt", i))
		os.WriteFile(f, []byte("changed\n"), 0o644)
	}
	benchGit(t, last.WorkspacePath, "commit", "-q", "-am", "200 changes")
	var base []time.Duration
	var diffs []time.Duration
	for range diffSamples {
		start := time.Now()
		var d apitypes.Diff
		admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs/"+last.RunRef+"/diff", nil, &d)
		diffs = append(diffs, time.Since(start))
		if len(d.Files) != diffChanged {
			t.Fatalf("diff: %d files, want %d", len(d.Files), diffChanged)
		}
		start = time.Now()
		admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs/"+last.RunRef, nil, nil)
		base = append(base, time.Since(start))
	}
	t.Logf("GET /runs/{ref}/diff of %d changed files: p50 %v, against GET /runs/{ref} p50 %v in the same run: %.1fx", diffChanged, percentile(diffs, 50), percentile(base, 50), float64(percentile(diffs, 50))/float64(percentile(base, 50)))
}
