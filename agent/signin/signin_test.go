package signin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/claude"
	"github.com/olivares-dev/olivares/agent/drivers/codex"
	"github.com/olivares-dev/olivares/agent/drivers/gemini"
	"github.com/olivares-dev/olivares/agent/isolation"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/integration/peers/peerbin"
	"github.com/olivares-dev/olivares/integration/realcli"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The sign-ins run real child processes: the pinned vendor CLIs as far as
// they go offline (their sign-in starts and prints its URL, or fails to
// reach its service), and the fakecli peer for the rest, because no real
// sign-in server runs here: the peer prints what the real one prints and
// takes a code (Claude Code) or a device approval (Codex).

func TestMain(m *testing.M) {
	code := m.Run()
	peerbin.Remove()
	os.Exit(code)
}

const wait = 30 * time.Second

// kept records what KeepToken was given.
type kept struct {
	mu              sync.Mutex
	ref, key, value string
}

func (k *kept) keep(ref, tenant, key, value string) (apitypes.Profile, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ref, k.key, k.value = ref, key, value
	return apitypes.Profile{Ref: ref, Tenant: tenant, EnvKeys: []string{key}}, nil
}

func newManager(t *testing.T, timeout time.Duration) (*Manager, *kept) {
	t.Helper()
	pty, err := sessions.NewPTYRunner()
	if err != nil {
		t.Skipf("no PTY here: %v", err)
	}
	k := &kept{}
	m, err := New(Options{Proc: sessions.NewProcRunner(), PTY: pty, Timeout: timeout, KeepToken: k.keep,
		Drivers: map[string]cliruntime.Driver{"claude": claude.New(), "codex": codex.New(), "gemini": gemini.New()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, k
}

// profile is a profile of tool whose children find their binary in bin.
func profile(t *testing.T, ref, tool, bin string) Profile {
	t.Helper()
	home := realcli.HomeDir(t)
	for _, d := range []string{".claude", ".codex"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return Profile{Ref: ref, Tenant: "t1", Tool: tool,
		Spec: cliruntime.LaunchSpec{Home: home, Env: []string{"PATH=" + bin + ":" + cliruntime.DefaultPath}}}
}

// await polls the attempt until ok or the deadline.
func await(t *testing.T, m *Manager, id, what string, ok func(apitypes.SigninAttempt) bool) apitypes.SigninAttempt {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(wait)
	for {
		a, err := m.Get(id, "t1")
		if err != nil {
			t.Fatal(err)
		}
		if ok(a) {
			return a
		}
		select {
		case <-deadline:
			t.Fatalf("%s: the attempt is still %+v after %s", what, a, wait)
		case <-tick.C:
		}
	}
}

func state(s string) func(apitypes.SigninAttempt) bool {
	return func(a apitypes.SigninAttempt) bool { return a.State == s }
}

// R-ACCT-2, R-ACCT-3, R-ACCT-6: Claude Code's setup-token (the peer) shows
// its URL, takes the pasted code, and the token it prints is handed to
// KeepToken for the profile's environment, never shown in the attempt.
func TestClaudeSetupTokenSignsIn(t *testing.T) {
	m, k := newManager(t, time.Minute)
	p := profile(t, "prof_c", "claude", peerbin.Dir(t))
	if _, err := m.Start("signin_1", p); err != nil {
		t.Fatal(err)
	}
	a := await(t, m, "signin_1", "waiting_for_code", state(apitypes.SigninWaitingForCode))
	if !strings.HasPrefix(a.URL, "https://claude.com/cai/oauth/authorize?") || !strings.HasSuffix(a.URL, "state=fakecli") {
		t.Fatalf("url %q, want the whole OAuth URL setup-token printed", a.URL)
	}
	if _, err := m.Code("signin_1", "t1", "bad\ncode"); !errors.Is(err, ErrBadCode) {
		t.Fatalf("a code of two lines: %v, want ErrBadCode", err)
	}
	if _, err := m.Code("signin_1", "t1", "ok-pasted#fakecli"); err != nil {
		t.Fatal(err)
	}
	a = await(t, m, "signin_1", "signed_in", func(a apitypes.SigninAttempt) bool { return a.Done() })
	token, err := os.ReadFile(filepath.Join(p.Spec.Home, ".fakecli", "setup-token"))
	if err != nil {
		t.Fatal(err)
	}
	if a.State != apitypes.SigninSignedIn || k.ref != "prof_c" || k.key != TokenEnv || k.value != string(token) {
		t.Fatalf("attempt %+v, kept %s=%q for %s; want signed_in and the printed token kept as %s", a, k.key, k.value, k.ref, TokenEnv)
	}
	b, _ := json.Marshal(a)
	if strings.Contains(string(b), string(token)) || a.Profile == nil || a.Profile.EnvKeys[0] != TokenEnv {
		t.Fatalf("the attempt %s shows the token or not the profile's env_keys", b)
	}
	if _, err := m.Code("signin_1", "t1", "ok-again"); !errors.Is(err, ErrNotWaiting) {
		t.Fatalf("a code after the end: %v, want ErrNotWaiting", err)
	}
}

// R-ACCT-2: a code the service refuses fails the attempt with Claude
// Code's own words, and its process is gone.
func TestClaudeSetupTokenRefusedCode(t *testing.T) {
	m, k := newManager(t, time.Minute)
	p := profile(t, "prof_c", "claude", peerbin.Dir(t))
	if _, err := m.Start("signin_1", p); err != nil {
		t.Fatal(err)
	}
	await(t, m, "signin_1", "waiting_for_code", state(apitypes.SigninWaitingForCode))
	// R-ACCT-3: the code is in no message, even where the tool's words
	// hold it (the peer's refusal ends "...the full code was copied").
	if _, err := m.Code("signin_1", "t1", "copied"); err != nil {
		t.Fatal(err)
	}
	a := await(t, m, "signin_1", "failed", func(a apitypes.SigninAttempt) bool { return a.Done() })
	if a.State != apitypes.SigninFailed || !strings.Contains(a.Message, "OAuth error: Invalid code") || k.value != "" ||
		strings.Contains(a.Message, "copied") || !strings.Contains(a.Message, "[the code]") {
		t.Fatalf("attempt %+v, kept %q; want failed with the OAuth error, without the code, and nothing kept", a, k.value)
	}
	awaitGone(t, m, "signin_1")
}

// awaitGone waits until the attempt's process was reaped (R-ACCT-4).
func awaitGone(t *testing.T, m *Manager, id string) {
	t.Helper()
	a, _ := m.get(id, "t1")
	a.mu.Lock()
	p := a.proc
	a.mu.Unlock()
	select {
	case <-p.Done():
	case <-time.After(wait):
		t.Fatalf("attempt %s: its process %d still runs", id, p.Pid())
	}
}

// R-ACCT-2: Codex's device-code sign-in (the peer) relays the URL and the
// code; the approval in a browser completes it, and account/read says as
// whom. A denied device fails it with Codex's words.
func TestCodexDeviceCode(t *testing.T) {
	m, _ := newManager(t, time.Minute)
	p := profile(t, "prof_x", "codex", peerbin.Dir(t))
	if _, err := m.Start("signin_1", p); err != nil {
		t.Fatal(err)
	}
	a := await(t, m, "signin_1", "waiting_for_browser", state(apitypes.SigninWaitingForBrowser))
	if a.URL != "https://auth.openai.com/codex/device" || a.UserCode != "FAKE-1234" {
		t.Fatalf("attempt %+v, want the verification URL and the user code", a)
	}
	if _, err := m.Code("signin_1", "t1", "FAKE-1234"); !errors.Is(err, ErrNotWaiting) {
		t.Fatalf("a code for a device sign-in: %v, want ErrNotWaiting", err)
	}
	if err := os.WriteFile(filepath.Join(p.Spec.Home, ".codex", "fakecli-approve"), []byte("ok"), 0o600); err != nil {
		t.Fatal(err)
	}
	a = await(t, m, "signin_1", "signed_in", func(a apitypes.SigninAttempt) bool { return a.Done() })
	if a.State != apitypes.SigninSignedIn || a.Account == nil || a.Account.Email != "ada@example.com" || a.Account.Plan != "plus" || a.URL != "" {
		t.Fatalf("attempt %+v, want signed_in as ada@example.com on plus", a)
	}
	awaitGone(t, m, "signin_1")

	os.Remove(filepath.Join(p.Spec.Home, ".codex", "auth.json"))
	os.Remove(filepath.Join(p.Spec.Home, ".codex", "fakecli-approve"))
	if _, err := m.Start("signin_2", p); err != nil {
		t.Fatal(err)
	}
	await(t, m, "signin_2", "waiting_for_browser", state(apitypes.SigninWaitingForBrowser))
	if err := os.WriteFile(filepath.Join(p.Spec.Home, ".codex", "fakecli-approve"), []byte("deny"), 0o600); err != nil {
		t.Fatal(err)
	}
	a = await(t, m, "signin_2", "failed", func(a apitypes.SigninAttempt) bool { return a.Done() })
	if a.State != apitypes.SigninFailed || !strings.Contains(a.Message, "device authorization was denied") {
		t.Fatalf("attempt %+v, want failed with Codex's words", a)
	}
}

// R-ACCT-1, R-ACCT-4: one attempt per profile; a cancel kills its process
// and frees the profile; another tenant does not see it.
func TestOneAttemptPerProfileAndCancel(t *testing.T) {
	m, _ := newManager(t, time.Minute)
	p := profile(t, "prof_c", "claude", peerbin.Dir(t))
	if _, err := m.Start("signin_1", p); err != nil {
		t.Fatal(err)
	}
	await(t, m, "signin_1", "waiting_for_code", state(apitypes.SigninWaitingForCode))
	if _, err := m.Start("signin_2", p); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "signin_1") {
		t.Fatalf("a second attempt: %v, want ErrBusy naming the first", err)
	}
	if _, err := m.Get("signin_1", "t2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another tenant's read: %v, want ErrNotFound", err)
	}
	a, err := m.Cancel("signin_1", "t1")
	if err != nil || a.State != apitypes.SigninFailed || a.Message != "cancelled" || a.URL != "" {
		t.Fatalf("cancel: %+v %v, want failed, cancelled, no URL", a, err)
	}
	awaitGone(t, m, "signin_1")
	if _, err := m.Start("signin_3", p); err != nil {
		t.Fatalf("an attempt after the cancel: %v", err)
	}
}

// R-ACCT-4: an attempt nobody finishes expires and its process is killed;
// Close kills a live one.
func TestExpiryAndClose(t *testing.T) {
	m, _ := newManager(t, 500*time.Millisecond)
	p := profile(t, "prof_c", "claude", peerbin.Dir(t))
	if _, err := m.Start("signin_1", p); err != nil {
		t.Fatal(err)
	}
	a := await(t, m, "signin_1", "expired", func(a apitypes.SigninAttempt) bool { return a.Done() })
	if a.State != apitypes.SigninExpired {
		t.Fatalf("attempt %+v, want expired", a)
	}
	awaitGone(t, m, "signin_1")

	m2, _ := newManager(t, time.Minute)
	if _, err := m2.Start("signin_2", p); err != nil {
		t.Fatal(err)
	}
	await(t, m2, "signin_2", "waiting_for_code", state(apitypes.SigninWaitingForCode))
	m2.Close()
	a, _ = m2.Get("signin_2", "t1")
	if a.State != apitypes.SigninFailed || a.Message != MsgAgentStopped {
		t.Fatalf("after Close: %+v, want failed, %q", a, MsgAgentStopped)
	}
	awaitGone(t, m2, "signin_2")
	if _, err := m2.Start("signin_3", p); !errors.Is(err, ErrBusy) {
		t.Fatalf("a start after Close: %v, want refused", err)
	}
}

// R-ACCT-1: a tool without a sign-in to relay is refused with the API-key
// way in the sentence.
func TestUnsupportedTool(t *testing.T) {
	m, _ := newManager(t, time.Minute)
	_, err := m.Start("signin_1", profile(t, "prof_g", "gemini", peerbin.Dir(t)))
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "API key") {
		t.Fatalf("gemini: %v, want ErrUnsupported saying to use an API key", err)
	}
}

// R-ACCT-2 with the real pinned CLIs, offline: claude setup-token prints
// its sign-in URL on a terminal and takes a code, which it cannot check
// without its service (it says so); codex's device-code start fails to
// reach its service, and the attempt says what Codex said.
func TestRealSignin(t *testing.T) {
	bin := realcli.BinDir(t, "claude", "codex")
	t.Run("claude", func(t *testing.T) {
		m, k := newManager(t, time.Minute)
		p := profile(t, "prof_c", "claude", bin)
		if _, err := m.Start("signin_1", p); err != nil {
			t.Fatal(err)
		}
		a := await(t, m, "signin_1", "waiting_for_code", func(a apitypes.SigninAttempt) bool {
			return a.State == apitypes.SigninWaitingForCode || a.Done()
		})
		if a.State != apitypes.SigninWaitingForCode || !strings.HasPrefix(a.URL, "https://claude.com/cai/oauth/authorize?code=true&client_id=") {
			t.Fatalf("attempt %+v, want waiting_for_code with Claude's OAuth URL", a)
		}
		if _, err := m.Code("signin_1", "t1", "not-a-real-code#x"); err != nil {
			t.Fatal(err)
		}
		a = await(t, m, "signin_1", "failed", func(a apitypes.SigninAttempt) bool { return a.Done() })
		if a.State != apitypes.SigninFailed || !strings.Contains(a.Message, "OAuth error") || k.value != "" {
			t.Fatalf("attempt %+v, want failed with Claude Code's OAuth error offline", a)
		}
		awaitGone(t, m, "signin_1")
	})
	t.Run("codex", func(t *testing.T) {
		m, _ := newManager(t, time.Minute)
		p := profile(t, "prof_x", "codex", bin)
		if _, err := m.Start("signin_1", p); err != nil {
			t.Fatal(err)
		}
		a := await(t, m, "signin_1", "failed", func(a apitypes.SigninAttempt) bool { return a.Done() })
		if a.State != apitypes.SigninFailed || !strings.Contains(a.Message, "failed to request device code") {
			t.Fatalf("attempt %+v, want failed with Codex's words", a)
		}
		awaitGone(t, m, "signin_1")
	})
}

// R-ACCT-9: whether the account is signed in, as the node can tell:
// Claude Code from its token variable (setup-token's) or nothing; Codex
// from its own account/read (the peer's, before and after a sign-in).
func TestAccount(t *testing.T) {
	m, _ := newManager(t, time.Minute)
	c := profile(t, "prof_c", "claude", peerbin.Dir(t))
	a, err := m.Account(c)
	if err != nil || a.SignedIn == nil || *a.SignedIn {
		t.Fatalf("claude without a sign-in: %+v %v, want signed_in false", a, err)
	}
	c.Spec.Env = append(c.Spec.Env, TokenEnv+"=sk-ant-oat01-secret")
	a, err = m.Account(c)
	if b, _ := json.Marshal(a); err != nil || a.SignedIn == nil || !*a.SignedIn || a.Method != "token" || strings.Contains(string(b), "secret") {
		t.Fatalf("claude with a token: %s %v, want signed in by token, the value not shown", b, err)
	}
	x := profile(t, "prof_x", "codex", peerbin.Dir(t))
	a, err = m.Account(x)
	if err != nil || a.SignedIn == nil || *a.SignedIn {
		t.Fatalf("codex without a sign-in: %+v %v, want signed_in false", a, err)
	}
	if err := os.WriteFile(filepath.Join(x.Spec.Home, ".codex", "auth.json"), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err = m.Account(x)
	if err != nil || a.SignedIn == nil || !*a.SignedIn || a.Email != "ada@example.com" || a.Plan != "plus" {
		t.Fatalf("codex signed in: %+v %v, want ada@example.com on plus", a, err)
	}
	g, err := m.Account(profile(t, "prof_g", "gemini", peerbin.Dir(t)))
	if err != nil || g.SignedIn != nil || !strings.Contains(g.Message, "API key") {
		t.Fatalf("gemini: %+v %v, want unknown, saying to give it an API key", g, err)
	}
}

// R-ACCT-1: a sign-in runs in its profile's isolation, as its runs do: a
// sandbox profile's setup-token (the peer) starts under bubblewrap, seeing
// its home, and is relayed the same.
func TestSigninInTheProfilesSandbox(t *testing.T) {
	sb, err := isolation.DetectSandbox(context.Background())
	if err != nil {
		if os.Getenv("OLIVARES_SANDBOX") == "1" {
			t.Fatalf("sandbox unavailable: %v", err)
		}
		t.Skipf("sandbox unavailable (set OLIVARES_SANDBOX=1 to fail instead): %v", err)
	}
	m, k := newManager(t, time.Minute)
	p := profile(t, "prof_c", "claude", peerbin.Dir(t))
	p.Contain = func(rn sessions.Runner) sessions.Runner {
		return sb.Runner(rn, isolation.Boundary{Writable: []string{p.Spec.Home}})
	}
	if _, err := m.Start("signin_1", p); err != nil {
		t.Fatal(err)
	}
	await(t, m, "signin_1", "waiting_for_code", state(apitypes.SigninWaitingForCode))
	a, _ := m.get("signin_1", "t1")
	a.mu.Lock()
	pid := a.proc.Pid()
	a.mu.Unlock()
	if cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); !strings.Contains(string(cmd), "bwrap") {
		t.Fatalf("the sign-in's process %d is %q, want it under bubblewrap", pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
	}
	if _, err := m.Code("signin_1", "t1", "ok-sandboxed"); err != nil {
		t.Fatal(err)
	}
	if got := await(t, m, "signin_1", "signed_in", func(a apitypes.SigninAttempt) bool { return a.Done() }); got.State != apitypes.SigninSignedIn || k.value == "" {
		t.Fatalf("attempt %+v, want signed_in with the token kept", got)
	}
}

// R-ACCT-10: attempts outlive the agent. One live when the agent died is
// failed, saying so, at the next start; an ended one is reported until the
// coordinator took it, stays readable, and is dropped after KeepFor.
func TestAttemptsOutliveTheAgent(t *testing.T) {
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "agent.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	pty, err := sessions.NewPTYRunner()
	if err != nil {
		t.Skipf("no PTY here: %v", err)
	}
	ended := make(chan struct{}, 8)
	open := func(now func() time.Time) *Manager {
		t.Helper()
		m, err := New(Options{Proc: sessions.NewProcRunner(), PTY: pty, Timeout: time.Minute, KeepToken: (&kept{}).keep, DB: db, Now: now,
			Drivers: map[string]cliruntime.Driver{"claude": claude.New()}, OnEnd: func() { ended <- struct{}{} }})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	first := open(nil)
	p := profile(t, "prof_c", "claude", peerbin.Dir(t))
	if _, err := first.Start("signin_1", p); err != nil {
		t.Fatal(err)
	}
	await(t, first, "signin_1", "waiting_for_code", state(apitypes.SigninWaitingForCode))
	if got := first.Ended(); len(got) != 0 {
		t.Fatalf("Ended while the attempt waits: %+v, want none", got)
	}

	// The agent is killed (no Close): the next start reads the database.
	second := open(nil)
	a, err := second.Get("signin_1", "t1")
	if err != nil || a.State != apitypes.SigninFailed || a.Message != MsgAgentRestarted || a.URL != "" {
		t.Fatalf("after a restart: %+v %v, want failed, %q, no URL", a, err, MsgAgentRestarted)
	}
	if got := second.Ended(); len(got) != 1 || got[0].ID != "signin_1" {
		t.Fatalf("Ended after the restart: %+v, want signin_1 to report", got)
	}
	first.Close() // ends the first manager's own copy: "the agent stopped" is kept
	third := open(nil)
	if got := third.Ended(); len(got) != 1 || got[0].State != apitypes.SigninFailed || got[0].Message != MsgAgentStopped {
		t.Fatalf("Ended, unreported, after another restart: %+v", got)
	}
	// An unreported end outlives KeepFor: the coordinator has not seen it.
	if got := open(func() time.Time { return time.Now().Add(KeepFor + time.Hour) }).Ended(); len(got) != 1 {
		t.Fatalf("an unreported end after KeepFor: %+v, want it still to report", got)
	}
	third.Reported(ids(third.Ended()))
	if got := third.Ended(); len(got) != 0 {
		t.Fatalf("Ended after Reported: %+v, want none", got)
	}

	// A new attempt's end calls OnEnd, once reported it is not sent again,
	// and it stays readable after a restart, for KeepFor.
	for len(ended) > 0 {
		<-ended
	}
	if _, err := third.Start("signin_2", p); err != nil {
		t.Fatal(err)
	}
	await(t, third, "signin_2", "waiting_for_code", state(apitypes.SigninWaitingForCode))
	if _, err := third.Cancel("signin_2", "t1"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(wait):
		t.Fatal("no OnEnd after the attempt ended")
	}
	third.Reported(ids(third.Ended()))
	third.Close()
	fourth := open(nil)
	if a, err := fourth.Get("signin_2", "t1"); err != nil || a.Message != "cancelled" || len(fourth.Ended()) != 0 {
		t.Fatalf("a reported attempt after a restart: %+v %v, Ended %+v; want it readable and not reported again", a, err, fourth.Ended())
	}
	later := open(func() time.Time { return time.Now().Add(KeepFor + time.Hour) })
	if _, err := later.Get("signin_2", "t1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an attempt ended more than KeepFor ago: %v, want ErrNotFound", err)
	}
}

// ids are the attempts' ids.
func ids(as []apitypes.SigninAttempt) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}
