package codexsup

import (
	"fmt"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/codex"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

func written(st cliruntime.Step) string {
	var b strings.Builder
	for _, w := range st.Write {
		b.Write(w)
	}
	return b.String()
}

// TestSupervisedDriver: the supervised run's process is Codex's app-server
// in the supervision home (HOME the node user's, CODEX_HOME the
// supervision one, never a profile home: AT-CX-06); its session is the
// branch while pending, the canonical thread's resume once committed, and
// writes nothing for a run without a binding.
func TestSupervisedDriver(t *testing.T) {
	f := &fakeServer{}
	s, _, _ := newTestService(t, f)
	d := s.Driver()
	if d.Kind() != cliruntime.KindCodex {
		t.Fatalf("kind %s", d.Kind())
	}
	cmd, err := d.Launch(cliruntime.LaunchSpec{Home: "/profiles/prof_codexsupervision", Workdir: "/w", RunRef: "run_x1"})
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Join(cmd.Env, "\n") + "\n"
	if cmd.Path != "/bin/sh" || strings.Join(cmd.Args, " ") != "app-server" || !strings.Contains(env, "CODEX_HOME="+s.cfg.CodexHome+"\n") ||
		strings.Contains(env, "/profiles/") || !strings.Contains(env, "HOME="+s.home+"\n") {
		t.Fatalf("command %s %v env:\n%s", cmd.Path, cmd.Args, env)
	}
	if d.(supervisor.Relauncher).Relaunchable("run_pend") {
		t.Fatal("a run without a binding is relaunchable")
	}
	canon, fork := uuid(2), uuid(3)
	s.store.create(binding{RunRef: "run_pend", Source: uuid(1), State: apitypes.CodexBranchPending,
		History: []apitypes.CodexMessage{{Role: "user", Text: "hi"}}})
	s.store.create(binding{RunRef: "run_comm", Source: uuid(4), State: apitypes.CodexBranchCommitted, Canonical: canon, Fork: fork})
	init := []byte(`{"id":1,"result":{}}`)

	sess := d.NewSession(cliruntime.LaunchSpec{Home: "/h", Workdir: "/w", RunRef: "run_pend"})
	sess.Start()
	st := sess.Observe(init)
	if len(st.Events) != 1 || st.Events[0].Kind != cliruntime.EventReady || strings.Contains(written(st), "thread/start") {
		t.Fatalf("pending: %+v %s", st.Events, written(st))
	}
	st, _ = sess.Encode(cliruntime.Input{Text: "go"})
	if w := written(st); !strings.Contains(w, `"method":"thread/fork","params":{"threadId":"`+uuid(1)+`","excludeTurns":true}`) {
		t.Fatalf("first input of a pending branch wrote %s", w)
	}

	// Committed, but the row never got the thread (the agent died in
	// between): the canonical thread is resumed, and the fork left
	// unarchived is archived once the first turn started.
	tok, _ := s.store.acquire(canon, "run_comm", nil)
	ftok, _ := s.store.acquire(fork, "run_comm", nil)
	s.store.update("run_comm", func(b *binding) error { b.CanonicalToken, b.ForkToken = tok, ftok; return nil })
	if !d.(supervisor.Relauncher).Relaunchable("run_comm") {
		t.Fatal("a committed run without a conversation is not relaunchable")
	}
	sess = d.NewSession(cliruntime.LaunchSpec{Home: "/h", Workdir: "/w", RunRef: "run_comm"})
	sess.Start()
	if w := written(sess.Observe(init)); !strings.Contains(w, `"thread/resume","params":{"threadId":"`+canon+`"`) || strings.Contains(w, "model") {
		t.Fatalf("committed: %s, want thread/resume of the canonical thread without a model", w)
	}
	sess.Observe([]byte(fmt.Sprintf(`{"id":2,"result":{"thread":{"id":%q}}}`, canon)))
	sess.Encode(cliruntime.Input{Text: "again"})
	if w := written(sess.Observe([]byte(`{"id":3,"result":{"turn":{"id":"t1"}}}`))); !strings.Contains(w, `"thread/archive","params":{"threadId":"`+fork+`"}`) {
		t.Fatalf("turn started: %s, want the fork archived", w)
	}
	sess.Observe([]byte(`{"id":4,"result":{}}`))
	if b, _, _ := s.store.binding("run_comm"); !b.ForkArchived || s.store.holder(fork) != "" {
		t.Fatalf("after the fork's archive: %+v, lease holder %q", b, s.store.holder(fork))
	}

	// No binding: nothing may be written.
	sess = d.NewSession(cliruntime.LaunchSpec{Home: "/h", Workdir: "/w", RunRef: "run_none", ConversationID: canon})
	sess.Start()
	st = sess.Observe(init)
	if strings.Contains(written(st), "thread/resume") || len(st.Events) != 1 || st.Events[0].Kind != cliruntime.EventConversationUnavailable {
		t.Fatalf("a run without a binding: %s %+v", written(st), st.Events)
	}
}

// TestCommit: the commit records the canonical thread with its lease
// tokens, and fails closed once supervision cannot serve (R-CX-FT-8).
func TestCommit(t *testing.T) {
	f := &fakeServer{}
	s, _, _ := newTestService(t, f)
	s.store.create(binding{RunRef: "run_c", Source: uuid(1), State: apitypes.CodexBranchPending})
	fc := &runFence{st: s.store, run: "run_c", tokens: map[string]uint64{}}
	fc.Acquire(uuid(2))
	fc.Acquire(uuid(3))
	s.reason = "disabled for the test"
	if err := s.commit("run_c", fc, codexCommit(uuid(2), uuid(3))); err == nil {
		t.Fatal("commit while unavailable succeeded")
	}
	s.reason = ""
	if err := s.commit("run_c", fc, codexCommit(uuid(2), uuid(3))); err != nil {
		t.Fatal(err)
	}
	b, _, _ := s.store.binding("run_c")
	if b.State != apitypes.CodexBranchCommitted || b.Canonical != uuid(2) || b.CanonicalToken == 0 || s.store.check(uuid(2), "run_c", b.CanonicalToken) != nil {
		t.Fatalf("binding %+v", b)
	}
	if err := s.commit("run_c", fc, codexCommit(uuid(2), uuid(3))); err == nil {
		t.Fatal("a second commit succeeded (binding race)")
	}
}

func codexCommit(canon, fork string) codex.BranchCommit {
	return codex.BranchCommit{Canonical: canon, Fork: fork, Model: "m", ModelProvider: "p"}
}
