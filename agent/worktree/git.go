package worktree

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Repo is a workspace's git repository, addressed by the workspace folder
// (which must be the repository root for a worktree launch, R-WT-3).
type Repo struct {
	// Dir is the workspace folder.
	Dir string
	// Git is the git executable. When empty, "git" is looked up on PATH.
	Git string
	// Timeout bounds every git call whose context has no earlier deadline.
	// When zero, each call gets DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout bounds a git call when Repo.Timeout is zero. A worktree
// checkout of a large repository is the slowest call this package makes.
const DefaultTimeout = 2 * time.Minute

// Output bounds. Git's answers to this package's questions are small; a
// bigger answer means something is wrong, and reading stops.
const (
	maxOutput = 1 << 20  // captured stdout of one call
	maxStderr = 64 << 10 // kept stderr of one call
	maxRecord = 64 << 10 // one NUL-terminated record of streamed output
)

// errOutputLimit: git wrote more than the bound for that call.
var errOutputLimit = errors.New("worktree: git output over its bound")

// baseConfig is on every git command line: no hook runs (post-checkout,
// reference-transaction, ...), no fsmonitor command runs, no submodule is
// recursed into, and no automatic gc or maintenance starts.
var baseConfig = []string{
	"core.hooksPath=/dev/null",
	"core.fsmonitor=false",
	"submodule.recurse=false",
	"gc.auto=0",
	"maintenance.auto=false",
}

// gitEnv is the environment of every git call: the process environment
// without any GIT_* variable (GIT_DIR, GIT_INDEX_FILE, GIT_CONFIG_* ... would
// point git elsewhere) and without locale variables, plus the variables that
// keep system and global config, replace refs, prompts and optional locks out.
func gitEnv() []string {
	env := make([]string, 0, 32)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") || k == "LC_ALL" || k == "LANG" || k == "LANGUAGE" || strings.HasPrefix(k, "LC_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_LITERAL_PATHSPECS=1",
		"GIT_PROTOCOL_FROM_USER=0",
	)
}

// call is one git invocation.
type call struct {
	dir    string   // working directory; "" means Repo.Dir
	config []string // extra key=value pairs for -c, after baseConfig
	args   []string // the subcommand and its arguments
}

func (r Repo) gitPath() string {
	if r.Git != "" {
		return r.Git
	}
	return "git"
}

// errNoDir: a call without an absolute working folder, which would run git
// in the agent's own folder.
var errNoDir = errors.New("worktree: git call without an absolute folder")

func (r Repo) command(ctx context.Context, c call) (*exec.Cmd, error) {
	dir := c.dir
	if dir == "" {
		dir = r.Dir
	}
	if !filepath.IsAbs(dir) {
		return nil, &GitError{Command: subcommand(c.args), ExitCode: -1, Err: errNoDir}
	}
	argv := make([]string, 0, 2*(len(baseConfig)+len(c.config))+len(c.args)+1)
	argv = append(argv, "--no-pager")
	for _, kv := range baseConfig {
		argv = append(argv, "-c", kv)
	}
	for _, kv := range c.config {
		argv = append(argv, "-c", kv)
	}
	argv = append(argv, c.args...)
	cmd := exec.CommandContext(ctx, r.gitPath(), argv...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	cmd.Stdin = nil
	cmd.WaitDelay = 5 * time.Second
	setProcessGroup(cmd)
	return cmd, nil
}

// withDeadline gives ctx the call deadline unless it already has an earlier one.
func (r Repo) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	d := r.Timeout
	if d <= 0 {
		d = DefaultTimeout
	}
	return context.WithTimeout(ctx, d)
}

func subcommand(args []string) string {
	if len(args) == 0 {
		return ""
	}
	if len(args) > 1 && (args[0] == "worktree" || args[0] == "config" && strings.HasPrefix(args[1], "--")) {
		return args[0] + " " + args[1]
	}
	return args[0]
}

// run executes c and returns its stdout, bounded by maxOutput. A non-zero
// exit is a *GitError carrying the exit code and stderr.
func (r Repo) run(ctx context.Context, c call) ([]byte, error) {
	ctx, cancel := r.withDeadline(ctx)
	defer cancel()
	cmd, err := r.command(ctx, c)
	if err != nil {
		return nil, err
	}
	stdout := &capWriter{limit: maxOutput, fail: true}
	stderr := &capWriter{limit: maxStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Run()
	if stdout.over {
		return nil, &GitError{Command: subcommand(c.args), ExitCode: -1, Stderr: stderr.String(), Err: errOutputLimit}
	}
	if err != nil {
		return stdout.buf.Bytes(), gitErr(c.args, err, stderr.String())
	}
	return stdout.buf.Bytes(), nil
}

// stream executes c and hands its stdout to read. When read returns
// errStop the process is killed and stream returns nil: the caller had
// what it needed.
func (r Repo) stream(ctx context.Context, c call, read func(*bufio.Reader) error) error {
	ctx, cancel := r.withDeadline(ctx)
	defer cancel()
	cmd, err := r.command(ctx, c)
	if err != nil {
		return err
	}
	stderr := &capWriter{limit: maxStderr}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return gitErr(c.args, err, "")
	}
	rerr := read(bufio.NewReaderSize(out, 64<<10))
	if rerr != nil {
		cancel() // kills the process group; Wait then reaps it
		_ = cmd.Wait()
		if errors.Is(rerr, errStop) {
			return nil
		}
		return &GitError{Command: subcommand(c.args), ExitCode: -1, Stderr: stderr.String(), Err: rerr}
	}
	if err := cmd.Wait(); err != nil {
		return gitErr(c.args, err, stderr.String())
	}
	return nil
}

// errStop ends a stream early without error.
var errStop = errors.New("worktree: stop reading")

func gitErr(args []string, err error, stderr string) *GitError {
	code := -1
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	return &GitError{Command: subcommand(args), ExitCode: code, Stderr: stderr, Err: err}
}

// exitCode is the exit status of a *GitError, or -1 for any other error.
func exitCode(err error) int {
	var ge *GitError
	if errors.As(err, &ge) {
		return ge.ExitCode
	}
	return -1
}

// capWriter keeps at most limit bytes. With fail set, a write over the limit
// fails, which closes the pipe and ends the git process; without it, the
// excess is dropped.
type capWriter struct {
	buf   bytes.Buffer
	limit int
	fail  bool
	over  bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	room := w.limit - w.buf.Len()
	if len(p) <= room {
		return w.buf.Write(p)
	}
	w.buf.Write(p[:max(room, 0)])
	w.over = true
	if w.fail {
		return 0, errOutputLimit
	}
	return len(p), nil
}

func (w *capWriter) String() string { return w.buf.String() }

// readRecord reads one NUL-terminated record of at most maxRecord bytes.
// It returns io.EOF at a clean end and io.ErrUnexpectedEOF for a record
// that is cut short.
func readRecord(br *bufio.Reader) (string, error) {
	var acc []byte
	for {
		chunk, err := br.ReadSlice(0)
		if len(acc)+len(chunk) > maxRecord {
			return "", errOutputLimit
		}
		switch {
		case err == nil:
			if acc == nil {
				return string(chunk[:len(chunk)-1]), nil
			}
			acc = append(acc, chunk...)
			return string(acc[:len(acc)-1]), nil
		case errors.Is(err, bufio.ErrBufferFull):
			acc = append(acc, chunk...)
		case errors.Is(err, io.EOF):
			if len(acc)+len(chunk) == 0 {
				return "", io.EOF
			}
			return "", io.ErrUnexpectedEOF
		default:
			return "", err
		}
	}
}

// splitZ splits NUL-terminated output into its records.
func splitZ(out []byte) []string {
	s := string(out)
	s = strings.TrimSuffix(s, "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// firstLine is the first line of out without its newline.
func firstLine(out []byte) string {
	s := string(out)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
