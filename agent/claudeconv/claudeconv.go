// Package claudeconv carries one Claude Code conversation from one profile
// home to another (R-MOVE-*): the transcript, its sub-agent and tool-result
// files, never a login, a setting or another conversation. The copy is
// staged and verified before it is installed, and an installation can be
// undone until it is committed. It never changes the source home.
package claudeconv

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/refusal"
)

// The conversation cannot be carried as it is (R-MOVE-12): 422.
var (
	// ErrLink: the conversation holds a symbolic link.
	ErrLink = errors.New("claudeconv: symbolic link")
	// ErrSpecialFile: the conversation holds a special file.
	ErrSpecialFile = errors.New("claudeconv: special file")
	// ErrHardLink: a conversation file has a second name.
	ErrHardLink = errors.New("claudeconv: hard link")
)

// Conflicts (409): nothing was installed.
var (
	// ErrNotConversation: the id is not a Claude session id.
	ErrNotConversation = errors.New("claudeconv: not a conversation id")
	// ErrChanged: a source file changed while it was copied; retry
	// (R-MOVE-11g, R-MOVE-15).
	ErrChanged = errors.New("claudeconv: conversation changed")
	// ErrTargetDiffers: the target holds another version of the
	// conversation that no move left there (R-MOVE-11e).
	ErrTargetDiffers = errors.New("claudeconv: target conversation differs")
)

// File is one file of a conversation being carried.
type File struct {
	Rel    string // relative to <home>/.claude/projects
	size   int64
	mtime  time.Time
	SHA256 string
}

func projectsDir(home string) string { return filepath.Join(home, ".claude", "projects") }

// Files lists the files of one Claude Code conversation under
// home: projects/<slug>/<id>.jsonl and everything under
// projects/<slug>/<id>/ (sub-agents, tool results), with their size, mtime
// and sha256. A link, a second name of a file or a special file is 422
// (R-MOVE-12); the files must lie inside the home (R-MOVE-3).
func Files(home, conv string) ([]File, error) {
	if !cliruntime.IsUUID(conv) {
		return nil, refusal.New(ErrNotConversation, "conversation id %q is not a Claude session id", conv)
	}
	root := projectsDir(home)
	matches, _ := filepath.Glob(filepath.Join(root, "*", conv+".jsonl"))
	dirs, _ := filepath.Glob(filepath.Join(root, "*", conv))
	if len(matches) == 0 && len(dirs) == 0 {
		return nil, nil
	}
	var out []File
	add := func(path string) error {
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return refusal.New(ErrLink, "the conversation holds a symbolic link (%s); it cannot be carried", rel)
		case fi.IsDir():
			return nil
		case !fi.Mode().IsRegular():
			return refusal.New(ErrSpecialFile, "the conversation holds a special file (%s); it cannot be carried", rel)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			return refusal.New(ErrHardLink, "the conversation file %s has another name (a hard link); it cannot be carried", rel)
		}
		sum, err := fileSHA256(path)
		if err != nil {
			return err
		}
		out = append(out, File{Rel: rel, size: fi.Size(), mtime: fi.ModTime(), SHA256: sum})
		return nil
	}
	for _, m := range matches {
		if err := add(m); err != nil {
			return nil, err
		}
	}
	for _, d := range dirs {
		if fi, err := os.Lstat(d); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, refusal.New(ErrLink, "the conversation directory %s is a symbolic link; it cannot be carried", d)
		}
		err := filepath.WalkDir(d, func(path string, de fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return add(path)
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Stage copies files into a temporary directory of the target home and
// checks every source file before and after (size, mtime, sha256): a file
// that changed meanwhile is 409, and the client may retry (R-MOVE-11g,
// R-MOVE-15).
func Stage(srcHome, targetHome string, files []File) (string, error) {
	if err := os.MkdirAll(projectsDir(targetHome), 0o700); err != nil {
		return "", fmt.Errorf("move: %w", err)
	}
	staged, err := os.MkdirTemp(filepath.Join(targetHome, ".claude"), ".olivares-move-")
	if err != nil {
		return "", fmt.Errorf("move: %w", err)
	}
	fail := func(err error) (string, error) {
		os.RemoveAll(staged)
		return "", err
	}
	root := projectsDir(srcHome)
	for _, f := range files {
		dst := filepath.Join(staged, f.Rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return fail(err)
		}
		sum, err := copyFile(filepath.Join(root, f.Rel), dst)
		if err != nil {
			return fail(err)
		}
		fi, err := os.Lstat(filepath.Join(root, f.Rel))
		if err != nil || sum != f.SHA256 || fi.Size() != f.size || !fi.ModTime().Equal(f.mtime) {
			return fail(refusal.New(ErrChanged, "the conversation file %s changed while it was carried; try the move again", f.Rel))
		}
	}
	return staged, nil
}

// copyFile copies src to a new 0600 dst and returns the sha256 of what it
// wrote, synced to disk.
func copyFile(src, dst string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(out, h), in); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), out.Close()
}

// Installation is a staged copy moved into place: undo puts the target
// back as it was, commit drops what undo would have needed.
type Installation struct {
	moved  []string // installed paths
	backup string   // where replaced files went, "" if none
	prev   []string // paths moved to backup, relative to projects
	home   string
}

func (in *Installation) Undo() {
	for _, p := range in.moved {
		os.RemoveAll(p)
	}
	for _, rel := range in.prev {
		os.Rename(filepath.Join(in.backup, rel), filepath.Join(projectsDir(in.home), rel))
	}
	if in.backup != "" {
		os.RemoveAll(in.backup)
	}
}

func (in *Installation) Commit() {
	if in.backup != "" {
		os.RemoveAll(in.backup)
	}
}

// Install renames the staged conversation into the target's projects
// directory. What the target already holds of the same conversation must
// be the copy an earlier move left (replaced, R-MOVE-8) or the same bytes;
// any other version is 409 (R-MOVE-11e), before anything is touched.
func Install(targetHome, targetRef, conv, staged string, files []File, earlier map[string]string) (*Installation, error) {
	in := &Installation{home: targetHome}
	if len(files) == 0 {
		return in, nil
	}
	root := projectsDir(targetHome)
	existing, err := Files(targetHome, conv)
	if err != nil {
		return nil, refusal.New(ErrTargetDiffers, "profile %s holds another version of conversation %s that is not a plain copy: %v", targetRef, conv, err)
	}
	if len(existing) > 0 {
		want := map[string]string{}
		for _, f := range files {
			want[f.Rel] = f.SHA256
		}
		for _, f := range existing {
			if earlier[f.Rel] != f.SHA256 && want[f.Rel] != f.SHA256 {
				return nil, refusal.New(ErrTargetDiffers, "profile %s already holds a different version of conversation %s (%s); it was not left by a move", targetRef, conv, f.Rel)
			}
		}
		backup, err := os.MkdirTemp(filepath.Join(targetHome, ".claude"), ".olivares-replaced-")
		if err != nil {
			return nil, err
		}
		in.backup = backup
		for _, top := range topLevel(existing) {
			dst := filepath.Join(backup, top)
			if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
				in.Undo()
				return nil, err
			}
			if err := os.Rename(filepath.Join(root, top), dst); err != nil {
				in.Undo()
				return nil, err
			}
			in.prev = append(in.prev, top)
		}
	}
	for _, top := range topLevel(files) {
		dst := filepath.Join(root, top)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			in.Undo()
			return nil, err
		}
		if err := os.Rename(filepath.Join(staged, top), dst); err != nil {
			in.Undo()
			return nil, err
		}
		in.moved = append(in.moved, dst)
	}
	return in, nil
}

// topLevel returns the distinct <slug>/<id>.jsonl and <slug>/<id> entries
// of files.
func topLevel(files []File) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range files {
		parts := strings.SplitN(filepath.ToSlash(f.Rel), "/", 3)
		top := parts[0] + "/" + parts[1]
		if !seen[top] {
			seen[top] = true
			out = append(out, filepath.FromSlash(top))
		}
	}
	return out
}
