package worktree

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// repoInfo is where a workspace's repository lives.
type repoInfo struct {
	gitDir    string // this working tree's git dir (absolute)
	commonDir string // the repository's common dir, shared by all worktrees
	objectLen int    // hex digits of a full object id: 40 (sha1) or 64 (sha256)
}

// CheckWorktreeable refuses a worktree launch on this workspace with a 422
// *Error when it is not a git working tree, is not the repository root, has
// no commit, is read-only (readOnly is the workspace's registration flag) or
// has read-only repository folders, or when its local git config names a
// filter or includes a file (R-WT-3, R-WT-6). It only reads; nothing is
// created, so every refusal comes before anything exists.
//
// "Read-only folders" are the folders a worktree launch writes to: the
// workspace folder, its git dir and the repository's common dir with its
// objects, refs, refs/heads, logs and worktrees folders. A folder is
// read-only when access(2) refuses writing or when no write bit is set at
// all (so the check holds for root too).
func (r Repo) CheckWorktreeable(ctx context.Context, readOnly bool) error {
	if readOnly {
		return refuse(ErrReadOnly, "workspace %s is registered read-only; a worktree run writes a branch into its repository, so register a writable workspace or launch without worktree", r.Dir)
	}
	info, err := r.info(ctx)
	if err != nil {
		return err
	}
	if err := r.checkRoot(ctx); err != nil {
		return err
	}
	if _, err := r.headCommit(ctx); err != nil {
		return err
	}
	if err := checkWritable(r.Dir, info); err != nil {
		return err
	}
	return r.checkConfig(ctx, r.Dir)
}

// info finds the repository of r.Dir, refusing anything that is not a
// git working tree.
func (r Repo) info(ctx context.Context) (repoInfo, error) {
	if !filepath.IsAbs(r.Dir) {
		return repoInfo{}, refuse(ErrNotGitWorktree, "workspace folder %q is not an absolute path; register the repository root by its absolute path", r.Dir)
	}
	if fi, err := os.Stat(r.Dir); err != nil || !fi.IsDir() {
		return repoInfo{}, refuse(ErrNotGitWorktree, "workspace %s is not a readable folder; register the folder of a git repository", r.Dir)
	}
	out, err := r.run(ctx, call{args: []string{"rev-parse", "--path-format=absolute",
		"--git-dir", "--git-common-dir", "--is-bare-repository", "--is-inside-work-tree", "--show-object-format"}})
	if err != nil {
		var ge *GitError
		if errors.As(err, &ge) && ge.ExitCode > 0 {
			return repoInfo{}, refuse(ErrNotGitWorktree, "workspace %s is not a git working tree (%s); run git init there and commit, or register the repository's root", r.Dir, ge.firstLine())
		}
		return repoInfo{}, err
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != 5 {
		return repoInfo{}, &GitError{Command: "rev-parse", ExitCode: 0, Stderr: "unexpected output: " + string(out)}
	}
	if lines[2] == "true" || lines[3] != "true" {
		return repoInfo{}, refuse(ErrNotGitWorktree, "workspace %s is not a git working tree (a bare repository or the inside of a .git folder); register the repository's root", r.Dir)
	}
	info := repoInfo{gitDir: lines[0], commonDir: lines[1], objectLen: 40}
	if lines[4] == "sha256" {
		info.objectLen = 64
	}
	return info, nil
}

// checkRoot refuses a workspace that is a folder below its repository root.
func (r Repo) checkRoot(ctx context.Context) error {
	out, err := r.run(ctx, call{args: []string{"rev-parse", "--path-format=absolute", "--show-toplevel"}})
	if err != nil {
		return err
	}
	top := firstLine(out)
	if canonical(top) != canonical(r.Dir) {
		return refuse(ErrNotRepoRoot, "workspace %s is inside the git repository rooted at %s; register the repository root for worktree runs", r.Dir, top)
	}
	return nil
}

// headCommit is the full id of the commit at r.Dir's HEAD.
func (r Repo) headCommit(ctx context.Context) (string, error) {
	out, err := r.run(ctx, call{args: []string{"rev-parse", "--verify", "--quiet", "--end-of-options", "HEAD^{commit}"}})
	if err != nil {
		if exitCode(err) == 1 {
			return "", refuse(ErrNoCommit, "the repository at %s has no commit on HEAD; commit once before launching a worktree run", r.Dir)
		}
		return "", err
	}
	return firstLine(out), nil
}

// checkWritable refuses when a folder a worktree launch writes to is
// read-only (R-WT-3).
func checkWritable(dir string, info repoInfo) error {
	required := []string{dir, info.gitDir, info.commonDir,
		filepath.Join(info.commonDir, "objects"),
		filepath.Join(info.commonDir, "refs"),
		filepath.Join(info.commonDir, "refs", "heads")}
	optional := []string{
		filepath.Join(info.commonDir, "logs"),
		filepath.Join(info.commonDir, "worktrees")}
	for i, p := range append(required, optional...) {
		fi, err := os.Stat(p)
		if err != nil {
			if i >= len(required) && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return refuse(ErrReadOnly, "repository folder %s cannot be reached (%v); fix its permissions or register another workspace", p, err)
		}
		if !fi.IsDir() {
			return refuse(ErrReadOnly, "repository folder %s is not a folder; repair the repository or register another workspace", p)
		}
		if fi.Mode().Perm()&0o222 == 0 || !canWrite(p) {
			return refuse(ErrReadOnly, "folder %s is read-only; a worktree launch writes there, so make it writable (chmod u+w) or launch without worktree", p)
		}
	}
	return nil
}

// checkConfig refuses a repository whose effective local config (the
// repository's config, its worktree config and every file they include)
// names a filter driver or includes a file (R-WT-6).
func (r Repo) checkConfig(ctx context.Context, dir string) error {
	keys, err := r.localConfigKeys(ctx, dir)
	if err != nil {
		return err
	}
	for _, k := range keys {
		switch {
		case filterDriver(k) != "":
			return refuse(ErrConfigFilter, "the repository's git config sets %s, so a checkout would run that filter's command; remove it (git config --unset) or launch without worktree", k)
		case k == "include.path" || strings.HasPrefix(k, "includeif.") && strings.HasSuffix(k, ".path"):
			return refuse(ErrConfigFilter, "the repository's git config includes another file (%s), which could name a filter; remove it (git config --unset) or launch without worktree", k)
		}
	}
	return nil
}

// localConfigKeys lists the config keys git reads for dir from the local
// and worktree scopes, includes followed. System and global config are off
// for every call (gitEnv), and this package's own -c keys are left out.
func (r Repo) localConfigKeys(ctx context.Context, dir string) ([]string, error) {
	out, err := r.run(ctx, call{dir: dir, args: []string{"config", "--list", "--show-scope", "--name-only", "-z"}})
	if err != nil {
		var ge *GitError
		if errors.As(err, &ge) && ge.ExitCode > 0 {
			return nil, refuse(ErrConfigUnreadable, "git cannot read the repository's config (%s); repair it", ge.firstLine())
		}
		return nil, err
	}
	recs := splitZ(out)
	var keys []string
	for i := 0; i+1 < len(recs); i += 2 {
		if scope := recs[i]; scope == "local" || scope == "worktree" {
			keys = append(keys, recs[i+1])
		}
	}
	return keys, nil
}

// filterDriver returns the driver name of a filter.<driver>.<key> config
// key, or "".
func filterDriver(key string) string {
	rest, ok := strings.CutPrefix(key, "filter.")
	if !ok {
		return ""
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return ""
	}
	return rest[:i]
}

// neutralFilters overrides every filter driver named in dir's config so
// that no clean, smudge or process command can run during a call that
// touches a working tree (an empty command is no filter). A driver whose
// name cannot be written on a command line is refused.
func (r Repo) neutralFilters(ctx context.Context, dir string) (config []string, err error) {
	out, err := r.run(ctx, call{dir: dir, args: []string{"config", "--list", "--name-only", "-z"}})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, k := range splitZ(out) {
		d := filterDriver(k)
		if d == "" || seen[d] {
			continue
		}
		seen[d] = true
		if strings.ContainsAny(d, "=\n\x00") {
			return nil, refuse(ErrConfigFilter, "the repository's git config names a filter driver %q this node cannot switch off; remove it (git config --unset)", d)
		}
		config = append(config,
			"filter."+d+".clean=", "filter."+d+".smudge=", "filter."+d+".process=", "filter."+d+".required=false")
	}
	return config, nil
}

// canonical resolves symlinks in p, or in its parent when p itself does not
// exist, so that two spellings of one folder compare equal.
func canonical(p string) string {
	p = filepath.Clean(p)
	if q, err := filepath.EvalSymlinks(p); err == nil {
		return q
	}
	if q, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		return filepath.Join(q, filepath.Base(p))
	}
	return p
}
