package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testEnv is the environment of the git commands the tests run themselves:
// a fixed author and committer, no system or global config.
var testEnv = append(os.Environ(),
	"GIT_AUTHOR_NAME=Olivares Test", "GIT_AUTHOR_EMAIL=test@olivares.invalid", "GIT_AUTHOR_DATE=2025-01-01T00:00:00Z",
	"GIT_COMMITTER_NAME=Olivares Test", "GIT_COMMITTER_EMAIL=test@olivares.invalid", "GIT_COMMITTER_DATE=2025-01-01T00:00:00Z",
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C",
)

// tctx is a test's context: it ends with the test, and no call outlives a
// minute even on a loaded machine.
func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// gitRun runs the test's own git command in dir.
func gitRun(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = testEnv
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return strings.TrimRight(out.String(), "\n"), nil
}

func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitRun(dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// newRepo makes a repository with one commit (README) on main and returns
// its folder.
func newRepo(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ws")
	gitT(t, "", "init", "-q", "-b", "main", dir)
	writeFile(t, dir, "README", "hello\n")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "first")
	return dir
}

func writeFile(t testing.TB, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// commitFiles writes files (path -> content) in dir, commits everything and
// returns the new HEAD id.
func commitFiles(t testing.TB, dir string, files map[string]string) string {
	t.Helper()
	for name, content := range files {
		writeFile(t, dir, name, content)
	}
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "change")
	return gitT(t, dir, "rev-parse", "HEAD")
}

func head(t testing.TB, dir string) string {
	t.Helper()
	return gitT(t, dir, "rev-parse", "HEAD")
}

// refExists reports whether the fully qualified ref exists in dir's repo.
func refExists(t testing.TB, dir, ref string) bool {
	t.Helper()
	_, err := gitRun(dir, "show-ref", "--verify", "--quiet", ref)
	return err == nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

var runSeq atomic.Int64

// newRun plans and creates a worktree for a fresh run ref on repo r at the
// workspace's HEAD.
func newRun(t testing.TB, r Repo) Worktree {
	t.Helper()
	ctx := tctx(t)
	wt, err := Plan(filepath.Join(filepath.Dir(r.Dir), "wt"), "tenant1", fmt.Sprintf("run_%06d", runSeq.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	commit, err := r.ResolveFrom(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Create(ctx, wt, commit); err != nil {
		t.Fatal(err)
	}
	return wt
}

// wantCode fails unless err is an *Error of kind's code.
func wantCode(t testing.TB, err error, kind *Error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want %s", err, kind.Code)
	}
	if e.Code != kind.Code || !errors.Is(err, kind) {
		t.Fatalf("got %s %q, want %s", e.Code, e.Msg, kind.Code)
	}
	if e.Msg == "" {
		t.Fatalf("got an empty message for %s, want a sentence", e.Code)
	}
}

// argvLog is a git wrapper that records every argv and then runs the real
// git, so a test can see exactly what reached git.
type argvLog struct {
	script string
	log    string
}

func newArgvLog(t testing.TB) argvLog {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	l := argvLog{script: filepath.Join(dir, "git"), log: filepath.Join(dir, "argv.log")}
	sh := fmt.Sprintf("#!/bin/sh\nfor a in \"$@\"; do printf '%%s\\0' \"$a\"; done >> %q\nprintf '\\001\\0' >> %q\nexec %q \"$@\"\n", l.log, l.log, real)
	if err := os.WriteFile(l.script, []byte(sh), 0o755); err != nil {
		t.Fatal(err)
	}
	return l
}

// calls returns each recorded argv.
func (l argvLog) calls(t testing.TB) [][]string {
	t.Helper()
	b, err := os.ReadFile(l.log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var calls [][]string
	var cur []string
	for _, a := range strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00") {
		if a == "\x01" {
			calls = append(calls, cur)
			cur = nil
			continue
		}
		cur = append(cur, a)
	}
	return calls
}

// gitScript writes an executable shell script standing in for git.
func gitScript(t testing.TB, body string) string {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "git")
	sh := "#!/bin/sh\nREAL=" + real + "\n" + body
	if err := os.WriteFile(p, []byte(sh), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMain(m *testing.M) {
	if _, err := exec.LookPath("git"); err != nil {
		fmt.Fprintln(os.Stderr, "agent/worktree tests need the git CLI on PATH:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
