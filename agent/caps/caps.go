// Package caps finds what this node can run: a PTY, podman or Docker, the
// worktree dir, and each vendor CLI on PATH with its version.
//
// caps only looks: it runs `<cli> --version` and nothing else.
package caps

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/creack/pty"

	"github.com/olivares-dev/olivares/shared/proto"
)

// CLIs are the vendor CLIs Olivares knows, by binary name.
var CLIs = []string{"claude", "codex", "grok", "gemini", "opencode"}

// versionTimeout bounds `--version` (gemini takes ≈1.5 s, real-clis.md).
const versionTimeout = 10 * time.Second

// Detect probes the node. path is the PATH to search ("" = the agent's).
func Detect(ctx context.Context, path, worktreeDir string) proto.Capabilities {
	c := proto.Capabilities{WorktreeDir: worktreeDir}
	if p, t, err := pty.Open(); err == nil {
		p.Close()
		t.Close()
		c.PTY = true
	}
	c.Podman = lookPath("podman", path)
	c.Docker = lookPath("docker", path)
	if worktreeDir != "" {
		if st, err := os.Stat(worktreeDir); err == nil && st.IsDir() {
			c.WorktreeDirReady = true
		}
	}
	c.CLIs = make([]proto.CLI, 0, len(CLIs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range CLIs {
		bin := lookPath(name, path)
		if bin == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := version(ctx, bin, path)
			cli := proto.CLI{Name: name, Path: bin, Version: v}
			if err != nil {
				cli.Error = err.Error()
			}
			mu.Lock()
			c.CLIs = append(c.CLIs, cli)
			mu.Unlock()
		}()
	}
	wg.Wait()
	// Keep the CLIs' order stable.
	order := map[string]int{}
	for i, n := range CLIs {
		order[n] = i
	}
	for i := 1; i < len(c.CLIs); i++ {
		for j := i; j > 0 && order[c.CLIs[j].Name] < order[c.CLIs[j-1].Name]; j-- {
			c.CLIs[j], c.CLIs[j-1] = c.CLIs[j-1], c.CLIs[j]
		}
	}
	return c
}

func lookPath(name, path string) string {
	if path == "" {
		p, err := exec.LookPath(name)
		if err != nil {
			return ""
		}
		return p
	}
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			continue
		}
		p := dir + "/" + name
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// version runs `bin --version` with a scratch HOME and a minimal environment
// and returns the version it printed: the first line of its standard
// output, or, when that is empty, the last line of its standard error.
// Diagnostics a tool writes on stderr first (Codex warns that it could not
// create PATH aliases when its home is in the system temp dir) are never
// taken for the version (issue 21, R-NODE-1).
func version(ctx context.Context, bin, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	home, err := os.MkdirTemp("", "olivares-caps-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(home)
	if path == "" {
		path = os.Getenv("PATH")
	}
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = []string{"PATH=" + path, "HOME=" + home, "NO_COLOR=1", "CI=1"}
	cmd.Dir = home
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err = cmd.Run()
	return versionLine(stdout.String(), stderr.String()), err
}

// versionLine picks the version out of what `--version` printed.
func versionLine(stdout, stderr string) string {
	for _, l := range strings.Split(stdout, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
