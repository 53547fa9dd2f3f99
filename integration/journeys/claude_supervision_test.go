package journeys

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Claude Code supervision end to end (docs/rules/claude-supervision.md,
// issue 33): a real olivares-agent whose [claude_supervision] lists a user
// home in which the real Claude Code made conversations against the fake
// Messages API, as a person does in a terminal.

const claudeCatalogPath = "/v1/m/sessions/catalog/claude/sessions"

// terminalClaude is claude as a person runs it in dir, in the user home,
// with the fake model.
func terminalClaude(bin, home, dir string, fake *fakemodel.Anthropic, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(bin, "claude"), args...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + home, "PATH=" + bin + ":" + cliruntime.DefaultPath, "ANTHROPIC_BASE_URL=" + fake.URL(),
		"ANTHROPIC_API_KEY=test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_RETRIES=0"}
	return cmd
}

func claudeRow(c apitypes.ClaudeCatalog, host, sid string) (apitypes.ClaudeSession, bool) {
	for _, h := range c.Hosts {
		if h.Host != host {
			continue
		}
		for _, r := range h.Rows {
			if r.SessionID == sid {
				return r, true
			}
		}
	}
	return apitypes.ClaudeSession{}, false
}

func TestRealClaudeSupervision(t *testing.T) {
	bin := realBin(t, "claude")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	user := filepath.Join(t.TempDir(), "user")
	proj := filepath.Join(t.TempDir(), "shop")
	for _, d := range []string{user, proj} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	proj, _ = filepath.EvalSymlinks(proj)

	// A finished conversation, made in a terminal with no Olivares around.
	out, err := terminalClaude(bin, user, proj, fake, "-p", "the word is heron", "--output-format", "json").Output()
	var done struct {
		SessionID string `json:"session_id"`
	}
	if err != nil || json.Unmarshal(out, &done) != nil || done.SessionID == "" {
		t.Fatalf("terminal claude: %v\n%s", err, out)
	}
	sid := done.SessionID

	cfg := fmt.Sprintf("\n[claude_supervision]\nenabled = %%v\nuser_homes = [%q]\n[claude_supervision.env]\nANTHROPIC_BASE_URL = %q\n"+
		"ANTHROPIC_API_KEY = \"test\"\nCLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\"\nCLAUDE_CODE_MAX_RETRIES = \"0\"\n", user, fake.URL())
	path := bin + ":" + cliruntime.DefaultPath
	f := setup(t, "quic", integration.ProcOptions{Path: path, Config: fmt.Sprintf(cfg, true)})
	// A node that did not opt in, over the same home: it lists nothing
	// (R-CL-PERM-1).
	off := f.env.StartAgentProcess(integration.ProcOptions{Transport: "quic", Path: path, Config: fmt.Sprintf(cfg, false)})
	off.AwaitConnected(wait)
	t.Cleanup(func() { stopAgent(t, off) })

	// R-CL-CAT-1, R-CL-PROJ-1: listed with its title and directory.
	var cat apitypes.ClaudeCatalog
	f.operator.Must(http.StatusOK, http.MethodGet, claudeCatalogPath, nil, &cat)
	if len(cat.Hosts) != 1 || cat.Hosts[0].Host != f.agent.ID {
		t.Fatalf("catalog hosts: %+v, want only %s (the opt-out node lists nothing, R-CL-PERM-1)", cat.Hosts, f.agent.ID)
	}
	row, ok := claudeRow(cat, f.agent.ID, sid)
	if !ok || row.Title == nil || *row.Title != "the word is heron" || row.Cwd != proj || row.SizeBytes == 0 ||
		row.RunningPID != 0 || row.LeaseHolder != "" || row.ProfileRef != "" {
		t.Fatalf("row of %s: %+v (title %v) in %s", sid, row, row.Title, mustJSON(cat))
	}
	f.operator.Must(http.StatusNotFound, http.MethodGet, claudeCatalogPath+"?host="+off.ID, nil, nil)
	f.operator.Must(http.StatusNotFound, http.MethodPost, claudeCatalogPath+"/"+off.ID+"/"+sid+"/continue", nil, nil)
	// R-CL-SRCH-1: titles and directories, any case.
	for q, want := range map[string]int{"HERON": 1, "shop": 1, "otter": 0} {
		f.operator.Must(http.StatusOK, http.MethodGet, claudeCatalogPath+"?search="+url.QueryEscape(q), nil, &cat)
		if n := len(cat.Hosts[0].Rows); n != want {
			t.Errorf("search %q: %d rows, want %d", q, n, want)
		}
	}

	// R-CL-TRN-1: the transcript through the run read side's reader.
	var page apitypes.MessagesPage
	f.operator.Must(http.StatusOK, http.MethodGet, claudeCatalogPath+"/"+f.agent.ID+"/"+sid+"/messages?role=all", nil, &page)
	if page.Total != 2 || page.Items[0].FirstLine != "the word is heron" || page.Items[1].FirstLine != "pong: the word is heron" {
		t.Fatalf("messages: %s", mustJSON(page))
	}

	// R-CL-RUN-1/2: a conversation a live claude runs is shown with its pid
	// and refused.
	live := terminalClaude(bin, user, proj, fake, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose")
	stdin, _ := live.StdinPipe()
	liveOut, _ := live.StdoutPipe()
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, `{"type":"user","message":{"role":"user","content":"a second conversation"}}`)
	var liveSID string
	integration.Await(t, wait, "the live conversation in the catalog", func() bool {
		f.operator.Must(http.StatusOK, http.MethodGet, claudeCatalogPath+"?search=second", nil, &cat)
		if rows := cat.Hosts[0].Rows; len(rows) == 1 && rows[0].RunningPID == live.Process.Pid {
			liveSID = rows[0].SessionID
			return true
		}
		return false
	})
	got := f.operator.Call(http.MethodPost, claudeCatalogPath+"/"+f.agent.ID+"/"+liveSID+"/continue", nil)
	if got.Status != http.StatusConflict || !strings.Contains(string(got.Body), "session_running") ||
		!strings.Contains(string(got.Body), fmt.Sprintf("pid %d", live.Process.Pid)) {
		t.Errorf("continue of a running conversation: %d %s, want 409 session_running with the pid", got.Status, got.Body)
	}
	stdin.Close()
	io.Copy(io.Discard, liveOut)
	live.Wait()

	// R-CL-CONT-1/2: continue resumes the exact conversation in its
	// directory, as a supervised run named after it.
	var r apitypes.Run
	f.operator.Must(http.StatusCreated, http.MethodPost, claudeCatalogPath+"/"+f.agent.ID+"/"+sid+"/continue", nil, &r)
	if r.ConversationID != sid || r.WorkspacePath != proj || r.Name != "claude: the word is heron" {
		t.Fatalf("continued run: %s", mustJSON(r))
	}
	// R-CL-LEASE-1: a second continue while the run holds it is 409.
	got = f.operator.Call(http.MethodPost, claudeCatalogPath+"/"+f.agent.ID+"/"+sid+"/continue", nil)
	if got.Status != http.StatusConflict || !strings.Contains(string(got.Body), "session_leased") || !strings.Contains(string(got.Body), r.RunRef) {
		t.Fatalf("second continue: %d %s, want 409 session_leased naming %s", got.Status, got.Body, r.RunRef)
	}
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("what was the word?"), nil)
	var req fakemodel.Request
	integration.Await(t, wait, "the model asked with the earlier history", func() bool {
		reqs := fake.ModelRequests()
		i := slices.IndexFunc(reqs, func(q fakemodel.Request) bool { return q.Prompt == "what was the word?" })
		if i < 0 {
			return false
		}
		req = reqs[i]
		return true
	})
	if !slices.ContainsFunc(req.History, func(m fakemodel.Message) bool {
		return m.Role == "assistant" && slices.Contains(m.Texts, "pong: the word is heron")
	}) {
		t.Fatalf("the resumed turn did not carry the conversation's history: %+v", req.History)
	}
	f.operator.AwaitRun(r.RunRef, wait, "the resumed conversation kept", func(got apitypes.Run) bool { return got.ConversationID == sid })
	f.operator.Must(http.StatusOK, http.MethodGet, claudeCatalogPath+"?search=heron", nil, &cat)
	if row, _ := claudeRow(cat, f.agent.ID, sid); row.LeaseHolder != r.RunRef {
		t.Errorf("lease holder %q, want %s", row.LeaseHolder, r.RunRef)
	}

	// R-CL-CLI-1: the CLI lists and refuses the same way.
	cliOut, code := f.cli("claude", "sessions", "--search", "heron")
	if code != 0 || !strings.Contains(cliOut, sid) || !strings.Contains(cliOut, "the word is heron") || !strings.Contains(cliOut, "run "+r.RunRef) {
		t.Errorf("olivares claude sessions: exit %d\n%s", code, cliOut)
	}
	if cliOut, code = f.cli("claude", "continue", sid); code != 5 || // R-CLI-2: 409 is exit 5, told in CLI terms
		!strings.Contains(cliOut, "olivares session attach "+r.RunRef) {
		t.Errorf("olivares claude continue of a leased conversation: exit %d\n%s", code, cliOut)
	}
	if cliOut, code = f.cli("claude", "show", sid, "--all", "--json"); code != 0 || !strings.Contains(cliOut, "what was the word?") {
		t.Errorf("olivares claude show: exit %d\n%s", code, cliOut)
	}
}
