package worktree

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// MaxPatchBytes caps the patch of a folder's uncommitted edits whatever
// max_read_bytes says; a longer one is not sent, TooLarge says so
// (R-DIFF-10).
const MaxPatchBytes = 256 << 10

// Working is GET /runs/{ref}/diff/uncommitted (R-DIFF-10): what a run's
// folder holds that its HEAD commit does not, staged, unstaged or untracked,
// as git status lists it and git diff prints it.
type Working struct {
	Head  string       `json:"head"` // the folder's HEAD commit
	Files []FileChange `json:"files"`
	// Truncated: more than MaxDiffPaths allowed paths changed; Files and
	// Patch stop there.
	Truncated bool `json:"truncated"`
	// Patch is git's unified diff of Files (binary files named by git's
	// "Binary files ... differ" line), or "" when TooLarge.
	Patch string `json:"patch"`
	// TooLarge: the patch is longer than PatchLimit, or an untracked file
	// is over MaxBlobBytes; Patch is then empty.
	TooLarge bool `json:"too_large"`
	// PatchLimit is the bound the patch was held to: the smaller of the
	// workspace's max_read_bytes and MaxPatchBytes.
	PatchLimit int64 `json:"patch_limit"`
}

// Working reads the uncommitted edits of dir, a run's worktree or its
// workspace folder, against dir's HEAD commit with git status and git diff
// (R-DIFF-10). Only allowed sub-paths are listed and diffed (R-DIFF-5); a
// DLP deny refuses (403). dir must be the root of its working tree.
func (r Repo) Working(ctx context.Context, dir string, o ReadOptions) (Working, error) {
	if o.DenyReads {
		return Working{}, refuse(ErrDLPRefused, "the workspace's DLP posture refuses reading its files, so the uncommitted edits are not shown")
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return Working{}, refuse(ErrFolderGone, "the run's folder %s is gone, so it has no uncommitted edits to show", dir)
	}
	f := Repo{Dir: dir, Git: r.Git, Timeout: r.Timeout}
	if _, err := f.info(ctx); err != nil {
		return Working{}, err
	}
	if err := f.checkRoot(ctx); err != nil {
		return Working{}, refuse(ErrNotRepoRoot, "the run's folder %s is below its repository's root, so its uncommitted edits are not shown; register the repository root as the workspace", dir)
	}
	head, err := f.headCommit(ctx)
	if err != nil {
		if errors.Is(err, ErrNoCommit) {
			return Working{}, refuse(ErrNoCommit, "the repository at %s has no commit yet, so there is nothing to compare its files with; commit once", dir)
		}
		return Working{}, err
	}
	filters, err := f.neutralFilters(ctx, dir)
	if err != nil {
		return Working{}, err
	}
	w := Working{Head: head, Files: []FileChange{}, PatchLimit: min(o.readCap(), MaxPatchBytes)}
	var tracked, untracked []string
	err = f.stream(ctx, call{dir: dir, config: filters, args: []string{"status", "--porcelain=v1", "-z",
		"--untracked-files=all", "--ignore-submodules=dirty", "--no-renames"}}, func(br *bufio.Reader) error {
		for {
			rec, err := readRecord(br)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if len(rec) < 4 {
				return errors.New("worktree: unexpected status record")
			}
			c, new := statusChange(rec[:2], rec[3:])
			if c.Status == "" || !cleanRelPath(c.Path) || !o.allowed(c.Path) {
				continue
			}
			if len(w.Files) == MaxDiffPaths {
				w.Truncated = true
				return errStop
			}
			w.Files = append(w.Files, c)
			if new {
				untracked = append(untracked, c.Path)
			} else {
				tracked = append(tracked, c.Path)
			}
		}
	})
	if err != nil {
		return Working{}, err
	}
	var patch bytes.Buffer
	// No external diff or text conversion runs, paths are printed as they
	// are and prefixes are git's defaults whatever the repository's config.
	diffArgs := []string{"--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/"}
	diffConfig := append([]string{"core.quotePath=false"}, filters...)
	if len(tracked) > 0 {
		args := append(append([]string{"diff"}, diffArgs...), head, "--")
		over, err := f.appendPatch(ctx, call{dir: dir, config: diffConfig, args: append(args, tracked...)}, &patch, w.PatchLimit)
		if err != nil {
			return Working{}, err
		}
		w.TooLarge = over
	}
	for _, p := range untracked {
		if w.TooLarge {
			break
		}
		fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil || throughLink(dir, p) {
			continue // gone or moved behind a link since git status
		}
		if fi.Size() > MaxBlobBytes {
			w.TooLarge = true
			break
		}
		args := append(append([]string{"diff", "--no-index"}, diffArgs...), "--", "/dev/null", p)
		if w.TooLarge, err = f.appendPatch(ctx, call{dir: dir, config: diffConfig, args: args}, &patch, w.PatchLimit); err != nil {
			return Working{}, err
		}
	}
	if !w.TooLarge {
		w.Patch = patch.String()
	}
	return w, nil
}

// statusChange reads one git status --porcelain=v1 record: XY (index and
// folder state against HEAD) and the path. new says the path is untracked.
// A path added and then removed again has no change against HEAD: Status "".
func statusChange(xy, p string) (c FileChange, new bool) {
	c.Path = strings.TrimSuffix(p, "/")
	switch x, y := xy[0], xy[1]; {
	case xy == "??":
		return FileChange{Path: c.Path, Status: StatusAdded}, true
	case xy == "!!", x == 'A' && y == 'D':
		return FileChange{}, false
	case x == 'A':
		c.Status = StatusAdded
	case x == 'D' || y == 'D':
		c.Status = StatusDeleted
	case x == 'T' || y == 'T':
		c.Status = StatusTypeChanged
	default:
		c.Status = StatusModified
	}
	return c, false
}

// throughLink reports whether a folder on the way to p (relative to dir) is
// a symlink: git status does not list files behind one, so a path that is
// now is not read.
func throughLink(dir, p string) bool {
	comps := strings.Split(p, "/")
	for i := 1; i < len(comps); i++ {
		fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(strings.Join(comps[:i], "/"))))
		if err != nil || !fi.IsDir() {
			return true
		}
	}
	return false
}

// appendPatch runs a git diff and appends its output to buf, stopping with
// over when buf would pass limit. Exit status 1 of git diff --no-index means
// "the files differ", not a failure.
func (r Repo) appendPatch(ctx context.Context, c call, buf *bytes.Buffer, limit int64) (over bool, err error) {
	err = r.stream(ctx, c, func(br *bufio.Reader) error {
		if _, err := io.Copy(buf, io.LimitReader(br, limit-int64(buf.Len())+1)); err != nil {
			return err
		}
		if int64(buf.Len()) > limit {
			over = true
			return errStop
		}
		_, err := io.Copy(io.Discard, br)
		return err
	})
	if err != nil && exitCode(err) == 1 && c.args[1] == "--no-index" {
		err = nil
	}
	return over, err
}
