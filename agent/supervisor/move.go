package supervisor

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// bucketMoves: "<profile ref>\x00<conversation id>" → the manifest
// (relative path → sha256) of the copy of a conversation a move left in
// that profile's home: the one it copied in, and the one it read on its way
// out. A later move into that home tells such a copy (replaced, R-MOVE-8)
// from a different version of the conversation (409, R-MOVE-11e).
var bucketMoves = []byte("moves")

// moveFile is one file of a conversation being carried.
type moveFile struct {
	rel    string // relative to <home>/.claude/projects
	size   int64
	mtime  time.Time
	sha256 string
}

// Move re-attaches a stopped or failed Claude Code run to another profile
// of the same tool on this node (R-MOVE-1..15): it copies that one
// conversation (the transcript, its sub-agent and tool-result files) into
// the target home, never a login, a setting or another conversation, and
// re-links the run and its ledger in one transaction. Nothing starts. The
// source home is only read; a refusal writes nothing and removes whatever
// the move created.
func (s *Supervisor) Move(ref, targetRef string) (apitypes.Run, error) {
	r, err := s.get(ref)
	if err != nil {
		return apitypes.Run{}, err
	}
	r.op.Lock()
	defer r.op.Unlock()
	r.mu.Lock()
	rec, live := r.rec, r.gen != nil
	r.mu.Unlock()
	if rec.Driver != string(cliruntime.KindClaude) {
		// R-MOVE-12, Q-27: only Claude Code sessions move.
		return apitypes.Run{}, errf(http.StatusUnprocessableEntity, "move_unsupported", "only Claude Code runs can be moved; run %s is %s (hand it off instead)", ref, rec.Driver)
	}
	target, ok, err := s.profile(targetRef)
	if err != nil {
		return apitypes.Run{}, err
	}
	if !ok || target.Tenant != rec.Tenant {
		return apitypes.Run{}, notFound("profile", targetRef)
	}
	if target.Ref == rec.ProfileRef {
		// R-MOVE-16: moving to the profile the run is on changes nothing.
		return r.snapshot(), nil
	}
	state := r.snapshot().State
	switch {
	case live || rec.PendingApproval || rec.Released || state != apitypes.StateStopped && state != apitypes.StateFailed:
		return apitypes.Run{}, errf(http.StatusConflict, "run_not_stopped", "run %s is %s; stop it before moving it", ref, state) // R-MOVE-3
	case target.Tool != string(cliruntime.KindClaude):
		return apitypes.Run{}, errf(http.StatusConflict, "profile_other_tool", "profile %s is a %s profile; a Claude Code run moves only to a Claude Code profile", target.Ref, target.Tool)
	}
	if err := taintRefusal(rec, false, SurfaceMove); err != nil {
		return apitypes.Run{}, err
	}
	if err := target.accepts(rec.WorkspaceRef); err != nil {
		return apitypes.Run{}, err
	}
	source, ok, err := s.profile(rec.ProfileRef)
	if err != nil {
		return apitypes.Run{}, err
	}
	if !ok {
		return apitypes.Run{}, errf(http.StatusConflict, "home_not_owned", "the profile %s of run %s is gone", rec.ProfileRef, ref)
	}
	if err := s.ownsHome(source); err != nil {
		return apitypes.Run{}, err
	}
	if err := s.ownsHome(target); err != nil {
		return apitypes.Run{}, err
	}
	if rec.ConversationID != "" {
		if other := s.boundTo(target.Ref, rec.ConversationID, ref); other != "" {
			return apitypes.Run{}, errf(http.StatusConflict, "conversation_bound", "conversation %s is already the conversation of run %s under profile %s", rec.ConversationID, other, target.Ref)
		}
	}

	var files []moveFile
	if rec.ConversationID != "" {
		files, err = conversationFiles(source.Home, rec.ConversationID)
		if err != nil {
			return apitypes.Run{}, err
		}
	}
	// R-MOVE-9: a run without a conversation moves with nothing to carry.
	manifest := map[string]string{}
	var staged string
	if len(files) > 0 {
		if staged, err = s.stageCopy(source.Home, target, rec.ConversationID, files); err != nil {
			return apitypes.Run{}, err
		}
		defer os.RemoveAll(staged)
		for _, f := range files {
			manifest[f.rel] = f.sha256
		}
	}
	installed, err := s.install(target, rec.ConversationID, staged, files)
	if err != nil {
		return apitypes.Run{}, err
	}
	detail, _ := json.Marshal(map[string]any{"from": source.Ref, "to": target.Ref, "files": len(files)})
	err = r.updateTx(ledger.Event{Kind: ledger.KindMoved, Generation: rec.Generation, Detail: detail}, func(rec *record) {
		rec.ProfileRef = target.Ref
		rec.Limit = nil // R-MOVE-14, R-LIM-8
	}, func(tx *bbolt.Tx) error {
		if len(files) == 0 {
			return nil
		}
		if err := putJSON(tx, bucketMoves, source.Ref+"\x00"+rec.ConversationID, manifest); err != nil {
			return err
		}
		return putJSON(tx, bucketMoves, target.Ref+"\x00"+rec.ConversationID, manifest)
	})
	if err != nil {
		installed.undo()
		return apitypes.Run{}, err
	}
	installed.commit()
	return r.snapshot(), nil
}

// ownsHome is R-MOVE-11c: the home must be the profile's own, a real
// directory that no other profile of this node shares.
func (s *Supervisor) ownsHome(p profile) error {
	fi, err := os.Lstat(p.Home)
	if err != nil || !fi.IsDir() {
		return errf(http.StatusConflict, "home_not_owned", "the home %s of profile %s is not a directory: %v", p.Home, p.Ref, errOrNotDir(err))
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return errf(http.StatusConflict, "home_not_owned", "the home %s of profile %s belongs to uid %d, not to this agent", p.Home, p.Ref, st.Uid)
	}
	var shared string
	_ = s.o.DB.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketProfiles).ForEach(func(k, v []byte) error {
			var o profile
			if json.Unmarshal(v, &o) == nil && o.Ref != p.Ref && filepath.Clean(o.Home) == filepath.Clean(p.Home) {
				shared = o.Ref
			}
			return nil
		})
	})
	if shared != "" {
		return errf(http.StatusConflict, "home_not_owned", "the home %s of profile %s is also the home of profile %s", p.Home, p.Ref, shared)
	}
	return nil
}

// boundTo returns another run of profile bound to conversation conv.
func (s *Supervisor) boundTo(profileRef, conv, except string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ref, r := range s.runs {
		if ref == except {
			continue
		}
		r.mu.Lock()
		hit := r.rec.ProfileRef == profileRef && r.rec.ConversationID == conv
		r.mu.Unlock()
		if hit {
			return ref
		}
	}
	return ""
}

func projectsDir(home string) string { return filepath.Join(home, ".claude", "projects") }

// conversationFiles lists the files of one Claude Code conversation under
// home: projects/<slug>/<id>.jsonl and everything under
// projects/<slug>/<id>/ (sub-agents, tool results), with their size, mtime
// and sha256. A link, a second name of a file or a special file is 422
// (R-MOVE-12); the files must lie inside the home (R-MOVE-3).
func conversationFiles(home, conv string) ([]moveFile, error) {
	if !cliruntime.IsUUID(conv) {
		return nil, errf(http.StatusConflict, "conversation_unavailable", "conversation id %q is not a Claude session id", conv)
	}
	root := projectsDir(home)
	matches, _ := filepath.Glob(filepath.Join(root, "*", conv+".jsonl"))
	dirs, _ := filepath.Glob(filepath.Join(root, "*", conv))
	if len(matches) == 0 && len(dirs) == 0 {
		return nil, nil
	}
	var out []moveFile
	add := func(path string) error {
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return errf(http.StatusUnprocessableEntity, "conversation_link", "the conversation holds a symbolic link (%s); it cannot be carried", rel)
		case fi.IsDir():
			return nil
		case !fi.Mode().IsRegular():
			return errf(http.StatusUnprocessableEntity, "conversation_special_file", "the conversation holds a special file (%s); it cannot be carried", rel)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			return errf(http.StatusUnprocessableEntity, "conversation_hard_link", "the conversation file %s has another name (a hard link); it cannot be carried", rel)
		}
		sum, err := fileSHA256(path)
		if err != nil {
			return err
		}
		out = append(out, moveFile{rel: rel, size: fi.Size(), mtime: fi.ModTime(), sha256: sum})
		return nil
	}
	for _, m := range matches {
		if err := add(m); err != nil {
			return nil, err
		}
	}
	for _, d := range dirs {
		if fi, err := os.Lstat(d); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, errf(http.StatusUnprocessableEntity, "conversation_link", "the conversation directory %s is a symbolic link; it cannot be carried", d)
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

// stageCopy copies files into a temporary directory of the target home and
// checks every source file before and after (size, mtime, sha256): a file
// that changed meanwhile is 409, and the client may retry (R-MOVE-11g,
// R-MOVE-15).
func (s *Supervisor) stageCopy(srcHome string, target profile, conv string, files []moveFile) (string, error) {
	if err := os.MkdirAll(projectsDir(target.Home), 0o700); err != nil {
		return "", fmt.Errorf("move: %w", err)
	}
	staged, err := os.MkdirTemp(filepath.Join(target.Home, ".claude"), ".olivares-move-")
	if err != nil {
		return "", fmt.Errorf("move: %w", err)
	}
	fail := func(err error) (string, error) {
		os.RemoveAll(staged)
		return "", err
	}
	root := projectsDir(srcHome)
	for _, f := range files {
		dst := filepath.Join(staged, f.rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return fail(err)
		}
		sum, err := copyFile(filepath.Join(root, f.rel), dst)
		if err != nil {
			return fail(err)
		}
		fi, err := os.Lstat(filepath.Join(root, f.rel))
		if err != nil || sum != f.sha256 || fi.Size() != f.size || !fi.ModTime().Equal(f.mtime) {
			return fail(errf(http.StatusConflict, "conversation_changed", "the conversation file %s changed while it was carried; try the move again", f.rel))
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

// installation is a staged copy moved into place: undo puts the target
// back as it was, commit drops what undo would have needed.
type installation struct {
	moved  []string // installed paths
	backup string   // where replaced files went, "" if none
	prev   []string // paths moved to backup, relative to projects
	home   string
}

func (in *installation) undo() {
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

func (in *installation) commit() {
	if in.backup != "" {
		os.RemoveAll(in.backup)
	}
}

// install renames the staged conversation into the target's projects
// directory. What the target already holds of the same conversation must
// be the copy an earlier move left (replaced, R-MOVE-8) or the same bytes;
// any other version is 409 (R-MOVE-11e), before anything is touched.
func (s *Supervisor) install(target profile, conv, staged string, files []moveFile) (*installation, error) {
	in := &installation{home: target.Home}
	if len(files) == 0 {
		return in, nil
	}
	root := projectsDir(target.Home)
	existing, err := conversationFiles(target.Home, conv)
	if err != nil {
		return nil, errf(http.StatusConflict, "target_conversation_differs", "profile %s holds another version of conversation %s that is not a plain copy: %v", target.Ref, conv, err)
	}
	if len(existing) > 0 {
		var earlier map[string]string
		_ = s.o.DB.View(func(tx *bbolt.Tx) error {
			_, err := getJSON(tx, bucketMoves, target.Ref+"\x00"+conv, &earlier)
			return err
		})
		want := map[string]string{}
		for _, f := range files {
			want[f.rel] = f.sha256
		}
		for _, f := range existing {
			if earlier[f.rel] != f.sha256 && want[f.rel] != f.sha256 {
				return nil, errf(http.StatusConflict, "target_conversation_differs", "profile %s already holds a different version of conversation %s (%s); it was not left by a move", target.Ref, conv, f.rel)
			}
		}
		backup, err := os.MkdirTemp(filepath.Join(target.Home, ".claude"), ".olivares-replaced-")
		if err != nil {
			return nil, err
		}
		in.backup = backup
		for _, top := range topLevel(existing) {
			dst := filepath.Join(backup, top)
			if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
				in.undo()
				return nil, err
			}
			if err := os.Rename(filepath.Join(root, top), dst); err != nil {
				in.undo()
				return nil, err
			}
			in.prev = append(in.prev, top)
		}
	}
	for _, top := range topLevel(files) {
		dst := filepath.Join(root, top)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			in.undo()
			return nil, err
		}
		if err := os.Rename(filepath.Join(staged, top), dst); err != nil {
			in.undo()
			return nil, err
		}
		in.moved = append(in.moved, dst)
	}
	return in, nil
}

// topLevel returns the distinct <slug>/<id>.jsonl and <slug>/<id> entries
// of files.
func topLevel(files []moveFile) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range files {
		parts := strings.SplitN(filepath.ToSlash(f.rel), "/", 3)
		top := parts[0] + "/" + parts[1]
		if !seen[top] {
			seen[top] = true
			out = append(out, filepath.FromSlash(top))
		}
	}
	return out
}
