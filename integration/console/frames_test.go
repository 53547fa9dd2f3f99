package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/integration/realcli"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The frame fixtures: output events exactly as GET /runs/{ref}/attach
// sends them, one JSON object a line, recorded from runs of every driver
// (the fakecli peer, and the real Claude Code against the fake Messages
// API), with the normalized conversation each must give beside them
// (<name>.golden.json). The console's renderer is checked against them
// here; the CLI's attach renderer reads the same files.
const framesDir = "testdata/frames"

// recordings are the runs whose frames are recorded: a driver, the inputs
// sent one turn after another, whether the real CLI runs (against the fake
// model server, which answers with replies in order and then echoes), and
// the replies. Record one again with -run 'TestRecordFrames/NAME'.
var recordings = []struct {
	name, tool string
	inputs     []string
	real       bool
	replies    []fakemodel.Reply
}{
	{"claude-fakecli", "claude", []string{"hello", "stderr oops", "limit"}, false, nil},
	{"codex-fakecli", "codex", []string{"hello", "limit"}, false, nil},
	{"gemini-fakecli", "gemini", []string{"hello"}, false, nil},
	{"opencode-fakecli", "opencode", []string{"hello"}, false, nil},
	{"grok-fakecli", "grok", []string{"hello"}, false, nil},
	{"claude-real", "claude", []string{"hello", "again"}, true, nil},
	// Tool calls: a command that succeeds, one that fails, then the
	// model's answer after each result.
	{"claude-real-tools", "claude", []string{"list the files", "read a missing file"}, true, []fakemodel.Reply{
		fakemodel.Tool("Bash", `{"command":"printf 'one\\ntwo\\n'","description":"print two lines"}`), fakemodel.Text("Two lines: one and two."),
		fakemodel.Tool("Read", `{"file_path":"/nonexistent/olivares-fixture.txt"}`), fakemodel.Text("That file does not exist."),
	}},
	{"codex-real-tools", "codex", []string{"list the files", "run a failing command"}, true, []fakemodel.Reply{
		fakemodel.Tool("exec_command", `{"cmd":"printf 'one\\ntwo\\n'"}`), fakemodel.Text("Two lines: one and two."),
		fakemodel.Tool("exec_command", `{"cmd":"ls /nonexistent/olivares-fixture"}`), fakemodel.Text("It does not exist."),
	}},
}

// TestRecordFrames rewrites the fixtures (OLIVARES_RECORD_FRAMES=1).
func TestRecordFrames(t *testing.T) {
	if os.Getenv("OLIVARES_RECORD_FRAMES") != "1" {
		t.Skip("set OLIVARES_RECORD_FRAMES=1 to record testdata/frames again")
	}
	for _, rec := range recordings {
		t.Run(rec.name, func(t *testing.T) {
			o := integration.ProcOptions{}
			var env map[string]string
			var openai *fakemodel.OpenAI
			switch {
			case rec.real && rec.tool == "claude":
				bin := realcli.BinDir(t, rec.tool)
				o.Path = bin + ":" + cliruntime.DefaultPath
				fake := fakemodel.NewAnthropic()
				defer fake.Close()
				fake.Push(rec.replies...)
				env = map[string]string{"ANTHROPIC_BASE_URL": fake.URL(), "ANTHROPIC_API_KEY": "test",
					"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0"}
			case rec.real && rec.tool == "codex":
				bin := realcli.BinDir(t, rec.tool)
				o.Path = bin + ":" + cliruntime.DefaultPath
				openai = fakemodel.NewOpenAI()
				defer openai.Close()
				openai.Push(rec.replies...)
				env = map[string]string{"FAKE_OPENAI_KEY": "test"}
			case rec.tool == "gemini":
				env = map[string]string{"GEMINI_API_KEY": "test"}
			}
			f := setup(t, o)
			p := f.profile(rec.tool, env)
			if openai != nil {
				writeRecordingCodexConfig(t, p.Home, openai)
			}
			r := f.launch(f.admin, p, "")
			s := f.admin.Attach(r.RunRef, "from=0")
			field := "text"
			if rec.tool == "claude" {
				field = "message"
			}
			for _, in := range rec.inputs {
				f.admin.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
				f.admin.Must(http.StatusAccepted, http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/input", map[string]string{field: in}, nil)
				f.admin.AwaitRun(r.RunRef, wait, "the turn to end", func(x apitypes.Run) bool { return x.State != apitypes.StateRunning })
			}
			f.admin.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
			f.admin.Must(http.StatusOK, http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/stop", nil, nil)
			_, outs := s.Until(apitypes.SSEEnd, wait)
			var b bytes.Buffer
			for _, o := range outs {
				j, _ := json.Marshal(o)
				b.Write(append(j, '\n'))
			}
			if err := os.MkdirAll(framesDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(framesDir, rec.name+".jsonl"), b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// writeRecordingCodexConfig gives a real Codex profile's home a config.toml whose
// provider is the fake Responses API, with no retries and commands run
// without approval (real-clis.md §2.4).
func writeRecordingCodexConfig(t *testing.T, home string, fake *fakemodel.OpenAI) {
	t.Helper()
	config := `model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.fake]
name = "Fake local"
base_url = "` + fake.BaseURL() + `"
wire_api = "responses"
env_key = "FAKE_OPENAI_KEY"
request_max_retries = 0
stream_max_retries = 0
`
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestNormalizeGolden feeds each fixture to the console's normalizer in the
// browser and compares the items with the golden file
// (OLIVARES_UPDATE_GOLDEN=1 rewrites them; review the diff).
func TestNormalizeGolden(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(framesDir, "*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no frame fixtures in " + framesDir)
	}
	env := integration.NewEnv(t)
	tab := browser.New(t)
	tab.Navigate(env.CheckedURL() + "/signin")
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".jsonl")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			tool, _, _ := strings.Cut(name, "-")
			lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
			arr := "[" + strings.Join(lines, ",") + "]"
			expr := fmt.Sprintf(`import('/assets/normalize.js').then(m => {
  const n = m.normalizer(%q);
  const stderr = [];
  for (const o of %s) stderr.push(...n.feed(o).stderr);
  return JSON.stringify({items: n.items, stderr: stderr.join('')}, null, 1);
})`, tool, arr)
			got := browser.Eval[string](tab, expr) + "\n"
			golden := filepath.Join(framesDir, name+".golden.json")
			if os.Getenv("OLIVARES_UPDATE_GOLDEN") == "1" {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (OLIVARES_UPDATE_GOLDEN=1 writes it)", err)
			}
			if got != string(want) {
				t.Fatalf("normalized %s differs from %s:\ngot:\n%s", name, golden, got)
			}
		})
	}
}
