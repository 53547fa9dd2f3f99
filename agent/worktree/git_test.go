package worktree

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Output is read with a bound: a git that floods stdout is stopped and the
// call fails instead of buffering it all.
func TestOutputIsBounded(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	script := gitScript(t, "head -c 3000000 /dev/zero | tr '\\0' x\n")
	_, err := Repo{Dir: dir, Git: script}.ResolveFrom(tctx(t), "")
	if !errors.Is(err, errOutputLimit) {
		t.Fatalf("got %v, want the output bound", err)
	}
}

// Every call has a deadline: a git that hangs, with a child in its process
// group, is killed when Repo.Timeout passes.
func TestCallDeadline(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	script := gitScript(t, "sleep 600 &\nwait\n")
	r := Repo{Dir: dir, Git: script, Timeout: 100 * time.Millisecond}
	_, err := r.ResolveFrom(tctx(t), "")
	var ge *GitError
	if !errors.As(err, &ge) || ge.ExitCode != -1 {
		t.Fatalf("got %v, want a killed git call", err)
	}
	// The caller's own deadline bounds the call the same way.
	ctx, cancel := context.WithCancel(tctx(t))
	cancel()
	if _, err := (Repo{Dir: dir, Git: script}).ResolveFrom(ctx, ""); err == nil {
		t.Fatal("got nil from a cancelled context, want an error")
	}
}

// A Repo without an absolute folder never runs git in the agent's folder.
func TestNoRelativeFolder(t *testing.T) {
	t.Parallel()
	log := newArgvLog(t)
	for _, dir := range []string{"", "."} {
		_, err := Repo{Dir: dir, Git: log.script}.run(tctx(t), call{args: []string{"status"}})
		if !errors.Is(err, errNoDir) {
			t.Fatalf("got %v, want errNoDir", err)
		}
	}
	if calls := log.calls(t); len(calls) != 0 {
		t.Fatalf("got %q, want no git call", calls)
	}
}
