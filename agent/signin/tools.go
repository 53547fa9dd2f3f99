package signin

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// maxOutput bounds what an attempt keeps of a tool's terminal output.
const maxOutput = 1 << 20

// start runs sp on rn and keeps the process for kill.
func (a *attempt) start(rn sessions.Runner, sp sessions.Spec) (sessions.Process, error) {
	if rn == nil {
		return nil, refusal.New(ErrUnsupported, "this node cannot run the sign-in: it has no %s runner", "terminal")
	}
	proc, err := rn.Start(context.Background(), sp)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.proc = proc
	done := a.view.Done()
	a.mu.Unlock()
	if done {
		proc.Stop(0)
	}
	go drain(proc.Stderr())
	return proc, nil
}

func drain(r io.Reader) { io.Copy(io.Discard, r) }

// claude runs `claude setup-token` on a terminal (it prints nothing
// without one, real-clis.md §1.12): its sign-in URL is relayed, the pasted
// code typed into it, and the token it then prints kept in the profile's
// environment on the node (R-ACCT-6).
func (a *attempt) claude(p Profile) error {
	sp, err := a.m.command(p, "setup-token")
	if err != nil {
		return err
	}
	// Ink draws its prompt only on a terminal it knows.
	sp.Env = append(sp.Env, "TERM=xterm-256color")
	proc, err := a.start(p.runner(a.m.o.PTY), sp)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.code = func(code string) error {
		_, err := io.WriteString(proc.Stdin(), code+"\r")
		return err
	}
	a.mu.Unlock()
	a.m.wg.Add(1)
	go func() {
		defer a.m.wg.Done()
		a.readClaude(p, proc)
	}()
	return nil
}

func (a *attempt) readClaude(p Profile, proc sessions.Process) {
	var raw []byte
	buf := make([]byte, 32<<10)
	url := ""
	for {
		n, err := proc.Stdout().Read(buf)
		if len(raw)+n <= maxOutput {
			raw = append(raw, buf[:n]...)
		}
		if url == "" {
			for _, m := range osc8.FindAllSubmatch(raw, -1) {
				if strings.Contains(string(m[1]), "oauth/authorize") {
					url = string(m[1])
					break
				}
			}
			if url != "" && strings.Contains(plain(raw), "Paste code") {
				a.set(apitypes.SigninWaitingForCode, url, "", "open the URL, sign in, and paste the code the page shows")
			} else {
				url = ""
			}
		}
		if tok := token.Find(raw); tok != nil {
			prof, kerr := a.m.o.KeepToken(p.Ref, p.Tenant, TokenEnv, string(tok))
			if kerr != nil {
				a.finish(apitypes.SigninFailed, "signed in, but the token could not be kept: "+kerr.Error(), nil)
			} else {
				a.finish(apitypes.SigninSignedIn, "signed in: Claude Code's long-lived token is kept in the profile's environment on the node as "+TokenEnv,
					func(v *apitypes.SigninAttempt) { v.Profile = &prof; v.URL = "" })
			}
			proc.Stop(0)
			return
		}
		if msg := lineWith(plain(raw), "OAuth error"); msg != "" {
			a.finish(apitypes.SigninFailed, "Claude Code said: "+msg, nil)
			proc.Stop(0)
			return
		}
		if err != nil {
			exit := proc.Wait()
			a.finish(apitypes.SigninFailed, fmt.Sprintf("claude setup-token ended (%s) before it printed a token", exitText(exit)), nil)
			return
		}
	}
}

// lineWith is the text from the first occurrence of mark to its line's end.
func lineWith(s, mark string) string {
	i := strings.Index(s, mark)
	if i < 0 {
		return ""
	}
	s = s[i:]
	if j := strings.IndexByte(s, '\n'); j >= 0 {
		s = s[:j]
	}
	return strings.Join(strings.Fields(s), " ")
}

func exitText(e sessions.Exit) string {
	switch {
	case e.Code != nil:
		return fmt.Sprintf("exit code %d", *e.Code)
	case e.Signal != "":
		return "signal " + e.Signal
	}
	return "exit not observed"
}

// codex runs `codex app-server` and its device-code sign-in
// (account/login/start chatgptDeviceCode, real-clis.md §2.2): the
// verification URL and the one-time code are relayed, the person enters
// the code in a browser anywhere, and Codex writes its own auth.json under
// CODEX_HOME when account/login/completed says so; account/read then says
// as whom.
func (a *attempt) codex(p Profile) error {
	sp, err := a.m.command(p, "app-server")
	if err != nil {
		return err
	}
	proc, err := a.start(p.runner(a.m.o.Proc), sp)
	if err != nil {
		return err
	}
	send := func(v any) {
		b, _ := json.Marshal(v)
		proc.Stdin().Write(append(b, '\n'))
	}
	send(map[string]any{"id": 0, "method": "initialize", "params": map[string]any{
		"clientInfo": map[string]any{"name": "olivares", "title": nil, "version": "signin"}, "capabilities": nil}})
	a.m.wg.Add(1)
	go func() {
		defer a.m.wg.Done()
		defer proc.Stop(0)
		a.readCodex(proc, send)
	}()
	return nil
}

type rpcMessage struct {
	ID     *int            `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func (a *attempt) readCodex(proc sessions.Process, send func(any)) {
	sc := bufio.NewScanner(proc.Stdout())
	sc.Buffer(make([]byte, 64<<10), maxOutput)
	for sc.Scan() {
		var m rpcMessage
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if m.Error != nil && m.ID != nil {
			a.finish(apitypes.SigninFailed, "Codex said: "+m.Error.Message, nil)
			return
		}
		switch {
		case m.ID != nil && *m.ID == 0:
			send(map[string]any{"method": "initialized"})
			send(map[string]any{"id": 1, "method": "account/login/start", "params": map[string]any{"type": "chatgptDeviceCode"}})
		case m.ID != nil && *m.ID == 1:
			var r struct {
				VerificationURL string `json:"verificationUrl"`
				UserCode        string `json:"userCode"`
			}
			_ = json.Unmarshal(m.Result, &r)
			if r.VerificationURL == "" || r.UserCode == "" {
				a.finish(apitypes.SigninFailed, "Codex answered the sign-in without a URL and code", nil)
				return
			}
			a.set(apitypes.SigninWaitingForBrowser, r.VerificationURL, r.UserCode, "open the URL in any browser, sign in, and enter the code; this page follows")
		case m.Method == "account/login/completed":
			var r struct {
				Success bool    `json:"success"`
				Error   *string `json:"error"`
			}
			_ = json.Unmarshal(m.Params, &r)
			if !r.Success {
				msg := "the sign-in did not complete"
				if r.Error != nil && *r.Error != "" {
					msg = "Codex said: " + *r.Error
				}
				a.finish(apitypes.SigninFailed, msg, nil)
				return
			}
			send(map[string]any{"id": 2, "method": "account/read", "params": map[string]any{}})
		case m.ID != nil && *m.ID == 2:
			var r struct {
				Account *struct {
					Email    *string `json:"email"`
					PlanType string  `json:"planType"`
				} `json:"account"`
			}
			_ = json.Unmarshal(m.Result, &r)
			var acct *apitypes.SigninAccount
			if r.Account != nil {
				acct = &apitypes.SigninAccount{Plan: r.Account.PlanType}
				if r.Account.Email != nil {
					acct.Email = *r.Account.Email
				}
			}
			a.finish(apitypes.SigninSignedIn, "signed in: Codex keeps its sign-in in the profile home (CODEX_HOME/auth.json)",
				func(v *apitypes.SigninAttempt) { v.Account = acct; v.URL, v.UserCode = "", "" })
			return
		}
	}
	exit := proc.Wait()
	a.finish(apitypes.SigninFailed, fmt.Sprintf("codex app-server ended (%s) before the sign-in completed", exitText(exit)), nil)
}
