package journeys

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// A profile's account sign-in through the coordinator, the tunnel and a
// real agent process (R-ACCT-1..7). The agent runs the fakecli peer as
// claude and codex: it prints what claude setup-token and Codex's
// device-code sign-in print (docs/real-clis.md §1.12, §2.2) and, because
// no real sign-in server runs here, takes a code or a device approval. The
// real CLIs' offline part is agent/signin's TestRealSignin.

func signinPath(ref string, rest ...string) string {
	return "/v1/m/sessions/profiles/" + ref + "/signin" + strings.Join(rest, "")
}

// awaitSignin polls GET …/signin/{id} until ok or the deadline.
func (f *fixture) awaitSignin(ref, id, what string, ok func(apitypes.SigninAttempt) bool) apitypes.SigninAttempt {
	f.t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(wait)
	for {
		var a apitypes.SigninAttempt
		f.admin.Must(http.StatusOK, http.MethodGet, signinPath(ref, "/", id), nil, &a)
		if ok(a) {
			return a
		}
		select {
		case <-deadline:
			f.t.Fatalf("%s: sign-in %s is still %+v", what, id, a)
		case <-tick.C:
		}
	}
}

// cliIn is f.cli with in as the command's input.
func (f *fixture) cliStart(in string, args ...string) (*exec.Cmd, *bufio.Scanner, func() (string, int)) {
	f.t.Helper()
	f.cli("whoami") // logs in once
	cmd := exec.Command(filepath.Join(integration.Binaries(f.t), "olivares"), args...)
	cmd.Env = append(os.Environ(), "OLIVARES_CONFIG_DIR="+f.cliDir)
	cmd.Stdin = strings.NewReader(in)
	out, err := cmd.StdoutPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var seen []string
	wait := func() (string, int) {
		for sc.Scan() {
			seen = append(seen, sc.Text())
		}
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return strings.Join(seen, "\n") + "\n" + stderr.String(), code
	}
	return cmd, sc, wait
}

// R-ACCT-1..4, R-ACCT-6: Claude Code's setup-token relayed: who may start
// it, one at a time, cancel, then the CLI reads the pasted code from its
// input and the token ends in the profile's environment on the node, in no
// log line and no audit row.
func TestProfileSigninClaude(t *testing.T) {
	f := setup(t, "yamux", integration.ProcOptions{})
	var p apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles",
		apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "claude", Name: "claude-si", Home: f.env.ProfileHome()}, &p)
	for _, who := range []*integration.Client{f.viewer, f.operator} {
		if got := who.Call(http.MethodPost, signinPath(p.Ref), nil); got.Status != http.StatusForbidden {
			t.Fatalf("a sign-in without workspace administration: %d %s, want 403", got.Status, got.Body)
		}
	}
	if out, code := f.cli("profile", "show", "claude-si"); code != 0 || !strings.Contains(out, "not signed in: ") || !strings.HasSuffix(strings.TrimSpace(out), "; run olivares profile login claude-si") {
		t.Fatalf("olivares profile show before the sign-in: exit %d\n%s", code, out)
	}
	var a apitypes.SigninAttempt
	f.admin.Must(http.StatusAccepted, http.MethodPost, signinPath(p.Ref), nil, &a)
	a = f.awaitSignin(p.Ref, a.ID, "waiting_for_code", func(a apitypes.SigninAttempt) bool { return a.State == apitypes.SigninWaitingForCode })
	if !strings.HasPrefix(a.URL, "https://claude.com/cai/oauth/authorize?") {
		t.Fatalf("attempt %+v, want Claude Code's sign-in URL", a)
	}
	if got := f.admin.Call(http.MethodPost, signinPath(p.Ref), nil); got.Status != http.StatusConflict || got.ErrorCode() != "signin_in_progress" {
		t.Fatalf("a second sign-in: %d %s, want 409 signin_in_progress", got.Status, got.Body)
	}
	if got := f.admin.Call(http.MethodGet, signinPath("prof_other", "/", a.ID), nil); got.Status != http.StatusNotFound {
		t.Fatalf("the attempt under an unknown profile: %d %s, want 404", got.Status, got.Body)
	}
	var other apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles",
		apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "claude", Name: "claude-other", Home: f.env.ProfileHome()}, &other)
	if got := f.admin.Call(http.MethodGet, signinPath(other.Ref, "/", a.ID), nil); got.Status != http.StatusNotFound || got.ErrorCode() != "signin_not_found" {
		t.Fatalf("the attempt under another profile: %d %s, want 404 signin_not_found", got.Status, got.Body)
	}
	f.admin.Must(http.StatusOK, http.MethodDelete, signinPath(p.Ref, "/", a.ID), nil, &a)
	if a.State != apitypes.SigninFailed || a.Message != "cancelled" {
		t.Fatalf("cancelled: %+v", a)
	}
	if got := f.admin.Call(http.MethodPost, signinPath(p.Ref, "/", a.ID, "/code"), apitypes.SigninCode{Code: "ok-late"}); got.Status != http.StatusConflict || got.ErrorCode() != "signin_not_waiting" {
		t.Fatalf("a code for a cancelled attempt: %d %s, want 409 signin_not_waiting", got.Status, got.Body)
	}

	// R-ACCT-5: the CLI prints the URL, reads the code, follows to the end.
	_, _, done := f.cliStart("ok-pasted#fakecli\n", "profile", "login", "claude-si")
	out, code := done()
	if code != 0 || !strings.Contains(out, "https://claude.com/cai/oauth/authorize?") || !strings.Contains(out, "Paste the code") ||
		!strings.Contains(out, "profile claude-si is signed in") {
		t.Fatalf("olivares profile login: exit %d\n%s", code, out)
	}
	token, err := os.ReadFile(filepath.Join(p.Home, ".fakecli", "setup-token"))
	if err != nil {
		t.Fatal(err)
	}
	f.env.NoteSecret(string(token))
	var acct apitypes.ProfileAccount
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/profiles/"+p.Ref+"/account", nil, &acct)
	if acct.SignedIn == nil || !*acct.SignedIn || acct.Method != "token" {
		t.Fatalf("account %+v, want signed in by the token (R-ACCT-9)", acct)
	}
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/profiles/"+p.Ref, nil, &p)
	if !slices.Contains(p.EnvKeys, "CLAUDE_CODE_OAUTH_TOKEN") {
		t.Fatalf("profile env_keys %v, want CLAUDE_CODE_OAUTH_TOKEN (the token kept on the node)", p.EnvKeys)
	}
	// R-ACCT-10: both ends (the cancel and the sign-in) audited by the node.
	f.awaitAudit(apitypes.AuditProfileSigninFinished, 2)
	var audit apitypes.AuditList
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/audit", nil, &audit)
	events := map[string]int{}
	for _, e := range audit.Items {
		events[e.Event]++
		if b, _ := json.Marshal(e); strings.Contains(string(b), string(token)) || strings.Contains(string(b), "ok-pasted") {
			t.Fatalf("an audit row holds the token or the code: %s", b)
		}
	}
	if events[apitypes.AuditProfileSigninStarted] != 2 || events[apitypes.AuditProfileSigninCancelled] != 1 || events[apitypes.AuditProfileSigninCode] != 1 ||
		events[apitypes.AuditProfileUpdated] != 1 || events[apitypes.AuditProfileSigninFinished] != 2 {
		t.Fatalf("audit events %v, want 2 signin_started, 1 signin_cancelled, 1 signin_code_sent, 1 profile.updated (the token's name), 2 signin_finished", events)
	}
	if n, lines := f.env.AssertNoSecretInLogs(t); n == 0 || lines == 0 {
		t.Fatalf("checked %d secrets in %d lines", n, lines)
	}
}

// R-ACCT-2, R-ACCT-5: Codex's device code through the CLI: it prints the
// URL and the code, and once the device is approved (in a browser, here
// the peer's approval file) it says as whom; a tool without a sign-in to
// relay is 422 and the CLI says to use an API key.
func TestProfileSigninCodexAndUnsupported(t *testing.T) {
	f := setup(t, "yamux", integration.ProcOptions{})
	var p apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles",
		apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "codex", Name: "codex-si", Home: f.env.ProfileHome()}, &p)
	_, sc, done := f.cliStart("", "profile", "login", "codex-si")
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), "Waiting for the sign-in") {
			break
		}
	}
	if text := strings.Join(lines, "\n"); !strings.Contains(text, "https://auth.openai.com/codex/device") || !strings.Contains(text, "FAKE-1234") {
		t.Fatalf("olivares profile login printed:\n%s\nwant the verification URL and the code", text)
	}
	if err := os.WriteFile(filepath.Join(p.Home, ".codex", "fakecli-approve"), []byte("ok"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := done()
	if code != 0 || !strings.Contains(out, "profile codex-si is signed in as ada@example.com (plus)") {
		t.Fatalf("olivares profile login: exit %d\n%s", code, out)
	}
	// R-ACCT-9: the account as the node tells it, to a reader too.
	var acct apitypes.ProfileAccount
	f.viewer.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/profiles/"+p.Ref+"/account", nil, &acct)
	if acct.SignedIn == nil || !*acct.SignedIn || acct.Email != "ada@example.com" || acct.Plan != "plus" || acct.RateLimits == nil {
		t.Fatalf("account %+v, want signed in as ada@example.com on plus", acct)
	}
	if out, code := f.cli("profile", "show", "codex-si"); code != 0 || !strings.Contains(out, "signed in as ada@example.com (plus)") {
		t.Fatalf("olivares profile show: exit %d\n%s", code, out)
	}

	var g apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles",
		apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "gemini", Name: "gemini-si", Home: f.env.ProfileHome()}, &g)
	if got := f.admin.Call(http.MethodPost, signinPath(g.Ref), nil); got.Status != http.StatusUnprocessableEntity || got.ErrorCode() != "signin_unsupported" ||
		!strings.Contains(string(got.Body), "API key") {
		t.Fatalf("gemini sign-in: %d %s, want 422 signin_unsupported naming the API key way", got.Status, got.Body)
	}
	if out, code := f.cli("profile", "login", "gemini-si"); code == 0 || !strings.Contains(out, "API key") {
		t.Fatalf("olivares profile login gemini-si: exit %d\n%s", code, out)
	}
}

// awaitAudit polls GET /v1/audit until n rows of event are there, and
// returns them.
func (f *fixture) awaitAudit(event string, n int) []apitypes.AuditEntry {
	f.t.Helper()
	var rows []apitypes.AuditEntry
	integration.Await(f.t, wait, fmt.Sprintf("%d audit rows %s", n, event), func() bool {
		var audit apitypes.AuditList
		f.admin.Must(http.StatusOK, http.MethodGet, "/v1/audit", nil, &audit)
		rows = rows[:0]
		for _, e := range audit.Items {
			if e.Event == event {
				rows = append(rows, e)
			}
		}
		return len(rows) >= n
	})
	return rows
}

// R-ACCT-10: an attempt outlives its agent. The agent is killed while the
// attempt waits for the code: started again, it says the attempt ended
// because of the restart, and the coordinator audits that end (by the
// node, nobody having read the attempt since); an attempt that ends while
// nobody reads it is audited with the tool's outcome, and its end once.
func TestSigninOutlivesTheAgent(t *testing.T) {
	f := setup(t, "yamux", integration.ProcOptions{})
	var p apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles",
		apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "claude", Name: "claude-kept", Home: f.env.ProfileHome()}, &p)
	var a apitypes.SigninAttempt
	f.admin.Must(http.StatusAccepted, http.MethodPost, signinPath(p.Ref), nil, &a)
	f.awaitSignin(p.Ref, a.ID, "waiting_for_code", func(a apitypes.SigninAttempt) bool { return a.State == apitypes.SigninWaitingForCode })
	f.agent.Kill()
	f.agent.Start()
	f.agent.AwaitConnected(wait)
	rows := f.awaitAudit(apitypes.AuditProfileSigninFinished, 1)
	var detail map[string]string
	if err := json.Unmarshal(rows[0].Detail, &detail); err != nil || detail["signin_id"] != a.ID || detail["signin_state"] != apitypes.SigninFailed ||
		!strings.Contains(detail["message"], "the agent restarted") || rows[0].Actor.Kind != apitypes.ActorNode || rows[0].Target.ProfileRef != p.Ref {
		t.Fatalf("the finished row %+v (%s), want the node's, failed, the agent restarted", rows[0], rows[0].Detail)
	}
	var after apitypes.SigninAttempt
	f.admin.Must(http.StatusOK, http.MethodGet, signinPath(p.Ref, "/", a.ID), nil, &after)
	if after.State != apitypes.SigninFailed || !strings.Contains(after.Message, "start it again") {
		t.Fatalf("the attempt after the restart: %+v, want failed, saying to start again", after)
	}

	// An attempt that ends with nobody reading it: the code is refused.
	f.admin.Must(http.StatusAccepted, http.MethodPost, signinPath(p.Ref), nil, &a)
	f.awaitSignin(p.Ref, a.ID, "waiting_for_code", func(a apitypes.SigninAttempt) bool { return a.State == apitypes.SigninWaitingForCode })
	f.admin.Must(http.StatusOK, http.MethodPost, signinPath(p.Ref, "/", a.ID, "/code"), apitypes.SigninCode{Code: "wrong-code"}, &a)
	rows = f.awaitAudit(apitypes.AuditProfileSigninFinished, 2)
	detail = nil
	if err := json.Unmarshal(rows[1].Detail, &detail); err != nil || detail["signin_id"] != a.ID || detail["signin_state"] != apitypes.SigninFailed || detail["message"] == "" {
		t.Fatalf("the newest finished row %+v (%s), want the refused code's end with the tool's words", rows[1], rows[1].Detail)
	}
	f.agent.Kill() // and started again: the ends reported are not audited again
	f.agent.Start()
	f.agent.AwaitConnected(wait)
	f.admin.Must(http.StatusAccepted, http.MethodPost, signinPath(p.Ref), nil, &a)
	f.admin.Must(http.StatusOK, http.MethodDelete, signinPath(p.Ref, "/", a.ID), nil, &a)
	if rows = f.awaitAudit(apitypes.AuditProfileSigninFinished, 3); len(rows) != 3 {
		t.Fatalf("%d finished rows, want 3: one per end", len(rows))
	}
}

// R-ACCT-7: an API key is the profile's: a vault secret set with olivares
// profile update --api-key reaches every launch of the profile as the
// tool's key variable (tainting the run), unless the launch grants that
// variable itself; the account reads signed in by it, and the secret is
// not deleted while a profile uses it.
func TestProfileAPIKey(t *testing.T) {
	f := setup(t, "yamux", integration.ProcOptions{})
	key, other := "sk-profile-key-value", "sk-launch-key-value"
	var sec, sec2 apitypes.Secret
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/vault/secrets", apitypes.SecretCreate{Name: "openai-key", Value: &key}, &sec)
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/vault/secrets", apitypes.SecretCreate{Name: "other-key", Value: &other}, &sec2)
	p := f.profile("codex")
	unknown := "sec_0000000000000000"
	if got := f.admin.Call(http.MethodPatch, "/v1/m/sessions/profiles/"+p.Ref, apitypes.ProfileUpdate{APIKeyRef: &unknown}); got.Status != http.StatusNotFound {
		t.Fatalf("an unknown secret as the key: %d %s, want 404", got.Status, got.Body)
	}
	if out, code := f.cli("profile", "update", p.Name, "--api-key", "openai-key"); code != 0 || !strings.Contains(out, "vault secret "+sec.Ref+", as OPENAI_API_KEY") {
		t.Fatalf("olivares profile update --api-key: exit %d\n%s", code, out)
	}
	if out, code := f.cli("profile", "show", p.Name); code != 0 || !strings.Contains(out, "signed in") || !strings.Contains(out, "the API key in vault secret "+sec.Ref) {
		t.Fatalf("olivares profile show with a key: exit %d\n%s", code, out)
	}

	var r apitypes.Run
	f.operator.Must(http.StatusCreated, http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: f.ws.Ref}, &r)
	firstRun := r.RunRef
	if strings.Join(r.Taint, ",") != apitypes.GrantVaultSecret {
		t.Fatalf("taint of a launch of a profile with a key: %v, want vault_secret", r.Taint)
	}
	s := f.viewer.Attach(r.RunRef, "")
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("env OPENAI_API_KEY"), nil)
	s.UntilOutput("env OPENAI_API_KEY="+key, wait)
	// The launch's own grant of the variable wins.
	f.operator.Must(http.StatusCreated, http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: f.ws.Ref,
		Grants: []apitypes.Grant{{Kind: apitypes.GrantVaultSecret, SecretRef: sec2.Ref, Env: "OPENAI_API_KEY"}}}, &r)
	s = f.viewer.Attach(r.RunRef, "")
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("env OPENAI_API_KEY"), nil)
	s.UntilOutput("env OPENAI_API_KEY="+other, wait)

	// A resume gets the profile's key of that moment: it follows the
	// profile, not the launch.
	var r1 apitypes.Run
	f.post(f.operator, http.StatusOK, firstRun, "stop", nil, &r1)
	f.admin.Must(http.StatusOK, http.MethodPatch, "/v1/m/sessions/profiles/"+p.Ref, apitypes.ProfileUpdate{APIKeyRef: &sec2.Ref}, nil)
	f.post(f.operator, http.StatusOK, firstRun, "resume", nil, &r1)
	s = f.viewer.Attach(firstRun, "from="+strconv.FormatUint(r1.RingLast+1, 10))
	f.post(f.operator, http.StatusAccepted, firstRun, "input", integration.Text("env OPENAI_API_KEY"), nil)
	s.UntilOutput("env OPENAI_API_KEY="+other, wait)

	// A handoff's new run takes its profile's key too.
	src := f.launch(f.profile("claude"))
	s = f.viewer.Attach(src.RunRef, "")
	f.post(f.operator, http.StatusAccepted, src.RunRef, "input", integration.Message("hello"), nil)
	s.UntilOutput("pong: hello", wait)
	f.operator.AwaitRun(src.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle && r.ConversationID != "" })
	var ho apitypes.HandoffResponse
	f.operator.Must(http.StatusCreated, http.MethodPost, runURL(src.RunRef, "handoff"), apitypes.HandoffRequest{ProviderProfileRef: p.Ref}, &ho)
	if strings.Join(ho.Run.Taint, ",") != apitypes.GrantVaultSecret {
		t.Fatalf("taint of a handoff to a profile with a key: %v, want vault_secret", ho.Run.Taint)
	}
	s = f.viewer.Attach(ho.Run.RunRef, "")
	f.post(f.operator, http.StatusAccepted, ho.Run.RunRef, "input", integration.Text("env OPENAI_API_KEY"), nil)
	s.UntilOutput("env OPENAI_API_KEY="+other, wait)

	if got := f.admin.Call(http.MethodDelete, "/v1/m/sessions/vault/secrets/"+sec2.Ref, nil); got.Status != http.StatusConflict ||
		got.ErrorCode() != "secret_in_use" || !strings.Contains(string(got.Body), p.Name) {
		t.Fatalf("deleting the profile's key: %d %s, want 409 secret_in_use naming the profile", got.Status, got.Body)
	}
	f.admin.Must(http.StatusNoContent, http.MethodDelete, "/v1/m/sessions/vault/secrets/"+sec.Ref, nil, nil)
	if out, code := f.cli("profile", "update", p.Name, "--api-key="); code != 0 || strings.Contains(out, "api key") {
		t.Fatalf("olivares profile update --api-key=: exit %d\n%s", code, out)
	}
	f.admin.Must(http.StatusNoContent, http.MethodDelete, "/v1/m/sessions/vault/secrets/"+sec2.Ref, nil, nil)
	rows := f.awaitAudit(apitypes.AuditProfileUpdated, 3)
	if !strings.Contains(string(rows[0].Detail), `"api_key_ref":"`+sec.Ref+`"`) || !strings.Contains(string(rows[1].Detail), `"api_key_ref":"`+sec2.Ref+`"`) ||
		!strings.Contains(string(rows[2].Detail), `"api_key_ref":""`) {
		t.Fatalf("profile.updated rows %s, %s, %s: want the key's ref set, changed, then removed", rows[0].Detail, rows[1].Detail, rows[2].Detail)
	}
	f.env.NoteSecret(key)
	f.env.NoteSecret(other)
	if n, _ := f.env.AssertNoSecretInLogs(t); n == 0 {
		t.Fatal("no secret checked in the logs")
	}
}
