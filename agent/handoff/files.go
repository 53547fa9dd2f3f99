package handoff

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// limits are R-HOF-15's bounds; tests lower them to probe the edges.
type limits struct {
	total  int64 // the whole conversation
	record int   // one record
}

var defaultLimits = limits{total: MaxConversationBytes, record: MaxRecordBytes}

// errNotExist: a path component or the file is absent.
var errNotExist = errors.New("handoff: not found")

// openHome opens the profile home. The home itself is the operator's path
// and may be reached through a symlink; nothing below it may be.
func openHome(home string) (*os.File, error) {
	if home == "" || !filepath.IsAbs(home) {
		return nil, refuse(ErrBadSource, "the profile home %q is not an absolute path", home)
	}
	fd, err := unix.Open(home, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil, errNotExist
		}
		return nil, &os.PathError{Op: "open", Path: home, Err: err}
	}
	return os.NewFile(uintptr(fd), home), nil
}

// openDirAt opens the folder name below dir without following a symlink.
func openDirAt(dir *os.File, name string) (*os.File, error) {
	if !safeName(name) {
		return nil, errNotExist
	}
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil, errNotExist
		}
		return nil, &os.PathError{Op: "stat", Path: filepath.Join(dir.Name(), name), Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
	case unix.S_IFLNK:
		return nil, refuse(ErrNotRegularFile, "%s is a symbolic link; a conversation is never read through one", filepath.Join(dir.Name(), name))
	default:
		return nil, errNotExist
	}
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, refuse(ErrNotRegularFile, "%s is a symbolic link; a conversation is never read through one", filepath.Join(dir.Name(), name))
		}
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil, errNotExist
		}
		return nil, &os.PathError{Op: "open", Path: filepath.Join(dir.Name(), name), Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir.Name(), name)), nil
}

// openDirPath opens the folders of rel below dir, one at a time.
func openDirPath(dir *os.File, rel ...string) (*os.File, error) {
	cur := dir
	for _, name := range rel {
		next, err := openDirAt(cur, name)
		if cur != dir {
			cur.Close()
		}
		if err != nil {
			return nil, err
		}
		cur = next
	}
	if cur == dir {
		// Callers close what they get; never hand back dir itself.
		fd, err := unix.Dup(int(dir.Fd()))
		if err != nil {
			return nil, err
		}
		unix.CloseOnExec(fd)
		return os.NewFile(uintptr(fd), dir.Name()), nil
	}
	return cur, nil
}

// existsAt reports whether name below dir exists, without following it.
func existsAt(dir *os.File, name string) bool {
	var st unix.Stat_t
	return safeName(name) && unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// openFileAt opens the conversation file name below dir: a regular file
// with one name only. It is checked by lstat before the open, so
// that no device or FIFO is ever opened, and by fstat after it, so that a
// file swapped in between is caught too; O_NOFOLLOW refuses a symlink
// swapped in, O_NONBLOCK keeps a FIFO from blocking.
func openFileAt(dir *os.File, name string) (*os.File, int64, error) {
	if !safeName(name) {
		return nil, 0, errNotExist
	}
	full := filepath.Join(dir.Name(), name)
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil, 0, errNotExist
		}
		return nil, 0, &os.PathError{Op: "stat", Path: full, Err: err}
	}
	if err := regular(full, &st); err != nil {
		return nil, 0, err
	}
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, 0, refuse(ErrNotRegularFile, "%s is a symbolic link; a conversation is never read through one", full)
		}
		if errors.Is(err, unix.ENOENT) {
			return nil, 0, errNotExist
		}
		return nil, 0, &os.PathError{Op: "open", Path: full, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, 0, &os.PathError{Op: "fstat", Path: full, Err: err}
	}
	if err := regular(full, &st); err != nil {
		unix.Close(fd)
		return nil, 0, err
	}
	return os.NewFile(uintptr(fd), full), st.Size, nil
}

// regular refuses anything but a regular file with a single name.
func regular(full string, st *unix.Stat_t) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return refuse(ErrNotRegularFile, "%s is a symbolic link; a conversation is never read through one", full)
	default:
		return refuse(ErrNotRegularFile, "%s is not a regular file", full)
	}
	if st.Nlink > 1 {
		return refuse(ErrNotRegularFile, "%s has %d names (hard links); a conversation must have one", full, st.Nlink)
	}
	return nil
}

// safeName: one path component, never "." or "..".
func safeName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// listDir returns the names of dir's entries, sorted: only the folders
// when dirs (a symlink to a folder is never listed, as it is never
// entered), every entry otherwise (so that a symlink, a folder or a special
// file named like a conversation is found, and refused by openFileAt).
func listDir(dir *os.File, dirs bool) ([]string, error) {
	// A fresh descriptor: ReadDir moves the offset of the one it reads.
	d, err := openDirPath(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !dirs || e.Type().IsDir() {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// lineReader reads JSONL lines under R-HOF-15's bounds, holding one line at
// a time: a line longer than lim.record is refused as soon as it is known to
// be, and so is a stream longer than lim.total.
type lineReader struct {
	r   *bufio.Reader
	lim limits
	n   int64
	buf []byte
}

func newLineReader(r io.Reader, lim limits) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), lim: lim}
}

// next returns the next line without its line ending and whether it ended
// with a newline; io.EOF after the last.
func (l *lineReader) next() ([]byte, bool, error) {
	l.buf = l.buf[:0]
	for {
		frag, err := l.r.ReadSlice('\n')
		l.n += int64(len(frag))
		if l.n > l.lim.total {
			return nil, false, refuse(ErrConversationTooLarge, "the conversation is larger than %s; a handoff reads at most %s", sizeText(l.n), sizeText(l.lim.total)) // R-HOF-15
		}
		l.buf = append(l.buf, frag...)
		body := len(l.buf)
		if err == nil {
			body--
		}
		if body > l.lim.record {
			return nil, false, refuse(ErrRecordTooLarge, "the conversation holds a record larger than %s", sizeText(int64(l.lim.record))) // R-HOF-15
		}
		switch {
		case err == nil:
			return trimCR(l.buf[:body]), true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(l.buf) == 0 {
				return nil, false, io.EOF
			}
			return trimCR(l.buf), false, nil
		default:
			return nil, false, err
		}
	}
}

func trimCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return b[:n-1]
	}
	return b
}

// readLines feeds each non-blank line to parse, which reports whether it
// could read it. A line that could not be read counts as unreadable unless
// no other line follows it: that one may still be being written (R-HOF-3).
func readLines(ctx context.Context, r io.Reader, lim limits, parse func([]byte) bool) (unreadable int, n int64, err error) {
	lr := newLineReader(r, lim)
	pending := false
	for i := 0; ; i++ {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return 0, lr.n, err
			}
		}
		line, _, err := lr.next()
		if errors.Is(err, io.EOF) {
			return unreadable, lr.n, nil
		}
		if err != nil {
			return 0, lr.n, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if pending {
			unreadable++
		}
		pending = !parse(line)
	}
}

// readConversationFile opens name below dir and streams it through parse.
func readConversationFile(ctx context.Context, dir *os.File, name string, lim limits, parse func([]byte) bool) (path string, unreadable int, n int64, err error) {
	f, size, err := openFileAt(dir, name)
	if err != nil {
		return "", 0, 0, err
	}
	defer f.Close()
	if size > lim.total {
		return "", 0, 0, refuse(ErrConversationTooLarge, "%s is %s; a handoff reads at most %s", f.Name(), sizeText(size), sizeText(lim.total)) // R-HOF-15
	}
	unreadable, n, err = readLines(ctx, f, lim, parse)
	return f.Name(), unreadable, n, err
}
