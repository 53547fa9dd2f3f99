//go:build linux

package supervisor_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/claudeconv"
	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/agent/taint"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// tree is every file under dir with its sha256, and every link target.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "link:" + l
		case d.Type().IsRegular():
			b, _ := os.ReadFile(p)
			sum := sha256.Sum256(b)
			out[rel] = hex.EncodeToString(sum[:])
		}
		return nil
	})
	return out
}

func sameTree(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestMove: R-MOVE-1..15 on the agent, with the fakecli Claude Code peer.
func TestMove(t *testing.T) {
	e := procEnv(t, sessions.NewProcRunner())
	for _, p := range []struct{ ref, tool string }{{"prof_mvsrc", "claude"}, {"prof_mvdst", "claude"}, {"prof_mvcdx", "codex"}} {
		if _, err := e.reg.CreateProfile(registry.ProfileParams{Ref: p.ref, Tenant: tenant, Tool: p.tool, Name: p.ref,
			Home: filepath.Join(e.dir, "home-"+p.ref)}); err != nil {
			t.Fatal(err)
		}
	}
	src, dst := filepath.Join(e.dir, "home-prof_mvsrc"), filepath.Join(e.dir, "home-prof_mvdst")
	e.launch("run_move1", "prof_mvsrc")
	e.awaitState("run_move1", apitypes.StateIdle)
	if err := e.sup.Input(context.Background(), "run_move1", claudeMessage("hello")); err != nil {
		t.Fatal(err)
	}
	r := e.await2("a conversation", func(r apitypes.Run) bool { return r.ConversationID != "" && r.State == apitypes.StateIdle }, "run_move1")
	conv := r.ConversationID

	_, err := e.sup.Move(context.Background(), "run_move1", "prof_mvdst")
	wantErr(t, "move of a live run", err, supervisor.ErrRunNotStopped)
	if _, err := e.sup.Stop(context.Background(), "run_move1", 0); err != nil {
		t.Fatal(err)
	}
	// A sub-agent file goes with the transcript.
	transcripts, _ := filepath.Glob(filepath.Join(src, ".claude", "projects", "*", conv+".jsonl"))
	if len(transcripts) != 1 {
		t.Fatalf("transcripts of %s: %v", conv, transcripts)
	}
	slugDir := filepath.Dir(transcripts[0])
	sub := filepath.Join(slugDir, conv, "subagents", "agent-a1.jsonl")
	os.MkdirAll(filepath.Dir(sub), 0o700)
	os.WriteFile(sub, []byte(`{"type":"user"}`+"\n"), 0o600)
	// Things that must never be carried: a login, a setting, another
	// conversation.
	os.WriteFile(filepath.Join(src, ".claude", ".credentials.json"), []byte(`{"token":"x"}`), 0o600)
	os.WriteFile(filepath.Join(src, ".claude", "settings.json"), []byte(`{}`), 0o600)
	os.WriteFile(filepath.Join(slugDir, "11111111-2222-4333-8444-555555555555.jsonl"), []byte("{}\n"), 0o600)
	before := tree(t, src)

	_, err = e.sup.Move(context.Background(), "run_move1", "prof_mvcdx")
	wantErr(t, "move to a profile of another tool", err, supervisor.ErrProfileOtherTool)
	_, err = e.sup.Move(context.Background(), "run_move1", "prof_nope")
	wantErr(t, "move to an unknown profile", err, registry.ErrNotFound)

	// A symbolic link, then a second name of a file: 422 and nothing left
	// on the target (R-MOVE-12, R-MOVE-13).
	link := filepath.Join(slugDir, conv, "subagents", "link.jsonl")
	os.Symlink("/etc/hostname", link)
	_, err = e.sup.Move(context.Background(), "run_move1", "prof_mvdst")
	wantErr(t, "move of a conversation with a link", err, claudeconv.ErrLink)
	os.Remove(link)
	hard := filepath.Join(e.dir, "hardlink")
	os.Link(sub, hard)
	_, err = e.sup.Move(context.Background(), "run_move1", "prof_mvdst")
	wantErr(t, "move of a conversation with a hard link", err, claudeconv.ErrHardLink)
	os.Remove(hard)
	if got := tree(t, dst); len(got) != 0 {
		t.Fatalf("a refused move left files in the target: %v", got)
	}
	if !sameTree(tree(t, src), before) {
		t.Fatal("a refused move changed the source home")
	}

	// The move (R-MOVE-4..7): same ref and conversation, moved event,
	// the files carried, the source home only read.
	moved, err := e.sup.Move(context.Background(), "run_move1", "prof_mvdst")
	if err != nil {
		t.Fatal(err)
	}
	if moved.ProviderProfileRef != "prof_mvdst" || moved.ConversationID != conv || moved.RunRef != "run_move1" || moved.State != apitypes.StateStopped {
		t.Fatalf("moved: %+v", moved)
	}
	if !sameTree(tree(t, src), before) {
		t.Fatal("the move changed the source home")
	}
	got := tree(t, filepath.Join(dst, ".claude", "projects"))
	rel, _ := filepath.Rel(filepath.Join(src, ".claude", "projects"), transcripts[0])
	relSub, _ := filepath.Rel(filepath.Join(src, ".claude", "projects"), sub)
	if len(got) != 2 || got[rel] != before[filepath.Join(".claude", "projects", rel)] || got[relSub] == "" {
		t.Fatalf("target holds %v, want exactly the transcript and its sub-agent file", got)
	}
	if _, err := os.Stat(filepath.Join(dst, ".claude", ".credentials.json")); err == nil {
		t.Fatal("a login was carried")
	}
	ev := last(e.events("run_move1"))
	if d := detail(t, ev); ev.Kind != "moved" || d["from"] != "prof_mvsrc" || d["to"] != "prof_mvdst" || d["files"] != float64(2) {
		t.Fatalf("moved event: %s %v", ev.Kind, d)
	}
	if strays, _ := filepath.Glob(filepath.Join(dst, ".claude", ".olivares-*")); len(strays) != 0 {
		t.Fatalf("staging left behind: %v", strays)
	}
	// Moving to the profile it is on changes nothing.
	n := len(e.events("run_move1"))
	if _, err := e.sup.Move(context.Background(), "run_move1", "prof_mvdst"); err != nil || len(e.events("run_move1")) != n {
		t.Fatalf("move to its own profile: %v, %d events (was %d)", err, len(e.events("run_move1")), n)
	}

	// Resume runs under the target (R-MOVE-10) and appends there.
	res, err := e.sup.Resume(t.Context(), "run_move1", nil, "")
	if err != nil || res.Generation != 2 || res.ConversationID != conv {
		t.Fatalf("resume after the move: %+v, %v", res, err)
	}
	if err := e.sup.Input(context.Background(), "run_move1", claudeMessage("again")); err != nil {
		t.Fatal(err)
	}
	e.await2("the turn", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle }, "run_move1")
	if _, err := e.sup.Stop(context.Background(), "run_move1", 0); err != nil {
		t.Fatal(err)
	}
	if !sameTree(tree(t, src), before) {
		t.Fatal("the resume under the target wrote into the source home")
	}
	// Moving back replaces the copy the first move read on its way out
	// (R-MOVE-8) ...
	if _, err := e.sup.Move(context.Background(), "run_move1", "prof_mvsrc"); err != nil {
		t.Fatalf("move back: %v", err)
	}
	// ... but a version of the conversation no move left is not replaced
	// (R-MOVE-11e).
	dstTranscript := filepath.Join(dst, ".claude", "projects", rel)
	os.WriteFile(dstTranscript, []byte(`{"type":"user","edited":true}`+"\n"), 0o600)
	beforeDst := tree(t, dst)
	_, err = e.sup.Move(context.Background(), "run_move1", "prof_mvdst")
	wantErr(t, "move onto a different version", err, claudeconv.ErrTargetDiffers)
	if !sameTree(tree(t, dst), beforeDst) {
		t.Fatal("a refused move changed the target home")
	}
}

// TestMoveRefusals: a Codex run is 422 (R-MOVE-12); a tainted run is 409
// (R-MOVE-11b); a run without a conversation moves with nothing to carry
// (R-MOVE-9).
func TestMoveRefusals(t *testing.T) {
	e := procEnv(t, sessions.NewProcRunner())
	for _, p := range []struct{ ref, tool string }{{"prof_mref1", "claude"}, {"prof_mref2", "claude"}, {"prof_mref3", "codex"}} {
		if _, err := e.reg.CreateProfile(registry.ProfileParams{Ref: p.ref, Tenant: tenant, Tool: p.tool, Name: p.ref,
			Home: filepath.Join(e.dir, "home-"+p.ref)}); err != nil {
			t.Fatal(err)
		}
	}
	e.launch("run_mref1", "prof_mref3")
	e.awaitState("run_mref1", apitypes.StateIdle)
	if _, err := e.sup.Stop(context.Background(), "run_mref1", 0); err != nil {
		t.Fatal(err)
	}
	_, err := e.sup.Move(context.Background(), "run_mref1", "prof_mref2")
	wantErr(t, "move of a codex run", err, supervisor.ErrMoveUnsupported)

	if _, err := e.sup.Launch(t.Context(), supervisor.LaunchParams{RunRef: "run_mref2", Tenant: tenant, ProfileRef: "prof_mref1",
		Grants: []supervisor.Grant{{Kind: apitypes.GrantManagedCredential, Env: "TOKEN", Value: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	e.awaitState("run_mref2", apitypes.StateIdle)
	if _, err := e.sup.Stop(context.Background(), "run_mref2", 0); err != nil {
		t.Fatal(err)
	}
	_, err = e.sup.Move(context.Background(), "run_mref2", "prof_mref2")
	wantErr(t, "move of a tainted run", err, taint.ErrTainted)
	if !strings.Contains(err.Error(), "managed_credential") {
		t.Fatalf("the refusal does not name the category: %v", err)
	}

	e.launch("run_mref3", "prof_mref1")
	e.awaitState("run_mref3", apitypes.StateIdle)
	if _, err := e.sup.Stop(context.Background(), "run_mref3", 0); err != nil {
		t.Fatal(err)
	}
	r, err := e.sup.Move(context.Background(), "run_mref3", "prof_mref2")
	if err != nil || r.ProviderProfileRef != "prof_mref2" {
		t.Fatalf("move without a conversation: %+v, %v", r, err)
	}
	if d := detail(t, last(e.events("run_mref3"))); d["files"] != float64(0) {
		t.Fatalf("moved detail: %v", d)
	}
}

func claudeMessage(s string) cliruntime.Input {
	b, _ := json.Marshal(s)
	return cliruntime.Input{Message: b}
}

// await2 waits until cond holds for the run's row and returns it.
func (e *env) await2(what string, cond func(apitypes.Run) bool, ref string) apitypes.Run {
	e.t.Helper()
	var r apitypes.Run
	e.await(ref+" "+what, func() bool {
		r = e.get(ref)
		return cond(r)
	})
	return r
}
