package console

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/integration/realcli"
)

// A Claude Code conversation started in a terminal is continued from the
// console (docs/rules/claude-supervision.md, issue 33): the real claude
// makes it in a user home the node lists; the Claude screen shows it with
// its title and directory and its transcript, and continue opens a
// supervised run whose first turn carries the conversation's history
// (R-CL-CONT-1); the row then names the run (R-CL-LEASE-1).
func TestClaudeConversationFromTheConsole(t *testing.T) {
	bin := realcli.BinDir(t, "claude")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	user, proj := filepath.Join(t.TempDir(), "user"), filepath.Join(t.TempDir(), "shop")
	for _, d := range []string{user, proj} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(bin, "claude"), "-p", "the word is heron", "--output-format", "json")
	cmd.Dir = proj
	cmd.Env = []string{"HOME=" + user, "PATH=" + bin + ":" + cliruntime.DefaultPath, "ANTHROPIC_BASE_URL=" + fake.URL(),
		"ANTHROPIC_API_KEY=test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_RETRIES=0"}
	out, err := cmd.Output()
	var done struct {
		SessionID string `json:"session_id"`
	}
	if err != nil || json.Unmarshal(out, &done) != nil || done.SessionID == "" {
		t.Fatalf("terminal claude: %v\n%s", err, out)
	}

	env := integration.NewEnv(t, integration.Options{Heartbeat: 2 * time.Second})
	a := env.StartAgentProcess(integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath, Config: fmt.Sprintf(
		"\n[claude_supervision]\nenabled = true\nuser_homes = [%q]\n[claude_supervision.env]\nANTHROPIC_BASE_URL = %q\nANTHROPIC_API_KEY = \"test\"\n"+
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\"\nCLAUDE_CODE_MAX_RETRIES = \"0\"\n", user, fake.URL())})
	a.AwaitConnected(wait)
	t.Cleanup(func() { stopAgent(t, a) })
	p, _, err := env.Coord.Store.PrincipalByCredential(context.Background(), auth.Hash(env.AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, env: env, agent: a, admin: env.Client(env.AdminToken), adminID: p.ID}
	tab := f.signIn()
	f.open(tab, "/claude")
	row := fmt.Sprintf(`#claude-hosts [data-host=%s] [data-session=%s]`, js(a.ID), js(done.SessionID))
	awaitText(tab, "the conversation's title", row+" .title", "the word is heron")
	awaitText(tab, "its directory", row+" .meta", "shop")

	tab.Click(row + " .act-transcript")
	awaitText(tab, "the transcript", "#transcript", "pong: the word is heron")
	tab.Exec(`document.querySelector('#transcript-dialog').close()`)

	tab.Click(row + " .act-continue")
	tab.Await("the supervised run", `location.pathname.startsWith('/runs/') && !!document.querySelector('#input') && !document.querySelector('#input').disabled`, wait)
	tab.Type("#input", "what was the word?\r")
	tab.Await("the reply", hasItem("assistant", "pong: what was the word?"), 2*wait)
	reqs := fake.ModelRequests()
	i := slices.IndexFunc(reqs, func(q fakemodel.Request) bool { return q.Prompt == "what was the word?" })
	if i < 0 || !slices.ContainsFunc(reqs[i].History, func(m fakemodel.Message) bool { return slices.Contains(m.Texts, "pong: the word is heron") }) {
		t.Fatalf("the continued turn did not carry the conversation's history")
	}
	f.open(tab, "/claude")
	awaitText(tab, "the row names its run", row+" .supervised", "run_")
}
