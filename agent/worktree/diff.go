package worktree

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Diff limits.
const (
	// MaxDiffPaths is the most paths a diff lists; Truncated says whether
	// more exist (R-DIFF-2).
	MaxDiffPaths = 200
	// MaxTextBytes caps original and modified whatever max_read_bytes says
	// (R-DIFF-7).
	MaxTextBytes = 64 << 10
	// MaxBlobBytes: a file larger than this at base or head is refused
	// with 413, checked on the blob size before the cap (R-DIFF-5, R-DIFF-8).
	MaxBlobBytes = 16 << 20
	// DefaultMaxReadBytes is a workspace's max_read_bytes when unset.
	DefaultMaxReadBytes = 1 << 20
	// maxPathLen bounds a diff/file path; a longer one is not a file here.
	maxPathLen = 4096
)

// File statuses in a diff (R-DIFF-8).
const (
	StatusAdded       = "added"
	StatusModified    = "modified"
	StatusDeleted     = "deleted"
	StatusRenamed     = "renamed"
	StatusTypeChanged = "type_changed"
)

// ReadOptions are the workspace's file rules that apply to diff reads
// (R-DIFF-5, R-DIFF-7).
type ReadOptions struct {
	// AllowedSubpaths are the only sub-paths (relative, slash separated)
	// whose files are listed and read. When empty, every path is allowed.
	// An entry that is "." or empty allows every path; one that climbs out
	// of the tree ("..") allows nothing.
	AllowedSubpaths []string
	// MaxReadBytes is the workspace's max_read_bytes. When zero or
	// negative, DefaultMaxReadBytes. Texts are capped at the smaller
	// of it and MaxTextBytes.
	MaxReadBytes int64
	// DenyReads is a DLP posture that refuses reading the workspace's
	// files: Diff and DiffFile answer ErrDLPRefused (403).
	DenyReads bool
}

func (o ReadOptions) textCap() int64 { return min(o.readCap(), MaxTextBytes) }

// readCap is max_read_bytes, DefaultMaxReadBytes when not set.
func (o ReadOptions) readCap() int64 {
	if o.MaxReadBytes <= 0 {
		return DefaultMaxReadBytes
	}
	return o.MaxReadBytes
}

// allowed reports whether the clean relative path p is under an allowed
// sub-path.
func (o ReadOptions) allowed(p string) bool {
	if len(o.AllowedSubpaths) == 0 {
		return true
	}
	for _, s := range o.AllowedSubpaths {
		s = path.Clean(strings.TrimLeft(strings.TrimSpace(s), "/"))
		if s == ".." || strings.HasPrefix(s, "../") {
			continue
		}
		if s == "." || p == s || strings.HasPrefix(p, s+"/") {
			return true
		}
	}
	return false
}

// view is a change as the allowed sub-paths show it: a rename that crosses
// their boundary is only its visible half, an addition or a deletion, so
// the listing never names a hidden path. ok is false when nothing of the
// change is visible.
func (o ReadOptions) view(c FileChange) (FileChange, bool) {
	if c.Status != StatusRenamed {
		return c, o.allowed(c.Path)
	}
	switch to, from := o.allowed(c.Path), o.allowed(c.OldPath); {
	case to && from:
		return c, true
	case to:
		return FileChange{Path: c.Path, Status: StatusAdded}, true
	case from:
		return FileChange{Path: c.OldPath, Status: StatusDeleted}, true
	}
	return FileChange{}, false
}

// Diff is GET /runs/{ref}/diff (R-DIFF-1, R-DIFF-2).
type Diff struct {
	Branch    string       `json:"branch"`
	Base      string       `json:"base"` // merge base of Head and the workspace's HEAD commit
	Head      string       `json:"head"` // the branch tip
	Files     []FileChange `json:"files"`
	Truncated bool         `json:"truncated"`
	// Uncommitted is how many allowed paths have changes in the worktree
	// folder that are not committed on the branch (git status: staged,
	// unstaged or untracked); nil when the folder is gone. The diff itself
	// never reads them (R-DIFF-4, R-DIFF-9).
	Uncommitted *int `json:"uncommitted,omitempty"`
}

// FileChange is one path the branch changed since Base.
type FileChange struct {
	Path   string `json:"path"`
	Status string `json:"status"`
	// OldPath is where a renamed file was at Base. A rename whose other
	// side is outside the allowed sub-paths is listed as added or deleted.
	OldPath string `json:"old_path,omitempty"`
}

// FileDiff is GET /runs/{ref}/diff/file (R-DIFF-3, R-DIFF-7, R-DIFF-8).
type FileDiff struct {
	Path              string `json:"path"`
	Original          string `json:"original"` // at Base; "" where absent
	Modified          string `json:"modified"` // at Head; "" where absent
	OriginalTruncated bool   `json:"original_truncated"`
	ModifiedTruncated bool   `json:"modified_truncated"`
	// Binary: one side is not UTF-8 text; both texts are then empty.
	Binary bool `json:"binary"`
}

// ends are the two commits a run's diff compares.
type ends struct{ base, head string }

// diffEnds resolves the branch tip and its merge base with the workspace's
// current HEAD commit; a vanished branch or no common history is 409
// (R-DIFF-6).
func (r Repo) diffEnds(ctx context.Context, wt Worktree) (ends, error) {
	if _, err := r.info(ctx); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return ends{}, refuse(ErrBranchGone, "the workspace repository is gone (%s), and branch %s with it", e.Msg, wt.Branch)
		}
		return ends{}, err
	}
	head, err := r.refCommit(ctx, wt.ref())
	if err != nil {
		return ends{}, err
	}
	if head == "" {
		return ends{}, refuse(ErrBranchGone, "branch %s no longer exists, so the run's changes cannot be shown", wt.Branch)
	}
	ws, err := r.headCommit(ctx)
	if err != nil {
		if errors.Is(err, ErrNoCommit) {
			return ends{}, refuse(ErrNoCommonHistory, "the workspace has no commit on HEAD, so branch %s has no common history with it", wt.Branch)
		}
		return ends{}, err
	}
	out, err := r.run(ctx, call{args: []string{"merge-base", head, ws}})
	if err != nil {
		if exitCode(err) == 1 {
			return ends{}, refuse(ErrNoCommonHistory, "branch %s has no common history with the workspace's current commit %s", wt.Branch, ws)
		}
		return ends{}, err
	}
	base := firstLine(out)
	if !isFullHex(base) {
		return ends{}, &GitError{Command: "merge-base", Stderr: "unexpected output: " + base}
	}
	return ends{base: base, head: head}, nil
}

// Diff lists the paths branch wt.Branch changed since it left the
// workspace's current commit: base is their merge base, head the branch tip
// (R-DIFF-1). Only committed objects are read (R-DIFF-4). At most
// MaxDiffPaths allowed paths are listed (R-DIFF-2); a path outside the
// allowed sub-paths is never listed (R-DIFF-5).
func (r Repo) Diff(ctx context.Context, wt Worktree, o ReadOptions) (Diff, error) {
	if err := wt.check(); err != nil {
		return Diff{}, err
	}
	if o.DenyReads {
		return Diff{}, refuse(ErrDLPRefused, "the workspace's DLP posture refuses reading its files, so the diff of %s is not shown", wt.Branch)
	}
	e, err := r.diffEnds(ctx, wt)
	if err != nil {
		return Diff{}, err
	}
	d := Diff{Branch: wt.Branch, Base: e.base, Head: e.head, Files: []FileChange{}}
	err = r.stream(ctx, call{args: []string{"diff-tree", "-r", "-z", "-M", "--name-status",
		"--no-ext-diff", "--no-textconv", e.base, e.head}}, func(br *bufio.Reader) error {
		return parseNameStatus(br, func(c FileChange) error {
			c, ok := o.view(c)
			if !ok {
				return nil
			}
			if len(d.Files) == MaxDiffPaths {
				d.Truncated = true
				return errStop
			}
			d.Files = append(d.Files, c)
			return nil
		})
	})
	if err != nil {
		return Diff{}, err
	}
	// R-DIFF-9: what the agent left uncommitted is counted, never read.
	if fi, err := os.Stat(wt.Path); err == nil && fi.IsDir() {
		n, _, err := r.uncommitted(ctx, wt, o.allowed)
		if err != nil {
			return Diff{}, err
		}
		d.Uncommitted = &n
	}
	return d, nil
}

// parseNameStatus reads git diff-tree -z --name-status output and calls
// emit for each change, in git's order. It stops at emit's first error.
// Status letters other than A, D, R, T (M, and C or X should they appear)
// are reported as modified.
func parseNameStatus(br *bufio.Reader, emit func(FileChange) error) error {
	for {
		st, err := readRecord(br)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if st == "" {
			return errors.New("worktree: empty diff-tree status")
		}
		p, err := readRecord(br)
		if err != nil {
			return unexpected(err)
		}
		c := FileChange{Path: p}
		switch st[0] {
		case 'A':
			c.Status = StatusAdded
		case 'D':
			c.Status = StatusDeleted
		case 'T':
			c.Status = StatusTypeChanged
		case 'R', 'C':
			to, err := readRecord(br)
			if err != nil {
				return unexpected(err)
			}
			c.OldPath, c.Path = p, to
			c.Status = StatusRenamed
			if st[0] == 'C' {
				c.OldPath, c.Status = "", StatusAdded
			}
		default:
			c.Status = StatusModified
		}
		if err := emit(c); err != nil {
			return err
		}
	}
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// cleanRelPath accepts only a clean, relative, slash-separated path with
// no empty, "." or ".." component and no NUL.
func cleanRelPath(p string) bool {
	if p == "" || len(p) > maxPathLen || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return true
}

// treeEntry is one entry of git ls-tree -l.
type treeEntry struct {
	mode string // "100644", "100755", "120000", "040000", "160000"
	typ  string // blob, tree, commit
	id   string
	size int64 // -1 for trees and submodules
	path string
}

// DiffFile is GET /runs/{ref}/diff/file?path=: the file's text at the diff's
// base (original) and head (modified), each "" where the file is absent and
// each capped at min(max_read_bytes, 64 KiB) with its truncated flag
// (R-DIFF-3, R-DIFF-7, R-DIFF-8). Content that is not UTF-8 text (invalid
// UTF-8 or a NUL byte in what is read) gives Binary with empty texts. A
// symlink's text is its target.
//
// Refusals: an empty path is 400; a DLP deny is 403; a path outside the
// allowed sub-paths, not clean and relative, through a symlink, a symlink
// whose target leaves the tree, or a file at neither end is 404, the same
// answer for all (R-DIFF-5); a vanished branch or no common history is 409
// (R-DIFF-6); a blob over 16 MiB at either end is 413, checked on its size
// before any byte is read (R-DIFF-5, R-DIFF-8).
func (r Repo) DiffFile(ctx context.Context, wt Worktree, p string, o ReadOptions) (FileDiff, error) {
	if err := wt.check(); err != nil {
		return FileDiff{}, err
	}
	if p == "" {
		return FileDiff{}, refuse(ErrPathRequired, "diff/file needs ?path=<a path the diff lists>")
	}
	if o.DenyReads {
		return FileDiff{}, refuse(ErrDLPRefused, "the workspace's DLP posture refuses reading its files, so %q is not shown", clip(p))
	}
	notFound := refuse(ErrPathNotFound, "%q is not a readable file of branch %s's diff; use a path GET /runs/{ref}/diff lists", clip(p), wt.Branch)
	if !cleanRelPath(p) || !o.allowed(p) {
		return FileDiff{}, notFound
	}
	e, err := r.diffEnds(ctx, wt)
	if err != nil {
		return FileDiff{}, err
	}
	var sides [2]*treeEntry
	for i, commit := range []string{e.base, e.head} {
		ent, err := r.entryAt(ctx, commit, p)
		if err != nil {
			if errors.Is(err, errThroughSymlink) {
				return FileDiff{}, notFound
			}
			return FileDiff{}, err
		}
		sides[i] = ent
	}
	if sides[0] == nil && sides[1] == nil {
		return FileDiff{}, notFound
	}
	for _, ent := range sides {
		if ent != nil && ent.size > MaxBlobBytes {
			return FileDiff{}, refuse(ErrFileTooLarge, "%q is %d bytes at %s, over the 16 MiB diff/file limit; read it from the branch with git instead", clip(p), ent.size, ent.id)
		}
	}
	fd := FileDiff{Path: p}
	textCap := o.textCap()
	var texts [2][]byte
	var truncated [2]bool
	binary := false
	for i, ent := range sides {
		if ent == nil {
			continue
		}
		b, trunc, err := r.entryText(ctx, ent, textCap)
		if err != nil {
			if errors.Is(err, errThroughSymlink) {
				return FileDiff{}, notFound
			}
			return FileDiff{}, err
		}
		t, ok := asText(b, trunc)
		binary = binary || !ok
		texts[i], truncated[i] = t, trunc
	}
	if binary {
		fd.Binary = true
		return fd, nil
	}
	fd.Original, fd.OriginalTruncated = string(texts[0]), truncated[0]
	fd.Modified, fd.ModifiedTruncated = string(texts[1]), truncated[1]
	return fd, nil
}

// errThroughSymlink: the path goes through a symlink, or is a symlink whose
// target leaves the tree.
var errThroughSymlink = errors.New("worktree: path resolves through a symlink")

// entryAt finds the blob or submodule at p in commit, or nil when p is not
// a file there (absent, or a folder). Every proper prefix of p must be a
// folder; a symlink among them is errThroughSymlink.
func (r Repo) entryAt(ctx context.Context, commit, p string) (*treeEntry, error) {
	// -t lists the folders on the way down, so the deepest one tells where
	// the path stopped existing. GIT_LITERAL_PATHSPECS is set for every call.
	ents, err := r.lsTree(ctx, commit, "-t", p)
	if err != nil {
		return nil, err
	}
	byPath := map[string]treeEntry{}
	for _, e := range ents {
		byPath[e.path] = e
	}
	comps := strings.Split(p, "/")
	for i := 1; i <= len(comps); i++ {
		prefix := strings.Join(comps[:i], "/")
		e, ok := byPath[prefix]
		if !ok {
			// The path stops here: a missing entry, or one that is not a
			// folder (ls-tree does not list it for a deeper pathspec).
			if i == len(comps) {
				return nil, nil
			}
			one, err := r.lsTree(ctx, commit, "", prefix)
			if err != nil {
				return nil, err
			}
			for _, e := range one {
				if e.path == prefix && e.mode == "120000" {
					return nil, errThroughSymlink
				}
			}
			return nil, nil
		}
		if i < len(comps) {
			if e.typ != "tree" {
				if e.mode == "120000" {
					return nil, errThroughSymlink
				}
				return nil, nil
			}
			continue
		}
		if e.typ == "tree" {
			return nil, nil
		}
		return &e, nil
	}
	return nil, nil
}

// lsTree runs git ls-tree -l -z [-t] <commit> -- <p> and keeps the entries
// that are p or one of its prefixes (bounded: at most one per component).
func (r Repo) lsTree(ctx context.Context, commit, flag, p string) ([]treeEntry, error) {
	args := []string{"ls-tree", "-l", "-z", "--full-tree"}
	if flag != "" {
		args = append(args, flag)
	}
	args = append(args, commit, "--", p)
	var ents []treeEntry
	err := r.stream(ctx, call{args: args}, func(br *bufio.Reader) error {
		for {
			rec, err := readRecord(br)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			e, ok := parseTreeEntry(rec)
			if !ok {
				return errors.New("worktree: unexpected ls-tree record")
			}
			if e.path == p || strings.HasPrefix(p, e.path+"/") {
				ents = append(ents, e)
			}
		}
	})
	return ents, err
}

// parseTreeEntry parses "<mode> SP <type> SP <id> SP+ <size> TAB <path>".
func parseTreeEntry(rec string) (treeEntry, bool) {
	meta, p, ok := strings.Cut(rec, "\t")
	if !ok {
		return treeEntry{}, false
	}
	f := strings.Fields(meta)
	if len(f) != 4 {
		return treeEntry{}, false
	}
	e := treeEntry{mode: f[0], typ: f[1], id: f[2], size: -1, path: p}
	if f[3] != "-" {
		n, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil || n < 0 {
			return treeEntry{}, false
		}
		e.size = n
	}
	return e, isFullHex(e.id)
}

// entryText reads at most limit bytes of a blob (a symlink's target, which
// must stay inside the tree) or renders a submodule as git diff does.
func (r Repo) entryText(ctx context.Context, e *treeEntry, limit int64) ([]byte, bool, error) {
	switch {
	case e.typ == "commit":
		b := []byte("Subproject commit " + e.id + "\n")
		return b[:min(int64(len(b)), limit)], int64(len(b)) > limit, nil
	case e.mode == "120000":
		if e.size > maxPathLen {
			return nil, false, errThroughSymlink
		}
		target, _, err := r.readBlob(ctx, e.id, maxPathLen)
		if err != nil {
			return nil, false, err
		}
		if escapes(path.Dir(e.path), string(target)) {
			return nil, false, errThroughSymlink
		}
		return target[:min(int64(len(target)), limit)], int64(len(target)) > limit, nil
	}
	return r.readBlob(ctx, e.id, limit)
}

// escapes reports whether a symlink in folder dir with this target points
// outside the tree.
func escapes(dir, target string) bool {
	if target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0) {
		return true
	}
	j := path.Join(dir, target)
	return j == ".." || strings.HasPrefix(j, "../")
}

// readBlob reads at most limit bytes of the blob id with git cat-file blob,
// and reports whether it had more.
func (r Repo) readBlob(ctx context.Context, id string, limit int64) ([]byte, bool, error) {
	var buf []byte
	more := false
	err := r.stream(ctx, call{args: []string{"cat-file", "blob", id}}, func(br *bufio.Reader) error {
		b, err := io.ReadAll(io.LimitReader(br, limit+1))
		if err != nil {
			return err
		}
		if int64(len(b)) > limit {
			buf, more = b[:limit], true
			return errStop
		}
		buf = b
		return nil
	})
	return buf, more, err
}

// asText returns b as text, or ok false when it is not UTF-8 text (invalid
// UTF-8 or a NUL byte). A text cut at the cap may end inside a character;
// that incomplete character is dropped and does not make it binary.
func asText(b []byte, truncated bool) ([]byte, bool) {
	if truncated {
		for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
			if utf8.RuneStart(b[len(b)-i]) {
				if !utf8.FullRune(b[len(b)-i:]) {
					b = b[:len(b)-i]
				}
				break
			}
		}
	}
	if bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
		return nil, false
	}
	return b, true
}
