package transcript

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf16"

	"golang.org/x/sys/unix"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The tools whose native records this package reads.
const (
	ToolClaude = "claude"
	ToolCodex  = "codex"
)

// Source names one run's native record: the caller (the agent) knows the
// tool, the profile home, the conversation id and the working directory,
// and whether the run's process is live.
type Source struct {
	// Tool is ToolClaude or ToolCodex; anything else is ErrUnsupportedTool.
	Tool string
	// Home is the profile home: Claude Code keeps its files in
	// <Home>/.claude (CLAUDE_CONFIG_DIR), Codex in <Home>/.codex
	// (CODEX_HOME). Every file read must lie inside it.
	Home string
	// ConversationID is the Claude session id or the Codex thread id; ""
	// while the run has none yet.
	ConversationID string
	// Cwd is the run's working directory (workspace_path). Claude Code
	// files a session under the slug of its physical path (ClaudeSlug).
	Cwd string
	// Live is true while the run's process lives or is just starting: a
	// transcript not yet written is then pending rather than missing, and
	// work without an outcome is running rather than stopped.
	Live bool
}

// State is what became of the native record on a read (R-ACT-1, R-MSG-2).
type State = apitypes.TranscriptState

// The States, as the API names them.
const (
	StateRead    = apitypes.TranscriptRead
	StatePending = apitypes.TranscriptPending
	StateMissing = apitypes.TranscriptMissing
)

// ClaudeSlug is Claude Code's project directory name for a physical cwd
// (real-clis.md §1.3): every UTF-16 unit that is not an ASCII letter or
// digit becomes '-'; a slug longer than 200 units keeps its first 200 and
// gets '-' and the base-36 absolute value of the Java string hash of the
// whole cwd appended.
func ClaudeSlug(cwd string) string {
	units := utf16.Encode([]rune(cwd))
	b := make([]byte, len(units))
	var h int32
	for i, u := range units {
		h = h*31 + int32(u) // (h<<5)-h+c with 32-bit wrap-around, as `h |= 0` does
		if u < 0x80 && ('a' <= u && u <= 'z' || 'A' <= u && u <= 'Z' || '0' <= u && u <= '9') {
			b[i] = byte(u)
		} else {
			b[i] = '-'
		}
	}
	if len(b) <= 200 {
		return string(b)
	}
	abs := int64(h)
	if abs < 0 {
		abs = -abs
	}
	return string(b[:200]) + "-" + strconv.FormatInt(abs, 36)
}

// isUUID reports whether s is a UUID in its 8-4-4-4-12 hex form (Claude
// session ids, Codex thread ids), which also makes it safe in a path.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
		} else if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// safeName reports whether s can be one path component that Claude Code
// generated (agent ids, workflow run ids): 1..128 of [A-Za-z0-9_-].
func safeName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// errNotFound is a file that does not exist (any component missing).
var errNotFound = errors.New("transcript: not found")

// openedFile is a native record opened under the home and link rules.
type openedFile struct {
	f     *os.File
	rel   []string // path components below the home
	key   fileKey
	size  int64
	mtime time.Time
}

type fileKey struct{ dev, ino uint64 }

// openInHome opens home/rel... for reading under the home and link rules
// (Q-23, as R-MOVE-12): the home itself may be reached through symlinks (an
// operator's layout), but below it every component is opened with
// O_NOFOLLOW, one openat at a time, so nothing can lead outside the home;
// the file must be a regular file with a single link. It returns
// errNotFound when a component does not exist and ErrTranscriptUnsafe (with
// the path) when a rule is broken.
func openInHome(home string, rel ...string) (*openedFile, error) {
	if home == "" || len(rel) == 0 {
		return nil, errf(ErrInvalidSource, "no profile home")
	}
	for _, c := range rel {
		if c == "" || c == "." || c == ".." || strings.ContainsRune(c, '/') || strings.IndexByte(c, 0) >= 0 {
			return nil, errf(ErrInvalidSource, "bad path component %q", c)
		}
	}
	dir, err := unix.Open(home, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil, errNotFound
		}
		return nil, &os.PathError{Op: "open", Path: home, Err: err}
	}
	unsafe := func(why string) error {
		return errf(ErrTranscriptUnsafe, "%s: %s (the file must be a regular, singly linked file inside the profile home, reached without symlinks)",
			filepath.Join(append([]string{home}, rel...)...), why)
	}
	for i, c := range rel {
		last := i == len(rel)-1
		flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if last {
			// Look before opening: opening a device or a FIFO can have
			// effects of its own.
			var st unix.Stat_t
			if err := unix.Fstatat(dir, c, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
				switch st.Mode & unix.S_IFMT {
				case unix.S_IFREG:
				case unix.S_IFLNK:
					unix.Close(dir)
					return nil, unsafe("a symlink")
				default:
					unix.Close(dir)
					return nil, unsafe("not a regular file")
				}
			}
			flags |= unix.O_NONBLOCK
		} else {
			flags |= unix.O_DIRECTORY
		}
		fd, err := unix.Openat(dir, c, flags, 0)
		unix.Close(dir)
		if err != nil {
			switch {
			case errors.Is(err, unix.ENOENT):
				return nil, errNotFound
			case errors.Is(err, unix.ELOOP):
				return nil, unsafe("a symlink")
			case errors.Is(err, unix.ENOTDIR):
				// A component is a symlink (O_DIRECTORY|O_NOFOLLOW) or a file.
				var st unix.Stat_t
				p := filepath.Join(append([]string{home}, rel[:i+1]...)...)
				if unix.Lstat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
					return nil, unsafe("a symlink")
				}
				return nil, errNotFound
			case errors.Is(err, unix.ENXIO):
				return nil, unsafe("not a regular file")
			}
			return nil, &os.PathError{Op: "open", Path: filepath.Join(append([]string{home}, rel[:i+1]...)...), Err: err}
		}
		dir = fd
	}
	f := os.NewFile(uintptr(dir), filepath.Join(append([]string{home}, rel...)...))
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, unsafe("not a regular file")
	case !ok:
		f.Close()
		return nil, unsafe("no link count")
	case uint64(st.Nlink) != 1:
		f.Close()
		return nil, unsafe("a hard link (" + strconv.FormatUint(uint64(st.Nlink), 10) + " links)")
	}
	return &openedFile{f: f, rel: append([]string(nil), rel...), key: fileKey{uint64(st.Dev), uint64(st.Ino)},
		size: fi.Size(), mtime: fi.ModTime()}, nil
}

// claudeProjectDirs returns the project directories to look in for a
// session, best first: the slug of the physical cwd, the slug of the cwd as
// given, then every other project directory (a session resumed from another
// cwd stays in its first project directory, real-clis.md §1.4).
func claudeProjectDirs(home, cwd string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	if cwd != "" {
		if p, err := filepath.EvalSymlinks(cwd); err == nil {
			add(ClaudeSlug(p))
		}
		add(ClaudeSlug(filepath.Clean(cwd)))
	}
	if ents, err := os.ReadDir(filepath.Join(home, ".claude", "projects")); err == nil {
		for _, e := range ents {
			add(e.Name())
		}
	}
	return out
}

// locateClaude opens the session's transcript.
func locateClaude(home, cwd, sid string, hint []string) (*openedFile, error) {
	file := sid + ".jsonl"
	if len(hint) == 4 && hint[3] == file {
		if of, err := openInHome(home, hint...); err != errNotFound {
			return of, err
		}
	}
	for _, slug := range claudeProjectDirs(home, cwd) {
		of, err := openInHome(home, ".claude", "projects", slug, file)
		if err != errNotFound {
			return of, err
		}
	}
	return nil, errNotFound
}

// codexDays returns the sessions/YYYY/MM/DD folders where a rollout of a
// UUIDv7 thread id lives: the id's creation day and its neighbours (the
// folder uses the host's local clock). ok is false for other ids.
func codexDays(id string) (days [][3]string, ok bool) {
	raw, err := hex.DecodeString(strings.ReplaceAll(id, "-", ""))
	if err != nil || len(raw) != 16 || raw[6]>>4 != 7 {
		return nil, false
	}
	var ms int64
	for _, b := range raw[:6] {
		ms = ms<<8 | int64(b)
	}
	t := time.UnixMilli(ms)
	for _, d := range []time.Duration{0, -24 * time.Hour, 24 * time.Hour} {
		u := t.Add(d).UTC()
		days = append(days, [3]string{u.Format("2006"), u.Format("01"), u.Format("02")})
	}
	return days, true
}

// rolloutIn returns the name of id's rollout in dir, if any.
func rolloutIn(dir, id string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	suffix := "-" + strings.ToLower(id) + ".jsonl"
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, "rollout-") && strings.HasSuffix(strings.ToLower(n), suffix) {
			return n
		}
	}
	return ""
}

// locateCodex opens the thread's rollout: sessions/YYYY/MM/DD/rollout-*-<id>.jsonl,
// or archived_sessions/rollout-*-<id>.jsonl once archived (real-clis.md §2.3).
func locateCodex(home, id string, hint []string) (*openedFile, error) {
	if len(hint) > 0 {
		if of, err := openInHome(home, hint...); err != errNotFound {
			return of, err
		}
	}
	root := filepath.Join(home, ".codex")
	try := func(rel ...string) (*openedFile, error) {
		name := rolloutIn(filepath.Join(append([]string{root}, rel...)...), id)
		if name == "" {
			return nil, errNotFound
		}
		return openInHome(home, append(append([]string{".codex"}, rel...), name)...)
	}
	days, v7 := codexDays(id)
	for _, d := range days {
		if of, err := try("sessions", d[0], d[1], d[2]); err != errNotFound {
			return of, err
		}
	}
	if of, err := try("archived_sessions"); err != errNotFound {
		return of, err
	}
	if v7 {
		return nil, errNotFound
	}
	// Not a UUIDv7: walk every day folder.
	years, _ := os.ReadDir(filepath.Join(root, "sessions"))
	for _, y := range years {
		months, _ := os.ReadDir(filepath.Join(root, "sessions", y.Name()))
		for _, m := range months {
			ds, _ := os.ReadDir(filepath.Join(root, "sessions", y.Name(), m.Name()))
			for _, d := range ds {
				if of, err := try("sessions", y.Name(), m.Name(), d.Name()); err != errNotFound {
					return of, err
				}
			}
		}
	}
	return nil, errNotFound
}

// checkSource validates the parts of src that become paths.
func checkSource(src Source) error {
	switch src.Tool {
	case ToolClaude, ToolCodex:
	default:
		return errf(ErrUnsupportedTool, "tool %q has no transcript reader: activity and messages exist for Claude Code and Codex runs only", src.Tool)
	}
	if src.Home == "" {
		return errf(ErrInvalidSource, "transcript source without a profile home")
	}
	if src.ConversationID != "" && !isUUID(src.ConversationID) {
		return errf(ErrInvalidSource, "conversation id %q is not a UUID", src.ConversationID)
	}
	return nil
}
