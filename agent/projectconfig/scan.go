package projectconfig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// MaxFileSize is the largest listed file that is read in its format; a
// larger one is unreadable and hashed whole (R-PCS-5, R-PCS-8).
const MaxFileSize = 1 << 20

// Tool names, as the agent's drivers and capabilities name them.
const (
	ToolClaude   = "claude"
	ToolCodex    = "codex"
	ToolGemini   = "gemini"
	ToolGrok     = "grok"
	ToolOpenCode = "opencode"
)

// Reason says why a listed file could not be read in its format. It is
// part of the hash stream, so its values never change.
type Reason string

const (
	ReasonInvalidJSON   Reason = "invalid_json"   // not UTF-8, not JSON, or not an object at the top
	ReasonInvalidTOML   Reason = "invalid_toml"   // not UTF-8 or not TOML
	ReasonInvalidEnv    Reason = "invalid_env"    // not UTF-8 or a line R-PCS-24 cannot parse
	ReasonTooLarge      Reason = "too_large"      // over MaxFileSize bytes
	ReasonTooDeep       Reason = "too_deep"       // a node deeper than MaxDepth (R-PCS-20)
	ReasonSymlink       Reason = "symlink"        // the path is a symlink (never followed)
	ReasonParentSymlink Reason = "parent_symlink" // .claude, .codex or .gemini is a symlink
	ReasonDirectory     Reason = "directory"      // the path is a directory
	ReasonFIFO          Reason = "fifo"           // the path is a named pipe
	ReasonDevice        Reason = "device"         // a character or block device
	ReasonSocket        Reason = "socket"         // a unix socket
	ReasonReadError     Reason = "read_error"     // exists but cannot be opened or read
)

// Report is the scan of one directory.
type Report struct {
	// Files are the flagged files (a flagged key, or unreadable), in the
	// fixed order of R-PCS-3. A listed file that is absent or flags nothing
	// is not in the list.
	Files []File `json:"files"`
	// SHA256 is the hash of the flagged part of every file of every tool
	// (package doc, R-PCS-21); "" when nothing is flagged (R-PCS-9).
	SHA256 string `json:"sha256,omitempty"`
}

// File is one flagged file.
type File struct {
	// Path is relative to the scanned directory, slash-separated, as in
	// R-PCS-3 (".codex/config.toml").
	Path string `json:"path"`
	// Tools are the tools that read the file (R-PCS-19).
	Tools []string `json:"tools"`
	// Unreadable is why the file could not be read in its format; "" when
	// it was read. An unreadable file has no Keys.
	Unreadable Reason `json:"unreadable,omitempty"`
	// Detail says where and what, for a person (a line number, the link
	// target); it is not part of the hash.
	Detail string `json:"detail,omitempty"`
	// ContentSHA256 is the hash of the unreadable file that went into the
	// stream: of the whole file, or of the link target text.
	ContentSHA256 string `json:"content_sha256,omitempty"`
	// Keys are the flagged keys, sorted by Path.
	Keys []Key `json:"keys,omitempty"`
}

// Key is one flagged key.
type Key struct {
	// Path is the dotted key path (package doc): "notify",
	// "env.HTTPS_PROXY", "profiles.work.model_providers".
	Path string `json:"path"`
	// Value is the key's value as JSON with URL passwords masked
	// (R-PCS-25); the hash is over the unmasked value.
	Value json.RawMessage `json:"value"`
}

// listed is one path of R-PCS-3.
type listed struct {
	path   string // relative, slash-separated
	parent string // "" when directly in the directory
	name   string
	tool   string
	format format
}

// files is R-PCS-3 in its fixed order, the order of the hash stream.
var files = []listed{
	{".claude/settings.json", ".claude", "settings.json", ToolClaude, formatClaudeSettings},
	{".claude/settings.local.json", ".claude", "settings.local.json", ToolClaude, formatClaudeSettings},
	{".mcp.json", "", ".mcp.json", ToolClaude, formatMCP},
	{".codex/config.toml", ".codex", "config.toml", ToolCodex, formatCodex},
	{".gemini/settings.json", ".gemini", "settings.json", ToolGemini, formatGemini},
	{".gemini/.env", ".gemini", ".env", ToolGemini, formatEnv},
	{".env", "", ".env", ToolGemini, formatEnv},
}

// Paths returns the listed paths in the fixed order of R-PCS-3.
func Paths() []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.path
	}
	return out
}

// Scan reads the listed files under dir and reports the flagged ones with
// the hash of the flagged part (R-PCS-10). It never executes, never follows
// a symlink below dir, and is safe for concurrent use. Only a directory
// that cannot be opened is an error (ErrDir); every problem with a listed
// file flags that file instead.
func Scan(dir string) (Report, error) {
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Report{}, fmt.Errorf("%w: %s: %w", ErrDir, dir, err)
	}
	defer unix.Close(dfd)

	var rep Report
	h := sha256.New()
	for _, lf := range files {
		f, ok := scanFile(dfd, lf, h)
		if ok {
			rep.Files = append(rep.Files, f)
		}
	}
	if len(rep.Files) > 0 {
		rep.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	return rep, nil
}

// scanFile reads one listed path and writes its part of the hash stream.
// ok is false when the file is absent or flags nothing.
func scanFile(dfd int, lf listed, h hash.Hash) (File, bool) {
	f := File{Path: lf.path, Tools: []string{lf.tool}}
	ld := load(dfd, lf)
	switch {
	case ld.absent:
		return f, false
	case ld.reason == "":
		keys, reason, detail := readFormat(lf.format, ld.data)
		if reason == "" {
			if len(keys) == 0 {
				return f, false
			}
			slices.SortFunc(keys, func(a, b flagged) int { return strings.Compare(a.path, b.path) })
			for _, k := range keys {
				writeKey(h, lf.path, k.path, canonical(k.value))
				f.Keys = append(f.Keys, Key{Path: k.path, Value: display(k.value)})
			}
			return f, true
		}
		sum := sha256.Sum256(ld.data)
		ld.reason, ld.detail, ld.sum = reason, detail, hex.EncodeToString(sum[:])
	}
	f.Unreadable, f.Detail, f.ContentSHA256 = ld.reason, ld.detail, ld.sum
	writeUnreadable(h, lf.path, ld.reason, ld.sum)
	return f, true
}

func writeKey(h io.Writer, file, path string, canon []byte) {
	var b bytes.Buffer
	b.WriteString(file)
	b.WriteByte(0)
	b.WriteString(path)
	b.WriteByte(0)
	b.Write(canon)
	b.WriteByte('\n')
	h.Write(b.Bytes())
}

func writeUnreadable(h io.Writer, file string, reason Reason, sum string) {
	fmt.Fprintf(h, "%s\x00!unreadable\x00%s\x00%s\n", file, reason, sum)
}

// loaded is what load found at a listed path.
type loaded struct {
	absent bool
	data   []byte // the file, when it is a regular file of at most MaxFileSize
	// when unreadable before any parsing:
	reason Reason
	detail string
	sum    string
}

var emptySum = func() string { s := sha256.Sum256(nil); return hex.EncodeToString(s[:]) }()

func unreadable(reason Reason, detail string, sum string) loaded {
	return loaded{reason: reason, detail: detail, sum: sum}
}

// load looks at a listed path without following any symlink below dfd.
func load(dfd int, lf listed) loaded {
	at := dfd
	if lf.parent != "" {
		var st unix.Stat_t
		switch err := unix.Fstatat(dfd, lf.parent, &st, unix.AT_SYMLINK_NOFOLLOW); {
		case absentErr(err):
			return loaded{absent: true}
		case err != nil:
			return unreadable(ReasonReadError, fmt.Sprintf("%s: %v", lf.parent, err), emptySum)
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			return symlink(dfd, lf.parent, ReasonParentSymlink)
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return loaded{absent: true} // a tool cannot read a file below a non-directory
		}
		pfd, err := unix.Openat(dfd, lf.parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		switch {
		case err == unix.ELOOP:
			return symlink(dfd, lf.parent, ReasonParentSymlink) // swapped in after lstat
		case absentErr(err):
			return loaded{absent: true}
		case err != nil:
			return unreadable(ReasonReadError, fmt.Sprintf("%s: %v", lf.parent, err), emptySum)
		}
		defer unix.Close(pfd)
		at = pfd
	}

	var st unix.Stat_t
	switch err := unix.Fstatat(at, lf.name, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case absentErr(err):
		return loaded{absent: true}
	case err != nil:
		return unreadable(ReasonReadError, err.Error(), emptySum)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return symlink(at, lf.name, ReasonSymlink)
	}
	if r := special(st.Mode); r != "" {
		return unreadable(r, "not a regular file", emptySum)
	}

	// R-PCS-23: O_NOFOLLOW refuses a symlink swapped in since the lstat,
	// O_NONBLOCK keeps a FIFO swapped in from blocking the open, and the
	// fstat below refuses anything that is not the regular file.
	fd, err := unix.Openat(at, lf.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	switch {
	case err == unix.ELOOP:
		return symlink(at, lf.name, ReasonSymlink)
	case absentErr(err):
		return loaded{absent: true}
	case err != nil:
		return unreadable(ReasonReadError, err.Error(), emptySum)
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return unreadable(ReasonReadError, err.Error(), emptySum)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		if r := special(st.Mode); r != "" {
			return unreadable(r, "not a regular file", emptySum)
		}
		return unreadable(ReasonReadError, "not a regular file", emptySum)
	}
	return readRegular(fdReader(fd), st.Size)
}

// readRegular keeps at most MaxFileSize+1 bytes of r; a larger file is
// streamed through sha256 once and never parsed (R-PCS-8).
func readRegular(r io.Reader, size int64) loaded {
	if size > MaxFileSize {
		return hashOversized(nil, r)
	}
	data, over, err := readLimited(r, size)
	if err != nil {
		return unreadable(ReasonReadError, err.Error(), emptySum)
	}
	if over {
		return hashOversized(data, r) // grew since the fstat
	}
	return loaded{data: data}
}

// readLimited reads r up to MaxFileSize+1 bytes; over reports that the
// limit was passed. hint (the fstat size) only sizes the buffer.
func readLimited(r io.Reader, hint int64) (data []byte, over bool, err error) {
	hint = max(0, min(hint, MaxFileSize))
	var b bytes.Buffer
	b.Grow(int(hint) + bytes.MinRead)
	if _, err := b.ReadFrom(io.LimitReader(r, MaxFileSize+1)); err != nil {
		return nil, false, err
	}
	return b.Bytes(), b.Len() > MaxFileSize, nil
}

// hashOversized hashes what was already read and then the rest of r, in
// constant memory.
func hashOversized(head []byte, r io.Reader) loaded {
	h := sha256.New()
	h.Write(head)
	n, err := io.Copy(h, r)
	if err != nil {
		return unreadable(ReasonReadError, err.Error(), emptySum)
	}
	return unreadable(ReasonTooLarge, fmt.Sprintf("%d bytes, over the %d-byte limit", int64(len(head))+n, MaxFileSize),
		hex.EncodeToString(h.Sum(nil)))
}

// symlink flags a link by the hash of its target text; the target is
// read, never followed.
func symlink(at int, name string, reason Reason) loaded {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(at, name, buf)
		if err != nil {
			return unreadable(reason, fmt.Sprintf("%s is a symlink (%v)", name, err), emptySum)
		}
		if n < len(buf) {
			sum := sha256.Sum256(buf[:n])
			return unreadable(reason, fmt.Sprintf("%s is a symlink to %q", name, buf[:n]), hex.EncodeToString(sum[:]))
		}
		if len(buf) >= 1<<16 {
			sum := sha256.Sum256(buf)
			return unreadable(reason, fmt.Sprintf("%s is a symlink", name), hex.EncodeToString(sum[:]))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// special names a file type that is neither regular, a directory of a
// parent, nor a symlink; "" for a regular file.
func special(mode uint32) Reason {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return ""
	case unix.S_IFDIR:
		return ReasonDirectory
	case unix.S_IFIFO:
		return ReasonFIFO
	case unix.S_IFCHR, unix.S_IFBLK:
		return ReasonDevice
	case unix.S_IFSOCK:
		return ReasonSocket
	}
	return ReasonReadError
}

// absentErr: the path does not exist, or a component is not a directory,
// so no tool can read it either.
func absentErr(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)
}

// fdReader reads a file descriptor directly, so the descriptor opened
// with O_NONBLOCK never goes through the runtime poller.
type fdReader int

func (fd fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(fd), p)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}
