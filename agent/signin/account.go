package signin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// accountTimeout bounds the account/read a Codex account check runs.
const accountTimeout = 15 * time.Second

// keyVars are the variables the tools read an API key or token from.
var keyVars = map[string][]string{
	"claude":   {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"},
	"codex":    {"OPENAI_API_KEY", "CODEX_API_KEY"},
	"gemini":   {"GEMINI_API_KEY", "GOOGLE_API_KEY"},
	"grok":     {"XAI_API_KEY", "GROK_API_KEY"},
	"opencode": {"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENCODE_API_KEY"},
}

// Account says whether p's account is signed in, and how (R-ACCT-9):
// Claude Code from its token variable, its key variable or the sign-in
// it keeps in its home (.credentials.json); Codex from its own account/read
// (as whom and on which plan); the others from their key variables only.
// It never says a key's value.
func (m *Manager) Account(p Profile) (apitypes.ProfileAccount, error) {
	a := apitypes.ProfileAccount{ProfileRef: p.Ref, Tool: p.Tool}
	yes, no := true, false
	env := map[string]string{}
	for _, kv := range p.Spec.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && v != "" {
			env[k] = v
		}
	}
	key := ""
	for _, k := range keyVars[p.Tool] {
		if env[k] != "" {
			key = k
			break
		}
	}
	switch {
	case p.Tool == "claude" && env[TokenEnv] != "":
		a.SignedIn, a.Method, a.Message = &yes, "token", "a long-lived token ("+TokenEnv+") from claude setup-token"
	case p.Tool == "claude" && fileExists(filepath.Join(p.Spec.Home, ".claude", ".credentials.json")):
		a.SignedIn, a.Method, a.Message = &yes, "oauth", "Claude Code's own sign-in in the profile home"
	case p.Tool == "codex":
		return m.codexAccount(p, a, key)
	case key != "":
		a.SignedIn, a.Method, a.Message = &yes, "api_key", "an API key in "+key
	case p.Tool == "claude":
		a.SignedIn, a.Message = &no, "not signed in: no token, no key and no sign-in in the profile home"
	default:
		a.Message = "this tool keeps no sign-in Olivares can see; give it an API key"
	}
	return a, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// codexAccount asks `codex app-server` account/read under the profile's
// home (real-clis.md §2.2).
func (m *Manager) codexAccount(p Profile, a apitypes.ProfileAccount, key string) (apitypes.ProfileAccount, error) {
	sp, err := m.command(p, "app-server")
	if err != nil {
		return a, err
	}
	if m.o.Proc == nil {
		return a, refusal.New(ErrUnsupported, "this node cannot run codex")
	}
	proc, err := p.runner(m.o.Proc).Start(context.Background(), sp)
	if err != nil {
		return a, err
	}
	defer proc.Stop(0)
	go drain(proc.Stderr())
	write := func(v any) {
		b, _ := json.Marshal(v)
		proc.Stdin().Write(append(b, '\n'))
	}
	write(map[string]any{"id": 0, "method": "initialize", "params": map[string]any{
		"clientInfo": map[string]any{"name": "olivares", "title": nil, "version": "account"}, "capabilities": nil}})
	write(map[string]any{"method": "initialized"})
	write(map[string]any{"id": 1, "method": "account/read", "params": map[string]any{}})
	type answer struct {
		res json.RawMessage
		msg string
	}
	got := make(chan answer, 1)
	go func() {
		dec := json.NewDecoder(proc.Stdout())
		for {
			var msg rpcMessage
			if dec.Decode(&msg) != nil {
				got <- answer{msg: "codex app-server ended before it answered account/read"}
				return
			}
			if msg.ID != nil && *msg.ID == 1 {
				if msg.Error != nil {
					got <- answer{msg: "Codex said: " + msg.Error.Message}
				} else {
					got <- answer{res: msg.Result}
				}
				return
			}
		}
	}()
	var ans answer
	select {
	case ans = <-got:
	case <-time.After(accountTimeout):
		ans.msg = "codex app-server did not answer account/read in time"
	}
	if ans.res == nil {
		a.Message = ans.msg
		return a, nil
	}
	var r struct {
		Account *struct {
			Type     string  `json:"type"`
			Email    *string `json:"email"`
			PlanType string  `json:"planType"`
		} `json:"account"`
		RequiresOpenaiAuth bool `json:"requiresOpenaiAuth"`
	}
	_ = json.Unmarshal(ans.res, &r)
	yes, no := true, false
	switch {
	case r.Account != nil && r.Account.Type == "chatgpt":
		a.SignedIn, a.Method, a.Plan, a.Message = &yes, "oauth", r.Account.PlanType, "Codex's own sign-in (CODEX_HOME/auth.json)"
		if r.Account.Email != nil {
			a.Email = *r.Account.Email
		}
	case r.Account != nil:
		a.SignedIn, a.Method, a.Message = &yes, "api_key", "Codex signed in with an API key ("+r.Account.Type+")"
	case key != "":
		a.SignedIn, a.Method, a.Message = &yes, "api_key", "an API key in "+key
	case !r.RequiresOpenaiAuth:
		a.SignedIn, a.Method, a.Message = &yes, "provider", "its configured model provider needs no OpenAI sign-in"
	default:
		a.SignedIn, a.Message = &no, "not signed in: Codex has no account in the profile home"
	}
	return a, nil
}
