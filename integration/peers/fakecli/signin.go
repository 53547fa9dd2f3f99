//go:build linux

package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The sign-ins the real tools run, as far as docs/real-clis.md §1.12 and
// §2.2 record them, plus the end no real sign-in server lets a test reach
// here: a good code (Claude Code) or a device approved in a browser (Codex).

// setupTokenURL is the URL claude setup-token printed on 2.1.328 (its
// challenge and state change at every start).
const setupTokenURL = "https://claude.com/cai/oauth/authorize?code=true&client_id=9d1c250a-e61b-44d9-88ed-5944d1962f5e&response_type=code&redirect_uri=https%3A%2F%2Fplatform.claude.com%2Foauth%2Fcode%2Fcallback&scope=user%3Ainference&code_challenge=w3aw2Gmr4aa9jsCorBvMk-dbR_XmdpTgwxIG6_Kw-Wo&code_challenge_method=S256&state=fakecli"

// setupToken is `claude setup-token` on a terminal: the welcome, the URL as
// an OSC 8 hyperlink wrapped over lines, the paste prompt with Ink's column
// moves for spaces, then a code read up to Enter. A code that starts with
// "ok-" is taken: the token is printed as Claude Code prints it and also
// recorded in $HOME/.fakecli/setup-token so that a test can check where it
// went. Any other code is Claude Code's OAuth error, then "Press Enter to
// retry", and the peer waits until it is killed.
func setupToken(p *peer) int {
	p.logCall(map[string]any{"argv": []string{"setup-token"}})
	w := os.Stdout
	fmt.Fprint(w, "\x1b7\x1b8\x1b[2GWelcome\x1b[10Gto\x1b[13GClaude\x1b[20GCode\x1b[25Gv2.1.328\r\r\n\r\r\n")
	fmt.Fprint(w, "\x1b[2GThis\x1b[7Gwill\x1b[12Gguide\x1b[18Gyou\x1b[22Gthrough\x1b[30Glong-lived\x1b[41G(1-year)\x1b[50Gauth\x1b[55Gtoken\x1b[61Gsetup\r\r\n\r\r\n")
	fmt.Fprint(w, "\x1b]11;?\x07\x1b[2GBrowser\x1b[10Gdidn't\x1b[17Gopen?\x1b[23GUse\x1b[27Gthe\x1b[31GURL\x1b[35Gbelow\x1b[41Gto\x1b[44Gsign\x1b[49Gin\r\r\n\r\r\n")
	for i := 0; i < len(setupTokenURL); i += 77 {
		end := min(i+77, len(setupTokenURL))
		fmt.Fprintf(w, "\x1b]8;id=fake;%s\x07%s\x1b]8;;\x07\r\r\n", setupTokenURL, setupTokenURL[i:end])
	}
	fmt.Fprint(w, "\r\r\n\x1b[2GPaste\x1b[8Gcode\x1b[13Ghere\x1b[18Gif\x1b[21Gprompted\r\r\n")
	fmt.Fprint(w, "\x1b[2G\x1b[97m╭──────╮\r\r\n\x1b[2G│ │\r\r\n\x1b[2G╰──────╯\x1b[39m\r\r\n")
	code := readTerminalLine(os.Stdin)
	if !strings.HasPrefix(code, "ok-") {
		fmt.Fprint(w, "\x1b[4G\x1b[95m✘\x1b[4GOAuth error: Invalid code. Please make sure the full code was copied \x1b[39m\r\r\n\r\r\n\x1b[2GPress\x1b[8G\x1b[1mEnter\x1b[22m to retry\r\r\n")
		io.Copy(io.Discard, os.Stdin)
		return 1
	}
	b := make([]byte, 24)
	rand.Read(b)
	token := "sk-ant-oat01-" + hex.EncodeToString(b)
	dir := filepath.Join(os.Getenv("HOME"), ".fakecli")
	_ = os.MkdirAll(dir, 0o700)
	_ = os.WriteFile(filepath.Join(dir, "setup-token"), []byte(token), 0o600)
	fmt.Fprint(w, "\r\r\n\x1b[2G\x1b[32m✓\x1b[39m\x1b[4GLong-lived\x1b[15Gauthentication\x1b[30Gtoken\x1b[36Gcreated\r\r\n\r\r\n")
	fmt.Fprint(w, "\x1b[2GYour\x1b[7GOAuth\x1b[13Gtoken\x1b[19G(valid\x1b[26Gfor\x1b[30G1y):\r\r\n\r\r\n")
	fmt.Fprintf(w, "\x1b[2G\x1b[33m%s\x1b[39m\r\r\n\r\r\n", token)
	fmt.Fprint(w, "\x1b[2G\x1b[2mStore this token securely. You won't be able to see it again.\x1b[22m\r\r\n\r\r\n")
	fmt.Fprint(w, "\x1b[2G\x1b[2mUse this token by setting: export CLAUDE_CODE_OAUTH_TOKEN=<token>\x1b[22m\r\r\n")
	return 0
}

// readTerminalLine reads up to Enter (CR on a raw terminal, LF otherwise).
func readTerminalLine(r io.Reader) string {
	var line []byte
	b := make([]byte, 1)
	for {
		n, err := r.Read(b)
		if n == 1 {
			if b[0] == '\r' || b[0] == '\n' {
				return string(line)
			}
			line = append(line, b[0])
		}
		if err != nil {
			return string(line)
		}
	}
}

// account answers account/read and account/login/start (§2.2). Offline the
// real 0.169 fails the device-code start ("failed to request device code:
// error sending request for url (https://auth.openai.com/…)"); the peer
// answers it as the service would, and completes the sign-in when the test
// approves the device by writing $CODEX_HOME/fakecli-approve ("deny" in it
// fails the sign-in instead), as a person finishing in a browser would.
func (c *codex) account(id json.RawMessage, method string, params json.RawMessage) {
	auth := filepath.Join(c.home, "auth.json")
	switch method {
	case "account/read":
		if _, err := os.Stat(auth); err != nil {
			c.reply(id, map[string]any{"account": nil, "userId": nil, "requiresOpenaiAuth": true, "workspaceRouting": nil})
			return
		}
		c.reply(id, map[string]any{"account": map[string]any{"type": "chatgpt", "email": "ada@example.com", "planType": "plus", "workspaceName": nil},
			"userId": "user-fakecli", "requiresOpenaiAuth": true, "workspaceRouting": nil})
	case "account/login/start":
		var p struct{ Type string }
		_ = json.Unmarshal(params, &p)
		if p.Type != "chatgptDeviceCode" {
			c.fail(id, "fakecli: only the chatgptDeviceCode sign-in is imitated")
			return
		}
		login := "login-fakecli"
		c.reply(id, map[string]any{"type": "chatgptDeviceCode", "loginId": login, "userCode": "FAKE-1234", "verificationUrl": "https://auth.openai.com/codex/device"})
		go func() {
			approve := filepath.Join(c.home, "fakecli-approve")
			for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				b, err := os.ReadFile(approve)
				if err != nil {
					continue
				}
				if strings.TrimSpace(string(b)) == "deny" {
					c.notify("account/login/completed", map[string]any{"loginId": login, "success": false, "error": "device authorization was denied"})
					return
				}
				_ = os.WriteFile(auth, []byte(`{"fakecli":true}`), 0o600)
				c.notify("account/login/completed", map[string]any{"loginId": login, "success": true, "error": nil})
				return
			}
		}()
	}
}
